"""Shape rules of the wider op set (the executor's ``kernels_misc`` and ``kernels_image``):
element-wise functions, normalisations, back reductions, TopK, the fp16 FC, ``ConvRelu``,
nearest upsampling, the YOLOv3 head and the style-transfer pre/deprocessing ops."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.analysis.shape_rules_math import fc_rule
from graphtools.analysis.shape_rules_nn import conv_type, need
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    Values,
    count,
    dim_product,
    explained,
    result_dtype,
    same_dim,
    same_shape,
    shape_rule,
    with_shape,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)


def _float(op: Op, t: TensorType) -> TensorType:
    if t.dtype is not None and not np.issubdtype(t.dtype, np.floating):
        raise ValueError(f"{op.type} expects a float tensor, got {t}")
    return t


@shape_rule("Negative", "Sign")
def _ufunc(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    fn = np.negative if op.type == "Negative" else np.sign
    return [TensorType(result_dtype(fn, inputs[0].dtype), inputs[0].shape)]


@shape_rule("Log1p", "Swish", "Gelu", "Logit", "ReplaceNaN", "BatchBoxCox")
def _float_same(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [_float(op, inputs[0])]


@shape_rule("HalfToFloat")
def _half_to_float(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.dtype is not None and x.dtype != np.float16:
        raise ValueError(f"HalfToFloat needs a float16 input, got {x}")
    return [TensorType(_F32, x.shape)]


@shape_rule("Mod")
def _mod(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.dtype is not None and x.dtype not in (np.int32, np.int64):
        raise ValueError(f"Mod needs an int32 or int64 input, got {x}")
    if op.arg("divisor") is None or int(op.arg("divisor")) == 0:
        raise ValueError("Mod needs a non-zero 'divisor' argument")
    return [x]


@shape_rule("Mean")
def _mean(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    shape = None
    for t in inputs:
        _float(op, t)
        if t.shape is not None:
            shape = t.shape if shape is None else same_shape(shape, t.shape, "needs equal shapes")
    return [TensorType(inputs[0].dtype, shape)]


@shape_rule("ElementwiseLinear")
def _elementwise_linear(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 3)
    x = _float(op, inputs[0])
    if x.shape is not None:
        axis = canonical_axis(int(op.arg("axis", 1)), len(x.shape))
        d = dim_product(x.shape[axis:])
        for name, t in zip(("w", "b"), inputs[1:3], strict=True):
            same_dim(d, count(t.shape), f"{name} {t} against the {d} columns of {x}")
    return [x]


@shape_rule("FbFCPacked")
def _fb_fc_packed(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """FC's shapes; the output is float32 (the weight is fp16-rounded, X must be float)."""
    need(op, inputs, 2)
    _float(op, inputs[0])
    return [TensorType(_F32, fc_rule(op, inputs)[0].shape)]


@shape_rule("ConvRelu")
def _conv_relu(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [conv_type(op, inputs, transposed=False)]


def _rows(op: Op, x: TensorType, what: str) -> tuple[tuple[Dim, ...], Dim] | None:
    """The kept dims before ``axis`` and the normalised size from it, for an input of rank
    >= 2 (``None`` when the rank is unknown)."""
    if x.shape is None:
        return None
    if len(x.shape) < 2:
        raise ValueError(f"{what} needs an input of rank >= 2, got {x}")
    axis = canonical_axis(int(op.arg("axis", 1)), len(x.shape))
    return x.shape[:axis], dim_product(x.shape[axis:])


@shape_rule("LayerNorm")
def _layer_norm(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = _float(op, inputs[0])
    rows = _rows(op, x, "LayerNorm")
    if op.arg("elementwise_affine", 0):
        if len(inputs) != 3:
            raise ValueError("LayerNorm with elementwise_affine=1 needs gamma and beta inputs")
        for t in inputs[1:3]:
            same_dim(None if rows is None else rows[1], count(t.shape), f"gamma/beta {t}")
    moments = None if rows is None else (*rows[0], 1)
    return [x, with_shape(x, moments), with_shape(x, moments)]


@shape_rule("RMSNorm")
def _rms_norm(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 3)
    x = _float(op, inputs[0])
    rows = _rows(op, x, "RMSNorm")
    for t in inputs[1:3]:
        same_dim(None if rows is None else rows[1], count(t.shape), f"gamma/beta {t}")
    return [x, with_shape(x, None if rows is None else rows[0])]


@shape_rule("LpNorm")
def _lp_norm(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    _float(op, inputs[0])
    if int(op.arg("p", 2)) not in (1, 2):
        raise ValueError(f"LpNorm supports p=1 or p=2, got {op.arg('p')}")
    return [TensorType(_F32, (1,))]


@shape_rule("ReduceBackSum", "ReduceBackMean")
def _reduce_back(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = _float(op, inputs[0])
    if x.shape is None:
        return [x]
    reduced = int(op.arg("num_reduce_dim", 1))
    if not 0 <= reduced <= len(x.shape):
        raise ValueError(f"num_reduce_dim {reduced} does not fit {x}")
    kept = x.shape[: len(x.shape) - reduced]
    if len(inputs) > 1:
        same_dim(dim_product(kept), count(inputs[1].shape), f"lengths {inputs[1]} for {x}")
    return [with_shape(x, kept)]


@shape_rule("TopK", values=True)
def _top_k(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    """Values and int64 indices with ``k`` along ``axis``; flat int64 indices."""
    need(op, inputs, 1)
    x = inputs[0]
    if x.shape is None:
        return [x, TensorType(_I64, None), TensorType(_I64, (None,))]
    if not x.shape:
        raise ValueError("TopK needs an input of rank >= 1")
    axis = canonical_axis(int(op.arg("axis", -1)), len(x.shape))
    k: Dim = int(op.arg("k", -1))
    if len(inputs) > 1:
        given = values[1]
        k = given[0] if given else None
    size = x.shape[axis]
    if isinstance(k, int) and (k < 1 or (isinstance(size, int) and k > size)):
        raise ValueError(f"k={k} must be in [1, {size}] for axis {axis}")
    shape = (*x.shape[:axis], k, *x.shape[axis + 1 :])
    outs = [with_shape(x, shape), TensorType(_I64, shape), TensorType(_I64, (dim_product(shape),))]
    if k is None:
        return [explained(t, "data-dependent: k read from an input") for t in outs]
    return outs


@shape_rule("IsEmpty")
def _is_empty(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [TensorType(np.dtype(np.bool_), ())]


@shape_rule("Upsample")
def _upsample(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    scale = int(op.arg("scale", 2))
    if scale < 1:
        raise ValueError(f"Upsample scale must be >= 1, got {scale}")
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ValueError(f"Upsample needs a 4-D NCHW input, got {x}")
    n, c, h, w = x.shape
    return [with_shape(x, (n, c, _times(h, scale), _times(w, scale)))]


def _times(size: Dim, factor: int) -> Dim:
    if isinstance(size, int):
        return size * factor
    return size if factor == 1 else None


@shape_rule("Int8ResizeNearest")
def _int8_resize_nearest(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """NHWC, the output sizes ``int(size * float32(scale))``."""
    need(op, inputs, 1)
    x = inputs[0]
    if x.dtype is not None and not x.quantized:
        raise ValueError(f"Int8ResizeNearest input must be an Int8 blob, got {x}")
    scales = [float(np.float32(op.arg(name, 1.0))) for name in ("height_scale", "width_scale")]
    if min(scales) <= 0:
        raise ValueError(f"scales must be positive, got {scales}")
    if x.shape is None:
        return [x]
    if len(x.shape) != 4:
        raise ValueError(f"Int8ResizeNearest needs a 4-D NHWC input, got {x}")
    n, h, w, c = x.shape
    sizes = [
        int(s * np.float32(f)) if isinstance(s, int) else (s if f == 1.0 else None)
        for s, f in zip((h, w), scales, strict=True)
    ]
    return [with_shape(x, (n, sizes[0], sizes[1], c))]


@shape_rule("Yolo")
def _yolo(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Y like the input; per masked anchor A and map H x W: tx (1, A, H, W), ty/tw/th/det_conf
    flat (A*H*W,), class_prob (A, K, H*W), the scratch blob (A,); float32, batch 1 only."""
    if op.arg("is_train", 0):
        raise UnsupportedOpError("Yolo with is_train=1 (the training loss) is not supported")
    if len(op.outputs) != 8:
        raise ValueError(f"Yolo has 8 outputs, the op names {len(op.outputs)}")
    need(op, inputs, 1)
    x = inputs[0]
    anchors = len(op.arg("anchor_mask", ()))
    classes = int(op.arg("numclass", 80))
    if x.shape is not None and len(x.shape) != 4:
        raise ValueError(f"Yolo needs a 4-D NCHW input, got {x}")
    n, c, h, w = x.shape if x.shape is not None else (None,) * 4
    if isinstance(n, int) and n != 1:
        raise UnsupportedOpError(f"Yolo on a batch of {n}: only batch 1 is defined")
    if isinstance(c, int) and c < anchors * (5 + classes):
        raise ValueError(f"Yolo input has {c} channels, {anchors} anchors need more")
    plane = dim_product((h, w))
    flat = dim_product((anchors, h, w))
    return [
        TensorType(_F32, x.shape),
        TensorType(_F32, (1, anchors, h, w)),
        *(TensorType(_F32, (flat,)) for _ in range(4)),
        TensorType(_F32, (anchors, classes, plane)),
        TensorType(_F32, (anchors,)),
    ]


@shape_rule("PackedInt8BGRANHWCToNCHWCStylizerPreprocess")
def _stylizer_preprocess(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """uint8 (N, H, W, 4) BGRA -> float32 (N, 3, H, W)."""
    need(op, inputs, 2)
    x = inputs[0]
    if x.shape is not None and (len(x.shape) != 4 or x.shape[3] not in (4, None)):
        raise ValueError(f"input must be (N, H, W, 4) BGRA, got {x}")
    if x.dtype is not None and x.dtype != np.uint8:
        raise ValueError(f"input must be uint8, got {x}")
    shape = None if x.shape is None else (x.shape[0], 3, x.shape[1], x.shape[2])
    return [TensorType(_F32, shape)]


@shape_rule("BRGNCHWCToPackedInt8BGRAStylizerDeprocess")
def _stylizer_deprocess(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """float (N, 3, H, W) -> uint8 (N, H, W, 4)."""
    need(op, inputs, 2)
    x = inputs[0]
    if x.shape is not None:
        if len(x.shape) != 4:
            raise ValueError(f"input must be (N, 3, H, W), got {x}")
        same_dim(x.shape[1], 3, f"the channels of {x}")
    shape = None if x.shape is None else (x.shape[0], x.shape[2], x.shape[3], 4)
    return [TensorType(np.dtype(np.uint8), shape)]


@shape_rule("Bucketize")
def _bucketize(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """The int32 bucket of each value."""
    need(op, inputs, 1)
    boundaries = [float(b) for b in op.arg("boundaries", ())]
    if any(b >= c for b, c in pairwise(boundaries)):
        raise ValueError(f"boundaries must increase strictly, got {boundaries}")
    return [TensorType(np.dtype(np.int32), inputs[0].shape)]


@shape_rule("ScatterAssign")
def _scatter_assign(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """A copy of DATA; SLICES must be (len(INDICES), *DATA.shape[1:]) of DATA's dtype."""
    need(op, inputs, 3)
    data, indices, slices = inputs[:3]
    if data.shape is not None and not data.shape:
        raise ValueError("DATA must have rank >= 1")
    if data.dtype is not None and slices.dtype is not None and data.dtype != slices.dtype:
        raise ValueError(f"SLICES {slices} differs in dtype from DATA {data}")
    if data.shape is not None and slices.shape is not None:
        expected = (count(indices.shape), *data.shape[1:])
        same_shape(slices.shape, expected, "SLICES against (len(INDICES), *DATA.shape[1:])")
    return [data]

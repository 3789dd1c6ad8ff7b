"""Exporters for Caffe2's normalisations, row reductions and selections.

``TopK`` is ONNX's ``TopK`` (ties by the lower index on both sides; when its third output, the
indices into the flattened input, is read, a function adding the row offsets of the last
axis); ``FbFCPacked`` is ``FC`` over its weight rounded to float16 (two ``Cast``s). The others
are ``caffe2``-domain functions computing in the input's float type what the executor computes
(in float64 for some):

* ``LayerNorm``: over the dims from ``axis`` (the input as a matrix, ``Flatten`` at ``axis``),
  two passes (mean, then the mean of squared deviations), ``std = sqrt(var + epsilon)``; mean
  and std shaped ``X.shape[:axis] + [1]``; gamma and beta apply only with
  ``elementwise_affine=1``, as in Caffe2 (``LayerNorm__plain``, of X alone, for an op without
  them or with ``elementwise_affine=0``, which ignores them whatever their shape). The
  composition is used at every opset: ONNX's ``LayerNormalization``
  (17) returns the inverse std and onnxruntime computes its variance in one pass;
* ``RMSNorm``: ``X / sqrt(mean(X^2) + eps) * gamma + beta``, and the reciprocal RMS;
* ``LpNorm``: ``sum |x|`` (p=1) or ``sum x^2`` (p=2), over the size with ``average``;
* ``ElementwiseLinear``: ``X * w + b`` per column of the matrix at ``axis``;
* ``ReduceBackSum``/``ReduceBackMean``: over the last ``num_reduce_dim`` dims (axes computed
  from the rank at run time);
* ``DotProduct``: the row-wise dot product;
* ``ChannelShuffle``: ``Reshape`` to ``(N, group, C/group, H*W)``, swap, ``Reshape`` back
  (NHWC between Transposes).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from onnx import TensorProto

from graphtools.ir import Op
from graphtools.onnx.export_context import (
    EXPORTERS,
    AttrRef,
    ExportContext,
    Function,
    exporter,
)
from graphtools.onnx.export_helpers import INT64, int64s, reduce, scalar, unsqueeze
from graphtools.onnx.export_nn import channels_first

__all__: list[str] = []


def _like(fx: ExportContext, value: float | str, like: str, hint: str) -> str:
    """``value`` (a float, or the name of a value) cast to ``like``'s element type."""
    source = scalar(fx, value, np.float32, hint) if isinstance(value, float) else value
    out = fx.fresh(hint)
    fx.node("CastLike", [source, like], [out])
    return out


def _moments_shape(fx: ExportContext) -> str:
    """``X.shape[:axis] + [1]``: the shape of a per-row statistic."""
    lead, shape = fx.fresh("lead"), fx.fresh("moments_shape")
    fx.node("Shape", ["X"], [lead], end=AttrRef("axis"))
    fx.node("Concat", [lead, int64s(fx, [1], "one")], [shape], axis=0)
    return shape


def _layer_norm_body(affine_inputs: bool, fx: ExportContext) -> None:
    names = ("rows", "mean", "centered", "square", "var", "eps", "shifted", "std", "normed")
    rows, mean, centered, square, var, eps, shifted, std, normed = (fx.fresh(k) for k in names)
    fx.node("Flatten", ["X"], [rows], axis=AttrRef("axis"))
    reduce(fx, "ReduceMean", rows, [1], keepdims=True, out=mean)
    fx.node("Sub", [rows, mean], [centered])
    fx.node("Mul", [centered, centered], [square])
    reduce(fx, "ReduceMean", square, [1], keepdims=True, out=var)
    fx.node("CastLike", [fx.attr("epsilon"), "X"], [eps])
    fx.node("Add", [var, eps], [shifted])
    fx.node("Sqrt", [shifted], [std])
    fx.node("Div", [centered, std], [normed])
    shape = fx.fresh("shape")
    fx.node("Shape", ["X"], [shape])
    moments = _moments_shape(fx)
    fx.node("Reshape", [mean, moments], ["mean"])
    fx.node("Reshape", [std, moments], ["std"])
    if not affine_inputs:
        fx.node("Reshape", [normed, shape], ["Y"])
        return
    parts = ("affine", "gamma_row", "beta_row", "gamma", "beta", "scaled", "moved")
    affine, gamma_row, beta_row, gamma, beta, scaled, moved = (fx.fresh(k) for k in parts)
    row = int64s(fx, [1, -1], "row")
    fx.node("Cast", [fx.attr("elementwise_affine")], [affine], to=TensorProto.BOOL)
    fx.node("Reshape", ["gamma", row], [gamma_row])
    fx.node("Reshape", ["beta", row], [beta_row])
    fx.node("Where", [affine, gamma_row, _like(fx, 1.0, "X", "one")], [gamma])
    fx.node("Where", [affine, beta_row, _like(fx, 0.0, "X", "zero")], [beta])
    fx.node("Mul", [normed, gamma], [scaled])
    fx.node("Add", [scaled, beta], [moved])
    fx.node("Reshape", [moved, shape], ["Y"])


_LAYER_NORM = Function(
    "LayerNorm",
    ("X", "gamma", "beta"),
    ("Y", "mean", "std"),
    {"axis": "int", "epsilon": "float", "elementwise_affine": "int"},
    partial(_layer_norm_body, True),
)
_LAYER_NORM_PLAIN = Function(
    "LayerNorm",
    ("X",),
    ("Y", "mean", "std"),
    {"axis": "int", "epsilon": "float"},
    partial(_layer_norm_body, False),
    variant="plain",
)


@exporter("LayerNorm")
def _layer_norm(cx: ExportContext, op: Op) -> None:
    axis, epsilon = int(op.arg("axis", 1)), float(op.arg("epsilon", 1e-5))
    if len(op.inputs) not in (1, 3):
        raise cx.refuse(f"LayerNorm with {len(op.inputs)} inputs (X, or X, gamma, beta)")
    affine = int(op.arg("elementwise_affine", 0))
    if len(op.inputs) == 1 or not affine:
        # Without elementwise_affine Caffe2 ignores gamma and beta, whatever their shape.
        cx.call(_LAYER_NORM_PLAIN, op.inputs[:1], op.outputs[:3], axis=axis, epsilon=epsilon)
        return
    cx.call(
        _LAYER_NORM,
        op.inputs,
        op.outputs[:3],
        axis=axis,
        epsilon=epsilon,
        elementwise_affine=affine,
    )


def _rms_norm_body(fx: ExportContext) -> None:
    names = ("rows", "square", "mean", "eps", "shifted", "root", "rrms", "column", "scaled")
    rows, square, mean, eps, shifted, root, rrms, column, scaled = (fx.fresh(k) for k in names)
    fx.node("Flatten", ["X"], [rows], axis=AttrRef("axis"))
    fx.node("Mul", [rows, rows], [square])
    reduce(fx, "ReduceMean", square, [1], keepdims=False, out=mean)
    fx.node("CastLike", [fx.attr("eps"), "X"], [eps])
    fx.node("Add", [mean, eps], [shifted])
    fx.node("Sqrt", [shifted], [root])
    fx.node("Div", [_like(fx, 1.0, "X", "one"), root], [rrms])
    unsqueeze(fx, rrms, [1], out=column)
    fx.node("Mul", [column, rows], [scaled])
    flat = int64s(fx, [-1], "flat")
    gamma, beta, weighted, moved, shape, lead = (
        fx.fresh(k) for k in ("gamma", "beta", "weighted", "moved", "shape", "lead")
    )
    fx.node("Reshape", ["gamma", flat], [gamma])
    fx.node("Reshape", ["beta", flat], [beta])
    fx.node("Mul", [scaled, gamma], [weighted])
    fx.node("Add", [weighted, beta], [moved])
    fx.node("Shape", ["X"], [shape])
    fx.node("Reshape", [moved, shape], ["Y"])
    fx.node("Shape", ["X"], [lead], end=AttrRef("axis"))
    fx.node("Reshape", [rrms, lead], ["rrms"])


_RMS_NORM = Function(
    "RMSNorm",
    ("X", "gamma", "beta"),
    ("Y", "rrms"),
    {"axis": "int", "eps": "float"},
    _rms_norm_body,
)


@exporter("RMSNorm")
def _rms_norm(cx: ExportContext, op: Op) -> None:
    if len(op.inputs) != 3:
        raise cx.refuse(f"RMSNorm with {len(op.inputs)} inputs (X, gamma, beta expected)")
    cx.call(
        _RMS_NORM,
        op.inputs,
        op.outputs[:2],
        axis=int(op.arg("axis", 1)),
        eps=float(op.arg("eps", 0.0)),
    )


def _lp_norm_body(fx: ExportContext) -> None:
    names = ("abs", "l1", "l2", "first", "total", "size", "count", "mean", "average")
    absolute, l1, l2, first, total, size, count, mean, average = (fx.fresh(k) for k in names)
    fx.node("Abs", ["X"], [absolute])
    fx.node("ReduceSum", [absolute], [l1], keepdims=0)
    fx.node("ReduceSumSquare", ["X"], [l2], keepdims=0)
    fx.node("Equal", [fx.attr("p"), fx.const(np.int64(1), "one")], [first])
    fx.node("Where", [first, l1, l2], [total])
    fx.node("Size", ["X"], [size])
    fx.node("CastLike", [size, total], [count])
    fx.node("Div", [total, count], [mean])
    fx.node("Cast", [fx.attr("average")], [average], to=TensorProto.BOOL)
    chosen = fx.fresh("chosen")
    fx.node("Where", [average, mean, total], [chosen])
    fx.node("Reshape", [chosen, int64s(fx, [1], "one_dim")], ["Y"])


_LP_NORM = Function("LpNorm", ("X",), ("Y",), {"p": "int", "average": "int"}, _lp_norm_body)


@exporter("LpNorm")
def _lp_norm(cx: ExportContext, op: Op) -> None:
    p = int(op.arg("p", 2))
    if p not in (1, 2):
        raise cx.refuse(f"LpNorm supports p=1 or p=2, got {p}")
    cx.call(_LP_NORM, op.inputs[:1], op.outputs[:1], p=p, average=int(op.arg("average", 0)))


def _elementwise_linear_body(fx: ExportContext) -> None:
    rows, w, b, scaled, moved, shape = (
        fx.fresh(k) for k in ("rows", "w", "b", "scaled", "moved", "shape")
    )
    flat = int64s(fx, [-1], "flat")
    fx.node("Flatten", ["X"], [rows], axis=AttrRef("axis"))
    fx.node("Reshape", ["w", flat], [w])
    fx.node("Reshape", ["b", flat], [b])
    fx.node("Mul", [rows, w], [scaled])
    fx.node("Add", [scaled, b], [moved])
    fx.node("Shape", ["X"], [shape])
    fx.node("Reshape", [moved, shape], ["Y"])


_ELEMENTWISE_LINEAR = Function(
    "ElementwiseLinear", ("X", "w", "b"), ("Y",), {"axis": "int"}, _elementwise_linear_body
)


@exporter("ElementwiseLinear")
def _elementwise_linear(cx: ExportContext, op: Op) -> None:
    cx.call(_ELEMENTWISE_LINEAR, op.inputs[:3], op.outputs[:1], axis=int(op.arg("axis", 1)))


def _reduce_back_body(mean: bool, fx: ExportContext) -> None:
    names = ("shape", "rank", "start", "axes", "total", "begin", "end", "dims", "count", "size")
    shape, rank, start, axes, total, begin, end, dims, count, size = (fx.fresh(k) for k in names)
    fx.node("Shape", ["X"], [shape])
    fx.node("Size", [shape], [rank])
    fx.node("Sub", [rank, fx.attr("num_reduce_dim")], [start])
    fx.node("Range", [start, rank, fx.const(np.int64(1), "step")], [axes])
    out = "Y" if not mean else total
    fx.node("ReduceSum", ["X", axes], [out], keepdims=0, noop_with_empty_axes=1)
    if not mean:
        return
    unsqueeze(fx, start, [0], out=begin)
    unsqueeze(fx, rank, [0], out=end)
    fx.node("Slice", [shape, begin, end], [dims])
    fx.node("ReduceProd", [dims], [count], keepdims=0)
    fx.node("CastLike", [count, "X"], [size])
    fx.node("Div", [total, size], ["Y"])


_REDUCE_BACK = {
    name: Function(name, ("X",), ("Y",), {"num_reduce_dim": "int"}, partial(_reduce_back_body, m))
    for name, m in (("ReduceBackSum", False), ("ReduceBackMean", True))
}


@exporter(*_REDUCE_BACK)
def _reduce_back(cx: ExportContext, op: Op) -> None:
    if len(op.inputs) > 1:
        raise cx.refuse(f"{op.type} with a lengths input")
    count = int(op.arg("num_reduce_dim", 1))
    if count < 0:
        raise cx.refuse(f"num_reduce_dim must be >= 0, got {count}")
    cx.call(_REDUCE_BACK[op.type], op.inputs[:1], op.outputs[:1], num_reduce_dim=count)


def _dot_product_body(fx: ExportContext) -> None:
    product, rows = fx.fresh("product"), fx.fresh("rows")
    fx.node("Mul", ["X", "Y"], [product])
    fx.node("Flatten", [product], [rows], axis=1)
    reduce(fx, "ReduceSum", rows, [1], keepdims=False, out="Z")


_DOT_PRODUCT = Function("DotProduct", ("X", "Y"), ("Z",), {}, _dot_product_body)


@exporter("DotProduct")
def _dot_product(cx: ExportContext, op: Op) -> None:
    cx.call(_DOT_PRODUCT, op.inputs[:2], op.outputs[:1])


def _channel_shuffle_body(fx: ExportContext) -> None:
    names = ("shape", "spatial", "area", "group", "target", "grouped", "swapped")
    shape, spatial, area, group, target, grouped, swapped = (fx.fresh(k) for k in names)
    fx.node("Shape", ["X"], [shape])
    fx.node("Shape", ["X"], [spatial], start=2)
    fx.node("ReduceProd", [spatial], [area], keepdims=1)
    unsqueeze(fx, fx.attr("group"), [0], out=group)
    fx.node(
        "Concat",
        [int64s(fx, [0], "batch"), group, int64s(fx, [-1], "rest"), area],
        [target],
        axis=0,
    )
    fx.node("Reshape", ["X", target], [grouped])
    fx.node("Transpose", [grouped], [swapped], perm=[0, 2, 1, 3])
    fx.node("Reshape", [swapped, shape], ["Y"])


_CHANNEL_SHUFFLE = Function(
    "ChannelShuffle", ("X",), ("Y",), {"group": "int"}, _channel_shuffle_body
)


@exporter("ChannelShuffle")
@channels_first()
def _channel_shuffle(cx: ExportContext, op: Op) -> None:
    group = int(op.arg("group", 1))
    if group < 1:
        raise cx.refuse(f"group must be >= 1, got {group}")
    cx.call(_CHANNEL_SHUFFLE, op.inputs[:1], op.outputs[:1], group=group)


def _top_k_flat_body(fx: ExportContext) -> None:
    names = ("k", "width", "lead", "count", "rows", "offsets", "column", "shaped", "flat")
    k, width, lead, count, rows, offsets, column, shaped, flat = (fx.fresh(n) for n in names)
    unsqueeze(fx, fx.attr("k"), [0], out=k)
    fx.node("TopK", ["X", k], ["values", "indices"], axis=-1)
    fx.node("Shape", ["X"], [width], start=-1)
    fx.node("Shape", ["X"], [lead], end=-1)
    fx.node("ReduceProd", [lead], [count], keepdims=0)
    zero, one = fx.const(np.int64(0), "zero"), fx.const(np.int64(1), "one")
    fx.node("Range", [zero, count, one], [rows])
    fx.node("Mul", [rows, width], [offsets])
    fx.node("Concat", [lead, int64s(fx, [1], "one_dim")], [column], axis=0)
    fx.node("Reshape", [offsets, column], [shaped])
    fx.node("Add", [shaped, "indices"], [flat])
    fx.node("Reshape", [flat, int64s(fx, [-1], "all")], ["flat_indices"])


_TOP_K_FLAT = Function(
    "TopK", ("X",), ("values", "indices", "flat_indices"), {"k": "int"}, _top_k_flat_body
)


@exporter("TopK")
def _top_k(cx: ExportContext, op: Op) -> None:
    """ONNX's ``TopK`` (values, int64 indices); when the third output (indices into the
    flattened input) is read, a function adding the row offsets of the last axis."""
    x = op.inputs[0]
    k = int(op.arg("k", -1))
    axis = int(op.arg("axis", -1))
    if len(op.outputs) > 2 and cx.used(op.outputs[2]):
        rank = cx.need_rank(x, "TopK's flattened indices")
        if axis % rank != rank - 1 or len(op.inputs) > 1 or k < 1:
            raise cx.refuse(
                "TopK's flattened indices are exported for the last axis and a k argument"
            )
        cx.call(_TOP_K_FLAT, [x], op.outputs[:3], k=k)
        return
    if len(op.inputs) > 1:
        k_value, k_int64 = cx.fresh(f"{op.outputs[0]}_k"), cx.fresh(f"{op.outputs[0]}_k_int64")
        cx.node("Cast", [op.inputs[1]], [k_int64], to=INT64)
        cx.node("Reshape", [k_int64, int64s(cx, [1], "one")], [k_value])
    elif k < 1:
        raise cx.refuse(f"k must be >= 1, got {k}")
    else:
        k_value = int64s(cx, [k], f"{op.outputs[0]}_k")
    values = op.outputs[0]
    indices = op.outputs[1] if len(op.outputs) > 1 else cx.fresh(f"{values}_indices")
    cx.node("TopK", [x, k_value], [values, indices], axis=axis)


@exporter("FbFCPacked")
def _fb_fc_packed(cx: ExportContext, op: Op) -> None:
    """fbgemm's fp16 FC: the weight rounded to float16 and back, then ``FC``."""
    weight = op.inputs[1]
    half, rounded = cx.fresh(f"{weight}_fp16"), cx.fresh(f"{weight}_rounded")
    cx.node("Cast", [weight], [half], to=TensorProto.FLOAT16)
    cx.node("Cast", [half], [rounded], to=TensorProto.FLOAT)
    inputs = [op.inputs[0], rounded, *op.inputs[2:3]]
    EXPORTERS["FC"](cx, op.replace(type="FC", inputs=inputs))

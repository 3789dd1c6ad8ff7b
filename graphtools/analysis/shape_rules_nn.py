"""Shape rules of the neural-network ops (the executor's ``kernels_nn``): convolutions,
pooling, normalisation, activations and image ops, in NCHW or NHWC with Caffe2's window
rules (``op_args.geometry``: every spelling of kernels, strides, dilations and pads, and the
legacy paddings)."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.op_args import NOTSET, VALID, canonical_axis, geometry, order, window_args
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    count,
    explained,
    result_dtype,
    same_dim,
    shape_rule,
    with_shape,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

# Two spatial sizes far larger than any window: a dim whose output equals the probe at both is
# passed through unchanged (a stride-1 "same" window), so its symbol survives.
_PROBES = (1 << 24, (1 << 24) + 1)


def need(op: Op, inputs: list[TensorType], n: int) -> None:
    """Raise unless ``op`` has at least ``n`` inputs."""
    if len(inputs) < n:
        raise ValueError(f"{op.type} needs {n} inputs, got {len(inputs)}")


def to_nchw(shape: tuple[Dim, ...] | None, layout: str) -> tuple[Dim, ...] | None:
    """A channels-last shape seen channels-first (``None`` stays unknown)."""
    if shape is None or layout != "NHWC" or len(shape) < 2:
        return shape
    return (shape[0], shape[-1], *shape[1:-1])


def from_nchw(shape: tuple[Dim, ...], layout: str) -> tuple[Dim, ...]:
    """Inverse of ``to_nchw``."""
    if layout != "NHWC":
        return shape
    return (shape[0], *shape[2:], shape[1])


def spatial_out(
    op: Op,
    spatial: tuple[Dim, ...],
    kernel_from_weight: tuple[Dim, ...] | None = None,
    *,
    global_pooling: bool = False,
) -> tuple[Dim, ...]:
    """Output spatial sizes of a conv or pooling window over ``spatial`` (symbolic dims too).

    Int dims go through Caffe2's arithmetic (``op_args.geometry``, which raises on a window
    that does not fit); a symbol survives where the window maps every size to itself, a
    global pooling gives 1, any other symbolic or unknown dim gives ``None``.
    """
    nd = len(spatial)
    kernel: tuple[int, ...] | None = None
    if kernel_from_weight is not None:
        if all(isinstance(k, int) for k in kernel_from_weight):
            kernel = tuple(int(k) for k in kernel_from_weight if k is not None)
        elif window_args(op, nd)[0] is None and not global_pooling:
            return (None,) * nd
    if all(isinstance(d, int) for d in spatial):
        sizes = tuple(int(d) for d in spatial if d is not None)
        return geometry(op, sizes, kernel, global_pooling=global_pooling).out_sizes
    outs = []
    for probe in _PROBES:
        sizes = tuple(d if isinstance(d, int) else probe for d in spatial)
        outs.append(geometry(op, sizes, kernel, global_pooling=global_pooling).out_sizes)
    result: list[Dim] = []
    for i, d in enumerate(spatial):
        if isinstance(d, int):
            result.append(outs[0][i])
        elif global_pooling:
            result.append(1)
        elif outs[0][i] == _PROBES[0] and outs[1][i] == _PROBES[1]:
            result.append(d)
        else:
            result.append(None)
    return tuple(result)


def _require_int8(op: Op, t: TensorType, what: str, quantized: bool) -> None:
    if t.dtype is not None and t.quantized != quantized:
        kind = "an Int8 blob" if quantized else "a float blob, not an Int8 one"
        raise ValueError(f"{op.type} {what} must be {kind}, got {t}")


def conv_type(
    op: Op, inputs: list[TensorType], *, transposed: bool, quantized: bool = False
) -> TensorType:
    """The output of a Conv / ConvTranspose (float or Int8) from its input, filter, bias."""
    need(op, inputs, 2)
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if quantized:
        for what, t in (("input", x), ("filter", w), ("bias", b)):
            if t is not None:
                _require_int8(op, t, what, True)
    layout = order(op)
    xs, ws = to_nchw(x.shape, layout), to_nchw(w.shape, layout)
    if xs is not None and len(xs) < 3:
        raise ValueError(f"{op.type} needs an input of rank >= 3, got {x}")
    if xs is not None and ws is not None and len(ws) != len(xs):
        raise ValueError(f"{op.type} input {x} and filter {w} differ in rank")
    out_dtype = np.dtype(np.uint8) if quantized else x.dtype
    rank = len(xs) if xs is not None else len(ws) if ws is not None else None
    if rank is None:
        return TensorType(out_dtype, None, quantized)
    nd = rank - 2
    n, c = (xs[0], xs[1]) if xs is not None else (None, None)
    spatial = xs[2:] if xs is not None else (None,) * nd
    w0, w1 = (ws[0], ws[1]) if ws is not None else (None, None)
    kernel = ws[2:] if ws is not None else (None,) * nd
    group = 1 if quantized and transposed else int(op.arg("group", 1))
    if group <= 0:
        raise ValueError(f"group {group} is not positive")
    if isinstance(c, int) and c % group:
        raise ValueError(f"group {group} does not divide the {c} input channels")
    if transposed:
        c = same_dim(c, w0, f"filter {w} against the input channels of {x}")
        m: Dim = w1 * group if isinstance(w1, int) else None
        outs = _transposed_out(op, spatial, kernel)
    else:
        if isinstance(w0, int) and w0 % group:
            raise ValueError(f"group {group} does not divide the {w0} filters of {w}")
        if isinstance(c, int) and isinstance(w1, int) and w1 != c // group:
            raise ValueError(
                f"filter {w} has {w1} input channels per group, the input {x} gives "
                f"{c // group} (group {group})"
            )
        m = w0
        outs = spatial_out(op, spatial, kernel)
    if b is not None:
        m = same_dim(m, count(b.shape), f"bias {b} against the {m} output channels")
    return TensorType(out_dtype, from_nchw((n, m, *outs), layout), quantized)


def _transposed_out(op: Op, spatial: tuple[Dim, ...], kernel: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """ConvTranspose's output sizes (Caffe2's ``ConvTransposeUnpoolBase``)."""
    nd = len(spatial)
    given, strides, dilations, pads = window_args(op, nd)
    if given is not None:
        pairs = zip(kernel, given, strict=True)
        kernel = tuple(same_dim(k, g, "kernel against the filter") for k, g in pairs)
    if any(d != 1 for d in dilations):
        raise UnsupportedOpError("ConvTranspose with dilation is not supported")
    adj_arg = op.arg("adjs")
    if adj_arg is not None:
        adjs = [int(a) for a in adj_arg]
    elif op.has_arg("adj"):
        adjs = [int(op.arg("adj"))] * nd
    else:
        adjs = [int(op.arg("adj_h", 0)), int(op.arg("adj_w", 0))] if nd == 2 else [0] * nd
    legacy = int(op.arg("legacy_pad", NOTSET))
    if legacy == VALID:
        pads = [0] * (2 * nd)
    elif legacy != NOTSET:
        raise UnsupportedOpError(f"ConvTranspose with legacy_pad={legacy} is not supported")
    outs: list[Dim] = []
    for i, size in enumerate(spatial):
        k = kernel[i]
        extra = None if not isinstance(k, int) else k + adjs[i] - pads[i] - pads[nd + i]
        if extra is None:
            outs.append(None)
        elif isinstance(size, int):
            out = (size - 1) * strides[i] + extra
            if out <= 0:
                raise ValueError(f"output size {out} along spatial dim {i} is not positive")
            outs.append(out)
        else:
            outs.append(size if strides[i] == 1 and extra == 1 else None)
    return tuple(outs)


@shape_rule("Conv", "Conv1D", "Conv2D", "Conv3D")
def _conv(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [conv_type(op, inputs, transposed=False)]


@shape_rule("ConvTranspose")
def _conv_transpose(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [conv_type(op, inputs, transposed=True)]


def pool_type(op: Op, x: TensorType) -> TensorType:
    """The output of a max or average pooling of ``x``."""
    layout = order(op)
    xs = to_nchw(x.shape, layout)
    if xs is None:
        return with_shape(x, None)
    if len(xs) < 3:
        raise ValueError(f"{op.type} needs an input of rank >= 3, got {x}")
    outs = spatial_out(op, xs[2:], global_pooling=bool(op.arg("global_pooling", 0)))
    return with_shape(x, from_nchw((xs[0], xs[1], *outs), layout))


@shape_rule(
    *("MaxPool", "MaxPool1D", "MaxPool2D", "MaxPool3D"),
    *("AveragePool", "AveragePool1D", "AveragePool2D", "AveragePool3D"),
)
def _pool(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [pool_type(op, inputs[0])]


def channels_of(op: Op, x: TensorType) -> Dim:
    """The channel count of ``x`` for the op's order, ``None`` when unknown."""
    if x.shape is None or len(x.shape) < 2:
        return None
    return x.shape[-1 if order(op) == "NHWC" else 1]


def _per_channel(op: Op, x: TensorType, param: TensorType, what: str, exact: bool) -> None:
    """Check a per-channel parameter: C values (or 1 where numpy broadcasting allows it)."""
    size, c = count(param.shape), channels_of(op, x)
    if size is None or not isinstance(c, int) or size == c or (size == 1 and not exact):
        return
    raise ValueError(f"{what} {param} has {size} values for the {c} channels of {x}")


@shape_rule("SpatialBN")
def _spatial_bn(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    if not op.arg("is_test", 0) and len(op.outputs) > 1:
        raise UnsupportedOpError("SpatialBN in training mode (is_test=0 with 5 outputs)")
    need(op, inputs, 5)
    x = inputs[0]
    for name, param in zip(("scale", "bias", "mean", "var"), inputs[1:5], strict=True):
        _per_channel(op, x, param, name, exact=False)
    return [x]


@shape_rule("InstanceNorm")
def _instance_norm(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 3)
    x = inputs[0]
    for name, param in zip(("scale", "bias"), inputs[1:3], strict=True):
        _per_channel(op, x, param, name, exact=True)
    layout = order(op)
    xs = to_nchw(x.shape, layout)
    stats = None if xs is None else (xs[0], xs[1])
    return [x, with_shape(x, stats), with_shape(x, stats)]


@shape_rule("LRN")
def _lrn(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    if op.arg("size") is None:
        raise ValueError("LRN needs a 'size' argument")
    order(op)
    return [inputs[0], inputs[0]]


def _same(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [inputs[0]]


shape_rule("Relu", "LeakyRelu", "Sigmoid")(_same)


@shape_rule("Tanh")
def _tanh(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    return [TensorType(result_dtype(np.tanh, x.dtype), x.shape)]


@shape_rule("Softplus")
def _softplus(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    return [TensorType(result_dtype(np.logaddexp, x.dtype, x.dtype), x.shape)]


@shape_rule("PRelu")
def _prelu(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    _per_channel(op, inputs[0], inputs[1], "slope", exact=False)
    return [inputs[0]]


@shape_rule("Dropout")
def _dropout(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    return [x, TensorType(np.dtype(np.bool_), x.shape)]


@shape_rule("ChannelShuffle")
def _channel_shuffle(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    c, group = channels_of(op, inputs[0]), int(op.arg("group", 1))
    if isinstance(c, int) and (group <= 0 or c % group):
        raise ValueError(f"group {group} does not divide {c} channels")
    return [inputs[0]]


_PAD_MODES = (b"constant", b"reflect", b"edge")


@shape_rule("PadImage")
def _pad_image(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    layout = order(op)
    if op.arg("mode", b"constant") not in _PAD_MODES:
        raise ValueError(f"unknown PadImage mode {op.arg('mode')!r}")
    xs = to_nchw(x.shape, layout)
    if xs is None:
        return [x]
    nd = len(xs) - 2
    _, _, _, pads = window_args(op, nd)
    if op.arg("mode", b"constant") == b"reflect":  # reflected at both edges at most
        for i, size in enumerate(xs[2:]):
            pad = max(pads[i], pads[nd + i])
            if isinstance(size, int) and pad > 2 * (size - 1):
                raise ValueError(
                    f"reflect pads of {pad} need a spatial dim of at least {(pad + 1) // 2 + 1}, "
                    f"got {size}"
                )
    spatial = [_plus(s, pads[i] + pads[nd + i]) for i, s in enumerate(xs[2:])]
    return [with_shape(x, from_nchw((xs[0], xs[1], *spatial), layout))]


def _plus(size: Dim, extra: int) -> Dim:
    if isinstance(size, int):
        return size + extra
    return size if extra == 0 else None


@shape_rule("ResizeNearest")
def _resize_nearest(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    layout = order(op)
    xs = to_nchw(x.shape, layout)
    if xs is not None and len(xs) != 4:
        raise ValueError(f"ResizeNearest needs a 4-D input, got {x}")
    if xs is None:
        return [with_shape(x, None)]
    if len(inputs) > 1:
        shape = from_nchw((xs[0], xs[1], None, None), layout)
        return [explained(with_shape(x, shape), "data-dependent: scales read from an input")]
    scales = (float(op.arg("height_scale", 1.0)), float(op.arg("width_scale", 1.0)))
    sizes = [_scaled(s, f) for s, f in zip(xs[2:], scales, strict=True)]
    return [with_shape(x, from_nchw((xs[0], xs[1], *sizes), layout))]


def _scaled(size: Dim, factor: float) -> Dim:
    if isinstance(size, int):
        return int(size * factor)
    return size if factor == 1.0 else None


@shape_rule("Softmax")
def _softmax(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.shape is not None:
        canonical_axis(int(op.arg("axis", 1)), len(x.shape))
    return [x]

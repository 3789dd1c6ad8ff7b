"""Neural-network kernels: convolutions, pooling, normalisation, activations, image ops.

Convolution and pooling work on channels-first arrays over any number of spatial dims; NHWC
ops are moved to channels-first and back. Windows come from ``numpy``'s zero-copy
``sliding_window_view`` and convolutions are one batched matmul per op (im2col).
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import (
    NOTSET,
    VALID,
    Geometry,
    canonical_axis,
    channel_axis,
    from_nchw,
    geometry,
    order,
    to_nchw,
    window_args,
    windows,
)
from graphtools.errors import UnsupportedOpError
from graphtools.executor.registry import OpContext, kernel
from graphtools.ir import Op


def conv_nchw(x: np.ndarray, w: np.ndarray, geo: Geometry, group: int) -> np.ndarray:
    """Grouped convolution without bias: x (N, C, *S), w (M, C/group, *K) -> (N, M, *out)."""
    n, c = x.shape[:2]
    m = w.shape[0]
    nd = len(geo.kernel)
    if group <= 0 or c % group or m % group:
        raise ValueError(f"group {group} does not divide input channels {c} and filters {m}")
    cg, mg = c // group, m // group
    if w.shape[1] != cg:
        raise ValueError(f"filter has {w.shape[1]} input channels per group, input gives {cg}")
    win = windows(x, geo)  # (N, C, *out, *K)
    out = geo.out_sizes
    k = prod(geo.kernel)
    win = win.reshape(n, group, cg, *out, *geo.kernel)
    perm = (1, 0, *range(3, 3 + nd), 2, *range(3 + nd, 3 + 2 * nd))
    cols = win.transpose(perm).reshape(group, n * prod(out), cg * k)
    wm = w.reshape(group, mg, cg * k).transpose(0, 2, 1)
    y = np.matmul(cols, wm)  # (G, N*P, M/G)
    y = y.reshape(group, n, *out, mg)
    y = np.moveaxis(y, -1, 1)  # (G, M/G, N, *out)
    y = y.transpose(2, 0, 1, *range(3, 3 + nd)).reshape(n, m, *out)
    return np.ascontiguousarray(y)


def conv_transpose_nchw(
    x: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, ...],
    pads_head: tuple[int, ...],
    out_sizes: tuple[int, ...],
    group: int,
) -> np.ndarray:
    """Grouped transposed convolution without bias: w (C, M/group, *K) -> (N, M, *out_sizes)."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    kernel = w.shape[2:]
    if group <= 0 or c % group or w.shape[0] != c:
        raise ValueError(f"filter {list(w.shape)} does not fit {c} input channels, group {group}")
    cg, mg = c // group, w.shape[1]
    xg = x.reshape(n, group, cg, prod(spatial)).transpose(1, 0, 3, 2)  # (G, N, P, C/G)
    wg = w.reshape(group, 1, cg, mg * prod(kernel))
    cols = np.matmul(xg, wg).reshape(group, n, *spatial, mg, *kernel)
    cols = np.moveaxis(cols, 2 + nd, 2)  # (G, N, M/G, *spatial, *K)
    full = [(s - 1) * st + k for s, st, k in zip(spatial, strides, kernel, strict=True)]
    full = [max(f, h + o) for f, h, o in zip(full, pads_head, out_sizes, strict=True)]
    y = np.zeros((group, n, mg, *full), dtype=np.result_type(x, w))
    for offset in np.ndindex(*kernel):
        target = tuple(
            slice(o, o + st * (s - 1) + 1, st)
            for o, st, s in zip(offset, strides, spatial, strict=True)
        )
        y[(slice(None), slice(None), slice(None), *target)] += cols[(..., *offset)]
    crop = tuple(slice(h, h + o) for h, o in zip(pads_head, out_sizes, strict=True))
    y = y[(slice(None), slice(None), slice(None), *crop)]
    y = y.transpose(1, 0, 2, *range(3, 3 + nd))
    return np.ascontiguousarray(y.reshape(n, group * mg, *out_sizes))


def _filter_nchw(w: np.ndarray, layout: str) -> np.ndarray:
    return np.moveaxis(w, -1, 1) if layout == "NHWC" else w


def _bias_shape(y: np.ndarray) -> tuple[int, ...]:
    return (1, y.shape[1]) + (1,) * (y.ndim - 2)


@kernel("Conv", "Conv1D", "Conv2D", "Conv3D")
def _conv(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    w = _filter_nchw(np.asarray(inputs[1]), layout)
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ValueError(f"Conv needs input and filter of equal rank >= 3, got {x.ndim}, {w.ndim}")
    geo = geometry(op, x.shape[2:], w.shape[2:])
    y = conv_nchw(x, w, geo, int(op.arg("group", 1)))
    if len(inputs) > 2:
        y = y + np.asarray(inputs[2]).reshape(_bias_shape(y))
    return [from_nchw(y.astype(x.dtype, copy=False), layout)]


def transpose_geometry(
    op: Op, spatial: tuple[int, ...], kernel: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Strides, head pads and output sizes of a ConvTranspose (``ConvTransposeUnpoolBase``)."""
    nd = len(spatial)
    given, strides, dilations, pads = window_args(op, nd)
    if given is not None and tuple(given) != tuple(kernel):
        raise ValueError(f"kernel {given} does not match the filter's {list(kernel)}")
    if any(d != 1 for d in dilations):
        raise UnsupportedOpError("ConvTranspose with dilation is not supported")
    adj_arg = op.arg("adjs")
    if adj_arg is not None:
        adjs = list(adj_arg)
    elif op.has_arg("adj"):
        adjs = [int(op.arg("adj"))] * nd
    else:
        adjs = [int(op.arg("adj_h", 0)), int(op.arg("adj_w", 0))] if nd == 2 else [0] * nd
    legacy = int(op.arg("legacy_pad", NOTSET))
    if legacy == VALID:
        pads = [0] * (2 * nd)
    elif legacy != NOTSET:
        raise UnsupportedOpError(f"ConvTranspose with legacy_pad={legacy} is not supported")
    outs = tuple(
        (spatial[i] - 1) * strides[i] + kernel[i] + adjs[i] - pads[i] - pads[nd + i]
        for i in range(nd)
    )
    if min(outs) <= 0:
        raise ValueError(f"output sizes {list(outs)} are not positive")
    return tuple(strides), tuple(pads[:nd]), outs


@kernel("ConvTranspose")
def _conv_transpose(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    w = _filter_nchw(np.asarray(inputs[1]), layout)
    strides, heads, outs = transpose_geometry(op, x.shape[2:], w.shape[2:])
    y = conv_transpose_nchw(x, w, strides, heads, outs, int(op.arg("group", 1)))
    if len(inputs) > 2:
        y = y + np.asarray(inputs[2]).reshape(_bias_shape(y))
    return [from_nchw(y.astype(x.dtype, copy=False), layout)]


def pool(op: Op, x: np.ndarray, mode: str) -> np.ndarray:
    """Max or average pooling of a channels-first array with Caffe2's window rules.

    Average pooling divides by the number of window elements inside the image (padding
    excluded, Caffe2's ``AveragePool``); with ``count_include_pad=1`` by the window clipped to
    the padded extent.
    """
    geo = pool_geometry(op, x)
    axes = tuple(range(-len(geo.kernel), 0))
    if mode == "max":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        return windows(x, geo, fill).max(axis=axes)
    total = windows(x, geo).sum(axis=axes, dtype=np.float64)
    return (total / pool_counts(op, x, geo)).astype(x.dtype)


def pool_geometry(op: Op, x: np.ndarray) -> Geometry:
    """The windows of a pooling op over a channels-first ``x`` (``global_pooling`` too)."""
    return geometry(op, x.shape[2:], global_pooling=bool(op.arg("global_pooling", 0)))


def pool_counts(op: Op, x: np.ndarray, geo: Geometry) -> np.ndarray:
    """What average pooling divides each window's sum by (1, 1, *out_sizes): its elements
    inside the image, or (``count_include_pad=1``) inside the padded extent."""
    axes = tuple(range(-len(geo.kernel), 0))
    pad = 1.0 if op.arg("count_include_pad", 0) else 0.0
    return windows(np.ones((1, 1, *x.shape[2:])), geo, pad).sum(axis=axes)


@kernel("MaxPool", "MaxPool1D", "MaxPool2D", "MaxPool3D")
def _max_pool(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    return [from_nchw(pool(op, to_nchw(np.asarray(inputs[0]), layout), "max"), layout)]


@kernel("AveragePool", "AveragePool1D", "AveragePool2D", "AveragePool3D")
def _average_pool(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    return [from_nchw(pool(op, to_nchw(np.asarray(inputs[0]), layout), "avg"), layout)]


def _per_channel(op: Op, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Reshape a per-channel vector to broadcast along the op's channel axis."""
    shape = [1] * x.ndim
    shape[channel_axis(op, x.ndim)] = -1
    return np.asarray(v).reshape(shape)


@kernel("SpatialBN")
def _spatial_bn(op: Op, inputs: list[Any]) -> list[Any]:
    if not op.arg("is_test", 0) and len(op.outputs) > 1:
        raise UnsupportedOpError("SpatialBN in training mode (is_test=0 with 5 outputs)")
    x, scale, bias, mean, var = (np.asarray(v) for v in inputs[:5])
    eps = float(op.arg("epsilon", 1e-5))
    inv = scale / np.sqrt(var + np.asarray(eps, var.dtype))
    y = x * _per_channel(op, x, inv) + _per_channel(op, x, bias - mean * inv)
    return [y.astype(x.dtype, copy=False)]


@kernel("LRN")
def _lrn(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    size = int(op.arg("size"))
    alpha, beta = float(op.arg("alpha", 0.0)), float(op.arg("beta", 0.0))
    bias = float(op.arg("bias", 1.0))
    axis = channel_axis(op, x.ndim)
    sq = np.moveaxis(x.astype(np.float64) ** 2, axis, 0)
    before = (size - 1) // 2
    padded = np.concatenate(
        [np.zeros((before + 1, *sq.shape[1:])), sq, np.zeros((size - 1 - before, *sq.shape[1:]))]
    )
    csum = np.cumsum(padded, axis=0)
    window = csum[size:] - csum[:-size]
    scale = np.moveaxis(bias + alpha / size * window, 0, axis)
    y = (x * scale ** (-beta)).astype(x.dtype)
    return [y, scale.astype(x.dtype)]


@kernel("Relu", floats=True)  # Caffe2: TensorTypes<float> only
def _relu(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    return [np.maximum(x, np.zeros((), x.dtype))]


@kernel("LeakyRelu")
def _leaky_relu(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    alpha = np.asarray(op.arg("alpha", 0.01), x.dtype)
    return [np.where(x >= 0, x, x * alpha)]


@kernel("PRelu")
def _prelu(op: Op, inputs: list[Any]) -> list[Any]:
    x, slope = np.asarray(inputs[0]), np.asarray(inputs[1])
    if slope.size != 1:
        slope = _per_channel(op, x, slope)
    return [np.where(x >= 0, x, x * slope).astype(x.dtype, copy=False)]


@kernel("Sigmoid", floats=True)  # Caffe2: TensorTypes<float> only
def _sigmoid(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    return [(1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)]


@kernel("Tanh", floats=True)  # Caffe2: TensorTypes<float> only
def _tanh(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.tanh(np.asarray(inputs[0]))]


@kernel("Softplus")
def _softplus(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    return [np.logaddexp(np.zeros((), x.dtype), x)]


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Caffe2's Softmax: the input is coerced to 2-D at ``axis`` and normalised per row."""
    axis = canonical_axis(axis, x.ndim)
    rows = x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))
    if rows.size == 0:  # no rows (an empty detection batch) or rows of nothing
        return x.copy()
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(x.dtype, copy=False)


@kernel("Softmax", floats=True)  # Caffe2: SoftmaxOp<float> only
def _softmax(op: Op, inputs: list[Any]) -> list[Any]:
    return [softmax(np.asarray(inputs[0]), int(op.arg("axis", 1)))]


@kernel("Dropout", context=True)
def _dropout(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    x = np.asarray(inputs[0])
    if op.arg("is_test", 0):
        return [x, np.ones(x.shape, dtype=bool)]
    ratio = float(op.arg("ratio", 0.5))
    mask = ctx.rng(op).random(x.shape) >= ratio
    scale = np.asarray(1.0 / (1.0 - ratio) if ratio < 1 else 0.0, x.dtype)
    return [(x * mask * scale).astype(x.dtype, copy=False), mask]


@kernel("ChannelShuffle")
def _channel_shuffle(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    group = int(op.arg("group", 1))
    n, c = x.shape[:2]
    if c % group:
        raise ValueError(f"group {group} does not divide {c} channels")
    y = x.reshape(n, group, c // group, *x.shape[2:]).swapaxes(1, 2).reshape(x.shape)
    return [from_nchw(np.ascontiguousarray(y), layout)]


_PAD_MODES = {b"constant": "constant", b"reflect": "reflect", b"edge": "edge"}


@kernel("PadImage")
def _pad_image(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    nd = x.ndim - 2
    _, _, _, pads = window_args(op, nd)
    mode = _PAD_MODES.get(op.arg("mode", b"constant"))
    if mode is None:
        raise ValueError(f"unknown PadImage mode {op.arg('mode')!r}")
    width = [(0, 0), (0, 0), *zip(pads[:nd], pads[nd:], strict=True)]
    if mode == "reflect":
        # Caffe2 reflects at the near edge, then at the far one (min(h, 2 * H - h - 2)), as
        # numpy does up to a pad of 2 * (H - 1); past that it reads outside the image.
        for axis, (before, after) in enumerate(width[2:], start=2):
            if max(before, after) > 2 * (x.shape[axis] - 1):
                raise ValueError(
                    f"PadImage reflect pads of {max(before, after)} need an input dim of at "
                    f"least {(max(before, after) + 1) // 2 + 1}, got {x.shape[axis]} (dim {axis}, "
                    "NCHW)"
                )
    if mode == "constant":
        y = np.pad(x, width, constant_values=float(op.arg("value", 0.0)))
    else:
        y = np.pad(x, width, mode=mode)  # type: ignore[call-overload]
    return [from_nchw(y, layout)]


@kernel("InstanceNorm")
def _instance_norm(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    scale, bias = np.asarray(inputs[1]), np.asarray(inputs[2])
    eps = float(op.arg("epsilon", 1e-5))
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True, dtype=np.float64)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + eps)
    shape = _bias_shape(x)
    y = (x - mean) * inv_std * scale.reshape(shape) + bias.reshape(shape)
    n, c = x.shape[:2]
    return [
        from_nchw(y.astype(x.dtype), layout),
        mean.reshape(n, c).astype(x.dtype),
        inv_std.reshape(n, c).astype(x.dtype),
    ]


@kernel("ResizeNearest")
def _resize_nearest(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    if x.ndim != 4:
        raise ValueError(f"ResizeNearest needs a 4-D input, got {x.ndim}-D")
    h_scale = float(op.arg("height_scale", 1.0))
    w_scale = float(op.arg("width_scale", 1.0))
    if len(inputs) > 1:
        h_scale, w_scale = (float(v) for v in np.asarray(inputs[1]).reshape(-1)[:2])
    h, w = x.shape[2:]
    out_h, out_w = int(h * h_scale), int(w * w_scale)
    rows = np.minimum((np.arange(out_h) / h_scale).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(out_w) / w_scale).astype(np.int64), w - 1)
    return [from_nchw(np.ascontiguousarray(x[:, :, rows][:, :, :, cols]), layout)]

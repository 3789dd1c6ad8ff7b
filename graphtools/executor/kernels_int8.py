"""Int8 kernels (Caffe2's QNNPACK-backed ``Int8*`` ops) over ``Int8Tensor`` blobs.

Convolutions and FC accumulate exactly in integers, ``sum((x - x_zp) * (w - w_zp)) + bias``,
with the bias taken as raw int32 at scale ``x_scale * w_scale`` (as QNNPACK does), then
requantize with ``Y_scale``/``Y_zero_point`` (round half to even, clamp to [0, 255]; the
``Relu`` variants clamp at the zero point). The other ops dequantize, compute in float32 and
quantize. QNNPACK's fixed-point requantization can differ from this by one unit in rare ties.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import from_nchw, geometry, order, to_nchw
from graphtools.executor.kernels_nn import (
    conv_nchw,
    conv_transpose_nchw,
    pool,
    softmax,
    transpose_geometry,
)
from graphtools.executor.kernels_tensor import reshape_target
from graphtools.executor.registry import kernel
from graphtools.executor.workspace import Int8Tensor
from graphtools.ir import Op


def quantize(x: np.ndarray, scale: float, zero_point: int, *, relu: bool = False) -> Int8Tensor:
    """Caffe2's ``Int8Quantize``: ``clamp(nearbyint(zp + x / scale), 0, 255)`` in float32."""
    inv = np.float32(1.0) / np.float32(scale)
    q = np.rint(np.asarray(x, np.float32) * inv + np.float32(zero_point))
    low = zero_point if relu else 0
    return Int8Tensor(np.clip(q, low, 255).astype(np.uint8), float(scale), int(zero_point))


def _requantize(acc: np.ndarray, real_scale: float, op: Op, relu: bool) -> Int8Tensor:
    scale, zero_point = _output_quantization(op)
    q = np.rint(acc * (real_scale / scale)) + zero_point
    low = zero_point if relu else 0
    return Int8Tensor(np.clip(q, low, 255).astype(np.uint8), scale, zero_point)


def _output_quantization(op: Op) -> tuple[float, int]:
    return float(op.arg("Y_scale", 1.0)), int(op.arg("Y_zero_point", 0))


def _int8(value: Any, what: str) -> Int8Tensor:
    if not isinstance(value, Int8Tensor):
        raise TypeError(f"{what} must be an Int8 blob, got {type(value).__name__}")
    return value


def _centered(t: Int8Tensor) -> np.ndarray:
    return t.values.astype(np.float64) - t.zero_point


def _bias(inputs: list[Any], count: int) -> np.ndarray | None:
    if len(inputs) < 3:
        return None
    b = _int8(inputs[2], "bias")
    if b.values.size != count:
        raise ValueError(f"bias has {b.values.size} values for {count} outputs")
    return b.values.astype(np.float64)


@kernel("Int8Quantize")
def _int8_quantize(op: Op, inputs: list[Any]) -> list[Any]:
    return [quantize(np.asarray(inputs[0]), *_output_quantization(op))]


@kernel("Int8Dequantize")
def _int8_dequantize(op: Op, inputs: list[Any]) -> list[Any]:
    return [_int8(inputs[0], "input").dequantize()]


@kernel("Int8Conv", "Int8ConvRelu")
def _int8_conv(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x, w = _int8(inputs[0], "input"), _int8(inputs[1], "filter")
    xc = to_nchw(_centered(x), layout)
    wc = to_nchw(_centered(w), layout)
    geo = geometry(op, xc.shape[2:], wc.shape[2:])
    acc = conv_nchw(xc, wc, geo, int(op.arg("group", 1)))
    bias = _bias(inputs, acc.shape[1])
    if bias is not None:
        acc = acc + bias.reshape(1, -1, *([1] * (acc.ndim - 2)))
    y = _requantize(from_nchw(acc, layout), x.scale * w.scale, op, op.type == "Int8ConvRelu")
    return [y]


@kernel("Int8ConvTranspose")
def _int8_conv_transpose(op: Op, inputs: list[Any]) -> list[Any]:
    layout = order(op)
    x, w = _int8(inputs[0], "input"), _int8(inputs[1], "filter")
    xc = to_nchw(_centered(x), layout)
    wc = to_nchw(_centered(w), layout)
    strides, heads, outs = transpose_geometry(op, xc.shape[2:], wc.shape[2:])
    acc = conv_transpose_nchw(xc, wc, strides, heads, outs, 1)
    bias = _bias(inputs, acc.shape[1])
    if bias is not None:
        acc = acc + bias.reshape(1, -1, *([1] * (acc.ndim - 2)))
    return [_requantize(from_nchw(acc, layout), x.scale * w.scale, op, False)]


@kernel("Int8FC")
def _int8_fc(op: Op, inputs: list[Any]) -> list[Any]:
    x, w = _int8(inputs[0], "input"), _int8(inputs[1], "weight")
    xc = _centered(x).reshape(x.values.shape[0], prod(x.values.shape[1:]))
    wc = _centered(w).reshape(w.values.shape[0], prod(w.values.shape[1:]))
    if xc.shape[1] != wc.shape[1]:
        raise ValueError(f"Int8FC input has {xc.shape[1]} features, weight expects {wc.shape[1]}")
    acc = xc @ wc.T
    bias = _bias(inputs, acc.shape[1])
    if bias is not None:
        acc = acc + bias
    return [_requantize(acc, x.scale * w.scale, op, False)]


@kernel("Int8Sum", "Int8SumRelu", "Int8Add", "Int8AddRelu")
def _int8_sum(op: Op, inputs: list[Any]) -> list[Any]:
    arrays = [_int8(v, "input").dequantize() for v in inputs]
    for array in arrays[1:]:
        if array.shape != arrays[0].shape:
            raise ValueError(f"{op.type} needs equal shapes, got {[a.shape for a in arrays]}")
    total = np.asarray(np.sum(arrays, axis=0, dtype=np.float32))
    return [quantize(total, *_output_quantization(op), relu=op.type.endswith("Relu"))]


@kernel("Int8Relu")
def _int8_relu(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    values = np.maximum(x.values, np.uint8(min(max(x.zero_point, 0), 255)))
    return [Int8Tensor(values, x.scale, x.zero_point)]


@kernel("Int8MaxPool")
def _int8_max_pool(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    layout = order(op)
    values = from_nchw(pool(op, to_nchw(x.values, layout), "max"), layout)
    return [Int8Tensor(values, x.scale, x.zero_point)]


@kernel("Int8AveragePool")
def _int8_average_pool(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    layout = order(op)
    y = from_nchw(pool(op, to_nchw(x.dequantize(), layout), "avg"), layout)
    return [quantize(y, *_output_quantization(op))]


@kernel("Int8Softmax")
def _int8_softmax(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    return [quantize(softmax(x.dequantize(), int(op.arg("axis", 1))), *_output_quantization(op))]


@kernel("Int8Reshape")
def _int8_reshape(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    if len(inputs) > 1:
        shape = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    else:
        shape = [int(v) for v in op.arg("shape", ())]
    new = reshape_target(shape, x.shape)
    old = np.asarray(x.shape, dtype=np.int64)
    return [Int8Tensor(x.values.reshape(new), x.scale, x.zero_point), old]


@kernel("Int8Flatten")
def _int8_flatten(op: Op, inputs: list[Any]) -> list[Any]:
    x = _int8(inputs[0], "input")
    axis = int(op.arg("axis", 1))
    values = x.values.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))
    return [Int8Tensor(values, x.scale, x.zero_point)]

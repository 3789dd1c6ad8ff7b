"""Shape rules of the Int8 ops (the executor's ``kernels_int8``): quantized blobs
(``TensorType.quantized``) of ``uint8`` values, with the float ops' geometry."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.analysis.shape_rules_nn import conv_type, need, pool_type
from graphtools.analysis.shape_rules_tensor import reshape_target
from graphtools.analysis.shape_types import (
    TensorType,
    Values,
    count,
    dim_product,
    explained,
    same_dim,
    same_shape,
    shape_rule,
    with_shape,
)
from graphtools.ir import Op

_UINT8 = np.dtype(np.uint8)


def _int8(op: Op, t: TensorType, what: str) -> TensorType:
    """``t``, checked to be an Int8 blob when its type is known."""
    if t.dtype is not None and not t.quantized:
        raise ValueError(f"{op.type} {what} must be an Int8 blob, got {t}")
    return t


def _quantized(shape: tuple[int | str | None, ...] | None) -> TensorType:
    return TensorType(_UINT8, shape, quantized=True)


@shape_rule("Int8Quantize")
def _quantize(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.quantized:
        raise ValueError(f"Int8Quantize input must be a float blob, got {x}")
    return [_quantized(x.shape)]


@shape_rule("Int8Dequantize")
def _dequantize(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [TensorType(np.dtype(np.float32), _int8(op, inputs[0], "input").shape)]


@shape_rule("Int8Conv", "Int8ConvRelu")
def _conv(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [conv_type(op, inputs, transposed=False, quantized=True)]


@shape_rule("Int8ConvTranspose")
def _conv_transpose(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [conv_type(op, inputs, transposed=True, quantized=True)]


@shape_rule("Int8FC")
def _fc(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Both X and W are flattened after their first dim (``axis`` arguments are not read)."""
    need(op, inputs, 2)
    x, w = _int8(op, inputs[0], "input"), _int8(op, inputs[1], "weight")
    rows = k_x = n = k_w = None
    if x.shape is not None:
        if not x.shape:
            raise ValueError("Int8FC needs an input of rank >= 1")
        rows, k_x = x.shape[0], dim_product(x.shape[1:])
    if w.shape is not None:
        if not w.shape:
            raise ValueError("Int8FC needs a weight of rank >= 1")
        n, k_w = w.shape[0], dim_product(w.shape[1:])
    same_dim(k_x, k_w, f"the input {x} has {k_x} features, the weight {w} expects")
    if len(inputs) > 2:
        bias = _int8(op, inputs[2], "bias")
        n = same_dim(n, count(bias.shape), f"bias {bias} against the outputs of {w}")
    return [_quantized((rows, n))]


@shape_rule("Int8Sum", "Int8SumRelu", "Int8Add", "Int8AddRelu")
def _sum(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    shape = None
    for t in inputs:
        _int8(op, t, "input")
        if t.shape is not None:
            shape = t.shape if shape is None else same_shape(shape, t.shape, "needs equal shapes")
    return [_quantized(shape)]


@shape_rule("Int8Relu")
def _relu(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [_int8(op, inputs[0], "input")]


@shape_rule("Int8MaxPool")
def _max_pool(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [pool_type(op, _int8(op, inputs[0], "input"))]


@shape_rule("Int8AveragePool")
def _average_pool(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [_quantized(pool_type(op, _int8(op, inputs[0], "input")).shape)]


@shape_rule("Int8Softmax")
def _softmax(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = _int8(op, inputs[0], "input")
    if x.shape is not None:
        canonical_axis(int(op.arg("axis", 1)), len(x.shape))
    return [_quantized(x.shape)]


@shape_rule("Int8Reshape", values=True)
def _reshape(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    need(op, inputs, 1)
    x = _int8(op, inputs[0], "input")
    old_shape = TensorType(np.dtype(np.int64), (None if x.shape is None else len(x.shape),))
    if len(inputs) > 1:
        target = values[1]
        if target is None:
            length = count(inputs[1].shape)
            shape = None if length is None else (None,) * length
            why = "data-dependent: the new shape is read from an input whose values are unknown"
            return [explained(with_shape(x, shape), why), old_shape]
    else:
        target = tuple(int(v) for v in op.arg("shape", ()))
    return [with_shape(x, reshape_target(target, x.shape)), old_shape]


@shape_rule("Int8Flatten")
def _flatten(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """``values.reshape(prod(shape[:axis]), -1)`` with ``axis`` used as a slice bound."""
    need(op, inputs, 1)
    x = _int8(op, inputs[0], "input")
    if x.shape is None:
        return [with_shape(x, (None, None))]
    axis = int(op.arg("axis", 1))
    rows = dim_product(x.shape[:axis])
    if rows == 0:
        raise ValueError(f"cannot flatten {x} to 0 rows and -1 columns")
    return [
        with_shape(x, reshape_target((rows, -1), x.shape) if rows is not None else (None, None))
    ]

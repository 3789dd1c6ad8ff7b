"""Shape rules of the gradient ops (the executor's ``kernels_grad``): each gradient has the
shape and dtype of the forward input it is the gradient of (the kernels sum broadcast dims
back and cast to the forward input's dtype), except where the kernel computes in numpy's
promoted dtype (the activation gradients, ``FCGradient``'s dX)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.analysis.shape_rules_math import as_2d, binary_shape
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_rules_train import (
    lstm_states,
    per_row,
    size,
    softmax_loss_rows,
)
from graphtools.analysis.shape_types import (
    TensorType,
    broadcast_shapes,
    dim_product,
    promoted,
    result_dtype,
    same_dim,
    shape_rule,
)
from graphtools.ir import Op


@shape_rule("AddGradient", "SubGradient", "MulGradient", "DivGradient")
def _binary_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(dC, A, B)`` (``DivGradient``: also ``C``): dA like A, dB like B."""
    need(op, inputs, 4 if op.type == "DivGradient" else 3)
    g, a, b = inputs[:3]
    out = binary_shape(op, a, b)
    if out is not None and g.shape is not None:
        broadcast_shapes(g.shape, out)
    return [a, b]


@shape_rule("FCGradient")
def _fc_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, W, dY)``: dW like W, db (N,) in dY's dtype, dX of X's shape in the
    dtype of ``dY @ W``."""
    need(op, inputs, 3)
    x, w, dy = inputs[:3]
    rows = k_x = outputs = k_w = None
    if x.shape is not None:
        rows, k_x = as_2d(x.shape, int(op.arg("axis", 1)))
    if w.shape is not None:
        outputs, k_w = as_2d(w.shape, int(op.arg("axis_w", 1)))
    same_dim(k_x, k_w, f"the input {x} has {k_x} features, the weight {w} expects")
    if isinstance(rows, int) and isinstance(outputs, int):
        same_dim(size(dy), rows * outputs, f"dY {dy} against {rows} rows of {outputs} outputs")
    return [
        w,
        TensorType(dy.dtype, (outputs,)),
        TensorType(result_dtype(np.matmul, dy.dtype, w.dtype), x.shape),
    ]


@shape_rule("ConvGradient")
def _conv_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, W, dY)``: dW like W, db (unless ``no_bias``) of W's filters in dY's
    dtype, dX (when asked) like X."""
    need(op, inputs, 3)
    x, w, dy = inputs[:3]
    filters = None
    if w.shape is not None:
        filters = w.shape[-1] if op.arg("order", b"NCHW") in (b"NHWC", "NHWC") else w.shape[0]
    outputs = [w]
    if not op.arg("no_bias", 0):
        outputs.append(TensorType(dy.dtype, None if w.shape is None else (filters,)))
    if len(op.outputs) > len(outputs):
        outputs.append(x)
    return outputs


@shape_rule("MaxPoolGradient", "AveragePoolGradient")
def _pool_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, Y, dY)``: dX like X."""
    need(op, inputs, 3)
    return [inputs[0]]


def _relu_gradient_of(y: Any, dy: Any) -> Any:
    return np.where(y > 0, dy, np.zeros((), dy.dtype))


def _sigmoid_gradient_of(y: Any, dy: Any) -> Any:
    return dy * y * (1 - y)


def _tanh_gradient_of(y: Any, dy: Any) -> Any:
    return dy * (1 - y * y)


_ACTIVATIONS = {
    "ReluGradient": _relu_gradient_of,
    "SigmoidGradient": _sigmoid_gradient_of,
    "TanhGradient": _tanh_gradient_of,
}


@shape_rule(*_ACTIVATIONS)
def _activation_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(Y, dY)``, element-wise: their broadcast shape."""
    need(op, inputs, 2)
    y, dy = inputs[0], inputs[1]
    dtype = result_dtype(_ACTIVATIONS[op.type], y.dtype, dy.dtype)
    if y.shape is None or dy.shape is None:
        return [TensorType(dtype, None)]
    return [TensorType(dtype, broadcast_shapes(y.shape, dy.shape))]


def _softmax_gradient_of(y: Any, dy: Any) -> Any:
    return y * (dy - (dy * y).sum(axis=1, keepdims=True))


@shape_rule("SoftmaxGradient")
def _softmax_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(Y, dY)`` coerced to 2-D at ``axis``: dX of Y's shape."""
    need(op, inputs, 2)
    y, dy = inputs[0], inputs[1]
    dtype = result_dtype(_softmax_gradient_of, y.dtype, dy.dtype)
    if y.shape is not None and dy.shape is not None:
        axis = int(op.arg("axis", 1))
        rows = broadcast_shapes(as_2d(y.shape, axis), as_2d(dy.shape, axis))
        same_dim(dim_product(rows), size(y), f"dY {dy} against Y {y} at axis {axis}")
    return [TensorType(dtype, y.shape)]


@shape_rule("AveragedLossGradient")
def _averaged_loss_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, dLoss)``: dX of X's shape, in the dtype the two promote to."""
    need(op, inputs, 2)
    x, dloss = inputs[0], inputs[1]
    return [TensorType(promoted(x.dtype, dloss.dtype), x.shape)]


def _difference_gradient_of(x: Any, y: Any, dout: Any) -> Any:
    return (x - y) * dout


def _scaled(x: Any, dout: Any) -> Any:
    return x * dout


def _rows_of(x: TensorType, dout: TensorType) -> None:
    if x.shape is not None:
        rows = per_row(x.shape)
        same_dim(size(dout), rows, f"the output gradient {dout} against {rows} rows")


@shape_rule("SquaredL2DistanceGradient")
def _squared_l2_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, Y, dOut)``: dX like X's shape, dY like Y's."""
    need(op, inputs, 3)
    x, y, dout = inputs[:3]
    _rows_of(x, dout)
    dtype = result_dtype(_difference_gradient_of, x.dtype, y.dtype, dout.dtype)
    return [TensorType(dtype, x.shape), TensorType(dtype, y.shape)]


@shape_rule("DotProductGradient")
def _dot_product_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, Y, dOut)``: dX = Y * dOut of X's shape, dY = X * dOut of Y's."""
    need(op, inputs, 3)
    x, y, dout = inputs[:3]
    _rows_of(x, dout)
    return [
        TensorType(result_dtype(_scaled, y.dtype, dout.dtype), x.shape),
        TensorType(result_dtype(_scaled, x.dtype, dout.dtype), y.shape),
    ]


@shape_rule("SoftmaxWithLossGradient")
def _softmax_with_loss_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(X, labels[, weights], P, dLoss)``: dX like X."""
    if len(inputs) not in (4, 5):
        raise ValueError(f"SoftmaxWithLossGradient needs 4 or 5 inputs, got {len(inputs)}")
    x = inputs[0]
    softmax_loss_rows(op, x, inputs[1])
    same_dim(size(inputs[-2]), size(x), f"P {inputs[-2]} against X {x}")
    return [x]


@shape_rule("LSTMUnitGradient")
def _lstm_unit_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(H_prev, C_prev, G, [seq_lengths,] t, H, C, dH, dC)``: the gradients of
    H_prev, C_prev and G, like them."""
    if len(inputs) not in (8, 9):
        raise ValueError(f"LSTMUnitGradient needs 8 or 9 inputs, got {len(inputs)}")
    lstm_states(op, inputs)
    return list(inputs[:3])

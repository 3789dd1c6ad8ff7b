"""Shape rules of the training ops (the executor's ``kernels_train``): the losses,
``DotProduct``, ``LSTMUnit`` and the ops of an SGD step (``WeightedSum``, ``LearningRate``,
``ZeroGradient``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    count,
    dim_product,
    result_dtype,
    same_dim,
    same_shape,
    shape_rule,
    with_shape,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

_F32 = np.dtype(np.float32)
_POLICIES = ("fixed", "step", "exp", "inv")


def size(t: TensorType) -> Dim:
    """The number of elements of ``t`` as a dim (``None`` when not known)."""
    return None if t.shape is None else dim_product(t.shape)


def per_row(shape: tuple[Dim, ...]) -> Dim:
    """The rows of a per-row op (``SquaredL2Distance``, ``DotProduct``): the first dim."""
    return shape[0] if shape else 1


def _row_dot(x: Any, y: Any) -> Any:
    return (x * y).sum(axis=1)


@shape_rule("AveragedLoss")
def _averaged_loss(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """The mean of every element: a 0-d value of the input's dtype."""
    need(op, inputs, 1)
    return [with_shape(inputs[0], ())]


@shape_rule("SquaredL2Distance", "DotProduct")
def _per_row(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """One value per row of two equal-shaped inputs: (N,). ``SquaredL2Distance`` keeps X's
    dtype; ``DotProduct`` has numpy's for the sum of products."""
    need(op, inputs, 2)
    x, y = inputs[0], inputs[1]
    shape = x.shape
    if x.shape is not None and y.shape is not None:
        shape = same_shape(x.shape, y.shape, f"{op.type} needs equal shapes")
    elif shape is None:
        shape = y.shape
    dtype = x.dtype
    if op.type == "DotProduct":
        dtype = result_dtype(_row_dot, x.dtype, y.dtype)
    return [TensorType(dtype, None if shape is None else (per_row(shape),))]


def softmax_loss_rows(op: Op, x: TensorType, labels: TensorType) -> None:
    """Check the labels of ``SoftmaxWithLoss`` (and its gradient) against the logits ``x``,
    coerced to 2-D at ``axis``: one class index per row, or (``label_prob``) a distribution
    per row."""
    if op.arg("spatial", 0):
        raise UnsupportedOpError("SoftmaxWithLoss with spatial=1 is not supported")
    if x.shape is None:
        return
    axis = canonical_axis(int(op.arg("axis", 1)), len(x.shape))
    rows = dim_product(x.shape[:axis])
    wanted = dim_product(x.shape) if op.arg("label_prob", 0) else rows
    same_dim(size(labels), wanted, f"labels {labels} against logits {x} at axis {axis}")


@shape_rule("SoftmaxWithLoss")
def _softmax_with_loss(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """The probabilities (like X) and the 0-d loss, in X's dtype."""
    need(op, inputs, 2)
    x = inputs[0]
    softmax_loss_rows(op, x, inputs[1])
    return [x, with_shape(x, ())]


def lstm_states(op: Op, inputs: list[TensorType]) -> None:
    """Check ``(H_prev, C_prev, G)`` of an LSTM step: N rows of D state values, 4 x D gate
    values per row (whatever the inputs' exact shapes, as the kernels reshape them)."""
    h_prev, c_prev, gates = inputs[:3]
    if c_prev.shape is not None and not c_prev.shape:
        raise ValueError(f"C_prev must have rank >= 1, got {c_prev}")
    cells = count(c_prev.shape)
    if cells is None or c_prev.shape is None:
        return
    width = c_prev.shape[-1]
    if not isinstance(width, int) or width == 0:
        return
    rows = cells // width
    for t, per in ((h_prev, width), (gates, 4 * width)):
        same_dim(count(t.shape), rows * per, f"{t} against {rows} rows of {per} values")


@shape_rule("LSTMUnit")
def _lstm_unit(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(H_prev, C_prev, G, [seq_lengths,] timestep)``: H and C like H_prev, C_prev."""
    need(op, inputs, 4)
    lstm_states(op, inputs)
    return [inputs[0], inputs[1]]


@shape_rule("ZeroGradient")
def _zero_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """No output: it only marks its input as needing a gradient."""
    return []


@shape_rule("WeightedSum")
def _weighted_sum(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """``sum(X_k * w_k)`` over pairs ``(X_k, w_k)``, each ``w_k`` one value: like ``X_0``."""
    if not inputs or len(inputs) % 2:
        raise ValueError(f"WeightedSum needs pairs of inputs, got {len(inputs)}")
    x0 = inputs[0]
    for x, w in zip(inputs[::2], inputs[1::2], strict=True):
        if x.shape is not None and x0.shape is not None:
            same_shape(x.shape, x0.shape, "WeightedSum needs inputs of X_0's shape")
        same_dim(count(w.shape), 1, f"the weight {w} must hold one value")
    return [x0]


@shape_rule("LearningRate")
def _learning_rate(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """The rate at the iteration held by the input: float32 ``[1]``."""
    need(op, inputs, 1)
    policy = op.arg("policy", b"fixed")
    policy = policy.decode() if isinstance(policy, bytes) else str(policy)
    if policy not in _POLICIES:
        raise UnsupportedOpError(f"LearningRate policy {policy!r} is not supported")
    return [TensorType(_F32, (1,))]

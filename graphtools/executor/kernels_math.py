"""Math kernels: FC, matrix products, element-wise arithmetic with Caffe2's broadcast rules,
unary functions and reductions."""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import canonical_axis, order
from graphtools.executor.registry import kernel
from graphtools.ir import Op


def _as_2d(x: np.ndarray, axis: int) -> np.ndarray:
    axis = canonical_axis(axis, x.ndim) if x.ndim else 0
    return x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))


def fc(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, axis: int, axis_w: int, transposed: bool
) -> np.ndarray:
    """Caffe2 FC: X coerced to 2-D at ``axis``, W at ``axis_w``; Y = X W^T + b."""
    x2 = _as_2d(x, axis)
    w2 = _as_2d(w, axis_w)
    if transposed:
        w2 = w2.T
    if x2.shape[1] != w2.shape[1]:
        raise ValueError(f"FC input has {x2.shape[1]} features, the weight expects {w2.shape[1]}")
    y = x2 @ w2.T
    if b is not None:
        if b.size != w2.shape[0]:
            raise ValueError(f"FC bias has {b.size} values for {w2.shape[0]} outputs")
        y = y + b.reshape(1, -1)
    axis = canonical_axis(axis, x.ndim)
    return y.reshape(*x.shape[:axis], w2.shape[0]).astype(x.dtype, copy=False)


@kernel("FC", "FCTransposed")
def _fc(op: Op, inputs: list[Any]) -> list[Any]:
    x, w = np.asarray(inputs[0]), np.asarray(inputs[1])
    b = np.asarray(inputs[2]) if len(inputs) > 2 else None
    axis, axis_w = int(op.arg("axis", 1)), int(op.arg("axis_w", 1))
    return [fc(x, w, b, axis, axis_w, op.type == "FCTransposed")]


@kernel("MatMul")
def _matmul(op: Op, inputs: list[Any]) -> list[Any]:
    a = _as_2d(np.asarray(inputs[0]), int(op.arg("axis_a", 1)))
    b = _as_2d(np.asarray(inputs[1]), int(op.arg("axis_b", 1)))
    if op.arg("trans_a", 0):
        a = a.T
    if op.arg("trans_b", 0):
        b = b.T
    return [a @ b]


@kernel("BatchMatMul")
def _batch_matmul(op: Op, inputs: list[Any]) -> list[Any]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if op.arg("trans_a", 0) and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if op.arg("trans_b", 0) and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    if not op.arg("broadcast", 0) and a.ndim >= 3 and a.shape[:-2] != b.shape[:-2]:
        raise ValueError(
            f"batch dims {a.shape[:-2]} and {b.shape[:-2]} differ (set broadcast=1 to broadcast)"
        )
    return [np.matmul(a, b)]


def legacy_broadcast(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """B reshaped for Caffe2's ``broadcast=1`` rule: B matches A's dims starting at ``axis``.

    ``axis=-1`` means suffix matching; dims of B equal to 1 broadcast, every other dim must
    equal A's, and the result always has A's shape.
    """
    if b.ndim > a.ndim:
        raise ValueError(f"B has more dims ({b.ndim}) than A ({a.ndim}) with broadcast=1")
    if axis == -1:
        axis = a.ndim - b.ndim
    if not 0 <= axis <= a.ndim - b.ndim:
        raise ValueError(f"broadcast axis {axis} does not fit A {list(a.shape)}, B {list(b.shape)}")
    for i, size in enumerate(b.shape):
        if size != 1 and size != a.shape[axis + i]:
            raise ValueError(f"B {list(b.shape)} does not match A {list(a.shape)} at axis {axis}")
    return b.reshape((1,) * axis + b.shape + (1,) * (a.ndim - axis - b.ndim))


def binary_operands(op: Op, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both operands of an element-wise op, ``B`` reshaped for the legacy rule when asked."""
    if op.arg("broadcast", 0):
        axis = op.arg("axis")
        if axis is None and op.has_arg("axis_str"):
            axis = order(op).index(op.arg("axis_str").decode())
        b = legacy_broadcast(a, b, -1 if axis is None else int(axis))
    return a, b


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b))
    return np.true_divide(a, b)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": _int_div,
}


@kernel(*_BINARY)
def _binary(op: Op, inputs: list[Any]) -> list[Any]:
    a, b = binary_operands(op, np.asarray(inputs[0]), np.asarray(inputs[1]))
    y = _BINARY[op.type](a, b)
    return [np.asarray(y).astype(np.result_type(a, b), copy=False)]


@kernel("Sum")
def _sum(op: Op, inputs: list[Any]) -> list[Any]:
    arrays = [np.asarray(v) for v in inputs]
    for array in arrays[1:]:
        if array.shape != arrays[0].shape:
            raise ValueError(f"Sum needs equal shapes, got {[list(a.shape) for a in arrays]}")
    return [reduce(np.add, arrays[1:], arrays[0].copy())]


@kernel("Scale")
def _scale(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    return [x * np.asarray(op.arg("scale", 1.0), x.dtype)]


_UNARY = {
    "Exp": np.exp,
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Abs": np.abs,
    "Neg": np.negative,
    "Sqr": np.square,
}
_FLOAT_UNARY = frozenset({"Exp", "Log", "Sqrt"})
"""Registered by Caffe2 for ``TensorTypes<float>`` only."""


def _unary(op: Op, inputs: list[Any]) -> list[Any]:
    return [_UNARY[op.type](np.asarray(inputs[0]))]


kernel(*_FLOAT_UNARY, floats=True)(_unary)
kernel(*(t for t in _UNARY if t not in _FLOAT_UNARY))(_unary)


@kernel("Clip")
def _clip(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    low = op.arg("min")
    high = op.arg("max")
    y = x
    if low is not None:
        y = np.maximum(y, np.asarray(low, x.dtype))
    if high is not None:
        y = np.minimum(y, np.asarray(high, x.dtype))
    return [y]


_REDUCE: dict[str, Callable[..., Any]] = {
    "ReduceMean": np.mean,
    "ReduceSum": np.sum,
    "ReduceMax": np.max,
    "ReduceMin": np.min,
}


@kernel(*_REDUCE)
def _reduce(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    axes = op.arg("axes")
    axis = None if axes is None else tuple(canonical_axis(int(a), x.ndim) for a in axes)
    y = _REDUCE[op.type](x, axis=axis, keepdims=bool(op.arg("keepdims", 1)))
    return [np.asarray(y).astype(x.dtype, copy=False)]


@kernel("ArgMax", "ArgMin")
def _arg_reduce(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    axis = canonical_axis(int(op.arg("axis", -1)), x.ndim)
    fn = np.argmax if op.type == "ArgMax" else np.argmin
    y = fn(x, axis=axis, keepdims=bool(op.arg("keepdims", 1)))
    return [y.astype(np.int64)]

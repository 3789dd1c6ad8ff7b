"""Shape rules of the math ops (the executor's ``kernels_math``): FC and matrix products,
element-wise arithmetic with numpy and Caffe2's legacy (``broadcast=1``) broadcasting, unary
functions and reductions."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.op_args import canonical_axis, order
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    broadcast_shapes,
    count,
    dim_product,
    format_shape,
    promoted,
    result_dtype,
    same_dim,
    same_shape,
    shape_rule,
    with_shape,
)
from graphtools.ir import Op


def as_2d(shape: tuple[Dim, ...], axis: int) -> tuple[Dim, Dim]:
    """A shape coerced to 2-D at ``axis`` (Caffe2's ``size_to_dim`` / ``size_from_dim``)."""
    axis = canonical_axis(axis, len(shape)) if shape else 0
    return dim_product(shape[:axis]), dim_product(shape[axis:])


@shape_rule("FC", "FCTransposed")
def fc_rule(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Y = X W^T + b with X coerced to 2-D at ``axis`` and W at ``axis_w``: the output keeps
    X's dims before ``axis`` and adds one of W's output count."""
    need(op, inputs, 2)
    x, w = inputs[0], inputs[1]
    axis, axis_w = int(op.arg("axis", 1)), int(op.arg("axis_w", 1))
    k_x = n = k_w = None
    if x.shape is not None:
        k_x = as_2d(x.shape, axis)[1]
    if w.shape is not None:
        n, k_w = as_2d(w.shape, axis_w)
        if op.type == "FCTransposed":
            n, k_w = k_w, n
    same_dim(k_x, k_w, f"the input {x} has {k_x} features at axis {axis}, the weight {w} expects")
    if len(inputs) > 2:
        n = same_dim(n, count(inputs[2].shape), f"bias {inputs[2]} against the outputs of {w}")
    if x.shape is None:
        return [with_shape(x, None)]
    lead = x.shape[: canonical_axis(axis, len(x.shape))]
    return [with_shape(x, (*lead, n))]


def _inner(a: Dim, b: Dim, what: str) -> None:
    same_dim(a, b, what)


@shape_rule("MatMul")
def _matmul(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    a, b = inputs[0], inputs[1]
    dtype = result_dtype(np.matmul, a.dtype, b.dtype)
    a2 = as_2d(a.shape, int(op.arg("axis_a", 1))) if a.shape is not None else (None, None)
    b2 = as_2d(b.shape, int(op.arg("axis_b", 1))) if b.shape is not None else (None, None)
    if op.arg("trans_a", 0):
        a2 = (a2[1], a2[0])
    if op.arg("trans_b", 0):
        b2 = (b2[1], b2[0])
    _inner(a2[1], b2[0], f"MatMul inner dims of {a} and {b}")
    return [TensorType(dtype, (a2[0], b2[1]))]


def matmul_shape(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """``np.matmul``'s output shape (1-D operands promoted then dropped, batch broadcast)."""
    if not a or not b:
        raise ValueError("matmul operands must have at least one dimension")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    _inner(a2[-1], b2[-2], f"matmul inner dims of {format_shape(a)} and {format_shape(b)}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = (*out[:-2], out[-1])
    if len(b) == 1:
        out = out[:-1]
    return out


@shape_rule("BatchMatMul")
def _batch_matmul(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    a, b = inputs[0], inputs[1]
    dtype = result_dtype(np.matmul, a.dtype, b.dtype)
    if a.shape is None or b.shape is None:
        return [TensorType(dtype, None)]
    sa, sb = a.shape, b.shape
    if op.arg("trans_a", 0) and len(sa) >= 2:
        sa = (*sa[:-2], sa[-1], sa[-2])
    if op.arg("trans_b", 0) and len(sb) >= 2:
        sb = (*sb[:-2], sb[-1], sb[-2])
    if not op.arg("broadcast", 0) and len(sa) >= 3:
        same_shape(sa[:-2], sb[:-2], "batch dims differ (set broadcast=1 to broadcast)")
    return [TensorType(dtype, matmul_shape(sa, sb))]


def legacy_broadcast(op: Op, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> None:
    """Check Caffe2's ``broadcast=1`` rule: B matches A's dims from ``axis`` (or as a suffix)."""
    axis_arg = op.arg("axis")
    if axis_arg is None and op.has_arg("axis_str"):
        axis_arg = order(op).index(op.arg("axis_str").decode())
    axis = -1 if axis_arg is None else int(axis_arg)
    if len(b) > len(a):
        raise ValueError(f"B {format_shape(b)} has more dims than A {format_shape(a)}")
    if axis == -1:
        axis = len(a) - len(b)
    if not 0 <= axis <= len(a) - len(b):
        raise ValueError(f"broadcast axis {axis} does not fit A {format_shape(a)}")
    for i, size in enumerate(b):
        if size != 1:
            same_dim(size, a[axis + i], f"B {format_shape(b)} against A {format_shape(a)}")


def binary_shape(op: Op, a: TensorType, b: TensorType) -> tuple[Dim, ...] | None:
    """The output shape of an element-wise op on ``a`` and ``b``: numpy broadcasting, or A's
    shape under Caffe2's legacy ``broadcast=1`` (``None`` when not known)."""
    if op.arg("broadcast", 0):
        if a.shape is not None and b.shape is not None:
            legacy_broadcast(op, a.shape, b.shape)
        return a.shape
    if a.shape is None or b.shape is None:
        return None
    return broadcast_shapes(a.shape, b.shape)


@shape_rule("Add", "Sub", "Mul", "Div")
def _binary(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    a, b = inputs[0], inputs[1]
    return [TensorType(promoted(a.dtype, b.dtype), binary_shape(op, a, b))]


@shape_rule("Sum")
def _sum(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    shape = None
    for t in inputs:
        if t.shape is not None:
            shape = (
                t.shape if shape is None else same_shape(shape, t.shape, "Sum needs equal shapes")
            )
    dtype = promoted(*(t.dtype for t in inputs))
    return [TensorType(dtype, shape)]


@shape_rule("Scale", "Clip")
def _same_dtype(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    return [inputs[0]]


_UNARY = {
    "Exp": np.exp,
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Abs": np.abs,
    "Neg": np.negative,
    "Sqr": np.square,
}


@shape_rule(*_UNARY)
def _unary(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    return [TensorType(result_dtype(_UNARY[op.type], x.dtype), x.shape)]


def reduced(shape: tuple[Dim, ...], axes: list[int] | None, keepdims: bool) -> tuple[Dim, ...]:
    """``shape`` after reducing ``axes`` (all when ``None``)."""
    picked = (
        set(range(len(shape))) if axes is None else {canonical_axis(a, len(shape)) for a in axes}
    )
    if keepdims:
        return tuple(1 if i in picked else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in picked)


@shape_rule("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.shape is None:
        return [x]
    axes = op.arg("axes")
    picked = None if axes is None else [int(a) for a in axes]
    return [with_shape(x, reduced(x.shape, picked, bool(op.arg("keepdims", 1))))]


@shape_rule("ArgMax", "ArgMin")
def _arg_reduce(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    int64 = np.dtype(np.int64)
    if x.shape is None:
        return [TensorType(int64, None)]
    axis = int(op.arg("axis", -1))
    return [TensorType(int64, reduced(x.shape, [axis], bool(op.arg("keepdims", 1))))]

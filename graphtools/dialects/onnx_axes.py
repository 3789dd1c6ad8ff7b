"""How ONNX ops treat the axes of their inputs: along which axes an op combines several input
elements into one output element *while the output keeps that axis*.

Shapes show most combining: a reduction drops or shrinks the axis it reduces, a ``MatMul``
drops its contracted axis. They do not show an op that combines along an axis and keeps it
(a ``Softmax`` over its axis, a ``LayerNormalization`` over the last axes, an ``LSTM`` along
its sequence axis, a training-mode ``BatchNormalization`` over the batch): this table lists
those, from the operators' specifications. ``make-dynamic-batch`` asks it whether an op mixes
the rows of a batch. ``None`` means the op is not known (another domain): anything may happen.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import onnx

from graphtools.ir import Op

__all__ = ["broadcasts", "combined_axes"]

Constant = Callable[[str], "np.ndarray | None"]
"""The value of a constant input by name (``None``: not a constant)."""


def _axis(value: int, rank: int) -> int:
    return value + rank if value < 0 else value


def _from(first: int, rank: int) -> frozenset[int]:
    return frozenset(range(_axis(first, rank), rank))


def _ints(op: Op, name: str, position: int, constant: Constant) -> list[int] | None:
    if len(op.inputs) > position and op.inputs[position]:
        value = constant(op.inputs[position])
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
    found = op.arg(name)
    return None if found is None else [int(v) for v in found]


def _softmax(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    if opset >= 13:
        return frozenset({_axis(int(op.arg("axis", -1)), rank)})
    return _from(int(op.arg("axis", 1)), rank)


def _reduce(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    axes = _ints(op, "axes", 1, constant)
    if axes is None or not axes:
        return frozenset() if op.arg("noop_with_empty_axes", 0) else frozenset(range(rank))
    return frozenset(_axis(a, rank) for a in axes)


def _norm(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    training = op.arg("training_mode", 0) or any(op.outputs[1:])
    if opset < 7 and not op.arg("is_test", 0):
        training = True
    return (
        frozenset(a for a in range(rank) if a != 1) if training and position == 0 else frozenset()
    )


def _recurrent(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    if position != 0:
        return frozenset()
    return frozenset({1 if op.arg("layout", 0) else 0})


def _einsum(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    equation = op.arg("equation", b"")
    text = (equation.decode() if isinstance(equation, bytes) else str(equation)).replace(" ", "")
    if "->" not in text or "." in text:
        return frozenset(range(rank))
    operands, output = text.split("->")
    terms = operands.split(",")
    if position >= len(terms):
        return frozenset(range(rank))
    return frozenset(i for i, letter in enumerate(terms[position]) if letter not in output)


def _matmul(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    if rank < 2:
        return frozenset({0})
    return frozenset({rank - 1 if position == 0 else rank - 2})


def _gemm(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
    if position == 0:
        return frozenset({0 if op.arg("transA", 0) else 1})
    if position == 1:
        return frozenset({1 if op.arg("transB", 0) else 0})
    return frozenset()


def _first_input(axes: Callable[[Op, int], frozenset[int]]) -> _Rule:
    def rule(op: Op, position: int, rank: int, constant: Constant, opset: int) -> frozenset[int]:
        return axes(op, rank) if position == 0 else frozenset()

    return rule


def _gather_axis(op: Op, rank: int) -> frozenset[int]:
    return frozenset({_axis(int(op.arg("axis", 0)), rank)})


_Rule = Callable[[Op, int, int, Constant, int], frozenset[int]]

_RULES: dict[str, _Rule] = {
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Hardmax": _softmax,
    "CumSum": lambda op, p, rank, constant, opset: (
        frozenset(_axis(a, rank) for a in (_ints(op, "axis", 1, constant) or range(rank)))
        if p == 0
        else frozenset()
    ),
    "LayerNormalization": _first_input(lambda op, rank: _from(int(op.arg("axis", -1)), rank)),
    "MeanVarianceNormalization": _first_input(
        lambda op, rank: frozenset(_axis(int(a), rank) for a in op.arg("axes", (0, 2, 3)))
    ),
    "LpNormalization": _first_input(
        lambda op, rank: frozenset({_axis(int(op.arg("axis", -1)), rank)})
    ),
    "LRN": _first_input(lambda op, rank: frozenset({1})),
    "InstanceNormalization": _first_input(lambda op, rank: _from(2, rank)),
    "GroupNormalization": _first_input(lambda op, rank: _from(1, rank)),
    "BatchNormalization": _norm,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "RNN": _recurrent,
    "Scan": lambda op, p, rank, constant, opset: frozenset(range(rank)),
    "ReverseSequence": _first_input(
        lambda op, rank: frozenset({_axis(int(op.arg("time_axis", 0)), rank)})
    ),
    "Gather": _first_input(_gather_axis),
    "GatherElements": _first_input(_gather_axis),
    "ScatterElements": _first_input(_gather_axis),
    "Scatter": _first_input(_gather_axis),
    "GatherND": _first_input(lambda op, rank: _from(int(op.arg("batch_dims", 0)), rank)),
    "ScatterND": _first_input(lambda op, rank: frozenset(range(rank))),
    "DepthToSpace": _first_input(lambda op, rank: _from(1, rank)),
    "SpaceToDepth": _first_input(lambda op, rank: _from(1, rank)),
    "TopK": _first_input(lambda op, rank: frozenset({_axis(int(op.arg("axis", -1)), rank)})),
    "Einsum": _einsum,
    "MatMul": _matmul,
    "MatMulInteger": _matmul,
    "Gemm": _gemm,
    "Conv": _first_input(lambda op, rank: _from(1, rank)),
    "ConvTranspose": _first_input(lambda op, rank: _from(1, rank)),
    "ConvInteger": _first_input(lambda op, rank: _from(1, rank)),
    "QLinearConv": _first_input(lambda op, rank: _from(1, rank)),
    "MaxPool": _first_input(lambda op, rank: _from(2, rank)),
    "AveragePool": _first_input(lambda op, rank: _from(2, rank)),
    "LpPool": _first_input(lambda op, rank: _from(2, rank)),
    "GlobalMaxPool": _first_input(lambda op, rank: _from(2, rank)),
    "GlobalAveragePool": _first_input(lambda op, rank: _from(2, rank)),
    "GlobalLpPool": _first_input(lambda op, rank: _from(2, rank)),
    "Resize": _first_input(lambda op, rank: _from(2, rank)),
    "Upsample": _first_input(lambda op, rank: _from(2, rank)),
}
for _reduction in (
    "ReduceMax",
    "ReduceMin",
    "ReduceMean",
    "ReduceSum",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
):
    _RULES[_reduction] = _reduce
_RULES["ArgMax"] = _RULES["ArgMin"] = _RULES["TopK"]


def combined_axes(
    op: Op, position: int, rank: int, constant: Constant, opset: int
) -> frozenset[int]:
    """The axes of ``op``'s input ``position`` (of ``rank`` dims) along which it combines
    elements; empty for ops that work element by element or keep each row apart."""
    rule = _RULES.get(op.type)
    return frozenset() if rule is None else rule(op, position, rank, constant, opset)


@cache
def broadcasts(op_type: str, opset: int) -> bool:
    """Whether the default domain's ``op_type`` works element by element on inputs broadcast
    against each other (its schema says "multidirectional (i.e., Numpy-style)
    broadcasting"): an output element reads the elements at its own position of each input,
    so each axis of the output is the axis of the inputs it is aligned with from the right."""
    try:
        schema = onnx.defs.get_schema(op_type, opset)
    except onnx.defs.SchemaError:
        return False
    return "multidirectional" in (schema.doc or "").lower()

"""Shape rules of the comparison and boolean ops (the executor's ``kernels_logic``): bool
outputs shaped as the arithmetic ops broadcast (numpy's rule, or Caffe2's ``broadcast=1``)."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.shape_rules_math import binary_shape
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import TensorType, shape_rule
from graphtools.ir import Op

_BOOL = np.dtype(np.bool_)


def _bool_input(op: Op, t: TensorType) -> None:
    if t.dtype is not None and t.dtype != _BOOL:
        raise ValueError(f"{op.type} needs bool inputs, got {t}")


@shape_rule("LT", "LE", "GT", "GE", "EQ", "NE")
def _compare(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    return [TensorType(_BOOL, binary_shape(op, inputs[0], inputs[1]))]


@shape_rule("And", "Or", "Xor")
def _logic(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 2)
    for t in inputs[:2]:
        _bool_input(op, t)
    return [TensorType(_BOOL, binary_shape(op, inputs[0], inputs[1]))]


@shape_rule("Not")
def _not(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    _bool_input(op, inputs[0])
    return [TensorType(_BOOL, inputs[0].shape)]

"""Comparison and boolean kernels: ``LT``, ``LE``, ``GT``, ``GE``, ``EQ``, ``NE``, ``Not``,
``And``, ``Or``, ``Xor``, with the broadcast rules of the arithmetic ops; outputs are bool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphtools.executor.kernels_math import binary_operands
from graphtools.executor.registry import kernel
from graphtools.ir import Op

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
    "EQ": np.equal,
    "NE": np.not_equal,
}
_LOGIC: dict[str, Callable[[Any, Any], Any]] = {
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}


@kernel(*_COMPARE)
def _compare(op: Op, inputs: list[Any]) -> list[Any]:
    a, b = binary_operands(op, np.asarray(inputs[0]), np.asarray(inputs[1]))
    return [np.asarray(_COMPARE[op.type](a, b), dtype=bool)]


@kernel(*_LOGIC)
def _logic(op: Op, inputs: list[Any]) -> list[Any]:
    a, b = binary_operands(op, np.asarray(inputs[0]), np.asarray(inputs[1]))
    if a.dtype != np.bool_ or b.dtype != np.bool_:
        raise ValueError(f"{op.type} needs bool inputs, got {a.dtype} and {b.dtype}")
    return [np.asarray(_LOGIC[op.type](a, b), dtype=bool)]


@kernel("Not")
def _not(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    if x.dtype != np.bool_:
        raise ValueError(f"Not needs a bool input, got {x.dtype}")
    return [np.logical_not(x)]

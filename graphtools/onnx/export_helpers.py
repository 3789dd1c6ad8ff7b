"""Small emission helpers shared by the op exporters and function bodies: ONNX ops whose operands
moved from attributes to inputs across opsets (Unsqueeze, Squeeze, reductions), shape slices,
scalars and casts.

Every helper writes its nodes through the ``ExportContext`` it is given and returns the name of
the value it made (or ``out`` when given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import TensorProto

from graphtools.onnx.export_context import ExportContext, onnx_int64

__all__ = [
    "INT64",
    "Emitter",
    "cast",
    "int64s",
    "reduce",
    "scalar",
    "shape_of",
    "squeeze",
    "unsqueeze",
]

INT64 = TensorProto.INT64

_AXES_INPUT_SINCE = {"ReduceSum": 13}
"""Reductions taking axes as an input before opset 18 (the others from 18)."""


def _out(cx: ExportContext, out: str | None, hint: str) -> str:
    return out if out is not None else cx.fresh(hint)


def int64s(cx: ExportContext, values: Sequence[int], hint: str) -> str:
    """A 1-D int64 constant."""
    return cx.const(onnx_int64(values), hint)


def scalar(cx: ExportContext, value: Any, dtype: Any, hint: str) -> str:
    """A 0-d constant of ``dtype``."""
    return cx.const(np.asarray(value, dtype=dtype), hint)


def cast(cx: ExportContext, value: str, to: int, out: str | None = None) -> str:
    """``value`` cast to the ONNX elem type ``to``."""
    result = _out(cx, out, f"{value}_cast")
    cx.node("Cast", [value], [result], to=to)
    return result


def unsqueeze(cx: ExportContext, value: str, axes: Sequence[int], out: str | None = None) -> str:
    """``value`` with size-1 dims inserted at ``axes``."""
    result = _out(cx, out, f"{value}_unsqueezed")
    if cx.opset >= 13:
        cx.node("Unsqueeze", [value, int64s(cx, axes, "axes")], [result])
    else:
        cx.node("Unsqueeze", [value], [result], axes=list(axes))
    return result


def squeeze(cx: ExportContext, value: str, axes: Sequence[int], out: str | None = None) -> str:
    """``value`` without its size-1 dims ``axes``."""
    result = _out(cx, out, f"{value}_squeezed")
    if cx.opset >= 13:
        cx.node("Squeeze", [value, int64s(cx, axes, "axes")], [result])
    else:
        cx.node("Squeeze", [value], [result], axes=list(axes))
    return result


def reduce(
    cx: ExportContext,
    op_type: str,
    value: str,
    axes: Sequence[int] | str,
    keepdims: bool,
    out: str | None = None,
) -> str:
    """``op_type`` (ReduceSum, ReduceMean, ReduceMax, ...) over ``axes``: a list, or the name
    of a 1-D int64 value computed at run time (for which ``ReduceSum`` is the reduction an
    opset before 18 takes)."""
    result = _out(cx, out, f"{value}_{op_type[6:].lower()}")
    as_input = cx.opset >= _AXES_INPUT_SINCE.get(op_type, 18)
    if isinstance(axes, str):
        if not as_input:
            raise ValueError(f"{op_type} takes run-time axes from opset 18 only")
        cx.node(op_type, [value, axes], [result], keepdims=int(keepdims))
    elif as_input:
        cx.node(op_type, [value, int64s(cx, axes, "axes")], [result], keepdims=int(keepdims))
    else:
        cx.node(op_type, [value], [result], axes=list(axes), keepdims=int(keepdims))
    return result


def shape_of(
    cx: ExportContext, value: str, start: int = 0, end: int | None = None, hint: str = ""
) -> str:
    """The dims ``start:end`` of ``value``'s shape, as a 1-D int64 value."""
    result = cx.fresh(hint or f"{value}_shape")
    if start == 0 and end is None:
        cx.node("Shape", [value], [result])
    elif cx.opset >= 15:
        cx.node("Shape", [value], [result], start=start, end=end)
    else:
        full = cx.fresh(f"{value}_shape")
        cx.node("Shape", [value], [full])
        stop = np.iinfo(np.int64).max if end is None else end
        bounds = [int64s(cx, [start], "start"), int64s(cx, [stop], "end")]
        cx.node("Slice", [full, *bounds], [result])
    return result


class Emitter:
    """Terse node building for long compositions: ``e("Add", a, b)`` emits an ``Add`` through
    the context and returns its (fresh) output name; ``e.outputs(...)`` for several outputs."""

    def __init__(self, cx: ExportContext) -> None:
        self.cx = cx

    def __call__(self, op_type: str, *inputs: str, hint: str = "", **attrs: Any) -> str:
        """Emit ``op_type`` on ``inputs``; returns its output."""
        out = self.cx.fresh(hint or op_type.lower())
        self.cx.node(op_type, list(inputs), [out], **attrs)
        return out

    def outputs(self, op_type: str, inputs: Sequence[str], count: int, **attrs: Any) -> list[str]:
        """Emit ``op_type`` with ``count`` outputs; returns them."""
        outs = [self.cx.fresh(f"{op_type.lower()}_{k}") for k in range(count)]
        self.cx.node(op_type, list(inputs), outs, **attrs)
        return outs

    def const(self, value: Any, dtype: Any, hint: str = "c") -> str:
        """A constant of ``dtype``."""
        return self.cx.const(np.asarray(value, dtype=dtype), hint)

    def i64(self, *values: int) -> str:
        """A 1-D int64 constant."""
        return int64s(self.cx, values, "i")

    def scalar64(self, value: int) -> str:
        """A 0-d int64 constant."""
        return self.cx.const(np.int64(value), "n")

    def f64(self, value: float) -> str:
        """A 0-d float64 constant."""
        return self.cx.const(np.float64(value), "d")

    def column(self, value: str, index: int) -> str:
        """Element ``index`` of the last axis (the axis dropped)."""
        return self("Gather", value, self.scalar64(index), axis=-1, hint="column")

    def stack(self, *values: str) -> str:
        """``values`` stacked on a new last axis."""
        parts = [self("Unsqueeze", v, self.i64(-1)) for v in values]
        return self("Concat", *parts, axis=-1, hint="stacked")

    def vector(self, value: str) -> str:
        """A 0-d value as a 1-element vector."""
        return self("Unsqueeze", value, self.i64(0), hint="vector")

    def rows(self, value: str) -> str:
        """Dim 0 of ``value`` as a 0-d int64."""
        return self("Squeeze", self("Shape", value, end=1), self.i64(0), hint="rows")

    def groups_of(self, value: str, size: int) -> str:
        """``value`` with its last axis split in groups of ``size``: ``(..., n)`` to
        ``(..., n / size, size)``, with explicit dims (a ``-1`` fails on empty tensors)."""
        lead = self("Shape", value, end=-1, hint="lead")
        last = self("Shape", value, start=-1, hint="last")
        groups = self("Div", last, self.i64(size), hint="groups")
        shape = self("Concat", lead, groups, self.i64(size), axis=0, hint="grouped_shape")
        return self("Reshape", value, shape, hint="grouped")

"""Shape rules of the fill ops (the executor's ``kernels_fill``): given tensors, constants,
ranges, Int8 constants and random fills.

Shapes follow Caffe2's ``FillerOp``: the ``shape`` argument, or with an input its shape (its
values with ``input_as_shape=1``) followed by ``extra_shape``; a ``GivenTensor*Fill`` without
any takes the length of ``values``. Dtypes come from the op type (``GIVEN_FILL_DTYPES``), a
``dtype`` argument, or ``ConstantFill``'s ``value``. Integer fills small enough to be shapes
also give their contents to the value rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.analysis.dtypes import GIVEN_FILL_DTYPES, dtype_of
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    Values,
    count,
    explained,
    shape_rule,
    value_rule,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

#: Largest integer fill whose contents are tracked for the value rules.
MAX_TRACKED_VALUES = 64


def fill_shape(op: Op, inputs: list[TensorType], values: list[Values | None]) -> TensorType:
    """The output shape of a filler op as a ``TensorType`` without dtype (``FillerOp``)."""
    if inputs:
        if op.arg("shape") is not None:
            raise ValueError("a fill op cannot take both a 'shape' argument and an input")
        extra = tuple(int(v) for v in op.arg("extra_shape", ()))
        if op.arg("input_as_shape", 0):
            given = values[0]
            if given is None:
                length = count(inputs[0].shape)
                shape = None if length is None else (None,) * length + extra
                why = "data-dependent: the shape is read from an input whose values are unknown"
                return explained(TensorType(None, shape), why)
            return TensorType(None, (*given, *extra))
        source = inputs[0].shape
        return TensorType(None, None if source is None else (*source, *extra))
    if op.arg("extra_shape") is not None:
        raise ValueError("'extra_shape' needs an input")
    if op.arg("input_as_shape", 0):
        raise ValueError("'input_as_shape' needs an input")
    arg: Any = op.arg("shape", ())
    dims = arg if isinstance(arg, tuple) else (arg,)
    return TensorType(None, tuple(int(v) for v in dims))


def _typed(shape: TensorType, dtype: Any, quantized: bool = False) -> TensorType:
    out = TensorType(np.dtype(dtype), shape.shape, quantized)
    reason = getattr(shape, "why", None)
    return explained(out, reason) if reason else out


def _fill_dtype(code: Any) -> Any:
    try:
        return dtype_of(code)
    except ValueError as exc:
        raise UnsupportedOpError(str(exc)) from exc


def _value_count(values: Any, dtype: Any) -> int:
    """How many elements a ``values`` argument gives (as ``_given_values`` reads it)."""
    if isinstance(values, bytes):
        return 1 if dtype is object else len(values)
    return len(values) if isinstance(values, tuple) else 1


def _checked(
    op: Op, inputs: list[TensorType], values: list[Values | None], size: int
) -> TensorType:
    """The fill's shape: from its arguments or input, else ``values``' own (1-D)."""
    if not inputs and not op.has_arg("shape"):
        return TensorType(None, (size,))
    shape = fill_shape(op, inputs, values)
    known = count(shape.shape)
    if known is not None and known != size:
        raise ValueError(f"{size} values do not fill shape {list(shape.shape or ())}")
    return shape


def _given_dtype(op: Op) -> Any:
    dtype = GIVEN_FILL_DTYPES[op.type]
    if op.type == "GivenTensorFill" and op.has_arg("dtype"):
        dtype = _fill_dtype(op.arg("dtype"))
    return dtype


@shape_rule(*GIVEN_FILL_DTYPES, values=True)
def _given_tensor_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    dtype = _given_dtype(op)
    size = _value_count(op.arg("values", ()), dtype)
    return [_typed(_checked(op, inputs, values, size), dtype)]


def _byte_count(values: Any) -> int:
    if isinstance(values, tuple):
        if all(isinstance(v, bytes) for v in values):
            return sum(len(v) for v in values)
        return len(values)
    return len(values) if isinstance(values, bytes) else 1


@shape_rule("GivenTensorByteStringToUInt8Fill", values=True)
def _given_byte_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    size = _byte_count(op.arg("values", b""))
    return [_typed(_checked(op, inputs, values, size), np.uint8)]


@shape_rule("Int8GivenTensorFill", values=True)
def _int8_given_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    size = _byte_count(op.arg("values", b""))
    return [_typed(_checked(op, inputs, values, size), np.uint8, quantized=True)]


@shape_rule("Int8GivenIntTensorFill", values=True)
def _int8_given_int_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    size = _value_count(op.arg("values", ()), np.int32)
    return [_typed(_checked(op, inputs, values, size), np.int32, quantized=True)]


def _constant_dtype(op: Op) -> Any:
    value = op.arg("value", 0.0)
    if op.has_arg("dtype"):
        dtype = _fill_dtype(op.arg("dtype"))
    elif isinstance(value, int):
        dtype = np.int64
    else:
        dtype = np.float32
    if isinstance(value, bytes) and dtype is not object:
        raise ValueError(f"string value {value!r} for a numeric dtype")
    return dtype


@shape_rule("ConstantFill", values=True)
def _constant_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    return [_typed(fill_shape(op, inputs, values), _constant_dtype(op))]


_FLOAT_FILLS = ("RangeFill", "XavierFill", "MSRAFill", "GaussianFill")


@shape_rule(*_FLOAT_FILLS, values=True)
def _float_fill(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    return [_typed(fill_shape(op, inputs, values), np.float32)]


@shape_rule("UniformFill", "UniformIntFill", values=True)
def _uniform_fill(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[TensorType]:
    """With three inputs the last two are the bounds; the shape comes from the first."""
    if len(inputs) == 3:
        inputs, values = inputs[:1], values[:1]
    dtype = np.int32 if op.type == "UniformIntFill" else np.float32
    return [_typed(fill_shape(op, inputs, values), dtype)]


def _as_dims(items: Any) -> Values | None:
    if not isinstance(items, tuple):
        items = (items,)
    if len(items) > MAX_TRACKED_VALUES or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in items
    ):
        return None
    return tuple(int(v) for v in items)


@value_rule("GivenTensorIntFill", "GivenTensorInt64Fill", "GivenTensorInt16Fill")
def _given_int_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    return [_as_dims(op.arg("values", ()))]


@value_rule("ConstantFill")
def _constant_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    if not np.issubdtype(_constant_dtype(op), np.integer):
        return [None]
    size = count(fill_shape(op, inputs, values).shape)
    value = op.arg("value", 0)
    if size is None or size > MAX_TRACKED_VALUES or not isinstance(value, int):
        return [None]
    filled: tuple[Dim, ...] = (int(value),) * size
    return [filled]

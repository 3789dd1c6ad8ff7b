"""Fill kernels: given tensors, constants, ranges, int8 constants and seeded random fills.

Shapes follow Caffe2's ``FillerOp``: the ``shape`` argument, or with an input its shape (its
values when ``input_as_shape=1``) followed by ``extra_shape``. Random fills (``RANDOM_FILLS``)
draw from ``OpContext.rng``, so they are deterministic given the op's ``random_seed`` or the
workspace seed (the generator is numpy's, not Caffe2's: the values differ from Caffe2's, their
distribution does not). ``FILL_OPS`` lists every type registered here, which is what
``graphtools.compat.params`` accepts in an init_net.
"""

from __future__ import annotations

from math import prod, sqrt
from typing import Any

import numpy as np

from graphtools.analysis.dtypes import GIVEN_FILL_DTYPES, dtype_of
from graphtools.errors import UnsupportedOpError
from graphtools.executor.registry import KERNELS, OpContext, kernel
from graphtools.executor.workspace import Int8Tensor
from graphtools.ir import Op


def fill_shape(op: Op, inputs: list[Any]) -> tuple[int, ...]:
    """The output shape of a filler op (Caffe2's ``FillerOp`` rules)."""
    if inputs:
        if op.arg("shape") is not None:
            raise ValueError("a fill op cannot take both a 'shape' argument and an input")
        source = np.asarray(inputs[0])
        if op.arg("input_as_shape", 0):
            shape = [int(v) for v in source.reshape(-1)]
        else:
            shape = list(source.shape)
        return (*shape, *(int(v) for v in op.arg("extra_shape", ())))
    if op.arg("extra_shape") is not None:
        raise ValueError("'extra_shape' needs an input")
    if op.arg("input_as_shape", 0):
        raise ValueError("'input_as_shape' needs an input")
    shape = op.arg("shape", ())
    return tuple(int(v) for v in (shape if isinstance(shape, tuple) else (shape,)))


#: Fills whose values are drawn from ``OpContext.rng`` rather than stored in the op.
RANDOM_FILLS = frozenset(
    {"XavierFill", "MSRAFill", "GaussianFill", "UniformFill", "UniformIntFill"}
)


def _fill_dtype(code: Any) -> Any:
    """The numpy dtype of a ``dtype`` argument; an unknown code is an unsupported op variant."""
    try:
        return dtype_of(code)
    except ValueError as exc:
        raise UnsupportedOpError(str(exc)) from exc


def _given_values(op: Op, dtype: Any) -> np.ndarray:
    values = op.arg("values", ())
    if isinstance(values, bytes):
        if dtype is not object:
            return np.frombuffer(values, dtype=np.uint8).copy()
        values = (values,)  # one string held in ``s``
    if not isinstance(values, tuple):
        values = (values,)
    if dtype is object:
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
        return array
    return np.asarray(values, dtype=dtype)


def _shaped(op: Op, inputs: list[Any], values: np.ndarray) -> np.ndarray:
    shape = fill_shape(op, inputs) if (inputs or op.has_arg("shape")) else values.shape
    if prod(shape) != values.size:
        raise ValueError(f"{values.size} values do not fill shape {list(shape)}")
    return values.reshape(shape)


@kernel(*GIVEN_FILL_DTYPES)
def _given_tensor_fill(op: Op, inputs: list[Any]) -> list[Any]:
    dtype = GIVEN_FILL_DTYPES[op.type]
    if op.type == "GivenTensorFill" and op.has_arg("dtype"):
        dtype = _fill_dtype(op.arg("dtype"))
    return [_shaped(op, inputs, _given_values(op, dtype))]


@kernel("GivenTensorByteStringToUInt8Fill")
def _given_byte_fill(op: Op, inputs: list[Any]) -> list[Any]:
    values = op.arg("values", b"")
    if isinstance(values, tuple):
        values = b"".join(values)
    return [_shaped(op, inputs, np.frombuffer(values, dtype=np.uint8).copy())]


def _quantization(op: Op) -> tuple[float, int]:
    return float(op.arg("Y_scale", 1.0)), int(op.arg("Y_zero_point", 0))


@kernel("Int8GivenTensorFill")
def _int8_given_fill(op: Op, inputs: list[Any]) -> list[Any]:
    """``values`` is one byte string (in ``s``, or as ``strings``), or integers taken mod 256."""
    values = op.arg("values", b"")
    if isinstance(values, tuple):
        if all(isinstance(v, bytes) for v in values):
            values = b"".join(values)
        else:
            values = bytes(int(v) & 0xFF for v in values)
    array = _shaped(op, inputs, np.frombuffer(values, dtype=np.uint8).copy())
    return [Int8Tensor(array, *_quantization(op))]


@kernel("Int8GivenIntTensorFill")
def _int8_given_int_fill(op: Op, inputs: list[Any]) -> list[Any]:
    array = _shaped(op, inputs, _given_values(op, np.int32))
    return [Int8Tensor(array, *_quantization(op))]


@kernel("ConstantFill")
def _constant_fill(op: Op, inputs: list[Any]) -> list[Any]:
    """``value`` (default 0.0) in ``dtype``; without ``dtype``, INT64 for an integer ``value``.

    Caffe2 infers the type from ``value`` when ``dtype`` is absent: FLOAT for a float, INT64
    for an integer.
    """
    value = op.arg("value", 0.0)
    if op.has_arg("dtype"):
        dtype = _fill_dtype(op.arg("dtype"))
    elif isinstance(value, int):
        dtype = np.int64
    else:
        dtype = np.float32
    if isinstance(value, bytes) and dtype is not object:
        raise ValueError(f"string value {value!r} for a numeric dtype")
    array = np.empty(fill_shape(op, inputs), dtype=dtype)
    array[...] = value
    return [array]


@kernel("RangeFill")
def _range_fill(op: Op, inputs: list[Any]) -> list[Any]:
    """``0, 1, 2, ...`` as float32 in row-major order over the fill shape (Caffe2's rule)."""
    shape = fill_shape(op, inputs)
    return [np.arange(prod(shape), dtype=np.float32).reshape(shape)]


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    size = prod(shape)
    fan_in = size // shape[0] if shape and shape[0] else size
    fan_out = size // shape[1] if len(shape) > 1 and shape[1] else size
    return max(fan_in, 1), max(fan_out, 1)


@kernel("XavierFill", context=True)
def _xavier_fill(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """Uniform in ``±sqrt(3 / fan_in)``, ``fan_in = size / shape[0]`` (Caffe2's rule)."""
    shape = fill_shape(op, inputs)
    scale = sqrt(3.0 / _fans(shape)[0])
    return [ctx.rng(op).uniform(-scale, scale, shape).astype(np.float32)]


@kernel("MSRAFill", context=True)
def _msra_fill(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """Gaussian with std ``sqrt(2 / fan_out)``, ``fan_out = size / shape[1]`` (Caffe2's rule)."""
    shape = fill_shape(op, inputs)
    std = sqrt(2.0 / _fans(shape)[1])
    return [ctx.rng(op).normal(0.0, std, shape).astype(np.float32)]


@kernel("GaussianFill", context=True)
def _gaussian_fill(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    shape = fill_shape(op, inputs)
    mean, std = float(op.arg("mean", 0.0)), float(op.arg("std", 1.0))
    return [ctx.rng(op).normal(mean, std, shape).astype(np.float32)]


@kernel("UniformFill", "UniformIntFill", context=True)
def _uniform_fill(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    if len(inputs) == 3:
        low, high = (np.asarray(v).item() for v in inputs[1:])
        inputs = inputs[:1]
    else:
        low, high = op.arg("min", 0), op.arg("max", 1)
    shape = fill_shape(op, inputs)
    rng = ctx.rng(op)
    if op.type == "UniformIntFill":
        return [rng.integers(int(low), int(high), shape, endpoint=True).astype(np.int32)]
    return [rng.uniform(float(low), float(high), shape).astype(np.float32)]


#: Every op type with a kernel in this module: the given, constant, range, int8 and random fills.
FILL_OPS = frozenset(name for name, entry in KERNELS.items() if entry.fn.__module__ == __name__)

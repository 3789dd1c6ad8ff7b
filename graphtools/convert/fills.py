"""Caffe2 fill ops writing given arrays: what a converted model's weights become in its
init_net (``GivenTensor*Fill`` by dtype; Int8 fills with their quantization).

The ops keep their arrays and make their ``values`` argument only when it is read or saved
(``graphtools.serde.array_fills``), so converting a model does not turn its weights into Python
floats.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from graphtools.convert.dtypes import fill_op_for
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Argument, Op
from graphtools.serde.array_fills import ArrayFill, array_fill_ops

__all__ = ["fill_op", "fill_ops", "fill_spec", "int8_fill_op", "int8_fill_spec"]


def _shape(value: np.ndarray) -> Argument:
    return Argument("shape", ints=tuple(int(d) for d in value.shape))


def fill_spec(name: str, value: np.ndarray, where: str) -> ArrayFill:
    """The ``GivenTensor*Fill`` writing ``value`` to blob ``name``.

    Raises:
        UnsupportedOpError: Caffe2 has no given-tensor fill for the dtype, naming ``where``.
    """
    value = np.asarray(value)
    op_type, field = fill_op_for(value.dtype, where)
    return ArrayFill(op_type, name, value, field, before=(_shape(value),))


def int8_fill_spec(name: str, value: np.ndarray, scale: float, zero_point: int) -> ArrayFill:
    """The Int8 fill writing the quantized ``value`` (uint8: its bytes in an
    ``Int8GivenTensorFill``; int32, a bias: ``Int8GivenIntTensorFill``) with its quantization.

    Raises:
        UnsupportedOpError: ``value`` is neither uint8 nor int32.
    """
    value = np.asarray(value)
    if value.dtype == np.uint8:
        op_type, field = "Int8GivenTensorFill", "s"
    elif value.dtype == np.int32:
        op_type, field = "Int8GivenIntTensorFill", "ints"
    else:
        raise UnsupportedOpError(
            f"initializer {name!r}: a quantized {value.dtype} tensor has no Caffe2 Int8 fill "
            "(uint8 and int32 do)"
        )
    after = (
        _shape(value),
        Argument("Y_scale", f=float(np.float32(scale))),
        Argument("Y_zero_point", i=int(zero_point)),
    )
    return ArrayFill(op_type, name, value, field, after=after)


def fill_ops(specs: Iterable[ArrayFill]) -> list[Op]:
    """The ops of ``specs``, in order."""
    return array_fill_ops(specs)


def fill_op(name: str, value: np.ndarray, where: str = "") -> Op:
    """The ``GivenTensor*Fill`` op writing ``value`` to blob ``name`` (``where`` names it in
    a refusal; the blob by default)."""
    (op,) = array_fill_ops([fill_spec(name, value, where or f"blob {name!r}")])
    return op


def int8_fill_op(name: str, value: np.ndarray, scale: float, zero_point: int) -> Op:
    """The Int8 fill op writing the quantized ``value`` with its scale and zero point."""
    (op,) = array_fill_ops([int8_fill_spec(name, value, scale, zero_point)])
    return op

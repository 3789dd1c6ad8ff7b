"""Fill ops made from numpy arrays: a converted model's weights as Caffe2 init_net ops whose
``values`` argument is made only when it is asked for or saved.

A converter holding weights as arrays describes each fill (``ArrayFill``: the op type, the blob,
the array and the arguments around its values) and gets IR ops from ``array_fill_ops``. Each is
an ``Op`` like one loaded from a file, whose source is the arrays instead of the file's bytes:
reading its ``args`` builds the Python values once (what decoding the saved op would give), and
the NetDef codec writes it straight from the array (floats as one packed field parsed in C,
bytes as they are), so a model's weights never become Python floats on their way to a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from graphtools.ir import Argument, Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import OperatorSource, argument_to_proto

__all__ = ["VALUE_FIELDS", "ArrayFill", "array_fill_ops"]

VALUE_FIELDS = ("floats", "ints", "s", "strings")
"""The Argument fields a fill's values can be held in."""
_NOT_SET = {
    "name": None,
    "engine": None,
    "device_option": None,
    "control_inputs": (),
    "is_gradient_op": None,
    "debug_info": None,
    "domain": None,
    "op_version": None,
}


@dataclass(frozen=True, eq=False)
class ArrayFill:
    """One fill op writing an array.

    Attributes:
        op_type: the Caffe2 fill (``GivenTensorFill``, ``Int8GivenTensorFill``, ...).
        blob: the blob it writes.
        values: the array, in the dtype its field holds it as (``floats``: float32 values;
            ``ints``: integers; ``s``: uint8 bytes; ``strings``: bytes objects).
        field: the Argument field of ``values`` (one of ``VALUE_FIELDS``).
        before: the arguments before ``values`` (``shape`` for ``GivenTensor*Fill``).
        after: the arguments after it (``shape``, ``Y_scale``, ``Y_zero_point`` for Int8).
    """

    op_type: str
    blob: str
    values: np.ndarray
    field: str
    before: tuple[Argument, ...] = ()
    after: tuple[Argument, ...] = ()

    def __post_init__(self) -> None:
        if self.field not in VALUE_FIELDS:
            raise ValueError(f"fill of {self.blob!r}: field {self.field!r} not in {VALUE_FIELDS}")

    def values_argument(self) -> Argument:
        """The ``values`` argument as Python values."""
        flat = self.values.reshape(-1)
        if self.field == "floats":
            return Argument("values", floats=tuple(flat.astype(np.float32).tolist()))
        if self.field == "ints":
            return Argument("values", ints=tuple(int(v) for v in flat.tolist()))
        if self.field == "s":
            return Argument("values", s=flat.astype(np.uint8).tobytes())
        return Argument("values", strings=tuple(_bytes(v) for v in flat))


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_PACKED_FLOATS = b"\x2a"
"""The tag of ``Argument.floats`` (field 5) with length-delimited (packed) encoding."""


def _values_message(fill: ArrayFill, message: caffe2_pb2.Argument) -> None:
    message.name = "values"
    flat = fill.values.reshape(-1)
    if fill.field == "floats":
        raw = flat.astype("<f4").tobytes()
        message.MergeFromString(_PACKED_FLOATS + _varint(len(raw)) + raw)
    elif fill.field == "ints":
        message.ints.extend(flat.astype(np.int64).tolist())
    elif fill.field == "s":
        message.s = flat.astype(np.uint8).tobytes()
    else:
        message.strings.extend(_bytes(v) for v in flat)


class _Record(NamedTuple):
    type: str
    input: tuple[str, ...]
    output: tuple[str, ...]


class _ArraySource(OperatorSource):
    """The fills of ``array_fill_ops``: each op's arguments from its ``ArrayFill``."""

    __slots__ = ("_fills",)

    def __init__(self, fills: Sequence[ArrayFill]) -> None:
        self._fills = fills

    def decode(self, index: int, key: str, parent: Net | None) -> Any:
        if key != "args":
            return _NOT_SET[key]
        fill = self._fills[index]
        return (*fill.before, fill.values_argument(), *fill.after)

    def has_nested_nets(self, index: int) -> bool:
        return False

    def encoded(self, index: int) -> bytes | None:
        return None  # the values are an array, not bytes of a message

    def message(self, index: int) -> caffe2_pb2.OperatorDef:
        """The OperatorDef of fill ``index``, its values packed from the array."""
        fill = self._fills[index]
        message = caffe2_pb2.OperatorDef(type=fill.op_type, output=[fill.blob])
        for argument in fill.before:
            argument_to_proto(argument, message.arg.add())
        _values_message(fill, message.arg.add())
        for argument in fill.after:
            argument_to_proto(argument, message.arg.add())
        return message


def array_fill_ops(fills: Iterable[ArrayFill]) -> list[Op]:
    """The IR ops of ``fills``, in order (owned by the net they are put in)."""
    found = list(fills)
    records = [_Record(f.op_type, (), (f.blob,)) for f in found]
    return Op.wrap_loaded(records, None, _ArraySource(found), nested=False, control=False)

"""Where the ops of a binary NetDef lie in its bytes: loaded a chunk at a time, saved as slices.

A loaded net keeps the bytes of its file, not their parsed messages (a full parse costs about
seven times the file in memory). ``read_ops`` goes through the ops ``CHUNK`` at a time, parsing
each chunk with ``netdef_lite.NetDefOpNames`` (type and blob names only; the other fields stay
unread bytes), and notes where each op lies: writers put the ops of a NetDef back to back,
canonically encoded, so ``OpBytes`` holds one offset per op. Saving, a run of unchanged ops is
one slice of the file (``OpBytes.tagged``), and an op decodes its full message from its slice
when first asked for a field the IR does not keep. A file whose ops do not lie back to back
(an unusual writer) keeps each op's bytes instead, with the same behaviour.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphtools.proto import netdef_lite_pb2
from graphtools.serde.mapped_file import MappedFile

__all__ = ["CHUNK", "OpBytes", "read_ops", "tagged_ops"]

CHUNK = 1024
"""Ops parsed at a time when loading: bounds the parsed messages alive at once."""

_TAGGED = netdef_lite_pb2.NetDefWithRawOps
_NAMES = netdef_lite_pb2.NetDefOpNames


def tagged_ops(ops: Sequence[bytes]) -> bytes:
    """``ops`` (serialized OperatorDefs) as the ``op`` fields of a NetDef: tag, length, bytes."""
    return _TAGGED(op=ops).SerializeToString()


class OpBytes:
    """Each op's bytes in a net's file (see the module docstring).

    ``starts[i]`` is where op ``i``'s field (tag, length, message) begins in ``data`` and
    ``starts[i + 1]`` where it ends; without ``data``, ``ops`` holds each op's message bytes.
    ``data`` is the file's bytes as read, or a map of the file (``keep_mapped``).
    """

    __slots__ = ("_data", "_file", "_ops", "_read_from", "_starts")

    def __init__(
        self, data: bytes | None, starts: array[int] | None, ops: list[bytes] | None
    ) -> None:
        self._data: Any = data
        self._starts = starts
        self._ops = ops
        self._file: MappedFile | None = None
        self._read_from = 0  # a mapped file's pages before this were given back

    def keep_mapped(self, path: str | Path) -> None:
        """Read the ops from a map of ``path`` from now on, instead of the bytes loaded from
        it, when the file is large and still holds those bytes (``mapped_file``)."""
        if self._data is None or self._file is not None:
            return
        mapped = MappedFile.of(path, self._data)
        if mapped is not None:
            self._file, self._data = mapped, mapped.data

    def message(self, index: int) -> bytes:
        """Op ``index``'s serialized OperatorDef.

        Raises:
            SerdeError: the mapped file changed on disk since it was loaded.
        """
        if self._ops is not None:
            return self._ops[index]
        assert self._data is not None and self._starts is not None
        if self._file is not None:
            self._file.check()
        data, start = self._data, self._starts[index] + 1  # past the tag
        while data[start] & 0x80:  # past the length (a varint)
            start += 1
        return data[start + 1 : self._starts[index + 1]]

    def check(self) -> None:
        """Refuse a mapped file that changed on disk since it was loaded (a save asks once,
        before its first slice: ``write_tagged`` does not).

        Raises:
            SerdeError: it changed.
        """
        if self._file is not None:
            self._file.check()

    def write_tagged(self, first: int, end: int, write: Callable[[Any], object]) -> None:
        """Write ops ``first .. end - 1`` as the ``op`` fields of a NetDef, as the file has
        them (``check`` first). From a mapped file, a long run goes a step at a time, and the
        pages read are given back every ``_WRITE_STEP`` bytes (a net's runs come in file
        order, between edited ops) and by ``release_read`` at the end of a save."""
        if self._ops is not None:
            write(tagged_ops(self._ops[first:end]))
            return
        assert self._data is not None and self._starts is not None
        start, stop = self._starts[first], self._starts[end]
        mapped = self._file
        if mapped is None:
            write(memoryview(self._data)[start:stop])
            return
        for step in range(start, stop, _WRITE_STEP):
            with memoryview(self._data)[step : min(step + _WRITE_STEP, stop)] as part:
                write(part)
            if step + _WRITE_STEP < stop:
                mapped.release(step, step + _WRITE_STEP)
        if stop - self._read_from >= _WRITE_STEP or stop < self._read_from:
            mapped.release(min(self._read_from, start), stop)
            self._read_from = stop

    def release_read(self) -> None:
        """Give back every page of a mapped file that reading brought in."""
        if self._file is not None:
            self._file.release()
            self._read_from = 0


_WRITE_STEP = 16 << 20


def read_ops(raw: Any, data: bytes) -> tuple[Iterator[tuple[int, Any]], OpBytes]:
    """The ops of ``raw`` (``data`` parsed as ``NetDefWithRawOps``) a chunk at a time, and
    where they lie in ``data``.

    The iterator yields ``(index of the chunk's first op, its OpNames records)``; the
    ``OpBytes`` is complete once the iterator is exhausted.
    """
    found = OpBytes(None, None, None)

    def chunks() -> Iterator[tuple[int, Any]]:
        ops = raw.op
        start = position = _first_op_at(raw, data)
        lengths = array("q")
        for first in range(0, len(ops), CHUNK):
            chunk = ops[first : first + CHUNK]
            tagged = tagged_ops(chunk)
            if position is not None and data.startswith(tagged, position):
                position += len(tagged)
                lengths.extend(map(len, chunk))
            else:
                position = None
            yield first, _NAMES.FromString(tagged).op
        if start is None or position is None:
            found._ops = list(ops)
        else:
            found._data = data
            found._starts = _starts(start, lengths)

    return chunks(), found


def _first_op_at(raw: Any, data: bytes) -> int | None:
    """Where the first op begins in ``data``, when only the net's name (field 1, which
    writers put first) comes before it; ``None`` otherwise."""
    if not raw.HasField("name"):
        return 0
    name = _TAGGED(name=raw.name).SerializeToString()
    return len(name) if data.startswith(name) else None


def _starts(first: int, lengths: array[int]) -> array[int]:
    """Offsets of back-to-back op fields from their message lengths: each field is a one-byte
    tag, the length as a varint, and the message. 4 bytes an offset in a file below 2 GB
    (10 MB of a 10^6-op pair's 2.5 million), else 8."""
    sizes = np.frombuffer(lengths, dtype=np.int64) if len(lengths) else np.zeros(0, np.int64)
    varint = 1 + sum((sizes >= 1 << (7 * k)).astype(np.int64) for k in range(1, 10))
    offsets = np.empty(len(sizes) + 1, dtype=np.int64)
    offsets[0] = first
    np.cumsum(1 + varint + sizes, out=offsets[1:])
    offsets[1:] += first
    if offsets[-1] <= np.iinfo(np.intc).max:
        found = array("i")
        found.frombytes(offsets.astype(np.intc).tobytes())
    else:
        found = array("q")
        found.frombytes(offsets.tobytes())
    return found

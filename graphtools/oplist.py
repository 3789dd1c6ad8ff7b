"""``OpList``: a net's ops in order, stored in chunks so that an edit costs what it touches.

A flat Python list makes every insertion or removal shift the whole tail, and every edit that
builds a new list copies (and later frees) a pointer to each of the net's ops: at 10^6 ops
that is tens of milliseconds per edit, whatever its size. An ``OpList`` is immutable and holds
its items in chunks of about ``CHUNK`` items; ``spliced`` builds the edited list by rebuilding
only the chunks an edit touches and sharing every other chunk with the old list, so an edit of
k positions costs O(k * CHUNK) plus a pass over the chunk index (n / CHUNK entries). Being
immutable, an ``OpList`` is shared as it is by snapshots, SSA views and overlays: none of them
copies the net's ops.

Reading is a list's, through a level of indirection: ``ops[i]`` finds the chunk by bisection
(or by a shift while all chunks are full, as after loading), iteration chains the chunks.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from itertools import accumulate, chain
from typing import Any, Generic, TypeVar, overload

_T = TypeVar("_T")

CHUNK_BITS = 10
CHUNK = 1 << CHUNK_BITS
"""Items per chunk when a list is built; edited chunks stay between 1 and ``2 * CHUNK``."""


class OpList(Sequence[_T], Generic[_T]):
    """An immutable sequence in chunks (see the module docstring)."""

    __slots__ = ("_chunks", "_full", "_len", "_starts")

    def __init__(self, items: Iterable[_T] = ()) -> None:
        flat = items if isinstance(items, list) else list(items)
        self._set(
            [flat[start : start + CHUNK] for start in range(0, len(flat), CHUNK)]
            if len(flat) > CHUNK
            else ([flat] if flat else [])
        )

    def _set(self, chunks: list[list[_T]]) -> None:
        self._chunks = chunks
        self._starts = list(accumulate(map(len, chunks), initial=0))
        self._len = self._starts[-1]
        # While every chunk but the last holds exactly CHUNK items (and the last at most that),
        # an index finds its chunk by a shift instead of a bisection.
        self._full = all(len(chunk) == CHUNK for chunk in chunks[:-1]) and (
            not chunks or len(chunks[-1]) <= CHUNK
        )

    @classmethod
    def _of_chunks(cls, chunks: list[list[_T]]) -> OpList[_T]:
        made = cls.__new__(cls)
        made._set(chunks)
        return made

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[_T]:
        return chain.from_iterable(self._chunks)

    @overload
    def __getitem__(self, index: int) -> _T: ...

    @overload
    def __getitem__(self, index: slice) -> list[_T]: ...

    def __getitem__(self, index: int | slice) -> _T | list[_T]:
        if type(index) is int and 0 <= index < self._len:  # the hot path: a plain index
            if self._full:
                return self._chunks[index >> CHUNK_BITS][index & (CHUNK - 1)]
            chunk = bisect_right(self._starts, index) - 1
            return self._chunks[chunk][index - self._starts[chunk]]
        if isinstance(index, slice):
            return list(self)[index]
        position = operator.index(index)
        if -self._len <= position < 0:
            return self[position + self._len]
        if 0 <= position < self._len:
            return self[position]
        raise IndexError(f"op index {position} out of range for {self._len} ops")

    def __repr__(self) -> str:
        return f"OpList({list(self)!r})"

    def spliced(
        self,
        removed: Set[int] = frozenset(),
        replaced: Mapping[int, _T] | None = None,
        inserted: Mapping[int, Sequence[_T]] | None = None,
    ) -> OpList[_T]:
        """The list after removing, replacing and inserting items, all at positions of this
        list (``inserted`` maps a position, ``len(self)`` for the end, to the items going
        before it). Only the chunks holding those positions are rebuilt."""
        replaced = replaced or {}
        inserted = inserted or {}
        touched: dict[int, list[int]] = {}
        chunks = list(self._chunks) or [[]]
        last = len(chunks) - 1
        for position in sorted({*removed, *replaced, *inserted}):
            chunk = min(bisect_right(self._starts, position) - 1, last)
            touched.setdefault(chunk, []).append(position)
        for chunk, positions in touched.items():
            chunks[chunk] = _rebuilt(
                chunks[chunk], self._starts[chunk], positions, removed, replaced, inserted
            )
        return OpList._of_chunks(_balanced(chunks, touched))

    def appended(self, item: _T) -> OpList[_T]:
        """This list with ``item`` at the end."""
        return self.spliced(inserted={self._len: (item,)})


def _rebuilt(
    chunk: list[_T],
    first: int,
    positions: list[int],
    removed: Set[int],
    replaced: Mapping[int, _T],
    inserted: Mapping[int, Sequence[_T]],
) -> list[_T]:
    """``chunk`` (whose first item is at ``first``) edited at ``positions`` (sorted)."""
    out: list[_T] = []
    previous = 0
    for position in positions:
        local = position - first
        out.extend(chunk[previous:local])
        out.extend(inserted.get(position, ()))
        if local < len(chunk):
            if position not in removed:
                out.append(replaced.get(position, chunk[local]))
            previous = local + 1
        else:
            previous = local
    out.extend(chunk[previous:])
    return out


def _balanced(chunks: list[list[_T]], touched: Mapping[int, Any]) -> list[list[_T]]:
    """``chunks`` with the touched ones that grew past ``2 * CHUNK`` split, and the empty ones
    dropped (untouched chunks are kept as they are)."""
    if all(0 < len(chunks[c]) <= 2 * CHUNK for c in touched):
        return chunks
    out: list[list[_T]] = []
    for index, chunk in enumerate(chunks):
        if index not in touched or len(chunk) <= 2 * CHUNK:
            if chunk:
                out.append(chunk)
        else:
            out.extend(chunk[start : start + CHUNK] for start in range(0, len(chunk), CHUNK))
    return out

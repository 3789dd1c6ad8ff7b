"""One int object per small non-negative number, shared process-wide.

A 10^6-op pair holds an index per loaded op and its SSA view an id per blob name, each an int
object (32 bytes) of its own: 4.7 million of them, 150 MB. Numbers below the shared list's
length are taken from it instead, so the init_net's op 5, the predict_net's op 5 and blob id 5
are one object. The list only grows (to the largest net loaded) and lives as long as the
process: 8 bytes of list plus the int itself per number, 40 MB per million.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain, count, islice

__all__ = ["numbering", "shared_from", "shared_ints"]

_SHARED: list[int] = list(range(1 << 16))


def shared_ints(end: int) -> list[int]:
    """The shared list, grown to hold ``0 .. end - 1``: index it, never change it."""
    if end > len(_SHARED):
        _SHARED.extend(range(len(_SHARED), end))
    return _SHARED


def numbering() -> Callable[[], int]:
    """``count().__next__`` giving the shared objects while the list has them."""
    known = len(_SHARED)
    return chain(islice(_SHARED, known), count(known)).__next__


def shared_from(start: int) -> Iterator[int]:
    """The numbers from ``start`` on, the shared objects, the list grown a step at a time
    (for a stream of unknown length: nothing is read ahead of it)."""
    step = 1 << 12
    while True:
        yield from shared_ints(start + step)[start : start + step]
        start += step

"""Pausing Python's cyclic garbage collector around bulk object construction.

Building the IR or the SSA view of a big net creates millions of small tuples and lists; the
collector then runs over and over on objects that cannot be garbage, which costs 2-5x the
construction itself. ``paused_gc`` switches it off for the duration of such a bulk step and
restores the previous state; reference counting still frees memory as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-entrant; restores the prior state)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

"""Pausing Python's cyclic garbage collector around bulk object construction.

Building the IR or the SSA view of a big net creates millions of small objects; the collector
then runs over and over on objects that cannot be garbage, which costs 2-5x the construction
itself. ``paused_gc`` switches it off for the duration of such a bulk step and restores the
previous state; reference counting still frees memory as usual.

When the block created many tracked objects, they are moved straight to the oldest generation
(``gc.freeze()`` then ``gc.unfreeze()``, which only relinks lists): otherwise the young
generations would hold them all, and the collector would traverse millions of live objects
two or three more times as they age (a second or more per traversal at 10^6 ops).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

BULK_ALLOCATIONS = 100_000
"""Net allocations of tracked objects in a paused block above which they are moved to the
oldest generation when the block ends."""


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-entrant; restores the prior state)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # Not when the application froze objects itself (before forking, say): unfreeze()
            # would release those too.
            if gc.get_count()[0] > BULK_ALLOCATIONS and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()

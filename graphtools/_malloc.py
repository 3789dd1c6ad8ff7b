"""glibc's malloc told to give every big block its own mapping, returned to the system when
freed.

numpy arrays of a big net (a view's columns, hundreds of them over a pipeline) are blocks of
megabytes. glibc maps such a block on its own, but each time one is freed it raises the
size it maps from to that block's size (up to 32 MB), so later blocks come from the heap,
whose freed middle it cannot give back: a 10^6-op run held 30 MB more at its peak. A fixed
threshold (``M_MMAP_THRESHOLD``) keeps the first behaviour; blocks below it stay in the heap.
Elsewhere than glibc nothing is changed.
"""

from __future__ import annotations

__all__ = ["map_big_blocks"]

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_BIG = 1 << 20


def map_big_blocks() -> None:
    """Fix glibc's mmap threshold at 1 MB for this process (a no-op without glibc)."""
    import ctypes  # here: only a command that loads models pays for it
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _BIG)

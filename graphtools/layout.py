"""``Layout``: where each op of an edited net comes from, as runs of the base net's ops with
new ops in the gaps.

An edit removes, replaces and inserts a few ops; the ops it did not touch keep their order, so
the edited net is runs of the base ops. The use-def overlay (``graphtools.usedef``), the
rewriter's check (``graphtools.rewriter``) and the derived SSA view (``SSAView.derive``) all read
positions through it. Positions are op indices in the edited net; *base indices* are op indices
in the net the runs come from.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["Layout"]


class Layout:
    """Where each op of an edited net comes from: runs of base ops, new ops in the gaps.

    Run ``r`` puts base ops ``lo[r] .. hi[r] - 1`` at positions ``start[r] ..``; runs are in
    position order, hence also in base order (an edit never reorders kept ops). ``replaced``
    maps the position of a new op that took a base op's place to that base index.
    """

    __slots__ = ("_by_base", "hi", "lo", "replaced", "size", "start")

    def __init__(
        self,
        start: list[int],
        lo: list[int],
        hi: list[int],
        size: int,
        replaced: dict[int, int],
    ) -> None:
        self.start = start
        self.lo = lo
        self.hi = hi
        self.size = size
        self.replaced = replaced
        self._by_base: dict[int, int] | None = None

    @classmethod
    def identity(cls, size: int) -> Layout:
        """The layout of the base net itself."""
        return cls([0], [0], [size], size, {}) if size else cls([], [], [], 0, {})

    def base_index(self, position: int) -> int | None:
        """The base op at ``position``, ``None`` for a new op."""
        run = bisect_right(self.start, position) - 1
        if run >= 0 and position - self.start[run] < self.hi[run] - self.lo[run]:
            return self.lo[run] + position - self.start[run]
        return None

    def identity_of(self, position: int) -> int | tuple[str, int]:
        """What makes the op at ``position`` "the same op" across the edit: its base index
        (a replacement's is the one it replaced), or ``("new", position)``."""
        base = self.base_index(position)
        if base is not None:
            return base
        replaced = self.replaced.get(position)
        return ("new", position) if replaced is None else replaced

    def position(self, base: int) -> int | None:
        """Where base op ``base`` is now, ``None`` when the edit removed or replaced it."""
        run = bisect_right(self.lo, base) - 1
        if run >= 0 and base < self.hi[run]:
            return self.start[run] + base - self.lo[run]
        return None

    def slot_of(self, base: int) -> int | None:
        """Where base op ``base`` or the op that replaced it is now (``None``: removed)."""
        found = self.position(base)
        if found is None:
            found = self._replacements().get(base)
        return found

    def _replacements(self) -> dict[int, int]:
        if self._by_base is None:
            self._by_base = {base: position for position, base in self.replaced.items()}
        return self._by_base

    def new_positions(self) -> list[int]:
        """Positions of the ops that are not base ops, in order."""
        found: list[int] = []
        end = 0
        for start, lo, hi in zip(self.start, self.lo, self.hi, strict=True):
            found.extend(range(end, start))
            end = start + hi - lo
        found.extend(range(end, self.size))
        return found

    def base_count(self) -> int:
        """How many base ops the net still holds unchanged."""
        return sum(hi - lo for lo, hi in zip(self.lo, self.hi, strict=True))

    def edited(
        self,
        removed: set[int],
        replaced: Iterable[int],
        inserted: Mapping[int, int],
    ) -> Layout:
        """The layout after an edit of the net this layout describes.

        ``removed`` and ``replaced`` are positions in that net; ``inserted`` maps a position
        (``size`` for the end) to how many new ops go before it. Linear in the number of runs
        plus the size of the edit (times its log).
        """
        replaced = set(replaced)
        cuts = _array(sorted(removed | replaced))
        inserts = _array(sorted(inserted))
        cumulative = np.zeros(len(inserts) + 1, dtype=np.int64)
        np.cumsum(_array([inserted[p] for p in inserts.tolist()]), out=cumulative[1:])
        dropped = _array(sorted(removed))

        def moved(positions: np.ndarray) -> np.ndarray:
            """New positions of kept ops at ``positions``."""
            before = cumulative[np.searchsorted(inserts, positions, "right")]
            return positions + before - np.searchsorted(dropped, positions, "left")

        run_start, run_lo, run_hi = _array(self.start), _array(self.lo), _array(self.hi)
        run_end = run_start + run_hi - run_lo
        # Split the runs at every cut (before and after it) and wherever ops go in; the
        # pieces inside a run that do not start at a cut are the new runs.
        bounds = _distinct(np.concatenate((run_start, run_end, cuts, cuts + 1, inserts)))
        piece_start, piece_end = bounds[:-1], bounds[1:]
        run = np.searchsorted(run_start, piece_start, "right") - 1
        keep = run >= 0
        run[~keep] = 0
        keep &= piece_start < (run_end[run] if len(run_start) else -1)
        keep &= ~np.isin(piece_start, cuts)
        piece_start, piece_end, run = piece_start[keep], piece_end[keep], run[keep]
        offset = run_lo[run] - run_start[run]
        start: list[int] = moved(piece_start).tolist()
        lo: list[int] = (piece_start + offset).tolist()
        hi: list[int] = (piece_end + offset).tolist()
        carried = [(p, base) for p, base in self.replaced.items() if p not in removed]
        for position in replaced:
            found = self.base_index(position)
            if found is None:
                found = self.replaced.get(position)
            if found is not None:
                carried.append((position, found))
        now = moved(_array([p for p, _ in carried])).tolist()
        new_replaced = dict(zip(now, (base for _, base in carried), strict=True))
        size = self.size - len(removed) + int(cumulative[-1])
        return Layout(start, lo, hi, size, new_replaced)


def _array(values: Sequence[int]) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=len(values))


def _distinct(values: np.ndarray) -> np.ndarray:
    """``values`` sorted without repeats (``np.unique`` without its first-call import of
    ``numpy.ma``, which costs more than an edit)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values

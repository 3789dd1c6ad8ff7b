"""Use-def of a net right after an edit, without rebuilding its SSA view.

An edit (``Net.edit``) removes, replaces and inserts a few ops of a net whose ``SSAView`` was
built. The ops it did not touch keep their order, so the edited net is *runs* of the base
view's ops with the new ops between them: a ``Layout``. ``Overlay`` answers the questions
rewriters ask (``producer``, ``uses``, versions of one blob name) from the base view and the
layout, at a cost proportional to the edit and to the uses of the names asked about, not to
the net; the whole view is derived from it only when something needs all of it
(``SSAView.derive``).

Versions are Caffe2's (``get_ssa``): a read at op ``p`` sees the writes at ops before ``p``,
and an op listing an output ``k`` times advances its version ``k`` times (the intermediate
versions have no producer).

Positions are op indices in the edited net; *base indices* are op indices in the net the base
view was built for. A new op that replaced a base op (``Edit.set_op``) takes that op's place
and identity: readers of its outputs still read "the same op".
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain, compress
from itertools import count as _counter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from graphtools.errors import IllegalRewriteError
from graphtools.ssa import VersionedBlob

if TYPE_CHECKING:
    from graphtools.analysis.nested import NestedAccess as Nested
    from graphtools.ir import Op
    from graphtools.ssa_view import SSAView

__all__ = ["Layout", "NameScan", "Overlay", "Use", "check_edit"]


class Use(NamedTuple):
    """One read of a versioned blob: op index and input position.

    ``position`` is -1 for a read from inside the op's nested nets (an ``If`` branch reading
    the blob by name).
    """

    op: int
    position: int


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


class _Names:
    """Reads and writes of each name among a net's new ops (and of nested nets' holders)."""

    __slots__ = ("reads", "writes")

    def __init__(self) -> None:
        self.reads: dict[str, list[tuple[int, int]]] = {}
        self.writes: dict[str, list[tuple[int, int]]] = {}

    def add_op(self, position: int, op: Op) -> None:
        for slot, name in enumerate(op.inputs):
            self.reads.setdefault(name, []).append((position, slot))
        counts: dict[str, int] = {}
        for name in op.outputs:
            counts[name] = counts.get(name, 0) + 1
        for name, count in counts.items():
            self.writes.setdefault(name, []).append((position, count))


class Overlay:
    """Point queries on an edited net: its base view plus its layout (see the module doc).

    ``ops`` is the edited net's op list (a snapshot: the overlay is for one revision), and
    ``affected`` the names whose versions the edits may have changed: every name a removed or
    inserted op writes, and those a replacement writes differently from the op it replaced.
    A name not in ``affected`` has the base view's writes, at moved positions.
    """

    __slots__ = ("_affected", "_base", "_layout", "_new_names", "_ops")

    def __init__(
        self, base: SSAView, layout: Layout, ops: Sequence[Op], affected: frozenset[str]
    ) -> None:
        self._base = base
        self._layout = layout
        self._ops = ops
        self._affected = affected
        self._new_names: _Names | None = None

    @property
    def _new(self) -> _Names:
        """The new ops' reads and writes, indexed on the first query (a pass that only
        derives the whole view next asks none)."""
        if self._new_names is None:
            self._new_names = _Names()
            for position in self._layout.new_positions():
                self._new_names.add_op(position, self._ops[position])
        return self._new_names

    @property
    def base(self) -> SSAView:
        """The view the overlay builds on."""
        return self._base

    @property
    def layout(self) -> Layout:
        """Where each op comes from."""
        return self._layout

    @property
    def affected(self) -> frozenset[str]:
        """Names whose versions the edits may have changed."""
        return self._affected

    def writes(self, name: str) -> list[tuple[int, int]]:
        """``(position, count)`` of every op writing ``name``, in order."""
        if name not in self._affected:  # written where it was, by the same ops or their stand-ins
            slot_of = self._layout.slot_of
            return [
                (now, count)
                for base, count in self._base.writes(name)
                if (now := slot_of(base)) is not None
            ]
        return _merged(self._moved(self._base.writes(name)), self._new.writes.get(name, []))

    def reads(self, name: str) -> list[tuple[int, int]]:
        """``(position, input slot)`` of every read of ``name``, in order."""
        return _merged(self._moved(self._base.reads(name)), self._new.reads.get(name, []))

    def prefetch_reads(self, names: Iterable[str]) -> None:
        """Let the base view find the reads of many names at once (``SSAView``'s)."""
        self._base.prefetch_reads(names)

    def removal_keeps_reads(self, removed: Sequence[int], replaced: Sequence[int] = ()) -> bool:
        """No vectorised answer here: ``False`` lets the caller check name by name."""
        return False

    def last_writers(self, names: Sequence[str], ops: Sequence[int]) -> list[int]:
        """No vectorised answer here: -2 (no op index) lets the caller check name by name."""
        return [-2] * len(names)

    def _moved(self, items: list[tuple[int, int]]) -> list[tuple[int, int]]:
        position = self._layout.position
        found = []
        for base, extra in items:
            now = position(base)
            if now is not None:
                found.append((now, extra))
        return found

    def final_version(self, name: str) -> int:
        """The version of ``name`` at the end of the net."""
        return sum(count for _, count in self.writes(name))

    def producer(self, blob: VersionedBlob) -> int | None:
        """Position of the op writing ``blob``; ``None`` for version 0, a version no op
        writes, or a version beyond the final one."""
        return _producer(self.writes(blob[0]), blob[1])

    def uses(self, blob: VersionedBlob) -> list[Use]:
        """Every read of exactly ``blob``, in op and input order."""
        return _uses(self.writes(blob[0]), self.reads(blob[0]), blob[1])


def _merged(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if not second:
        return first
    if not first:
        return list(second)
    return sorted(first + second)


def _producer(writes: list[tuple[int, int]], version: int) -> int | None:
    reached = 0
    for position, count in writes:
        reached += count
        if reached == version:
            return position
        if reached > version:
            return None
    return None


def _uses(writes: list[tuple[int, int]], reads: list[tuple[int, int]], version: int) -> list[Use]:
    # Reads of `version` sit after its producer and up to the next writer (an op reads before
    # it writes): walk both sorted lists once.
    found = []
    reached = 0
    index = 0
    for position, slot in reads:
        while index < len(writes) and writes[index][0] < position:
            reached += writes[index][1]
            index += 1
        if reached == version:
            found.append(Use(position, slot))
        elif reached > version:
            break
    return found


class NameScan:
    """The use-def of a few names of a net, from scans of its ops: what an edit's check
    needs when the net has no current SSA view (building one would hash every name of the
    net, where a scan only tests each op's names against the set, in C).

    Reads are found at once (one test of every input name when none is wanted, the usual
    case for an init_net of fills); writes on the first question about them (a check of
    bulk removals asks none).
    """

    __slots__ = ("_ops", "_reads", "_wanted", "_writes")

    def __init__(self, ops: Sequence[Op], names: Iterable[str]) -> None:
        wanted = frozenset(names)
        self._ops = ops
        self._wanted = wanted
        self._reads: dict[str, list[tuple[int, int]]] = {}
        self._writes: dict[str, list[tuple[int, int]]] | None = None
        if wanted.isdisjoint(chain.from_iterable(map(_INPUTS, ops))):
            return
        for index in _touching(wanted, map(_INPUTS, ops)):
            for slot, name in enumerate(ops[index].inputs):
                if name in wanted:
                    self._reads.setdefault(name, []).append((index, slot))

    def _scan_writes(self) -> dict[str, list[tuple[int, int]]]:
        wanted = self._wanted
        writes: dict[str, list[tuple[int, int]]] = {}
        for index in _touching(wanted, map(_OUTPUTS, self._ops)):
            counts: dict[str, int] = {}
            for name in self._ops[index].outputs:
                if name in wanted:
                    counts[name] = counts.get(name, 0) + 1
            for name, found in counts.items():
                writes.setdefault(name, []).append((index, found))
        return writes

    def writes(self, name: str) -> list[tuple[int, int]]:
        """``(op index, count)`` of every op writing ``name`` (a scanned name), in order."""
        if self._writes is None:
            self._writes = self._scan_writes()
        return self._writes.get(name, [])

    def reads(self, name: str) -> list[tuple[int, int]]:
        """``(op index, input position)`` of every read of ``name``, in order."""
        return self._reads.get(name, [])

    def prefetch_reads(self, names: Iterable[str]) -> None:
        """Nothing to do: the scan found every read."""

    def removal_keeps_reads(self, removed: Sequence[int], replaced: Sequence[int] = ()) -> bool:
        """Whether no other op (but the ``replaced`` ones) reads a blob name the removed ops
        write (stricter than needed: any version counts; init_nets of fills pass it at
        once). External outputs are not looked at: the check tests them name by name."""
        if not self._reads:
            return True
        gone = {*removed, *replaced}
        for index in removed:
            for name in self._ops[index].outputs:
                if any(i not in gone for i, _ in self.reads(name)):
                    return False
        return True

    def last_writers(self, names: Sequence[str], ops: Sequence[int]) -> list[int]:
        """No vectorised answer here: -2 (no op index) lets the caller check name by name."""
        return [-2] * len(names)

    def final_version(self, name: str) -> int:
        """The version of ``name`` at the end of the net."""
        return sum(found for _, found in self.writes(name))

    def producer(self, blob: VersionedBlob) -> int | None:
        """Index of the op writing ``blob``, or ``None``."""
        return _producer(self.writes(blob[0]), blob[1])

    def uses(self, blob: VersionedBlob) -> list[Use]:
        """Every read of exactly ``blob``."""
        return _uses(self.writes(blob[0]), self.reads(blob[0]), blob[1])


def _touching(wanted: frozenset[str], name_lists: Iterable[tuple[str, ...]]) -> Iterator[int]:
    """Indices of the name lists holding a name of ``wanted`` (all in C: no Python call per
    list)."""
    return compress(_counter(), map(operator.not_, map(wanted.isdisjoint, name_lists)))


_INPUTS = operator.attrgetter("inputs")
_OUTPUTS = operator.attrgetter("outputs")
_VECTORISE_FROM = 64
"""Names only removals touch above which the check tests them all at once in numpy."""
_OPS_PER_NAME = 1024
"""The vectorised test of removals scans every op of the net: worth it only from one name per
this many ops (a name checked alone costs its own reads, about a scan of this many ops), so
that a small edit of a big net costs what it touches."""


class _Reader(NamedTuple):
    position: int  # in the edited net
    slot: int  # input position; -1 for a read inside the op's nested nets
    expected: int | None  # base index of the op whose write it must see; None: no write


def written_differently(old: Op, new: Op) -> bool:
    """Whether a replacement writes other blobs than the op it replaces (an op's versions
    depend on its outputs only: one that writes the same ones changes nobody's versions)."""
    return old.outputs != new.outputs


def check_edit(
    before: SSAView | Overlay | NameScan,
    layout: Layout,
    removed: Sequence[int],
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
    names: Iterable[str],
    written: AbstractSet[str],
    rewired: Mapping[tuple[int, int], int | None],
    nested_before: Mapping[int, Nested],
    nested_after: Mapping[int, Nested],
    final_outputs: Mapping[str, int | None],
    takeovers: Mapping[tuple[int, str], int] | None = None,
) -> None:
    """Refuse an edit that changes a value some op reads without being asked to.

    ``before`` is the use-def of the net as it was, ``layout`` places the edited net's ops
    relative to it (an edit-local layout: base indices are positions before the edit; the ops
    in ``removed`` are gone), and
    ``new_ops`` holds the edited net's new ops (inserted, and replacements) by position.
    For every name in ``names`` (those the edit writes, drops writes of, or rewires), every
    read of the name in the edited net must see the write of the same op as before: an
    untouched op's read, the same slot of a replacement reading the same name, a nested
    read of a holder op; a read rewired by ``replace_all_uses_with`` or ``rename``
    (``rewired``: (position, slot) -> the base index of the op whose write it must now see,
    ``None`` for the value the net starts with) sees that; ``final_outputs`` maps an external
    output name of the edited net to the op whose write its final value must be. Reads of
    inserted ops, and new slots of replacements, are the author's and not checked. A new
    op's nested nets write where the op stands (an appended backward ``If`` writing gradients
    nobody read before is fine); names written inside the nested nets of an op the edit keeps
    are refused outright: the versioned view cannot tell which write a later op sees.
    ``takeovers`` maps ``(position, name)`` to the base op whose write of ``name`` the new op
    at ``position`` stands for (an expanded op).

    ``written`` are the names whose writes the edit changes (removed, inserted, or replaced
    ops writing differently).

    Raises:
        IllegalRewriteError: naming the reader, the blob, and the writer before and after.
    """
    names = list(dict.fromkeys(names))
    # An external output's final value is checked name by name (``final_outputs``).
    removed_only = _removal_only(names, layout, old_ops, new_ops, rewired, nested_after)
    removed_only.difference_update(final_outputs)
    # Bulk removals (dead ops, fused copies): one vectorised test covers every name only a
    # removal touches; only if it fails are they looked at one by one, for the message.
    # A replacement's reads are its own (checked by name): they do not count here.
    if (
        len(removed_only) >= max(_VECTORISE_FROM, layout.size // _OPS_PER_NAME)
        and before.removal_keeps_reads(removed, sorted(layout.replaced.values()))
        and not any(name in a.reads for a in nested_before.values() for name in removed_only)
    ):
        names = [name for name in names if name not in removed_only]
    names = _unless_rewires_see_their_writers(
        names, before, layout, new_ops, rewired, written, final_outputs
    )
    before.prefetch_reads(names)
    index = _NewOps(new_ops, nested_before, nested_after)
    for name in names:
        writers = [
            f"op #{index} ({old_ops[index].type})"
            for index, access in nested_before.items()
            if name in access.writes
        ]
        if writers and not _appended_after_every_read(
            name, before, layout, old_ops, new_ops, nested_before, nested_after, final_outputs
        ):
            raise IllegalRewriteError(
                f"edit refused: {name!r} is written inside the nested net of {writers[0]}, "
                "which the versioned view cannot follow; the edit could change which value "
                "later ops read"
            )
        _check_name(
            name,
            before,
            layout,
            old_ops,
            new_ops,
            index,
            rewired,
            nested_before,
            final_outputs,
            takeovers or {},
        )


def _unless_rewires_see_their_writers(
    names: list[str],
    before: SSAView | Overlay | NameScan,
    layout: Layout,
    new_ops: Mapping[int, Op],
    rewired: Mapping[tuple[int, int], int | None],
    written: AbstractSet[str],
    final_outputs: Mapping[str, int | None],
) -> list[str]:
    """``names`` without those whose only change is reads rewired to them, when every such
    read sees the writer it must, tested at once (``last_writers``): nothing else changes
    what such a name holds, so its untouched reads are safe."""
    if len(rewired) < _VECTORISE_FROM:
        return names
    queries: list[tuple[str, int, int]] = []
    for (position, slot), expected in rewired.items():
        name = new_ops[position].inputs[slot]
        if name not in written and name not in final_outputs:
            queries.append((name, layout.replaced[position], -1 if expected is None else expected))
    found = before.last_writers([q[0] for q in queries], [q[1] for q in queries])
    safe = {name for name, _, _ in queries}
    safe.difference_update(
        name
        for (name, _, expected), writer in zip(queries, found, strict=True)
        if writer != expected
    )
    return [name for name in names if name not in safe]


def _removal_only(
    names: list[str],
    layout: Layout,
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
    rewired: Mapping[tuple[int, int], int | None],
    nested_after: Mapping[int, Nested],
) -> set[str]:
    """Those of ``names`` no change but a removal touches (nothing new writes or reads them
    in a checked way)."""
    if not names:
        return set()
    others: set[str] = set()
    for position, op in new_ops.items():
        others.update(op.outputs)
        replaced = layout.replaced.get(position)
        if replaced is not None:
            others.update(old_ops[replaced].outputs)
            others.update(op.inputs)
    for position, _ in rewired:
        others.update(new_ops[position].inputs)
    for access in nested_after.values():
        others.update(access.writes)
    return set(names) - others


def _appended_after_every_read(
    name: str,
    before: SSAView | Overlay | NameScan,
    layout: Layout,
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
    nested_before: Mapping[int, Nested],
    nested_after: Mapping[int, Nested],
    final_outputs: Mapping[str, int | None],
) -> bool:
    """Whether the edit only adds writes of ``name`` after its last read (an appended
    backward pass, say): no value an op reads can change then, nested writes or not. (An
    external output's final value is a read at the end, unless the edit sets the outputs.)"""
    if name in final_outputs or any(name in old_ops[b].outputs for b in layout.replaced.values()):
        return False
    writes = [b for b, _ in before.writes(name)]
    if any(layout.position(b) is None for b in writes):  # a writer was removed
        return False
    reads = [layout.position(p) for p, _ in before.reads(name)]
    reads += [layout.position(h) for h, access in nested_before.items() if name in access.reads]
    last_read = max((r for r in reads if r is not None), default=-1)
    added = [
        position
        for position, op in new_ops.items()
        if name in op.outputs
        or (position in nested_after and name in nested_after[position].writes)
    ]
    return all(position > last_read for position in added)


class _NewOps:
    """The edit's new ops and nested-net accesses, indexed by blob name (built once per check,
    so each name costs what it touches)."""

    def __init__(
        self,
        new_ops: Mapping[int, Op],
        nested_before: Mapping[int, Nested],
        nested_after: Mapping[int, Nested],
    ) -> None:
        self.ops = _Names()
        for position, op in new_ops.items():
            self.ops.add_op(position, op)
        self.nested_reads_before = _by_name(nested_before, "reads")
        self.nested_reads_after = _by_name(nested_after, "reads")
        self.nested_writes_after = _by_name(nested_after, "writes")


def _by_name(accesses: Mapping[int, Nested], field: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for position, access in accesses.items():
        for name in getattr(access, field):
            found.setdefault(name, []).append(position)
    return found


def _check_name(
    name: str,
    before: SSAView | Overlay | NameScan,
    layout: Layout,
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
    index: _NewOps,
    rewired: Mapping[tuple[int, int], int | None],
    nested_before: Mapping[int, Nested],
    final_outputs: Mapping[str, int | None],
    takeovers: Mapping[tuple[int, str], int],
) -> None:
    writes_before = before.writes(name)

    def identity(position: int) -> int | tuple[str, int]:
        taken = takeovers.get((position, name))
        return layout.identity_of(position) if taken is None else taken

    old_writers = [position for position, _ in writes_before]

    def writer_before(position: int) -> int | None:
        found = bisect_left(old_writers, position)
        return old_writers[found - 1] if found else None

    readers: list[_Reader] = []
    for old_position, slot in before.reads(name):
        now = layout.position(old_position)
        if now is not None:
            readers.append(_Reader(now, slot, writer_before(old_position)))
    for holder in index.nested_reads_before.get(name, ()):
        now = layout.position(holder)
        if now is not None:
            readers.append(_Reader(now, -1, writer_before(holder)))
    writes_after = [
        (now, count) for old, count in writes_before if (now := layout.position(old)) is not None
    ]
    writes_after += index.ops.writes.get(name, [])
    # A new op's nested nets write the name where the op stands.
    writes_after += [(position, 1) for position in index.nested_writes_after.get(name, ())]
    for position, slot in index.ops.reads.get(name, ()):
        replaced = layout.replaced.get(position)
        if (position, slot) in rewired:
            readers.append(_Reader(position, slot, rewired[(position, slot)]))
        elif replaced is not None:
            old_inputs = old_ops[replaced].inputs
            if slot < len(old_inputs) and old_inputs[slot] == name:
                readers.append(_Reader(position, slot, writer_before(replaced)))
    for position in index.nested_reads_after.get(name, ()):
        replaced = layout.replaced.get(position)
        if replaced is None:
            continue
        was = nested_before.get(replaced)
        if was is not None and name in was.reads:
            readers.append(_Reader(position, -1, writer_before(replaced)))
    writes_after.sort()
    new_writers = [position for position, _ in writes_after]
    for reader in readers:
        found = bisect_left(new_writers, reader.position)
        actual = identity(new_writers[found - 1]) if found else None
        if actual != reader.expected:
            raise IllegalRewriteError(_refusal(name, reader, actual, old_ops, new_ops, layout))
    if name in final_outputs:
        expected = final_outputs[name]
        actual = identity(new_writers[-1]) if new_writers else None
        if actual != expected:
            end = _Reader(layout.size, -2, expected)
            raise IllegalRewriteError(_refusal(name, end, actual, old_ops, new_ops, layout))


def _describe(
    identity: int | tuple[str, int] | None,
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
) -> str:
    if identity is None:
        return "no op (the value the net starts with)"
    if isinstance(identity, int):
        return f"op #{identity} ({old_ops[identity].type})"
    return f"the inserted op {new_ops[identity[1]].type}"


def _refusal(
    name: str,
    reader: _Reader,
    actual: int | tuple[str, int] | None,
    old_ops: Sequence[Op],
    new_ops: Mapping[int, Op],
    layout: Layout,
) -> str:
    """Why a read would change, with ops named by their index before the edit."""
    if reader.slot == -2:
        who = f"external output {name!r}"
    else:
        inside = " inside its nested net" if reader.slot == -1 else ""
        identity = layout.identity_of(reader.position)
        who = f"{_describe(identity, old_ops, new_ops)}, reading {name!r}{inside},"
    gone = ""
    if (
        isinstance(reader.expected, int)
        and layout.position(reader.expected) is None
        and reader.expected not in layout.replaced.values()
    ):
        gone = ", which the edit removes"
    return (
        f"edit refused: {who} would see the value of "
        f"{_describe(actual, old_ops, new_ops)} instead of that of "
        f"{_describe(reader.expected, old_ops, new_ops)}{gone}; "
        "rewire its readers (replace_all_uses_with) or keep the op"
    )

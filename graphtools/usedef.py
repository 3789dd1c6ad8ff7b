"""Use-def of a net right after an edit, without rebuilding its SSA view.

An edit (``Net.edit``) removes, replaces and inserts a few ops of a net whose ``SSAView`` was
built; the edited net is runs of the base view's ops with the new ops between them (a
``graphtools.layout.Layout``). ``Overlay`` answers the questions rewriters ask (``producer``,
``uses``, versions of one blob name) from the base view and the layout, at a cost proportional
to the edit and to the uses of the names asked about, not to the net; the whole view is derived
from it only when something needs all of it (``SSAView.derive``). ``NameScan`` answers the same
questions for a net with no view, by scanning its ops for the few names asked about.

Versions are Caffe2's (``get_ssa``): a read at op ``p`` sees the writes at ops before ``p``,
and an op listing an output ``k`` times advances its version ``k`` times (the intermediate
versions have no producer). The empty name is no value (an ONNX optional input or output left
out): it is never read or written.

Positions are op indices in the edited net; *base indices* are op indices in the net the base
view was built for. A new op that replaced a base op (``Edit.set_op``) takes that op's place
and identity: readers of its outputs still read "the same op".
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress
from itertools import count as _counter

from graphtools._core import OpLike
from graphtools.layout import Layout
from graphtools.ssa import NO_VALUE, Use, VersionedBlob
from graphtools.ssa_view import SSAView

__all__ = ["NameIndex", "NameScan", "Overlay", "UseDef", "ops_touching"]


class NameIndex:
    """Reads and writes of each name among a few ops (an edit's new ops), the empty name (no
    value) left out."""

    __slots__ = ("reads", "writes")

    def __init__(self) -> None:
        self.reads: dict[str, list[tuple[int, int]]] = {}
        self.writes: dict[str, list[tuple[int, int]]] = {}

    def add_op(self, position: int, op: OpLike) -> None:
        for slot, name in enumerate(op.inputs):
            if name != NO_VALUE:
                self.reads.setdefault(name, []).append((position, slot))
        counts: dict[str, int] = {}
        for name in op.outputs:
            if name != NO_VALUE:
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
        self, base: SSAView, layout: Layout, ops: Sequence[OpLike], affected: frozenset[str]
    ) -> None:
        self._base = base
        self._layout = layout
        self._ops = ops
        self._affected = affected
        self._new_names: NameIndex | None = None

    @property
    def _new(self) -> NameIndex:
        """The new ops' reads and writes, indexed on the first query (a pass that only
        derives the whole view next asks none)."""
        if self._new_names is None:
            self._new_names = NameIndex()
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

    def __init__(self, ops: Sequence[OpLike], names: Iterable[str]) -> None:
        wanted = frozenset(names)
        self._ops = ops
        self._wanted = wanted
        self._reads: dict[str, list[tuple[int, int]]] = {}
        self._writes: dict[str, list[tuple[int, int]]] | None = None
        if wanted.isdisjoint(chain.from_iterable(map(_INPUTS, ops))):
            return
        for index in ops_touching(wanted, map(_INPUTS, ops)):
            for slot, name in enumerate(ops[index].inputs):
                if name in wanted:
                    self._reads.setdefault(name, []).append((index, slot))

    def _scan_writes(self) -> dict[str, list[tuple[int, int]]]:
        wanted = self._wanted
        writes: dict[str, list[tuple[int, int]]] = {}
        for index in ops_touching(wanted, map(_OUTPUTS, self._ops)):
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


def ops_touching(wanted: frozenset[str], name_lists: Iterable[tuple[str, ...]]) -> Iterator[int]:
    """Indices of the name lists holding a name of ``wanted`` (all in C: no Python call per
    list)."""
    return compress(_counter(), map(operator.not_, map(wanted.isdisjoint, name_lists)))


_INPUTS = operator.attrgetter("inputs")
_OUTPUTS = operator.attrgetter("outputs")


UseDef = SSAView | Overlay | NameScan
"""What answers use-def questions about one revision of a net."""

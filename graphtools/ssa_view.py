"""``SSAView``: the versioned-blob view of one revision of a net, built for big nets.

``net.ssa()`` gives Caffe2's SSA (``get_ssa``'s versions, exactly) with O(1) or O(log n)
lookups, computed once per revision. It is a snapshot: later edits of the net do not show in an
existing view.

How it stays fast on nets of a million ops: blob names are turned into integers once, and
everything else (versions, producers, readers) is computed with numpy over integer columns.
Interning the names is the only per-occurrence Python work, and an edit made through
``Net.edit_ops``/``Net.remove_ops``/``Net.set_external_*`` right after a view was built does
not repeat it: the next view is derived from this one's columns (``SSAView.edited``).

Two levels of access:

* Caffe2's data as ``get_ssa`` and the detectron2 maps give it: ``ssa``, ``versions``,
  ``producers``, ``consumers``, ``producer(blob)``, ``consumer_ops(blob)``, ``inputs_of``,
  ``outputs_of``, ``latest``, ``external_inputs``/``external_outputs``. Built on first use.
* Integer *keys* for passes that sweep the whole net: the versions of one name have
  consecutive keys (``(name, v)`` is the name's first key plus ``v``), all in
  ``range(num_keys)``, which is about the number of versioned blobs.
  ``in_keys[in_ptr[i]:in_ptr[i + 1]]`` are op ``i``'s versioned inputs in order,
  ``out_keys``/``out_ptr`` its outputs; ``key``, ``blob``, ``name_of``, ``version_of``,
  ``producer_of``, ``readers`` and ``next_write`` look them up. A pass can keep per-blob
  state in a ``bytearray(num_keys)`` instead of a set of tuples.
"""

from __future__ import annotations

import operator
from array import array
from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from itertools import chain, repeat

import numpy as np

from graphtools._core import NetLike, OpLike
from graphtools._gc import paused_gc
from graphtools._ints import numbering as shared_numbering
from graphtools.layout import Layout
from graphtools.ssa import (
    NO_VALUE,
    OpSSA,
    Use,
    VersionedBlob,
    as_blob,
    get_consumer_map,
    get_producer_map,
)

__all__ = ["SSAView"]

_INPUTS = operator.attrgetter("inputs")
_LIST_READERS_AFTER = 256
"""Calls of ``readers`` after which a view answers from ``array.array`` copies, not numpy."""
_PREFETCH_MIN = 16
"""Names below which ``prefetch_reads`` leaves each name to the per-key index."""
_BULK_LOOKUP = 4096
"""Names from which a lookup is remembered and matched by address (``_NameTable.lookup``)."""
_OUTPUTS = operator.attrgetter("outputs")
_INT32 = np.iinfo(np.int32)
_SMALL = np.int32
"""The dtype of the view's columns (op indices, versions, name ids, keys, offsets): 4 bytes a
value where int64 takes 8. None reaches 2^31: a net of 2^31 reads would not fit in memory as
Python objects anyway. Products with a stride (sorting by name, then op) are taken in int64."""


def _int_array(values: np.ndarray) -> array[int]:
    """``values`` (integers) as an ``array.array``: indexing and slicing it costs no numpy call.

    4 bytes an item when every value fits (any net below 2^31 reads), else 8; the items are
    copied from the numpy buffer itself (a ``bytes`` in between would double the peak).
    """
    if not len(values) or (values.min() >= _INT32.min and values.max() <= _INT32.max):
        found = array("i")
        values = values.astype(np.intc)
    else:
        found = array("q")
        values = np.ascontiguousarray(values, dtype=np.int64)
    found.frombytes(values.data.cast("B"))
    return found


def _offsets(counts: np.ndarray) -> np.ndarray:
    """CSR offsets ``[0, c0, c0 + c1, ...]`` of per-op counts."""
    offsets = np.zeros(len(counts) + 1, dtype=_SMALL)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _counts(lists: Sequence[tuple[str, ...]]) -> np.ndarray:
    """The length of each tuple, as a numpy array."""
    return np.fromiter(map(len, lists), np.int64, len(lists))


def _versions(
    in_name: np.ndarray, in_op: np.ndarray, out_name: np.ndarray, out_op: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Caffe2's version of each read and each write, given as (name id, op index) columns.

    A read at op i sees the writes at ops < i; a write at op i counts those at ops <= i (an op
    listing an output twice reports both at the final version, as get_ssa does). Every write
    of a name a read names must be in the columns.

    A name written once (every name of an ONNX graph, most of a Caffe2 net's) needs no
    sorting: its write is version 1, and a read sees it when its op comes after the writer.
    Only the names written more than once go through ``_sorted_versions``.
    """
    size = int(max(in_name.max(initial=-1), out_name.max(initial=-1))) + 1
    rewritten = np.bincount(out_name, minlength=size) > 1
    once = ~rewritten[out_name]
    writer = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    writer[out_name[once]] = out_op[once]
    in_version = (writer[in_name] < in_op).astype(_SMALL)
    out_version = np.ones(len(out_name), dtype=_SMALL)
    if not once.all():
        again = rewritten[in_name]
        in_version[again], out_version[~once] = _sorted_versions(
            in_name[again], in_op[again], out_name[~once], out_op[~once]
        )
    return in_version, out_version


def _sorted_versions(
    in_name: np.ndarray, in_op: np.ndarray, out_name: np.ndarray, out_op: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_versions`` for any names: writes sorted by (name, op), counting those before a
    position gives the version there."""
    in_name, out_name = in_name.astype(np.int64), out_name.astype(np.int64)  # * stride: wide
    stride = int(max(in_op.max(initial=0), out_op.max(initial=0))) + 2
    write_at = out_name * stride + out_op
    order = np.sort(write_at)
    out_version = np.searchsorted(order, write_at, "right")
    out_version -= np.searchsorted(order, out_name * stride, "left")
    in_version = np.searchsorted(order, in_name * stride + in_op, "left")
    in_version -= np.searchsorted(order, in_name * stride, "left")
    return in_version, out_version


class _CarriedVersions:
    """Versions an edit left valid, for the view derived from the edit.

    Removing or adding ops changes the versions of the names they write and of nothing else,
    and a new op's reads need their own; every other read and write keeps its version. Only
    those are recomputed, which spares a sort and four binary searches over the whole net per
    edit.
    """

    __slots__ = ("changed_names", "in_stale", "in_version", "out_version")

    def __init__(
        self,
        in_version: np.ndarray,
        in_stale: np.ndarray,
        out_version: np.ndarray,
        changed_names: np.ndarray,
    ) -> None:
        self.in_version = in_version
        self.in_stale = in_stale
        self.out_version = out_version
        self.changed_names = changed_names

    def completed(
        self,
        num_names: int,
        in_name: np.ndarray,
        in_op: np.ndarray,
        out_name: np.ndarray,
        out_op: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every read's and write's version in the edited net's columns."""
        changed = np.zeros(num_names, dtype=bool)
        changed[self.changed_names] = True
        in_stale = self.in_stale | changed[in_name]
        needed = changed  # from here on, also the names of the reads to recompute
        needed[in_name[in_stale]] = True
        writes = needed[out_name]
        in_version, out_version = self.in_version, self.out_version
        if in_stale.any() or writes.any():
            in_version[in_stale], out_version[writes] = _versions(
                in_name[in_stale], in_op[in_stale], out_name[writes], out_op[writes]
            )
        return in_version, out_version


def _derived_column(
    base_ptr: np.ndarray,
    base_name: np.ndarray,
    base_version: np.ndarray,
    keep: np.ndarray,
    from_base: np.ndarray,
    new_counts: np.ndarray,
    new_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One CSR column (inputs or outputs) of a derived view: the kept base ops' slots copied
    to their new places, the new ops' names put at theirs.

    ``keep`` marks the base ops kept, ``from_base`` the positions of the edited net they go
    to; an edit never reorders kept ops, so the kept slots keep their order and every copy
    is one boolean-mask pass. ``new_ids`` are the names of the new ops (the other
    positions, in order) back to back, ``new_counts`` of each. Returns ``(ptr, names,
    versions, stale)``: versions are the base's for copied slots; ``stale`` marks the new
    ops' slots."""
    base_counts = np.diff(base_ptr)
    counts = np.empty(len(from_base), dtype=np.int64)
    counts[from_base] = base_counts[keep]
    counts[~from_base] = new_counts
    ptr = _offsets(counts)
    stale = np.repeat(~from_base, counts)
    copied = ~stale
    slots = np.repeat(keep, base_counts)
    names = np.empty(len(stale), dtype=_SMALL)
    names[copied] = base_name[slots]
    names[stale] = new_ids
    versions = np.zeros(len(stale), dtype=_SMALL)
    versions[copied] = base_version[slots]
    return ptr, names, versions, stale


class _NameTable:
    """Blob names and their integer ids; only grows, so views derived from one another share
    it (an id never changes meaning)."""

    __slots__ = ("_recent", "ids", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        # The lookup remembered: its names (kept alive, so an address met again is the same
        # string), their addresses sorted and their ids in that order (until sorted: no
        # addresses, and the ids in the names' order).
        self._recent: tuple[list[str], np.ndarray, np.ndarray] | None = None

    @classmethod
    def interning(
        cls, names: Sequence[str], declared: Sequence[str] = ()
    ) -> tuple[_NameTable, np.ndarray, np.ndarray]:
        """A table of ``declared`` and ``names``, with the ids of ``names`` and of
        ``declared`` (-1 for the empty name), in one pass (a ``defaultdict`` numbering each
        new name as it is first met: the hashing is the cost, so it is done once).

        ``declared`` (a net's external inputs: every param of an exported Caffe2 net) is
        numbered first, in its order: the ops' reads of those names then find entries laid out
        in the order they come, and a million inserts in order cost less than looking a
        million names up in the finished table (1.52 s against 1.78 s with the interning of
        the ops' names, at 10^6 ops).
        """
        numbering: defaultdict[str, int] = defaultdict(shared_numbering())
        declared_ids = np.fromiter(map(numbering.__getitem__, declared), np.int64, len(declared))
        ids = np.fromiter(map(numbering.__getitem__, names), _SMALL, len(names))
        numbering.default_factory = None  # a plain dict from now on, kept rather than copied
        table = cls()
        table.ids = numbering
        table.names = list(numbering)
        empty = table.ids.pop(NO_VALUE, None)
        if empty is not None:
            # No value: declaring it declares nothing, and each occurrence in an op is a value
            # of its own, which no other op names.
            declared_ids[declared_ids == empty] = -1
            where = np.flatnonzero(ids == empty)[1:]
            ids[where] = np.arange(len(table.names), len(table.names) + len(where))
            table.names.extend([NO_VALUE] * len(where))
        return table, ids, declared_ids

    def id_of(self, name: str) -> int:
        """The id of ``name``, numbering it when new (the empty name: always a new id)."""
        found = self.ids.get(name)
        if found is None:
            found = len(self.names)
            self.names.append(name)
            if name != NO_VALUE:
                self.ids[name] = found
        return found

    def lookup(self, names: Sequence[str]) -> np.ndarray:
        """Ids of ``names``, -1 for a name the table does not hold.

        A pipeline asks about the same big lists again and again (every initializer of the
        net, in each check): a big lookup is remembered (until a bigger one mostly of other
        strings comes), and when another comes, the names that are the very string objects
        of it are matched by address in numpy; only the others are hashed (a hash lookup in a
        table of a million names misses the cache each time). The addresses are sorted only
        once a second big lookup comes.
        """
        if len(names) < _BULK_LOOKUP:
            return self._hashed(names)
        recent = self._recent
        if recent is None:
            ids = self._hashed(names)
        else:
            known, sorted_at, sorted_ids = recent
            if not len(sorted_at):  # a second big lookup: sort the first one's addresses
                known_at = np.fromiter(map(id, known), np.int64, len(known))
                order = np.argsort(known_at)
                sorted_at, sorted_ids = known_at[order], sorted_ids[order]
                self._recent = recent = (known, sorted_at, sorted_ids)
            at = np.fromiter(map(id, names), np.int64, len(names))
            slot = np.minimum(np.searchsorted(sorted_at, at), len(sorted_at) - 1)
            found = (sorted_at[slot] == at) & (sorted_ids[slot] >= 0)
            ids = np.full(len(names), -1, dtype=np.int64)
            ids[found] = sorted_ids[slot[found]]
            missing = np.flatnonzero(~found)
            if not len(missing):
                return ids
            ids[missing] = self._hashed([names[i] for i in missing.tolist()])
            if 2 * len(missing) < len(names) or len(names) < len(known):
                return ids  # mostly found by address, or smaller: keep the one remembered
        self.remember(list(names), ids)
        return ids

    def remember(self, names: list[str], ids: np.ndarray) -> None:
        """Take ``ids`` (this table's, of ``names``) as the last big lookup (see ``lookup``)."""
        self._recent = (names, np.zeros(0, dtype=np.int64), ids.copy())

    def _hashed(self, names: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(self.ids.get, names, repeat(-1)), np.int64, len(names))

    def ids_of(self, names: Sequence[str]) -> np.ndarray:
        """Ids of ``names``, adding the unknown ones (C-level when all are known)."""
        try:
            return np.fromiter(map(self.ids.__getitem__, names), np.int64, len(names))
        except KeyError:
            return np.fromiter(map(self.id_of, names), np.int64, len(names))


class SSAView:
    """The SSA of one revision of a ``Net`` (see the module docstring); get it from
    ``net.ssa()``."""

    __slots__ = (
        "_columns",
        "_consumers",
        "_external_in",
        "_external_in_ids",
        "_external_out",
        "_external_source",
        "_first_key",
        "_in_name",
        "_in_op",
        "_in_ptr",
        "_in_version",
        "_in_vid",
        "_key_name",
        "_lists",
        "_ops",
        "_out_name",
        "_out_op",
        "_out_ptr",
        "_out_version",
        "_out_vid",
        "_producer",
        "_producers",
        "_read_cache",
        "_reader_calls",
        "_reader_lists",
        "_readers",
        "_ssa",
        "_table",
        "_used",
        "_versions",
        "_write_counts",
        "_write_order",
        "net",
        "revision",
    )

    def __init__(
        self,
        net: NetLike,
        table: _NameTable,
        in_ptr: np.ndarray,
        in_name: np.ndarray,
        out_ptr: np.ndarray,
        out_name: np.ndarray,
        carried: _CarriedVersions | None = None,
    ) -> None:
        """Derive the view from integer columns (use ``build`` or ``edited``, not this).

        ``carried``: the versions an edit left valid, and which must be recomputed.
        """
        self.net = net
        self.revision = net.revision
        self._ops: Sequence[OpLike] = net.ops  # immutable: shared, not copied
        # Snapshots of the external lists: a net's own tuples are shared, not copied (a big
        # export declares a million inputs).
        self._external_in = tuple(net.external_inputs)
        self._external_out = tuple(net.external_outputs)
        self._table = table
        self._in_ptr, self._in_name = in_ptr, in_name
        self._out_ptr, self._out_name = out_ptr, out_name
        num_ops = len(self._ops)
        op_numbers = np.arange(num_ops, dtype=_SMALL)
        self._in_op = in_op = np.repeat(op_numbers, np.diff(in_ptr))
        self._out_op = out_op = np.repeat(op_numbers, np.diff(out_ptr))
        if carried is None:
            self._in_version, self._out_version = _versions(in_name, in_op, out_name, out_op)
        else:
            self._in_version, self._out_version = carried.completed(
                len(table.names), in_name, in_op, out_name, out_op
            )
        # A name written k times has versions 0..k (its final version is k): give each name
        # k + 1 consecutive keys.
        self._write_counts = np.bincount(out_name, minlength=len(table.names)).astype(_SMALL)
        # The table is shared with the views derived from this one, and only grows: mark the
        # names this net's ops use.
        self._used = np.zeros(len(table.names), dtype=bool)
        self._used[in_name] = True
        self._used[out_name] = True
        self._first_key = _offsets(self._write_counts + 1)
        self._in_vid = self._first_key[in_name] + self._in_version
        self._out_vid = self._first_key[out_name] + self._out_version
        self._producer = np.full(int(self._first_key[-1]), -1, dtype=_SMALL)
        self._producer[self._out_vid] = out_op
        self._lists: dict[str, list[int]] = {}
        self._columns: tuple[array[int], array[int], array[int], array[int]] | None = None
        self._external_in_ids: np.ndarray | None = None
        # Set by the view this one is derived from: its external inputs and their ids.
        self._external_source: tuple[Sequence[str], np.ndarray] | None = None
        self._key_name: np.ndarray | None = None
        self._readers: tuple[np.ndarray, np.ndarray] | None = None
        self._reader_calls = 0
        self._reader_lists: tuple[array[int], array[int], array[int], array[int]] | None = None
        self._read_cache: dict[str, list[tuple[int, int]]] = {}
        self._write_order: tuple[np.ndarray, np.ndarray] | None = None
        self._ssa: list[OpSSA] | None = None
        self._versions: dict[str, int] | None = None
        self._producers: dict[VersionedBlob, tuple[int, int]] | None = None
        self._consumers: dict[VersionedBlob, list[tuple[int, int]]] | None = None

    @classmethod
    def build(cls, net: NetLike, held: Sequence[str] = ()) -> SSAView:
        """Compute the view of ``net`` as it is now; ``held`` are the names of the values the
        net holds (an ONNX graph's initializers).

        Names are interned in op order (each op's inputs, then its outputs): a blob's uses
        cluster around its producer, so on big nets its dict entry is still in cache when it
        is met again. The external inputs and ``held`` are interned first, in the same pass:
        their ids are asked for by every pipeline (liveness, verify, unused params), and
        ``held``'s are remembered as a lookup of those very strings (``_NameTable.lookup``).
        """
        with paused_gc():
            ins = list(map(_INPUTS, net))
            outs = list(map(_OUTPUTS, net))
            in_counts, out_counts = _counts(ins), _counts(outs)
            external = net.external_inputs
            held = list(held)
            table, ids, declared_ids = _NameTable.interning(
                list(chain.from_iterable(map(operator.add, ins, outs))), [*external, *held]
            )
            external_ids = declared_ids[: len(external)]
            if len(held) >= _BULK_LOOKUP:
                table.remember(held, declared_ids[len(external) :])
            is_input = np.repeat(
                np.tile(np.array([True, False]), len(ins)),
                np.column_stack((in_counts, out_counts)).ravel(),
            )
            view = cls(
                net,
                table,
                _offsets(in_counts),
                ids[is_input],
                _offsets(out_counts),
                ids[~is_input],
            )
            view._external_in_ids = external_ids
            return view

    @classmethod
    def derive(cls, base: SSAView, net: NetLike, layout: Layout) -> SSAView:
        """The view of ``net``, an edit of ``base``'s net whose ops ``layout`` places.

        The base ops' columns are copied in numpy, only the new ops' names are interned, and
        only the versions of names a removed or new op writes (and of the new ops' reads)
        are recomputed: no name of an untouched op is hashed again.
        """
        with paused_gc():
            size = len(net)
            origin = np.full(size, -1, dtype=np.int64)
            for start, lo, hi in zip(layout.start, layout.lo, layout.hi, strict=True):
                origin[start : start + hi - lo] = np.arange(lo, hi, dtype=np.int64)
            is_base = origin >= 0
            new_positions = np.flatnonzero(~is_base).tolist()
            kept = origin[is_base]
            # _derived_column copies the kept slots in order: an edit never reorders kept ops.
            assert bool(np.all(kept[1:] > kept[:-1])), "an edit reordered the ops it kept"
            base_size = len(base._ops)
            keep = np.zeros(base_size, dtype=bool)
            keep[kept] = True
            table = base._table
            new_ops = [net[p] for p in new_positions]
            new_ins, new_outs = list(map(_INPUTS, new_ops)), list(map(_OUTPUTS, new_ops))
            # One lookup for all the new ops' names (inputs first, as ops number new names).
            in_ids = table.ids_of(list(chain.from_iterable(new_ins)))
            out_ids = table.ids_of(list(chain.from_iterable(new_outs)))
            in_ptr, in_name, in_version, in_stale = _derived_column(
                base._in_ptr,
                base._in_name,
                base._in_version,
                keep,
                is_base,
                _counts(new_ins),
                in_ids,
            )
            out_ptr, out_name, out_version, _ = _derived_column(
                base._out_ptr,
                base._out_name,
                base._out_version,
                keep,
                is_base,
                _counts(new_outs),
                out_ids,
            )
            # A replacement writing what the op it replaced wrote keeps that op's versions;
            # other versions change only for names a dropped base op or a new op writes.
            for position, index in layout.replaced.items():
                if net[position].outputs == base._ops[index].outputs:
                    is_base[position] = True
                    keep[index] = True
                    start, end = int(out_ptr[position]), int(out_ptr[position + 1])
                    first = int(base._out_ptr[index])
                    out_version[start:end] = base._out_version[first : first + end - start]
            dropped_writes = base._out_name[np.repeat(~keep, np.diff(base._out_ptr))]
            new_writes = out_name[np.repeat(~is_base, np.diff(out_ptr))]
            carried = _CarriedVersions(
                in_version, in_stale, out_version, np.concatenate((dropped_writes, new_writes))
            )
            view = SSAView(net, table, in_ptr, in_name, out_ptr, out_name, carried)
            view._external_source = base._external_ids_source()
            return view

    @property
    def size(self) -> int:
        """Number of ops of the net at this view's revision."""
        return len(self._ops)

    def with_externals(self, net: NetLike) -> SSAView:
        """The view of ``net``, which differs from this view's net only in its external
        inputs or outputs (no version changes: the columns are shared)."""
        with paused_gc():
            unchanged = _CarriedVersions(
                self._in_version,
                np.zeros(len(self._in_name), dtype=bool),
                self._out_version,
                np.zeros(0, dtype=np.int64),
            )
            view = SSAView(
                net,
                self._table,
                self._in_ptr,
                self._in_name,
                self._out_ptr,
                self._out_name,
                unchanged,
            )
            view._external_source = self._external_ids_source()
            return view

    # -- external inputs' ids --------------------------------------------------------------------

    def _external_ids_source(self) -> tuple[Sequence[str], np.ndarray] | None:
        """What a view derived from this one starts from to find its external inputs' ids."""
        if self._external_in_ids is not None:
            return self._external_in, self._external_in_ids
        return self._external_source

    def _external_input_ids(self) -> np.ndarray:
        """The name id of each external input (-1 for a name the name table does not hold).

        A big exported net declares every param as an input, and looking a million names up
        costs as much as a pass. A derived view's inputs are mostly the very string objects of
        the view it comes from (passes keep or drop declared inputs, rarely add one), so their
        ids are matched by object identity in numpy, and only new names are looked up.
        """
        if self._external_in_ids is None:
            names = self._external_in
            source, self._external_source = self._external_source, None
            if source is None:
                self._external_in_ids = self._lookup_ids(names)
            elif len(source[0]) == len(names) and all(map(operator.is_, names, source[0])):
                self._external_in_ids = self._with_new_names(names, source[1].copy())
            else:
                self._external_in_ids = self._ids_by_identity(names, *source)
        return self._external_in_ids

    def _with_new_names(self, names: Sequence[str], ids: np.ndarray) -> np.ndarray:
        """``ids`` with its -1 entries looked up again: an edit that rewires a read to a name
        adds it to the shared table after the ids were found."""
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            ids[missing] = self._lookup_ids([names[i] for i in missing.tolist()])
        return ids

    def _lookup_ids(self, names: Sequence[str]) -> np.ndarray:
        return self._table.lookup(names)

    def _ids_by_identity(
        self, names: Sequence[str], known: Sequence[str], known_ids: np.ndarray
    ) -> np.ndarray:
        """Ids of ``names``, copied from ``known_ids`` for the very objects in ``known``.

        ``known`` keeps its strings alive, so an address found in it is that string.
        """
        ids = np.full(len(names), -1, dtype=np.int64)
        if known:
            known_at = np.fromiter(map(id, known), np.int64, len(known))
            order = np.argsort(known_at)
            sorted_at = known_at[order]
            at = np.fromiter(map(id, names), np.int64, len(names))
            slot = np.minimum(np.searchsorted(sorted_at, at), len(sorted_at) - 1)
            found = sorted_at[slot] == at
            ids[found] = known_ids[order[slot[found]]]
        return self._with_new_names(names, ids)

    # -- keys ------------------------------------------------------------------------------------

    def _list(self, name: str, column: np.ndarray) -> list[int]:
        found = self._lists.get(name)
        if found is None:
            found = self._lists[name] = column.tolist()
        return found

    def key_columns(self) -> tuple[array[int], array[int], array[int], array[int]]:
        """``in_ptr``, ``in_keys``, ``out_ptr`` and ``out_keys`` as ``array.array`` columns
        (made once), for sweeps over every op: indexing them costs no numpy call, and they
        hold 4 bytes a value (``_int_array``) where lists of Python ints hold 40 (200 MB at
        10^6 ops)."""
        if self._columns is None:
            self._columns = (
                _int_array(self._in_ptr),
                _int_array(self._in_vid),
                _int_array(self._out_ptr),
                _int_array(self._out_vid),
            )
        return self._columns

    def read_sources(self) -> tuple[array[int], array[int]]:
        """For every read, in ``in_keys`` order: the op writing the value it reads (-1: the
        net starts with it) and the position of that write among the op's outputs (the
        first, for an op listing the blob twice: Caffe2 gives both the same version), as
        ``array.array`` columns made in one numpy pass: what a sweep comparing reads by
        value needs, without a ``(name, version)`` tuple per read (``ssa``)."""
        if not self.num_keys:
            return array("q"), array("q")
        positions = np.arange(len(self._out_vid), dtype=np.int64) - self._out_ptr[self._out_op]
        position_of_key = np.full(self.num_keys, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(position_of_key, self._out_vid, positions)
        producers = self._producer[self._in_vid]
        positions_read = np.where(producers >= 0, position_of_key[self._in_vid], -1)
        return _int_array(producers), _int_array(positions_read)

    @property
    def num_keys(self) -> int:
        """Keys are ``range(num_keys)``: each name's versions, from 0 to its final one (a view
        derived from another may also number names only removed ops used)."""
        return int(self._first_key[-1])

    @property
    def in_keys(self) -> list[int]:
        """Keys of every op's versioned inputs, op after op (slice with ``in_ptr``)."""
        return self._list("in_keys", self._in_vid)

    @property
    def in_ptr(self) -> list[int]:
        """Op ``i``'s inputs are ``in_keys[in_ptr[i]:in_ptr[i + 1]]``."""
        return self._list("in_ptr", self._in_ptr)

    @property
    def out_keys(self) -> list[int]:
        """Keys of every op's versioned outputs, op after op (slice with ``out_ptr``)."""
        return self._list("out_keys", self._out_vid)

    @property
    def out_ptr(self) -> list[int]:
        """Op ``i``'s outputs are ``out_keys[out_ptr[i]:out_ptr[i + 1]]``."""
        return self._list("out_ptr", self._out_ptr)

    def key(self, blob: VersionedBlob) -> int | None:
        """The key of ``blob``; ``None`` when no op of the net uses the name, or the version is
        beyond the name's final one."""
        name_id = self._table.ids.get(blob[0])
        if name_id is None or name_id >= len(self._used) or not self._used[name_id]:
            return None
        if not 0 <= blob[1] <= self._write_counts[name_id]:
            return None
        return int(self._first_key[name_id]) + blob[1]

    def blob(self, key: int) -> VersionedBlob:
        """The versioned blob of ``key``."""
        name_id = self._name_id(key)
        return (self._table.names[name_id], key - int(self._first_key[name_id]))

    def _name_id(self, key: int) -> int:
        key_name = self._key_name
        if key_name is None:
            key_name = self._key_names()
        return int(key_name[key])

    def _key_names(self) -> np.ndarray:
        """The name id of every key (built on first use)."""
        if self._key_name is None:
            names = np.arange(len(self._write_counts), dtype=_SMALL)
            self._key_name = np.repeat(names, self._write_counts + 1)
        return self._key_name

    def name_of(self, key: int) -> str:
        """The blob name of ``key``."""
        return self._table.names[self._name_id(key)]

    def version_of(self, key: int) -> int:
        """The version of ``key``."""
        return key - int(self._first_key[self._name_id(key)])

    # Lookups of single ops and keys index the numpy columns: converting a column of millions
    # to a Python list costs more than the few thousand lookups a pass makes.

    def input_keys(self, index: int) -> list[int]:
        """Keys of op ``index``'s versioned inputs, in order."""
        keys: list[int] = self._in_vid[self._in_ptr[index] : self._in_ptr[index + 1]].tolist()
        return keys

    def output_keys(self, index: int) -> list[int]:
        """Keys of op ``index``'s versioned outputs, in order."""
        keys: list[int] = self._out_vid[self._out_ptr[index] : self._out_ptr[index + 1]].tolist()
        return keys

    def pass_through_keys(self, indices: Sequence[int]) -> tuple[list[int], list[int], list[bool]]:
        """For each op of ``indices`` (each with an input and an output): the key of its first
        input, the key of its first output, and whether it is *plain*: its other outputs are
        unread and no external output, its first output is no external output, and its first
        input is its name's final version (no op overwrites the value it passes through).

        Vectorised, for identity removal: asking this of the 10^5 identities of a big export
        one view call at a time costs more than removing them.
        """
        ops = np.asarray(indices, dtype=np.int64)
        first_in = self._in_ptr[ops]
        read, read_names = self._in_vid[first_in], self._in_name[first_in]
        first_out = self._out_ptr[ops]
        output = self._out_vid[first_out]
        external = np.zeros(self.num_keys, dtype=bool)
        external[[key for key in map(self.key, self.external_outputs) if key is not None]] = True
        final = self._first_key[read_names] + self._write_counts[read_names]
        plain = ~external[output] & (read == final)
        extra = np.diff(self._out_ptr)[ops] - 1
        holders = np.flatnonzero(extra > 0)
        if len(holders):  # outputs beyond the first (a dropout's mask) must be unused
            counts = extra[holders]
            group_starts = np.repeat(np.cumsum(counts) - counts, counts)
            slots = np.repeat(first_out[holders] + 1, counts)
            slots += np.arange(len(slots)) - group_starts
            keys = self._out_vid[slots]
            used = np.bincount(self._in_vid, minlength=self.num_keys)[keys] > 0
            plain[np.repeat(holders, counts)[used | external[keys]]] = False
        return read.tolist(), output.tolist(), plain.tolist()

    def keys_of(self, blobs: Sequence[VersionedBlob]) -> np.ndarray:
        """``key`` of each of ``blobs`` (-1 for ``None``), in one numpy pass."""
        ids = self._table._hashed([blob[0] for blob in blobs])
        versions = np.fromiter((blob[1] for blob in blobs), np.int64, len(blobs))
        if not len(self._used):  # a net whose ops name no blob
            return np.full(len(blobs), -1, dtype=np.int64)
        known = (ids >= 0) & (ids < len(self._used))
        known[known] = self._used[ids[known]]
        at = np.where(known, ids, 0)
        known &= (versions >= 0) & (versions <= self._write_counts[at])
        return np.where(known, self._first_key[at] + versions, -1)

    def producers_of(self, keys: np.ndarray) -> list[int | None]:
        """``producer_of`` each of ``keys`` (from ``keys_of``; ``None`` for -1)."""
        if not self.num_keys:
            return [None] * len(keys)
        found = np.where(keys >= 0, self._producer[np.maximum(keys, 0)], -1)
        return [None if producer < 0 else producer for producer in found.tolist()]

    def reads_of(self, keys: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """Every read of each of ``keys`` (from ``keys_of``; -1: none), as three lists: which
        key (its position in ``keys``), the reading op, the input position; key after key,
        and each key's reads in op and position order (``readers``, in one numpy pass)."""
        if not self.num_keys:
            return [], [], []
        self._reads_in_keys(0, 0)  # sorts the reads by key, once per view
        assert self._readers is not None
        bounds, order = self._readers
        at = np.maximum(keys, 0)
        starts = bounds[at]
        counts = np.where(keys >= 0, bounds[at + 1] - starts, 0)
        firsts = np.cumsum(counts) - counts
        slots = order[np.repeat(starts - firsts, counts) + np.arange(int(counts.sum()))]
        ops = self._in_op[slots]
        which = np.repeat(np.arange(len(keys)), counts)
        return which.tolist(), ops.tolist(), (slots - self._in_ptr[ops]).tolist()

    def blobs(self, keys: Sequence[int]) -> list[VersionedBlob]:
        """``blob`` of each of ``keys``, in one numpy pass."""
        at = np.asarray(keys, dtype=np.int64)
        name_ids = self._key_names()[at]
        versions = (at - self._first_key[name_ids]).tolist()
        names = map(self._table.names.__getitem__, name_ids.tolist())
        return list(zip(names, versions, strict=True))

    def producer_of(self, key: int) -> int | None:
        """Index of the op writing ``key``'s blob; ``None`` for a version no op writes."""
        producer = int(self._producer[key])
        return None if producer < 0 else producer

    def readers(self, key: int) -> list[tuple[int, int]]:
        """``(op index, input position)`` of every read of ``key``, in op and position order.

        The first calls slice numpy arrays; a pass asking about many keys (a rewire per
        removed identity) gets ``array.array`` copies made once (4 bytes a value,
        ``_int_array``), where a call costs no numpy call."""
        fast = self._reader_lists
        if fast is None:
            self._reader_calls += 1
            if self._reader_calls < _LIST_READERS_AFTER:
                return self._reads_in_keys(key, key + 1)
            self._reads_in_keys(key, key)  # sorts the reads once
            assert self._readers is not None
            bounds, order = self._readers
            fast = self._reader_lists = (
                _int_array(bounds),
                _int_array(order),
                _int_array(self._in_op),
                _int_array(self._in_ptr),
            )
        bounds_list, order_list, in_op, in_ptr = fast
        found = []
        for slot in order_list[bounds_list[key] : bounds_list[key + 1]]:
            op = in_op[slot]
            found.append((op, slot - in_ptr[op]))
        return found

    def _reads_in_keys(self, first: int, end: int) -> list[tuple[int, int]]:
        """Reads of keys ``first .. end - 1`` (one name's versions are consecutive keys), in
        op and position order. The first call sorts every read by key, once per view."""
        if self._readers is None:
            order = np.argsort(self._in_vid, kind="stable").astype(_SMALL)
            bounds = _offsets(np.bincount(self._in_vid, minlength=self.num_keys))
            self._readers = (bounds, order)
        bounds, order = self._readers
        slots = order[bounds[first] : bounds[end]]
        if end - first > 1:  # one key's reads are in slot order already (a stable sort)
            slots = np.sort(slots)
        ops = self._in_op[slots]
        return list(zip(ops.tolist(), (slots - self._in_ptr[ops]).tolist(), strict=True))

    # -- one name, for rewriters (graphtools.usedef) ---------------------------------------------

    def _key_range(self, name: str) -> tuple[int, int] | None:
        name_id = self._table.ids.get(name)
        if name_id is None or name_id >= len(self._used) or not self._used[name_id]:
            return None
        first = int(self._first_key[name_id])
        return first, first + int(self._write_counts[name_id]) + 1

    def writes(self, name: str) -> list[tuple[int, int]]:
        """``(op index, count)`` of every op writing ``name``, in op order (``count`` > 1 for
        an op listing it several times among its outputs)."""
        found = self._key_range(name)
        if found is None:
            return []
        first, end = found
        writes = []
        reached = first
        for key, producer in enumerate(self._producer[first + 1 : end].tolist(), first + 1):
            if producer >= 0:
                writes.append((producer, key - reached))
                reached = key
        return writes

    def reads(self, name: str) -> list[tuple[int, int]]:
        """``(op index, input position)`` of every read of ``name`` (any version), in order."""
        cached = self._read_cache.get(name)
        if cached is not None:
            return cached
        found = self._key_range(name)
        return [] if found is None else self._reads_in_keys(*found)

    def prefetch_reads(self, names: Iterable[str]) -> None:
        """Find the reads of many names in one vectorised scan, for ``reads``: cheaper than
        the per-key index (a sort of every read) when that is not built yet."""
        if self._readers is not None:
            return
        wanted_names = [name for name in set(names) if name not in self._read_cache]
        if len(wanted_names) < _PREFETCH_MIN:
            return
        ids = self._lookup_ids(wanted_names)
        wanted = np.zeros(len(self._table.names), dtype=bool)
        wanted[ids[ids >= 0]] = True
        slots = np.flatnonzero(wanted[self._in_name])
        ops = self._in_op[slots]
        found: dict[int, list[tuple[int, int]]] = {}
        for name_id, op, position in zip(
            self._in_name[slots].tolist(),
            ops.tolist(),
            (slots - self._in_ptr[ops]).tolist(),
            strict=True,
        ):
            found.setdefault(name_id, []).append((op, position))
        for name, name_id in zip(wanted_names, ids.tolist(), strict=True):
            self._read_cache[name] = found.get(name_id, [])

    def removal_keeps_reads(self, removed: Sequence[int], replaced: Sequence[int] = ()) -> bool:
        """Whether removing the ops at ``removed`` leaves every other read (but those of the
        ``replaced`` ops, checked apart) with the value it had: no such op reads a version the
        removed ops write. External outputs are not looked at (the edit check tests them name
        by name). One pass of numpy over the columns (for bulk removals)."""
        gone = np.zeros(len(self._ops), dtype=bool)
        gone[np.fromiter(removed, np.int64, len(removed))] = True
        written = np.zeros(self.num_keys, dtype=bool)
        written[self._out_vid[np.repeat(gone, np.diff(self._out_ptr))]] = True
        gone[np.fromiter(replaced, np.int64, len(replaced))] = True
        return not (written[self._in_vid] & ~gone[self._in_op]).any()

    def last_writers(self, names: Sequence[str], ops: Sequence[int]) -> list[int]:
        """For each ``(name, op index)`` pair, the index of the last op before it writing the
        name (-1: none), in one vectorised lookup (the edit check asks it for bulk rewires)."""
        if self._write_order is None:
            stride = len(self._ops) + 1
            written = self._out_name.astype(np.int64)  # * stride: wide
            order = np.argsort(written * stride + self._out_op, kind="stable")
            self._write_order = (written[order] * stride + self._out_op[order], order)
        sorted_at, order = self._write_order
        stride = len(self._ops) + 1
        ids = self._lookup_ids(list(names))
        at = np.fromiter(ops, np.int64, len(ops))
        slot = np.searchsorted(sorted_at, ids * stride + at, "left") - 1
        hit = (ids >= 0) & (slot >= 0)
        hit[hit] = sorted_at[slot[hit]] // stride == ids[hit]
        writers = np.full(len(at), -1, dtype=np.int64)
        writers[hit] = self._out_op[order[slot[hit]]]
        found: list[int] = writers.tolist()
        return found

    def uses(self, blob: VersionedBlob) -> list[Use]:
        """Every read of exactly ``blob``, as ``Use(op, position)``, in op and input order."""
        key = self.key(as_blob(blob, "blob"))
        return [] if key is None else [Use(op, position) for op, position in self.readers(key)]

    def next_write(self, key: int) -> int | None:
        """Index of the first op writing ``key``'s name at a later version, or ``None``.

        An op reading ``key``'s blob sees the same value as the blob's first reader iff its
        index is at most this (an op reads before it writes).
        """
        name_id = self._name_id(key)
        final_key = int(self._first_key[name_id] + self._write_counts[name_id])
        if key >= final_key:
            return None
        # The name's later versions are key + 1 .. final_key; the first one an op writes is the
        # next write (an op listing the name twice skips a version, so it may not be key + 1).
        for later in range(key + 1, final_key + 1):
            producer = int(self._producer[later])
            if producer >= 0:
                return producer
        return None

    def last_write_keys(self, names: Iterable[str]) -> list[int]:
        """Keys of the last write of each of ``names`` that some op writes (vectorised: for the
        thousands of params a net declares), in op order."""
        names = list(names)
        external = self._external_in
        if len(names) == len(external) and all(map(operator.is_, names, external)):
            ids = self._external_input_ids()
        else:
            ids = self._lookup_ids(names)
        wanted = np.zeros(len(self._write_counts), dtype=bool)
        wanted[ids[(ids >= 0) & (ids < len(wanted))]] = True
        last = (self._write_counts[self._out_name] == self._out_version) & wanted[self._out_name]
        return list(dict.fromkeys(self._out_vid[last].tolist()))

    def final_version(self, name: str) -> int:
        """The version of ``name`` at the end of the net (0 when no op writes it)."""
        name_id = self._table.ids.get(name)
        if name_id is None or name_id >= len(self._write_counts):
            return 0
        return int(self._write_counts[name_id])

    def read_names(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` that some op reads (at any version), in one pass over the reads."""
        read = np.zeros(len(self._table.names), dtype=bool)
        read[self._in_name] = True
        ids = self._table.ids
        return {name for name in names if (i := ids.get(name)) is not None and read[i]}

    def dead_end_writes(self) -> list[str]:
        """The names written by ops none of whose outputs any op reads (at any version): the
        heads a net declaring outputs may have forgotten to declare. One numpy pass over the
        writes and the reads."""
        unread = np.ones(len(self._table.names), dtype=bool)
        unread[self._in_name] = False
        per_slot = unread[self._out_name]
        starts = self._out_ptr[:-1][np.diff(self._out_ptr) > 0]
        if not len(starts):
            return []
        heads = np.logical_and.reduceat(per_slot, starts)
        slots = np.repeat(heads, np.diff(np.append(starts, len(per_slot))))
        names = self._table.names
        return list(dict.fromkeys(names[i] for i in self._out_name[slots].tolist()))

    def initially_read(self, names: Sequence[str]) -> np.ndarray:
        """For each of ``names``, whether some op reads its value before any op runs (version
        0): a boolean array, in one pass of numpy over the reads (for the hundreds of
        thousands of params of a big net, whose set of names would cost more to build and
        query than the answer)."""
        read = np.zeros(len(self._table.names), dtype=bool)
        read[self._in_name[self._in_version == 0]] = True
        ids = self._lookup_ids(names)
        hit = ids >= 0
        hit[hit] = read[ids[hit]]
        return hit

    def rewritten_names(self, held: Sequence[str]) -> set[str]:
        """Names written more than once, and those of ``held`` (values the net has before any
        op runs: inputs, initializers) written at all: what breaks single assignment."""
        counts = self._write_counts
        names = self._table.names
        found = {names[i] for i in np.flatnonzero(counts > 1).tolist() if names[i] != NO_VALUE}
        if held:
            ids = self._lookup_ids(held)
            ids = ids[(ids >= 0) & (ids < len(counts))]
            found.update(names[i] for i in ids[counts[ids] > 0].tolist())
        return found

    def undefined_reads(
        self, also_defined: Container[str], held: Sequence[str] = ()
    ) -> list[tuple[int, str]]:
        """``(op index, name)`` of every read at version 0 ("used before defined", in Caffe2's
        words) of a name that is neither an external input of the net, nor in ``held``, nor
        in ``also_defined``, in op and input order.

        The external inputs (every param of an exported Caffe2 net) and ``held`` (the
        initializers of an ONNX graph) are struck off by id in numpy; only the few names left
        are looked up in ``also_defined``.
        """
        unwritten = self._in_version == 0
        names = self._table.names
        read = np.zeros(len(names), dtype=bool)
        read[self._in_name[unwritten]] = True
        for declared in (self._external_input_ids(), self._lookup_ids(held)):
            read[declared[(declared >= 0) & (declared < len(read))]] = False
        bad = [
            i
            for i in np.flatnonzero(read).tolist()
            if names[i] not in also_defined and names[i] != NO_VALUE
        ]
        if not bad:
            return []
        undefined = np.zeros(len(names), dtype=bool)
        undefined[bad] = True
        slots = np.flatnonzero(unwritten & undefined[self._in_name])
        read_names = map(names.__getitem__, self._in_name[slots].tolist())
        return list(zip(self._in_op[slots].tolist(), read_names, strict=True))

    # -- Caffe2's data ---------------------------------------------------------------------------

    @property
    def ssa(self) -> list[OpSSA]:
        """``get_ssa(net)[0]`` of the net at this view's revision."""
        if self._ssa is None:
            with paused_gc():
                in_blobs = list(
                    zip(
                        chain.from_iterable(map(_INPUTS, self._ops)),
                        self._in_version.tolist(),
                        strict=True,
                    )
                )
                out_blobs = list(
                    zip(
                        chain.from_iterable(map(_OUTPUTS, self._ops)),
                        self._out_version.tolist(),
                        strict=True,
                    )
                )
                in_ptr, _, out_ptr, _ = self.key_columns()
                self._ssa = [
                    (in_blobs[in_ptr[i] : in_ptr[i + 1]], out_blobs[out_ptr[i] : out_ptr[i + 1]])
                    for i in range(len(self._ops))
                ]
        return self._ssa

    @property
    def versions(self) -> dict[str, int]:
        """``get_ssa(net)[1]``: the final version of every blob, in Caffe2's insertion order."""
        if self._versions is None:
            outs = chain.from_iterable(map(_OUTPUTS, self._ops))
            if self._external_in:
                seen = chain(self._external_in, outs)
            else:  # implicit inputs: a read before any write declares the blob
                reads_then_writes = map(
                    operator.add, map(_INPUTS, self._ops), map(_OUTPUTS, self._ops)
                )
                seen = chain.from_iterable(reads_then_writes)
            versions = dict.fromkeys(seen, 0)
            versions.update(
                zip(
                    chain.from_iterable(map(_OUTPUTS, self._ops)),
                    self._out_version.tolist(),
                    strict=True,
                )
            )
            self._versions = versions
        return self._versions

    @property
    def external_inputs(self) -> list[VersionedBlob]:
        """The net's external inputs at version 0."""
        return [(name, 0) for name in self._external_in]

    @property
    def external_outputs(self) -> list[VersionedBlob]:
        """The net's external outputs at their final version."""
        return [(name, self.final_version(name)) for name in self._external_out]

    @property
    def producers(self) -> dict[VersionedBlob, tuple[int, int]]:
        """``{versioned blob: (op index, output position)}``."""
        if self._producers is None:
            self._producers = get_producer_map(self.ssa)
        return self._producers

    @property
    def consumers(self) -> dict[VersionedBlob, list[tuple[int, int]]]:
        """``{versioned blob: [(op index, input position), ...]}`` (a plain dict)."""
        if self._consumers is None:
            self._consumers = dict(get_consumer_map(self.ssa))
        return self._consumers

    def producer(self, blob: VersionedBlob) -> int | None:
        """Index of the op writing ``blob``, or ``None`` (external input, undeclared, v0)."""
        key = self.key(as_blob(blob, "blob"))
        return None if key is None else self.producer_of(key)

    def consumer_ops(self, blob: VersionedBlob) -> list[int]:
        """Indices of the ops reading ``blob``, in op order, each once."""
        key = self.key(as_blob(blob, "blob"))
        if key is None:
            return []
        return list(dict.fromkeys(index for index, _ in self.readers(key)))

    def inputs_of(self, index: int) -> list[VersionedBlob]:
        """Versioned inputs of op ``index``."""
        return [self.blob(key) for key in self.input_keys(index)]

    def outputs_of(self, index: int) -> list[VersionedBlob]:
        """Versioned outputs of op ``index``."""
        return [self.blob(key) for key in self.output_keys(index)]

    def latest(self, name: str) -> VersionedBlob:
        """The version of ``name`` visible at the end of the net."""
        return (name, self.final_version(name))

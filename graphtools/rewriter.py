"""The rewriter: ``Edit``, one checked transaction on a net, and its legality check.

``Net.edit()`` opens an ``Edit``; passes say what changes (``remove``, ``insert``, ``set_op``,
``expand``, ``replace_all_uses_with``, ``rename``, external lists) and the whole is checked and
applied when the ``with`` block ends. ``check_edit`` refuses, with ``IllegalRewriteError`` and the
net untouched, an edit that would change a value some op reads without being asked to.

The net is seen through ``graphtools._core.NetLike`` (the IR sits above this module), and
what the check asks about blobs comes from the net's use-def (``graphtools.usedef``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np

from graphtools._core import ONNX, NetLike, OpLike, as_names
from graphtools._gc import paused_gc
from graphtools.errors import IllegalRewriteError, InvalidArgumentError
from graphtools.layout import Layout
from graphtools.nested import NestedAccess, nested_access, nested_accesses
from graphtools.ssa import NO_VALUE, Use, VersionedBlob, as_blob
from graphtools.ssa_view import SSAView
from graphtools.usedef import NameIndex, NameScan, Overlay, UseDef
from graphtools.values import ArrayTensor, Tensor, ValueType

_V = TypeVar("_V")

__all__ = ["Edit", "EditableNet", "affected_names", "check_edit", "written_differently"]


class EditableNet(NetLike, Protocol):
    """What an edit needs of the net it changes (``graphtools.ir.Net`` is one)."""

    @property
    def _ops(self) -> Sequence[Any]: ...

    _external_inputs: tuple[str, ...]
    _external_outputs: tuple[str, ...]

    def uses(self, blob: VersionedBlob) -> list[Use]: ...

    def producer(self, blob: VersionedBlob) -> int | None: ...

    def external_input_set(self) -> frozenset[str]: ...

    def check_op(self, op: Any) -> Any: ...

    def _current_usedef(self) -> SSAView | Overlay | None: ...

    def _apply(
        self,
        removed: AbstractSet[int],
        replaced: Mapping[int, Any],
        inserted: Mapping[int, Sequence[Any]],
        checked: tuple[Layout, set[str]] | None = None,
    ) -> None: ...

    @property
    def initializers(self) -> Mapping[str, Tensor]: ...

    @property
    def types(self) -> Mapping[str, ValueType]: ...

    def _set_externals(
        self,
        inputs: Sequence[str] | None,
        outputs: Sequence[str] | None,
        initializers: dict[str, Tensor] | None = None,
        types: dict[str, ValueType] | None = None,
    ) -> None: ...


class Edit:
    """One transaction on a net: open it with ``Net.edit()``.

    Every index and versioned blob refers to the net as it was when the edit opened; the
    changes are recorded, then checked and applied together when the ``with`` block ends
    (an exception inside the block discards them).

    * ``remove(index)``: drop an op.
    * ``insert(index, ops)``: put ops before the op at ``index`` (``len(net)``: at the end);
      several inserts at one index keep their order and go before a replacement of that op.
    * ``set_op(index, op)``: replace an op; the new op keeps its place and identity, so its
      readers keep reading "its" outputs.
    * ``expand(index, ops)``: replace an op by several (a lowering); each blob the old op
      wrote is taken over by the last of ``ops`` writing that name, so its readers read that.
    * ``replace_all_uses_with(old, new)``: every read of versioned blob ``old`` reads ``new``
      (a blob of the same net, ``(name, version)``) instead, and when ``old`` is the final
      version of an external output, the output becomes ``new``'s name. Rewires compose: with
      ``a -> b`` and ``b -> c`` in one edit, the readers of ``a`` read ``c``.
    * ``rename(blob, name)``: the value ``blob`` gets the name ``name`` (its producer, its
      readers, the external list entry it is).
    * ``set_external_inputs(names)`` / ``set_external_outputs(names)``.
    * ``replace_with_constant(blob, tensor)``: the value ``blob`` becomes a constant the net
      holds under the same name (an initializer); the op writing it must be removed in the
      same edit, and its readers (nested nets included) then read the constant.
    * ``set_initializer(name, tensor)`` / ``set_type(name, value_type)``: add, replace or (with
      ``None``) remove a constant the net holds or the declared type of a value (ONNX). A rename
      carries both along, and an external output that a rewire gives another name keeps its
      declared type.

    The check refuses, with ``IllegalRewriteError`` and the net untouched, an edit that would
    change a value an op reads without being asked to: removing an op whose value is still
    read, inserting a write over a value still read, rewiring a read to a version it would not
    see where it stands, touching a blob written inside a nested net. Removing an op and
    rewiring or replacing it, or rewiring one read twice, is a conflict. After the block,
    ``changed`` tells whether the net changed: a pass returns it as ``modified``.
    """

    def __init__(self, net: EditableNet) -> None:
        self._net = net
        self._revision = net.revision
        self._removed: set[int] = set()
        self._replaced: dict[int, OpLike] = {}
        self._inserted: dict[int, list[OpLike]] = {}
        self._expanded: dict[int, tuple[int, int]] = {}  # index -> (first, count) in _inserted
        self._rewires: list[tuple[VersionedBlob, VersionedBlob]] = []
        self._renames: dict[VersionedBlob, str] = {}
        self._external_inputs: tuple[str, ...] | None = None
        self._external_outputs: tuple[str, ...] | None = None
        self._initializers: dict[str, Tensor | None] = {}
        self._types: dict[str, ValueType | None] = {}
        self._constants: dict[VersionedBlob, Tensor] = {}
        self._renamed_outputs: dict[str, str] = {}
        self.changed = False
        self._open = True

    @property
    def is_open(self) -> bool:
        """Whether changes can still be recorded (not committed, not abandoned)."""
        return self._open

    def __enter__(self) -> Edit:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.commit()
        self._open = False

    # -- reading the net as it was --------------------------------------------------------------

    def uses(self, blob: VersionedBlob) -> list[Use]:
        """``Net.uses`` of the net as it was when the edit opened."""
        return self._net.uses(blob)

    def producer(self, blob: VersionedBlob) -> int | None:
        """``Net.producer`` of the net as it was when the edit opened."""
        return self._net.producer(blob)

    # -- recording ------------------------------------------------------------------------------

    def _still_open(self) -> None:
        if not self._open:
            raise IllegalRewriteError("this edit is closed; open a new one with net.edit()")

    def _index(self, index: int, what: str, *, end_ok: bool = False) -> int:
        self._still_open()
        size = len(self._net)
        if not isinstance(index, int):
            raise InvalidArgumentError(f"{what}: an op index is an int, not {index!r}")
        if not 0 <= index < size + end_ok:
            raise IndexError(f"{what}: op index {index} out of range for a net of {size} ops")
        return index

    def remove(self, index: int) -> None:
        """Remove the op at ``index``."""
        self._removed.add(self._index(index, "remove"))

    def insert(self, index: int, ops: Iterable[OpLike]) -> None:
        """Insert ``ops`` before the op at ``index`` (``len(net)``: append)."""
        group = [self._net.check_op(op) for op in ops]
        index = self._index(index, "insert", end_ok=True)
        if group:
            self._inserted.setdefault(index, []).extend(group)

    def set_op(self, index: int, op: OpLike) -> None:
        """Replace the op at ``index`` with ``op``."""
        self._replaced[self._index(index, "set_op")] = self._net.check_op(op)

    def expand(self, index: int, ops: Iterable[OpLike]) -> None:
        """Replace the op at ``index`` with ``ops``: for each name the old op writes, the last
        of ``ops`` writing that name takes over its value (its readers and, for an external
        output, the net's output read that op's value); the others are new ops."""
        index = self._index(index, "expand")
        group = [self._net.check_op(op) for op in ops]
        if index in self._expanded:
            raise IllegalRewriteError(f"op #{index} is expanded twice in one edit")
        self._removed.add(index)
        inserted = self._inserted.setdefault(index, [])
        self._expanded[index] = (len(inserted), len(group))
        inserted.extend(group)

    def replace_all_uses_with(self, old: VersionedBlob, new: VersionedBlob) -> None:
        """Make every read of ``old`` read ``new`` (see the class docstring)."""
        self._still_open()
        self._rewires.append((as_blob(old, "old"), as_blob(new, "new")))

    def rename(self, blob: VersionedBlob, name: str) -> None:
        """Give the value ``blob`` the name ``name``: its producer writes ``name`` instead, every
        read of it reads ``name``, and so do the external input (version 0) or output (final
        version) it is. Combined with ``replace_all_uses_with(old, blob)``, ``old``'s readers
        read ``name`` too."""
        self._still_open()
        blob = as_blob(blob, "blob")
        if not isinstance(name, str) or name == NO_VALUE:
            raise IllegalRewriteError(
                f"cannot rename {blob} to {name!r}: a value's name is a non-empty string "
                "(the empty name means 'no value')"
            )
        if blob in self._renames:
            raise IllegalRewriteError(f"{blob} is renamed twice in one edit")
        if name != blob[0]:  # its own name: nothing to do (changed stays False)
            self._renames[blob] = name

    def set_external_inputs(self, names: Iterable[str]) -> None:
        """Replace the declared external inputs."""
        self._external_inputs = as_names(names, "external_inputs")

    def set_external_outputs(self, names: Iterable[str]) -> None:
        """Replace the declared external outputs."""
        self._external_outputs = as_names(names, "external_outputs")

    def replace_with_constant(self, blob: VersionedBlob, tensor: Tensor) -> None:
        """Make the value ``blob`` a constant the net holds under its name (see the class
        docstring); the op writing ``blob`` must be removed in the same edit."""
        self._still_open()
        tensor = _as_tensor(tensor, f"the constant for {blob}")
        blob = as_blob(blob, "blob")
        if blob in self._constants:
            raise IllegalRewriteError(f"{blob} is replaced by a constant twice in one edit")
        self._constants[blob] = tensor

    def set_initializer(self, name: str, tensor: Tensor | None) -> None:
        """Make ``name`` a constant of the net holding ``tensor`` (``None``: no longer one)."""
        self._still_open()
        self._initializers[name] = (
            None if tensor is None else _as_tensor(tensor, f"initializer {name!r}")
        )

    def set_type(self, name: str, value_type: ValueType | None) -> None:
        """Declare the type of value ``name`` (``None``: drop the declaration)."""
        self._still_open()
        if value_type is not None and not isinstance(value_type, ValueType):
            raise TypeError(
                f"the type of {name!r} must be a graphtools.values.ValueType (e.g. "
                f"ValueType(TensorProto.FLOAT, (2, 4))) or None, not {value_type!r}"
            )
        self._types[name] = value_type

    # -- committing -----------------------------------------------------------------------------

    def commit(self) -> bool:
        """Check and apply the recorded changes (``with`` does this); returns ``changed``."""
        with paused_gc():  # many small objects, none of them garbage: see graphtools._gc
            return self._commit()

    def _commit(self) -> bool:
        net = self._net
        if not self._open:
            raise IllegalRewriteError("this edit was already committed")
        self._open = False
        if net.revision != self._revision:
            raise IllegalRewriteError(
                "the net changed while an edit was open: make every change through the edit"
            )
        conflict = self._removed.intersection(self._replaced)
        if conflict:
            raise IllegalRewriteError(f"op #{min(conflict)} is both removed and replaced")
        replaced = dict(self._replaced)
        usedef: UseDef | None = net._current_usedef()
        dropping = any(tensor is None for tensor in self._initializers.values())
        if usedef is None and (
            replaced
            or self._removed
            or self._inserted
            or self._rewires
            or self._renames
            or dropping
        ):
            usedef = NameScan(net._ops, self._names_to_check())
        rewired, final_outputs, inputs, outputs = self._resolve_values(replaced, usedef)
        renamed_outputs = self._renamed_outputs
        constants = self._resolve_constants(usedef)
        ops_change = bool(self._removed or replaced or self._inserted)
        if net.dialect == ONNX and (ops_change or self._renames):
            assert usedef is not None  # made above whenever ops change or values are renamed
            # the inputs and initializers this edit renames away or drops free their names
            freed = {old for (old, version), new in self._renames.items() if version == 0}
            freed.update(name for name, tensor in self._initializers.items() if tensor is None)
            _refuse_second_writes(net, self._removed, replaced, self._inserted, usedef, freed)
            _refuse_renamed_inputs_taken(net, self._renames, self._removed, replaced, usedef, freed)
        if net.dialect == ONNX and getattr(net, "_parent", None) is None:
            _refuse_undefined_reads(
                net, self, replaced, net._external_inputs if inputs is None else inputs, usedef
            )
        checked = None
        if ops_change or rewired or final_outputs:
            checked = self._check(replaced, rewired, final_outputs, outputs, usedef, constants)
        if ops_change:
            net._apply(self._removed, replaced, self._inserted, checked)
        if inputs is not None and inputs == net._external_inputs:
            inputs = None
        if outputs is not None and outputs == net._external_outputs:
            outputs = None
        initializers, types = self._held_values(renamed_outputs)
        if any(part is not None for part in (inputs, outputs, initializers, types)):
            net._set_externals(inputs, outputs, initializers, types)
        self.changed = net.revision != self._revision
        return self.changed

    def _rewire_targets(self) -> dict[VersionedBlob, VersionedBlob]:
        """Where each rewired blob's reads end up: rewires compose within an edit, so with
        ``a -> b`` and ``b -> c`` the reads of ``a`` read ``c`` (whatever the order the rewires
        were given in: removing a chain of identities one by one just works)."""
        step = dict(self._rewires)
        targets: dict[VersionedBlob, VersionedBlob] = {}
        for old in step:
            path = [old]
            blob = step[old]
            while blob in step and blob not in targets:
                if blob in path:
                    chain = " -> ".join(map(str, [*path, blob]))
                    raise IllegalRewriteError(f"rewires go round in a circle: {chain}")
                path.append(blob)
                blob = step[blob]
            final = targets.get(blob, blob)
            for passed in path:
                targets[passed] = final
        return targets

    def _resolve_constants(self, usedef: UseDef | None) -> dict[str, int]:
        """``{name: the removed op whose value becomes the constant}`` of the edit's
        ``replace_with_constant`` calls (which also set the initializers)."""
        found: dict[str, int] = {}
        for blob, tensor in self._constants.items():
            producer = None if usedef is None else usedef.producer(blob)
            if producer is None or producer not in self._removed:
                raise IllegalRewriteError(
                    f"cannot replace {blob} by a constant: the op writing it must be removed "
                    "in the same edit"
                )
            assert usedef is not None
            if usedef.final_version(blob[0]) != blob[1] or blob[1] != 1:
                raise IllegalRewriteError(
                    f"cannot replace {blob} by a constant: '{blob[0]}' is written more than "
                    "once, and the constant would take every one of its values"
                )
            found[blob[0]] = producer
            self._initializers[blob[0]] = tensor
        return found

    def _held_values(
        self, renamed_outputs: Mapping[str, str]
    ) -> tuple[dict[str, Tensor] | None, dict[str, ValueType] | None]:
        """The net's initializers and types after this edit (``None``: unchanged): the changes
        asked for, and those renames and renamed external outputs carry along."""
        net = self._net
        moves = {blob[0]: name for blob, name in self._renames.items()}
        moves.update(renamed_outputs)
        initializers = _moved(net.initializers, moves, self._initializers, keep_old=False)
        # A renamed ONNX value frees its name (one value per name): a later value so named
        # must not inherit its type. A Caffe2 name keeps its other versions, and their type.
        types = _moved(net.types, moves, self._types, keep_old=net.dialect != ONNX)
        return initializers, types

    def _names_to_check(self) -> set[str]:
        """Every blob name this edit's check may ask about (for a scan of only those)."""
        net = self._net
        ops = net._ops
        names = {name for index in (*self._removed, *self._replaced) for name in ops[index].outputs}
        for op in (*self._replaced.values(), *chain.from_iterable(self._inserted.values())):
            names.update(op.outputs)
            names.update(op.inputs)
            if op.has_nested_nets():
                names.update(nested_access(op).names)
        names.update(name for old, new in self._rewires for name in (old[0], new[0]))
        names.update(
            name for blob, new_name in self._renames.items() for name in (blob[0], new_name)
        )
        names.update(blob[0] for blob in self._constants)
        names.update(name for name, tensor in self._initializers.items() if tensor is None)
        names.discard(NO_VALUE)
        return names

    def _resolve_values(self, replaced: dict[int, OpLike], usedef: UseDef | None) -> _Resolved:
        """Turn ``rename`` and ``replace_all_uses_with`` into replacements of the ops they
        touch (added to ``replaced``).

        Returns the reads they rewire (``(op index, slot)`` -> the op whose write the read
        must see, ``None`` for the value the net starts with), the external outputs whose
        final value is checked (name -> that op), and the new external inputs and outputs
        (``None``: unchanged).
        """
        net = self._net
        expected: dict[tuple[int, int], int | None] = {}
        new_inputs: dict[int, list[str]] = {}
        new_outputs: dict[int, list[str]] = {}
        finals: dict[str, tuple[str, int | None]] = {}  # output name -> (new name, producer)
        renamed_inputs: dict[str, str] = {}
        if usedef is None:  # nothing to resolve
            return {}, {}, self._external_inputs, self._external_outputs
        nested = nested_accesses(net) if self._rewires or self._renames else {}

        def rewire(use: Use, blob: VersionedBlob, name: str, producer: int | None) -> None:
            if use.op in self._removed:
                return
            if use.op in replaced:
                raise IllegalRewriteError(
                    f"op #{use.op} ({net[use.op].type}) reads {blob}, which the edit rewires, "
                    "and is replaced by set_op: rewire it in the op given to set_op"
                )
            if (use.op, use.position) in expected:
                raise IllegalRewriteError(
                    f"input {use.position} of op #{use.op} ({net[use.op].type}) is rewired "
                    "twice in one edit"
                )
            expected[(use.op, use.position)] = producer
            new_inputs.setdefault(use.op, list(net[use.op].inputs))[use.position] = name

        external_outputs = frozenset(net._external_outputs)

        def at_the_end(blob: VersionedBlob) -> bool:
            return blob[0] in external_outputs and blob[1] == usedef.final_version(blob[0])

        for blob, name in self._renames.items():
            self._refuse_nested_reads(blob, nested, usedef)
            producer = usedef.producer(blob)
            if producer is None and blob[1] != 0:
                raise IllegalRewriteError(f"cannot rename {blob}: no op writes that version")
            for use in usedef.uses(blob):
                rewire(use, blob, name, producer)
            if producer is not None:
                if producer in replaced or producer in self._removed:
                    raise IllegalRewriteError(
                        f"op #{producer} ({net[producer].type}) writes {blob}, which the edit "
                        "renames, and is itself removed or replaced"
                    )
                written = new_outputs.setdefault(producer, list(net[producer].outputs))
                for slot, output in enumerate(written):
                    if output == blob[0]:
                        written[slot] = name
            elif blob[0] in net.external_input_set():
                renamed_inputs[blob[0]] = name
            if at_the_end(blob):
                finals[blob[0]] = (name, producer)
        targets = self._rewire_targets()
        bulk = None
        if len(self._rewires) >= _BULK_REWIRES and not nested and isinstance(usedef, SSAView):
            bulk = self._rewired_in_bulk(usedef, targets, replaced, expected)
        if bulk is not None:
            for index, position, name, producer in bulk:
                expected[(index, position)] = producer
                new_inputs.setdefault(index, list(net[index].inputs))[position] = name
        for old, new in self._rewires:
            new = targets[old]
            name = self._renames.get(new, new[0])
            if bulk is not None:
                if at_the_end(old) and old != new:
                    finals[old[0]] = (name, usedef.producer(new))
                continue
            self._refuse_nested_reads(old, nested, usedef)
            _refuse_missing_source(net, old, usedef)
            producer = usedef.producer(new)
            _refuse_missing_target(net, new, producer, usedef)
            for use in usedef.uses(old):
                rewire(use, old, name, producer)
            if at_the_end(old) and old != new:
                finals[old[0]] = (name, producer)
        for index in new_inputs.keys() | new_outputs.keys():
            op = net[index]
            replaced[index] = op.replace(
                inputs=new_inputs.get(index, op.inputs), outputs=new_outputs.get(index, op.outputs)
            )
        inputs: tuple[str, ...] | None = self._external_inputs
        if inputs is None and renamed_inputs:
            inputs = tuple(renamed_inputs.get(name, name) for name in net.external_inputs)
        outputs: tuple[str, ...] | None = self._external_outputs
        final_outputs: dict[str, int | None] = {}
        if outputs is None and finals:
            _refuse_merged_outputs(net, finals, usedef)
            outputs = tuple(
                finals[name][0] if name in finals else name for name in net.external_outputs
            )
            final_outputs = dict(finals.values())
            self._renamed_outputs = {old: new for old, (new, _) in finals.items() if old != new}
        return expected, final_outputs, inputs, outputs

    def _rewired_in_bulk(
        self,
        view: SSAView,
        targets: Mapping[VersionedBlob, VersionedBlob],
        replaced: Mapping[int, OpLike],
        expected: Mapping[tuple[int, int], int | None],
    ) -> list[tuple[int, int, str, int | None]] | None:
        """The reads ``replace_all_uses_with`` rewires, found for every rewire at once in the
        view's arrays: ``(op, input position, name it reads now, op whose write it must
        see)`` in the order the one-by-one loop of ``_resolve_values`` meets them, skipping
        removed ops. ``None`` when a read is rewired twice or belongs to a replaced op: the
        one-by-one loop then says which (an edit dropping 10^5 identities would otherwise
        pay several view calls per read). A rewire of a value the net does not have is
        refused here, as the loop refuses it."""
        rewires = self._rewires
        news = [targets[old] for old, _ in rewires]
        names = [self._renames.get(new, new[0]) for new in news]
        producers = view.producers_of(view.keys_of(news))
        for new, producer in zip(news, producers, strict=True):
            if producer is None:
                _refuse_missing_target(self._net, new, producer, view)
        olds = [old for old, _ in rewires]
        old_keys = view.keys_of(olds)
        which, ops, positions = view.reads_of(old_keys)
        read_rewires = set(which)
        for rewire, producer in enumerate(view.producers_of(old_keys)):
            if producer is None and rewire not in read_rewires:
                _refuse_missing_source(self._net, olds[rewire], view)
        removed = self._removed
        found: list[tuple[int, int, str, int | None]] = []
        seen: set[tuple[int, int]] = set()
        for rewire, index, position in zip(which, ops, positions, strict=True):
            if index in removed:
                continue
            read = (index, position)
            if index in replaced or read in expected or read in seen:
                return None
            seen.add(read)
            found.append((index, position, names[rewire], producers[rewire]))
        return found

    def _refuse_nested_reads(
        self,
        old: VersionedBlob,
        nested: Mapping[int, NestedAccess],
        usedef: UseDef,
    ) -> None:
        """A nested net reading ``old`` by name cannot be rewired or renamed: refuse."""
        net = self._net
        for holder, access in nested.items():
            if old[0] in access.reads and _version_at(usedef, old[0], holder) == old[1]:
                raise IllegalRewriteError(
                    f"cannot rewire {old}: the nested net of op #{holder} ({net[holder].type}) "
                    "reads it by name, and graphtools does not rewrite inside nested nets"
                )

    def _check(
        self,
        replaced: dict[int, OpLike],
        rewired: Mapping[tuple[int, int], int | None],
        final_outputs: Mapping[str, int | None],
        outputs: Sequence[str] | None,
        usedef: UseDef | None,
        constants: Mapping[str, int],
    ) -> tuple[Layout, set[str]]:
        """``usedef.check_edit`` on this edit (see the class docstring); ``outputs`` are the
        edited net's external outputs when the edit changes them, ``usedef`` the net's use-def
        as the edit opened. Returns the edit's layout over the net and the names whose
        versions it may change (``affected_names``), for ``Net._apply``."""
        net = self._net
        ops = net._ops
        counts = {index: len(group) for index, group in self._inserted.items()}
        layout = Layout.identity(len(ops)).edited(self._removed, replaced, counts)
        order: list[OpLike] = []
        for index in sorted(set(replaced) | set(self._inserted)):
            order.extend(self._inserted.get(index, ()))
            if index in replaced:
                order.append(replaced[index])
        positions = layout.new_positions()
        new_ops = dict(zip(positions, order, strict=True))
        takeovers = self._takeovers(positions, replaced)
        replacement_at = {index: position for position, index in layout.replaced.items()}
        moved_rewires = {
            (replacement_at[index], slot): blob for (index, slot), blob in rewired.items()
        }
        nested_before = nested_accesses(net)
        nested_after = {
            position: nested_access(op) for position, op in new_ops.items() if op.has_nested_nets()
        }
        for index in self._removed | set(replaced):
            access = nested_before.get(index)
            if access is None or not access.writes:
                continue
            if index in self._removed or nested_after.get(replacement_at[index]) != access:
                raise IllegalRewriteError(
                    f"op #{index} ({ops[index].type}) holds nested nets that write "
                    f"{sorted(access.writes)[:5]}; removing or changing it is not supported"
                )
        kept_nested = {
            index: access for index, access in nested_before.items() if index not in self._removed
        }
        affected = affected_names(ops, self._removed, replaced, self._inserted)
        written = set(affected)
        written.update(name for access in nested_after.values() for name in access.writes)
        names = set(written)
        names.update(replaced[index].inputs[slot] for index, slot in rewired)
        names.update(final_outputs)
        assert usedef is not None  # made by _commit whenever there is something to check
        outputs_now = dict(final_outputs)
        if self._external_outputs is None:  # else the author chose the outputs: no check
            for name in net._external_outputs if outputs is None else outputs:
                if name in names:  # the others keep their final value
                    final = (name, usedef.final_version(name))
                    outputs_now.setdefault(name, usedef.producer(final))
        check_edit(
            usedef,
            layout,
            sorted(self._removed),
            ops,
            new_ops,
            names,
            written,
            moved_rewires,
            kept_nested,
            nested_after,
            outputs_now,
            takeovers,
            constants,
        )
        return layout, affected

    def _takeovers(self, positions: list[int], replaced: Mapping[int, OpLike]) -> dict[Any, int]:
        """``{(position, name): base index}``: the new op at ``position`` stands for the
        expanded op ``base index`` as the writer of ``name``."""
        if not self._expanded:
            return {}
        starts: dict[int, int] = {}
        cursor = 0
        for index in sorted(set(replaced) | set(self._inserted)):
            starts[index] = cursor
            cursor += len(self._inserted.get(index, ())) + (index in replaced)
        takeovers: dict[Any, int] = {}
        ops = self._net._ops
        for index, (first, count) in self._expanded.items():
            group = positions[starts[index] + first : starts[index] + first + count]
            group_ops = self._inserted[index][first : first + count]
            for name in set(ops[index].outputs):
                writers = [p for p, op in zip(group, group_ops, strict=True) if name in op.outputs]
                if writers:
                    takeovers[(writers[-1], name)] = index
        return takeovers


def _refuse_second_writes(
    net: EditableNet,
    removed: AbstractSet[int],
    replaced: Mapping[int, OpLike],
    inserted: Mapping[int, Sequence[OpLike]],
    usedef: UseDef,
    freed: AbstractSet[str],
) -> None:
    """An ONNX graph names each value once (single assignment): refuse an edit whose new ops
    (inserted, replacements, renamed writers) write a name the graph holds already (an input
    or initializer the edit keeps, not one of ``freed``; an output of an op it keeps) or write
    one name twice. Only the names an op did not write before are looked up: an edit
    rewiring reads costs a tuple comparison per replaced op."""
    ops = net._ops
    fresh: list[tuple[str, str]] = []  # (name, which new op writes it), one per write
    for index, op in replaced.items():
        old = ops[index].outputs
        if op.outputs != old:
            where = f"the replacement op {op.type!r} at #{index}"
            fresh += [(name, where) for name in op.outputs if name not in old]
    for index, group in inserted.items():
        for position, op in enumerate(group):
            where = f"the inserted op {op.type!r} at #{index}" + (
                f" (#{position} of its group)" if len(group) > 1 else ""
            )
            fresh += [(name, where) for name in op.outputs]
    written: dict[str, str] = {}
    for name, where in fresh:
        if name == NO_VALUE:
            continue
        first = written.get(name)
        written.setdefault(name, where)
        holder = (
            first
            if first is not None
            else "a graph input or initializer"
            if _held(net, name, freed)
            else None
        )
        if holder is None:
            writers = [
                i
                for i, _ in usedef.writes(name)
                if i not in removed and (i not in replaced or name in replaced[i].outputs)
            ]
            holder = f"op #{writers[0]} ({ops[writers[0]].type})" if writers else None
        if holder is not None:
            raise IllegalRewriteError(
                f"edit refused: {where} writes {name!r}, which {holder} holds already; an "
                "ONNX graph names each value once"
            )


def _refuse_undefined_reads(
    net: EditableNet,
    edit: Edit,
    replaced: Mapping[int, OpLike],
    inputs: Sequence[str],
    usedef: UseDef | None,
) -> None:
    """An ONNX main graph reads only the values it defines (a nested graph may read its
    outer scope's): refuse an edit after which an op it adds or sets (``edit``'s own ops, and
    the bodies of any op it adds or replaces) reads a name no graph input, initializer or op
    defines, a rewire reads a value the graph no longer starts with, or a kept op still reads
    an initializer it drops which no input provides. Names follow the edit's renames.
    ``replaced`` holds every op the edit replaces, its rewires and renames resolved. Costs a
    set lookup per name the edit's own ops read and one per dropped initializer."""
    dropped = {name for name, tensor in edit._initializers.items() if tensor is None}
    inserted = list(chain.from_iterable(edit._inserted.values()))
    own = [*edit._replaced.values(), *inserted]
    nesting = [op for op in (*replaced.values(), *inserted) if op.has_nested_nets()]
    starts = [new for _, new in edit._rewires if new[1] == 0]
    if not (own or nesting or dropped or starts):
        return
    held = net.initializers
    final_inputs = net.external_input_set() if inputs is net._external_inputs else set(inputs)
    renamed = {old: new for (old, version), new in edit._renames.items() if version == 0}
    made = {name for name, tensor in edit._initializers.items() if tensor is not None}
    made.update(renamed.values())
    made.update(name for op in own for name in op.outputs)
    made.add(NO_VALUE)

    def defined(name: str) -> bool:
        if name in made:
            return True
        if name in renamed:
            return False
        return name in final_inputs or (name in held and name not in dropped)

    reads: dict[str, OpLike | None] = {}
    for op in own:
        for name in op.inputs:
            if not defined(name):
                reads.setdefault(name, op)
    for op in nesting:
        for name in nested_access(op).reads:
            if not defined(name):
                reads.setdefault(name, op)
    for name, _ in starts:  # a rewire to a value the edit renames reads the new name
        if not defined(renamed.get(name, name)):
            reads.setdefault(name, None)
    if reads:
        if usedef is None or isinstance(usedef, NameScan):  # it scanned other names
            usedef = NameScan(net._ops, set(reads))
        _refuse_reads_of_nothing(reads, edit, replaced, usedef)
    gone = edit._removed
    moved = {old[0] for old, _ in edit._rewires if old[1] == 0}  # its reads read another
    moved.update(renamed)
    nested_readers: dict[str, int] | None = None  # name -> a kept op whose bodies read it
    for name in sorted(name for name in dropped - moved if not defined(name)):
        readers = [] if usedef is None else usedef.uses((name, 0))
        kept = [
            use.op
            for use in readers
            if use.op not in gone and (use.op not in replaced or name in replaced[use.op].inputs)
        ]
        if not kept:  # a branch or loop body reading it by name
            if nested_readers is None:
                nested_readers = _nested_readers(net, gone, replaced)
            kept = [nested_readers[name]] if name in nested_readers else []
        if kept:
            raise IllegalRewriteError(
                f"edit refused: it drops the initializer {name!r}, which op #{kept[0]} "
                f"({net._ops[kept[0]].type}) still reads and no graph input provides"
            )


def _refuse_reads_of_nothing(
    reads: Mapping[str, OpLike | None],
    edit: Edit,
    replaced: Mapping[int, OpLike],
    usedef: UseDef,
) -> None:
    """Refuse the first of ``reads`` (name -> the op reading it, ``None`` for a rewire) that
    no op writes once the edit is made: not an op it removes, nor one it replaces by an op
    writing other names."""
    written = {name for op in replaced.values() for name in op.outputs}
    for name, op in reads.items():
        if name in written:
            continue
        if any(i not in edit._removed and i not in replaced for i, _ in usedef.writes(name)):
            continue
        what = "it rewires reads to" if op is None else f"the op {op.type!r} it adds reads"
        raise IllegalRewriteError(
            f"edit refused: {what} {name!r}, which no graph input, initializer or op of the "
            "ONNX graph defines"
        )


def _nested_readers(
    net: EditableNet, gone: AbstractSet[int], replaced: Mapping[int, OpLike]
) -> dict[str, int]:
    """``{name: the first op the edit keeps whose nested nets read it}`` (a replaced op's
    bodies are its replacement's, checked as the edit's own): one pass over the nested reads,
    however many names are asked about."""
    found: dict[str, int] = {}
    for index, access in nested_accesses(net).items():
        if index not in gone and index not in replaced:
            for name in access.reads:
                found.setdefault(name, index)
    return found


def _held(net: EditableNet, name: str, freed: AbstractSet[str]) -> bool:
    """Whether ``name`` is a graph input or initializer the edit keeps."""
    return (name in net.external_input_set() or name in net.initializers) and name not in freed


def _refuse_renamed_inputs_taken(
    net: EditableNet,
    renames: Mapping[VersionedBlob, str],
    removed: AbstractSet[int],
    replaced: Mapping[int, OpLike],
    usedef: UseDef,
    freed: AbstractSet[str],
) -> None:
    """A graph input or initializer renamed (version 0) must take a name the ONNX graph does
    not hold (an input or initializer the edit keeps, not one of ``freed``; a value an op it
    keeps writes)."""
    for (old, version), new in renames.items():
        if version != 0 or new == old:
            continue
        writers = [
            i
            for i, _ in usedef.writes(new)
            if i not in removed and (i not in replaced or new in replaced[i].outputs)
        ]
        if _held(net, new, freed) or writers:
            holder = f"op #{writers[0]} ({net[writers[0]].type})" if writers else "the graph"
            raise IllegalRewriteError(
                f"edit refused: cannot rename {old}@0 to {new!r}, which {holder} holds "
                "already; an ONNX graph names each value once"
            )


def _as_tensor(value: Tensor | np.ndarray, what: str) -> Tensor:
    """A ``Tensor`` as it is, a numpy array as an ``ArrayTensor`` of it."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return ArrayTensor(value)
    raise TypeError(
        f"{what} must be a numpy array or a graphtools.values.Tensor (ArrayTensor(array)), "
        f"not {type(value).__name__}"
    )


def _refuse_missing_source(net: EditableNet, blob: VersionedBlob, usedef: UseDef) -> None:
    """A rewire must start from a value of the net: one an op writes or reads, or what the
    net starts with (an external input, an initializer); a rewire of nothing is a slip."""
    if usedef.producer(blob) is not None or usedef.uses(blob):
        return
    if blob[1] == 0 and (blob[0] in net.external_input_set() or blob[0] in net.initializers):
        return
    raise IllegalRewriteError(
        f"cannot rewire the reads of {blob[0]}@{blob[1]}: no op of the net writes or reads "
        f"that value (the net has '{blob[0]}' up to version {usedef.final_version(blob[0])})"
    )


def _refuse_missing_target(
    net: EditableNet, blob: VersionedBlob, producer: int | None, usedef: UseDef
) -> None:
    """A rewire must lead to a value of the net (``producer``: the op writing ``blob``): the
    empty name is no value, and a version after the first (``name@0``, the value the net
    starts with) is the write of an op. An ONNX main graph starts with its inputs and
    initializers only (a Caffe2 net may read what the workspace holds; a control-flow body,
    the values of the graphs around it)."""
    if blob[0] == NO_VALUE:
        raise IllegalRewriteError(f"cannot rewire to {blob}: the empty name means 'no value'")
    if producer is not None:
        return
    if blob[1] != 0:
        raise IllegalRewriteError(
            f"cannot rewire to {blob[0]}@{blob[1]}: no op of the net writes that version "
            f"(the net has '{blob[0]}' up to version {usedef.final_version(blob[0])})"
        )
    if (
        net.dialect == ONNX
        and getattr(net, "_parent", None) is None
        and blob[0] not in net.external_input_set()
        and blob[0] not in net.initializers
        and not usedef.uses(blob)
    ):
        raise IllegalRewriteError(
            f"cannot rewire to '{blob[0]}': the graph has no input, initializer or value of "
            "that name"
        )


def _version_at(usedef: UseDef, name: str, index: int) -> int:
    """The version of ``name`` op ``index`` reads."""
    return sum(count for position, count in usedef.writes(name) if position < index)


_BULK_REWIRES = 64
"""Rewires in one edit from which their reads are found in the SSA view's arrays at once."""

_Resolved = tuple[
    dict[tuple[int, int], int | None],
    dict[str, int | None],
    tuple[str, ...] | None,
    tuple[str, ...] | None,
]


def _moved(
    values: Mapping[str, _V],
    moves: Mapping[str, str],
    changes: Mapping[str, _V | None],
    *,
    keep_old: bool,
) -> dict[str, _V] | None:
    """``values`` with the entries of renamed names moved to the new names (kept under the old
    name too with ``keep_old``, for types: another value may still carry it; the codec drops
    declarations of names the net no longer has) and ``changes`` applied; ``None`` when
    nothing changes.

    Proportional to the moves and changes, not to ``values`` (a net holds an initializer per
    op): the dict is copied in C, and only the names touched are compared."""
    moved = {old: new for old, new in moves.items() if old in values and new not in values}
    if not moved and not changes:
        return None
    # ``values`` is a net's read-only view of its dict: copying through the view asks for
    # every entry one by one (ten times a dict's own copy at 10^6 initializers).
    result = values.copy() if isinstance(values, MappingProxyType) else dict(values)
    for old, new in moved.items():
        result[new] = result[old] if keep_old else result.pop(old)
    for name, value in changes.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = value
    touched = chain(moved, moved.values(), changes)
    return result if any(_differs(values, result, name) for name in touched) else None


def _differs(before: Mapping[str, _V], after: Mapping[str, _V], name: str) -> bool:
    """Whether ``name`` is held in only one of the mappings, or with unequal values."""
    if (name in before) != (name in after):
        return True
    return name in before and before[name] is not after[name] and before[name] != after[name]


def affected_names(
    ops: Sequence[OpLike],
    removed: Iterable[int],
    replaced: Mapping[int, OpLike],
    inserted: Mapping[int, Sequence[OpLike]],
) -> set[str]:
    """Names whose versions an edit may change: those removed and inserted ops write, and
    those a replacement writes differently from the op it replaces."""
    names = {name for index in removed for name in ops[index].outputs}
    names.update(name for group in inserted.values() for op in group for name in op.outputs)
    for index, op in replaced.items():
        if written_differently(ops[index], op):
            names.update(ops[index].outputs)
            names.update(op.outputs)
    names.discard(NO_VALUE)
    return names


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


def written_differently(old: OpLike, new: OpLike) -> bool:
    """Whether a replacement writes other blobs than the op it replaces (an op's versions
    depend on its outputs only: one that writes the same ones changes nobody's versions)."""
    return old.outputs != new.outputs


def check_edit(
    before: UseDef,
    layout: Layout,
    removed: Sequence[int],
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
    names: Iterable[str],
    written: AbstractSet[str],
    rewired: Mapping[tuple[int, int], int | None],
    nested_before: Mapping[int, NestedAccess],
    nested_after: Mapping[int, NestedAccess],
    final_outputs: Mapping[str, int | None],
    takeovers: Mapping[tuple[int, str], int] | None = None,
    constants: Mapping[str, int] | None = None,
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
    at ``position`` stands for (an expanded op). ``constants`` maps a name to the removed op
    whose value the net now holds as a constant of that name: a read expecting that op may
    see no writer.

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
            (constants or {}).get(name),
        )


def _unless_rewires_see_their_writers(
    names: list[str],
    before: UseDef,
    layout: Layout,
    new_ops: Mapping[int, OpLike],
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


def _refuse_merged_outputs(
    net: EditableNet, finals: Mapping[str, tuple[str, int | None]], usedef: UseDef
) -> None:
    """Refuse an edit giving two external outputs one name when they hold different values.

    ``finals`` maps an external output a rewire or rename moves to (its new name, the op
    whose write it must end with). An output taking the name of another (an identity's
    output rewired to a source that is itself an output) reads that one's final value
    after the edit: both must have ended with the same write before it, or one of them
    would silently change.
    """
    taken = {new for new, _ in finals.values()}
    ends: dict[str, tuple[str, int | None]] = {}
    for name in net.external_outputs:
        if name in finals:
            new, producer = finals[name]
        elif name in taken:
            new, producer = name, usedef.producer((name, usedef.final_version(name)))
        else:
            continue
        first, first_producer = ends.setdefault(new, (name, producer))
        if first_producer != producer:
            raise IllegalRewriteError(
                f"edit refused: external outputs {first!r} and {name!r} would both read "
                f"{new!r}, but {first!r} ends with {_value_of(net, first_producer)} and "
                f"{name!r} with {_value_of(net, producer)}; keep the writers apart or set the "
                "outputs (set_external_outputs)"
            )


def _value_of(net: EditableNet, producer: int | None) -> str:
    if producer is None:
        return "the value the net starts with"
    return f"the value of op #{producer} ({net[producer].type})"


def _removal_only(
    names: list[str],
    layout: Layout,
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
    rewired: Mapping[tuple[int, int], int | None],
    nested_after: Mapping[int, NestedAccess],
) -> set[str]:
    """Those of ``names`` no change but a removal touches (nothing new writes or reads them
    in a checked way).

    The names other changes touch are struck off ``names`` rather than gathered into a set
    of their own: an edit removing a quarter of a million identities replaces as many
    readers, and a set of all their names would be the bigger table to fill."""
    remaining = set(names)
    if not remaining:
        return remaining
    replaced_at = layout.replaced
    for position, op in new_ops.items():
        remaining.difference_update(op.outputs)
        replaced = replaced_at.get(position)
        if replaced is not None:
            remaining.difference_update(old_ops[replaced].outputs)
            remaining.difference_update(op.inputs)
    for position, _ in rewired:
        if position not in replaced_at:  # a replacement's inputs are struck off above
            remaining.difference_update(new_ops[position].inputs)
    for access in nested_after.values():
        remaining.difference_update(access.writes)
    return remaining


def _appended_after_every_read(
    name: str,
    before: UseDef,
    layout: Layout,
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
    nested_before: Mapping[int, NestedAccess],
    nested_after: Mapping[int, NestedAccess],
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
        new_ops: Mapping[int, OpLike],
        nested_before: Mapping[int, NestedAccess],
        nested_after: Mapping[int, NestedAccess],
    ) -> None:
        self.ops = NameIndex()
        for position, op in new_ops.items():
            self.ops.add_op(position, op)
        self.nested_reads_before = _by_name(nested_before, "reads")
        self.nested_reads_after = _by_name(nested_after, "reads")
        self.nested_writes_after = _by_name(nested_after, "writes")


def _by_name(accesses: Mapping[int, NestedAccess], field: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for position, access in accesses.items():
        for name in getattr(access, field):
            found.setdefault(name, []).append(position)
    return found


def _check_name(
    name: str,
    before: UseDef,
    layout: Layout,
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
    index: _NewOps,
    rewired: Mapping[tuple[int, int], int | None],
    nested_before: Mapping[int, NestedAccess],
    final_outputs: Mapping[str, int | None],
    takeovers: Mapping[tuple[int, str], int],
    constant_of: int | None = None,
) -> None:
    """Check the reads of ``name`` (see ``check_edit``); ``constant_of``: the removed op whose
    value the net now holds as a constant named ``name``."""
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
        if actual != reader.expected and not (
            actual is None and constant_of is not None and reader.expected == constant_of
        ):
            raise IllegalRewriteError(_refusal(name, reader, actual, old_ops, new_ops, layout))
    if name in final_outputs:
        expected = final_outputs[name]
        actual = identity(new_writers[-1]) if new_writers else None
        if actual != expected and not (actual is None and constant_of == expected):
            end = _Reader(layout.size, -2, expected)
            raise IllegalRewriteError(_refusal(name, end, actual, old_ops, new_ops, layout))


def _describe(
    identity: int | tuple[str, int] | None,
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
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
    old_ops: Sequence[OpLike],
    new_ops: Mapping[int, OpLike],
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

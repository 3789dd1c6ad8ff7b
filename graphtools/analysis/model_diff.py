"""A structural diff of two models, matching ops by SSA identity rather than position.

An op of the second net matches an op of the first when it has the same type and reads the
same values (the same external inputs, or the same outputs of ops already matched: the
producer/consumer structure, ``net.ssa()``), or the same type and output names (a rewired
consumer: same op, new inputs). Among the candidates, the one that agrees on more wins (inputs
and names, then arguments), so removing an op blames the op removed, not a neighbour of the
same type whose arguments differ. An op with no inputs (a fill) matches only an op writing the
same names. What stays unmatched was removed or added. Matched ops report rewired inputs,
renamed outputs, and changed arguments (tensors and nested nets by content: a ``Constant`` of
another value or an ``If`` branch computing something else is a change), devices and engines.
Inserting or removing an op shifts no match, unlike a diff by position. Ops loaded as the same
bytes (an unchanged op met again, holding no nested graph) are equal without being decoded, a
NaN argument equal to itself then. Beside the ops: the
external inputs and outputs each side lists, the declared types of those both list (ONNX:
``FLOAT[2, 3]`` against ``FLOAT[2, N]`` changes the model's contract) and the opsets.

``diff_models(before, after)`` returns a ``ModelDiff``; ``ModelDiff.same`` says whether
nothing differs, ``ModelDiff.to_dict()`` gives JSON-ready data.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graphtools._core import CAFFE2, MAIN_NET, ONNX
from graphtools.ir import Model, Net, Op
from graphtools.printer import (
    argument_digest,
    format_arg_value,
    format_device,
    format_value_type,
)
from graphtools.values import ValueType

__all__ = ["ArgChange", "ModelDiff", "NetDiff", "OpChange", "OpRef", "diff_models", "diff_nets"]


@dataclass(frozen=True)
class OpRef:
    """An op of one side: its index, type and output names."""

    index: int
    type: str
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class ArgChange:
    """An argument that differs (``None``: absent on that side)."""

    name: str
    before: str | None
    after: str | None


@dataclass
class OpChange:
    """A matched op whose inputs, outputs, arguments, device, engine or domain differ.

    Attributes:
        before / after: the op's index in each net.
        type: the op type (the same on both sides).
        rewired: ``(position, before blob, after blob)`` for inputs now reading another value
            (blobs written ``name@version``).
        renamed: ``(position, before name, after name)`` for outputs written under a new name.
        args: the arguments that differ.
        device: ``(before, after)`` when the device option differs.
        engine: ``(before, after)`` when the engine differs.
        domain: ``(before, after)`` when the domain differs (an ONNX ``Relu`` and a model's
            own ``my::Relu`` are other ops; ``-`` for none, ONNX's own).
    """

    before: int
    after: int
    type: str
    rewired: list[tuple[int, str, str]] = field(default_factory=list)
    renamed: list[tuple[int, str, str]] = field(default_factory=list)
    args: list[ArgChange] = field(default_factory=list)
    device: tuple[str, str] | None = None
    engine: tuple[str, str] | None = None
    domain: tuple[str, str] | None = None


@dataclass
class NetDiff:
    """How one net of the pair differs.

    Attributes:
        label: ``predict_net`` or ``init_net``.
        removed: ops of the first net with no match.
        added: ops of the second net with no match.
        changed: matched ops that differ.
        matched: ``{before index: after index}`` for every matched op.
        inputs_removed / inputs_added / outputs_removed / outputs_added: external blobs.
        types_changed: ``(name, before, after)`` for an external input or output both nets
            list whose declared type differs (``-``: none declared).
    """

    label: str
    removed: list[OpRef] = field(default_factory=list)
    added: list[OpRef] = field(default_factory=list)
    changed: list[OpChange] = field(default_factory=list)
    matched: dict[int, int] = field(default_factory=dict)
    inputs_removed: list[str] = field(default_factory=list)
    inputs_added: list[str] = field(default_factory=list)
    outputs_removed: list[str] = field(default_factory=list)
    outputs_added: list[str] = field(default_factory=list)
    types_changed: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def same(self) -> bool:
        """Whether nothing differs."""
        return not (
            self.removed
            or self.added
            or self.changed
            or self.inputs_removed
            or self.inputs_added
            or self.outputs_removed
            or self.outputs_added
            or self.types_changed
        )

    @property
    def renamed_blobs(self) -> list[tuple[str, str]]:
        """Every ``(before name, after name)`` an output was renamed under, once each."""
        seen: dict[tuple[str, str], None] = {}
        for change in self.changed:
            for _, old, new in change.renamed:
                seen[(old, new)] = None
        return list(seen)


@dataclass
class ModelDiff:
    """How two models differ: their predict_nets, init_nets and parameters.

    Attributes:
        predict: the predict_net diff.
        init: the init_net diff (``None`` when neither model has an init_net).
        params_removed / params_added: blobs only one init_net fills.
        params_changed: ONNX initializers both models hold under one name, with other
            values or another type (a pair's changed fills are init_net op changes).
        init_presence: ``(before, after)`` when only one model has an init_net.
        opsets: ``(before, after)`` opset imports (``domain:version``) when they differ.
        ir_versions: ``(before, after)`` ONNX IR versions when they differ (it changes how a
            runtime reads the model: from IR 4 an initializer input is a default).
        metadata: ``(key, before, after)`` of the ONNX model-level ``metadata_props`` that
            differ (``None`` where a model lacks the key); said, but not a structural change.
        model_fields: ``(field, before, after)`` of the ONNX model's descriptive fields
            (producer, domain, model version, doc strings) that differ; said, but not a
            structural change.
        functions: ``(sign, "domain:name")`` of the ONNX model-local functions removed
            (``-``), added (``+``) or defined otherwise (``~``): part of what the model
            computes.
        sparse: ``(sign, name)`` of the main graph's sparse initializers removed, added or
            holding other values.
        params_label: what the parameters are called (``initializer`` in ONNX models; the
            nets' labels are ``graph`` there).
    """

    predict: NetDiff
    init: NetDiff | None
    params_removed: list[str] = field(default_factory=list)
    params_added: list[str] = field(default_factory=list)
    params_changed: list[str] = field(default_factory=list)
    init_presence: tuple[bool, bool] | None = None
    opsets: tuple[list[str], list[str]] | None = None
    ir_versions: tuple[int, int] | None = None
    metadata: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    model_fields: list[tuple[str, str, str]] = field(default_factory=list)
    functions: list[tuple[str, str]] = field(default_factory=list)
    sparse: list[tuple[str, str]] = field(default_factory=list)
    params_label: str = "param"

    @property
    def same(self) -> bool:
        """Whether the models are structurally the same."""
        init_same = self.init is None or self.init.same
        return (
            self.predict.same
            and init_same
            and not self.params_removed
            and not self.params_added
            and not self.params_changed
            and self.init_presence is None
            and self.opsets is None
            and self.ir_versions is None
            and not self.functions
            and not self.sparse
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``matched`` maps are left out)."""
        data = asdict(self)
        for key in ("predict", "init"):
            if data[key] is not None:
                data[key].pop("matched", None)
        data["same"] = self.same
        return data


_Ident = int | str
"""A value an op reads, as the matcher compares it: the name of a value the net starts
with, or the op writing it and the position of that write, as ``op * _POSITIONS +
position`` (negative for an op of the second net with no match yet). One int or a name
the op holds already, not a tuple per read: the buckets keep every read of the first net."""

_POSITIONS = 1 << 32
"""More than any op's outputs."""


def _blob_text(blob: tuple[str, int]) -> str:
    return f"{blob[0]}@{blob[1]}"


class _Reads:
    """What each op of one net reads, by value: the op and output position writing it, or
    the name of a value the net starts with (from the SSA view's columns: no tuple per
    read is built, which at 10^6 ops would hold gigabytes)."""

    def __init__(self, net: Net) -> None:
        self.view = net.ssa()
        self.ptr, self.keys, _, _ = self.view.key_columns()
        self.producers, self.positions = self.view.read_sources()

    def slots(self, index: int) -> range:
        """Where op ``index``'s reads lie in the columns."""
        return range(self.ptr[index], self.ptr[index + 1])

    def blob(self, slot: int) -> tuple[str, int]:
        """The versioned blob read at column ``slot``."""
        return self.view.blob(self.keys[slot])

    def producer(self, slot: int) -> int | None:
        """The op writing the value read at column ``slot`` (``None``: the net starts with
        it)."""
        producer = self.producers[slot]
        return None if producer < 0 else producer


class _Matcher:
    """Matches the ops of ``after`` to those of ``before`` (see the module docstring)."""

    def __init__(self, before: Net, after: Net) -> None:
        self.before = before
        self.after = after
        self.reads_a = _Reads(before)
        self.reads_b = _Reads(after)
        self.b_to_a: dict[int, int] = {}
        self.free_a: set[int] = set(range(len(before)))

    def ident_a(self, index: int, slot: int) -> _Ident:
        """The value op ``index`` of ``before`` reads at column ``slot``."""
        reads = self.reads_a
        producer = reads.producers[slot]
        if producer < 0:
            return self.before[index].inputs[slot - reads.ptr[index]]
        return producer * _POSITIONS + reads.positions[slot]

    def ident_b(self, index: int, slot: int) -> _Ident:
        """The value op ``index`` of ``after`` reads at column ``slot``, in ``before``'s
        terms where its writer is matched."""
        reads = self.reads_b
        producer = reads.producers[slot]
        if producer < 0:
            return self.after[index].inputs[slot - reads.ptr[index]]
        matched = self.b_to_a.get(producer)
        if matched is not None:
            return matched * _POSITIONS + reads.positions[slot]
        return -1 - (producer * _POSITIONS + reads.positions[slot])

    def run(self) -> dict[int, int]:
        """Match every op of ``after`` it can, in order; the best free candidate wins.

        The candidates are kept in buckets, each in index order: by (type, values read,
        output names), by (type, output names) and by (type, values read). A bucket's taken
        ops are dropped from its front as they are met, and a long bucket searched for equal
        arguments is split by their plain fields, so matching costs what the buckets hold,
        not what they hold times the ops asking: the init_net of a million fills (of one
        type, reading nothing) is matched in linear time.
        """
        buckets = _Buckets(self.free_a, self.before, self.before.dialect == self.after.dialect)
        for index, op in enumerate(self.before):
            ins = tuple(self.ident_a(index, slot) for slot in self.reads_a.slots(index))
            buckets.add(index, op, ins)
        for index, op in enumerate(self.after):
            ins = tuple(self.ident_b(index, slot) for slot in self.reads_b.slots(index))
            found = buckets.pick(op, ins)
            if found is not None:
                self.b_to_a[index] = found
                self.free_a.discard(found)
        return {a: b for b, a in self.b_to_a.items()}


class _Buckets:
    """The free ops of the first net by what a match may agree on (see ``_Matcher.run``).

    ``pick`` takes the best free candidate: reading the same values and writing the same
    names (the same arguments first), then the same names and arguments (a rewired reader),
    the same values and arguments (renamed outputs), the same names, the same values; the
    lowest index among equals. An op without inputs (a fill) matches only an op writing the
    same names.
    """

    def __init__(self, free: set[int], before: Net, one_dialect: bool) -> None:
        self._free = free
        self._before = before
        self._one_dialect = one_dialect  # equal bytes of two dialects may mean other fields
        # key -> its one index, or its indices in order: most keys name one op (its names),
        # and a list each would hold 90 bytes more per key, a gigabyte at 10^6 ops
        self._buckets: dict[Hashable, int | list[int]] = {}
        self._heads: dict[Hashable, int] = {}
        self._split: set[Hashable] = set()  # buckets split by their ops' plain arguments

    def add(self, index: int, op: Op, ins: tuple[_Ident, ...]) -> None:
        for key in _keys(op, ins):
            self._add(key, index)

    def _add(self, key: Hashable, index: int) -> None:
        found = self._buckets.setdefault(key, index)
        if found is not index:  # the key had an op already
            if isinstance(found, int):
                self._buckets[key] = [found, index]
            else:
                found.append(index)

    def _bucket(self, key: Hashable) -> Sequence[int]:
        found = self._buckets.get(key)
        if found is None:
            return ()
        return (found,) if isinstance(found, int) else found

    def pick(self, op: Op, ins: tuple[_Ident, ...]) -> int | None:
        both, names, values = _keys(op, ins)
        levels = [(both, True), (both, False), (names, True)]
        if op.inputs:
            levels.append((values, True))
        levels.append((names, False))
        if op.inputs:
            levels.append((values, False))
        for key, same_args in levels:
            found = self._same_args(key, op) if same_args else self._first_free(key)
            if found is not None:
                return found
        return None

    def _first_free(self, key: Hashable) -> int | None:
        """The lowest free index in bucket ``key``; taken ops at its front go for good."""
        found = self._bucket(key)
        if not found:
            return None
        start = head = self._heads.get(key, 0)
        while head < len(found) and found[head] not in self._free:
            head += 1
        if head != start:
            self._heads[key] = head
        return found[head] if head < len(found) else None

    def _same_args(self, key: Hashable, op: Op) -> int | None:
        """The lowest free index in bucket ``key`` whose arguments equal ``op``'s. A short
        bucket is scanned; a long one is split by the arguments' plain fields first (once),
        so that the scan meets only ops whose arguments may be equal."""
        if self._first_free(key) is None:
            return None
        head = self._heads.get(key, 0)
        if len(self._bucket(key)) - head > _SCAN:
            if key not in self._split:
                self._split.add(key)
                for index in self._bucket(key)[head:]:
                    self._add(("args", key, _plain_args(self._before[index])), index)
            key = ("args", key, _plain_args(op))
            if self._first_free(key) is None:
                return None
        encoding = op.loaded_encoding() if self._one_dialect else None
        for index in self._bucket(key)[self._heads.get(key, 0) :]:
            if index in self._free and _same_args(self._before[index], op, encoding):
                return index
        return None


_SCAN = 16
"""Candidates a bucket may hold before a search for equal arguments splits it."""


def _same_args(a: Op, b: Op, b_encoding: bytes | None) -> bool:
    """Whether ``a`` and ``b`` have equal arguments: ops loaded as the same bytes (of one
    dialect) do, without decoding them (a net's unchanged ops, met again in the other net;
    a NaN argument counts as equal to itself then), else their arguments compare equal."""
    if b_encoding is not None and a.loaded_encoding() == b_encoding:
        return True
    return bool(a.args == b.args)


def _keys(op: Op, ins: tuple[_Ident, ...]) -> tuple[Hashable, Hashable, Hashable]:
    """The buckets of an op: by type, values read and names; by type and names; by type
    and values read."""
    outputs = tuple(op.outputs)
    return ("both", op.type, ins, outputs), ("names", op.type, outputs), ("values", op.type, ins)


def _plain_args(op: Op) -> Hashable:
    """The fields of the op's arguments that hash (names, scalars, lists; not tensors or
    nets): two ops with equal arguments, or loaded as the same bytes, have equal plain
    fields (a NaN is one key: ``hash(nan)`` differs between two NaN objects)."""
    return tuple(
        (
            a.name,
            _float_key(a.f),
            a.i,
            a.s,
            tuple(map(_float_key, a.floats)),
            tuple(a.ints),
            tuple(a.strings),
            a.t is None,
            a.n is None,
        )
        for a in op.args
    )


def _float_key(value: float | None) -> float | str | None:
    return "nan" if value is not None and value != value else value


def _args(a: Op, b: Op) -> list[ArgChange]:
    """The arguments that differ by value; those the dump shows alike (a tensor or a nested
    net in brief, a list cut after its first items) carry a digest of their content, so the
    two texts show that they differ."""
    left = {arg.name or "": arg for arg in a.args}
    right = {arg.name or "": arg for arg in b.args}
    changes = []
    for name in sorted(left.keys() | right.keys()):
        first, second = left.get(name), right.get(name)
        if first == second:
            continue
        before = None if first is None else format_arg_value(first)
        after = None if second is None else format_arg_value(second)
        if before == after:
            assert first is not None and second is not None
            digests = argument_digest(first), argument_digest(second)
            if digests[0] == digests[1]:
                continue  # the same content (a NaN is not equal to itself)
            before = f"{before} #{digests[0]}"
            after = f"{after} #{digests[1]}"
        changes.append(ArgChange(name, before, after))
    return changes


def _device(net: Net, op: Op) -> str:
    device = op.device_option
    return "-" if device is None else format_device(device)


def diff_nets(before: Net, after: Net, label: str = "predict_net") -> NetDiff:
    """The structural diff of two nets (see the module docstring)."""
    matcher = _Matcher(before, after)
    matched = matcher.run()
    result = NetDiff(label, matched=matched)
    for index in sorted(matcher.free_a):
        op = before[index]
        result.removed.append(OpRef(index, op.type, tuple(op.outputs)))
    for index, op in enumerate(after):
        if index not in matcher.b_to_a:
            result.added.append(OpRef(index, op.type, tuple(op.outputs)))
    for a_index, b_index in sorted(matched.items()):
        change = _op_change(matcher, a_index, b_index)
        if change is not None:
            result.changed.append(change)
    ins_a, ins_b = before.external_inputs, after.external_inputs
    outs_a, outs_b = before.external_outputs, after.external_outputs
    in_a, in_b, out_a, out_b = set(ins_a), set(ins_b), set(outs_a), set(outs_b)
    result.inputs_removed = [n for n in ins_a if n not in in_b]
    result.inputs_added = [n for n in ins_b if n not in in_a]
    result.outputs_removed = [n for n in outs_a if n not in out_b]
    result.outputs_added = [n for n in outs_b if n not in out_a]
    both = [n for n in ins_a if n in in_b] + [n for n in outs_a if n in out_b and n not in in_a]
    for name in both if before.dialect == after.dialect else ():
        type_a, type_b = before.types.get(name), after.types.get(name)
        if type_a != type_b:
            result.types_changed.append((name, _type_text(type_a), _type_text(type_b)))
    return result


def _written_by(net: Net, producer: int | None) -> str:
    """`` (of %3 Conv)``: which op writes a value, or that the net starts with it."""
    return " (an input)" if producer is None else f" (of %{producer} {net[producer].type})"


def _type_text(value_type: ValueType | None) -> str:
    return "-" if value_type is None else format_value_type(value_type)


def _op_change(matcher: _Matcher, a_index: int, b_index: int) -> OpChange | None:
    a, b = matcher.before[a_index], matcher.after[b_index]
    change = OpChange(a_index, b_index, a.type)
    slots_a, slots_b = matcher.reads_a.slots(a_index), matcher.reads_b.slots(b_index)
    for position in range(max(len(slots_a), len(slots_b))):
        left = slots_a[position] if position < len(slots_a) else None
        right = slots_b[position] if position < len(slots_b) else None
        same = (
            left is not None
            and right is not None
            and matcher.ident_a(a_index, left) == matcher.ident_b(b_index, right)
        )
        if not same:
            old_blob = None if left is None else matcher.reads_a.blob(left)
            new_blob = None if right is None else matcher.reads_b.blob(right)
            old_text = "-" if old_blob is None else _blob_text(old_blob)
            new_text = "-" if new_blob is None else _blob_text(new_blob)
            if old_text == new_text and left is not None and right is not None:
                # the same name, written by another op: say which
                old_text += _written_by(matcher.before, matcher.reads_a.producer(left))
                new_text += _written_by(matcher.after, matcher.reads_b.producer(right))
            change.rewired.append((position, old_text, new_text))
    for position in range(max(len(a.outputs), len(b.outputs))):
        left_name = a.outputs[position] if position < len(a.outputs) else "-"
        right_name = b.outputs[position] if position < len(b.outputs) else "-"
        if left_name != right_name:
            change.renamed.append((position, left_name, right_name))
    one_dialect = matcher.before.dialect == matcher.after.dialect
    encoding = b.loaded_encoding() if one_dialect else None
    same_fields = encoding is not None and a.loaded_encoding() == encoding
    if not same_fields:
        change.args = _args(a, b)
        if (a.engine or "") != (b.engine or ""):
            change.engine = (a.engine or "-", b.engine or "-")
        if _domain(a) != _domain(b):
            change.domain = (_domain(a), _domain(b))
    if not same_fields or matcher.before.device_option != matcher.after.device_option:
        device_a, device_b = _device(matcher.before, a), _device(matcher.after, b)
        if device_a != device_b:
            change.device = (device_a, device_b)
    if change.rewired or change.renamed or change.args or change.device or change.engine:
        return change
    return change if change.domain is not None else None


def _domain(op: Op) -> str:
    """The op's domain as ``diff`` shows it: ``-`` for none and for ONNX's own."""
    return "-" if op.domain in (None, "", "ai.onnx") else op.domain


def diff_models(before: Model, after: Model) -> ModelDiff:
    """The structural diff of two models: predict_nets, init_nets and parameters."""
    onnx = before.dialect == after.dialect == ONNX
    label = MAIN_NET[ONNX if onnx else CAFFE2]
    predict = diff_nets(before.predict_net, after.predict_net, label)
    init = None
    if before.init_net is not None and after.init_net is not None:
        init = diff_nets(before.init_net, after.init_net, "init_net")
    result = ModelDiff(predict, init, params_label="initializer" if onnx else "param")
    same_dialect = before.dialect == after.dialect
    if same_dialect and dict(before.opset_imports) != dict(after.opset_imports):
        result.opsets = (_opsets(before), _opsets(after))
    result.metadata = _metadata_changes(before, after)
    if onnx:
        versions = (_field(before.header, "ir_version"), _field(after.header, "ir_version"))
        result.ir_versions = versions if versions[0] != versions[1] else None
        result.model_fields = _model_field_changes(before, after)
    result.functions = _keyed_changes(_functions(before), _functions(after))
    result.sparse = _keyed_changes(_sparse(before), _sparse(after))
    if (before.init_net is None) != (after.init_net is None):
        result.init_presence = (before.init_net is not None, after.init_net is not None)
    filled_a = _filled(before.init_net)
    filled_b = _filled(after.init_net)
    result.params_removed = [n for n in filled_a if n not in filled_b]
    result.params_added = [n for n in filled_b if n not in filled_a]
    return result


def _metadata_changes(before: Model, after: Model) -> list[tuple[str, str | None, str | None]]:
    """The model-level ``metadata_props`` entries that differ, by key (ONNX headers hold them;
    a Caffe2 pair has none)."""
    first, second = _metadata(before), _metadata(after)
    return [
        (key, first.get(key), second.get(key))
        for key in sorted(first.keys() | second.keys())
        if first.get(key) != second.get(key)
    ]


_MODEL_FIELDS = ("producer_name", "producer_version", "domain", "model_version", "doc_string")


def _model_field_changes(before: Model, after: Model) -> list[tuple[str, str, str]]:
    """The descriptive fields of two ONNX models (``_MODEL_FIELDS``, then the main graph's
    doc string) that differ, as text (a model built in memory may have no header)."""
    headers = [(before.header, after.header)] * len(_MODEL_FIELDS)
    headers.append((before.predict_net.header, after.predict_net.header))
    names = [*_MODEL_FIELDS, "graph doc_string"]
    return [
        (name, str(first), str(second))
        for name, (one, other) in zip(names, headers, strict=True)
        for first, second in [(_field(one, name), _field(other, name))]
        if first != second
    ]


def _field(header: Any, name: str) -> Any:
    return getattr(header, name.removeprefix("graph "), "")


def _keyed_changes(first: dict[str, bytes], second: dict[str, bytes]) -> list[tuple[str, str]]:
    """``(sign, key)`` of the entries removed (``-``), added (``+``) or changed (``~``)."""
    changes = [("-", key) for key in first if key not in second]
    changes += [("+", key) for key in second if key not in first]
    changes += [("~", key) for key in first if key in second and first[key] != second[key]]
    return changes


def _functions(model: Model) -> dict[str, bytes]:
    """An ONNX model's local functions, ``domain:name`` (and overload) -> their bytes."""
    functions = getattr(model.header, "functions", ())
    return {
        ":".join(filter(None, (f.domain or "ai.onnx", f.name, getattr(f, "overload", "")))): (
            f.SerializeToString(deterministic=True)
        )
        for f in functions
    }


def _sparse(model: Model) -> dict[str, bytes]:
    """The main graph's sparse initializers, by name (of their values) -> their bytes."""
    sparse = getattr(model.predict_net.header, "sparse_initializer", ())
    return {t.values.name: t.SerializeToString(deterministic=True) for t in sparse}


def _metadata(model: Model) -> dict[str, str]:
    props = getattr(model.header, "metadata_props", ())
    return {entry.key: entry.value for entry in props}


def _opsets(model: Model) -> list[str]:
    return [
        f"{domain or 'ai.onnx'}:{version}"
        for domain, version in sorted(model.opset_imports.items())
    ]


def _filled(net: Net | None) -> dict[str, None]:
    if net is None:
        return {}
    return {name: None for op in net for name in op.outputs}

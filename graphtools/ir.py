"""The owned IR: ``Model`` (an init_net/predict_net pair), ``Net`` and ``Op``.

A ``Net`` keeps blob *names* the way Caffe2 does (nets are not SSA; see ``graphtools.ssa`` for
the versioned view). Ops are immutable values: a rewrite builds a new op with ``Op.replace`` and
installs it through a ``Net`` method, and every mutating ``Net`` method bumps ``Net.revision``,
which keys the cached SSA view and lets the pass manager check a pass's ``modified`` flag.

This module is the data model, its edits and snapshots; converting to and from NetDef messages
and bytes is the codec's job (``graphtools.serde.codec``). An op loaded from a file keeps a
reference to its *source* (an ``OpSource`` the codec provides) and decodes the fields beyond
``type``/``inputs``/``outputs`` from it on first access; only fields a rewrite changed are
written back, so unknown fields, argument order and nested nets survive, and an unchanged net
re-serialises byte for byte.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import (
    Callable,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Set,
    Sized,
)
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from graphtools._core import CAFFE2, DIALECTS, STEP_NET_OPS, as_names, is_text_step_net
from graphtools._gc import paused_gc
from graphtools._ints import shared_from, shared_ints
from graphtools.errors import IllegalRewriteError, InvalidArgumentError
from graphtools.layout import Layout
from graphtools.oplist import OpList
from graphtools.rewriter import Edit, affected_names
from graphtools.ssa import Use, VersionedBlob, as_blob
from graphtools.ssa_view import SSAView
from graphtools.usedef import Overlay
from graphtools.values import Tensor, ValueType

_MISSING: Any = object()
_T = TypeVar("_T")
_UNCHANGED: frozenset[str] = frozenset()
_OpState = tuple[bool | None, bool | None, frozenset[str]]
"""An op's "holds nested nets" and "lists control inputs" flags (``None``: not known yet)
and the fields a rewrite changed: one slot, not three (16 bytes an op: 40 MB at 10^6 ops)."""
_STATES: dict[tuple[bool | None, bool | None], _OpState] = {
    (nested, control): (nested, control, _UNCHANGED)
    for nested in (None, False, True)
    for control in (None, False, True)
}
"""The states of unchanged ops, shared."""


def _state(nested: bool | None, control: bool | None, changed: frozenset[str]) -> _OpState:
    """An op's state, the shared one when no field changed."""
    return _STATES[nested, control] if not changed else (nested, control, changed)


_OPEN_EDIT = "open-edit"
"""The memo entry holding a weak reference to the edit ``Net.edit`` opened last."""


@dataclass(frozen=True, slots=True)
class DeviceOption:
    """Where an op runs; ``None`` marks a field absent from the message (proto2 presence)."""

    device_type: int | None = None
    device_id: int | None = None
    random_seed: int | None = None
    node_name: str | None = None
    numa_node_id: int | None = None
    extra_info: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "device_type",
        "device_id",
        "random_seed",
        "node_name",
        "numa_node_id",
    )
    """The optional scalar fields, as the DeviceOption message names them."""

    @classmethod
    def from_proto(cls, msg: Any) -> DeviceOption:
        """Decode a DeviceOption message, keeping which fields were set."""
        values: dict[str, Any] = {}
        for name in cls.FIELDS:
            if msg.HasField(name):
                values[name] = getattr(msg, name)
        return cls(extra_info=tuple(msg.extra_info), **values)

    @property
    def type(self) -> int:
        """The device type with Caffe2's default (0, CPU) applied."""
        return 0 if self.device_type is None else self.device_type


@dataclass(frozen=True, slots=True)
class Argument:
    """One named op or net argument; unset scalar fields are ``None``.

    Tensors (``t``, ``tensors``, ``qtensors``) stay protobuf messages: they are data, not graph
    structure, and are shared with the loaded file's messages, so treat them as read-only (build
    a new argument to change one; an in-place edit bumps no revision and survives a rollback).
    Nested nets (``n``, ``nets``) are IR nets; an op holding nested nets belongs to one net at a
    time (its nets report their edits to that net). Equality compares nested nets by content.

    ONNX attributes are arguments too: a graph is ``n`` (graphs: ``nets``), a tensor, sparse
    tensor or type proto ``t`` (lists: ``tensors``). ``kind`` is the attribute's declared type
    (``onnx.AttributeProto.AttributeType``; ``None`` for Caffe2 and for arguments built in
    Python, whose type follows from the value) and ``raw`` the message it was decoded from,
    which the codec writes back as it was when nothing it holds changed (doc strings and
    reference attributes included).
    """

    name: str | None
    f: float | None = None
    i: int | None = None
    s: bytes | None = None
    t: Any = None
    n: Net | None = None
    floats: tuple[float, ...] = ()
    ints: tuple[int, ...] = ()
    strings: tuple[bytes, ...] = ()
    tensors: tuple[Any, ...] = ()
    nets: tuple[Net, ...] = ()
    qtensors: tuple[Any, ...] = ()
    kind: int | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def value(self) -> Any:
        """The argument's value, whichever field holds it (``None`` when none does).

        Scalars come back as they are, ``s`` as ``bytes``; repeated fields as tuples. When
        several repeated fields are empty the argument is an empty list (Caffe2 cannot tell).
        """
        for name in ("f", "i", "s", "t", "n"):
            value = getattr(self, name)
            if value is not None:
                return value
        for name in ("floats", "ints", "strings", "tensors", "nets", "qtensors"):
            value = getattr(self, name)
            if value:
                return value
        return None

    def nested_nets(self) -> tuple[Net, ...]:
        """Every net this argument holds (``n`` first, then ``nets``)."""
        return ((self.n,) if self.n is not None else ()) + self.nets

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Argument):
            return NotImplemented
        return (
            self.name == other.name
            and self.f == other.f
            and self.i == other.i
            and self.s == other.s
            and self.t == other.t
            and self.floats == other.floats
            and self.ints == other.ints
            and self.strings == other.strings
            and self.tensors == other.tensors
            and self.qtensors == other.qtensors
            and _same_nets(self.nested_nets(), other.nested_nets())
            and (self.n is None) == (other.n is None)
        )

    __hash__ = None  # type: ignore[assignment]


_TENSOR_MESSAGES = frozenset(
    (
        "graphtools.caffe2.TensorProto",
        "onnx.TensorProto",
        "onnx.SparseTensorProto",
        "onnx.TypeProto",
    )
)
"""Messages an argument holds as a tensor value (``t``, ``tensors``): data, not structure."""
_QTENSOR = "graphtools.caffe2.QTensorProto"


def _message_name(value: Any) -> str:
    """The full protobuf type name of ``value`` ("" when it is no message)."""
    descriptor = getattr(type(value), "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", ""))


def make_arg(name: str, value: Any) -> Argument:
    """Build an ``Argument`` from a Python value, the way Caffe2's ``MakeArgument`` does.

    ``bool``/``int`` -> ``i``, ``float`` -> ``f``, ``str``/``bytes`` -> ``s``, ``Net`` -> ``n``
    (a ``NetDef`` or ONNX ``GraphProto`` must be converted first), a tensor message (Caffe2's
    or ONNX's ``TensorProto``) -> ``t``; sequences (numpy arrays included) go to ``ints``,
    ``floats``, ``strings``, ``nets``, ``tensors`` or ``qtensors`` by the type of *all* their
    elements (a list mixing ints and floats is ``floats``; other mixtures are refused). numpy
    scalars count as the Python number they hold.
    """
    if isinstance(value, np.generic | np.ndarray) and np.ndim(value) == 0:
        value = value.item()
    if isinstance(value, bool | int):
        return Argument(name, i=int(value))
    if isinstance(value, float):
        return Argument(name, f=value)
    if isinstance(value, str):
        return Argument(name, s=value.encode())
    if isinstance(value, bytes):
        return Argument(name, s=value)
    message = _message_name(value)
    if message.endswith(("NetDef", "GraphProto")):
        raise TypeError(
            f"argument {name!r}: convert the {message.rpartition('.')[2]} to a Net first "
            "(graphtools.serde: net_from_netdef, or the ONNX codec)"
        )
    if isinstance(value, Net):
        return Argument(name, n=value)
    if message in _TENSOR_MESSAGES:
        return Argument(name, t=value)
    items = value.ravel().tolist() if isinstance(value, np.ndarray) else list(value)
    items = [v.item() if isinstance(v, np.generic) else v for v in items]
    if not items:
        return Argument(name)
    if all(isinstance(v, bool | int) for v in items):
        return Argument(name, ints=tuple(int(v) for v in items))
    if all(isinstance(v, bool | int | float) for v in items):
        return Argument(name, floats=tuple(float(v) for v in items))
    if all(isinstance(v, str | bytes) for v in items):
        return Argument(name, strings=tuple(v.encode() if isinstance(v, str) else v for v in items))
    if all(isinstance(v, Net) for v in items):
        return Argument(name, nets=tuple(items))
    if all(_message_name(v) in _TENSOR_MESSAGES for v in items):
        return Argument(name, tensors=tuple(items))
    if all(_message_name(v) == _QTENSOR for v in items):
        return Argument(name, qtensors=tuple(items))
    kinds = sorted({type(v).__name__ for v in items})
    raise TypeError(f"cannot make argument {name!r} from a list of {', '.join(kinds)} values")


# Fields of OperatorDef that Op decodes lazily from its source.
LAZY_OP_FIELDS = (
    "name",
    "engine",
    "device_option",
    "args",
    "control_inputs",
    "is_gradient_op",
    "debug_info",
    "domain",
    "op_version",
)


class OpSource(Protocol):
    """Where the fields of loaded ops come from (implemented by ``graphtools.serde.codec``).

    One source serves every op of a loaded net, each op knowing its index in it.
    """

    def decode(self, index: int, key: str, parent: Net | None) -> Any:
        """Field ``key`` (one of ``LAZY_OP_FIELDS``) of op ``index``; nested nets in its
        arguments become IR nets owned by ``parent``."""
        ...

    def has_nested_nets(self, index: int) -> bool:
        """Whether op ``index`` holds a net in an argument (without decoding its arguments)."""
        ...

    def encoded(self, index: int) -> bytes | None:
        """Op ``index``'s message as loaded (an OperatorDef, a NodeProto), when the source
        holds it as bytes; ``None`` otherwise."""
        ...


class NameOrder:
    """Blob names a loader expects the ops to name in this order, so that each op's names are
    those very strings rather than copies (``Op.wrap_loaded``).

    A loaded name is a new string per occurrence: at 10^6 ops, 8 million strings for 2
    million names (a parameter is named by its fill, the init_net's outputs, the
    predict_net's inputs and the op reading it). Hashing them into one table costs half a
    microsecond a name; names come in file order instead, so an op's name is compared with
    the next one ``expected`` (the net's declared names: an exporter lists its parameters in
    the order the ops read them) and with the previous op's first output (a chain of layers),
    and takes that string when equal. A name out of order just stays a copy.
    """

    __slots__ = ("cursor", "expected", "previous")

    def __init__(self, expected: Iterable[str]) -> None:
        self.expected: list[str | None] = [*expected, None]  # None: the end, no name's
        self.cursor = 0
        self.previous: tuple[str, ...] = ()


class Op:
    """One operator: an immutable value.

    ``type``, ``inputs`` and ``outputs`` are plain attributes; the other OperatorDef fields are
    decoded from the op's source on first access. Optional scalar fields read ``None`` when
    absent. Change an op with ``replace`` and install the result with a ``Net`` method.
    """

    __slots__ = (
        "_index",
        "_lazy",
        "_parent",
        "_source",
        "_state",
        "inputs",
        "outputs",
        "type",
    )

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __init__(
        self,
        type: str,
        inputs: Iterable[str] = (),
        outputs: Iterable[str] = (),
        *,
        name: str | None = None,
        args: Iterable[Argument] | dict[str, Any] = (),
        device_option: DeviceOption | None = None,
        engine: str | None = None,
        control_inputs: Iterable[str] = (),
        is_gradient_op: bool | None = None,
        debug_info: str | None = None,
        domain: str | None = None,
        op_version: int | None = None,
    ) -> None:
        if isinstance(args, dict):
            args = [make_arg(k, v) for k, v in args.items()]
        self.type = type
        self.inputs = as_names(inputs, "inputs")
        self.outputs = as_names(outputs, "outputs")
        self._lazy: dict[str, Any] | None = {
            "name": name,
            "engine": engine,
            "device_option": device_option,
            "args": tuple(args),
            "control_inputs": as_names(control_inputs, "control_inputs"),
            "is_gradient_op": is_gradient_op,
            "debug_info": debug_info,
            "domain": domain,
            "op_version": op_version,
        }
        self._parent: Net | None = None
        self._state = _STATES[None, None]
        self._source: OpSource | None = None
        self._index = -1

    @classmethod
    def wrap_loaded(
        cls,
        records: Iterable[Any],
        parent: Net | None,
        source: OpSource,
        *,
        nested: bool | None,
        control: bool | None,
        type_field: str = "type",
        start: int = 0,
        order: NameOrder | None = None,
    ) -> list[Op]:
        """Ops for a codec: one per record (anything with ``type``, ``input`` and ``output``,
        an ``OperatorDef`` typically; ``type_field`` names the type's field when it is not
        ``type``: ``op_type`` for an ONNX ``NodeProto``), the i-th decoding its other fields
        from ``source`` at index ``start + i``.

        ``nested``/``control`` preset every op's "holds nested nets" / "lists control inputs"
        flags (``None``: each op works it out when first asked). One loop with no call per
        op: loading a net is this loop over every op of the file. Names are not interned (at
        10^6 ops ``sys.intern`` saved 0.28 GB but cost 2.8 s of a 6.3 s load); with an
        ``order`` they take the strings of the names it expects, in file order (``NameOrder``,
        whose cursor carries from one chunk of records to the next).
        """
        new = cls.__new__
        types: dict[str, str] = {}  # one string object per op type, not one per op
        ops: list[Op] = []
        append = ops.append
        type_of = operator.attrgetter(type_field)
        if order is not None:
            expected, cursor, previous = order.expected, order.cursor, order.previous
            want = expected[cursor]  # the list ends with None, which no name equals
        state = _state(nested, control, _UNCHANGED)
        if isinstance(records, Sized):
            end = start + len(records)
            indices: Iterable[int] = shared_ints(end)[start:end]
        else:  # a stream (the ONNX codec's chunks): read as it comes, never held whole
            indices = shared_from(start)
        for index, record in zip(indices, records, strict=False):
            op = new(cls)
            op_type = type_of(record)
            op.type = types.setdefault(op_type, op_type)
            if order is None:
                op.inputs = tuple(record.input[:])
                op.outputs = tuple(record.output[:])
            else:
                names = record.input[:]
                if names:
                    first = 0
                    if previous and names[0] == previous[0]:
                        names[0] = previous[0]
                        first = 1
                    for position in range(first, len(names)):
                        if names[position] == want:
                            names[position] = want
                            cursor += 1
                            want = expected[cursor]
                    op.inputs = tuple(names)
                else:
                    op.inputs = ()
                outputs = record.output[:]
                if outputs:
                    written = outputs[0]
                    if names and written == names[0]:
                        outputs[0] = names[0]  # in place
                    elif written == want:
                        outputs[0] = want
                        cursor += 1
                        want = expected[cursor]
                op.outputs = previous = tuple(outputs)
            op._lazy = None
            op._parent = parent
            op._state = state
            op._source = source
            op._index = index
            append(op)
        if order is not None:
            order.cursor, order.previous = cursor, previous
        return ops

    def _get(self, key: str) -> Any:
        lazy = self._lazy
        if lazy is None:
            lazy = self._lazy = {}
        value = lazy.get(key, _MISSING)
        if value is _MISSING:
            source = self._source
            assert source is not None  # only loaded ops have undecoded fields
            value = source.decode(self._index, key, self._parent)
            lazy[key] = value
            if key == "args":
                lazy["_nested_revisions"] = _nested_revisions(value)
        return value

    name = property(lambda self: self._get("name"), doc="op name, ``None`` when absent")
    engine = property(lambda self: self._get("engine"), doc="preferred engine or ``None``")
    device_option = property(
        lambda self: self._get("device_option"), doc="the op's own DeviceOption or ``None``"
    )
    args = property(lambda self: self._get("args"), doc="arguments in file order")
    control_inputs = property(
        lambda self: self._get("control_inputs"), doc="scheduling-only dependencies"
    )
    is_gradient_op = property(lambda self: self._get("is_gradient_op"))
    debug_info = property(lambda self: self._get("debug_info"))
    domain = property(lambda self: self._get("domain"))
    op_version = property(lambda self: self._get("op_version"))

    def arg(self, name: str, default: Any = None) -> Any:
        """The value of the first argument called ``name`` (Caffe2's rule), else ``default``."""
        for argument in self.args:
            if argument.name == name:
                value = argument.value
                return default if value is None and default is not None else value
        return default

    def has_arg(self, name: str) -> bool:
        """Whether an argument called ``name`` exists."""
        return any(argument.name == name for argument in self.args)

    def has_nested_nets(self) -> bool:
        """Whether any argument holds a net (control flow, recurrent step nets; a step net
        given as NetDef text too, which ``nested_nets`` does not list: ``text_step_nets``).

        Cached in the op (ops are immutable): passes, verify and snapshots ask it of every op.
        """
        nested = self._state[0]
        if nested is None:
            lazy = self._lazy
            if self._source is not None and (lazy is None or "args" not in lazy):
                nested = self._source.has_nested_nets(self._index)
            else:
                nested = any(a.n is not None or a.nets for a in self.args)
                nested = nested or bool(self.text_step_nets())
            self._state = _state(nested, self._state[1], self._state[2])
        return nested

    def text_step_nets(self) -> list[bytes]:
        """The step nets this op holds as NetDef text (a ``RecurrentNetwork`` written by an
        old frontend), which ``nested_nets`` does not list: the analyses read their names."""
        if self.type not in STEP_NET_OPS:
            return []
        return [
            a.s.encode() if isinstance(a.s, str) else a.s
            for a in self.args
            if a.s is not None and is_text_step_net(self.type, a.name, a.s)
        ]

    def has_control_inputs(self) -> bool:
        """Whether the op lists control inputs (cached; cheaper than decoding them)."""
        control = self._state[1]
        if control is None:
            control = bool(self.control_inputs)
            self._state = _state(self._state[0], control, self._state[2])
        return control

    def nested_nets(self) -> list[tuple[str | None, Net]]:
        """``(argument name, net)`` for every net held in an argument, in argument order."""
        if not self.has_nested_nets():
            return []
        return [(a.name, net) for a in self.args for net in a.nested_nets()]

    def replace(self, **changes: Any) -> Op:
        """A copy of this op with the given fields changed.

        Accepts ``type``, ``inputs``, ``outputs`` and every lazily decoded field (``name``,
        ``args``, ``device_option``, ``engine``, ``control_inputs``, ...). ``args`` may be a
        dict of Python values. The copy shares the source, so untouched fields stay exactly
        as loaded.
        """
        new = Op.__new__(Op)
        new.type = changes.pop("type", self.type)
        # the op's own names are checked already: only new ones are
        new.inputs = (
            as_names(changes.pop("inputs"), "inputs") if "inputs" in changes else self.inputs
        )
        new.outputs = (
            as_names(changes.pop("outputs"), "outputs") if "outputs" in changes else self.outputs
        )
        new._lazy = {} if self._lazy is None else dict(self._lazy)
        new._parent = self._parent
        new._source = self._source
        new._index = self._index
        changed = set(self._state[2])
        if new.type != self.type:
            changed.add("type")
        if new.inputs != self.inputs:
            changed.add("inputs")
        if new.outputs != self.outputs:
            changed.add("outputs")
        for key, value in changes.items():
            if key not in LAZY_OP_FIELDS:
                raise TypeError(f"Op has no field {key!r}")
            if key == "args":
                value = (
                    [make_arg(k, v) for k, v in value.items()] if isinstance(value, dict) else value
                )
                value = tuple(value)
            elif key == "control_inputs":
                value = as_names(value, "control_inputs")
            new._lazy[key] = value
            changed.add(key)
        new._state = _state(
            None if "args" in changes else self._state[0],
            None if "control_inputs" in changes else self._state[1],
            frozenset(changed),
        )
        return new

    def with_arg(self, name: str, value: Any) -> Op:
        """A copy with argument ``name`` set to ``value`` (replacing it in place, else appended)."""
        new_arg = make_arg(name, value)
        args = list(self.args)
        for position, argument in enumerate(args):
            if argument.name == name:
                args[position] = new_arg
                break
        else:
            args.append(new_arg)
        return self.replace(args=args)

    def without_arg(self, name: str) -> Op:
        """A copy with every argument called ``name`` removed."""
        return self.replace(args=[a for a in self.args if a.name != name])

    # -- what a codec needs to write an op back ---------------------------------------------

    def changed_fields(self) -> frozenset[str]:
        """Fields that differ from the op's source (every field for an op built in Python):
        ``type``, ``inputs``, ``outputs`` and names of ``LAZY_OP_FIELDS``; ``args`` also when
        a nested net held in an argument was edited since it was decoded."""
        if self._source is None:
            return frozenset(("type", "inputs", "outputs", *LAZY_OP_FIELDS))
        if self._nested_changed():
            return self._state[2] | {"args"}
        return self._state[2]

    def source(self) -> tuple[OpSource, int] | None:
        """``(source, index)`` the op decodes its fields from; ``None`` for an op built in
        Python."""
        return None if self._source is None else (self._source, self._index)

    def loaded_from(self) -> tuple[OpSource, int] | None:
        """``source()`` when the op is exactly as loaded (nothing changed), else ``None``."""
        if self._source is None or self.changed_fields():
            return None
        return self._source, self._index

    def loaded_encoding(self) -> bytes | None:
        """The bytes this op was loaded from when nothing changed it, it holds no nested net
        and its source holds them (``None`` otherwise): ops of one dialect with equal
        encodings are equal, fields and arguments alike, without decoding either. (A nested
        ONNX graph may read its initializers from files beside the model: equal bytes, other
        data.)"""
        found = self.loaded_from()
        if found is None or self.has_nested_nets():
            return None
        return found[0].encoded(found[1])

    def _nested_changed(self) -> bool:
        lazy = self._lazy
        if lazy is None or not lazy.get("_nested_revisions"):
            return False
        return bool(lazy["_nested_revisions"] != _nested_revisions(lazy["args"]))

    def _copy_owned_by(self, parent: Net) -> Op:
        """A copy of this op whose decoded nested nets are copies owned by ``parent``."""
        new = self.replace()
        new._parent = parent
        lazy = new._lazy
        if lazy is not None and "args" in lazy:
            if self._nested_changed():
                new._state = _state(new._state[0], new._state[1], new._state[2] | {"args"})
            lazy["args"] = tuple(_copy_argument(a, parent) for a in lazy["args"])
            lazy["_nested_revisions"] = _nested_revisions(lazy["args"])
        return new

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Op):
            return NotImplemented
        return (
            self.type == other.type
            and self.inputs == other.inputs
            and self.outputs == other.outputs
            and all(self._get(key) == other._get(key) for key in LAZY_OP_FIELDS)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Op({self.type!r}, {list(self.inputs)!r}, {list(self.outputs)!r})"


def _nested_revisions(args: Sequence[Argument]) -> tuple[int, ...]:
    return tuple(net.revision for argument in args for net in argument.nested_nets())


def _copy_argument(argument: Argument, parent: Net) -> Argument:
    """``argument`` with copies of its nested nets, owned by ``parent``."""
    if argument.n is None and not argument.nets:
        return argument
    n = None if argument.n is None else argument.n.copy()
    nets = tuple(net.copy() for net in argument.nets)
    for net in (n, *nets):
        if net is not None:
            net._parent = parent
    return replace(argument, n=n, nets=nets)


def _checked_initializers(initializers: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``initializers`` as a dict, or ``TypeError`` when a value is not a ``Tensor``."""
    for name, value in initializers.items():
        if not isinstance(value, Tensor):
            raise TypeError(
                f"initializer {name!r}: nets hold graphtools.values.Tensor values, not "
                f"{type(value).__name__} (wrap arrays in ArrayTensor)"
            )
    return dict(initializers)


def _same_tensor(first: Tensor, second: Tensor) -> bool:
    return first.same_as(second)


def _same_nets(first: Sequence[Net], second: Sequence[Net]) -> bool:
    """Whether two sequences of nets hold equal nets (ops, external lists, header)."""
    return len(first) == len(second) and all(
        a is b or a.same_as(b) for a, b in zip(first, second, strict=True)
    )


_Loaded = tuple[dict[str, ValueType], list[bytes], tuple[list[bytes], list[bytes]] | None]
"""A codec's record of a net's declarations: the types it was loaded with, its value_info
and its interface, serialized (see ``Net.loaded_declarations``)."""


class Net:
    """A net in a dialect: ops in order, external inputs and outputs, and what else the file's
    net holds.

    A Caffe2 net is a NetDef; an ONNX net is a graph, whose external inputs and outputs are the
    graph's inputs and outputs, with ``initializers`` (constants it holds, by name) and
    ``types`` (the declared type of a value: graph inputs, outputs, value_info). ``dialect``
    says which; the nets an op holds are in its net's dialect.

    Mutate only through the methods below: each bumps ``revision`` (and the revision of the net
    that holds this one in an argument), which invalidates the cached SSA view.

    Net-level fields beyond ops, external lists, name and device option (Caffe2: executor type,
    arguments, partition info; ONNX: doc string, metadata, sparse initializers; fields the schema
    does not know) stay in ``header``, the codec's record of the file's net without them (a
    converter building a net may give one: an ONNX graph's quantization annotations);
    ``args`` holds Caffe2's net-level arguments decoded.
    """

    __slots__ = (
        "_args",
        "_device_option",
        "_dialect",
        "_external_inputs",
        "_external_outputs",
        "_frozen_lists",
        "_header",
        "_initializers",
        "_loaded_declarations",
        "_memo",
        "_name",
        "_ops",
        "_parent",
        "_types",
        "revision",
    )

    def __init__(
        self,
        ops: Iterable[Op] = (),
        external_inputs: Iterable[str] = (),
        external_outputs: Iterable[str] = (),
        *,
        name: str | None = None,
        dialect: str = CAFFE2,
        initializers: Mapping[str, Tensor] | None = None,
        types: Mapping[str, ValueType] | None = None,
        header: Any = None,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
        self._ops: OpList[Op] = OpList(ops)
        self._external_inputs: tuple[str, ...] = as_names(external_inputs, "external_inputs")
        self._external_outputs: tuple[str, ...] = as_names(external_outputs, "external_outputs")
        self._name = name
        self._device_option: DeviceOption | None = None
        self._dialect = dialect
        self._header: Any = header
        self._initializers: dict[str, Tensor] = _checked_initializers(initializers or {})
        self._types: dict[str, ValueType] = dict(types or {})
        self._loaded_declarations: _Loaded | None = None
        self._args: tuple[Argument, ...] = ()
        self._parent: Net | None = None
        self._memo: dict[Hashable, tuple[int, Any]] = {}
        self._frozen_lists: dict[str, tuple[Sequence[str], Any]] = {}  # list -> tuple or set
        self.revision = 0
        try:
            self._adopt(self._ops)
        except AttributeError:  # something that is no Op among the ops: say which
            stray = next(i for i, op in enumerate(self._ops) if not isinstance(op, Op))
            found = self._ops[stray]
            raise TypeError(
                f"op #{stray} of a Net must be a graphtools Op, not {type(found).__name__} "
                f"{found!r:.60}: Net(ops, external_inputs, external_outputs) takes the ops first"
            ) from None

    @classmethod
    def loaded(
        cls,
        make_ops: Callable[[Net], list[Op]],
        external_inputs: Sequence[str],
        external_outputs: Sequence[str],
        header: Any,
        make_args: Callable[[Net], tuple[Argument, ...]],
        parent: Net | None = None,
        *,
        name: str | None = None,
        device_option: DeviceOption | None = None,
        dialect: str = CAFFE2,
        initializers: dict[str, Tensor] | None = None,
        types: dict[str, ValueType] | None = None,
        declarations: list[bytes] | None = None,
        interface: tuple[list[bytes], list[bytes]] | None = None,
    ) -> Net:
        """A net for a codec: ``make_ops(net)``/``make_args(net)`` build its ops and net-level
        arguments already owned by the new net (``Op.wrap_loaded``), taken as they are;
        ``header`` is the codec's record of the rest of the file's net, ``declarations`` of
        its value declarations and ``interface`` of its inputs' and outputs' (see
        ``loaded_declarations``, ``loaded_interface``)."""
        with paused_gc():
            net = cls.__new__(cls)
            net._parent = parent
            net._memo = {}
            net._frozen_lists = {}
            net.revision = 0
            net._external_inputs = tuple(external_inputs)  # a tuple given is kept
            net._external_outputs = tuple(external_outputs)
            net._header = header
            net._name = name
            net._device_option = device_option
            net._dialect = dialect
            net._initializers = {} if initializers is None else initializers
            net._types = {} if types is None else types
            net._loaded_declarations = (
                None if declarations is None else (net._types, declarations, interface)
            )
            net._ops = OpList(make_ops(net))
            net._args = make_args(net)
            return net

    def copy(self) -> Net:
        """An independent deep copy (nested nets included), at revision 0.

        Ops are immutable values, so the copy shares them (and the op list); only ops holding
        nested nets are copied, with copies of their nets. Initializers and types are immutable
        values too, shared, as are the external lists (replaced, never changed in place).
        Costs no re-encoding.
        """
        net = Net.__new__(Net)
        nested = self.nested_op_indices()
        net._ops = (
            self._ops.spliced(replaced={i: self._ops[i]._copy_owned_by(net) for i in nested})
            if nested
            else self._ops
        )
        # replaced, never changed in place: shared (a million params' names, a list each)
        net._external_inputs = self._external_inputs
        net._external_outputs = self._external_outputs
        net._header = self._header
        net._name = self._name
        net._device_option = self._device_option
        net._dialect = self._dialect
        net._initializers = dict(self._initializers)
        net._types = dict(self._types)
        net._loaded_declarations = None
        net._args = tuple(_copy_argument(a, net) for a in self._args)
        net._parent = None
        net._memo = {}
        net._frozen_lists = {}
        net.revision = 0
        return net

    def same_as(self, other: Net) -> bool:
        """Whether ``other`` holds the same ops, external lists, header, arguments,
        initializers and types."""
        return (
            len(self._ops) == len(other._ops)
            and self._dialect == other._dialect
            and self._external_inputs == other._external_inputs
            and self._external_outputs == other._external_outputs
            and self._name == other._name
            and self._device_option == other._device_option
            and self._header == other._header
            and self._args == other._args
            and self._initializers.keys() == other._initializers.keys()
            and all(map(_same_tensor, self._initializers.values(), other._initializers.values()))
            and self._types == other._types
            and all(map(operator.eq, self._ops, other._ops))
        )

    # -- reading ------------------------------------------------------------------------------

    @property
    def ops(self) -> Sequence[Op]:
        """The ops in order (an immutable sequence; mutate through the Net methods)."""
        return self._ops

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops)

    def __getitem__(self, index: int) -> Op:
        return self._ops[index]

    @property
    def dialect(self) -> str:
        """``"caffe2"`` or ``"onnx"``: how the ops and names of this net are to be read."""
        return self._dialect

    @property
    def external_inputs(self) -> Sequence[str]:
        """Declared external inputs (an ONNX graph's inputs), in file order."""
        return self._frozen("external_inputs", self._external_inputs)

    @property
    def external_outputs(self) -> Sequence[str]:
        """Declared external outputs (an ONNX graph's outputs), in file order."""
        return self._frozen("external_outputs", self._external_outputs)

    def loaded_declarations(self) -> list[bytes] | None:
        """The codec's record of the value declarations the net was loaded with (an ONNX
        graph's value_info, serialized, duplicates and names no op computes included) while
        the net is as loaded (no change since, its types the loaded ones), for a save that
        gives back the file it read; ``None`` once anything changed (the codec then writes
        the declarations from ``types``)."""
        loaded = self._still_loaded()
        return None if loaded is None else loaded[1]

    def loaded_interface(self) -> tuple[list[bytes], list[bytes]] | None:
        """The codec's record of the input and output declarations the net was loaded with
        (serialized: a name declared twice, as an input and an output or as two outputs, keeps
        each declaration), on the terms of ``loaded_declarations``."""
        loaded = self._still_loaded()
        return None if loaded is None else loaded[2]

    def _still_loaded(self) -> _Loaded | None:
        """The codec's record while the net is as loaded (no change, the loaded types)."""
        loaded = self._loaded_declarations
        if loaded is None or self.revision != 0 or loaded[0] is not self._types:
            return None
        return loaded

    def external_input_set(self) -> frozenset[str]:
        """The declared external inputs as a set, for membership tests (made once per list)."""
        names = self._external_inputs
        entry = self._frozen_lists.get("external_input_set")
        if entry is None or entry[0] is not names:
            entry = self._frozen_lists["external_input_set"] = (names, frozenset(names))
        return entry[1]

    def _frozen(self, key: str, names: Sequence[str]) -> tuple[str, ...]:
        """``names`` as a tuple: the external lists are tuples (an exported net declares a
        million params: a copy of them per question cost 0.27 s of a pipeline, a copy kept
        11 MB a list), anything else made one once per object."""
        if isinstance(names, tuple):
            return names
        entry = self._frozen_lists.get(key)
        if entry is None or entry[0] is not names:
            entry = self._frozen_lists[key] = (names, tuple(names))
        return entry[1]

    @property
    def initializers(self) -> Mapping[str, Tensor]:
        """The constants this net holds, by name, in file order (ONNX initializers; empty
        for Caffe2, whose params the init_net fills). Read-only: change them in an edit."""
        return MappingProxyType(self._initializers)

    @property
    def types(self) -> Mapping[str, ValueType]:
        """Declared types of values, by name (ONNX graph inputs, outputs and value_info;
        empty for Caffe2). Read-only: change them in an edit."""
        return MappingProxyType(self._types)

    def defined_names(self) -> frozenset[str]:
        """Names the net defines besides its external inputs and its ops' outputs: its
        initializers (computed once per revision)."""
        return self.cached("defined_names", lambda net: frozenset(net._initializers))

    @property
    def name(self) -> str | None:
        """The net's name, ``None`` when absent."""
        return self._name

    @property
    def device_option(self) -> DeviceOption | None:
        """The net-wide DeviceOption (applies to ops without their own), or ``None``."""
        return self._device_option

    @property
    def net_type(self) -> str | None:
        """Caffe2's executor type (``simple``, ``dag``, ...) or ``None`` when absent."""
        header = self._header
        if self._dialect != CAFFE2 or header is None or not header.HasField("type"):
            return None
        return str(header.type)

    @property
    def args(self) -> tuple[Argument, ...]:
        """Net-level arguments, in file order."""
        return self._args

    @property
    def header(self) -> Any:
        """The codec's record of the file's net beyond what the IR models (a NetDef without
        ops or external lists, an ONNX GraphProto without nodes, inputs, outputs, initializers
        or value_info); ``None`` for a net built in Python. Read-only."""
        return self._header

    def check_op(self, op: Op) -> Op:
        """``op`` itself, or ``TypeError`` before the net is touched when it is not an IR
        ``Op``."""
        if not isinstance(op, Op):
            raise TypeError(f"nets hold graphtools.ir.Op values, not {type(op).__name__}")
        return op

    def op_device(self, op: Op) -> DeviceOption | None:
        """The DeviceOption that applies to ``op``: its own, else the net's."""
        own = op.device_option
        return own if own is not None else self.device_option

    def cached(self, key: Hashable, compute: Callable[[Net], _T]) -> _T:
        """``compute(self)``, computed once per revision of this net and remembered.

        How analyses (the SSA view, verify's findings, the ops holding nested nets) avoid
        recomputing over an unchanged net; any mutation invalidates every entry.
        """
        entry = self._memo.get(key)
        if entry is not None and entry[0] == self.revision:
            return entry[1]
        value = compute(self)
        self._memo[key] = (self.revision, value)
        return value

    def ssa(self) -> SSAView:
        """The versioned-blob view of this net, computed once per revision.

        After an edit (``edit``, ``remove_ops``, ``edit_ops``, ``set_external_*``) of a net
        whose view was current, the new view is derived from the old one instead of built
        from scratch.
        """
        view = self.cached("ssa", _build_ssa)
        # The view answers what the edit's overlay did: let the overlay and the previous
        # revision's view it holds go.
        self._memo.pop(_USEDEF, None)
        self._memo.pop(_SSA_CARRY, None)
        return view

    def release_ssa(self) -> None:
        """Let go of the cached view (and the use-def an edit left): at 10^6 ops it holds
        hundreds of MB that saving the net never reads. The next ``ssa()`` builds it anew;
        the revision and everything else stay."""
        for key in ("ssa", _USEDEF, _SSA_CARRY):
            self._memo.pop(key, None)

    def ssa_is_cheap(self) -> bool:
        """Whether ``ssa()`` would come from the cache or be derived from the previous
        revision's (no full build): lets a check use the view only when it is cheap."""
        return self._current_usedef() is not None or self._current(_SSA_CARRY) is not None

    # -- use-def --------------------------------------------------------------------------------

    def producer(self, blob: VersionedBlob) -> int | None:
        """Index of the op writing ``blob`` (``(name, version)`` as ``ssa()`` numbers them);
        ``None`` for version 0 (a net input) or a version no op writes."""
        return self._usedef().producer(as_blob(blob, "blob"))

    def uses(self, blob: VersionedBlob) -> list[Use]:
        """Every read of exactly ``blob`` by a top-level op: ``Use(op, position)`` in op and
        input order (reads inside nested nets are not uses: see ``Use``). After an edit this
        costs what the edit touched, not a rebuild."""
        return self._usedef().uses(as_blob(blob, "blob"))

    def edit(self) -> Edit:
        """Open one transaction: ``with net.edit() as e: e.remove(3); ...``.

        Indices and versioned blobs given to the transaction refer to the net as it is when
        it opens; nothing changes until the ``with`` block ends without an exception, then
        everything is checked and applied at once (or nothing is, and ``IllegalRewriteError``
        says why). ``e.changed`` then tells whether the net changed. See ``Edit``.

        Raises:
            IllegalRewriteError: an edit of this net is open still (one transaction at a time:
                the inner one's changes would stand while the outer one then fails).
        """
        held = self._current(_OPEN_EDIT)
        if held is not None:
            other = held()
            if other is not None and other.is_open:
                raise IllegalRewriteError(
                    "an edit of this net is open already: make every change through it (or "
                    "commit it first)"
                )
        edit = Edit(self)
        self._memo[_OPEN_EDIT] = (self.revision, weakref.ref(edit))
        return edit

    def _current(self, key: str) -> Any:
        entry = self._memo.get(key)
        return entry[1] if entry is not None and entry[0] == self.revision else None

    def _current_usedef(self) -> SSAView | Overlay | None:
        """The view, or the overlay an edit left, for this revision (``None``: neither)."""
        found: SSAView | Overlay | None = self._current("ssa")
        return found if found is not None else self._current(_USEDEF)

    def _usedef(self) -> SSAView | Overlay:
        found = self._current_usedef()
        return found if found is not None else self.ssa()

    def nested_op_indices(self) -> frozenset[int]:
        """Indices of the ops that hold nets in their arguments (computed once per revision)."""
        return self.cached("nested_op_indices", _nested_op_indices)

    def written_names(self) -> frozenset[str]:
        """Every blob name some top-level op writes (computed once per revision)."""
        return self.cached(
            "written_names", lambda net: frozenset(chain.from_iterable(map(_OUTPUTS, net._ops)))
        )

    def written_among(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` that some top-level op writes: looked up in ``written_names``
        when it is built, else found in one scan of the ops' outputs (at 10^6 init ops the
        scan costs a third of building the set a few names are asked of)."""
        wanted = set(names)
        entry = self._memo.get("written_names")
        if entry is not None and entry[0] == self.revision:
            return wanted.intersection(entry[1])
        if not wanted:
            return wanted
        return wanted.intersection(chain.from_iterable(map(_OUTPUTS, self._ops)))

    def control_op_indices(self) -> frozenset[int]:
        """Indices of the ops that list control inputs (computed once per revision)."""
        return self.cached("control_op_indices", _control_op_indices)

    # -- mutation -----------------------------------------------------------------------------

    def _adopt(self, ops: Iterable[Op]) -> None:
        """Make this net the parent of the nets nested in ``ops`` (their edits bump it)."""
        for op in ops:
            op._parent = self
            lazy = op._lazy
            if lazy is not None and "args" in lazy and op.has_nested_nets():
                for argument in lazy["args"]:
                    for nested in argument.nested_nets():
                        nested._parent = self

    def _bump(self) -> None:
        """Advance the revision of this net and of the nets holding it, and drop their cached
        analyses: stale entries are never read again, and an old SSA view kept alive by one
        costs hundreds of MB on a big net."""
        net: Net | None = self
        while net is not None:
            net.revision += 1
            net._memo.clear()
            net = net._parent

    def _install(self, ops: OpList[Op], new_ops: Iterable[Op]) -> None:
        """Install a new op list whose only new ops are ``new_ops`` (adopted here), and bump.

        When no new op holds nested nets or lists control inputs, the cached "no op does"
        facts of the old revision stay valid for the new one.
        """
        new_ops = list(new_ops)
        self._adopt(new_ops)
        keep = [
            key
            for key in ("nested_op_indices", "control_op_indices")
            if self._current(key) == frozenset()
            and not any(
                op.has_nested_nets() if key == "nested_op_indices" else op.has_control_inputs()
                for op in new_ops
            )
        ]
        self._ops = ops
        self._bump()
        for key in keep:
            self._memo[key] = (self.revision, frozenset())

    def _apply(
        self,
        removed: Set[int],
        replaced: Mapping[int, Op],
        inserted: Mapping[int, Sequence[Op]],
        checked: tuple[Layout, set[str]] | None = None,
    ) -> None:
        """Remove, replace and insert ops (positions in the net as it is), in one step.

        ``inserted`` maps a position (``len(self)`` for the end) to the ops going before it.
        When the net's use-def was current, the new revision's is an overlay of it
        (``graphtools.usedef``): nothing is rebuilt. ``checked`` is what the edit's check
        worked out for these very changes (their layout over this net, and
        ``rewriter.affected_names``), so that it is not worked out again.
        """
        ops = self._ops
        before = self._current_usedef()
        new_list = ops.spliced(removed, replaced, inserted)
        new_ops = [*replaced.values(), *(op for group in inserted.values() for op in group)]
        if checked is None:
            edit_layout, affected = None, affected_names(ops, removed, replaced, inserted)
        else:
            edit_layout, affected = checked
        self._install(new_list, new_ops)
        if before is not None:
            self._carry_usedef(before, removed, replaced, inserted, affected, edit_layout)

    def _carry_usedef(
        self,
        before: SSAView | Overlay,
        removed: Set[int],
        replaced: Mapping[int, Op],
        inserted: Mapping[int, Sequence[Op]],
        names: Iterable[str],
        edit_layout: Layout | None = None,
    ) -> None:
        """Remember the use-def of this (just edited) revision as an overlay of ``before``,
        or derive the whole view now when the overlays have grown big (amortised: a view
        costs about as much as ``len(self) / 32`` new ops' bookkeeping). ``edit_layout``,
        when given, is these changes' layout over the net as it was."""
        counts = {position: len(group) for position, group in inserted.items()}
        affected: frozenset[str]
        if isinstance(before, SSAView):
            affected = frozenset()
            base, layout = before, Layout.identity(before.size)
            if edit_layout is None:
                layout = layout.edited(set(removed), replaced, counts)
            else:
                layout = edit_layout
        else:
            base, layout, affected = before.base, before.layout, before.affected
            layout = layout.edited(set(removed), replaced, counts)
        affected = affected.union(names)
        if layout.size - layout.base_count() > max(_OVERLAY_OPS, len(self) // 32):
            self._memo["ssa"] = (self.revision, SSAView.derive(base, self, layout))
        else:
            self._memo[_USEDEF] = (self.revision, Overlay(base, layout, self._ops, affected))

    def append_op(self, op: Op) -> None:
        """Add ``op`` at the end."""
        self._adopt((self.check_op(op),))
        self._ops = self._ops.appended(op)
        self._bump()

    def insert_op(self, index: int, op: Op) -> None:
        """Insert ``op`` before position ``index``."""
        size = len(self._ops)
        position = min(max(index + size, 0) if index < 0 else index, size)  # as list.insert
        self._adopt((self.check_op(op),))
        self._ops = self._ops.spliced(inserted={position: (op,)})
        self._bump()

    def replace_op(self, index: int, op: Op) -> None:
        """Put ``op`` at position ``index`` in place of the op there."""
        position = index + len(self._ops) if index < 0 else index
        self._check_indices((position,))
        self._adopt((self.check_op(op),))
        self._ops = self._ops.spliced(replaced={position: op})
        self._bump()

    def set_ops(self, ops: Iterable[Op]) -> None:
        """Replace the whole op list (nothing of the old use-def is carried over)."""
        new_ops = [self.check_op(op) for op in ops]
        self._adopt(new_ops)
        self._ops = OpList(new_ops)
        self._bump()

    def remove_ops(self, indices: Iterable[int]) -> None:
        """Remove the ops at ``indices`` (unchecked: ``edit`` refuses removing a value still
        read; this does not)."""
        drop = set(indices)
        if drop:
            self._check_indices(drop)
            self._apply(drop, {}, {})

    def edit_ops(
        self, removed: Iterable[int] = (), new_inputs: Mapping[int, Sequence[str]] | None = None
    ) -> None:
        """Drop the ops at ``removed`` and give ops new inputs, in one step (unchecked).

        ``new_inputs`` maps an op index (in the net as it is now) to that op's whole new input
        list. Nothing happens, and the revision stays, when both are empty.
        """
        drop = set(removed)
        self._check_indices(drop | set(new_inputs or {}))
        rewired = {
            index: self._ops[index].replace(inputs=inputs)
            for index, inputs in (new_inputs or {}).items()
            if index not in drop
        }
        if drop or rewired:
            self._apply(drop, rewired, {})

    def _check_indices(self, indices: Iterable[int]) -> None:
        for index in indices:
            if not 0 <= index < len(self._ops):
                raise IndexError(f"op index {index} out of range for a net of {len(self._ops)} ops")

    def set_external_inputs(self, names: Iterable[str]) -> None:
        """Replace the declared external inputs."""
        self._set_externals(list(as_names(names, "external_inputs")), None)

    def set_external_outputs(self, names: Iterable[str]) -> None:
        """Replace the declared external outputs."""
        self._set_externals(None, list(as_names(names, "external_outputs")))

    def _set_externals(
        self,
        inputs: Sequence[str] | None,
        outputs: Sequence[str] | None,
        initializers: dict[str, Tensor] | None = None,
        types: dict[str, ValueType] | None = None,
    ) -> None:
        """Replace external lists, initializers or types (``None``: unchanged); the ops'
        use-def stays valid, and the view is derived."""
        view: SSAView | None = self._current("ssa")
        carry = self._current(_SSA_CARRY)
        usedef = self._current_usedef()
        if inputs is not None:
            self._external_inputs = tuple(inputs)
        if outputs is not None:
            self._external_outputs = tuple(outputs)
        if initializers is not None:  # the edit's own dict, its tensors checked as staged
            self._initializers = initializers
        if types is not None:
            self._types = types
        self._bump()
        if view is not None:
            self._memo[_SSA_CARRY] = (self.revision, view.with_externals)
        elif carry is not None:
            self._memo[_SSA_CARRY] = (self.revision, carry)
        if usedef is not None:
            self._memo[_USEDEF] = (self.revision, usedef)

    def set_device_option(self, device_option: DeviceOption | None) -> None:
        """Set (or with ``None`` clear) the net-wide DeviceOption."""
        self._device_option = device_option
        self._bump()

    def set_name(self, name: str | None) -> None:
        """Set (or with ``None`` clear) the net's name."""
        self._name = name
        self._bump()

    # -- transactions -------------------------------------------------------------------------

    def snapshot(self) -> _NetState:
        """Capture this net's state so that ``restore`` can undo any later mutation."""
        nested = [
            net.snapshot()
            for index in sorted(self.nested_op_indices())
            for _, net in self._ops[index].nested_nets()
        ]
        # The op list, the header, initializers and types are immutable or only ever replaced,
        # never mutated, like the external lists: the state shares them.
        return _NetState(
            self._ops,
            self._external_inputs,
            self._external_outputs,
            self._initializers,
            self._types,
            self._name,
            self._device_option,
            self.revision,
            nested,
            self,
        )

    def restore(self, state: _NetState) -> None:
        """Put the net back exactly as it was when ``state`` was taken."""
        self._ops = state.ops
        self._external_inputs = state.external_inputs
        self._external_outputs = state.external_outputs
        self._initializers = state.initializers
        self._types = state.types
        self._name = state.name
        self._device_option = state.device_option
        self.revision = state.revision
        self._memo = {}  # revision numbers repeat after a restore: drop every cached analysis
        for nested_state in state.nested:
            nested_state.net.restore(nested_state)
        self._adopt(self._ops)

    def __repr__(self) -> str:
        return f"<Net {self.name!r}: {len(self._ops)} ops, revision {self.revision}>"


_SSA_CARRY = "ssa-carry"
_USEDEF = "usedef"
_OVERLAY_OPS = 4096
"""New ops an overlay may hold before an edit derives the whole view instead."""
_OUTPUTS = operator.attrgetter("outputs")


_STATE = operator.attrgetter("_state")


def _nested_op_indices(net: Net) -> frozenset[int]:
    """Indices of ``net``'s ops holding nets in arguments."""
    # Ops loaded from a file whose probe found no nested net say so in a flag: check the
    # flags in C first, and ask each op only when some flag is unknown or set.
    flags = [state[0] for state in map(_STATE, net._ops)]
    if True not in flags and None not in flags:
        return frozenset()
    return frozenset(i for i, op in enumerate(net._ops) if op.has_nested_nets())


def _control_op_indices(net: Net) -> frozenset[int]:
    """Indices of ``net``'s ops listing control inputs (checked like ``_nested_op_indices``)."""
    flags = [state[1] for state in map(_STATE, net._ops)]
    if True not in flags and None not in flags:
        return frozenset()
    return frozenset(i for i, op in enumerate(net._ops) if op.has_control_inputs())


def _build_ssa(net: Net) -> SSAView:
    """``net``'s view: derived from the previous revision's when an edit left a way to, else
    built from scratch."""
    carry = net._current(_SSA_CARRY)
    if carry is not None:
        derived: SSAView = carry(net)
        return derived
    overlay: Overlay | None = net._current(_USEDEF)
    if overlay is not None:
        return SSAView.derive(overlay.base, net, overlay.layout)
    return SSAView.build(net, list(net._initializers))


@dataclass
class _NetState:
    ops: OpList[Op]
    external_inputs: tuple[str, ...]
    external_outputs: tuple[str, ...]
    initializers: dict[str, Tensor]
    types: dict[str, ValueType]
    name: str | None
    device_option: DeviceOption | None
    revision: int
    nested: list[_NetState]
    net: Net


@dataclass
class Model:
    """A model in one dialect: a Caffe2 init_net/predict_net pair, or an ONNX model (its graph is
    the predict_net; there is no init_net, its initializers hold the parameters).

    Attributes:
        predict_net: the computation (an ONNX model's main graph).
        init_net: the net that fills the parameters, or ``None`` (always for ONNX).
        predict_path / init_path: the files the nets came from, when loaded from disk.
        text: whether the model was loaded from text format (``save`` writes it back as text).
        init_text: whether the init_net was loaded from text, when it differs from ``text``
            (``None``: as ``text``); each file of a pair keeps its own format.
        opset_imports: ``{domain: version}`` of an ONNX model (``""`` is the default domain);
            empty for Caffe2. Replace it, never mutate it.
        header: the codec's record of the model beyond its nets and opsets (an ONNX
            ModelProto without its graph and opset imports: IR version, producer, functions,
            metadata); ``None`` for Caffe2 and for models built in Python. Replace it, never
            mutate it.
    """

    predict_net: Net
    init_net: Net | None = None
    predict_path: Path | None = None
    init_path: Path | None = None
    text: bool = False
    init_text: bool | None = None
    opset_imports: Mapping[str, int] = field(default_factory=dict)
    header: Any = None

    @property
    def dialect(self) -> str:
        """The model's dialect (its predict_net's)."""
        return self.predict_net.dialect

    def nets(self) -> list[Net]:
        """The init_net (when present) and the predict_net, in execution order."""
        return [net for net in (self.init_net, self.predict_net) if net is not None]

    @property
    def revision(self) -> tuple[int, ...]:
        """Changes whenever either net changes, or is replaced by another ``Net`` object, and
        when the opset imports or the header are replaced.

        ``(id(predict_net), its revision, id(init_net), its revision, id(opset_imports),
        id(header))``; ids tell a replaced object apart from the original even when both nets
        are at the same revision number.
        """
        init = self.init_net
        return (
            id(self.predict_net),
            self.predict_net.revision,
            id(init),
            -1 if init is None else init.revision,
            id(self.opset_imports),
            id(self.header),
        )

    def snapshot(self) -> ModelState:
        """Capture both nets (which objects they are, and their content), the opset imports
        and the header, for ``restore``."""
        return ModelState(
            self.predict_net.snapshot(),
            None if self.init_net is None else self.init_net.snapshot(),
            self.opset_imports,
            self.header,
        )

    def restore(self, state: ModelState) -> None:
        """Undo every change made since ``state`` was taken, reassigned nets included."""
        self.predict_net = state.predict.net
        self.predict_net.restore(state.predict)
        self.init_net = None if state.init is None else state.init.net
        if state.init is not None:
            state.init.net.restore(state.init)
        self.opset_imports = state.opset_imports
        self.header = state.header

    def copy(self) -> Model:
        """An independent deep copy with the same paths."""
        return Model(
            self.predict_net.copy(),
            None if self.init_net is None else self.init_net.copy(),
            self.predict_path,
            self.init_path,
            self.text,
            self.init_text,
            dict(self.opset_imports),
            self.header,
        )


def expect_model(value: object, caller: str) -> Model:
    """``value``, when it is a ``Model``; otherwise an ``InvalidArgumentError`` saying that
    ``caller`` (a public function's name) takes one and how to make one of what was given
    (an ``onnx.ModelProto``, NetDefs, a ``Net``, a path)."""
    if isinstance(value, Model):
        return value
    kind = type(value).__name__
    if kind == "ModelProto":
        how = "graphtools.serde.onnx_codec.model_from_onnx_bytes(proto.SerializeToString())"
    elif kind == "NetDef":
        how = "graphtools.serde.codec.model_from_netdefs(predict_net, init_net)"
    elif isinstance(value, Net):
        how = "Model(net)"
    else:
        how = "graphtools.load_model(path)"
    raise InvalidArgumentError(
        f"{caller} takes a graphtools Model, not a {kind}: make one with {how}"
    )


@dataclass(frozen=True)
class ModelState:
    """What ``Model.snapshot`` captured."""

    predict: _NetState
    init: _NetState | None
    opset_imports: Mapping[str, int]
    header: Any

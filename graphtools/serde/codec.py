"""The NetDef codec: NetDef messages and bytes <-> the IR (``graphtools.ir``), losslessly.

Loading keeps what the IR does not model. Each op of a loaded net decodes its fields beyond
``type``/``inputs``/``outputs`` from a *source* on first access: the bytes a file was loaded
from (``_RawSource``: a binary net is read a chunk of ops at a time, its messages never all
built; see ``graphtools.serde.op_bytes``), or the messages of a NetDef the caller handed over
(``_MessageSource``). Writing back, an op nothing changed is its source message, or its
loaded bytes (runs of them are slices of the file); a changed op is its source message with
the changed fields rewritten, so unknown fields, argument order and nested nets survive and
an unchanged net re-serialises byte for byte. No name is interned (``sys.intern``): at 10^6
ops interning the external lists cost 1.2 s of a 6.7 s load and saved 43 MB.

One scan of the net's bytes (``graphtools.serde.check.probe_netdef``, which also validates every
string and the nesting depth) tells whether any op holds a nested net or lists control inputs,
so that a million-op net needs no per-op probe.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

from google.protobuf import unknown_fields

from graphtools._core import is_text_step_net
from graphtools._gc import paused_gc
from graphtools.ir import (
    LAZY_OP_FIELDS,
    Argument,
    DeviceOption,
    Model,
    NameOrder,
    Net,
    Op,
    OpSource,
)
from graphtools.proto import caffe2_pb2, netdef_lite_pb2
from graphtools.serde.check import NetProbe, probe_netdef
from graphtools.serde.op_bytes import OpBytes, read_ops, tagged_ops

__all__ = [
    "OperatorSource",
    "argument_from_proto",
    "argument_to_proto",
    "as_net",
    "device_option_to_proto",
    "model_from_netdefs",
    "net_from_bytes",
    "net_from_netdef",
    "net_to_netdef",
    "op_bytes_reusing_loaded",
    "op_from_proto",
    "op_to_proto",
    "serialize_net",
]

NetDef = caffe2_pb2.NetDef
OperatorDef = caffe2_pb2.OperatorDef

_SCALAR_OP_FIELDS = frozenset(
    ("name", "engine", "is_gradient_op", "debug_info", "domain", "op_version")
)
# Net-level fields kept as they were loaded unless a rewrite replaces them.
_NET_HEADER_FIELDS = ("name", "type", "num_workers", "device_option", "arg", "partition_info")


def device_option_to_proto(
    device: DeviceOption, msg: caffe2_pb2.DeviceOption | None = None
) -> caffe2_pb2.DeviceOption:
    """Encode ``device`` into ``msg`` (a new message when ``None``) and return it."""
    msg = caffe2_pb2.DeviceOption() if msg is None else msg
    for name in DeviceOption.FIELDS:
        value = getattr(device, name)
        if value is not None:
            setattr(msg, name, value)
    msg.extra_info.extend(device.extra_info)
    return msg


# -- arguments --------------------------------------------------------------------------------


def argument_from_proto(msg: caffe2_pb2.Argument, parent: Net | None = None) -> Argument:
    """Decode an Argument message; nested nets become IR nets owned by ``parent``."""
    return Argument(
        name=msg.name if msg.HasField("name") else None,
        f=msg.f if msg.HasField("f") else None,
        i=msg.i if msg.HasField("i") else None,
        s=msg.s if msg.HasField("s") else None,
        t=msg.t if msg.HasField("t") else None,
        n=net_from_netdef(msg.n, parent) if msg.HasField("n") else None,
        floats=tuple(msg.floats),
        ints=tuple(msg.ints),
        strings=tuple(msg.strings),
        tensors=tuple(msg.tensors),
        nets=tuple(net_from_netdef(n, parent) for n in msg.nets),
        qtensors=tuple(msg.qtensors),
    )


def argument_to_proto(
    argument: Argument, msg: caffe2_pb2.Argument | None = None
) -> caffe2_pb2.Argument:
    """Encode ``argument`` into ``msg`` (a new message when ``None``) and return it."""
    msg = caffe2_pb2.Argument() if msg is None else msg
    for name in ("name", "f", "i", "s"):
        value = getattr(argument, name)
        if value is not None:
            setattr(msg, name, value)
    if argument.t is not None:
        msg.t.CopyFrom(argument.t)
    if argument.n is not None:
        msg.n.CopyFrom(net_to_netdef(argument.n))
    msg.floats.extend(argument.floats)
    msg.ints.extend(argument.ints)
    msg.strings.extend(argument.strings)
    msg.tensors.extend(argument.tensors)
    msg.nets.extend(net_to_netdef(net) for net in argument.nets)
    msg.qtensors.extend(argument.qtensors)
    return msg


# -- op sources -------------------------------------------------------------------------------


class OperatorSource(Protocol):
    """An op source (``graphtools.ir.OpSource``) that gives each of its ops' OperatorDef: the
    codec's own, and the fill ops ``graphtools.serde.array_fills`` makes from arrays. An op
    nothing changed is written as its source's message."""

    def message(self, index: int) -> OperatorDef:
        """The OperatorDef of op ``index``."""
        ...


def _decode_field(msg: OperatorDef, key: str, parent: Net | None) -> Any:
    """One of ``LAZY_OP_FIELDS`` of ``msg``, as the IR holds it."""
    if key in _SCALAR_OP_FIELDS:
        return getattr(msg, key) if msg.HasField(key) else None
    if key == "device_option":
        return DeviceOption.from_proto(msg.device_option) if msg.HasField(key) else None
    if key == "control_inputs":
        return tuple(msg.control_input)
    if key == "args":
        return tuple(argument_from_proto(a, parent) for a in msg.arg)
    raise KeyError(key)


def _holds_nets(msg: OperatorDef) -> bool:
    return any(
        a.HasField("n") or len(a.nets) or is_text_step_net(msg.type, a.name, a.s) for a in msg.arg
    )


class _MessageSource:
    """The ops of a NetDef the caller handed over: each decodes from its own message, which
    is kept (not copied) as the caller's code expects."""

    __slots__ = ("_messages",)

    def __init__(self, messages: list[OperatorDef]) -> None:
        self._messages = messages

    def message(self, index: int) -> OperatorDef:
        return self._messages[index]

    def decode(self, index: int, key: str, parent: Net | None) -> Any:
        return _decode_field(self._messages[index], key, parent)

    def has_nested_nets(self, index: int) -> bool:
        return _holds_nets(self._messages[index])

    def encoded(self, index: int) -> bytes | None:
        return None  # the caller's messages, which it may change


class _RawSource:
    """The bytes a net was loaded from (``op_bytes.OpBytes``): an op decodes its message from
    them when first asked for a field the IR does not keep, and an op nothing changed is saved
    as its bytes."""

    __slots__ = ("_messages", "ops")

    def __init__(self, ops: OpBytes) -> None:
        self.ops = ops
        self._messages: dict[int, OperatorDef] = {}

    def decoded(self, index: int) -> bool:
        """Whether op ``index``'s message has been decoded (and is kept)."""
        return index in self._messages

    def message(self, index: int) -> OperatorDef:
        found = self._messages.get(index)
        if found is None:
            found = self._messages[index] = OperatorDef.FromString(self.ops.message(index))
        return found

    def decode(self, index: int, key: str, parent: Net | None) -> Any:
        return _decode_field(self.message(index), key, parent)

    def has_nested_nets(self, index: int) -> bool:
        return _holds_nets(self.message(index))

    def encoded(self, index: int) -> bytes | None:
        return self.ops.message(index)


def _source_message(op: Op) -> OperatorDef | None:
    found = op.source()
    if found is None:
        return None
    source, index = found
    message = getattr(source, "message", None)  # an OperatorSource (a Protocol check is slow)
    if message is None:
        raise TypeError(f"op {op.type!r} comes from {type(source).__name__}, not a NetDef")
    return message(index)


# -- ops ----------------------------------------------------------------------------------------


def op_from_proto(msg: OperatorDef, parent: Net | None = None) -> Op:
    """Wrap an OperatorDef as an IR op; the message is kept (not copied) as its source."""
    (op,) = Op.wrap_loaded((msg,), parent, _MessageSource([msg]), nested=None, control=None)
    return op


def op_to_proto(op: Op) -> OperatorDef:
    """The OperatorDef for ``op`` (its source message itself when nothing changed)."""
    source = _source_message(op)
    changed = op.changed_fields()
    if source is not None and not changed:
        return source
    msg = OperatorDef()
    if source is not None:
        msg.CopyFrom(source)
    if "type" in changed:
        msg.type = op.type
    if "inputs" in changed:
        del msg.input[:]
        msg.input.extend(op.inputs)
    if "outputs" in changed:
        del msg.output[:]
        msg.output.extend(op.outputs)
    for key in LAZY_OP_FIELDS:
        if key not in changed:
            continue
        value = getattr(op, key)
        if key in _SCALAR_OP_FIELDS:
            if value is None:
                msg.ClearField(key)
            else:
                setattr(msg, key, value)
        elif key == "device_option":
            msg.ClearField("device_option")
            if value is not None:
                device_option_to_proto(value, msg.device_option)
        elif key == "control_inputs":
            del msg.control_input[:]
            msg.control_input.extend(value)
        else:
            del msg.arg[:]
            for argument in value:
                argument_to_proto(argument, msg.arg.add())
    return msg


def op_bytes_reusing_loaded(
    ops: Iterable[Op],
    loaded_bytes: Callable[[OpSource], list[bytes] | None],
    serialize: Callable[[Op], bytes],
) -> list[bytes]:
    """Each op's serialised OperatorDef: ``loaded_bytes(source)[index]`` for an op exactly as
    loaded and known at load to hold no nested net (which nothing could have edited), else
    ``serialize(op)``. The save of a 10^6-op net walks every op here, so the test reads the
    op's slots inline (the codec is the IR's friend here: a call per op would cost seconds)."""
    found: list[bytes] = []
    append = found.append
    current: OpSource | None = None
    current_bytes: list[bytes] | None = None
    for op in ops:
        source = op._source
        state = op._state
        if source is not None and state[0] is False and not state[2]:
            if source is not current:
                current, current_bytes = source, loaded_bytes(source)
            if current_bytes is not None:
                append(current_bytes[op._index])
                continue
        append(serialize(op))
    return found


def _write_op_fields(ops: Iterable[Op], write: Callable[[Any], object]) -> None:
    """Write the net's ``op`` fields, in order: each run of ops exactly as loaded (and known at
    load to hold no nested net, which nothing could have edited) as one slice of the loaded
    bytes, and each run of other ops serialised. The save of a 10^6-op net walks every op
    here, so the op's slots are read inline (the codec is the IR's friend, as in
    ``op_bytes_reusing_loaded``)."""
    serialized: list[bytes] = []
    source: _RawSource | None = None
    read: dict[int, _RawSource] = {}  # the sources read from, checked once each
    first = end = 0
    for op in ops:
        found = op._source
        state = op._state
        if found.__class__ is _RawSource and state[0] is False and not state[2]:
            index = op._index
            if found is source and index == end:
                end += 1
                continue
            if source is not None:
                source.ops.write_tagged(first, end, write)
            elif serialized:
                write(tagged_ops(serialized))
                serialized = []
            if id(found) not in read:
                found.ops.check()
                read[id(found)] = found
            source, first, end = found, index, index + 1
        else:
            if source is not None:
                source.ops.write_tagged(first, end, write)
                source = None
            serialized.append(_serialized_op(op))
    if source is not None:
        source.ops.write_tagged(first, end, write)
    elif serialized:
        write(tagged_ops(serialized))
    for found in read.values():
        found.ops.release_read()


def _serialized_op(op: Op) -> bytes:
    return op_to_proto(op).SerializePartialToString()


# -- nets ---------------------------------------------------------------------------------------


def _probe_flags(probe: NetProbe) -> tuple[bool | None, bool | None]:
    """The "holds nested nets" and "lists control inputs" flags the ops of a net start with:
    ``False`` when the probe found no op that does (which is certain), ``None`` when some op
    does (each op then finds out for itself when first asked)."""
    return (None if probe.nested else False), (None if probe.control else False)


def _header_of(netdef: NetDef) -> NetDef:
    """``netdef`` without its ops and external lists, unknown fields included."""
    header = NetDef()
    if len(unknown_fields.UnknownFieldSet(netdef)):
        # Rare: fields this schema does not know survive only through a copy of the message.
        header.CopyFrom(netdef)
        for name in ("op", "external_input", "external_output"):
            header.ClearField(name)
        return header
    for name in _NET_HEADER_FIELDS:
        if name in ("arg", "partition_info"):
            getattr(header, name).extend(getattr(netdef, name))
        elif netdef.HasField(name):
            if name == "device_option":
                header.device_option.CopyFrom(netdef.device_option)
            else:
                setattr(header, name, getattr(netdef, name))
    return header


def header_from_raw(raw: netdef_lite_pb2.NetDefWithRawOps) -> NetDef:
    """The NetDef header (``_header_of``) of a net parsed as ``NetDefWithRawOps``, whose
    fields have NetDef's numbers (so the same fields are unknown to both)."""
    header = netdef_lite_pb2.NetDefWithRawOps()
    if len(unknown_fields.UnknownFieldSet(raw)):
        header.CopyFrom(raw)  # rare: unknown fields survive only through a copy
        for name in ("op", "external_input", "external_output"):
            header.ClearField(name)
    else:
        for name in ("name", "type", "num_workers", "device_option"):
            if raw.HasField(name):
                setattr(header, name, getattr(raw, name))
        header.arg.extend(raw.arg)
        header.partition_info.extend(raw.partition_info)
    return NetDef.FromString(header.SerializePartialToString())


def net_from_netdef(
    netdef: NetDef,
    parent: Net | None = None,
    *,
    serialized: bytes | None = None,
    probe: NetProbe | None = None,
) -> Net:
    """Build the IR of ``netdef``; without ``serialized``, the ops keep its messages.

    ``serialized``, when given, must be the bytes ``netdef`` was parsed from: the net is then
    ``net_from_bytes(serialized)`` and keeps no reference to ``netdef`` (a loader's parsed
    message, most of the memory a big net takes, can be freed). ``parent`` is the net holding
    this one in an argument (its revision follows this net's edits). ``probe`` is what
    ``check.probe_netdef`` found in the net's bytes, when the caller scanned them already.

    Raises:
        SerdeError: a string of the net is not UTF-8, or its nets nest too deep.
    """
    if serialized is not None:
        return net_from_bytes(serialized, parent, probe=probe)
    if probe is None:
        probe = probe_netdef(netdef.SerializePartialToString(), netdef)
    nested, control = _probe_flags(probe)
    messages = netdef.op[:]  # the caller's message: its ops keep their messages, as given
    source = _MessageSource(messages)
    header = _header_of(netdef)
    return Net.loaded(
        lambda net: Op.wrap_loaded(messages, net, source, nested=nested, control=control),
        list(netdef.external_input),
        list(netdef.external_output),
        header,
        lambda net: tuple(argument_from_proto(a, net) for a in header.arg),
        parent,
        name=header.name if header.HasField("name") else None,
        device_option=_device_of(header),
    )


def net_from_bytes(
    data: bytes,
    parent: Net | None = None,
    *,
    probe: NetProbe | None = None,
    raw: netdef_lite_pb2.NetDefWithRawOps | None = None,
    file: str | Path | None = None,
    names_of: Sequence[str] = (),
) -> Net:
    """The IR of a binary NetDef, without building its messages: the net keeps ``data``, its
    ops decode their messages from it when first needed, and unchanged ops are saved as their
    bytes (``graphtools.serde.op_bytes``).

    ``probe`` is what ``check.probe_netdef`` found in ``data`` and ``raw`` is ``data`` parsed
    as ``NetDefWithRawOps``, when the caller has them already. ``file`` is the file ``data``
    was read from: a large one is then kept as a map of the file, not as ``data``
    (``graphtools.serde.mapped_file``). ``names_of``: the declared outputs of a net loaded
    before (the init_net's, for its predict_net), whose strings the net's declared inputs
    share where they list them in the same order (``ir.NameOrder``; the ops share the
    declared names).

    Raises:
        SerdeError: a string of the net is not UTF-8, or its nets nest too deep.
        google.protobuf.message.DecodeError: ``data`` is not protobuf.
    """
    if raw is None:
        raw = netdef_lite_pb2.NetDefWithRawOps.FromString(data)
    if probe is None:
        probe = probe_netdef(data)
    nested, control = _probe_flags(probe)
    header = header_from_raw(raw)
    chunks, layout = read_ops(raw, data)
    source = _RawSource(layout)
    external_inputs = shared_names(raw.external_input, names_of)
    external_outputs = tuple(raw.external_output)
    order = NameOrder(chain(external_inputs, external_outputs))

    def make_ops(net: Net) -> list[Op]:
        ops: list[Op] = []
        for first, records in chunks:
            ops += Op.wrap_loaded(
                records, net, source, nested=nested, control=control, start=first, order=order
            )
        return ops

    net = Net.loaded(
        make_ops,
        external_inputs,
        external_outputs,
        header,
        lambda net: tuple(argument_from_proto(a, net) for a in header.arg),
        parent,
        name=header.name if header.HasField("name") else None,
        device_option=_device_of(header),
    )
    if file is not None:
        layout.keep_mapped(file)
    return net


def shared_names(names: Iterable[str], known: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a list whose entries are the strings of ``known`` where ``known`` lists
    the same names in the same order, starting within ``names``' first 16 entries (a
    predict_net declares its data inputs, then the parameters its init_net fills)."""
    found = list(names)
    if not known or not found:
        return tuple(found)
    first = known[0]
    offset = next((i for i in range(min(len(found), 16)) if found[i] == first), None)
    if offset is None:
        return tuple(found)
    end = min(len(found), offset + len(known))
    found[offset:end] = [b if a == b else a for a, b in zip(found[offset:end], known, strict=False)]
    return tuple(found)


def _device_of(header: NetDef) -> DeviceOption | None:
    if not header.HasField("device_option"):
        return None
    return DeviceOption.from_proto(header.device_option)


def _header_message(net: Net) -> NetDef:
    """The net's header as a NetDef: the loaded one (unknown fields included), with the name
    and device option the net holds now."""
    header = net.header if net.header is not None else NetDef()
    name, device = net.name, net.device_option
    loaded_name = header.name if header.HasField("name") else None
    loaded_device = (
        DeviceOption.from_proto(header.device_option) if header.HasField("device_option") else None
    )
    if name == loaded_name and device == loaded_device:
        return header
    changed = NetDef()
    changed.CopyFrom(header)
    if name is None:
        changed.ClearField("name")
    else:
        changed.name = name
    changed.ClearField("device_option")
    if device is not None:
        device_option_to_proto(device, changed.device_option)
    return changed


def _header_bytes(net: Net) -> bytes:
    """The net's header, serialised; net-level arguments re-encoded when they hold nets."""
    header = _header_message(net)
    if not any(argument.nested_nets() for argument in net.args):
        return header.SerializePartialToString()
    rebuilt = NetDef()
    rebuilt.CopyFrom(header)
    del rebuilt.arg[:]
    for argument in net.args:
        argument_to_proto(argument, rebuilt.arg.add())
    return rebuilt.SerializePartialToString()


def serialize_net(net: Net) -> bytes:
    """The binary NetDef of ``net``: the message ``net_to_netdef`` gives, serialised.

    The ops are joined as bytes instead of being copied into a new NetDef message, and ops
    loaded from a binary file that nothing changed are written as the bytes they were loaded
    with (so an unchanged net re-saves byte for byte, even where its writer encoded fields in
    a non-canonical way). Protobuf writes fields by number: the name (1), the ops (2), then
    the rest of the header and the external lists.
    """
    rest = netdef_lite_pb2.NetDefWithRawOps.FromString(_header_bytes(net))
    name = b""
    if rest.HasField("name"):
        name = netdef_lite_pb2.NetDefWithRawOps(name=rest.name).SerializePartialToString()
        rest.ClearField("name")
    rest.external_input.extend(net.external_inputs)
    rest.external_output.extend(net.external_outputs)
    out = io.BytesIO()
    out.write(name)
    with paused_gc():
        _write_op_fields(net, out.write)
    out.write(rest.SerializePartialToString())
    return out.getvalue()


def _undecoded_loaded_op(net: Net) -> bool:
    for op in net:
        found = op.source()
        if found is not None:
            source, index = found
            if isinstance(source, _RawSource) and not source.decoded(index):
                return True
    return False


def net_to_netdef(net: Net) -> NetDef:
    """A new NetDef message holding ``net``; unchanged parts are copied as loaded."""
    if _undecoded_loaded_op(net):
        # Loaded ops not decoded yet: parsing the saved bytes once is faster than decoding
        # each op, and leaves the ops as lean as they were.
        return NetDef.FromString(serialize_net(net))
    netdef = NetDef.FromString(_header_bytes(net))
    with paused_gc():
        netdef.op.extend([op_to_proto(op) for op in net])
    netdef.external_input.extend(net.external_inputs)
    netdef.external_output.extend(net.external_outputs)
    return netdef


# -- what drop-in functions accept --------------------------------------------------------------


def model_from_netdefs(predict_net: NetDef, init_net: NetDef | None = None) -> Model:
    """Wrap NetDef messages as a ``Model`` (they are referenced, not copied, until a rewrite)."""
    return Model(
        net_from_netdef(predict_net),
        None if init_net is None else net_from_netdef(init_net),
    )


def as_net(net: Net | NetDef | Any) -> Net:
    """The IR of ``net``: an IR ``Net`` as is, a ``NetDef`` converted, a Caffe2 ``core.Net``
    through its ``Proto()``. Lets the drop-in functions accept what upstream accepted."""
    if isinstance(net, Net):
        return net
    if isinstance(net, NetDef):
        return net_from_netdef(net)
    proto = getattr(net, "Proto", None)
    if callable(proto):
        return as_net(proto())
    raise TypeError(f"expected a graphtools Net or a NetDef, got {type(net).__name__}")

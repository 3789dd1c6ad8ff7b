"""Load-time validation of a NetDef's bytes: complete, linear, and mostly at C speed.

Checked, at every depth: every string the IR turns into ``str`` (op types, blob names, argument
names, net names, external lists, device names, tensor names) is UTF-8; nets nest no deeper than
``MAX_NESTING``; step nets given as text in a string argument (``RecurrentNetwork``'s
``step_net``) parse as NetDefs and pass the same checks. A failure is a ``SerdeError`` naming the
file, the net, the op index and type, and the field.

How: ``proto/netdef_check.proto`` reads one nesting level of a net in one C-level parse, every op
merged into one message (so nothing is allocated per op) while each string is validated as UTF-8
(proto3 strings are; proto2 strings are not: protobuf hands invalid ones back as ``bytes``, which
then break sorting, printing and saving far from the file). The nested nets of a level, joined,
are the next level: the depth is counted without recursion, so a net nested deeper than
protobuf's own limit is measured and refused by name instead of failing to decode. Only when a
check fails is the net walked in Python, to say where. Step nets given as text are looked for
only in ops whose bytes mention ``step_net``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import message, text_format

from graphtools.errors import SerdeError
from graphtools.proto import caffe2_pb2, netdef_check_pb2, netdef_lite_pb2

__all__ = [
    "MAX_NESTING",
    "STEP_NET_ARGUMENTS",
    "NetProbe",
    "nesting_depth",
    "probe_netdef",
    "step_net_from_text",
    "too_deep",
]

MAX_NESTING = 16
"""How deep nets may nest (a top-level net is depth 0, the ``then_net`` of its ``If`` depth 1).

Real exports nest two or three deep. Protobuf itself refuses binary messages nested more than
100 deep, which a NetDef reaches at about 33 nets (a net, an op and an argument per level), and
its text parser overflows Python's stack near 140; 16 leaves room for tensors in the deepest
arguments and for step nets given as text, which protobuf does not see as nesting.
"""

STEP_NET_ARGUMENTS = frozenset({"step_net", "backward_step_net"})
"""Arguments whose string value is a NetDef in text format (Caffe2's ``RecurrentNetwork``)."""

_STEP_MARK = b"step_net"

_Whole = Callable[[], caffe2_pb2.NetDef]


@dataclass(frozen=True)
class NetProbe:
    """What one scan of a net's bytes found.

    Attributes:
        nested: whether an op of the net holds a nested net (``Argument.n`` or ``.nets``, or
            a step net as text).
        control: whether an op of the net lists control inputs.
        depth: how deep nets nest inside it (0: none), step nets given as text included.
    """

    nested: bool
    control: bool
    depth: int


def probe_netdef(
    data: bytes, netdef: caffe2_pb2.NetDef | None = None, path: str | Path | None = None
) -> NetProbe:
    """Validate a serialized NetDef (see the module docstring) and say what it holds.

    Args:
        data: the NetDef's wire bytes.
        netdef: the message parsed from ``data``, when the caller has it (spares a parse on
            the error path and for step nets).
        path: the file, for error messages.

    Raises:
        SerdeError: a string is not UTF-8, nets nest too deep, or a step net is bad.
    """
    top = _level(data, lambda: _parsed(data, netdef), path)
    nested = len(top.op.arg.n) > 0 or len(top.op.arg.nets) > 0
    control = top.op.HasField("control_input")
    depth = _nested_depth(top, data, netdef, path)
    if _STEP_MARK in data:
        steps = _step_net_depth(data, netdef, path)
        nested = nested or steps > 0  # a step net given as text is a nested net too
        depth = max(depth, steps)
        if depth > MAX_NESTING:
            raise SerdeError(path, too_deep())
    return NetProbe(nested, control, depth)


def nesting_depth(data: bytes) -> int | None:
    """How deep the nets in ``data`` nest (counted up to ``MAX_NESTING + 1``), without
    protobuf's recursion limit.

    For telling a net nested too deep for protobuf from one that is not protobuf at all:
    ``None`` when ``data`` does not read as a NetDef even level by level.
    """
    try:
        level = netdef_check_pb2.NetLevel.FromString(data)
        depth = 0
        pending = _nested_bytes(level)
        while pending and depth <= MAX_NESTING:
            depth += 1
            pending = _nested_bytes(netdef_check_pb2.NetLevel.FromString(b"".join(pending)))
    except message.DecodeError:
        return None
    return depth


def step_net_from_text(
    value: bytes, where: str, path: str | Path | None = None
) -> caffe2_pb2.NetDef:
    """Parse a step net given as text (the ``s`` of a ``step_net`` argument) into a NetDef.

    ``where`` says which argument it is, for the ``SerdeError`` raised when it is not UTF-8 or
    does not parse.
    """
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SerdeError(path, f"{where}: the step net is not UTF-8 text ({exc})") from exc
    try:
        return text_format.Parse(text, caffe2_pb2.NetDef())
    except text_format.ParseError as exc:
        detail = str(exc).split(" : ", 1)[-1]
        raise SerdeError(
            path,
            f"{where}: the step net text does not parse at line {exc.GetLine()}, "
            f"column {exc.GetColumn()}: {detail}",
        ) from exc
    except RecursionError as exc:
        raise SerdeError(path, f"{where}: the step net nests too deep to parse") from exc


# -- levels -------------------------------------------------------------------------------------


def _parsed(data: bytes, netdef: caffe2_pb2.NetDef | None) -> caffe2_pb2.NetDef:
    """``netdef``, or the message parsed from ``data`` (callers have already parsed it once)."""
    return caffe2_pb2.NetDef.FromString(data) if netdef is None else netdef


def _level(data: bytes, whole: _Whole, path: str | Path | None) -> netdef_check_pb2.NetLevel:
    """One level's merged message; on a decoding failure, a ``SerdeError`` saying where."""
    try:
        return netdef_check_pb2.NetLevel.FromString(data)
    except message.DecodeError as exc:
        raise _bad_string_error(whole, path, exc) from None


def _nested_bytes(level: netdef_check_pb2.NetLevel) -> list[bytes]:
    """The nested nets one level holds (in op arguments and in net arguments)."""
    found: list[bytes] = []
    for arg in (level.op.arg, level.arg):
        found.extend(arg.n)
        found.extend(arg.nets)
    return found


def _nested_depth(
    top: netdef_check_pb2.NetLevel,
    data: bytes,
    netdef: caffe2_pb2.NetDef | None,
    path: str | Path | None,
) -> int:
    depth = 0
    pending = _nested_bytes(top)
    while pending:
        depth += 1
        if depth > MAX_NESTING:
            raise SerdeError(path, too_deep())
        level = _level(b"".join(pending), lambda: _parsed(data, netdef), path)
        pending = _nested_bytes(level)
    return depth


def too_deep(where: str = "") -> str:
    """The reason given for nets nested deeper than ``MAX_NESTING`` (``where`` prefixes it)."""
    return (
        f"{where}nets nest more than {MAX_NESTING} deep, graphtools' limit (MAX_NESTING in "
        "graphtools.serde.check; real exports nest two or three deep)"
    )


# -- step nets given as text ------------------------------------------------------------------


def _step_net_depth(data: bytes, netdef: caffe2_pb2.NetDef | None, path: str | Path | None) -> int:
    """Check every step net given as text; the depth the deepest one reaches (0: none).

    Only ops whose bytes mention ``step_net`` are decoded, so a big net pays one split of its
    bytes into ops and one substring search per op.
    """
    raw_ops = netdef_lite_pb2.NetDefWithRawOps.FromString(data).op
    whole = _parsed(data, netdef)
    label = _net_label(whole)
    marked = [index for index, raw in enumerate(raw_ops) if _STEP_MARK in raw]
    return _ops_step_depth(whole, marked, label, path)


def _ops_step_depth(
    net: caffe2_pb2.NetDef,
    indices: Iterable[int],
    label: str,
    path: str | Path | None,
) -> int:
    """The deepest step net among ``net``'s ops at ``indices`` and its net-level arguments."""
    deepest = 0
    for index in indices:
        op = net.op[index]
        where = f"op #{index} ({op.type}) of {label}"
        recurrent = "RecurrentNetwork" in op.type
        for arg in op.arg:
            deepest = max(deepest, _arg_step_depth(arg, where, path, recurrent=recurrent))
    for arg in net.arg:
        deepest = max(deepest, _arg_step_depth(arg, label, path, recurrent=False))
    return deepest


def _arg_step_depth(
    arg: caffe2_pb2.Argument, where: str, path: str | Path | None, *, recurrent: bool
) -> int:
    """Depth (from the net holding ``arg``) of the step nets in it and in its nested nets.

    A string argument is a step net only on a ``RecurrentNetwork`` op (other ops may use
    the name for anything).
    """
    deepest = 0
    label = f"argument {arg.name!r} of {where}"
    if recurrent and arg.name in STEP_NET_ARGUMENTS and arg.HasField("s"):
        step = step_net_from_text(arg.s, label, path)
        try:
            inner = probe_netdef(step.SerializePartialToString(), step).depth
        except SerdeError as exc:
            raise SerdeError(path, f"the step net in {label}: {exc.reason}") from exc
        deepest = 1 + inner
    for net in _arg_nets(arg):
        if _STEP_MARK in net.SerializePartialToString():
            inner = _ops_step_depth(net, range(len(net.op)), f"{_net_label(net)} in {label}", path)
            deepest = max(deepest, 1 + inner)
    if deepest > MAX_NESTING:
        raise SerdeError(path, too_deep(f"{label}: "))
    return deepest


def _arg_nets(arg: caffe2_pb2.Argument) -> list[caffe2_pb2.NetDef]:
    return ([arg.n] if arg.HasField("n") else []) + list(arg.nets)


# -- saying where a string is bad ---------------------------------------------------------------


def _net_label(net: caffe2_pb2.NetDef) -> str:
    name = net.name
    if isinstance(name, bytes):
        return f"net {name!r}"
    return f"net {name!r}" if name else "the unnamed net"


def _bad_string_error(whole: _Whole, path: str | Path | None, cause: Exception) -> SerdeError:
    try:
        netdef = whole()
    except message.DecodeError:
        return SerdeError(path, f"not a valid NetDef: {cause}")
    for where, field, value in _bad_strings(netdef, _net_label(netdef)):
        return SerdeError(path, f"{where}: {field} is not valid UTF-8 text ({value!r})")
    return SerdeError(path, f"not a valid NetDef: {cause}")


def _bad_strings(net: caffe2_pb2.NetDef, label: str) -> Iterator[tuple[str, str, bytes]]:
    """``(where, field, value)`` of each string field protobuf could not decode, in file order."""
    yield from _bad_in(label, "name", net.name)
    yield from _bad_in(label, "type", net.type)
    if net.HasField("device_option"):
        yield from _bad_device(label, "device_option", net.device_option)
    yield from _bad_args(label, net.arg)
    for index, op in enumerate(net.op):
        op_type = op.type
        where = f"op #{index} ({op_type if isinstance(op_type, str) else '?'}) of {label}"
        for field in ("type", "name", "engine", "debug_info", "domain"):
            yield from _bad_in(where, field, getattr(op, field))
        for field in ("input", "output", "control_input"):
            for position, value in enumerate(getattr(op, field)):
                yield from _bad_in(where, f"{field}[{position}]", value)
        if op.HasField("device_option"):
            yield from _bad_device(where, "device_option", op.device_option)
        yield from _bad_args(where, op.arg)
    for field in ("external_input", "external_output"):
        for position, value in enumerate(getattr(net, field)):
            yield from _bad_in(label, f"{field}[{position}]", value)
    for position, info in enumerate(net.partition_info):
        yield from _bad_in(label, f"partition_info[{position}].name", info.name)
        yield from _bad_in(label, f"partition_info[{position}].extra_info", info.extra_info)
        for b, backend in enumerate(info.backend_options):
            field = f"partition_info[{position}].backend_options[{b}]"
            yield from _bad_in(label, f"{field}.backend_name", backend.backend_name)
            for o, option in enumerate(backend.option):
                yield from _bad_in(label, f"{field}.option[{o}].key", option.key)
                yield from _bad_in(label, f"{field}.option[{o}].val", option.val)


def _bad_args(where: str, args: Iterable[caffe2_pb2.Argument]) -> Iterator[tuple[str, str, bytes]]:
    for position, arg in enumerate(args):
        name = arg.name
        if isinstance(name, bytes):
            yield where, f"the name of argument {position}", name
            continue
        field = f"argument {name!r}"
        tensors = ([arg.t] if arg.HasField("t") else []) + list(arg.tensors)
        names = [t.name for t in tensors] + [q.name for q in arg.qtensors]
        for tensor_name in names:
            yield from _bad_in(where, f"{field}: tensor name", tensor_name)
        for tensor in tensors:
            if tensor.HasField("device_detail"):
                yield from _bad_device(
                    where, f"{field}: tensor device_detail", tensor.device_detail
                )
        for net in _arg_nets(arg):
            yield from _bad_strings(net, f"{_net_label(net)} in {field} of {where}")


def _bad_device(
    where: str, field: str, device: caffe2_pb2.DeviceOption
) -> Iterator[tuple[str, str, bytes]]:
    yield from _bad_in(where, f"{field}.node_name", device.node_name)
    for position, value in enumerate(device.extra_info):
        yield from _bad_in(where, f"{field}.extra_info[{position}]", value)


def _bad_in(where: str, field: str, value: object) -> Iterator[tuple[str, str, bytes]]:
    if isinstance(value, bytes):
        yield where, field, value

"""Loading and saving single NetDef files, binary or text, detected by content.

``load_net`` refuses with a ``SerdeError`` naming the file and the reason whatever is not a
NetDef: an empty file (unless ``allow_empty``), truncated or random bytes, a PlanDef, a
TensorProtos file, an ONNX model, text that does not parse (with line and column), a string
that is not UTF-8 or nets nested too deep (``graphtools.serde.check``, naming the net, op and
field). Old text files that spell DeviceOption's field 2 ``cuda_gpu_id`` (before October 2018)
load as ``device_id``. Saving refuses (``SerdeError``) what the loader would refuse, so every
file graphtools writes loads again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from google.protobuf import message, text_format

from graphtools._core import CAFFE2, DIALECT_NAMES
from graphtools.errors import SerdeError
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2, netdef_lite_pb2
from graphtools.serde.atomic import atomic_write_bytes, recover_interrupted_write
from graphtools.serde.check import MAX_NESTING, NetProbe, nesting_depth, probe_netdef, too_deep
from graphtools.serde.codec import header_from_raw, net_from_bytes, net_to_netdef, serialize_net
from graphtools.serde.loaded_text import loaded_text
from graphtools.serde.sniff import (
    identify_binary,
    identify_text,
    implausible_netdef,
    implausible_parts,
    is_blank_data,
    looks_like_text,
)
from graphtools.serde.streams import read_stream_once

TEXT_SUFFIXES = frozenset({".pbtxt", ".prototxt", ".txt", ".textproto"})
_OLD_DEVICE_ID = re.compile(r"\bcuda_gpu_id(\s*:)")


def read_bytes(path: str | Path) -> bytes:
    """Read a file, turning OS errors into ``SerdeError`` naming it (a pipe once per command:
    ``graphtools.serde.streams``).

    A write into the file's folder that a killed graphtools process left half done is
    completed first (``atomic.recover_interrupted_write``), so a pair is never read mixed.
    """
    file = Path(path)
    recover_interrupted_write(file.parent)
    try:
        return read_stream_once(file)
    except OSError as exc:
        raise SerdeError(path, f"cannot read: {exc.strerror or exc}") from exc


def is_blank(path: str | Path) -> bool:
    """Whether the file holds nothing but whitespace (an empty file, as a failed download
    leaves): read only up to its first other byte, where ``read_bytes(path).strip()`` would
    read it all and copy it (a protobuf starts with a whitespace byte, the tag of field 1),
    1.6 s of a 10^6-op pair's ``run``; a pipe's bytes as ``read_bytes`` keeps them.

    Raises:
        SerdeError: the file cannot be read.
    """
    file = Path(path)
    if is_stream(file):
        data = read_bytes(file)
        return is_blank_data(data)
    recover_interrupted_write(file.parent)
    try:
        with file.open("rb") as handle:
            while chunk := handle.read(_BLANK_CHUNK):
                if not chunk.isspace():
                    return False
    except OSError as exc:
        raise SerdeError(path, f"cannot read: {exc.strerror or exc}") from exc
    return True


_BLANK_CHUNK = 1 << 16


def is_stream(path: str | Path) -> bool:
    """Whether ``path`` names something to read that is neither a regular file nor a folder
    (a pipe): it reads once (``read_bytes`` keeps what it gave)."""
    file = Path(path)
    return file.exists() and not file.is_file() and not file.is_dir()


def parse_netdef(
    data: bytes, path: str | Path | None = None, *, allow_empty: bool = False
) -> tuple[caffe2_pb2.NetDef, bool]:
    """Parse and validate ``data`` as a NetDef; returns ``(netdef, was_text)``.

    ``path`` only names the source in error messages.
    """
    netdef, was_text, _ = parse_and_probe(data, path, allow_empty=allow_empty)
    return netdef, was_text


def parse_and_probe(
    data: bytes, path: str | Path | None = None, *, allow_empty: bool = False
) -> tuple[caffe2_pb2.NetDef, bool, NetProbe]:
    """``parse_netdef``, also returning what validating it found (``check.NetProbe``), which
    spares the codec a second scan of the bytes."""
    if is_blank_data(data):
        if allow_empty:
            return caffe2_pb2.NetDef(), looks_like_text(data) and bool(data), _EMPTY
        raise SerdeError(path, "the file is empty (pass allow_empty=True if that is intended)")
    if looks_like_text(data):
        try:
            netdef = _parse_text(data.decode("utf-8-sig"), path)
        except SerdeError as text_error:
            # Tiny binary NetDefs can be printable (b"\n\nmodel_init" is a net's name).
            try:
                netdef = _parse_binary(data, path)
            except SerdeError:
                raise text_error from text_error.__cause__
            return netdef, False, probe_netdef(data, netdef, path)
        return netdef, True, probe_netdef(netdef.SerializePartialToString(), netdef, path)
    netdef = _parse_binary(data, path)
    return netdef, False, probe_netdef(data, netdef, path)


_EMPTY = NetProbe(nested=False, control=False, depth=0)


def binary_net(
    data: bytes, path: str | Path | None = None, names_of: Sequence[str] = ()
) -> Net | None:
    """``data`` as an IR net when it is plainly a valid binary NetDef, loaded without
    building its messages (``codec.net_from_bytes``: a full parse costs about seven times
    the file in memory); ``None`` for text and for anything ``parse_and_probe`` refuses,
    which then says why. ``names_of``: as ``net_from_bytes`` takes it."""
    if is_blank_data(data) or looks_like_text(data):
        return None
    try:
        raw = netdef_lite_pb2.NetDefWithRawOps.FromString(data)
        probe = probe_netdef(data, None, path)
        ops = raw.op
        problem = implausible_parts(
            header_from_raw(raw),
            len(ops),
            lambda index: caffe2_pb2.OperatorDef.FromString(ops[index]),
            raw.external_input,
            raw.external_output,
        )
    except (message.DecodeError, SerdeError):
        return None
    if problem is not None:
        return None
    return net_from_bytes(data, probe=probe, raw=raw, file=_regular_file(path), names_of=names_of)


def _regular_file(path: str | Path | None) -> Path | None:
    """``path`` when it names a regular file (whose bytes a net may map), else ``None``."""
    if path is None:
        return None
    file = Path(path)
    return file if file.is_file() else None


def _parse_binary(data: bytes, path: str | Path | None) -> caffe2_pb2.NetDef:
    netdef = caffe2_pb2.NetDef()
    try:
        netdef.ParseFromString(data)
    except message.DecodeError as exc:
        depth = nesting_depth(data)
        if depth is not None and depth > MAX_NESTING:
            raise SerdeError(path, too_deep()) from exc
        what = identify_binary(data)
        reason = (
            f"this is {what}"
            if what
            else "not a model: neither an ONNX model nor a binary Caffe2 NetDef (truncated, "
            f"or not protobuf: {exc})"
        )
        raise SerdeError(path, reason) from exc
    problem = implausible_netdef(netdef)
    if problem is not None:
        what = identify_binary(data)
        if what is None:
            probe_netdef(data, netdef, path)  # names the field when a string is the problem
        reason = f"this is {what}" if what else f"not a NetDef: {problem}"
        raise SerdeError(path, reason)
    return netdef


def _parse_text(text: str, path: str | Path | None) -> caffe2_pb2.NetDef:
    try:
        return text_format.Parse(text, caffe2_pb2.NetDef())
    except RecursionError as exc:
        raise SerdeError(
            path, f"messages nest too deep to parse (nets may nest {MAX_NESTING} deep)"
        ) from exc
    except text_format.ParseError as first:
        if _OLD_DEVICE_ID.search(text):
            try:
                return text_format.Parse(
                    _OLD_DEVICE_ID.sub(r"device_id\1", text), caffe2_pb2.NetDef()
                )
            except text_format.ParseError:
                pass
        what = identify_text(text)
        if what is not None:
            raise SerdeError(path, f"this is {what}") from first
        line, column = first.GetLine(), first.GetColumn()
        detail = str(first).split(" : ", 1)[-1]
        raise SerdeError(
            path, f"text NetDef does not parse at line {line}, column {column}: {detail}"
        ) from first


def load_net(path: str | Path, *, allow_empty: bool = False) -> caffe2_pb2.NetDef:
    """Load a NetDef from a binary or text file, telling which by content, not by extension."""
    return parse_netdef(read_bytes(path), path, allow_empty=allow_empty)[0]


def load_plan(path: str | Path) -> caffe2_pb2.PlanDef:
    """Load a Caffe2 PlanDef (training/test plan), binary or text."""
    data = read_bytes(path)
    plan = caffe2_pb2.PlanDef()
    try:
        if looks_like_text(data):
            text_format.Parse(_OLD_DEVICE_ID.sub(r"device_id\1", data.decode("utf-8-sig")), plan)
        else:
            plan.ParseFromString(data)
    except (text_format.ParseError, message.DecodeError, RecursionError) as exc:
        raise SerdeError(path, f"not a PlanDef: {exc}") from exc
    return plan


def netdef_bytes(
    net: caffe2_pb2.NetDef | Net, *, text: bool, path: str | Path | None = None
) -> bytes:
    """Serialise a NetDef (or IR net) as binary wire format or as protobuf text.

    Raises:
        SerdeError: the loader would refuse the result (nets nested deeper than
            ``check.MAX_NESTING``, a bad step net) or a name cannot be encoded (a lone
            surrogate); ``path`` names the file meant in the message; ``net`` is an ONNX
            graph.
    """
    if isinstance(net, Net) and net.dialect != CAFFE2:
        raise SerdeError(
            path,
            f"this is a graph of an {DIALECT_NAMES[net.dialect]} model, not a NetDef: save "
            "the model (graphtools.save_model(model, 'out.onnx'))",
        )
    try:
        if text:
            original = loaded_text(net) if isinstance(net, Net) else None
            if original is not None:
                return original  # unchanged since it was loaded from text: as it was
            netdef = net_to_netdef(net) if isinstance(net, Net) else net
            checked = _holds_nets(net)
            if checked:
                _check_writable(netdef.SerializePartialToString(), netdef, path)
            data = text_format.MessageToString(netdef).encode("utf-8")
            if not checked and _STEP_NET in data:
                _check_writable(netdef.SerializePartialToString(), netdef, path)
            return data
        data = serialize_net(net) if isinstance(net, Net) else net.SerializePartialToString()
        if _holds_nets(net) or _STEP_NET in data:
            _check_writable(data, None, path)
        return data
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise SerdeError(
            path, f"cannot write the name {exc.object!r}: {bad!r} is not text"
        ) from exc


_STEP_NET = b"step_net"


def _holds_nets(net: caffe2_pb2.NetDef | Net) -> bool:
    if not isinstance(net, Net):
        return True  # a caller's message: scanning it is the cheapest way to know
    return bool(net.nested_op_indices()) or any(a.nested_nets() for a in net.args)


def _check_writable(data: bytes, netdef: caffe2_pb2.NetDef | None, path: str | Path | None) -> None:
    try:
        probe_netdef(data, netdef)
    except SerdeError as exc:
        raise SerdeError(
            path, f"refusing to write what graphtools cannot load: {exc.reason}"
        ) from exc


def save_net(net: caffe2_pb2.NetDef | Net, path: str | Path, *, text: bool | None = None) -> Path:
    """Write ``net`` to ``path`` atomically (temporary file + rename; ``atomic.write_files``).

    ``text=None`` picks text format for ``.pbtxt``/``.prototxt``/``.txt`` names, binary otherwise.
    """
    target = Path(path)
    use_text = target.suffix.lower() in TEXT_SUFFIXES if text is None else text
    return atomic_write_bytes(target, netdef_bytes(net, text=use_text, path=target))

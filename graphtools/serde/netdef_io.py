"""Loading and saving single NetDef files, binary or text, detected by content.

``load_net`` refuses with a ``SerdeError`` naming the file and the reason whatever is not a
NetDef: an empty file (unless ``allow_empty``), truncated or random bytes, a PlanDef, a
TensorProtos file, an ONNX model, or text that does not parse (with line and column). Old text
files that spell DeviceOption's field 2 ``cuda_gpu_id`` (before October 2018) load as
``device_id``.
"""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import message, text_format

from graphtools.errors import SerdeError
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2
from graphtools.serde.atomic import atomic_write_bytes
from graphtools.serde.codec import net_to_netdef, serialize_net
from graphtools.serde.sniff import (
    identify_binary,
    identify_text,
    implausible_netdef,
    looks_like_text,
)

TEXT_SUFFIXES = frozenset({".pbtxt", ".prototxt", ".txt", ".textproto"})
_OLD_DEVICE_ID = re.compile(r"\bcuda_gpu_id(\s*:)")


def read_bytes(path: str | Path) -> bytes:
    """Read a file, turning OS errors into ``SerdeError`` naming it."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SerdeError(path, f"cannot read: {exc.strerror or exc}") from exc


def parse_netdef(
    data: bytes, path: str | Path | None = None, *, allow_empty: bool = False
) -> tuple[caffe2_pb2.NetDef, bool]:
    """Parse ``data`` as a NetDef; returns ``(netdef, was_text)``.

    ``path`` only names the source in error messages.
    """
    if not data.strip():
        if allow_empty:
            return caffe2_pb2.NetDef(), looks_like_text(data) and bool(data)
        raise SerdeError(path, "the file is empty (pass allow_empty=True if that is intended)")
    if looks_like_text(data):
        try:
            return _parse_text(data.decode("utf-8-sig"), path), True
        except SerdeError as text_error:
            # Tiny binary NetDefs can be printable (b"\n\nmodel_init" is a net's name).
            try:
                return _parse_binary(data, path), False
            except SerdeError:
                raise text_error from text_error.__cause__
    return _parse_binary(data, path), False


def _parse_binary(data: bytes, path: str | Path | None) -> caffe2_pb2.NetDef:
    netdef = caffe2_pb2.NetDef()
    try:
        netdef.ParseFromString(data)
    except message.DecodeError as exc:
        what = identify_binary(data)
        reason = (
            f"this is {what}" if what else f"not a binary NetDef (truncated or not protobuf: {exc})"
        )
        raise SerdeError(path, reason) from exc
    problem = implausible_netdef(netdef)
    if problem is not None:
        what = identify_binary(data)
        reason = f"this is {what}" if what else f"not a NetDef: {problem}"
        raise SerdeError(path, reason)
    return netdef


def _parse_text(text: str, path: str | Path | None) -> caffe2_pb2.NetDef:
    try:
        return text_format.Parse(text, caffe2_pb2.NetDef())
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
    except (text_format.ParseError, message.DecodeError) as exc:
        raise SerdeError(path, f"not a PlanDef: {exc}") from exc
    return plan


def netdef_bytes(net: caffe2_pb2.NetDef | Net, *, text: bool) -> bytes:
    """Serialise a NetDef (or IR net) as binary wire format or as protobuf text."""
    if text:
        netdef = net_to_netdef(net) if isinstance(net, Net) else net
        return text_format.MessageToString(netdef).encode("utf-8")
    return serialize_net(net) if isinstance(net, Net) else net.SerializeToString()


def save_net(net: caffe2_pb2.NetDef | Net, path: str | Path, *, text: bool | None = None) -> Path:
    """Write ``net`` to ``path`` atomically (temporary file + rename).

    ``text=None`` picks text format for ``.pbtxt``/``.prototxt``/``.txt`` names, binary otherwise.
    """
    target = Path(path)
    use_text = target.suffix.lower() in TEXT_SUFFIXES if text is None else text
    return atomic_write_bytes(target, netdef_bytes(net, text=use_text))

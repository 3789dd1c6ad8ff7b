"""Telling what a file holds: text or binary protobuf, and which message it really is.

Binary protobuf has no header, so the wrong message type often parses "successfully": a Caffe2
TensorProtos file reads as a NetDef whose name is binary garbage, and an ONNX model reads as a
NetDef full of unknown fields. These checks look at a bounded sample of the parsed message, so
they cost the same on a net of ten ops or a million.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from google.protobuf import message, text_format, unknown_fields

from graphtools.proto import caffe2_pb2

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_SAMPLE = 64  # ops looked at from each end of a net


def is_blank_data(data: bytes) -> bool:
    """Whether ``data`` is empty or only whitespace, without copying it (``data.strip()``
    copies a binary protobuf whole: its first byte, the tag of field 1, is a newline)."""
    return not data or data.isspace()


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` is printable UTF-8 (protobuf text format, not binary wire format)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(text) is None


def _plausible_name(name: str | bytes) -> bool:
    # upb hands proto2 strings that are not valid UTF-8 back as bytes.
    return isinstance(name, str) and _CONTROL.search(name) is None


def implausible_netdef(net: caffe2_pb2.NetDef) -> str | None:
    """Why ``net`` (parsed from binary) cannot be a real NetDef, or ``None`` if it can be."""
    return implausible_parts(
        net, len(net.op), net.op.__getitem__, net.external_input, net.external_output
    )


def implausible_parts(
    header: caffe2_pb2.NetDef,
    count: int,
    op_at: Callable[[int], caffe2_pb2.OperatorDef],
    external_inputs: Sequence[str],
    external_outputs: Sequence[str],
) -> str | None:
    """``implausible_netdef`` of a net given in parts (a loader that never parses the whole):
    its ``header`` (the net-level fields, unknown ones included), its number of ops, the op at
    an index, and its external lists."""
    if len(unknown_fields.UnknownFieldSet(header)):
        return "it has fields a NetDef does not have"
    if not _plausible_name(header.name):
        return "its name is binary data"
    sample = list(range(min(count, _SAMPLE))) + list(range(max(_SAMPLE, count - _SAMPLE), count))
    for index in sample:
        op = op_at(index)
        if not op.type or not _plausible_name(op.type):
            return f"op #{index} has no readable type"
        if len(unknown_fields.UnknownFieldSet(op)):
            return f"op #{index} ({op.type}) has fields an OperatorDef does not have"
        if not all(_plausible_name(blob) for blob in (*op.input, *op.output)):
            return f"op #{index} ({op.type}) has blob names that are binary data"
    externals = list(external_inputs[:_SAMPLE]) + list(external_outputs[:_SAMPLE])
    if not all(_plausible_name(blob) for blob in externals):
        return "its external input/output names are binary data"
    return None


def identify_binary(data: bytes) -> str | None:
    """Name the message ``data`` most plausibly is, among those users mix up with a NetDef."""
    plan = caffe2_pb2.PlanDef()
    try:
        plan.ParseFromString(data)
        plausible = not len(unknown_fields.UnknownFieldSet(plan)) and all(
            implausible_netdef(net) is None for net in plan.network
        )
        # A plan shows itself by its steps or by a network with a name or ops: b"\x12\x00"
        # is a NetDef holding one empty op as much as a plan holding one empty network.
        evidence = plan.execution_step or any(net.name or net.op for net in plan.network)
        if evidence and plausible:
            return "a Caffe2 PlanDef (a training/test plan), not a NetDef"
    except message.DecodeError:
        pass
    protos = caffe2_pb2.TensorProtos()
    try:
        protos.ParseFromString(data)
        if protos.protos and not len(unknown_fields.UnknownFieldSet(protos)):
            names_ok = all(_plausible_name(t.name) for t in protos.protos[:_SAMPLE])
            if names_ok and all(not len(unknown_fields.UnknownFieldSet(t)) for t in protos.protos):
                return "a Caffe2 TensorProtos file (tensors, not a net)"
    except message.DecodeError:
        pass
    if looks_like_onnx(data):
        return "an ONNX model (load it as ONNX, not as a Caffe2 NetDef)"
    if data.startswith(b"\x93NUMPY"):
        return "a numpy array file (.npy), not a model"
    if data.startswith(b"PK\x03\x04"):
        return _zip_archive(data)
    return None


def _zip_archive(data: bytes) -> str:
    """What a zip archive passed for a model holds: the arrays of an .npz, or a PyTorch
    checkpoint (``torch.save`` writes a zip with a ``data.pkl``)."""
    import io
    import zipfile  # only on this error path: no start-up cost

    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, ValueError):
        names = []
    if names and all(name.endswith(".npy") for name in names):
        return "an .npz of arrays (for exec --feeds or verify), not a model"
    if any(name.endswith("data.pkl") for name in names):
        return "a PyTorch checkpoint: export the model with torch.onnx.export first"
    return "a zip archive, not a model"


ONNX_SUFFIX = ".onnx"
"""The suffix of an ONNX model file."""

ONNX_FIRST_BYTE = 0x08
"""The first byte of every ModelProto that onnx writes (``ir_version``, field 1); a NetDef
never starts with it (binary: its name or ops; text: a printable character)."""


def is_onnx_bytes(data: bytes) -> bool:
    """Whether a file's ``data`` is a binary ONNX model (its first byte rules most files out
    before anything is parsed)."""
    return data[:1] == bytes([ONNX_FIRST_BYTE]) and looks_like_onnx(data)


def looks_like_onnx(data: bytes) -> bool:
    """Whether ``data`` is a binary ONNX model: a ModelProto with an IR version and a graph.

    Cheap: the graph is not parsed. A NetDef never holds a varint in field 1 (ONNX's
    ``ir_version``; a NetDef's name), so the two cannot be mistaken for each other.
    """
    from graphtools.proto import onnx_lite_pb2

    model = onnx_lite_pb2.ModelWithRawGraph()
    try:
        model.ParseFromString(data)
    except (message.DecodeError, RecursionError):
        return False
    if not model.HasField("graph"):
        return False
    fields = unknown_fields.UnknownFieldSet(model)
    return any(
        fields[i].field_number == 1 and fields[i].wire_type == 0 and bool(fields[i].data)
        for i in range(len(fields))
    )


def identify_text(text: str) -> str | None:
    """Name the message a text file holds when it does not parse as a NetDef."""
    plan = caffe2_pb2.PlanDef()
    try:
        text_format.Parse(text, plan)
        if plan.network or plan.execution_step:
            return "a Caffe2 PlanDef (a training/test plan), not a NetDef"
    except text_format.ParseError:
        pass
    import onnx

    try:
        model = text_format.Parse(text, onnx.ModelProto())
        if model.HasField("graph") or model.ir_version:
            return "an ONNX model in text format, not a Caffe2 NetDef"
    except text_format.ParseError:
        pass
    try:
        protos = text_format.Parse(text, caffe2_pb2.TensorProtos())
        if protos.protos:
            return "a Caffe2 TensorProtos file (tensors, not a net)"
    except text_format.ParseError:
        pass
    return None

"""The bundled Caffe2 schema: its own package, field facts matching real Caffe2, fresh outputs."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

from graphtools.proto import caffe2_pb2, metanet_pb2

FACTS = REPO.parent / "shared" / "reference" / "caffe2-proto-facts.md"
OUR_FILES = {
    "caffe2/proto/caffe2.proto": caffe2_pb2.DESCRIPTOR,
    "caffe2/proto/metanet.proto": metanet_pb2.DESCRIPTOR,
}
_SCALAR_NAMES = {
    getattr(FieldDescriptor, name): name.removeprefix("TYPE_").lower()
    for name in dir(FieldDescriptor)
    if name.startswith("TYPE_")
}


def _facts() -> tuple[dict[tuple[str, str], list[tuple[int, str, str, str, str]]], dict]:
    """Field rows and enums of caffe2-proto-facts.md, keyed by (upstream file, message)."""
    if not FACTS.is_file():
        pytest.skip(f"{FACTS} not found (../shared is not beside the repo)")
    messages: dict[tuple[str, str], list[tuple[int, str, str, str, str]]] = {}
    enums: dict[tuple[str, str], dict[int, str]] = {}
    file = message = None
    for line in FACTS.read_text(encoding="utf-8").splitlines():
        if found := re.match(r"### file `([^`]+)`", line):
            file, message = found.group(1), None
        elif found := re.match(r"#### `([^`]+)`", line):
            message = found.group(1)
            messages[(file, message)] = []  # type: ignore[index]
        elif (found := re.match(r"enum `([^`]+)`: (.*)$", line)) and file:
            values = (item.split("=") for item in found.group(2).split(", "))
            enums[(file, found.group(1))] = {int(number): name for name, number in values}
        elif (
            found := re.match(r"\| (\d+) \| `(\w+)` \| (\w+) \| ([\w.]+) \| (.*?) \|$", line)
        ) and message:
            number, name, label, type_name, options = found.groups()
            messages[(file, message)].append(  # type: ignore[index]
                (int(number), name, label, type_name, options.strip())
            )
    return messages, enums


def _find(file: FileDescriptor, dotted: str) -> Descriptor:
    first, *rest = dotted.split(".")
    descriptor = file.message_types_by_name[first]
    for part in rest:
        descriptor = descriptor.nested_types_by_name[part]
    return descriptor


def _all_messages(file: FileDescriptor) -> list[str]:
    """Dotted names (``TensorProto.Segment``) of every message in ``file``, nested included."""
    names = []
    pending = [(d.name, d) for d in file.message_types_by_name.values()]
    while pending:
        name, descriptor = pending.pop()
        names.append(name)
        pending.extend((f"{name}.{d.name}", d) for d in descriptor.nested_types)
    return names


def _find_enum(file: FileDescriptor, dotted: str) -> EnumDescriptor:
    *outer, name = dotted.split(".")
    if not outer:
        return file.enum_types_by_name[name]
    return _find(file, ".".join(outer)).enum_types_by_name[name]


def _describe(field: FieldDescriptor) -> tuple[int, str, str, bool]:
    label = "repeated" if field.is_repeated else "required" if field.is_required else "optional"
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        type_name = field.message_type.full_name.removeprefix("graphtools.caffe2.")
    elif field.type == FieldDescriptor.TYPE_ENUM:
        type_name = field.enum_type.full_name.removeprefix("graphtools.caffe2.")
    else:
        type_name = _SCALAR_NAMES[field.type]
    return field.number, label, type_name, field.is_packed


def test_modules_import_under_their_own_package() -> None:
    assert caffe2_pb2.DESCRIPTOR.name == "graphtools/proto/caffe2.proto"
    assert metanet_pb2.DESCRIPTOR.name == "graphtools/proto/metanet.proto"
    assert caffe2_pb2.DESCRIPTOR.package == metanet_pb2.DESCRIPTOR.package == "graphtools.caffe2"
    assert caffe2_pb2.NetDef.DESCRIPTOR.full_name == "graphtools.caffe2.NetDef"
    assert metanet_pb2.MetaNetDef.DESCRIPTOR.full_name == "graphtools.caffe2.MetaNetDef"
    assert [d.name for d in metanet_pb2.DESCRIPTOR.dependencies] == [caffe2_pb2.DESCRIPTOR.name]
    for file in OUR_FILES.values():
        for name in _all_messages(file):
            assert _find(file, name).full_name == f"graphtools.caffe2.{name}"


def test_no_clash_with_onnx_or_a_real_caffe2() -> None:
    import onnx

    assert onnx.ModelProto.DESCRIPTOR.full_name == "onnx.ModelProto"
    pool = caffe2_pb2.DESCRIPTOR.pool
    assert pool.FindMessageTypeByName("graphtools.caffe2.NetDef") is caffe2_pb2.NetDef.DESCRIPTOR
    with pytest.raises(KeyError):
        pool.FindFileByName("caffe2/proto/caffe2.proto")  # left free for a real caffe2


def test_every_field_matches_the_caffe2_facts() -> None:
    messages, _ = _facts()
    compared = 0
    for (upstream, message), rows in messages.items():
        if upstream not in OUR_FILES:
            continue  # caffe2_legacy.proto is not bundled
        descriptor = _find(OUR_FILES[upstream], message)
        assert set(descriptor.fields_by_name) == {row[1] for row in rows}, message
        for number, name, label, type_name, options in rows:
            field = descriptor.fields_by_name[name]
            expected = (number, label, type_name, "packed" in options)
            assert _describe(field) == expected, f"{message}.{name}"
            compared += 1
    for upstream, file in OUR_FILES.items():
        assert {m for f, m in messages if f == upstream} == set(_all_messages(file)), upstream
    assert compared >= 140  # the parser found the tables (147 fields in 2023)


def test_defaults_match_the_caffe2_facts() -> None:
    messages, _ = _facts()
    for (upstream, message), rows in messages.items():
        if upstream not in OUR_FILES:
            continue
        descriptor = _find(OUR_FILES[upstream], message)
        for _, name, _, _, options in rows:
            if not options.startswith("default "):
                continue
            field = descriptor.fields_by_name[name]
            expected = options.removeprefix("default ").strip('"')
            if field.type == FieldDescriptor.TYPE_ENUM:
                got = field.enum_type.values_by_number[field.default_value].name
            elif isinstance(field.default_value, bool):
                got = str(field.default_value).lower()
            else:
                got = str(field.default_value)
            assert got == expected, f"{message}.{name}"


def test_enums_match_the_caffe2_facts() -> None:
    _, enums = _facts()
    checked = 0
    for (upstream, dotted), values in enums.items():
        if upstream not in OUR_FILES:
            continue
        enum = _find_enum(OUR_FILES[upstream], dotted)
        assert {v.number: v.name for v in enum.values} == values, dotted
        checked += 1
    assert checked >= 4


def test_old_device_id_number_and_packing_on_the_wire() -> None:
    device = caffe2_pb2.DeviceOption(device_type=1, device_id=3)
    assert device.SerializeToString() == b"\x08\x01\x10\x03"  # field 2 is the old cuda_gpu_id
    arg = caffe2_pb2.Argument(name="a", ints=[1, 2])
    assert arg.SerializeToString() == b"\n\x01a\x30\x01\x30\x02"  # ints are not packed
    tensor = caffe2_pb2.TensorProto(float_data=[1.0])
    assert tensor.SerializeToString() == b"\x1a\x04\x00\x00\x80\x3f"  # float_data is packed


def test_regen_check_passes() -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools is not installed: proto/regen.py cannot compile the schemas")
    result = subprocess.run(
        [sys.executable, str(REPO / "proto" / "regen.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout


def test_generated_files_are_beside_their_sources() -> None:
    proto = REPO / "proto"
    for stem in ("caffe2", "metanet"):
        for suffix in (".proto", "_pb2.py", "_pb2.pyi"):
            assert (proto / f"{stem}{suffix}").is_file()
    assert not (REPO / "graphtools" / "proto").exists()
    assert Path(caffe2_pb2.__file__).resolve().parent == proto.resolve()

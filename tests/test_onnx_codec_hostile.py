"""What the ONNX fuzz campaign (benchmarks/fuzz_onnx.py) found in the codec, each kept fixed:
the file is refused with a ``SerdeError`` naming it, never an untyped exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from conftest import run_cli
from google.protobuf.descriptor import FieldDescriptor
from onnx import TensorProto, helper, numpy_helper

from graphtools.errors import SerdeError
from graphtools.proto import onnx_check_pb2, onnx_lite_pb2
from graphtools.serde.onnx_io import load_onnx_model


def _external_model(path: Path, location: str) -> Path:
    weight = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


def test_an_external_location_with_a_nul_byte_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "m.onnx", "a\x00b.data")
    with pytest.raises(SerdeError, match="NUL character") as caught:
        load_onnx_model(path)
    assert caught.value.path == path


@pytest.mark.parametrize("location", ["../outside.data", "/etc/hostname", "", "sub/../../x"])
def test_an_external_location_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = _external_model(folder / "m.onnx", location)
    with pytest.raises(SerdeError, match="lies outside the model's folder") as caught:
        load_onnx_model(path)
    assert caught.value.path == path


def _model_bytes(initializer: bytes, node: bytes) -> bytes:
    """A model of one node and one initializer, both given as their serialized messages."""
    graph = onnx_lite_pb2.GraphWithRawParts(
        node=[node],
        initializer=[initializer],
        input=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]).SerializeToString()],
        output=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]).SerializeToString()],
    )
    model = helper.make_model(helper.make_graph([], "g", [], []))
    model.ClearField("graph")
    model.opset_import[0].version = 17
    lite = onnx_lite_pb2.ModelWithRawGraph.FromString(model.SerializeToString())
    lite.graph = graph.SerializeToString()
    return bytes(lite.SerializeToString())


_WEIGHT = numpy_helper.from_array(np.ones(3, np.float32), "w").SerializeToString()
_NODE = helper.make_node("Add", ["x", "w"], ["y"]).SerializeToString()
_PACKED_BAD_FLOATS = bytes([0x22, 3, 1, 2, 3])  # float_data (4), packed: 3 bytes, not 4k
_PACKED_BAD_INTS = bytes([0x0A, 1, 0x80])  # dims (1), packed: a varint cut short


@pytest.mark.parametrize(
    ("initializer", "node"),
    [
        (_WEIGHT + _PACKED_BAD_FLOATS, _NODE),
        (_WEIGHT + _PACKED_BAD_INTS, _NODE),
        (  # an attribute's ints (8), packed, cut short
            _WEIGHT,
            _NODE + bytes([0x2A, 6, 0x0A, 1, ord("a"), 0x42, 1, 0x80]),
        ),
    ],
    ids=["tensor-floats", "tensor-dims", "attribute-ints"],
)
def test_damaged_numbers_in_a_node_or_tensor_are_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], initializer: bytes, node: bytes
) -> None:
    """Nodes and tensors are parsed only when asked for and written back as their bytes, so
    the load-time check must refuse what a full parse would: the file is named, and the CLI
    writes nothing."""
    path = tmp_path / "damaged.onnx"
    path.write_bytes(_model_bytes(initializer, node))
    with pytest.raises(SerdeError, match="not an ONNX model") as caught:
        load_onnx_model(path)
    assert caught.value.path == path
    code, _, err = run_cli(capsys, "run", str(path), "-o", str(tmp_path / "out.onnx"))
    assert code == 2
    assert err.splitlines()[-1].startswith(f"error: {path}")
    assert not (tmp_path / "out.onnx").exists()


def test_nodes_and_tensors_are_written_back_as_the_bytes_they_were_loaded_as(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer's own field order (not protobuf's canonical one) survives a pipeline that
    does not touch them: each unchanged node and initializer is saved as its loaded bytes."""
    weight = onnx.TensorProto.FromString(_WEIGHT)
    reordered_weight = b"".join(  # name first, then the rest: valid, but not canonical
        [
            onnx.TensorProto(name="w").SerializeToString(),
            onnx.TensorProto(dims=weight.dims, data_type=weight.data_type).SerializeToString(),
            onnx.TensorProto(raw_data=weight.raw_data).SerializeToString(),
        ]
    )
    reordered_node = b"".join(  # op type first, then the values
        [
            onnx.NodeProto(op_type="Add").SerializeToString(),
            onnx.NodeProto(input=["x", "w"], output=["y"]).SerializeToString(),
        ]
    )
    assert reordered_weight != _WEIGHT
    path = tmp_path / "m.onnx"
    path.write_bytes(_model_bytes(reordered_weight, reordered_node))
    out = tmp_path / "out.onnx"
    code, _, err = run_cli(capsys, "run", str(path), "-o", str(out))
    assert code == 0, err
    saved = onnx_lite_pb2.GraphWithRawParts.FromString(
        onnx_lite_pb2.ModelWithRawGraph.FromString(out.read_bytes()).graph
    )
    assert list(saved.initializer) == [reordered_weight]
    assert list(saved.node) == [reordered_node]
    model = load_onnx_model(out)
    assert model.predict_net.initializers["w"].numpy().tolist() == [1.0, 1.0, 1.0]
    assert [op.type for op in model.predict_net] == ["Add"]


_NUMBERS = {
    FieldDescriptor.TYPE_DOUBLE,
    FieldDescriptor.TYPE_FLOAT,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_ENUM,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
}


def _undeclared(kind: Any, level: Any, seen: set[tuple[str, str]]) -> list[str]:
    """Fields of onnx message ``kind`` whose contents a full parse decodes (messages, lists
    of numbers) that the load-time check's ``level`` message does not declare alike."""
    if (kind.full_name, level.full_name) in seen:
        return []
    seen.add((kind.full_name, level.full_name))
    missing = []
    for field in kind.fields:
        is_message = field.type == FieldDescriptor.TYPE_MESSAGE
        if not is_message and not (field.is_repeated and field.type in _NUMBERS):
            continue
        declared = level.fields_by_number.get(field.number)
        where = f"{kind.full_name}.{field.name}"
        if declared is None:
            missing.append(where)
        elif is_message and field.message_type.full_name == "onnx.GraphProto":
            if declared.type != FieldDescriptor.TYPE_BYTES:  # graphs are the next level
                missing.append(where)
        elif is_message:
            if declared.type != FieldDescriptor.TYPE_MESSAGE:
                missing.append(where)
            else:
                missing += _undeclared(field.message_type, declared.message_type, seen)
        elif not declared.is_repeated:
            missing.append(where)
    return missing


def test_the_load_check_decodes_all_a_full_parse_of_a_graph_would() -> None:
    """Nodes and tensors are parsed only on demand and written back as their bytes, so the
    check is the only full look at them: every message and list of numbers a GraphProto can
    hold (at any depth; graphs held by attributes are the next level) must be declared in
    ``proto/onnx_check.proto`` for its damage to be refused at load."""
    assert (
        _undeclared(onnx.GraphProto.DESCRIPTOR, onnx_check_pb2.GraphLevel.DESCRIPTOR, set()) == []
    )


def test_damage_in_a_node_s_or_tensor_s_metadata_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut_short = bytes([0x0A, 0x7F])  # a key field of 127 bytes, holding none
    node = _NODE + bytes([9 << 3 | 2, len(cut_short)]) + cut_short  # metadata_props (9)
    weight = _WEIGHT + bytes([0x82, 0x01, len(cut_short)]) + cut_short  # metadata_props (16)
    for initializer, damaged_node in ((_WEIGHT, node), (weight, _NODE)):
        path = tmp_path / "damaged.onnx"
        path.write_bytes(_model_bytes(initializer, damaged_node))
        code, _, err = run_cli(capsys, "run", str(path), "-o", str(tmp_path / "out.onnx"))
        assert code == 2, err
        assert not (tmp_path / "out.onnx").exists()


def test_a_model_cut_short_after_its_graph_is_refused(tmp_path: Path) -> None:
    """Protobuf cannot tell a file cut between two fields from a whole one; an ONNX model
    cut right after its graph loses its opset imports (field 8 follows the graph), which
    every model of IR version 3 on has. It loaded, and saved a model onnxruntime refuses."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [])
    graph.output.add().CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]))
    whole = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = whole.SerializeToString()
    opsets = onnx.ModelProto(opset_import=whole.opset_import).SerializeToString()
    assert data.endswith(opsets)  # the writer puts them last
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: -len(opsets)])
    with pytest.raises(SerdeError, match=r"no opset imports.*cut short") as caught:
        load_onnx_model(path)
    assert caught.value.path == path
    path.write_bytes(data)
    assert load_onnx_model(path).opset_imports == {"": 17}

"""The conversions are passes: ``convert-to-caffe2`` and ``convert-to-onnx`` run inside the IR,
in a ``PassManager`` pipeline like any pass, and an imported pair keeps its inputs' types, so
exporting it back needs no ``value_info``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import assert_one_error_line, run_cli
from onnx import TensorProto, helper, numpy_helper

from graphtools._core import CAFFE2, ONNX
from graphtools.errors import PassError, UnsupportedOpError
from graphtools.executor import run_model
from graphtools.onnx import export_onnx, import_onnx, run_onnxruntime
from graphtools.pass_infra import PassManager
from graphtools.passes import ConvertToCaffe2
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model_dir, save_model
from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes
from graphtools.testing import compare_outputs

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    initializers: list[onnx.TensorProto] = (),  # type: ignore[assignment]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", inputs, [onnx.ValueInfoProto(name=n) for n in outputs], list(initializers)
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _weights(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _conv_net() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["prob"]),
    ]
    inits = [_weights("w", 4, 3, 3, 3), _weights("b", 4), _weights("fc_w", 5, 64)]
    inits.append(_weights("fc_b", 5))
    x = helper.make_tensor_value_info("x", FLOAT, [2, 3, 8, 8])
    feeds = {"x": RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)}
    return _model(nodes, [x], ["prob"], inits), feeds


def _if_net() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [onnx.ValueInfoProto(name="t")]
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["c"], value_floats=[2.0]),
            helper.make_node("Mul", ["x", "c"], ["e"]),
        ],
        "else",
        [],
        [onnx.ValueInfoProto(name="e")],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [1])
    x = helper.make_tensor_value_info("x", FLOAT, [3])
    feeds = {"cond": np.array([False]), "x": np.array([-1.0, 0.5, 2.0], dtype=np.float32)}
    return _model([node], [cond, x], ["y"]), feeds


def _int_and_dynamic_net() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Two inputs of different element types, one with a symbolic batch dim."""
    nodes = [
        helper.make_node("Cast", ["ids"], ["ids_f"], to=FLOAT),
        helper.make_node("Add", ["x", "ids_f"], ["s"]),
        helper.make_node("ReduceSum", ["s", "axes"], ["y"], keepdims=0),
    ]
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    x = helper.make_tensor_value_info("x", FLOAT, ["N", 4])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 4])
    feeds = {
        "x": RNG.standard_normal((3, 4)).astype(np.float32),
        "ids": np.arange(12, dtype=np.int64).reshape(3, 4),
    }
    return _model(nodes, [x, ids], ["y"], [axes]), feeds


MODELS = {"conv": _conv_net, "if": _if_net, "int_and_dynamic": _int_and_dynamic_net}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_imported_pair_exports_back_without_value_info(name: str) -> None:
    original, feeds = MODELS[name]()
    pair = import_onnx(original)
    inputs = {i.name: i for i in original.graph.input}
    for feed in feeds:
        declared = pair.predict_net.types[feed]
        ttype = inputs[feed].type.tensor_type
        assert declared.elem_type == ttype.elem_type
        assert declared.shape == tuple(d.dim_value or d.dim_param for d in ttype.shape.dim)
    exported = export_onnx(pair)
    onnx.checker.check_model(exported, full_check=True)
    assert {i.name: i.type for i in exported.graph.input} == {
        i.name: i.type for i in original.graph.input
    }
    expected = run_onnxruntime(original, feeds)
    for got in (run_model(pair, feeds), run_onnxruntime(exported, feeds)):
        diffs = compare_outputs(expected, {k: got[k] for k in expected}, rtol=1e-5, atol=1e-6)
        assert all(d.ok for d in diffs), diffs


def test_the_pipeline_converts_once_between_the_fixpoints_of_each_dialect() -> None:
    original, feeds = _conv_net()
    model = model_from_onnx_bytes(original.SerializeToString())
    manager = PassManager.parse("remove-dead-ends,convert-to-caffe2,default,convert-to-onnx")
    records = manager(model)
    assert [r.name for r in records if r.name.startswith("convert-")] == [
        "convert-to-caffe2",
        "convert-to-onnx",
    ]
    conversion = next(r for r in records if r.name == "convert-to-caffe2")
    assert conversion.stats == {"caffe2_ops": 6, "params": 4, "opset": 17}
    assert model.dialect == ONNX and model.init_net is None
    expected = run_onnxruntime(original, feeds)["prob"]
    got = run_onnxruntime(onnx.ModelProto.FromString(model_to_onnx_bytes(model)), feeds)["prob"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_convert_to_caffe2_gives_a_pair_typed_like_the_graph_inputs() -> None:
    original, _ = _int_and_dynamic_net()
    model = model_from_onnx_bytes(original.SerializeToString())
    result = ConvertToCaffe2()(model)
    assert result.modified and model.dialect == CAFFE2
    assert model.opset_imports == {} and model.header is None
    assert model.init_net is not None and [op.outputs for op in model.init_net] == []
    assert list(model.predict_net.types) == ["x", "ids"]
    assert model.predict_net.types["x"].shape == ("N", 4)


def test_a_refused_conversion_leaves_the_onnx_model_as_it_was() -> None:
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])
    boxes = helper.make_tensor_value_info("boxes", FLOAT, [1, 4, 4])
    scores = helper.make_tensor_value_info("scores", FLOAT, [1, 1, 4])
    model = model_from_onnx_bytes(_model([node], [boxes, scores], ["selected"]).SerializeToString())
    before = model.revision
    with pytest.raises(UnsupportedOpError, match="NonMaxSuppression"):
        ConvertToCaffe2()(model)
    assert model.dialect == ONNX and model.revision == before
    with pytest.raises(PassError, match="convert-to-caffe2"):
        PassManager.parse("convert-to-caffe2")(model)
    assert model.dialect == ONNX


def test_the_import_builds_no_netdef_message_and_saves_the_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    original, feeds = _conv_net()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the import built a caffe2_pb2 message")

    with monkeypatch.context() as patch:
        for name in ("OperatorDef", "NetDef", "Argument"):
            patch.setattr(caffe2_pb2, name, refuse)
        pair = import_onnx(original)
    save_model(pair, tmp_path / "pair")
    loaded = load_model_dir(tmp_path / "pair")
    expected = run_model(pair, feeds)
    got = run_model(loaded, feeds)
    assert np.array_equal(got["prob"], expected["prob"])


def test_run_converts_an_onnx_model_through_a_caffe2_pipeline_and_refuses_to_end_in_caffe2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    original, feeds = _conv_net()
    source = tmp_path / "m.onnx"
    source.write_bytes(original.SerializeToString())
    out = tmp_path / "out.onnx"
    pipeline = "convert-to-caffe2,default,convert-to-onnx"
    code, text, _ = run_cli(capsys, "run", str(source), "-p", pipeline, "-o", str(out))
    assert code == 0 and f"wrote {out}" in text
    expected = run_onnxruntime(original, feeds)["prob"]
    np.testing.assert_allclose(run_onnxruntime(out, feeds)["prob"], expected, rtol=1e-5)
    code, _, err = run_cli(capsys, "run", str(source), "-p", "convert-to-caffe2", "-o", str(out))
    assert code == 2
    assert_one_error_line(err, "caffe2 model", "convert-to-onnx")

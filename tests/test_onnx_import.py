"""The importer's model-level rules and refusals, on small hand-built ONNX models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphtools.errors import SerdeError, UnsupportedOpError
from graphtools.executor import run_model
from graphtools.onnx import import_onnx, save_onnx
from graphtools.testing import compare_outputs

FLOAT = TensorProto.FLOAT


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    initializers: list[onnx.TensorProto] = (),  # type: ignore[assignment]
    opset: int = 17,
    ir_version: int = 8,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", inputs, [onnx.ValueInfoProto(name=n) for n in outputs], list(initializers)
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def _x(shape: list[int], name: str = "x") -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, FLOAT, shape)


def test_initializers_become_init_fills_and_inputs_feeds() -> None:
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    shape = numpy_helper.from_array(np.array([-1], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"]),
        helper.make_node("Reshape", ["y", "shape"], ["z"]),
    ]
    # IR 3: the weights are listed as graph inputs too; they stay params.
    model = _model(nodes, [_x([4, 2]), _x([2, 3], "w")], ["z"], [w, shape], opset=9, ir_version=3)
    pair = import_onnx(model)
    assert pair.init_net is not None
    fills = {op.outputs[0]: op.type for op in pair.init_net}
    assert fills == {"w": "GivenTensorFill", "shape": "GivenTensorInt64Fill"}
    assert list(pair.predict_net.external_inputs) == ["x", "w", "shape"]
    assert list(pair.predict_net.external_outputs) == ["z"]
    x = np.random.default_rng(0).standard_normal((4, 2), dtype=np.float32)
    out = run_model(pair, {"x": x})
    np.testing.assert_allclose(out["z"], (x @ numpy_helper.to_array(w)).reshape(-1), rtol=1e-6)


def test_constant_folded_into_arguments_leaves_no_param() -> None:
    axes = helper.make_node("Constant", [], ["axes"], value_ints=[0])
    nodes = [axes, helper.make_node("Unsqueeze", ["x", "axes"], ["y"])]
    pair = import_onnx(_model(nodes, [_x([3])], ["y"]))
    assert pair.init_net is not None and len(pair.init_net) == 0
    (op,) = pair.predict_net
    assert op.type == "ExpandDims" and op.arg("dims") == (0,)


@pytest.mark.parametrize(
    ("node", "fragment"),
    [
        (helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2), "computed at run time"),
        (helper.make_node("Scan", ["x", "x"], ["y"]), "no Caffe2 mapping"),
        (helper.make_node("Loop", ["x", "x"], ["y"]), "has no body"),
        (helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_UPPER"), "auto_pad"),
        (helper.make_node("Relu", ["x"], ["y"], unknown=3), "attribute 'unknown'"),
        (helper.make_node("Unsqueeze", ["x", "w"], ["y"]), "computed at run time"),
        (helper.make_node("Resize", ["x", "", "w"], ["y"], mode="linear"), "'linear'"),
        (helper.make_node("Relu", ["x"], ["y"], domain="com.microsoft"), "domain"),
    ],
)
def test_unsupported_nodes_are_refused_naming_node_and_opset(
    node: onnx.NodeProto, fragment: str
) -> None:
    node.name = "the_node"
    model = _model([node], [_x([1, 1]), _x([1, 1], "w"), _x([1, 1], "r")], ["y"])
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model)
    message = str(info.value)
    assert "node #0 'the_node'" in message and "opset 17" in message
    assert fragment in message


def test_same_padding_needs_static_sizes() -> None:
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), dtype=np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2])
    dynamic = helper.make_tensor_value_info("x", FLOAT, ["N", 1, "H", "W"])
    with pytest.raises(UnsupportedOpError, match="static spatial sizes"):
        import_onnx(_model([node], [dynamic], ["y"], [w]))
    pair = import_onnx(_model([node], [_x([1, 1, 6, 6])], ["y"], [w]))
    (op,) = pair.predict_net
    assert op.arg("pads") == (1, 1, 0, 0)  # SAME_LOWER: the odd pad goes to the head


def test_opsets_outside_the_range_are_refused() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_x([1])], ["y"], opset=6)
    with pytest.raises(UnsupportedOpError, match="opset 6"):
        import_onnx(model)


def test_softmax_semantics_follow_the_opset() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 4), dtype=np.float32)
    for opset in (11, 13):
        node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
        pair = import_onnx(_model([node], [_x([2, 3, 4])], ["y"], opset=opset))
        got = run_model(pair, {"x": x})["y"]
        if opset == 11:  # flattened to 2-D at axis 1: normalised over the last two dims
            flat = x.reshape(2, 12)
            expected = (np.exp(flat) / np.exp(flat).sum(1, keepdims=True)).reshape(x.shape)
        else:  # one axis
            expected = np.exp(x) / np.exp(x).sum(1, keepdims=True)
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_external_data_is_loaded_from_the_file_folder(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_x([1, 64])], ["y"], [w])
    path = save_onnx(model, tmp_path / "m.onnx", external_data=True)
    assert (tmp_path / "m.onnx.data").stat().st_size == 4096 * 4
    x = np.ones((1, 64), dtype=np.float32)
    expected = x @ numpy_helper.to_array(w)
    for source, base in ((path, None), (path.read_bytes(), tmp_path)):
        pair = import_onnx(source, base_dir=base)
        got = run_model(pair, {"x": x})
        assert compare_outputs({"y": expected}, got)[0].ok
    with pytest.raises(SerdeError, match="external data"):
        import_onnx(path.read_bytes())
    (tmp_path / "m.onnx.data").write_bytes(b"short")
    with pytest.raises(SerdeError, match="'w'"):
        import_onnx(path)


def test_if_becomes_caffe2_if_with_branches_writing_the_outputs() -> None:
    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [onnx.ValueInfoProto(name="t")]
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["c"], value_floats=[1.0]),
            helper.make_node("Add", ["x", "c"], ["e"]),
        ],
        "else",
        [],
        [onnx.ValueInfoProto(name="e")],
    )
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [1])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)
    pair = import_onnx(_model([node], [cond, _x([2])], ["y"]))
    (op,) = pair.predict_net
    assert op.type == "If" and op.inputs == ("cond", "x") and op.outputs == ("y",)
    then_net, else_net = op.arg("then_net"), op.arg("else_net")
    assert [(o.type, o.outputs) for o in then_net] == [("Relu", ("y",))]
    assert [o.type for o in else_net] == ["GivenTensorFill", "Add"]
    assert else_net[-1].outputs == ("y",)
    assert list(then_net.external_inputs) == ["x"] and list(else_net.external_outputs) == ["y"]
    x = np.array([-1.0, 2.0], dtype=np.float32)
    for flag, expected in ((True, [0.0, 2.0]), (False, [0.0, 3.0])):
        out = run_model(pair, {"cond": np.array([flag]), "x": x})
        np.testing.assert_array_equal(out["y"], np.asarray(expected, dtype=np.float32))

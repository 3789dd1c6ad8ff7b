"""in-branches: the default pipeline inside If branches; checked numerically with our executor
on the cleaned pair and with onnxruntime on its export, both against onnxruntime on the original
ONNX model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import export_onnx, import_onnx, run_onnxruntime
from graphtools.pass_infra import PassManager
from graphtools.passes.in_branches import InBranches
from graphtools.serde import load_model


def _if_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((5, 12), dtype=np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(5, dtype=np.float32), "b"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
    ]
    then_graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Shape", ["r"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
            helper.make_node("Reshape", ["r", "shape"], ["flat"]),
            helper.make_node("Gemm", ["flat", "w", "b"], ["t"], transB=1),
        ],
        "then",
        [],
        [onnx.ValueInfoProto(name="t")],
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["x"], ["f"]),
            helper.make_node("Gemm", ["f", "w", "b"], ["e"], transB=1),
            helper.make_node("Relu", ["e"], ["unused"]),
        ],
        "else",
        [],
        [onnx.ValueInfoProto(name="e")],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)
    inputs = [
        helper.make_tensor_value_info("cond", TensorProto.BOOL, [1]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2]),
    ]
    graph = helper.make_graph([node], "g", inputs, [onnx.ValueInfoProto(name="y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_default_pipeline_cleans_if_branches() -> None:
    original = _if_model()
    pair = import_onnx(original)
    records = PassManager.parse("default,in-branches,remove-unused-params")(pair)
    assert any(r.name == "in-branches" and r.modified for r in records)
    (if_op,) = pair.predict_net
    then_net, else_net = if_op.arg("then_net"), if_op.arg("else_net")
    assert [op.type for op in then_net] == ["Relu", "FC"]
    assert then_net[1].inputs[0] == then_net[0].outputs[0]  # FC reads the 4-D blob
    assert [op.type for op in else_net] == ["Flatten", "FC"]  # the dead Relu is gone
    assert list(then_net.external_inputs) == ["x", "w", "b"]  # the chain's params are gone
    exported = export_onnx(pair)  # the pair keeps the graph inputs' types
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2), dtype=np.float32)
    for flag in (True, False):
        feeds = {"cond": np.array([flag]), "x": x}
        expected = run_onnxruntime(original, feeds)["y"]
        np.testing.assert_allclose(run_model(pair, feeds)["y"], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            run_onnxruntime(exported, feeds)["y"], expected, rtol=1e-5, atol=1e-5
        )


def _if_writing_a_read_name() -> Model:
    """An If whose then-branch writes ``t``, which the net reads after the If without the
    branch declaring it: in-branches widens the branch's outputs while its pipeline runs."""
    then = Net([Op("Relu", ["x"], ["t"])], ["x"], [], name="then")
    other = Net([Op("Sigmoid", ["x"], ["t"])], ["x"], [], name="else")
    ops = [
        Op("If", ["cond", "x"], ["t"], args={"then_net": then, "else_net": other}),
        Op("Tanh", ["t"], ["y"]),
    ]
    return Model(Net(ops, ["cond", "x"], ["y"], name="main"))


def test_a_branch_the_pipeline_leaves_alone_is_not_modified() -> None:
    """Issue 21 item 2: widening and restoring a branch's outputs is bookkeeping, not a change;
    a run whose pipelines change nothing reports ``modified=False`` and keeps the revision."""
    model = _if_writing_a_read_name()
    revision = model.revision
    result = InBranches()(model)
    assert (result.modified, result.stats) == (False, {"branches": 2, "branches_modified": 0})
    assert model.revision == revision


def test_the_docs_cleanup_of_mask_rcnn_reaches_its_fixpoint(real_fixtures: Path) -> None:
    """docs/onnx.md's typical cleanup on Mask R-CNN2Go reaches its fixpoint: in-branches does
    not report a change it did not make in every round."""
    model = load_model(real_fixtures / "caffe2-models" / "mask_rcnn_2go" / "fp32" / "model.pbtxt")
    records = PassManager.parse("default,fold-constants,in-branches,remove-unused-params")(model)
    last_round = [r for r in records if r.round == records[-1].round]
    assert records[-1].round < 10
    assert not any(r.modified for r in last_round)
    in_branches = [r for r in records if r.name == "in-branches"]
    assert sum(r.modified for r in in_branches) <= 1

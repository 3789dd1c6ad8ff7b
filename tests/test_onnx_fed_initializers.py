"""Initializers a user may feed: in a model of IR version 4 or later, an initializer that is
also a graph input is a default, and onnxruntime uses the value fed for it instead. No pass
may bake such a value into a folded or fused constant, drop it as unused, or remove the
``Dropout`` whose ``training_mode`` it is; in IR 3 (every initializer listed as an input)
initializers are constants and fold as before. Each rewrite is checked with onnxruntime on
the default and on an overriding feed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_check import assert_same_outputs, check, normal, run

from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

FLOAT = TensorProto.FLOAT


def _model(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: Mapping[str, list[int]],
    initializers: Mapping[str, np.ndarray],
    *,
    ir_version: int = 8,
    opset: int = 17,
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info("y", FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    path.write_bytes(model.SerializeToString())
    check(path)
    return path


def _rewrite(path: Path, pipeline: str, feeds: list[dict[str, Any]]) -> onnx.ModelProto:
    """Run ``pipeline``, save, check, and compare onnxruntime's outputs on every feed."""
    model = load_onnx_model(path)
    PassManager.parse(pipeline)(model)
    target = path.with_name(f"out_{path.name}")
    save_onnx_model(model, target)
    check(target)
    for feed in feeds:
        assert_same_outputs(run(path, feed), run(target, feed), f"{pipeline} on {sorted(feed)}")
    return onnx.load(str(target))


@pytest.mark.parametrize("pipeline", ["fold-constants", "optimize", "default"])
def test_a_fed_initializer_is_not_folded_into_a_constant(tmp_path: Path, pipeline: str) -> None:
    weight = np.full((2, 3), 2.0, np.float32)
    path = _model(
        tmp_path / "m.onnx",
        [helper.make_node("Mul", ["w1", "w2"], ["a"]), helper.make_node("Add", ["x", "a"], ["y"])],
        {"x": [2, 3], "w1": [2, 3]},
        {"w1": weight, "w2": weight},
    )
    x = normal(2, 3)
    out = _rewrite(path, pipeline, [{"x": x}, {"x": x, "w1": np.full((2, 3), 10.0, np.float32)}])
    assert [i.name for i in out.graph.input] == ["x", "w1"]


def test_an_unused_fed_initializer_stays_an_input(tmp_path: Path) -> None:
    unused = np.ones((2,), np.float32)
    path = _model(
        tmp_path / "m.onnx",
        [helper.make_node("Relu", ["x"], ["y"])],
        {"x": [2, 3], "u": [2]},
        {"u": unused, "v": unused},
    )
    out = _rewrite(path, "remove-unused-params", [{"x": normal(2, 3)}])
    assert [i.name for i in out.graph.input] == ["x", "u"]
    assert [t.name for t in out.graph.initializer] == ["u"]  # v, not an input, went


def test_a_dropout_whose_training_mode_may_be_fed_stays(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Dropout", ["x", "", "fed"], ["d"]),
        helper.make_node("Dropout", ["d", "", "fixed"], ["y"]),
    ]
    off = np.array(False)
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", FLOAT, [2, 3]),
            helper.make_tensor_value_info("fed", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", FLOAT, [2, 3])],
        [numpy_helper.from_array(off, "fed"), numpy_helper.from_array(off, "fixed")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    check(path)
    out = _rewrite(path, "remove-identity-ops", [{"x": normal(2, 3)}])
    assert [(n.op_type, list(n.input)) for n in out.graph.node] == [("Dropout", ["x", "", "fed"])]


def test_batch_norm_parameters_a_user_may_feed_are_not_fused(tmp_path: Path) -> None:
    channels = 2
    rng = np.random.default_rng(0)
    params = {
        "w": rng.standard_normal((channels, channels, 1, 1)).astype(np.float32),
        "scale": np.array([0.5, 2.0], np.float32),
        "bias": np.array([0.1, -0.2], np.float32),
        "mean": np.array([0.3, 0.0], np.float32),
        "var": np.array([1.0, 4.0], np.float32),
    }
    path = _model(
        tmp_path / "m.onnx",
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
        ],
        {"x": [1, channels, 2, 2], "scale": [channels]},
        params,
    )
    x = normal(1, channels, 2, 2)
    out = _rewrite(
        path, "optimize", [{"x": x}, {"x": x, "scale": np.array([3.0, -1.0], np.float32)}]
    )
    assert "BatchNormalization" in [n.op_type for n in out.graph.node]


def test_in_ir_3_initializers_listed_as_inputs_are_constants(tmp_path: Path) -> None:
    weight = np.full((2, 3), 2.0, np.float32)
    path = _model(
        tmp_path / "m.onnx",
        [helper.make_node("Mul", ["w1", "w2"], ["a"]), helper.make_node("Add", ["x", "a"], ["y"])],
        {"x": [2, 3], "w1": [2, 3], "w2": [2, 3]},
        {"w1": weight, "w2": weight},
        ir_version=3,
        opset=8,
    )
    out = _rewrite(path, "fold-constants", [{"x": normal(2, 3)}])
    assert [n.op_type for n in out.graph.node] == ["Add"]

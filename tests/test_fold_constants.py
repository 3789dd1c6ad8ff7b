"""fold-constants: constant shape arithmetic becomes params; Reshape shapes built from the
input's own dims become constants with 0 (copy the dim), so the batch stays dynamic."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphtools.ir import Model, Net, Op
from graphtools.onnx import export_onnx, import_onnx
from graphtools.pass_infra import PassManager
from graphtools.testing import assert_models_equivalent


def _view_then_matmul() -> onnx.ModelProto:
    """``x.view(x.size(0), -1) @ w`` as the classic torch exporter writes it (no Linear, so
    remove-reshape-for-fc does not apply)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((12, 5), dtype=np.float32), "w"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def test_reshape_shape_from_the_input_dims_folds_to_copy_dims() -> None:
    pair = import_onnx(_view_then_matmul())
    before = pair.copy()
    records = PassManager.parse("fold-constants,remove-unused-params")(pair)
    assert records[0].stats["reshapes_folded"] == 1 and records[0].stats["ops_removed"] == 4
    assert [op.type for op in pair.predict_net] == ["Relu", "Reshape", "BatchMatMul"]
    reshape = pair.predict_net[1]
    assert pair.init_net is not None
    fills = {op.outputs[0]: op for op in pair.init_net}
    assert fills[reshape.inputs[1]].arg("values") == (0, -1)
    assert set(fills) == {"w", reshape.inputs[1]}  # zero, minus_one: unused, removed
    for batch in (2, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4), dtype=np.float32)
        assert_models_equivalent(before, pair, {"x": x})
    exported = export_onnx(pair, value_info={"x": (1, [2, 3, 4])}, dynamic_batch=True)
    from graphtools.onnx import run_onnxruntime

    x = np.random.default_rng(9).standard_normal((6, 3, 4), dtype=np.float32)
    got = run_onnxruntime(exported, {"x": x})["y"]
    np.testing.assert_allclose(
        got,
        np.maximum(x, 0).reshape(6, -1)
        @ numpy_helper.to_array(_view_then_matmul().graph.initializer[0]),
        rtol=1e-5,
        atol=1e-5,
    )


def test_ops_on_constants_are_evaluated() -> None:
    fill = Op("GivenTensorInt64Fill", [], ["a"], args={"shape": [2], "values": [2, 3]})
    init = Net([fill], external_outputs=["a"], name="init")
    predict = Net(
        [
            Op("Mul", ["a", "a"], ["sq"]),
            Op("ExpandDims", ["sq"], ["e"], args={"dims": [0]}),
            Op("Reshape", ["x", "sq"], ["y", "old"]),
            Op("Cast", ["e"], ["ef"], args={"to": 1}),  # Caffe2 runs Relu on floats only
            Op("Relu", ["ef"], ["z"]),
        ],
        ["x", "a"],
        ["y", "z"],
    )
    model = Model(predict, init)
    before = model.copy()
    result = PassManager.parse("fold-constants")(model)[0]
    assert result.stats["ops_folded"] == 3
    assert [op.type for op in model.predict_net] == ["Reshape", "Relu"]
    assert_models_equivalent(before, model, {"x": np.arange(36, dtype=np.float32)})
    assert not PassManager.parse("fold-constants")(model)[0].modified


def test_a_shape_from_another_blob_is_not_folded() -> None:
    """``Gather(Shape(other), 0)`` as dim 0 of x's Reshape is not x's own dim: left alone."""
    ops = [
        Op("Shape", ["other"], ["s"]),
        Op("Gather", ["s", "i"], ["n"]),
        Op("Concat", ["n", "m"], ["shape", "info"], args={"axis": 0}),
        Op("Reshape", ["x", "shape"], ["y", "old"]),
    ]
    fills = [
        Op("GivenTensorInt64Fill", [], ["i"], args={"shape": [1], "values": [0]}),
        Op("GivenTensorInt64Fill", [], ["m"], args={"shape": [1], "values": [-1]}),
    ]
    model = Model(Net(ops, ["x", "other", "i", "m"], ["y"]), Net(fills))
    assert not PassManager.parse("fold-constants")(model)[0].modified

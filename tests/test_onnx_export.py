"""The exporter on hand-built Caffe2 pairs: IR version pinning, FC as Flatten + Gemm, Caffe2
semantics that need rewriting (Softmax, Slice, legacy broadcast), errors, and the per-blob
comparison naming the first diverging op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from graphtools.convert.fills import fill_op
from graphtools.errors import InvalidNetError, UnsupportedOpError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import (
    compare_blobs_with_onnxruntime,
    compare_with_onnxruntime,
    export_onnx,
    ir_version_for,
)

FLOAT = TensorProto.FLOAT


def _pair(ops: list[Op], inputs: list[str], outputs: list[str], params: dict) -> Model:
    init = Net([fill_op(n, v) for n, v in params.items()], name="init")
    return Model(Net(ops, [*inputs, *params], outputs, name="net"), init)


def _fc_pair() -> tuple[Model, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    params = {
        "w": rng.standard_normal((4, 3, 2, 2), dtype=np.float32),
        "fc_w": rng.standard_normal((5, 4 * 2 * 2), dtype=np.float32),
        "fc_b": rng.standard_normal(5, dtype=np.float32),
    }
    ops = [
        Op("Conv", ["x", "w"], ["c"], args={"kernels": [2, 2]}),
        Op("Relu", ["c"], ["c"]),  # in place: ssa_rewrite gives the second version a new name
        Op("FC", ["c", "fc_w", "fc_b"], ["y"]),
        Op("Softmax", ["y"], ["prob"]),
    ]
    return _pair(ops, ["x"], ["prob"], params), params


@pytest.mark.parametrize("opset", [11, 13, 17, 21])
def test_exported_model_is_valid_and_computes_the_same(opset: int) -> None:
    pair, _ = _fc_pair()
    exported = export_onnx(pair, opset=opset, value_info={"x": (FLOAT, [2, 3, 3, 3])})
    assert exported.opset_import[0].version == opset
    assert exported.ir_version == ir_version_for(opset) < onnx.IR_VERSION
    kinds = [n.op_type for n in exported.graph.node]
    assert kinds == ["Conv", "Relu", "Flatten", "Gemm", "Softmax"]
    outputs = [n.output[0] for n in exported.graph.node]
    assert len(set(outputs)) == len(outputs)  # SSA
    # value info from our shape analysis (the checker's inference agreed with it)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in exported.graph.value_info
    }
    assert shapes["c_1"] == [2, 4, 2, 2] and shapes["y"] == [2, 5]
    x = np.random.default_rng(1).standard_normal((2, 3, 3, 3), dtype=np.float32)
    diffs = compare_with_onnxruntime(exported, pair, {"x": x})
    assert diffs[0].ok, diffs


def test_an_output_written_in_place_keeps_its_name() -> None:
    """``FC -> fc; Relu(fc) -> fc`` returns ``fc``: the export's output is ``fc`` too (its
    first version gets the versioned name), and ``verify --onnx``'s blob-by-blob comparison
    matches it by name. An external input written in place and returned cannot keep its
    name (the graph input holds it) and keeps the versioned one."""
    rng = np.random.default_rng(0)
    params = {
        "w": rng.standard_normal((2, 3), dtype=np.float32),
        "b": rng.standard_normal(2, dtype=np.float32),
    }
    ops = [
        Op("FC", ["x", "w", "b"], ["fc"]),
        Op("Relu", ["fc"], ["fc"]),
        Op("Sigmoid", ["fc"], ["s"]),
    ]
    pair = _pair(ops, ["x"], ["fc", "s"], params)
    exported = export_onnx(pair, value_info={"x": (FLOAT, [4, 3])})
    assert [o.name for o in exported.graph.output] == ["fc", "s"]
    assert [list(n.output) for n in exported.graph.node] == [["fc_1"], ["fc"], ["s"]]
    x = rng.standard_normal((4, 3), dtype=np.float32)
    report = compare_blobs_with_onnxruntime(exported, pair, {"x": x})
    assert report.ok and {d.name for d in report.blobs} == {"fc_1", "fc", "s"}
    expected = run_model(pair, {"x": x})
    from graphtools.onnx import run_onnxruntime

    got = run_onnxruntime(exported, {"x": x})
    assert np.array_equal(got["fc"], expected["fc"])
    np.testing.assert_allclose(got["s"], expected["s"], rtol=1e-6)

    through = _pair([Op("Relu", ["x"], ["x"])], ["x"], ["x"], {})
    exported = export_onnx(through, value_info={"x": (FLOAT, [2])})
    assert [i.name for i in exported.graph.input] == ["x"]
    assert [o.name for o in exported.graph.output] == ["x_1"]


def test_an_if_reading_a_blob_written_in_place_compares_blob_by_blob() -> None:
    """The pair cannot run under the export's names when a branch reads a renamed blob by
    name: it runs under its own, and the blobs it writes twice are compared as outputs."""
    branches = {
        "then_net": Net([Op("Sigmoid", ["fc"], ["out"])], name="then"),
        "else_net": Net([Op("Tanh", ["fc"], ["out"])], name="else"),
    }
    ops = [
        Op("Relu", ["x"], ["fc"]),
        Op("If", ["cond"], ["out"], args=branches),
        Op("Scale", ["fc"], ["fc"], args={"scale": 2.0}),
    ]
    pair = Model(Net(ops, ["x", "cond"], ["fc", "out"], name="net"), Net([], name="init"))
    value_info = {"x": (FLOAT, [1, 3]), "cond": (TensorProto.BOOL, [])}
    exported = export_onnx(pair, value_info=value_info)
    feeds = {"x": np.array([[-1.0, 0.5, 2.0]], np.float32), "cond": np.array(True)}
    assert all(d.ok for d in compare_with_onnxruntime(exported, pair, feeds))
    assert compare_blobs_with_onnxruntime(exported, pair, feeds).ok


def test_dynamic_batch_leaves_the_batch_free() -> None:
    pair, _ = _fc_pair()
    exported = export_onnx(pair, value_info={"x": (FLOAT, [2, 3, 3, 3])}, dynamic_batch=True)
    (graph_input,) = exported.graph.input
    assert graph_input.type.tensor_type.shape.dim[0].dim_param == "N"
    x = np.random.default_rng(2).standard_normal((5, 3, 3, 3), dtype=np.float32)
    assert compare_with_onnxruntime(exported, pair, {"x": x})[0].ok


def test_caffe2_softmax_and_slice_semantics_survive_export() -> None:
    ops = [
        Op("Softmax", ["x"], ["s"], args={"axis": 1}),  # flattened at axis 1
        Op("Slice", ["s"], ["y"], args={"starts": [0, 1, 0], "ends": [-1, -2, 2]}),
    ]
    pair = _pair(ops, ["x"], ["y"], {})
    x = np.random.default_rng(3).standard_normal((2, 3, 4), dtype=np.float32)
    for opset in (11, 17):
        exported = export_onnx(pair, opset=opset, value_info={"x": (FLOAT, [2, 3, 4])})
        diffs = compare_with_onnxruntime(exported, pair, {"x": x})
        assert diffs[0].ok and diffs[0].shape_after == (2, 1, 2), diffs


def test_legacy_broadcast_axis_needs_and_uses_ranks() -> None:
    b = np.arange(3, dtype=np.float32)
    ops = [Op("Add", ["x", "b"], ["y"], args={"broadcast": 1, "axis": 1})]
    pair = _pair(ops, ["x"], ["y"], {"b": b})
    x = np.zeros((2, 3, 4), dtype=np.float32)
    with pytest.raises(UnsupportedOpError, match="rank of 'x'"):
        export_onnx(pair, value_info={"x": (FLOAT, None)})  # type: ignore[dict-item]
    exported = export_onnx(pair, value_info={"x": (FLOAT, [2, 3, 4])})
    assert compare_with_onnxruntime(exported, pair, {"x": x})[0].ok


def test_errors_name_what_is_missing() -> None:
    pair, _ = _fc_pair()
    with pytest.raises(InvalidNetError, match=r"\['x'\]"):
        export_onnx(pair)
    with pytest.raises(UnsupportedOpError, match="opset 5"):
        export_onnx(pair, opset=5, value_info={"x": (FLOAT, [1, 3, 3, 3])})
    odd = _pair([Op("SomethingNew", ["x"], ["y"])], ["x"], ["y"], {})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(SomethingNew\)"):
        export_onnx(odd, value_info={"x": (FLOAT, [1])})


def test_per_blob_comparison_names_the_first_diverging_op() -> None:
    pair, params = _fc_pair()
    exported = export_onnx(pair, value_info={"x": (FLOAT, [2, 3, 3, 3])})
    x = np.random.default_rng(4).standard_normal((2, 3, 3, 3), dtype=np.float32)
    same = compare_blobs_with_onnxruntime(exported, pair, {"x": x})
    assert same.ok and len(same.blobs) >= 3
    # Break the FC's bias in the pair: the FC is the first op whose output differs.
    broken = pair.copy()
    assert broken.init_net is not None
    index = next(i for i, op in enumerate(broken.init_net) if op.outputs == ("fc_b",))
    broken.init_net.replace_op(index, fill_op("fc_b", params["fc_b"] * 3))
    assert not np.allclose(run_model(broken, {"x": x})["prob"], run_model(pair, {"x": x})["prob"])
    report = compare_blobs_with_onnxruntime(exported, broken, {"x": x})
    assert not report.ok
    assert report.first_divergence is not None
    assert report.first_divergence.op_type == "FC" and report.first_divergence.op_index == 2


def test_if_exports_as_onnx_if_with_ssa_branches() -> None:
    """An imported ONNX If goes back out as an If; onnxruntime on the export, onnxruntime on
    the original and our executor on the pair agree on both branches."""
    from onnx import helper

    from graphtools.onnx import import_onnx, run_onnxruntime

    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["t2"])],
        "then",
        [],
        [onnx.ValueInfoProto(name="t2")],
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
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [1])
    x_info = helper.make_tensor_value_info("x", FLOAT, [3])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)
    graph = helper.make_graph([node], "g", [cond, x_info], [onnx.ValueInfoProto(name="y")])
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    original.ir_version = 8
    pair = import_onnx(original)
    exported = export_onnx(pair)  # the pair keeps the graph inputs' types
    (if_node,) = exported.graph.node
    assert if_node.op_type == "If"
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    for flag in (True, False):
        feeds = {"cond": np.array([flag]), "x": x}
        expected = run_onnxruntime(original, feeds)["y"]
        assert np.array_equal(run_onnxruntime(exported, feeds)["y"], expected)
        assert np.array_equal(run_model(pair, feeds)["y"], expected)


@pytest.mark.parametrize("size", [6, 7, 8])
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_caffe_legacy_pooling_exports_as_ceil_mode(op_type: str, size: int) -> None:
    args = {"kernel": 3, "stride": 2, "pad": 1, "legacy_pad": 3}
    pair = _pair([Op(op_type, ["x"], ["y"], args=args)], ["x"], ["y"], {})
    exported = export_onnx(pair, value_info={"x": (FLOAT, [1, 2, size, size])})
    assert exported.graph.node[0].attribute[0].name in {"ceil_mode", "kernel_shape", "pads"}
    x = np.random.default_rng(size).standard_normal((1, 2, size, size), dtype=np.float32)
    diffs = compare_with_onnxruntime(exported, pair, {"x": x})
    assert diffs[0].ok, diffs


def test_a_blob_named_in_value_info_is_an_input_even_if_the_init_net_fills_it() -> None:
    pair = _pair([Op("Relu", ["data"], ["y"])], [], ["y"], {"data": np.zeros(1, np.float32)})
    exported = export_onnx(pair, value_info={"data": (FLOAT, [2, 3])})
    assert [i.name for i in exported.graph.input] == ["data"]
    assert not exported.graph.initializer
    with pytest.raises(InvalidNetError, match="no external outputs"):
        export_onnx(
            _pair([Op("Relu", ["x"], ["y"])], ["x"], [], {}), value_info={"x": (FLOAT, [1])}
        )


# -- what the scan of the real nets found (tests/test_onnx_real_nets.py) -------------------------


def _declare(pair: Model, inputs: list[str]) -> Model:
    with pair.predict_net.edit() as edit:
        edit.set_external_inputs(inputs)
    return pair


def test_an_input_declared_twice_is_one_graph_input() -> None:
    """arakhmat-perception lists its data blob twice among the external inputs."""
    pair, _ = _fc_pair()
    _declare(pair, ["x", *pair.predict_net.external_inputs])
    exported = export_onnx(pair, value_info={"x": (FLOAT, [1, 3, 3, 3])})
    assert [i.name for i in exported.graph.input] == ["x"]


def test_a_declared_input_nobody_reads_is_left_out_unless_typed() -> None:
    """Training nets keep their data queue blob among the external inputs; no op reads it and
    nothing says its type, so it is no graph input (with value_info it stays one)."""
    pair, _ = _fc_pair()
    _declare(pair, ["queue", *pair.predict_net.external_inputs])
    exported = export_onnx(pair, value_info={"x": (FLOAT, [1, 3, 3, 3])})
    assert [i.name for i in exported.graph.input] == ["x"]
    typed = export_onnx(pair, value_info={"x": (FLOAT, [1, 3, 3, 3]), "queue": (FLOAT, [2])})
    assert [i.name for i in typed.graph.input] == ["queue", "x"]


def test_an_op_without_an_exporter_is_refused_before_input_types_are_asked() -> None:
    ops = [
        Op("Relu", ["x"], ["r"]),
        Op("If", ["cond"], ["y"], args={"then_net": Net([Op("WeightedSum", ["r", "s"], ["y"])])}),
        Op("LearningRate", ["r"], ["z"]),
    ]
    pair = Model(Net(ops, ["x", "cond", "s"], ["y", "z"], name="net"))
    with pytest.raises(UnsupportedOpError) as caught:
        export_onnx(pair)  # no value_info: the op types are what the user must hear of first
    message = str(caught.value)
    assert message.startswith("op #0 (WeightedSum), in then_net of op #1 (If): ")
    assert (
        "no ONNX mapping for Caffe2 op type 'WeightedSum'; other op types without one: "
        "LearningRate" in message
    )


def test_compare_feeds_the_undeclared_data_blob_the_export_takes() -> None:
    """A predictor's net reads ``data`` without declaring it; export makes it an input, and
    the comparison feeds it to our side too."""
    pair, _ = _fc_pair()
    _declare(pair, [n for n in pair.predict_net.external_inputs if n != "x"])
    exported = export_onnx(pair, value_info={"x": (FLOAT, [1, 3, 3, 3])})
    x = np.random.default_rng(2).standard_normal((1, 3, 3, 3), dtype=np.float32)
    assert compare_blobs_with_onnxruntime(exported, pair, {"x": x, "extra": x}).ok

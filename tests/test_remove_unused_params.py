"""remove-unused-params: init_net fills nobody reads leave the pair; used ones stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.passes import RemoveUnusedParams
from graphtools.passes.remove_unused_params import unused_params
from graphtools.testing import assert_models_equivalent


def _fill(name: str, value: float) -> Op:
    return Op("GivenTensorFill", [], [name], args={"shape": [2], "values": [value, value]})


def _model() -> Model:
    then_net = Net([Op("Relu", ["nested_w"], ["y"])], ["nested_w"], ["y"], name="then")
    else_net = Net([Op("Copy", ["x"], ["y"])], ["x"], ["y"], name="else")
    init = Net(
        [_fill("w", 1.0), _fill("unused", 2.0), _fill("nested_w", 3.0), _fill("passed", 4.0)],
        external_outputs=["w", "unused", "nested_w", "passed"],
        name="init",
    )
    predict = Net(
        [
            Op("Add", ["x", "w"], ["s"]),
            Op(
                "If",
                ["cond", "nested_w", "x"],
                ["y"],
                args={"then_net": then_net, "else_net": else_net},
            ),
        ],
        ["x", "cond", "w", "unused", "nested_w", "passed"],
        ["s", "y", "passed"],
        name="predict",
    )
    return Model(predict, init)


def test_only_params_nobody_reads_are_removed() -> None:
    model = _model()
    assert unused_params(model) == ["unused"]
    result = RemoveUnusedParams()(model)
    assert result.modified and result.stats == {"params_removed": 1, "init_ops_removed": 1}
    assert model.init_net is not None
    assert [op.outputs[0] for op in model.init_net] == ["w", "nested_w", "passed"]
    assert "unused" not in model.predict_net.external_inputs
    assert "unused" not in model.init_net.external_outputs
    again = RemoveUnusedParams()(model)
    assert not again.modified


def test_a_param_overwritten_before_any_read_is_unused() -> None:
    init = Net([_fill("w", 1.0)], name="init")
    predict = Net([Op("Relu", ["x"], ["w"]), Op("Relu", ["w"], ["y"])], ["x", "w"], ["y"])
    model = Model(predict, init)
    before = model.copy()
    assert PassManager.parse("remove-unused-params")(model)[0].modified
    assert model.init_net is not None and len(model.init_net) == 0
    feeds = {"x": np.arange(2, dtype=np.float32)}
    assert_models_equivalent(before, model, feeds)


def test_unused_initializer_of_a_zoo_model_goes() -> None:
    import onnx

    from graphtools.onnx import import_onnx

    path = Path(onnx.__file__).parent / "backend/test/data/light/light_zfnet512.onnx"
    model = import_onnx(path)
    assert model.init_net is not None
    queue = [n for op in model.init_net for n in op.outputs if "blobs_queue" in n]
    assert queue and set(queue) <= set(unused_params(model))
    before = model.copy()
    PassManager.parse("remove-unused-params")(model)
    names = {n for op in model.init_net for n in op.outputs}
    assert not names & set(queue) and not set(queue) & set(model.predict_net.external_inputs)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)
    assert_models_equivalent(before, model, {"gpu_0/data_0": x})


def _mul_graph(scalars: dict[str, float]) -> Any:
    """``y = x * w`` over four floats, with float32 scalar initializers ``scalars`` besides
    ``w`` that no node reads."""
    from onnx import TensorProto, helper, numpy_helper

    return helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[
            numpy_helper.from_array(np.ones(4, np.float32), "w"),
            *(numpy_helper.from_array(np.array(v, np.float32), n) for n, v in scalars.items()),
        ],
    )


def test_an_initializer_only_training_info_reads_stays(tmp_path: Path) -> None:
    """A learning rate the model's training step reads, and no node, is a used param."""
    import onnx
    from onnx import TensorProto, helper

    from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

    graph = _mul_graph({"lr": 0.1, "unused": 0.2})
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    step = model.training_info.add()
    step.algorithm.CopyFrom(
        helper.make_graph(
            [helper.make_node("Mul", ["w", "lr"], ["w_new"])],
            "sgd_step",
            [],
            [helper.make_tensor_value_info("w_new", TensorProto.FLOAT, [4])],
        )
    )
    step.update_binding.add(key="w", value="w_new")
    onnx.save(model, str(tmp_path / "m.onnx"))
    loaded = load_onnx_model(tmp_path / "m.onnx")
    assert unused_params(loaded) == ["unused"]
    PassManager([RemoveUnusedParams()])(loaded)
    saved = onnx.load(str(save_onnx_model(loaded, tmp_path / "out.onnx")))
    assert [t.name for t in saved.graph.initializer] == ["w", "lr"]
    onnx.checker.check_model(saved, full_check=True)


def test_scales_a_quantization_annotation_names_stay_and_are_not_deduped(tmp_path: Path) -> None:
    """A quantized tensor's scale and zero point are initializers only the graph's
    quantization_annotation names: remove-unused-params dropped them, and dedupe-initializers
    would drop one equal to another, leaving the annotation naming nothing."""
    import onnx
    from onnx import helper

    from graphtools.passes.dedupe_initializers import DedupeInitializers
    from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

    graph = _mul_graph({"y_scale": 0.5, "x_scale": 0.5, "unused": 0.2})
    for tensor, scale in (("x", "x_scale"), ("y", "y_scale")):
        annotation = graph.quantization_annotation.add(tensor_name=tensor)
        annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value=scale)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    loaded = load_onnx_model(tmp_path / "m.onnx")
    assert unused_params(loaded) == ["unused"]
    PassManager([RemoveUnusedParams(), DedupeInitializers()])(loaded)
    saved = onnx.load(str(save_onnx_model(loaded, tmp_path / "out.onnx")))
    assert [t.name for t in saved.graph.initializer] == ["w", "y_scale", "x_scale"]
    named = {
        e.value for a in saved.graph.quantization_annotation for e in a.quant_parameter_tensor_names
    }
    assert named == {"x_scale", "y_scale"}


def test_a_branchs_annotated_scale_is_not_deduped(tmp_path: Path) -> None:
    """An If branch's equal initializers, one of them a scale only the branch's
    quantization_annotation names: dedupe-initializers dropped it from the branch."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from graphtools.passes.dedupe_initializers import DedupeInitializers
    from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

    def branch(name: str, out: str) -> onnx.GraphProto:
        graph = helper.make_graph(
            [helper.make_node("Mul", ["x", "s1"], [out])],
            name,
            [],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [4])],
            initializer=[
                numpy_helper.from_array(np.array(0.5, np.float32), "s1"),
                numpy_helper.from_array(np.array(0.5, np.float32), "s2"),
            ],
        )
        note = graph.quantization_annotation.add(tensor_name=out)
        note.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value="s2")
        return graph

    node = helper.make_node(
        "If", ["c"], ["y"], then_branch=branch("t", "o1"), else_branch=branch("e", "o2")
    )
    inputs = [
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = helper.make_model(
        helper.make_graph([node], "main", inputs, [output]),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    onnx.save(model, str(tmp_path / "m.onnx"))
    loaded = load_onnx_model(tmp_path / "m.onnx")
    PassManager([DedupeInitializers()])(loaded)
    saved = onnx.load(str(save_onnx_model(loaded, tmp_path / "out.onnx")))
    for attribute in saved.graph.node[0].attribute:
        assert [t.name for t in attribute.g.initializer] == ["s1", "s2"], attribute.name

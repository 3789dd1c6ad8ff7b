"""The public Python API takes an ONNX model wherever a new user hands one over: the package's
``load_model``/``save_model``, ``graphtools.onnx``'s save and comparison, and the refusals
where a Caffe2-only function would otherwise give a wrong answer."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphtools
from graphtools.errors import PreconditionError, SerdeError
from graphtools.serde.model_io import save_model_in_place


def _write_model(path: Path, weight: float = 1.0) -> Path:
    """x (2x3) -> Transpose -> Relu -> MatMul(w: 2x4) -> y (3x4): a Transpose whose shape
    Caffe2's rules get wrong (they would keep 2x3), and a weight to change."""
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["x"], ["t"]),
            helper.make_node("Relu", ["t"], ["r"]),
            helper.make_node("MatMul", ["r", "w"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(np.full((2, 4), weight, np.float32), "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "models"
FEEDS = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0}


def test_load_model_loads_an_onnx_file_and_save_model_writes_it_back(tmp_path: Path) -> None:
    source = _write_model(tmp_path / "m.onnx")
    model = graphtools.load_model(source)
    assert model.dialect == "onnx"
    assert [op.type for op in model.predict_net] == ["Transpose", "Relu", "MatMul"]
    written = graphtools.save_model(model, tmp_path / "out.onnx")
    assert written == [tmp_path / "out.onnx"]
    assert onnx.load(written[0]) == onnx.load(source)


def test_save_model_refuses_a_folder_for_onnx_and_an_onnx_path_for_a_pair(
    tmp_path: Path,
) -> None:
    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    with pytest.raises(SerdeError, match="an ONNX model is one file"):
        graphtools.save_model(model, tmp_path)
    # a folder not made yet, named as one: it wrote a file called "newdir"
    with pytest.raises(SerdeError, match="an ONNX model is one file"):
        graphtools.save_model(model, f"{tmp_path / 'newdir'}/")
    assert not (tmp_path / "newdir").exists()
    with pytest.raises(SerdeError, match="binary format only"):
        graphtools.save_model(model, tmp_path / "t.onnx", text=True)
    pair = graphtools.load_model_dir(FIXTURES / "tiny_export")
    with pytest.raises(SerdeError, match="export_onnx"):
        graphtools.save_model(pair, tmp_path / "pair.onnx")
    assert not (tmp_path / "pair.onnx").exists()
    assert not (tmp_path / "t.onnx").exists()


def test_an_onnx_model_is_saved_in_place_over_its_file(tmp_path: Path) -> None:
    source = _write_model(tmp_path / "m.onnx")
    model = graphtools.load_model(source)
    with model.predict_net.edit() as edit:
        edit.remove(1)
        edit.replace_all_uses_with(("r", 1), ("t", 1))
    written, removed = save_model_in_place(model)
    assert (written, removed) == ([source], [])
    assert [n.op_type for n in onnx.load(source).graph.node] == ["Transpose", "MatMul"]


def test_graphtools_onnx_save_onnx_takes_a_loaded_model(tmp_path: Path) -> None:
    from graphtools.onnx import save_onnx

    source = _write_model(tmp_path / "m.onnx")
    save_onnx(graphtools.load_model(source), tmp_path / "copy.onnx")
    assert onnx.load(tmp_path / "copy.onnx") == onnx.load(source)


def test_caffe2_shape_rules_refuse_an_onnx_graph(tmp_path: Path) -> None:
    from graphtools.analysis.shapes import infer_model_shapes
    from graphtools.dialects import op_table

    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    with pytest.raises(PreconditionError, match=r"ONNX dialect.*infer_types"):
        infer_model_shapes(model, {"x": (2, 3)})
    assert op_table(model).infer_types(model)["t"].shape == (3, 2)  # what it points to


def test_compare_with_onnxruntime_runs_an_onnx_dialect_model_on_onnxruntime(
    tmp_path: Path,
) -> None:
    from graphtools.onnx import compare_with_onnxruntime

    export = _write_model(tmp_path / "m.onnx")
    same = graphtools.load_model(export)
    other = graphtools.load_model(_write_model(tmp_path / "other.onnx", weight=2.0))
    assert all(d.ok for d in compare_with_onnxruntime(export, same, FEEDS))
    assert not any(d.ok for d in compare_with_onnxruntime(export, other, FEEDS))


def test_graphtools_verify_stays_the_function_whatever_is_imported() -> None:
    for module in pkgutil.walk_packages(graphtools.__path__, "graphtools."):
        if not module.name.startswith(("graphtools.cli", "graphtools.launch", "graphtools.__main")):
            importlib.import_module(module.name)
    assert callable(graphtools.verify)
    assert graphtools.verify(graphtools.Net([], name="n")) == []


def test_a_written_model_is_told_onnx_by_its_content_and_dumps_as_before(tmp_path: Path) -> None:
    """Our writer put the graph before the IR version, so a written model renamed from
    ``.onnx`` was no longer recognised; an initializer an edit set printed as ``float32``
    until the model was saved and loaded again (then ``FLOAT``)."""
    from graphtools.values import ArrayTensor

    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    with model.predict_net.edit() as edit:
        edit.set_initializer("extra", ArrayTensor(np.ones((2, 2), np.float32)))
    before = graphtools.print_model(model)
    assert "initializer: extra FLOAT 2x2" in before
    graphtools.save_model(model, tmp_path / "written.bin")
    assert (tmp_path / "written.bin").read_bytes()[:1] == b"\x08"  # ir_version, as onnx writes
    again = graphtools.load_model(tmp_path / "written.bin")
    assert again.dialect == "onnx"
    assert graphtools.print_model(again) == before


def test_renamed_inputs_and_outputs_compare_by_position(tmp_path: Path) -> None:
    """The rename pass keeps a model's callers working; the comparisons fed the renamed
    model by the old names (a RuntimeFailure) and reported a renamed output as missing."""
    from graphtools.onnx import compare_with_onnxruntime
    from graphtools.pass_infra import PassManager
    from graphtools.pytest_plugin import assert_models_equivalent

    export = _write_model(tmp_path / "m.onnx")
    before = graphtools.load_model(export)
    renamed = before.copy()
    PassManager.parse("rename{op=0,input=0,to=image},rename{op=2,output=0,to=logits}")(renamed)
    assert renamed.predict_net.external_inputs[0] == "image"
    assert list(renamed.predict_net.external_outputs) == ["logits"]
    assert_models_equivalent(before, renamed)
    assert [d.ok for d in compare_with_onnxruntime(export, renamed, FEEDS)] == [True]
    other = graphtools.load_model(_write_model(tmp_path / "other.onnx", weight=2.0))
    PassManager.parse("rename{op=0,input=0,to=image}")(other)
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(before, other)


def test_a_shape_for_an_input_the_model_lacks_is_refused(tmp_path: Path) -> None:
    from graphtools.errors import GraphToolsError
    from graphtools.onnx.runtime import seeded_inputs

    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    with pytest.raises(GraphToolsError, match=r"'X', which is not an input.*did you mean 'x'"):
        seeded_inputs(model, {"X": (2, 3)}, seed=0)


def test_saving_an_onnx_model_creates_its_folder(tmp_path: Path) -> None:
    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    target = tmp_path / "a" / "b" / "model.onnx"
    assert graphtools.save_model(model, target) == [target]
    assert onnx.load(target) == onnx.load(tmp_path / "m.onnx")


def test_caffe2_only_helpers_refuse_onnx_and_nets_by_name(tmp_path: Path) -> None:
    """Each failed deep inside: protobuf's ValueError, an unpacking TypeError, the executor
    asking for the initializers as missing feeds."""
    from graphtools.executor import run_model

    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    with pytest.raises(SerdeError, match="ONNX model, not a NetDef"):
        graphtools.save_net(model.predict_net, tmp_path / "net.pb")
    with pytest.raises(PreconditionError, match=r"graphtools\.onnx\.runtime\.run_model"):
        run_model(model, FEEDS)
    pair = graphtools.load_model(FIXTURES / "tiny_export")  # a folder loads as load_model_dir
    assert pair.init_net is not None
    with pytest.raises(TypeError, match=r"get_producer_map\(get_ssa\(net\)\[0\]\)"):
        graphtools.get_producer_map(pair.predict_net)
    ssa, _ = graphtools.get_ssa(pair.predict_net)
    assert graphtools.get_producer_map(ssa)


def test_import_onnx_takes_a_loaded_model_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    from graphtools.onnx import import_onnx

    model = graphtools.load_model(_write_model(tmp_path / "m.onnx"))
    before = graphtools.print_model(model)
    pair = import_onnx(model)
    assert pair.dialect == "caffe2" and pair.init_net is not None
    assert graphtools.print_model(model) == before
    with pytest.raises(PreconditionError, match="takes an ONNX model"):
        import_onnx(pair)


def test_prepare_export_declares_the_outputs_to_export() -> None:
    """The documented prepare_export -> export_onnx recipe refused a net declaring no
    outputs ("nothing to export") even when ``outputs=`` named them."""
    from graphtools.analysis.liveness import unread_outputs
    from graphtools.errors import InvalidNetError
    from graphtools.onnx import export_onnx, prepare_export

    pair = graphtools.load_model(FIXTURES / "tiny_export")
    with pair.predict_net.edit() as edit:
        edit.set_external_outputs([])
    unread = unread_outputs(pair.predict_net)
    assert "prob" in unread and len(unread) > 1
    prepared = prepare_export(pair)
    assert list(prepared.model.predict_net.external_outputs) == unread
    exported = export_onnx(prepared.model, value_info=prepared.value_info)
    assert [o.name for o in exported.graph.output] == unread
    chosen = prepare_export(pair, outputs=["conv1"])
    assert list(chosen.model.predict_net.external_outputs) == ["conv1"]
    assert list(pair.predict_net.external_outputs) == []  # the model given is left alone
    with pytest.raises(InvalidNetError, match="'nope' is not a blob"):
        prepare_export(pair, outputs=["nope"])


def test_export_arguments_of_the_wrong_form_are_refused_by_name() -> None:
    """A shape given where ``(elem type, shape)`` belongs raised 'too many values to unpack',
    an unknown element type a KeyError from onnx, a negative dim numpy's error; a shape for a
    misspelt input was ignored and the real input guessed instead; a net declaring no
    outputs did not say how to declare them."""
    from graphtools.errors import InvalidArgumentError, InvalidNetError
    from graphtools.onnx import export_onnx, prepare_export

    pair = graphtools.load_model(FIXTURES / "tiny_export")
    (data,) = [n for n in pair.predict_net.external_inputs if n == "data"]
    shape = prepare_export(pair).value_info[data][1]
    for wrong, message in [
        (tuple(shape), r"give \(onnx elem_type, shape\)"),
        ((99, shape), "element type 99, which onnx does not know"),
        ((TensorProto.FLOAT, [1, -3]), r"has shape \[1, -3\]: each dim is a size"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            export_onnx(pair, value_info={data: wrong})
    exported = export_onnx(pair, value_info={data: (TensorProto.FLOAT, np.asarray(shape))})
    assert [d.dim_value for d in exported.graph.input[0].type.tensor_type.shape.dim] == shape
    with pytest.raises(InvalidArgumentError, match=r"'Data', which is not an input.*'data'"):
        prepare_export(pair, {"Data": shape})
    typed = (TensorProto.FLOAT, shape)
    with pytest.raises(InvalidArgumentError, match=r"names 'Data', which is no blob.*'data'"):
        export_onnx(pair, value_info={"Data": typed})  # the input left untyped, the typo unsaid
    with pytest.raises(InvalidArgumentError, match=r"names 'extra', which is no blob"):
        export_onnx(pair, value_info={data: typed, "extra": typed})
    with pytest.raises(InvalidArgumentError, match=r"is \[1, 3, -32, 32\]: give sizes"):
        prepare_export(pair, {data: (1, 3, -32, 32)})
    with pair.predict_net.edit() as edit:
        edit.set_external_outputs([])
    with pytest.raises(InvalidNetError, match=r"prepare_export\(model, outputs=\[...\]\)"):
        export_onnx(pair, value_info={data: (TensorProto.FLOAT, shape)})


def _counting_loop(path: Path, body_op: str) -> Path:
    """y = x combined (``body_op``: Add, Sub) with each iteration number of an n-trip Loop."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
            helper.make_node(body_op, ["acc_in", "i_f"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        "g",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_loops_made_up_trip_count_runs_its_body_past_the_first_iteration(
    tmp_path: Path,
) -> None:
    """Made-up integers are 0 or 1: a Loop ran its body once at most, with iteration number
    0, so a body adding it and one subtracting it compared equal."""
    from graphtools.onnx.runtime import TRIP_COUNT, seeded_inputs
    from graphtools.pytest_plugin import assert_models_equivalent

    adding = graphtools.load_model(_counting_loop(tmp_path / "add.onnx", "Add"))
    feeds, made = seeded_inputs(adding, {}, seed=0)
    assert int(feeds["n"]) == TRIP_COUNT > 2
    assert "a Loop's trip count" in next(m.reason for m in made if m.name == "n")
    subtracting = graphtools.load_model(_counting_loop(tmp_path / "sub.onnx", "Sub"))
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(adding, subtracting)

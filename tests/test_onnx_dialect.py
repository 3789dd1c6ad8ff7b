"""ONNX as a dialect of the IR: lossless load and save, the versioned view and the rewriter on
ONNX graphs, external data, functions, opaque ops, and the typed refusals of the codec.

Lossless means: the ModelProto written back equals the one read, field by field (initializer
data, opsets, IR version, value_info, functions included), and external data keeps its layout.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_testdata import onnx_package_models, write_external_model

from graphtools.errors import IllegalRewriteError, SerdeError
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.rewriter import Edit
from graphtools.serde.onnx_io import load_onnx_model, onnx_model_files, save_onnx_model
from graphtools.values import ArrayTensor, ValueType
from graphtools.wellformed import REWRITTEN_VALUE, verify


def _saved_equal(source: Path, target: Path) -> None:
    """``source`` loaded and saved to ``target`` gives the same ModelProto."""
    save_onnx_model(load_onnx_model(source), target)
    want = onnx.load(str(source), load_external_data=False)
    got = onnx.load(str(target), load_external_data=False)
    assert got == want


def test_every_backend_node_case_round_trips(onnx_backend_node_cases, tmp_path: Path) -> None:
    assert len(onnx_backend_node_cases) > 1500
    for case in onnx_backend_node_cases:
        model = load_onnx_model(case.path)
        data = onnx_model_files(model, tmp_path / "out.onnx")[0][1]
        assert onnx.ModelProto.FromString(data) == onnx.load(str(case.path)), case.name


def test_the_onnx_wheels_models_round_trip(tmp_path: Path) -> None:
    models = onnx_package_models()
    assert models
    for found in models:
        model = load_onnx_model(found.path)
        data = onnx_model_files(model, tmp_path / "out.onnx")[0][1]
        assert onnx.ModelProto.FromString(data) == onnx.load(str(found.path)), found.name


def test_every_corpus_export_round_trips_with_its_external_data(
    onnx_corpus, tmp_path: Path
) -> None:
    external = 0
    for corpus_model in onnx_corpus:
        target = tmp_path / corpus_model.name / corpus_model.path.name
        target.parent.mkdir()
        _saved_equal(corpus_model.path, target)
        data = corpus_model.path.with_name(corpus_model.path.name + ".data")
        if data.exists() and data.stat().st_size:
            external += 1
            assert (target.parent / data.name).read_bytes() == data.read_bytes()
        onnx.checker.check_model(str(target), full_check=True)
    assert external >= 5  # the dynamo exporter writes weights as external data


def test_external_data_stays_external_with_its_layout(tmp_path: Path) -> None:
    source = write_external_model(tmp_path / "in")
    target = tmp_path / "out" / "ext.onnx"
    target.parent.mkdir()
    _saved_equal(source, target)
    assert (target.parent / "weights.bin").read_bytes() == (
        source.parent / "weights.bin"
    ).read_bytes()
    model = load_onnx_model(target)
    assert model.predict_net.initializers["w"].numpy()[3, 0, 1, 1] == 15


def test_external_data_of_dropped_tensors_is_left_behind(tmp_path: Path) -> None:
    from graphtools.pass_infra import PassManager

    model = load_onnx_model(write_external_model(tmp_path / "in"))
    PassManager.parse("remove-unused-params")(model)
    assert "unused" not in model.predict_net.initializers
    target = tmp_path / "out" / "ext.onnx"
    target.parent.mkdir()
    save_onnx_model(model, target)
    assert (target.parent / "weights.bin").stat().st_size == 16 * 4 + 4 * 4
    loaded = onnx.load(str(target))
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    import onnxruntime

    got = onnxruntime.InferenceSession(str(target)).run(None, {"x": x})[0]
    want = onnxruntime.InferenceSession(str(tmp_path / "in" / "ext.onnx")).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert len(loaded.graph.initializer) == 2


def test_a_branch_s_external_tensor_moves_with_its_data_file(tmp_path: Path) -> None:
    """A data file written anew with fewer tensors moves the others: an unchanged If whose
    branch holds one is written with the branch's tensor at its new offset."""
    import onnxruntime
    from onnx.external_data_helper import convert_model_to_external_data

    from graphtools.pass_infra import PassManager

    value = helper.make_tensor_value_info
    unused = numpy_helper.from_array(np.full(64, 7.0, np.float32), "unused")
    bias = numpy_helper.from_array(np.arange(64, dtype=np.float32) + 100, "bias")
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["t"])],
        "then",
        [],
        [value("t", TensorProto.FLOAT, [64])],
        [bias],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [value("e", TensorProto.FLOAT, [64])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["z"], then_branch=then_branch, else_branch=else_branch)],
        "main",
        [value("x", TensorProto.FLOAT, [64]), value("cond", TensorProto.BOOL, [])],
        [value("z", TensorProto.FLOAT, [64])],
        [unused],  # first in the data file: dropping it moves the branch's tensor
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    convert_model_to_external_data(model, location="w.data", size_threshold=0)
    (tmp_path / "in").mkdir()
    onnx.save(model, str(tmp_path / "in" / "m.onnx"))
    loaded = load_onnx_model(tmp_path / "in" / "m.onnx")
    PassManager.parse("remove-unused-params")(loaded)
    (tmp_path / "out").mkdir()
    save_onnx_model(loaded, tmp_path / "out" / "m.onnx")
    assert (tmp_path / "out" / "w.data").stat().st_size == 64 * 4
    feeds = {"x": np.zeros(64, np.float32), "cond": np.array(True)}
    session = onnxruntime.InferenceSession(str(tmp_path / "out" / "m.onnx"))
    np.testing.assert_array_equal(session.run(None, feeds)[0], np.arange(64) + 100)


def test_saving_never_overwrites_another_models_data_file(tmp_path: Path) -> None:
    from graphtools.pass_infra import PassManager

    source = write_external_model(tmp_path / "in")
    (tmp_path / "out").mkdir()
    save_onnx_model(load_onnx_model(source), tmp_path / "out" / "same.onnx")
    pruned = load_onnx_model(source)
    PassManager.parse("remove-unused-params")(pruned)
    with pytest.raises(SerdeError, match="overwrite this external data file"):
        save_onnx_model(pruned, tmp_path / "out" / "pruned.onnx")
    save_onnx_model(pruned, tmp_path / "out" / "pruned.onnx", external_data=True, size_threshold=0)
    assert (tmp_path / "out" / "pruned.onnx.data").exists()


def test_external_data_outside_the_models_folder_is_refused(tmp_path: Path) -> None:
    path = write_external_model(tmp_path / "in")
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../secret.bin"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(SerdeError, match=r"outside the model's folder.*refusing"):
        load_onnx_model(path)


def _function_model() -> onnx.ModelProto:
    """A model calling a model-local function ``local.Twice`` (x + x) and an opaque
    ``custom.Print`` whose output nobody reads."""
    twice = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    nodes = [
        helper.make_node("Twice", ["x"], ["t"], domain="local"),
        helper.make_node("Print", ["t"], ["logged"], domain="custom", doc_string="side effect"),
        helper.make_node("Twice", ["x"], ["dead"], domain="local"),
        helper.make_node("Identity", ["t"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "functions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
    )
    return helper.make_model(
        graph,
        functions=[twice],
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid("local", 1),
            helper.make_opsetid("custom", 1),
        ],
    )


def test_functions_and_opaque_ops_load_count_and_save(tmp_path: Path) -> None:
    from graphtools.pass_infra import PassManager

    source = tmp_path / "f.onnx"
    source.write_bytes(_function_model().SerializeToString())
    _saved_equal(source, tmp_path / "same.onnx")
    model = load_onnx_model(source)
    records = PassManager.parse("default")(model)
    kept = [(op.type, op.domain) for op in model.predict_net]
    # The dead function call goes; the opaque op stays (it may have effects nobody sees);
    # the Identity writing the output goes, its source taking the output's name.
    assert kept == [("Twice", "local"), ("Print", "custom")]
    assert model.predict_net[0].outputs == ("y",)
    assert any(r.modified for r in records)
    target = tmp_path / "cleaned.onnx"
    save_onnx_model(model, target)
    written = onnx.load(str(target))
    assert [f.name for f in written.functions] == ["Twice"]
    assert written.graph.node[1].doc_string == "side effect"
    assert written.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "N"


def _graph(nodes, inputs=("x",), outputs=("y",), initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _load(tmp_path: Path, proto: onnx.ModelProto, name: str = "m.onnx"):
    path = tmp_path / name
    path.write_bytes(proto.SerializeToString())
    return load_onnx_model(path)


def test_the_view_and_the_rewriter_work_on_an_onnx_graph(tmp_path: Path) -> None:
    model = _load(
        tmp_path,
        _graph(
            [
                helper.make_node("Relu", ["x"], ["a"]),
                helper.make_node("Identity", ["a"], ["b"]),
                helper.make_node("Add", ["b", "w"], ["y"]),
            ],
            initializers=[numpy_helper.from_array(np.ones(2, np.float32), "w")],
        ),
    )
    net = model.predict_net
    assert net.dialect == "onnx"
    assert net.producer(("b", 1)) == 1
    assert [u.op for u in net.uses(("b", 1))] == [2]
    assert [u.op for u in net.uses(("w", 0))] == [2]
    with net.edit() as edit:
        edit.replace_all_uses_with(("b", 1), ("a", 1))
        edit.remove(1)
    assert [op.type for op in net] == ["Relu", "Add"]
    assert net[1].inputs == ("a", "w")
    assert verify(model) == []


def test_missing_optional_inputs_and_outputs_are_no_value(tmp_path: Path) -> None:
    """The empty name of an optional input or output left out is never a value: a node
    writing "" does not feed a node reading "", and removing it is no refusal."""
    nodes = [
        helper.make_node("Dropout", ["x"], ["d", ""]),
        helper.make_node("Clip", ["x", "", "m"], ["y"]),
    ]
    model = _load(
        tmp_path,
        _graph(nodes, initializers=[numpy_helper.from_array(np.array(1, np.float32), "m")]),
    )
    net = model.predict_net
    assert net.uses(("", 1)) == []
    with net.edit() as edit:
        edit.remove(0)
    assert [op.type for op in net] == ["Clip"]
    assert verify(model) == []


def test_an_onnx_value_written_twice_is_a_finding(tmp_path: Path) -> None:
    """What a buggy pass writing a value twice leaves (the unchecked ``insert_op``; an edit
    refuses it when the value is read) is a ``verify`` finding, which a pass manager refuses."""
    model = _load(tmp_path, _graph([helper.make_node("Relu", ["x"], ["y"])]))
    net = model.predict_net
    net.insert_op(1, Op("Neg", ["x"], ["x"]))
    net.insert_op(2, Op("Neg", ["x"], ["y"]))
    found = {(f.kind, f.blob) for f in verify(model)}
    assert found == {(REWRITTEN_VALUE, "x"), (REWRITTEN_VALUE, "y")}
    net.ssa()  # the view's fast path finds the same
    assert {(f.kind, f.blob) for f in verify(model)} == found


def test_value_info_round_trips_as_written_until_the_graph_changes(tmp_path: Path) -> None:
    # Declarations the IR's types cannot hold one by one: an input's, an output's, a name no
    # node computes, a second one for the same value.
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        "g",
        [info("x", TensorProto.FLOAT, [2, 3])],
        [info("y", TensorProto.FLOAT, [2, 3])],
        value_info=[
            info("x", TensorProto.FLOAT, [2, 3]),
            info("ghost", TensorProto.FLOAT, [1]),
            info("a", TensorProto.FLOAT, [2, 3]),
            info("a", TensorProto.FLOAT, [2, "N"]),
            info("y", TensorProto.FLOAT, [2, 3]),
        ],
    )
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    _saved_equal(source, tmp_path / "same.onnx")
    model = load_onnx_model(source)
    PassManager.parse("default")(model)  # drops the Identity: the declarations are new
    save_onnx_model(model, tmp_path / "changed.onnx")
    written = onnx.load(str(tmp_path / "changed.onnx"))
    assert [v.name for v in written.graph.value_info] == []
    copy = load_onnx_model(source).copy()  # a copy is not the file as read: written anew
    save_onnx_model(copy, tmp_path / "copy.onnx")
    assert [v.name for v in onnx.load(str(tmp_path / "copy.onnx")).graph.value_info] == ["a"]


def test_initializers_are_defined_and_types_follow_renames(tmp_path: Path) -> None:
    model = _load(
        tmp_path,
        _graph(
            [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Neg", ["a"], ["y"])],
            initializers=[numpy_helper.from_array(np.ones(2, np.float32), "w")],
        ),
    )
    net = model.predict_net
    with net.edit() as edit:
        edit.set_type("a", ValueType(TensorProto.FLOAT, (2,)))
    with net.edit() as edit:
        edit.rename(("a", 1), "sum")
        edit.rename(("w", 0), "weight")
    assert net.types["sum"].shape == (2,)
    assert "a" not in net.types  # the name is free: a later value "a" gets no stale type
    assert set(net.initializers) == {"weight"}
    assert net[0].inputs == ("x", "weight")
    assert verify(model) == []
    target = tmp_path / "renamed.onnx"
    save_onnx_model(model, target)
    onnx.checker.check_model(str(target), full_check=True)
    written = onnx.load(str(target))
    assert [v.name for v in written.graph.value_info] == ["sum"]


def test_initializer_edits_change_only_what_they_name(tmp_path: Path) -> None:
    """An edit setting an initializer to the tensor it holds, or dropping one the net does not
    hold, changes nothing (same revision); a drop and an addition keep the others in order."""
    weights = [numpy_helper.from_array(np.full(2, i, np.float32), f"w{i}") for i in range(3)]
    nodes = [helper.make_node("Add", ["x", f"w{i}"], [f"a{i}"]) for i in range(3)]
    nodes.append(helper.make_node("Sum", ["a0", "a1", "a2"], ["y"]))
    model = _load(tmp_path, _graph(nodes, initializers=weights))
    net = model.predict_net
    held = net.initializers["w1"]
    revision = net.revision
    with net.edit() as edit:
        edit.set_initializer("w1", held)
        edit.set_initializer("absent", None)
    assert not edit.changed and net.revision == revision
    with net.edit() as edit:
        edit.set_initializer("w3", ArrayTensor(np.zeros(2, np.float32)))
    assert edit.changed and list(net.initializers) == ["w0", "w1", "w2", "w3"]
    assert net.initializers["w1"] is held
    with net.edit() as edit:
        edit.set_initializer("w1", ArrayTensor(np.full(2, 1, np.float32)))
    assert edit.changed and net.initializers["w1"] is not held


def test_a_constant_replaces_a_value_only_with_its_producer_removed(tmp_path: Path) -> None:
    model = _load(
        tmp_path,
        _graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]),
    )
    net = model.predict_net
    with pytest.raises(IllegalRewriteError, match="must be removed"), net.edit() as edit:
        edit.replace_with_constant(("a", 1), ArrayTensor(np.zeros(2, np.float32)))
    with (
        pytest.raises(IllegalRewriteError, match="would see the value of no op"),
        net.edit() as edit,
    ):
        edit.remove(0)
    with net.edit() as edit:
        edit.remove(0)
        edit.replace_with_constant(("a", 1), ArrayTensor(np.zeros(2, np.float32)))
    assert [op.type for op in net] == ["Neg"]
    assert set(net.initializers) == {"a"}
    assert verify(model) == []


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda data: data[: len(data) // 2], "not an ONNX model"),
        (lambda data: data.replace(b"relu_out", b"relu\xff\xfeut"), "is not UTF-8"),
        (lambda data: b"", "not an ONNX model"),
    ],
)
def test_broken_files_are_typed_errors_naming_the_file(tmp_path: Path, mutate, words: str) -> None:
    proto = _graph(
        [
            helper.make_node("Relu", ["x"], ["relu_out"]),
            helper.make_node("Neg", ["relu_out"], ["y"]),
        ]
    )
    path = tmp_path / "broken.onnx"
    path.write_bytes(mutate(proto.SerializeToString()))
    with pytest.raises(SerdeError, match=words) as info:
        load_onnx_model(path)
    assert "broken.onnx" in str(info.value)


def test_graphs_nested_too_deep_are_refused(tmp_path: Path) -> None:
    inner = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["out"])],
        "leaf",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
    )
    leaf = inner
    for depth in range(20):
        node = helper.make_node("If", ["c"], [f"o{depth}"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph(
            [node],
            f"level{depth}",
            [],
            [helper.make_tensor_value_info(f"o{depth}", TensorProto.FLOAT, [2])],
        )
    graph = helper.make_graph(
        list(inner.node),
        "top",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        list(inner.output),
    )
    path = tmp_path / "deep.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    with pytest.raises(SerdeError, match="nest more than 16 deep"):
        load_onnx_model(path)


def test_the_onnx_codec_keeps_the_caffe2_round_trip(tmp_path: Path) -> None:
    """Loading an ONNX model leaves the Caffe2 codec as it was: a NetDef pair still saves
    byte for byte (the dialects share the IR, not their codecs)."""
    from conftest import FIXTURES

    from graphtools.serde import load_model_dir, save_model

    folder = FIXTURES / "models" / "tiny_export"
    model = load_model_dir(folder)
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    written = save_model(model, target)
    for path in written:
        assert path.read_bytes() == (folder / path.name).read_bytes()


def _relu_add(tmp_path: Path) -> Model:
    """``a = Relu(x); y = Add(a, w)`` with ``w`` an initializer."""
    return _load(
        tmp_path,
        _graph(
            [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "w"], ["y"])],
            initializers=[numpy_helper.from_array(np.ones(2, np.float32), "w")],
        ),
    )


def _assert_refused(net: Net, change: Callable[[Edit], object], match: str) -> None:
    """The edit ``change`` makes of ``net`` is refused (``match``) and the net kept."""
    before = [(op.type, op.inputs, op.outputs) for op in net]
    with pytest.raises(IllegalRewriteError, match=match), net.edit() as edit:
        change(edit)
    assert [(op.type, op.inputs, op.outputs) for op in net] == before


def test_a_rewire_to_a_name_the_graph_does_not_have_is_refused(tmp_path: Path) -> None:
    """An ONNX main graph starts with its inputs and initializers only: a rewire to any
    other name@0 would leave a read of nothing (a Caffe2 net may read the workspace)."""
    model = _relu_add(tmp_path)
    net = model.predict_net
    refused = pytest.raises(IllegalRewriteError, match="no input, initializer or value of that")
    with refused, net.edit() as edit:
        edit.replace_all_uses_with(("a", 1), ("ghost", 0))
    assert [op.inputs for op in net] == [("x",), ("a", "w")]
    with net.edit() as edit:  # an input and an initializer are values the graph starts with
        edit.replace_all_uses_with(("a", 1), ("x", 0))
    with net.edit() as edit:
        edit.replace_all_uses_with(("x", 0), ("w", 0))
    assert [op.inputs for op in net] == [("w",), ("w", "w")]


def test_an_edit_leaving_a_read_of_nothing_is_refused(tmp_path: Path) -> None:
    """An ONNX main graph reads only what it defines: an added op reading a misspelt name, or
    the initializer of a value still read dropped, made a model onnxruntime refuses, and
    save_model wrote it. Refused, the graph kept; dropping it with its readers is fine."""
    model = _relu_add(tmp_path)
    net = model.predict_net

    def refused(change: Callable[[Edit], object], match: str) -> None:
        _assert_refused(net, change, match)

    refused(lambda e: e.insert(2, [Op("Neg", ["ghost"], ["n"])]), "'Neg' it adds reads 'ghost'")
    refused(lambda e: e.set_initializer("w", None), r"drops the initializer 'w', which op #1 \(Add")

    def drop_keeping_the_read(edit: Edit) -> None:
        edit.set_initializer("w", None)
        edit.set_op(1, Op("Add", ["a", "w"], ["y"]))

    refused(drop_keeping_the_read, "'Add' it adds reads 'w', which no graph input")
    assert list(net.initializers) == ["w"]
    with net.edit() as edit:  # its reader replaced by one reading a value the graph has
        edit.set_initializer("w", None)
        edit.set_op(1, Op("Add", ["a", "a"], ["y"]))
    assert list(net.initializers) == [] and [op.inputs for op in net] == [("x",), ("a", "a")]
    with net.edit() as edit:  # an added op reading one written by another added op
        edit.insert(2, [Op("Neg", ["y"], ["n"]), Op("Neg", ["n"], ["m"])])
    assert [op.type for op in net] == ["Relu", "Add", "Neg", "Neg"]


def _if_reading_w(tmp_path: Path) -> Model:
    """``y = If(sum(x) != 0, then: x + w, else: -x)`` with ``w`` an initializer of the main
    graph that only the then-branch reads (by name: no top-level read)."""
    then = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    return _load(
        tmp_path,
        _graph(
            [
                helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                helper.make_node("Cast", ["s"], ["c"], to=TensorProto.BOOL),
                helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
            ],
            initializers=[numpy_helper.from_array(np.ones(2, np.float32), "w")],
        ),
    )


def test_dropping_an_initializer_a_branch_reads_is_refused(tmp_path: Path) -> None:
    """A branch reads the main graph's initializer by name, which is no top-level read: it
    kept the drop from being seen; a replacement If's branch reads what it read too."""
    net = _if_reading_w(tmp_path).predict_net
    match = r"drops the initializer 'w', which op #2 \(If\) still reads"
    _assert_refused(net, lambda edit: edit.set_initializer("w", None), match)

    def drop_and_replace_the_if(edit: Edit) -> None:
        edit.set_initializer("w", None)
        edit.set_op(2, net[2].replace(inputs=list(net[2].inputs)))

    _assert_refused(net, drop_and_replace_the_if, "'If' it adds reads 'w'")
    assert list(net.initializers) == ["w"]


def test_the_read_check_follows_replacements_renames_and_bodies(tmp_path: Path) -> None:
    """The edit as a whole decides what is defined: a replaced writer no longer writes its old
    name, a renamed value is read by its new name (and not its old one), and the body of a
    replacement If reads what its branches read."""
    model = _relu_add(tmp_path)
    net = model.predict_net

    def replace_writer_and_read_its_old_name(edit: Edit) -> None:
        edit.set_op(0, Op("Relu", ["x"], ["b"]))
        edit.set_op(1, Op("Add", ["b", "w"], ["y"]))
        edit.insert(2, [Op("Neg", ["a"], ["q"])])

    _assert_refused(net, replace_writer_and_read_its_old_name, "'Neg' it adds reads 'a'")

    def rename_and_read_the_old_name(edit: Edit) -> None:
        edit.rename(("a", 1), "b")
        edit.insert(2, [Op("Abs", ["a"], ["q"])])

    _assert_refused(net, rename_and_read_the_old_name, "'Abs' it adds reads 'a'")
    with net.edit() as edit:  # the new names are the values' names
        edit.rename(("a", 1), "b")
        edit.rename(("w", 0), "w3")
        edit.insert(2, [Op("Abs", ["b"], ["q"]), Op("Abs", ["w3"], ["r"])])
    assert [op.inputs for op in net] == [("x",), ("b", "w3"), ("b",), ("w3",)]


def test_an_edit_writing_a_name_the_graph_holds_is_refused(tmp_path: Path) -> None:
    """ONNX graphs name each value once: an inserted second writer, a rename onto another
    value, an initializer or an input, a replacement writing an input in place: each edit is
    refused and the graph kept; a replacement of the writer writing its name is fine."""
    model = _relu_add(tmp_path)
    net = model.predict_net

    def refused(change: Callable[[Edit], object], match: str) -> None:
        _assert_refused(net, change, match)

    once = "names each value once"
    refused(lambda e: e.insert(2, [Op("Neg", ["y"], ["a"])]), rf"op #0 \(Relu\) .*{once}")
    refused(lambda e: e.rename(("a", 1), "y"), rf"writes 'y', which op #1 \(Add\) holds.*{once}")
    refused(lambda e: e.rename(("a", 1), "w"), f"a graph input or initializer .*{once}")
    refused(lambda e: e.set_op(0, Op("Relu", ["x"], ["x"])), f"input or initializer .*{once}")
    refused(lambda e: e.rename(("x", 0), "a"), rf"cannot rename x@0 to 'a'.*{once}")
    refused(
        lambda e: e.insert(0, [Op("Neg", ["x"], ["n"]), Op("Neg", ["x"], ["n"])]),
        f"'Neg' at #0 \\(#1 of its group\\) writes 'n', which the inserted op 'Neg' at #0 .*{once}",
    )
    with net.edit() as edit:  # a replacement of the writer writes its name
        edit.set_op(0, Op("Neg", ["x"], ["a"]))
    assert [op.type for op in net] == ["Neg", "Add"]
    with net.edit() as edit:  # names the edit frees may be taken in it: a swap
        edit.rename(("x", 0), "w")
        edit.rename(("w", 0), "x")
    assert list(net.external_inputs) == ["w"] and list(net.initializers) == ["x"]
    assert [op.inputs for op in net] == [("w",), ("a", "x")]


def test_a_name_declared_twice_in_the_interface_round_trips_as_written(tmp_path: Path) -> None:
    """An output that is also the graph's input, and an output listed twice, each with a
    declaration of its own: one type per name gave the output the input's."""
    x_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4], doc_string="the input")
    x_out = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"], doc_string="an echo")
    y_first = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4], doc_string="first")
    y_second = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4], doc_string="second")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [x_in], [y_first, x_out, y_second]
    )
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    _saved_equal(source, tmp_path / "same.onnx")
    written = onnx.load(str(tmp_path / "same.onnx"))
    assert [v.doc_string for v in written.graph.output] == ["first", "an echo", "second"]

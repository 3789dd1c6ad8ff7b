"""The generic passes on ONNX models, checked by onnxruntime.

The default pipeline (and ``fold-constants``, ``in-branches``) runs on every PyTorch export of
the corpus and on every backend node case: the output passes ``check_model(full_check=True)``,
keeps the opset, and onnxruntime gives the input model's outputs. The rules each pass follows on
ONNX (identities, inference-mode Dropout, opaque ops, outer values returned by a body, unused
initializers, constant folding and its size guard) have cases of their own.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest

pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
from onnx import TensorProto, helper, numpy_helper
from onnx_corpus import seeded_inputs

from graphtools.errors import PassError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

RTOL, ATOL = 1e-4, 1e-5


def _session(path: Path) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _run(path: Path, feeds: dict[str, Any]) -> list[Any]:
    return _session(path).run(None, feeds)


def _assert_same(want: list[Any], got: list[Any], where: str) -> None:
    assert len(want) == len(got), where
    for a, b in zip(want, got, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=where)
        else:
            np.testing.assert_array_equal(b, a, err_msg=where)


def _nodes(path: Path) -> Counter[str]:
    return Counter(
        node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node
    )


@pytest.mark.parametrize("pipeline", ["default,in-branches", "fold-constants,default,in-branches"])
def test_pipelines_on_every_corpus_export(onnx_corpus, tmp_path: Path, pipeline: str) -> None:
    identities_left = []
    for corpus_model in onnx_corpus:
        model = load_onnx_model(corpus_model.path)
        opsets = dict(model.opset_imports)
        PassManager.parse(pipeline)(model)
        assert dict(model.opset_imports) == opsets
        target = tmp_path / corpus_model.name / corpus_model.path.name
        target.parent.mkdir()
        save_onnx_model(model, target)
        onnx.checker.check_model(str(target), full_check=True)
        before, after = _nodes(corpus_model.path), _nodes(target)
        for recurrent in ("LSTM", "GRU"):
            assert after[recurrent] == before[recurrent], corpus_model.name
        identities_left.append((corpus_model.name, after["Identity"]))
        feeds = seeded_inputs(corpus_model)
        _assert_same(_run(corpus_model.path, feeds), _run(target, feeds), corpus_model.name)
    assert all(count == 0 for _, count in identities_left), identities_left


def test_the_default_pipeline_on_every_backend_node_case(
    onnx_backend_node_cases, tmp_path: Path
) -> None:
    """A case the pipeline leaves as it was is saved as it was (lossless, tested elsewhere);
    one it changes must still give the case's outputs in onnxruntime."""
    changed = 0
    for case in onnx_backend_node_cases:
        model = load_onnx_model(case.path)
        records = PassManager.parse("default")(model)
        if not any(record.modified for record in records):
            continue
        changed += 1
        target = tmp_path / f"{case.name}.onnx"
        save_onnx_model(model, target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onnx.checker.check_model(str(target), full_check=True)
        feeds = dict(case.inputs)
        if not all(isinstance(v, np.ndarray) for v in feeds.values()):
            continue
        try:
            want = _run(case.path, feeds)
        except Exception:  # onnxruntime lacks the op or type: nothing to compare against
            continue
        _assert_same(want, _run(target, feeds), case.name)
    assert changed > 100


def _model(
    tmp_path: Path,
    nodes,
    initializers=(),
    outputs=("y",),
    name="m.onnx",
    opset=17,
    output_shape=(2, 3),
):
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(output_shape)) for n in outputs],
        list(initializers),
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    path.write_bytes(proto.SerializeToString())
    return path


def _checked(tmp_path: Path, path: Path, pipeline: str) -> tuple[Model, Path]:
    """Run ``pipeline`` on the model at ``path``, save it, and check it gives the same."""
    model = load_onnx_model(path)
    PassManager.parse(pipeline)(model)
    target = tmp_path / ("out_" + path.name)
    save_onnx_model(model, target)
    onnx.checker.check_model(str(target), full_check=True)
    feeds = {"x": np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)}
    _assert_same(_run(path, feeds), _run(target, feeds), path.name)
    return model, target


def _types(model: Model) -> list[str]:
    return [op.type for op in model.predict_net]


def test_dropout_goes_in_inference_mode_and_stays_in_training(tmp_path: Path) -> None:
    false = numpy_helper.from_array(np.array(False), "training")
    path = _model(
        tmp_path,
        [
            helper.make_node("Dropout", ["x", "", "training"], ["d"]),
            helper.make_node("Relu", ["d"], ["y"]),
        ],
        [false],
    )
    model, _ = _checked(tmp_path, path, "default")
    assert _types(model) == ["Relu"]
    assert not model.predict_net.initializers  # the training flag went with the Dropout
    true = numpy_helper.from_array(np.array(True), "training")
    path = _model(
        tmp_path,
        [
            helper.make_node("Dropout", ["x", "", "training"], ["d"]),
            helper.make_node("Relu", ["d"], ["y"]),
        ],
        [true],
        name="training.onnx",
    )
    model = load_onnx_model(path)
    PassManager.parse("default")(model)
    assert _types(model) == ["Dropout", "Relu"]


def test_a_dropout_mask_that_is_read_keeps_the_dropout(tmp_path: Path) -> None:
    path = _model(
        tmp_path,
        [helper.make_node("Dropout", ["x"], ["y", "mask"])],
        outputs=("y", "mask"),
    )
    model = load_onnx_model(path)
    PassManager.parse("default")(model)
    assert _types(model) == ["Dropout"]


def test_an_identity_returning_an_outer_value_from_a_loop_body_stays(tmp_path: Path) -> None:
    """onnxruntime refuses a body whose output is an outer value itself; the Identity that
    passes it through must stay (onnx-ir's cleanup drops it)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["x"], ["scan_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [2, 3]),
        ],
    )
    trip = numpy_helper.from_array(np.array(2, np.int64), "trip")
    cond = numpy_helper.from_array(np.array(True), "cond")
    path = _model(
        tmp_path,
        [helper.make_node("Loop", ["trip", "cond"], ["y"], body=body)],
        [trip, cond],
        output_shape=(2, 2, 3),
    )
    model, _ = _checked(tmp_path, path, "default,in-branches")
    (loop,) = model.predict_net
    ((_, body_net),) = loop.nested_nets()
    assert [op.type for op in body_net] == ["Identity", "Identity"]


def test_identities_inside_an_if_branch_go(tmp_path: Path) -> None:
    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph(
            [
                helper.make_node(op, ["x"], [f"{name}_a"]),
                helper.make_node("Identity", [f"{name}_a"], [f"{name}_out"]),
            ],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [2, 3])],
        )

    flag = numpy_helper.from_array(np.array(True), "flag")
    path = _model(
        tmp_path,
        [
            helper.make_node(
                "If",
                ["flag"],
                ["y"],
                then_branch=branch("then", "Relu"),
                else_branch=branch("else", "Neg"),
            )
        ],
        [flag],
    )
    model, _ = _checked(tmp_path, path, "default,in-branches")
    (if_op,) = model.predict_net
    bodies = {name: [op.type for op in net] for name, net in if_op.nested_nets()}
    assert bodies == {"then_branch": ["Relu"], "else_branch": ["Neg"]}


def test_fold_constants_folds_a_shape_chain_and_keeps_its_size_guard(tmp_path: Path) -> None:
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    big = numpy_helper.from_array(np.array([1000, 1000], np.int64), "big_shape")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Cast", ["b1"], ["bf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["shape", "shape"], ["squared"]),
        helper.make_node("Div", ["squared", "shape"], ["back"]),
        helper.make_node("Reshape", ["x", "back"], ["r"]),
        helper.make_node("ConstantOfShape", ["big_shape"], ["zeros"]),
        helper.make_node("ReduceSum", ["zeros"], ["total"], keepdims=0),
        helper.make_node("Add", ["r", "total"], ["r2"]),
        helper.make_node("Reshape", ["r2", "s"], ["r3"]),
        helper.make_node("Mul", ["r3", "bf"], ["y"]),
    ]
    initializers = [
        shape,
        big,
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
    ]
    model, target = _checked(
        tmp_path, _model(tmp_path, nodes, initializers), "fold-constants,default"
    )
    # The static Shape and everything computed from it and from initializers is folded; the
    # million-zero ConstantOfShape stays computed (folding it would grow the file by 8 MB).
    assert _types(model) == ["Reshape", "ConstantOfShape", "ReduceSum", "Add", "Reshape", "Mul"]
    assert target.stat().st_size < 2000


def test_rename_from_producer_renames_a_graph_input_read_twice(tmp_path: Path) -> None:
    """A graph input two nodes read could not be renamed at all: the refusal pointed back to
    the rename pass itself, and from_producer said, in Caffe2's words, that the init_net
    probably wrote it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    path = _model(tmp_path, nodes)
    model = load_onnx_model(path)
    with pytest.raises(PassError, match="an input of the net: from_producer=True renames it"):
        PassManager.parse("rename{op=0,input=0,to=image}")(model)
    PassManager.parse("rename{op=0,input=0,to=image,from_producer=true}")(model)
    target = tmp_path / "renamed.onnx"
    save_onnx_model(model, target)
    result = onnx.load(str(target))
    onnx.checker.check_model(result, full_check=True)
    assert [i.name for i in result.graph.input] == ["image"]
    assert [list(n.input) for n in result.graph.node] == [["image"], ["r", "image"]]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    got = onnxruntime.InferenceSession(str(target)).run(None, {"image": x})[0]
    np.testing.assert_allclose(got, np.maximum(x, 0) + x)


def test_a_caffe2_only_pass_refuses_an_onnx_model_by_name(tmp_path: Path) -> None:
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])])
    model = load_onnx_model(path)
    with pytest.raises(PassError, match="remove-reshape-for-fc"):
        PassManager.parse("remove-reshape-for-fc")(model)
    assert _types(model) == ["Relu"]


@pytest.mark.parametrize(
    ("spec", "renamed"),
    [
        ("rename{op=0,input=0,to=image}", ("x", "image")),
        ("rename{op=0,input=1,to=weight}", ("w", "weight")),
        ("rename{op=0,output=0,to=hidden}", ("y", "hidden")),
        ("rename{op=1,output=0,to=logits}", ("z", "logits")),
    ],
    ids=["graph-input", "initializer", "value-info", "graph-output"],
)
def test_rename_carries_types_and_initializers_to_the_new_name(
    tmp_path: Path, spec: str, renamed: tuple[str, str]
) -> None:
    """A renamed graph input or output keeps its declared type, an initializer its data and
    an intermediate its value_info: the result passes the checker and computes the same."""
    weight = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(weight, "w")],
        value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    source = tmp_path / "m.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(source))
    loaded = load_onnx_model(source)
    PassManager.parse(spec)(loaded)
    target = tmp_path / "renamed.onnx"
    save_onnx_model(loaded, target)
    result = onnx.load(str(target))
    onnx.checker.check_model(result, full_check=True)
    old, new = renamed
    declared = {
        v.name: v for v in (*result.graph.input, *result.graph.output, *result.graph.value_info)
    }
    names = {*declared, *(i.name for i in result.graph.initializer)}
    assert new in names and old not in names
    if old != "w":
        assert declared[new].type == next(
            v.type for v in (*graph.input, *graph.output, *graph.value_info) if v.name == old
        )
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    feed = {"image" if old == "x" else "x": x}
    got = onnxruntime.InferenceSession(str(target)).run(None, feed)[0]
    np.testing.assert_allclose(got, np.maximum(x @ weight, 0), rtol=1e-6)

"""The CLI on ONNX models (issue 18, items 5 and 7): show, ssa, run, verify, diff, draw and exec
take ``.onnx`` files (told by content too), run rewrites the ONNX graph itself, verify proves
it with onnxruntime, and hostile files end in one ``error:`` line."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
from conftest import FIXTURES, assert_one_error_line, publish_passes, run_cli
from onnx import TensorProto, external_data_helper, helper, numpy_helper
from onnx_check import check, graph_model

from graphtools.errors import GraphToolsError, UsageError
from graphtools.ir import Model
from graphtools.onnx import compare_with_onnxruntime
from graphtools.onnx.runtime import RuntimeFailure, run_model, seeded_inputs
from graphtools.pass_infra import Pass, PassManager, PassResult
from graphtools.pytest_plugin import assert_models_equivalent
from graphtools.serde import load_model
from graphtools.serde.onnx_io import load_onnx_model
from graphtools.testing import HALF_TOLERANCES

TINY = FIXTURES / "models" / "tiny_export"


# -- models -------------------------------------------------------------------------------------


def _save(model: Any, path: Path, *, external: bool = False) -> Path:
    if external:
        onnx.save(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=path.name + ".data",
            size_threshold=0,
        )
    else:
        onnx.save(model, str(path))
    return path


def _mlp_in(folder: Path, *, external: bool) -> Path:
    """``_mlp`` as ``m.onnx`` in a folder of its own (made), where its data file goes too."""
    folder.mkdir()
    return _mlp(folder / "m.onnx", external=external)


def _mlp(path: Path, *, external: bool = False, identity: bool = True) -> Path:
    """x[N, 4] -> MatMul -> Identity -> Relu -> y[N, 3], plus an unused initializer."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3), dtype=np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((3,), dtype=np.float32), "unused"),
    ]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm")]
    if identity:
        nodes.append(helper.make_node("Identity", ["m"], ["i"], name="id"))
    nodes.append(helper.make_node("Relu", ["i" if identity else "m"], ["y"], name="relu"))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests"
    )
    model.ir_version = 8
    return _save(model, path, external=external)


def _with_function_and_domain(path: Path) -> Path:
    """A model calling a model-local function of domain ``local`` and holding an If."""
    fn = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    then_graph = helper.make_graph(
        [helper.make_node("Neg", ["t"], ["o1"])],
        "then",
        [],
        [helper.make_tensor_value_info("o1", TensorProto.FLOAT, [2])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Identity", ["t"], ["o2"])],
        "else",
        [],
        [helper.make_tensor_value_info("o2", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("Twice", ["x"], ["t"], domain="local", name="twice"),
        helper.make_node("ReduceSum", ["t"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    graph = helper.make_graph(
        nodes,
        "fn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[fn],
    )
    model.ir_version = 8
    return _save(model, path)


def _same_model(first: Path, second: Path) -> None:
    """Equal ModelProtos field by field (external data references included) and equal
    external data files."""
    a = onnx.load(str(first), load_external_data=False)
    b = onnx.load(str(second), load_external_data=False)
    assert a == b
    for tensor in a.graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:
            location = {e.key: e.value for e in tensor.external_data}["location"]
            assert (first.parent / location).read_bytes() == (second.parent / location).read_bytes()


# -- show, ssa, diff, draw -----------------------------------------------------------------------


def test_show_summarises_an_onnx_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _with_function_and_domain(tmp_path / "f.onnx")
    code, out, _ = run_cli(capsys, "show", str(source))
    assert code == 0
    assert "IR version 8, opsets: ai.onnx 17, local 1" in out
    assert "local::Twice" in out  # op of another domain, qualified
    assert "function local::Twice: 1 nodes" in out
    assert "nested graph: node %3 (If) then_branch 'then': 1 nodes" in out
    assert "input   x      FLOAT[2]" in out
    assert "initializers: 1, 1 values, 4B" in out
    code, out, _ = run_cli(capsys, "show", str(source), "--json")
    data = json.loads(out)
    assert data["op_types"]["local::Twice"] == 1 and data["op_types"]["Neg"] == 1
    assert data["functions"] == [{"domain": "local", "name": "Twice", "nodes": 1}]
    assert data["opset_imports"] == {"ai.onnx": 17, "local": 1}
    assert data["ops"] == 4 and data["ops_with_nested"] == 6


def test_show_types_symbolic_dims_and_external_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx", external=True)
    code, out, _ = run_cli(capsys, "show", str(source))
    assert code == 0
    assert "FLOAT[N, 4]" in out and "FLOAT[N, 3]" in out
    assert "initializers: 2, 15 values, 60B, external data in m.onnx.data" in out
    assert "producer tests" in out
    code, out, _ = run_cli(capsys, "show", str(source), "--params")
    assert "w            FLOAT 4x3  m.onnx.data" in out
    code, out, _ = run_cli(capsys, "show", str(source), "--ops", "1:3")
    assert out.splitlines() == [
        "%1 Identity(m@1) -> i@1 name='id'",
        "%2 Relu(i@1) -> y@1 name='relu'",
    ]
    code, out, _ = run_cli(capsys, "show", str(source), "--full")
    assert out.startswith("model ir_version=8 opsets=ai.onnx:17 producer='tests'\nnet graph ")
    assert "  initializer: w FLOAT 4x3 in m.onnx.data" in out
    assert "  type: x FLOAT[N, 4]" in out
    code, out, _ = run_cli(capsys, "show", str(source), "--full", "--ops", "1:3")
    assert out.splitlines() == [  # --full with --ops: those ops (it printed the whole dump)
        "%1 Identity(m@1) -> i@1 name='id'",
        "%2 Relu(i@1) -> y@1 name='relu'",
    ]


@pytest.mark.parametrize("ir_version", [3, 8])
def test_show_lists_an_initializer_input_a_user_may_feed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ir_version: int
) -> None:
    # From IR 4 an initializer listed as an input is a default onnxruntime lets a user feed
    # over: an input of the model (show left it out). IR 3 lists every initializer so.
    source = graph_model(
        tmp_path / "m.onnx",
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        {"x": (TensorProto.FLOAT, [2, 2]), "w": (TensorProto.FLOAT, [2, 2])},
        {"y": (TensorProto.FLOAT, [2, 2])},
        {"w": np.ones((2, 2), np.float32)},
    )
    model = onnx.load(str(source))
    model.ir_version = ir_version
    onnx.save(model, str(source))
    code, out, _ = run_cli(capsys, "show", str(source))
    assert code == 0
    assert ("input   w      FLOAT[2, 2] (default: its initializer)" in out) == (ir_version > 3)
    code, out, _ = run_cli(capsys, "show", str(source), "--json")
    inputs = json.loads(out)["inputs"]
    assert [(i["name"], i["initializer_default"]) for i in inputs] == [("x", False)] + [
        ("w", True)
    ] * (ir_version > 3)


def test_show_prints_names_and_types_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lowercase symbolic dim (``s77``) came out as ``FLOAT16\\[s77, 3]``: the rich
    markup escape the plain console never reads. Names that look like markup stay too."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["[bold]x"], ["y[/]"])],
        "g",
        [helper.make_tensor_value_info("[bold]x", TensorProto.FLOAT16, ["s77", 3])],
        [helper.make_tensor_value_info("y[/]", TensorProto.FLOAT16, ["s77", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    source = tmp_path / "m.onnx"
    onnx.save(model, str(source))
    code, out, _ = run_cli(capsys, "show", str(source))
    assert code == 0 and "\\" not in out
    assert "input   [bold]x  FLOAT16[s77, 3]" in out
    assert "output  y[/]     FLOAT16[s77, 3]" in out


def test_an_onnx_model_is_told_by_its_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx")
    renamed = tmp_path / "model.pb"
    shutil.copy(source, renamed)
    code, out, _ = run_cli(capsys, "show", str(renamed), "--json")
    assert code == 0 and json.loads(out)["format"] == "onnx"
    code, out, _ = run_cli(capsys, "ssa", str(renamed), "--json")
    assert code == 0
    assert {"blob": "m@1", "written_by": "%0", "read_by": ["%1"]} in json.loads(out)
    code, _, err = run_cli(capsys, "show", str(renamed), "--init", str(TINY / "init_net.pbtxt"))
    assert code == 2
    assert_one_error_line(err, "is an ONNX model")


def test_printer_prints_onnx_attributes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = helper.make_node(
        "ConstantOfShape",
        ["shape"],
        ["y"],
        value=numpy_helper.from_array(np.array([1], dtype=np.int64), "value"),
    )
    graph = helper.make_graph(
        [node],
        "c",
        [helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = _save(model, tmp_path / "c.onnx")
    code, out, _ = run_cli(capsys, "show", str(path), "--ops")
    assert code == 0
    assert out.strip() == "%0 ConstantOfShape(shape@0) -> y@1 {value=<tensor 'value' INT64 1>}"
    code, out, _ = run_cli(capsys, "show", str(path), "--full")
    assert "  type: y INT64[...]" in out  # rank unknown: not INT64[?], one dim of unknown size
    shown = list(itertools.pairwise(run_cli(capsys, "show", str(path))[1].split()))
    assert ("shape", "INT64[2]") in shown
    assert ("y", "INT64[...]") in shown


def test_an_output_beside_its_input_gets_a_data_file_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written beside its input, a model read the input's data file: a later ``--in-place``
    run of the input rewrote that file and broke the output (onnxruntime: offset beyond the
    file). The output now gets ``<output>.data``, and the input's files stay as they were."""
    import onnxruntime as ort

    source = _mlp_in(tmp_path / "in", external=True)
    data_file = source.parent / "m.onnx.data"
    original = data_file.read_bytes()
    target = source.parent / "clean.onnx"
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(target))
    assert code == 0, err
    assert "clean.onnx gets its own external data file" in err
    written = onnx.load(str(target), load_external_data=False)
    locations = {
        entry.value
        for tensor in written.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    assert "m.onnx.data" not in locations  # small tensors inline, as --external-data writes
    assert data_file.read_bytes() == original
    code, _, err = run_cli(capsys, "run", str(source), "-p", "optimize", "--in-place")
    assert code == 0, err
    onnx.checker.check_model(str(target), full_check=True)
    ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "o" / "c.onnx"))
    assert code == 0 and "its own external data" not in err  # its data file was written beside it


def test_diff_says_which_op_writes_a_value_another_op_now_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fused op takes over its source's output name: the reader's input then reads the same
    name from another op, which the diff says (not ``a@1 -> a@1``), in ONNX's words."""
    io = ({"x": (TensorProto.FLOAT, [2])}, {"y": (TensorProto.FLOAT, [2])})
    first = graph_model(
        tmp_path / "a.onnx",
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])],
        *io,
    )
    second = graph_model(
        tmp_path / "b.onnx",
        [helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])],
        *io,
    )
    code, out, err = run_cli(capsys, "diff", str(first), str(second))
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "- graph %0 Relu -> a",
        "+ graph %0 Sigmoid -> a",
        "~ graph %1 -> %1 Neg: input 0 a@1 (of %0 Relu) -> a@1 (of %0 Sigmoid)",
        "graph: 1 removed, 1 added, 1 changed (0 renamed blobs); initializers: 0 removed, 0 added",
    ]


def test_diff_and_draw_on_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _mlp(tmp_path / "m.onnx")
    cleaned = tmp_path / "clean" / "clean.onnx"
    assert run_cli(capsys, "run", str(source), "-o", str(cleaned))[0] == 0
    code, out, _ = run_cli(capsys, "diff", str(source), str(cleaned))
    assert code == 1
    assert "- graph %1 Identity -> i" in out
    assert "- initializer unused" in out
    code, out, _ = run_cli(capsys, "diff", str(source), str(source), "--json")
    assert code == 0 and json.loads(out)["same"] is True
    code, _, _ = run_cli(capsys, "draw", str(source), "-o", str(tmp_path / "m.dot"))
    assert code == 0 and "%1 Identity" in (tmp_path / "m.dot").read_text()
    code, _, _ = run_cli(
        capsys, "draw", str(source), "--diff", str(cleaned), "-o", str(tmp_path / "d.dot")
    )
    assert code == 0 and "removed (red): 1" in (tmp_path / "d.dot").read_text()


def test_diff_of_a_model_and_its_import_says_the_dialects_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx")
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(tmp_path / "pair"))[0] == 0
    code, _, err = run_cli(capsys, "diff", str(source), str(tmp_path / "pair"))
    assert code == 1
    assert "is an ONNX model and" in err and "a Caffe2 pair: op types" in err
    assert "verify --onnx X.onnx PAIR" in err
    code, _, err = run_cli(capsys, "diff", str(source), str(source))
    assert (code, err) == (0, "")


def test_diff_says_when_only_the_models_metadata_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Structurally the same (exit 0), but a deployment diff says the metadata moved."""
    source = _mlp(tmp_path / "m.onnx")
    proto = onnx.load(str(source))
    helper.set_model_props(proto, {"version": "2", "team": "vision"})
    tagged = tmp_path / "tagged.onnx"
    onnx.save(proto, str(tagged))
    code, out, _ = run_cli(capsys, "diff", str(source), str(tagged))
    assert code == 0
    assert "~ metadata 'team': None -> 'vision'" in out
    assert "same structure (metadata differs: 2 keys)" in out
    code, out, _ = run_cli(capsys, "diff", str(source), str(tagged), "--json")
    assert json.loads(out)["metadata"][0] == ["team", None, "vision"]


def test_diff_says_the_ir_version_and_descriptive_fields_that_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # diff said "same structure" for a model whose IR version changed (an initializer input
    # is a default from IR 4, a constant before) or whose producer and doc string did.
    source = _mlp(tmp_path / "m.onnx")
    proto = onnx.load(str(source))
    proto.producer_version = "2.0"
    proto.graph.doc_string = "cleaned"
    described = tmp_path / "described.onnx"
    onnx.save(proto, str(described))
    code, out, _ = run_cli(capsys, "diff", str(source), str(described))
    assert code == 0
    assert "~ producer_version: '' -> '2.0'" in out
    assert "~ graph doc_string: '' -> 'cleaned'" in out
    assert "same structure (2 descriptive fields differ)" in out
    proto.ir_version = 7
    onnx.save(proto, str(described))
    code, out, _ = run_cli(capsys, "diff", str(source), str(described))
    assert code == 1
    assert "~ IR version 8 -> 7" in out and out.rstrip().endswith("; IR version changed")
    code, out, _ = run_cli(capsys, "diff", str(source), str(described), "--json")
    assert json.loads(out)["ir_versions"] == [8, 7]


def _branchy(
    path: Path,
    *,
    value: float = 1.0,
    then_op: str = "Relu",
    opset: int = 17,
    batch: int | str = 2,
    branch_weight: float | None = None,
) -> Path:
    """y = If(c, then: then_op(x), else: x) + a Constant of ``value``; with
    ``branch_weight`` the then-branch is x * an initializer of the branch holding it."""
    then = helper.make_graph(
        [helper.make_node(then_op, ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
    )
    if branch_weight is not None:
        then = helper.make_graph(
            [helper.make_node("Mul", ["x", "bw"], ["t"])],
            "then",
            [],
            [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.full(3, branch_weight, np.float32), "bw")],
        )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
            helper.make_node(
                "Constant", [], ["k"], value=numpy_helper.from_array(np.full(3, value, np.float32))
            ),
            helper.make_node("Add", ["b", "k"], ["y"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return _save(model, path)


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"value": 5.0}, "Constant: arg value <tensor FLOAT 3> #"),
        ({"then_op": "Neg"}, "If: arg then_branch <net then> #"),
        ({"opset": 18}, "~ opsets ai.onnx:17 -> ai.onnx:18"),
        ({"batch": "N"}, "~ graph type of x: FLOAT[2, 3] -> FLOAT[N, 3]"),
    ],
    ids=["constant-value", "branch-body", "opset", "input-shape"],
)
def test_diff_sees_what_changes_the_outputs_or_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], line: str
) -> None:
    first = _branchy(tmp_path / "a.onnx")
    second = _branchy(tmp_path / "b.onnx", **change)
    code, out, _ = run_cli(capsys, "diff", str(first), str(second))
    assert code == 1 and line in out, out
    code, out, _ = run_cli(capsys, "diff", str(first), str(_branchy(tmp_path / "c.onnx")))
    assert code == 0 and "same structure" in out


def test_diff_digests_tell_branches_apart_by_their_initializers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _branchy(tmp_path / "a.onnx", branch_weight=1.0)
    second = _branchy(tmp_path / "b.onnx", branch_weight=2.0)
    code, out, _ = run_cli(capsys, "diff", str(first), str(second))
    (line,) = [line for line in out.splitlines() if "then_branch" in line]
    before, after = line.split(" -> ")[-2:]
    assert code == 1 and before.split("#")[-1] != after.split("#")[-1], line


# -- run ------------------------------------------------------------------------------------------


def test_run_rewrites_the_onnx_graph_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp_in(tmp_path / "in", external=True)
    target = tmp_path / "out" / "clean.onnx"
    code, out, err = run_cli(capsys, "run", str(source), "-o", str(target), "--diff")
    assert code == 0, err
    assert f"wrote {target} (opsets ai.onnx 17; IR 8)" in out
    assert "- graph %1 Identity -> i" in out
    written = onnx.load(str(target), load_external_data=False)
    assert [n.op_type for n in written.graph.node] == ["MatMul", "Relu"]
    assert [t.name for t in written.graph.initializer] == ["w"]
    assert written.opset_import == onnx.load(str(source)).opset_import
    onnx.checker.check_model(str(target), full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 4), dtype=np.float32)
    before, after = load_onnx_model(source), load_onnx_model(target)
    np.testing.assert_array_equal(run_model(before, {"x": x})["y"], run_model(after, {"x": x})["y"])


@pytest.mark.parametrize("external", [False, True])
def test_run_with_no_pipeline_gives_the_same_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], external: bool
) -> None:
    source = _mlp_in(tmp_path / "in", external=external)
    folder = source.parent
    target = tmp_path / "out" / "m.onnx"
    assert run_cli(capsys, "run", str(source), "-p", "", "-o", str(target))[0] == 0
    _same_model(source, target)
    functions = _with_function_and_domain(folder / "f.onnx")
    assert run_cli(capsys, "run", str(functions), "-p", "", "-o", str(tmp_path / "out"))[0] == 0
    _same_model(functions, tmp_path / "out" / "f.onnx")


def test_run_never_overwrites_the_input_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx", external=True)
    data = tmp_path / "m.onnx.data"
    original = data.read_bytes()
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(source))
    assert code == 2
    assert_one_error_line(err, "refusing to overwrite the input")
    # another file in the same folder (a tensor gone, or none) does not touch the input's
    # data file, nor read it: it writes its own
    for name, pipeline in (("other.onnx", "default"), ("same.onnx", "")):
        code, _, err = run_cli(
            capsys, "run", str(source), "-p", pipeline, "-o", str(tmp_path / name)
        )
        assert code == 0, err
        assert data.read_bytes() == original
    code, out, _ = run_cli(capsys, "run", str(source), "--in-place")
    assert code == 0 and f"wrote {source}" in out
    written = onnx.load(str(source), load_external_data=False).graph
    assert [n.op_type for n in written.node] == ["MatMul", "Relu"]
    assert [t.name for t in written.initializer] == ["w"]  # the unused one dropped...
    assert data.read_bytes() == original  # ...and its bytes left: another model may read them
    onnx.checker.check_model(str(tmp_path / "same.onnx"), full_check=True)  # still whole


def test_exec_never_writes_its_npz_over_the_models_data_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx", external=True)
    data = tmp_path / "m.onnx.data"
    original = data.read_bytes()
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones((1, 4), np.float32))
    for target in (data, source, feeds):
        code, _, err = run_cli(
            capsys, "exec", str(source), "--feeds", str(feeds), "-o", str(target)
        )
        assert code == 2
        assert_one_error_line(err, f"refusing to overwrite the input {target}")
    assert data.read_bytes() == original


def test_run_options_on_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _mlp(tmp_path / "m.onnx")
    target = tmp_path / "o.onnx"
    code, out, _ = run_cli(
        capsys, "run", str(source), "-o", str(target), "--print-after-each", "--time-passes"
    )
    assert code == 0
    assert "// after remove-identity-ops (round 1)" in out
    assert "time per pass" in out
    code, out, _ = run_cli(
        capsys, "run", str(source), "-o", str(tmp_path / "e.onnx"), "--external-data", "--json"
    )
    data = json.loads(out)
    assert (
        code == 0
        and data["format"] == "onnx"
        and data["checker"] == {"input": None, "output": None}
    )
    assert data["written"] == [str(tmp_path / "e.onnx")]  # w is under 1 KB: stays inline
    for flag, argv in {
        "--text/--binary": ["--text"],
        "--shapes": ["--shapes", "x=1x4"],
        "--test-mode": ["--test-mode"],
    }.items():
        code, _, err = run_cli(capsys, "run", str(source), "-o", str(target), *argv)
        assert code == 2
        assert_one_error_line(err, flag, "not for an ONNX model")


def test_dynamic_batch_and_opset_on_onnx_are_stages_around_the_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--opset converts first (convert-opset), --dynamic-batch runs make-dynamic-batch once the
    pipeline reached its fixpoint (tests/test_make_dynamic_batch.py tests what it makes)."""
    source = _mlp(tmp_path / "m.onnx")
    code, out, err = run_cli(
        capsys,
        "run",
        str(source),
        "-o",
        str(tmp_path / "o.onnx"),
        "--dynamic-batch",
        "--opset",
        "18",
        "-v",
        "-v",
    )
    assert code == 0, err
    rounds = [line.split()[2] for line in out.splitlines() if line.startswith("round ")]
    assert rounds[0] == "convert-opset:" and rounds[-1] == "make-dynamic-batch:"
    assert "opsets ai.onnx 18" in out


def test_run_a_folder_of_onnx_models_and_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    _mlp(models / "a.onnx", external=True)
    _mlp(models / "b.onnx")
    shutil.copytree(TINY, models / "tiny")
    code, out, err = run_cli(capsys, "run", str(models), "-o", str(tmp_path / "out"), "-j", "2")
    assert code == 0, out + err
    assert "3 ok" in out
    for name in ("a", "b"):
        written = tmp_path / "out" / name / f"{name}.onnx"
        assert [n.op_type for n in onnx.load(str(written)).graph.node] == ["MatMul", "Relu"]
    assert (tmp_path / "out" / "a" / "a.onnx.data").is_file()
    assert (tmp_path / "out" / "tiny" / "predict_net.pbtxt").is_file()


def test_a_pair_run_to_onnx_still_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "tiny.onnx"
    code, out, err = run_cli(capsys, "run", str(TINY), "-o", str(target))
    assert code == 0, err
    assert "opset 17" in out
    onnx.checker.check_model(str(target), full_check=True)


# -- the checker ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Retype(Pass):
    """Turns the first Relu into another op type (a bug a pass could have)."""

    name: ClassVar[str] = "retype-relu"
    to: str = "Sigmoid"

    def call(self, model: Model) -> PassResult:
        net = model.predict_net
        for index, op in enumerate(net):
            if op.type == "Relu":
                net.replace_op(index, op.replace(type=self.to))
                return PassResult(model, True, {})
        return PassResult(model, False, {})


def _publish_retype(monkeypatch: pytest.MonkeyPatch) -> None:
    publish_passes(
        monkeypatch, {"Retype": _Retype}, **{"retype-relu": "graphtools_test_plugin:Retype"}
    )


def test_an_output_the_checker_rejects_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish_retype(monkeypatch)
    source = _mlp(tmp_path / "m.onnx")
    target = tmp_path / "o.onnx"
    code, _, err = run_cli(
        capsys, "run", str(source), "-p", "retype-relu{to=NoSuchOp}", "-o", str(target)
    )
    assert code == 2
    assert_one_error_line(err, "fails onnx's checker although the input passed it", "NoSuchOp")
    assert not target.exists()


def test_an_input_the_checker_rejects_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx.load(str(_mlp(tmp_path / "m.onnx")))
    model.graph.node[2].op_type = "NoSuchOp"  # Relu: unknown to the checker, opaque to us
    source = _save(model, tmp_path / "bad.onnx")
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "o.onnx"))
    assert code == 0
    assert "warning: onnx's checker rejects" in err and "ran anyway" in err
    assert "warning: onnx's checker rejects the result too" in err
    written = onnx.load(str(tmp_path / "o.onnx"))
    assert [n.op_type for n in written.graph.node] == ["MatMul", "NoSuchOp"]


def test_the_input_check_runs_while_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker's child is at work when the load starts (the two overlap), and its verdict
    still reaches the run. The check here waits for the load to begin, so the child cannot
    be done before it."""
    import multiprocessing
    import time

    from graphtools.cli import onnx_files, onnx_run

    model = onnx.load(str(_mlp(tmp_path / "m.onnx")))
    model.graph.node[2].op_type = "NoSuchOp"
    source = _save(model, tmp_path / "bad.onnx")
    load_began = tmp_path / "load-began"
    check = onnx_files._check

    def check_once_the_load_began(path: str) -> str | None:
        deadline = time.monotonic() + 60
        while not load_began.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return check(path)

    children_at_load: list[int] = []
    load = onnx_run.load_onnx_file

    def watched_load(path: str, data: bytes | None = None) -> Model:
        children_at_load.append(len(multiprocessing.active_children()))
        load_began.touch()
        return load(path, data)

    monkeypatch.setattr(onnx_files, "_check", check_once_the_load_began)
    monkeypatch.setattr(onnx_run, "load_onnx_file", watched_load)
    code, out, _ = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "o.onnx"), "--json")
    assert code == 0
    assert children_at_load == [1]
    assert "NoSuchOp" in json.loads(out)["checker"]["input"]
    assert not multiprocessing.active_children()


def _piped(source: Path, pipe: Path, *argv: str) -> Any:
    """``graphtools *argv`` in a child process while a thread writes ``source`` into the
    named pipe ``pipe`` once."""
    import subprocess
    import sys
    import threading

    os.mkfifo(pipe)

    def feed() -> None:
        with pipe.open("wb") as writer:
            writer.write(source.read_bytes())

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    done = subprocess.run(
        [sys.executable, "-m", "graphtools", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    feeder.join(timeout=5)
    return done


@pytest.mark.parametrize("name", ["piped.onnx", "piped"])
def test_a_model_read_from_a_pipe_is_read_once(tmp_path: Path, name: str) -> None:
    """``run <(...) -o out.onnx``: the input is a named pipe, which can be read once; the
    load and the checker share what was read (each opening it would hang the run). Without
    the ``.onnx`` suffix (``/dev/fd/63``) its format is told from what was read."""
    source = _mlp(tmp_path / "m.onnx")
    pipe = tmp_path / name
    target = tmp_path / "out.onnx"
    done = _piped(source, pipe, "run", str(pipe), "-o", str(target), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["checker"] == {"input": None, "output": None}
    assert data["census"]["bytes"]["before"] == source.stat().st_size
    onnx.checker.check_model(str(target), full_check=True)


def test_a_piped_model_whose_data_is_elsewhere_is_refused_by_name(tmp_path: Path) -> None:
    """``run <(cat m.onnx)``: the data file was looked for in /dev/fd, and the error named
    /dev/fd/m.onnx.data with nothing about the pipe."""
    source = _mlp_in(tmp_path / "in", external=True)
    (tmp_path / "p").mkdir()
    pipe = tmp_path / "p" / "fd"
    done = _piped(source, pipe, "run", str(pipe), "-o", str(tmp_path / "out.onnx"))
    assert done.returncode == 2
    assert_one_error_line(done.stderr, "read from a pipe", "m.onnx.data", "give the model file")


@pytest.mark.parametrize("command", ["show", "verify"])
def test_show_and_verify_read_a_pipe_without_a_suffix(tmp_path: Path, command: str) -> None:
    done = _piped(_mlp(tmp_path / "m.onnx"), tmp_path / "fd", command, str(tmp_path / "fd"))
    assert done.returncode == 0, done.stderr
    assert ("MatMul" if command == "show" else "outputs equal") in done.stdout


def test_a_failed_run_stops_the_input_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that fails after the input check started (here: the load) leaves no child at
    work, however long the check would take."""
    import multiprocessing
    import time

    from graphtools.cli import onnx_files

    monkeypatch.setattr(onnx_files, "_check", lambda source: time.sleep(60))
    source = tmp_path / "broken.onnx"
    source.write_bytes(b"\x08\x07" + b"\xff" * 40)
    start = time.monotonic()
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, str(source))
    assert not multiprocessing.active_children()
    assert time.monotonic() - start < 30  # did not wait for the check


def test_a_cancelled_pending_child_is_stopped() -> None:
    """``Pending.cancel`` kills a child still at work; a result asked for comes back."""
    import multiprocessing
    import time

    from graphtools.cli.onnx_files import Pending

    with Pending(time.sleep, 60) as slow:
        pass
    assert slow.result() == ("cancelled", None)
    assert slow._child.exitcode == -signal.SIGKILL
    assert not multiprocessing.active_children()
    with Pending(pow, 2, 10) as quick:
        assert quick.result() == (None, 1024)
    assert quick.result() == (None, 1024)  # leaving the block keeps the result


def test_an_interrupted_wait_stops_the_child() -> None:
    """Ctrl-C while the result is awaited kills the child at once instead of waiting for it."""
    import multiprocessing
    import time

    from graphtools.cli.onnx_files import Pending

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    start = time.monotonic()
    try:
        with Pending(time.sleep, 60) as slow:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                slow.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - start < 30
    assert slow._child.exitcode == -signal.SIGKILL
    assert not multiprocessing.active_children()


def _interrupt_myself() -> int:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.1)  # time for a handler to run, were there one
    return 42


def test_the_child_leaves_ctrl_c_to_its_parent() -> None:
    """Ctrl-C reaches the whole process group: the child ignores it (the parent stops it),
    rather than dying with a KeyboardInterrupt traceback on the user's terminal."""
    from graphtools.cli.onnx_files import Pending

    assert Pending(_interrupt_myself).result() == (None, 42)


def test_no_process_to_spare_computes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the system refuses a child (fork fails), the result is computed in this process
    instead of the error escaping (multiprocessing itself leaks the descriptors of the
    launch then; ours are closed)."""
    from graphtools.cli.onnx_files import Pending

    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    pending = Pending(pow, 2, 10)
    assert pending.result() == (None, 1024)
    assert pending._child is None and pending._reader is None


# -- verify and exec ------------------------------------------------------------------------------


def test_verify_onnx_with_onnxruntime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _mlp(tmp_path / "m.onnx", external=True)
    code, out, err = run_cli(capsys, "verify", str(source), "-p", "default")
    assert code == 0, out + err
    assert "input x: float32[1, 4] (declared: dim 0 ('N') taken as 1" in out
    assert "pipeline default: outputs equal" in out and "onnxruntime" in out
    code, out, _ = run_cli(
        capsys,
        "verify",
        str(source),
        "--shapes",
        "x=5x4",
        "--json",
        "--save-outputs",
        str(tmp_path / "r.npz"),
    )
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "equal"
    assert data["inputs"][0]["shape"] == [5, 4]
    assert data["outputs"][0]["name"] == "y" and data["outputs"][0]["size"] == 15
    cleaned = tmp_path / "clean" / "clean.onnx"
    assert run_cli(capsys, "run", str(source), "-o", str(cleaned))[0] == 0
    code, out, _ = run_cli(
        capsys, "verify", str(cleaned), "-p", "", "--load-outputs", str(tmp_path / "r.npz")
    )
    assert code == 0 and "outputs equal" in out
    code, _, err = run_cli(capsys, "verify", str(source), "--shapes", "x=5x7")
    assert code == 2
    assert_one_error_line(err, "size 7 at dim 1", "declares 4")


def _embedding(path: Path) -> Path:
    """ids[n] (int64) -> Gather of a 10x4 table -> Identity -> y[n, 4]: made-up ids are 0
    or 1, so only one's own ids reach the other rows."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["rows"]),
            helper.make_node("Identity", ["rows"], ["y"]),
        ],
        "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [table],
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_verify_feeds_runs_onnxruntime_on_the_given_arrays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --feeds on an ONNX model: both runs take the user's token ids (rows 7, 9, 3 of
    the table come out), reported as given; arrays that do not fit are refused by name."""
    source = _embedding(tmp_path / "m.onnx")
    feeds, saved = tmp_path / "ids.npz", tmp_path / "saved.npz"
    np.savez(feeds, ids=np.array([7, 9, 3], np.int64))
    code, out, err = run_cli(
        capsys, "verify", str(source), "--feeds", str(feeds), "--save-outputs", str(saved)
    )
    assert code == 0, err
    assert "input ids: int64[3] (given: --feeds)" in out and "outputs equal" in out
    with np.load(saved) as recorded:
        table = np.arange(40, dtype=np.float32).reshape(10, 4)
        np.testing.assert_array_equal(recorded["outputs/y"], table[[7, 9, 3]])
    refusals = {
        "int32": (np.array([7], np.int32), "fed int32 values, and the model takes int64"),
        "rank": (np.array([[7]], np.int64), "has 2 dims; the model declares 1"),
    }
    for case, (values, message) in refusals.items():
        np.savez(tmp_path / f"{case}.npz", ids=values)
        code, _, err = run_cli(
            capsys, "verify", str(source), "--feeds", str(tmp_path / f"{case}.npz")
        )
        assert code == 2, case
        assert_one_error_line(err, "'ids'", message)
    np.savez(tmp_path / "misspelt.npz", idz=np.array([7], np.int64))
    code, _, err = run_cli(capsys, "verify", str(source), "--feeds", str(tmp_path / "misspelt.npz"))
    assert code == 2
    assert_one_error_line(err, "'idz', which is not an input of the model (did you mean 'ids'?)")
    code, _, err = run_cli(
        capsys, "verify", str(source), "--feeds", str(feeds), "--shapes", "ids=3"
    )
    assert code == 2
    assert_one_error_line(err, "'ids' is given both a shape and values")


def test_recorded_inputs_that_do_not_fit_are_blamed_on_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --load-outputs file whose inputs have another element type or rank: onnxruntime
    refused the pipeline's result, and verify said the pipeline had made a model it cannot
    run. The file is named now."""
    source = _embedding(tmp_path / "m.onnx")
    recorded = tmp_path / "rec.npz"
    np.savez(tmp_path / "ids.npz", ids=np.array([7, 9, 3], np.int64))
    assert (
        run_cli(
            capsys,
            "verify",
            str(source),
            "--feeds",
            str(tmp_path / "ids.npz"),
            "--save-outputs",
            str(recorded),
        )[0]
        == 0
    )
    with np.load(recorded) as saved:
        arrays = dict(saved)
    cases = {
        "int32": (arrays["inputs/ids"].astype(np.int32), "fed int32 values"),
        "rank": (arrays["inputs/ids"].reshape(1, 3), "has 2 dims; the model declares 1"),
    }
    for case, (ids, message) in cases.items():
        np.savez(tmp_path / f"{case}.npz", **{**arrays, "inputs/ids": ids})
        code, _, err = run_cli(
            capsys, "verify", str(source), "--load-outputs", str(tmp_path / f"{case}.npz")
        )
        assert code == 2, case
        assert_one_error_line(err, "the --load-outputs file's inputs do not fit the model", message)


def test_a_size_given_for_a_symbolic_dim_holds_for_every_input_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """a and b both [N, 4], joined by a Concat: --shapes a=5x4 (or a's --feeds) left b at
    1x4, and onnxruntime refused the original model; b takes N=5 now, said so, and two sizes
    for N are refused."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
        "cat",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
    )
    source = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx"
    )
    code, out, err = run_cli(capsys, "verify", str(source), "--shapes", "a=5x4")
    assert code == 0, err
    assert "input b: float32[5, 4] (declared: dim 0 ('N') 5, as given for 'a')" in out
    np.savez(tmp_path / "a.npz", a=np.ones((3, 4), np.float32))
    code, out, err = run_cli(capsys, "verify", str(source), "--feeds", str(tmp_path / "a.npz"))
    assert code == 0, err
    assert "input b: float32[3, 4]" in out
    code, _, err = run_cli(capsys, "verify", str(source), "--shapes", "a=5x4,b=3x4")
    assert code == 2
    assert_one_error_line(err, "'a' and 'b' are given 5 and 3 for the dim the model names 'N'")


def test_show_of_several_models_shows_each_past_one_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show a.onnx broken.onnx c.onnx stopped at the broken one (c never shown; with --json
    nothing at all on stdout): each is shown, the broken one is an error line and an entry
    of its own, and the exit code says something failed."""
    first, third = _embedding(tmp_path / "a.onnx"), _mlp(tmp_path / "c.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    paths = [str(first), str(broken), str(third)]
    code, out, err = run_cli(capsys, "show", *paths)
    assert code == 2
    assert f"# {third}" in out and "onnx model mlp" in out
    assert_one_error_line(err, str(broken), "not an ONNX model")
    code, out, _ = run_cli(capsys, "show", *paths, "--json")
    assert code == 2
    documents = json.loads(out)
    assert [("error" in d, d["path"]) for d in documents] == [
        (False, paths[0]),
        (True, paths[1]),
        (False, paths[2]),
    ]


def test_a_folder_of_one_onnx_model_is_that_model_for_run_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run refused the folder of one ONNX model ("several models are written to a folder")
    and, with an .onnx output, took it for a Caffe2 pair, where show, verify and exec take it
    as that model; a folder of two stays a batch."""
    folder = tmp_path / "one"
    folder.mkdir()
    _embedding(folder / "m.onnx")
    code, _, err = run_cli(capsys, "run", str(folder), "-o", str(tmp_path / "out.onnx"))
    assert code == 0, err
    assert [n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node] == ["Gather"]
    code, _, err = run_cli(capsys, "verify", str(folder), "--save-outputs", str(tmp_path / "s.npz"))
    assert code == 0, err
    shutil.copy(folder / "m.onnx", folder / "n.onnx")
    code, _, err = run_cli(capsys, "run", str(folder), "-o", str(tmp_path / "batch"))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "batch").iterdir()) == ["m", "n"]


def test_in_place_leaves_a_shared_data_file_readable_by_the_other_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """a.onnx and b.onnx read one data file; run a.onnx --in-place dropped a's unused
    initializer and compacted the file, and b.onnx then failed to load (its offsets gone).
    The file is left as it is: b still runs as before, a runs as its pipeline made it."""
    folder = tmp_path / "m"
    a = _mlp_in(folder, external=True)
    b = folder / "b.onnx"
    onnx.save(onnx.load(str(a), load_external_data=False), str(b))  # the same data file
    data = folder / "m.onnx.data"
    before = data.read_bytes()
    feeds = {"x": np.ones((2, 4), np.float32)}
    reference = run_model(load_onnx_model(b), feeds)
    code, _, err = run_cli(capsys, "run", str(a), "--in-place")
    assert code == 0, err
    assert "unused" not in {
        t.name for t in onnx.load(str(a), load_external_data=False).graph.initializer
    }
    assert data.read_bytes() == before
    for model in (a, b):
        np.testing.assert_array_equal(run_model(load_onnx_model(model), feeds)["y"], reference["y"])


def test_run_refuses_an_onnx_output_named_like_a_net_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o out/x.pb quietly made a folder x.pb holding m.onnx (a pair's run refuses it)."""
    source = _embedding(tmp_path / "m.onnx")
    for name in ("x.pb", "x.txt"):
        code, _, err = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "out" / name))
        assert code == 2
        assert_one_error_line(err, "is named like a net file", "-o OUT.onnx or a folder")
    assert not (tmp_path / "out").exists()


def test_in_place_refuses_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--in-place on current.onnx -> v3.onnx replaced the link with a file and left v3.onnx
    as it was: refused, naming the file it points to; both stay as they were."""
    real = _embedding(tmp_path / "v3.onnx")
    link = tmp_path / "current.onnx"
    link.symlink_to(real.name)
    before = real.read_bytes()
    code, _, err = run_cli(capsys, "run", str(link), "--in-place")
    assert code == 2
    assert_one_error_line(err, "is a symbolic link", str(real), "run on the file it points to")
    assert link.is_symlink() and real.read_bytes() == before
    pair = tmp_path / "pair"
    shutil.copytree(TINY, pair)
    (pair / "predict_net.pbtxt").rename(pair / "v1.pbtxt")
    (pair / "predict_net.pbtxt").symlink_to("v1.pbtxt")
    code, _, err = run_cli(capsys, "run", str(pair), "--in-place")
    assert code == 2
    assert_one_error_line(err, "predict_net.pbtxt is a symbolic link")
    assert (pair / "predict_net.pbtxt").is_symlink()


def test_verify_against_shifted_outputs_says_so_and_labels_its_histogram(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recorded outputs off by 0.1: --bisect said nothing (exit 1), the histogram labelled
    every bin [0.1, 0.1), and -p "" was reported as 'pipeline :'."""
    source = _mlp(tmp_path / "m.onnx")
    recorded = tmp_path / "r.npz"
    assert run_cli(capsys, "verify", str(source), "--save-outputs", str(recorded))[0] == 0
    arrays = dict(np.load(recorded))
    arrays = {k: v + np.float32(0.1) if k.startswith("outputs/") else v for k, v in arrays.items()}
    shifted = tmp_path / "shifted.npz"
    np.savez(shifted, **arrays)
    args = ("verify", str(source), "--load-outputs", str(shifted), "--bisect", "-v")
    code, out, err = run_cli(capsys, *args)
    assert code == 1
    assert "differs from the loaded outputs before any pass ran" in err
    bins = [line.split(")")[0] for line in out.splitlines() if line.startswith("  [")]
    assert len(bins) == 10 and len(set(bins)) == 10
    code, out, _ = run_cli(capsys, "verify", str(source), "-p", "")
    assert code == 0 and "pipeline (no passes): outputs equal" in out


def _half_conv_bn(path: Path) -> Path:
    """A Conv + BatchNormalization in float16 (``optimize`` fuses them: the result rounds
    once more, a few float16 steps)."""
    rng = np.random.default_rng(0)
    half = np.float16
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "me", "va"], ["y"], epsilon=1e-2),
    ]
    weights = {
        "w": rng.standard_normal((4, 3, 3, 3)).astype(half),
        "sc": rng.standard_normal(4).astype(half),
        "bi": rng.standard_normal(4).astype(half),
        "me": rng.standard_normal(4).astype(half),
        "va": rng.uniform(0.5, 2, 4).astype(half),
    }
    f16 = TensorProto.FLOAT16
    return graph_model(
        path, nodes, {"x": (f16, ["N", 3, 5, 5])}, {"y": (f16, ["N", 4, 3, 3])}, weights
    )


def test_verify_compares_half_precision_outputs_at_half_precision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fused float16 Conv + BatchNormalization rounds once more, which float32's default
    tolerances called a difference."""
    source = _half_conv_bn(tmp_path / "m.onnx")
    code, out, err = run_cli(capsys, "verify", str(source), "-p", "optimize")
    assert code == 0, out + err
    assert "half-precision outputs y compared with rtol 0.01, atol 0.001" in err
    assert "outputs equal (rtol=0.01, atol=0.001, seed=0" in out  # the verdict says so too
    code, out, _ = run_cli(capsys, "verify", str(source), "-p", "optimize", "--rtol", "1e-5")
    assert code == 1 and "outputs differ" in out  # the tolerance asked for is the one used


def test_the_python_comparisons_take_half_precision_as_verify_does(tmp_path: Path) -> None:
    """compare_with_onnxruntime and the plugin's assert_models_equivalent said the fused
    float16 model differs where verify passes it: given no tolerance they compare a
    half-precision output at HALF_TOLERANCES too; tolerances given are the ones used."""
    source = _half_conv_bn(tmp_path / "m.onnx")
    model = load_model(source)
    before = model.copy()
    PassManager.parse("optimize")(model)
    feeds = seeded_inputs(before, {}, 0)[0]  # the inputs verify makes
    (diff,) = compare_with_onnxruntime(source, model, feeds)
    assert diff.ok and (diff.rtol, diff.atol) == HALF_TOLERANCES and diff.max_abs > 1e-4
    (strict,) = compare_with_onnxruntime(source, model, feeds, rtol=1e-5, atol=1e-6)
    assert not strict.ok and (strict.rtol, strict.atol) == (1e-5, 1e-6)
    assert_models_equivalent(before, model, feeds)
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(before, model, feeds, rtol=1e-5, atol=1e-6)


def test_verify_bisect_names_the_pass_that_changed_the_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish_retype(monkeypatch)
    source = _mlp(tmp_path / "m.onnx")
    code, out, _ = run_cli(capsys, "verify", str(source), "-p", "default,retype-relu", "--bisect")
    assert code == 1
    assert "outputs differ" in out
    assert "first pass that changed the outputs: retype-relu (round 1)" in out
    code, out, _ = run_cli(
        capsys, "verify", str(source), "-p", "default,retype-relu", "--bisect", "--json"
    )
    assert code == 1 and json.loads(out)["bisect"]["pass"] == "retype-relu"


def test_a_pipeline_result_onnxruntime_refuses_is_said_to_be_the_pipelines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model given ran; the one the pipeline made of it did not load: the error named
    the given file as the model onnxruntime could not load."""
    _publish_retype(monkeypatch)
    source = _mlp(tmp_path / "m.onnx")
    code, _, err = run_cli(capsys, "verify", str(source), "-p", "retype-relu{to=NoSuchOp}")
    assert code == 2
    assert_one_error_line(
        err,
        "onnxruntime cannot load the model the pipeline made of it",
        "(passes that changed it: retype-relu)",
    )


def test_a_feed_of_another_element_type_is_refused_naming_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime's own message ("Unexpected input data type") named neither the input nor
    the file."""
    source = _mlp(tmp_path / "m.onnx")
    feeds = tmp_path / "half.npz"
    np.savez(feeds, x=np.ones((2, 4), np.float16))
    out = tmp_path / "out.npz"
    code, _, err = run_cli(capsys, "exec", str(source), "--feeds", str(feeds), "-o", str(out))
    assert code == 2
    assert_one_error_line(
        err, str(source), "input 'x' is fed float16 values, and the model takes float32"
    )


def test_a_model_changed_in_memory_is_not_blamed_on_its_file(tmp_path: Path) -> None:
    """run_model on a model edited since it was read named the (valid) file as the model
    onnxruntime refused; it says the model was changed in memory."""
    from graphtools.ir import Op

    model = load_onnx_model(_mlp(tmp_path / "m.onnx"))
    feeds = {"x": np.ones((2, 4), np.float32)}
    assert run_model(model, feeds)["y"].shape == (2, 3)
    with model.predict_net.edit() as edit:
        edit.set_op(0, Op("MatMulPlus", ["x", "w"], ["m"]))
    with pytest.raises(RuntimeFailure, match=r"cannot load the model \(changed in memory"):
        run_model(model, feeds)


def test_onnxruntime_failures_are_one_error_line_naming_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="the_reshape")],
        "r",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([5, 5], dtype=np.int64), "s")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source = _save(model, tmp_path / "r.onnx")
    code, _, err = run_cli(capsys, "verify", str(source), "-p", "")
    assert code == 2
    assert_one_error_line(
        err, str(source), "onnxruntime cannot run the model at node 'the_reshape' (Reshape)"
    )
    with pytest.raises(RuntimeFailure) as caught:
        run_model(load_onnx_model(source), {"x": np.ones((2, 3), np.float32)})
    assert caught.value.node == "the_reshape" and caught.value.op_type == "Reshape"


def test_onnxruntime_writes_nothing_to_stderr_itself(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime logs its errors from C++ straight to file descriptor 2 unless told not to:
    the one error line must stay one line at the descriptor too."""
    from graphtools.cli import main

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="the_reshape")],
        "r",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([5, 5], dtype=np.int64), "s")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source = _save(model, tmp_path / "r.onnx")
    assert main(["verify", str(source), "-p", ""]) == 2
    assert_one_error_line(capfd.readouterr().err, "the_reshape")


def test_exec_on_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _mlp(tmp_path / "m.onnx")
    x = np.ones((2, 4), np.float32)
    np.savez(tmp_path / "f.npz", x=x)
    code, out, _ = run_cli(
        capsys,
        "exec",
        str(source),
        "--feeds",
        str(tmp_path / "f.npz"),
        "-o",
        str(tmp_path / "o.npz"),
        "--outputs",
        "m,y",
    )
    assert code == 0
    assert "y: float32[2, 3]" in out
    with np.load(tmp_path / "o.npz") as found:
        w = numpy_helper.to_array(onnx.load(str(source)).graph.initializer[0])
        np.testing.assert_allclose(found["m"], x @ w, rtol=1e-6)
        np.testing.assert_allclose(found["y"], np.maximum(x @ w, 0), rtol=1e-6)
    np.savez(tmp_path / "bad.npz", z=x)
    code, _, err = run_cli(
        capsys,
        "exec",
        str(source),
        "--feeds",
        str(tmp_path / "bad.npz"),
        "-o",
        str(tmp_path / "o.npz"),
    )
    assert code == 2
    assert_one_error_line(err, "--feeds names 'z'")


def test_verify_onnx_pair_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "tiny.onnx"
    assert run_cli(capsys, "export-onnx", str(TINY), "-o", str(exported))[0] == 0
    code, out, _ = run_cli(capsys, "verify", "--onnx", str(exported), str(TINY), "--json")
    assert code == 0 and json.loads(out)["verdict"] == "equal"
    code, out, _ = run_cli(
        capsys, "verify", "--onnx", str(exported), str(TINY), "--per-blob", "--json"
    )
    data = json.loads(out)
    assert code == 0 and data["first_divergence"] is None and data["blobs"]


# -- hostile files --------------------------------------------------------------------------------


def test_external_data_outside_the_folder_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp_in(tmp_path / "m", external=True)
    model = onnx.load(str(source), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../secret.data"
    (tmp_path / "secret.data").write_bytes(b"\0" * 64)
    onnx.save(model, str(source))
    for argv in (
        ["show", str(source)],
        ["run", str(source), "-o", str(tmp_path / "o.onnx")],
        ["verify", str(source)],
        ["exec", str(source), "--feeds", str(source), "-o", str(tmp_path / "o.npz")],
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, argv
        assert_one_error_line(err, "lies outside the model's folder")


def test_external_data_in_a_subfolder_runs_verifies_and_round_trips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "m"
    (folder / "weights").mkdir(parents=True)
    model = onnx.load(str(_mlp(tmp_path / "plain.onnx")))
    external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights/m.data", size_threshold=0
    )
    source = folder / "m.onnx"
    onnx.save_model(model, str(source))
    out = tmp_path / "out" / "o.onnx"
    code, _, err = run_cli(capsys, "run", str(source), "-p", "", "-o", str(out))
    assert code == 0, err
    assert (out.parent / "weights" / "m.data").read_bytes() == (
        folder / "weights" / "m.data"
    ).read_bytes()
    assert onnx.load(str(out)) == onnx.load(str(source))
    code, _, err = run_cli(capsys, "verify", str(source))
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(tmp_path / "o2" / "o.onnx"))
    assert code == 0, err
    check(tmp_path / "o2" / "o.onnx")


@pytest.mark.parametrize("pipeline", ["", "default"])
def test_truncated_external_data_is_one_error_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pipeline: str
) -> None:
    # "" copies the data file whole; default drops the unused initializer and writes the
    # file again from the tensors kept.
    source = _mlp_in(tmp_path / "m", external=True)
    folder = source.parent
    data = folder / "m.onnx.data"
    with data.open("r+b") as handle:
        handle.truncate(44)  # w (48 bytes, used) loses its last float; unused is gone
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", str(source), "-p", pipeline, "-o", str(out / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, "m.onnx.data")
    assert "truncated" in err
    assert not out.exists() or not any(out.iterdir())
    before = data.read_bytes()
    code, _, err = run_cli(capsys, "run", str(source), "-p", pipeline, "--in-place")
    assert code == 2
    assert_one_error_line(err, "truncated")
    assert data.read_bytes() == before


@pytest.mark.parametrize(
    "data",
    [b"", b"\x08\x07:\x02\x0a", b"\x08" + b"\xff" * 20, b"\x08\x08:\x04\x0a\x02\xff\xfe"],
    ids=["empty", "truncated", "garbage", "bad-utf8"],
)
def test_damaged_onnx_files_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    path = tmp_path / "d.onnx"
    path.write_bytes(data)
    for command in ("show", "ssa", "verify", "draw"):
        argv = [command, str(path)] + (["-o", str(tmp_path / "d.dot")] if command == "draw" else [])
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, (command, err)
        assert_one_error_line(err, str(path))


def test_seeded_inputs_follow_the_declared_types(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["y"], to=TensorProto.FLOAT)],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = load_onnx_model(
        _save(
            helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
            tmp_path / "g.onnx",
        )
    )
    feeds, made = seeded_inputs(model, {}, seed=0)
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].shape == (1, 1, 3)
    assert made[0].reason.startswith("dim 0 ('batch'), dim 1 ('seq') taken as 1")
    feeds, made = seeded_inputs(model, {"ids": (2, 7, 3)}, seed=0)
    assert feeds["ids"].shape == (2, 7, 3) and made[0].origin == "given"
    with pytest.raises(GraphToolsError, match="2 dims; the model declares 3"):
        seeded_inputs(model, {"ids": (2, 7)}, seed=0)
    with pytest.raises(GraphToolsError, match="too much to make up"):
        seeded_inputs(model, {"ids": (2**20, 2**20, 3)}, seed=0)


def test_verify_a_folder_of_onnx_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    models.mkdir()
    _mlp(models / "a.onnx")
    _mlp(models / "b.onnx", identity=False)
    code, out, _ = run_cli(capsys, "verify", str(models), "-j", "2", "-p", "default", "--json")
    results = json.loads(out)
    assert code == 0
    assert [(r["name"], r["verdict"], r["ops_before"], r["ops_after"]) for r in results] == [
        ("a", "equal", 3, 2),
        ("b", "equal", 2, 2),
    ]


CHECKER_CRASH = FIXTURES / "onnx" / "checker_crash_layernorm.onnx"
"""A LayerNormalization node case whose ``axis`` attribute the fuzz campaign mangled: onnx
1.23's shape inference dies on it with a segmentation fault (found by benchmarks/fuzz_onnx.py)."""


def test_a_checker_crash_is_a_verdict_not_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphtools.cli import onnx_files

    def crash(source: object) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setattr(onnx_files, "_check", crash)
    assert onnx_files.checker_problem(CHECKER_CRASH) == (
        "onnx's checker crashed on the model (signal 11)"
    )
    monkeypatch.undo()
    code, _, err = run_cli(capsys, "run", str(CHECKER_CRASH), "-o", str(tmp_path / "o.onnx"))
    assert code == 0
    assert "warning: onnx's checker rejects" in err
    assert (tmp_path / "o.onnx").is_file()


def test_export_onnx_refuses_an_onnx_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _mlp(tmp_path / "m.onnx")
    code, _, err = run_cli(capsys, "export-onnx", str(source), "-o", str(tmp_path / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, "is an ONNX model already")


def test_run_outputs_on_onnx_are_typed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A value named by --outputs becomes a typed graph output (the checker requires a type):
    from shape inference when the model declares none."""
    source = _mlp(tmp_path / "m.onnx")
    target = tmp_path / "o" / "m.onnx"
    code, _, err = run_cli(capsys, "run", str(source), "--outputs", "m,y", "-o", str(target))
    assert code == 0, err
    written = onnx.load(str(target))
    assert [o.name for o in written.graph.output] == ["m", "y"]
    assert written.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    onnx.checker.check_model(written, full_check=True)
    code, _, err = run_cli(capsys, "run", str(source), "--outputs", "nowhere", "-o", str(target))
    assert code == 2
    assert_one_error_line(err, "--outputs names 'nowhere'")


def test_a_second_model_does_not_overwrite_the_data_file_of_the_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Data files keep their names: two models written from one export into one folder would
    share ``weights.bin``. The second write, holding other data, is refused."""
    from onnx_testdata import write_external_model

    source = write_external_model(tmp_path / "in")
    out = tmp_path / "out"
    assert run_cli(capsys, "run", str(source), "-p", "", "-o", str(out / "same.onnx"))[0] == 0
    kept = (out / "weights.bin").read_bytes()
    code, _, err = run_cli(
        capsys, "run", str(source), "-p", "remove-unused-params", "-o", str(out / "pruned.onnx")
    )
    assert code == 2
    assert_one_error_line(err, "weights.bin", "external data", "--external-data")
    assert (out / "weights.bin").read_bytes() == kept
    assert not (out / "pruned.onnx").exists()
    code, _, _ = run_cli(
        capsys,
        "run",
        str(source),
        "-p",
        "remove-unused-params",
        "-o",
        str(out / "pruned.onnx"),
        "--external-data",
    )
    assert code == 0 and (out / "weights.bin").read_bytes() == kept
    written = onnx.load(str(out / "pruned.onnx"))  # its tiny tensors inline: no data file
    assert [t.name for t in written.graph.initializer] == ["w", "b"]
    assert not (out / "pruned.onnx.data").exists()


def test_draw_qualifies_an_op_of_another_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = helper.make_node("Twice", ["x"], ["y"], domain="local")
    twice = helper.make_function(
        "local",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph,
        functions=[twice],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
    )
    path = tmp_path / "f.onnx"
    onnx.save(model, str(path))
    code, _, _ = run_cli(capsys, "draw", str(path), "-o", str(tmp_path / "f.dot"))
    assert code == 0
    assert "%0 local::Twice" in (tmp_path / "f.dot").read_text()


@pytest.mark.parametrize("type_name", ["INT4", "UINT2"])
def test_packed_external_data_without_a_length_is_taken_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], type_name: str
) -> None:
    """Types packed several to a byte: their data's size is not guessed from the element
    count (16 INT4 values are 8 bytes, 16 UINT2 values 4), so a valid file is not refused."""
    data_type = getattr(TensorProto, type_name, None)
    if data_type is None:
        pytest.skip(f"this onnx has no {type_name}")
    folder = tmp_path / "m"
    folder.mkdir()
    tensor = TensorProto(name="w", data_type=data_type, dims=[16])
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="m.data")
    (folder / "m.data").write_bytes(bytes(16 * (4 if type_name == "INT4" else 2) // 8))
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", data_type, [16])],
        [tensor],
    )
    source = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)]), folder / "m.onnx"
    )
    code, _, err = run_cli(
        capsys, "run", str(source), "-p", "", "-o", str(tmp_path / "out" / "o.onnx")
    )
    assert code == 0, err
    assert (tmp_path / "out" / "m.data").read_bytes() == (folder / "m.data").read_bytes()


def test_a_pipe_is_kept_for_one_command_only(tmp_path: Path) -> None:
    """Inside a command (streams_read_once) a pipe's bytes are read once and given again;
    outside, a FIFO fed twice gives two contents (a library caller's loop over models)."""
    import threading

    from graphtools.serde.netdef_io import read_bytes
    from graphtools.serde.streams import streams_read_once

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def fed(data: bytes) -> bytes:  # a writer for the read that follows
        feeder = threading.Thread(target=fifo.write_bytes, args=(data,), daemon=True)
        feeder.start()
        return data

    assert fed(b"first") == read_bytes(fifo)
    assert fed(b"second") == read_bytes(fifo)
    with streams_read_once():
        assert fed(b"third") == read_bytes(fifo)
        fed(b"fourth")  # left unread: the kept bytes come back
        assert read_bytes(fifo) == b"third"


def test_string_outputs_are_saved_and_compared_and_ragged_sequences_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A STRING output ended exec and verify --save-outputs in a traceback (numpy will not
    save Python objects); a sequence of tensors of different shapes in a ValueError."""
    strings = graph_model(
        tmp_path / "strings.onnx",
        [helper.make_node("Identity", ["words"], ["s"]), helper.make_node("Relu", ["x"], ["y"])],
        {"x": (TensorProto.FLOAT, [2])},
        {"y": (TensorProto.FLOAT, [2]), "s": (TensorProto.STRING, [2])},
        {"words": np.array(["ab", "c"], dtype=object)},
    )
    feeds, result = tmp_path / "feeds.npz", tmp_path / "out.npz"
    np.savez(feeds, x=np.float32([-1, 2]))
    assert run_cli(capsys, "exec", str(strings), "--feeds", str(feeds), "-o", str(result))[0] == 0
    with np.load(result) as saved:
        assert saved["s"].tolist() == ["ab", "c"]
    reference = tmp_path / "reference.npz"
    code, _, err = run_cli(capsys, "verify", str(strings), "--save-outputs", str(reference))
    assert code == 0, err
    code, out, _ = run_cli(capsys, "verify", str(strings), "--load-outputs", str(reference))
    assert code == 0 and "outputs equal" in out
    ragged = graph_model(
        tmp_path / "ragged.onnx",
        [helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=0)],
        {"x": (TensorProto.FLOAT, [4])},
        {},
        {"sizes": np.int64([1, 3])},
    )
    model = onnx.load(str(ragged))
    model.graph.output.append(
        helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None)
    )
    onnx.save(model, str(ragged))
    code, _, err = run_cli(capsys, "verify", str(ragged))
    assert code == 2
    assert_one_error_line(err, "'parts' is a sequence of tensors of different shapes")


def test_strings_ending_in_nul_are_refused_by_name_not_cut() -> None:
    from graphtools.cli.npz_files import npz_bytes

    with pytest.raises(UsageError, match="'s' holds strings ending in NUL"):
        npz_bytes({"s": np.array([b"a\x00", b"b"], dtype=object)})


def test_show_says_when_an_external_data_file_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show listed the data file and exited 0 without a word; run and verify then failed."""
    source = _mlp_in(tmp_path / "in", external=True)
    (source.parent / "m.onnx.data").unlink()
    code, _, err = run_cli(capsys, "show", str(source))
    assert code == 0
    assert "external data file m.onnx.data is not beside the model" in err
    code, out, _ = run_cli(capsys, "show", str(source), "--json")
    assert json.loads(out)["missing_external_data"] == ["m.onnx.data"]


def test_run_counts_the_data_files_it_leaves_as_they_are_in_the_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unchanged model rewritten in place showed its size without its data file (which
    it did not need to write again): '65.9KiB 1.9KiB'."""
    source = _mlp_in(tmp_path / "in", external=True)
    code, out, err = run_cli(capsys, "run", str(source), "-p", "", "--in-place", "--json")
    assert code == 0, err
    sizes = json.loads(out)["census"]["bytes"]
    assert sizes["before"] == sizes["after"] > (source.parent / "m.onnx").stat().st_size


def test_files_written_into_missing_folders_get_them_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run made its output folder; draw -o, exec -o and verify --save-outputs failed on a
    missing one, exec and verify only after all their work."""
    source = _mlp(tmp_path / "m.onnx")
    np.savez(tmp_path / "f.npz", x=np.ones((2, 4), np.float32))
    commands = [
        ["draw", str(source), "-o", str(tmp_path / "a" / "b" / "m.dot")],
        [
            "exec",
            str(source),
            "--feeds",
            str(tmp_path / "f.npz"),
            "-o",
            str(tmp_path / "c" / "o.npz"),
        ],
        ["verify", str(source), "--save-outputs", str(tmp_path / "d" / "r.npz")],
    ]
    for argv in commands:
        code, _, err = run_cli(capsys, *argv)
        assert code == 0, err
    for written in ("a/b/m.dot", "c/o.npz", "d/r.npz"):
        assert (tmp_path / written).is_file()


def test_show_counts_the_bytes_of_bfloat16_initializers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """numpy calls ml_dtypes' bfloat16 a void kind, which show skipped as if it were
    strings: 4 values, 0 bytes."""
    weight = helper.make_tensor("w", TensorProto.BFLOAT16, [4], [1.0, 2.0, 3.0, 4.0])
    graph = helper.make_graph(
        [helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT)],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    source = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "b.onnx"
    )
    code, out, _ = run_cli(capsys, "show", str(source), "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["initializer_values"], data["initializer_bytes"]) == (4, 8)


def test_verify_says_equal_proves_nothing_when_every_output_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A detector that finds nothing in made-up data gives empty outputs: verify called a
    broken model equal on 0 values compared, without a word."""
    graph = helper.make_graph(
        [helper.make_node("Slice", ["x", "zero", "zero"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0])],
        [numpy_helper.from_array(np.array([0], np.int64), "zero")],
    )
    source = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "e.onnx"
    )
    code, out, err = run_cli(capsys, "verify", str(source), "-p", "")
    assert code == 0 and "outputs equal" in out
    assert "every output compared is empty on these inputs (0 values)" in err
    code, out, err = run_cli(capsys, "verify", str(_mlp(tmp_path / "m.onnx")), "-p", "")
    assert code == 0 and "every output compared is empty" not in err


def test_a_model_failing_on_made_up_inputs_says_the_shapes_and_the_dims_taken_as_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime's source location and C++ signature are dropped from the reason (they
    pushed the shapes out of it), and the symbolic dims verify ran at 1 are named."""
    source = graph_model(
        tmp_path / "seq5.onnx",
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        {"x": (TensorProto.FLOAT, ["batch", "seq", 8])},
        {"y": (TensorProto.FLOAT, [None, 5, 8])},
        {"s": np.array([-1, 5, 8], np.int64)},
    )
    code, out, err = run_cli(capsys, "verify", str(source))
    assert (code, out) == (2, "")
    assert_one_error_line(
        err,
        "(Reshape)",
        "Input shape:{1,1,8}, requested shape:{-1,5,8}",
        "dim 0 ('batch'), dim 1 ('seq') taken as 1; --shapes x=",
    )
    assert "reshape_helper.h" not in err and "onnxruntime::" not in err
    code, _, err = run_cli(capsys, "verify", str(source), "--shapes", "x=2x5x8")
    assert code == 0, err


def test_an_input_values_cannot_be_made_up_for_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    )
    graph = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["x"], ["y"])],
        "g",
        [helper.make_value_info("x", optional)],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    source = tmp_path / "opt.onnx"
    onnx.save(model, str(source))
    code, out, err = run_cli(capsys, "verify", str(source))
    assert (code, out) == (2, "")
    assert_one_error_line(err, "input 'x' has an optional type", "--feeds")


# -- external data files across runs -------------------------------------------------------------


def _transposed_weights(folder: Path) -> Path:
    """``folder/m.onnx``: y = x @ Transpose(W) + V, W (64x64) and V in ``m.onnx.data``;
    ``optimize`` folds the Transpose into a new 16 KB initializer."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "Wt"], ["m"]),
            helper.make_node("Add", ["m", "V"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [
            numpy_helper.from_array(rng.standard_normal((64, 64), dtype=np.float32), "W"),
            numpy_helper.from_array(rng.standard_normal((64,), dtype=np.float32), "V"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, folder / "m.onnx", external=True)


def _outputs(path: Path) -> np.ndarray:
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 64), dtype=np.float32)}
    return np.asarray(run_model(load_onnx_model(path), feeds)["y"])


def test_in_place_with_external_data_never_rewrites_the_data_file_the_model_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run --in-place --external-data wrote the folded weights over m.onnx.data, which a
    copy of the model file still read: the copy then answered wrongly, with no warning. The
    tensors now go to m.onnx.1.data, which a second run finds again as its own."""
    model = _transposed_weights(tmp_path / "m")
    copy = tmp_path / "m" / "copy.onnx"
    shutil.copy(model, copy)  # reads m.onnx.data too, as `cp m.onnx copy.onnx` leaves it
    data = tmp_path / "m" / "m.onnx.data"
    before, reference = data.read_bytes(), _outputs(model)
    argv = ("run", str(model), "-p", "optimize", "--in-place", "--external-data")
    for run in range(2):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, err
        assert ("m.onnx.data holds other data" in out + err) == (run == 0)
        assert "wrote" in out and "m.onnx.1.data" in out
    assert data.read_bytes() == before
    assert sorted(p.name for p in model.parent.iterdir()) == [
        "copy.onnx",
        "m.onnx",
        "m.onnx.1.data",
        "m.onnx.data",
    ]
    np.testing.assert_allclose(_outputs(copy), reference, rtol=1e-6)
    np.testing.assert_allclose(_outputs(model), reference, rtol=1e-5, atol=1e-5)


def test_a_run_into_its_own_output_again_never_overwrites_a_data_file_others_may_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run into the same -o folder meets the first output's data file (named as the
    input's), which a copy of that output reads too: it is refused, saying whose data it is,
    with advice that works (the first message said "another model's?" and advised
    --external-data, which wrote the same file name, and --in-place)."""
    model = _transposed_weights(tmp_path / "src")
    out = tmp_path / "out"
    assert run_cli(capsys, "run", str(model), "-p", "", "-o", f"{out}/")[0] == 0
    shutil.copy(out / "m.onnx", out / "copy.onnx")
    reference = _outputs(out / "copy.onnx")
    before = (out / "m.onnx.data").read_bytes()
    code, _, err = run_cli(capsys, "run", str(model), "-p", "optimize", "-o", f"{out}/")
    assert code == 2
    assert_one_error_line(err, "m.onnx.data", "the m.onnx this run replaces", "delete it first")
    assert "--external-data" not in err and "--in-place" not in err
    assert (out / "m.onnx.data").read_bytes() == before
    np.testing.assert_array_equal(_outputs(out / "copy.onnx"), reference)
    (out / "m.onnx.data").unlink()  # as advised, when nothing else reads it
    (out / "copy.onnx").unlink()
    code, _, err = run_cli(capsys, "run", str(model), "-p", "optimize", "-o", f"{out}/")
    assert code == 0, err
    np.testing.assert_allclose(_outputs(out / "m.onnx"), _outputs(model), rtol=1e-5, atol=1e-5)
    code, _, err = run_cli(capsys, "run", str(model), "-p", "", "-o", str(out / "other.onnx"))
    assert code == 2
    assert_one_error_line(err, "m.onnx.data", "which other.onnx does not read", "--external-data")


def test_opset_conversion_finds_external_data_from_any_working_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--opset on a model with external data failed unless run from the model's folder: onnx's
    checker, given the converted model in memory, looked for the data file there."""
    model = _transposed_weights(tmp_path / "src")
    constant = tmp_path / "const" / "c.onnx"  # W a Constant's value, external too
    proto = onnx.load(str(model))
    weight = proto.graph.initializer[0]
    del proto.graph.initializer[0]
    proto.graph.node.insert(0, helper.make_node("Constant", [], ["W"], value=weight))
    constant.parent.mkdir()
    onnx.save(
        proto,
        str(constant),
        save_as_external_data=True,
        location="c.onnx.data",
        size_threshold=0,
        convert_attribute=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for source in (model, constant):
        code, _, err = run_cli(capsys, "run", str(source), "--opset", "18", "-o", "a.onnx")
        assert code == 0, err
        assert {o.version for o in onnx.load(str(elsewhere / "a.onnx")).opset_import} == {18}
        np.testing.assert_allclose(_outputs(elsewhere / "a.onnx"), _outputs(model), rtol=1e-6)
        for written in elsewhere.iterdir():
            written.unlink()


def test_a_missing_data_file_is_the_inputs_fault_named_before_any_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model file copied without its data: run blamed the pass that first read a weight
    ("pass 'fold-constants' failed ...")."""
    model = _transposed_weights(tmp_path / "src")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(model, alone / "m.onnx")
    output = str(tmp_path / "o.onnx")
    code, _, err = run_cli(capsys, "run", str(alone / "m.onnx"), "-p", "optimize", "-o", output)
    assert code == 2
    assert_one_error_line(err, str(alone / "m.onnx.data"), "No such file")
    assert "pass" not in err


def test_an_output_ending_in_a_slash_is_a_folder_and_an_existing_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o out/e.onnx/ wrote a file e.onnx; -o onto an existing file not named .onnx said
    "cannot create output folder: File exists"."""
    model = _mlp(tmp_path / "m.onnx")
    code, _, err = run_cli(capsys, "run", str(model), "-o", f"{tmp_path / 'e.onnx'}/")
    assert code == 0, err
    assert (tmp_path / "e.onnx" / "m.onnx").is_file()
    taken = tmp_path / "notes.txt.bak"
    taken.write_text("mine")
    code, _, err = run_cli(capsys, "run", str(model), "-o", str(taken))
    assert code == 2
    assert_one_error_line(err, "a file is there", "-o OUT.onnx or a folder")
    assert taken.read_text() == "mine"


def test_exec_reads_feeds_from_a_pipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--feeds <(...) said "no such file" (model files from a pipe were read, feeds not)."""
    import io
    import threading

    model = _mlp(tmp_path / "m.onnx")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    archive = io.BytesIO()
    np.savez(archive, x=x)
    fifo = tmp_path / "feeds"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=fifo.write_bytes, args=(archive.getvalue(),), daemon=True)
    feeder.start()
    out = tmp_path / "o.npz"
    code, _, err = run_cli(capsys, "exec", str(model), "--feeds", str(fifo), "-o", str(out))
    feeder.join(timeout=5)
    assert code == 0, err
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["y"], run_model(load_onnx_model(model), {"x": x})["y"])


def test_diff_says_an_initializer_holding_other_values_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two models with one weight of other values: diff listed it as removed and added."""
    paths = []
    for value in (0.0, 1.0):
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "fc.weight"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
            [numpy_helper.from_array(np.full((4, 4), value, np.float32), "fc.weight")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        paths.append(_save(model, tmp_path / f"m{value:.0f}.onnx"))
    code, out, _ = run_cli(capsys, "diff", *map(str, paths))
    assert code == 1
    assert out.splitlines()[0] == "~ initializer fc.weight"
    assert "initializers: 0 removed, 0 added, 1 changed" in out
    code, out, _ = run_cli(capsys, "diff", *map(str, paths), "--json")
    data = json.loads(out)
    assert (data["params_changed"], data["params_removed"], data["same"]) == (
        ["fc.weight"],
        [],
        False,
    )


def test_a_node_leaving_out_a_required_input_is_refused_before_onnxruntime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime 1.32 crashed the process (a segmentation fault, no error line) running
    Max(x, ""), a mutant of the backend node cases: such a node is refused first."""
    graph = helper.make_graph(
        [helper.make_node("Max", ["x", ""], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    source = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx"
    )
    with pytest.raises(RuntimeFailure, match=r"node #0 \(Max\) leaves out its input 1"):
        run_model(load_onnx_model(source), {"x": np.ones(3, np.float32)})
    code, _, err = run_cli(capsys, "verify", str(source))
    assert code == 2
    assert_one_error_line(err, "node #0 (Max)", "which Max requires")
    # an optional input left out (Clip's min and max) still runs
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "", ""], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    clip = _save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "c.onnx"
    )
    ones = np.ones(3, np.float32)
    np.testing.assert_array_equal(run_model(load_onnx_model(clip), {"x": ones})["y"], ones)

"""``make-dynamic-batch``: a model it writes runs at batch 3 as three batch-1 runs, one it cannot
free is refused naming the node that pins the batch, and an export that is dynamic already
stays as it is.

Every corpus export goes through what ``run -p optimize --dynamic-batch`` does
(``graphtools.cli.optimize_report.run_stages``); ``fixtures/onnx/dynamic_batch_table.md``
holds each model's result (``pytest --update-goldens`` rewrites it), so a model that starts
being refused, or being accepted, shows. An accepted model must also give the original's
outputs at the exported batch, pass the checker, and declare the symbol on its inputs and
outputs; the batch axis of each output is where the symbol is declared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
from conftest import REPO
from onnx import TensorProto, helper
from onnx_check import assert_same_outputs, check, graph_model, normal, run
from onnx_corpus import CORPUS, CorpusModel, seeded_inputs

from graphtools.cli.optimize_report import run_stages
from graphtools.errors import PassError, PipelineSpecError
from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

TABLE = REPO / "fixtures" / "onnx" / "dynamic_batch_table.md"
F = TensorProto.FLOAT
_ROW = re.compile(r"^\| `(?P<model>[^`]+)` \| (?P<result>.*) \|$")


def _table() -> dict[str, str]:
    rows = {}
    for line in TABLE.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            rows[match["model"]] = match["result"]
    return rows


def _write(rows: Mapping[str, str]) -> None:
    intro = TABLE.read_text().split("\n| model |")[0]
    body = "".join(f"| `{name}` | {rows[name]} |\n" for name in sorted(rows))
    TABLE.write_text(f"{intro}\n| model | result |\n|---|---|\n{body}")


def _symbol_axes(path: Path, symbol: str) -> tuple[dict[str, int], list[int | None]]:
    """Each input's and output's axis holding ``symbol`` (``None``: an output without it)."""
    graph = onnx.load(str(path), load_external_data=False).graph

    def axis(value: onnx.ValueInfoProto) -> int | None:
        dims = [d.dim_param for d in value.type.tensor_type.shape.dim]
        return dims.index(symbol) if symbol in dims else None

    inputs = {v.name: a for v in graph.input if (a := axis(v)) is not None}
    return inputs, [axis(v) for v in graph.output]


def assert_batch_polymorphic(path: Path, symbol: str, feeds: Mapping[str, Any]) -> None:
    """At batch 3 the model gives, along each output's batch axis, what three batch-1 runs
    give (each row taken from ``feeds`` or made up)."""
    inputs, outputs = _symbol_axes(path, symbol)
    assert inputs, f"no input of {path.name} declares {symbol}"
    rng = np.random.default_rng(3)
    batch3: dict[str, Any] = {}
    for name, value in feeds.items():
        if name not in inputs:
            batch3[name] = value
            continue
        first = np.take(value, [0], axis=inputs[name])
        rows = [first]
        for _ in range(2):
            if value.dtype.kind == "f":
                rows.append(rng.standard_normal(first.shape).astype(value.dtype))
            else:
                rows.append(rng.integers(0, 2, first.shape).astype(value.dtype))
        batch3[name] = np.concatenate(rows, axis=inputs[name])
    together = run(path, batch3)
    single = [
        run(
            path,
            {k: np.take(v, [i], axis=inputs[k]) if k in inputs else v for k, v in batch3.items()},
        )
        for i in range(3)
    ]
    for number, (value, axis) in enumerate(zip(together, outputs, strict=True)):
        if axis is None:
            want = single[0][number]
        else:
            want = np.concatenate([run_[number] for run_ in single], axis=axis)
        assert_same_outputs([want], [value], f"{path.name} output {number} at batch 3")


def _result(corpus_model: CorpusModel, tmp_path: Path) -> str:
    model = load_onnx_model(corpus_model.path)
    try:
        ran = run_stages(model, PassManager.parse("optimize"), dynamic_batch=True)
    except PassError as exc:
        found = re.search(r"node #\d+ (?:of graph '[^']*' )?\((\w+)[^)]*\) (.*)", str(exc))
        assert found, f"{corpus_model.name}: the refusal names no node: {exc}"
        return f"refused: {found[1]} {re.split(r' [(]|: ', found[2])[0]}"
    records = [record for _, stage_records in ran for record in stage_records]
    symbol = next(r.stats["symbol"] for r in records if r.name == "make-dynamic-batch")
    target = tmp_path / corpus_model.path.name
    save_onnx_model(model, target)
    check(target)
    feeds = seeded_inputs(corpus_model)
    assert_same_outputs(run(corpus_model.path, feeds), run(target, feeds), corpus_model.name)
    assert_batch_polymorphic(target, symbol, feeds)
    return f"symbolic batch '{symbol}'"


@pytest.mark.parametrize("name", [entry.name for entry in CORPUS])
def test_every_export_runs_at_any_batch_or_is_refused_naming_the_node(
    name: str, onnx_corpus: list[CorpusModel], tmp_path: Path, update_goldens: bool
) -> None:
    corpus_model = next(model for model in onnx_corpus if model.name == name)
    result = _result(corpus_model, tmp_path)
    if update_goldens:
        rows = _table()
        rows[name] = result
        _write(rows)
    assert _table().get(name) == result
    if corpus_model.dynamic_batch:
        assert result == "symbolic batch 'batch'"  # a dynamic export keeps its own symbol


def test_the_table_covers_the_corpus() -> None:
    rows = _table()
    assert set(rows) == {entry.name for entry in CORPUS}
    accepted = [name for name, result in rows.items() if result.startswith("symbolic batch")]
    assert len(accepted) >= 25, accepted


# -- rules, one model each ------------------------------------------------------------------------


def _dynamic(path: Path, tmp_path: Path, pipeline: str = "make-dynamic-batch") -> Path:
    model = load_onnx_model(path)
    PassManager.parse(pipeline)(model)
    target = tmp_path / f"dyn_{path.name}"
    save_onnx_model(model, target)
    check(target)
    return target


def test_a_reshape_pinning_the_exported_batch_is_rewritten(tmp_path: Path) -> None:
    """efficientnet's head: ``Input shape:{3,1280,1,1}, requested shape:{1,1280}``."""
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["f"]),
        helper.make_node("Gemm", ["f", "w"], ["y"], transB=1),
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2, 3]),
        helper.make_node("Reshape", ["t", "target2"], ["z"]),  # the batch moves: -1 there
    ]
    weights = {
        "target": np.array([1, 8], np.int64),
        "target2": np.array([8, 1], np.int64),
        "w": normal(4, 8),
    }
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 8, 1, 1])},
        {"y": (F, [1, 4]), "z": (F, [8, 1])},
        weights,
    )
    target = _dynamic(path, tmp_path)
    assert _symbol_axes(target, "N") == ({"x": 0}, [0, 1])
    assert_batch_polymorphic(target, "N", {"x": normal(1, 8, 1, 1)})


def test_a_reshape_moving_the_batch_behind_other_elements_is_refused(tmp_path: Path) -> None:
    """``[1, 8] -> [8, 1] -> Transpose`` is an identity at batch 1; at batch 3 the target
    ``[8, -1]`` would deal the rows out across columns. Refused by name, the model kept."""
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 8])},
        {"y": (F, [1, 8])},
        {"target": np.array([8, 1], np.int64)},
    )
    model = load_onnx_model(path)
    before = model.copy()
    with pytest.raises(PassError, match=r"node #0 of graph 'g' \(Reshape\) moves the batch"):
        PassManager.parse("make-dynamic-batch")(model)
    assert model.predict_net.same_as(before.predict_net)


def test_a_gemm_bias_with_a_row_per_exported_row_is_refused(tmp_path: Path) -> None:
    """``x @ w + b`` with ``b`` of shape [4, 1] pins the batch at 4; fuse-matmul-add makes it
    a Gemm whose bias inference never compares with the batch, and the model was written
    with batch N, failing at any other. Refused naming the Gemm; a bias per column passes."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]

    def model(bias: np.ndarray, name: str) -> Path:
        weights = {"w": normal(5, 3), "b": bias}
        return graph_model(tmp_path / name, nodes, {"x": (F, [4, 5])}, {"y": (F, [4, 3])}, weights)

    per_row = load_onnx_model(model(normal(4, 1), "rows.onnx"))
    with pytest.raises(PassError, match=r"\(Gemm\) adds a bias 'b' of shape \[4, 1\]"):
        PassManager.parse("optimize,make-dynamic-batch")(per_row)
    # optimize's (checked) rewrite stays; the batch stays the exported one
    assert [op.type for op in per_row.predict_net] == ["Gemm"]
    assert per_row.predict_net.types["x"].shape == (4, 5)
    per_column = _dynamic(
        model(normal(1, 3), "columns.onnx"), tmp_path, "optimize,make-dynamic-batch"
    )
    assert [op.op_type for op in onnx.load(per_column).graph.node] == ["Gemm"]
    assert_batch_polymorphic(per_column, "N", {"x": normal(4, 5)})


def test_a_recurrent_state_made_for_one_batch_is_expanded(tmp_path: Path) -> None:
    hidden = 3
    nodes = [helper.make_node("GRU", ["x", "w", "r", "", "", "h0"], ["y"], hidden_size=hidden)]
    weights = {
        "w": normal(1, 3 * hidden, 2),
        "r": normal(1, 3 * hidden, hidden, seed=1),
        "h0": normal(1, 1, hidden, seed=2),
    }
    path = graph_model(tmp_path / "m.onnx", nodes, {"x": (F, [4, 1, 2])}, {"y": (F, None)}, weights)
    target = _dynamic(path, tmp_path)
    assert _symbol_axes(target, "N")[0] == {"x": 1}  # the GRU runs along axis 0
    assert_batch_polymorphic(target, "N", {"x": normal(4, 1, 2)})


def test_resize_sizes_follow_the_batch(tmp_path: Path) -> None:
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 2, 3, 3])},
        {"y": (F, [1, 2, 6, 6])},
        {"sizes": np.array([1, 2, 6, 6], np.int64)},
    )
    target = _dynamic(path, tmp_path)
    assert_batch_polymorphic(target, "N", {"x": normal(1, 2, 3, 3)})


@pytest.mark.parametrize(
    ("nodes", "pinned"),
    [
        ([helper.make_node("Softmax", ["x"], ["y"], axis=0)], "Softmax"),
        ([helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)], "ReduceMean"),
        ([helper.make_node("Custom", ["x"], ["y"], domain="my.ops")], "Custom"),
    ],
    ids=["softmax-over-the-batch", "mean-over-the-batch", "unknown-op"],
)
def test_a_node_mixing_the_batch_is_refused_by_name_and_the_model_kept(
    tmp_path: Path, nodes: list[onnx.NodeProto], pinned: str
) -> None:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    imports = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)]
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=imports).SerializeToString())
    model = load_onnx_model(path)
    before = model.copy()
    with pytest.raises(PassError, match=rf"node #0 of graph 'g' \({pinned}\)"):
        PassManager.parse("make-dynamic-batch")(model)
    assert model.predict_net.same_as(before.predict_net)


def test_an_export_that_is_dynamic_already_is_left_as_it_is(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, ["batch", 3])}, {"y": (F, ["batch", 3])}
    )
    model = load_onnx_model(path)
    (record,) = PassManager.parse("make-dynamic-batch", steps=1)(model)
    assert not record.modified and record.stats["symbol"] == "batch"


def test_exports_dynamic_already_are_left_as_they_are_where_the_batch_is_folded(
    tmp_path: Path,
) -> None:
    """torch's exports name output dims on their own (``Gemmy_dim_0``) and fold the batch
    into a ``-1`` (a transformer's tokens, ``[T, B, 4, 8] -> [-1, 32]``); both run at any
    batch as exported: nothing to refuse, nothing changed."""
    nodes = [
        helper.make_node("Reshape", ["x", "tokens"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["h"]),
        helper.make_node("Reshape", ["h", "back"], ["y"]),
    ]
    weights = {
        "tokens": np.array([-1, 32], np.int64),
        "back": np.array([5, -1, 32], np.int64),
        "w": normal(32, 32),
    }
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [5, "B", 4, 8])},
        {"y": (F, [5, "Reshapey_dim_1", 32])},
        weights,
    )
    model = load_onnx_model(path)
    before = model.copy()
    PassManager.parse("make-dynamic-batch{inputs=x=1}", steps=1)(model)
    assert model.predict_net.same_as(before.predict_net)
    assert model.predict_net.types == before.predict_net.types


def test_a_static_reshape_whose_minus_one_is_the_batch_follows_it(tmp_path: Path) -> None:
    """``x.view(-1, 2, 3)`` of a ``[1, 6]`` export: the ``-1`` is the batch, which inference
    cannot say; the output is declared with the symbol and the rows stay apart."""
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=2),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 6])},
        {"y": (F, [1, 2, 3])},
        {"target": np.array([-1, 2, 3], np.int64)},
    )
    target = _dynamic(path, tmp_path)
    assert _symbol_axes(target, "N") == ({"x": 0}, [0])
    assert_batch_polymorphic(target, "N", {"x": normal(1, 6)})


def test_the_batch_axis_can_be_named_and_a_wrong_name_is_refused(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Softmax", ["t"], ["y"], axis=1),
    ]
    path = graph_model(tmp_path / "m.onnx", nodes, {"x": (F, [4, 1, 3])}, {"y": (F, [1, 4, 3])})
    target = _dynamic(path, tmp_path, "make-dynamic-batch{inputs=x=1,symbol=B}")
    assert _symbol_axes(target, "B") == ({"x": 1}, [0])
    assert_batch_polymorphic(target, "B", {"x": normal(4, 1, 3)})
    model = load_onnx_model(path)
    with pytest.raises(PassError, match="'z' is not a graph input"):
        PassManager.parse("make-dynamic-batch{inputs=z=0}")(model)


def test_an_empty_symbol_is_refused() -> None:
    """``symbol=`` wrote unnamed dims, tying no output to the input's batch."""
    with pytest.raises(PipelineSpecError, match="symbol must name the batch dim"):
        PassManager.parse("make-dynamic-batch{symbol=}")


def test_a_number_as_the_symbol_is_refused() -> None:
    """``symbol=1`` wrote dim_param "1", which reads as a size of one."""
    with pytest.raises(PipelineSpecError, match="symbol '1' is a number"):
        PassManager.parse("make-dynamic-batch{symbol=1}")
    assert PassManager.parse("make-dynamic-batch{symbol=batch_size}").spec


def test_a_minus_one_dealing_rows_out_is_refused_and_a_view_of_batch_one_passes(
    tmp_path: Path,
) -> None:
    """An export dynamic already whose ``[N, 4] -> [2, -1]`` deals the rows out across a
    constant ``2`` is refused (its rows would mix); a batch-1 export's ``view(-1, 1, 6)``,
    whose other ``1`` is no batch, passes the batch on."""
    dealing = graph_model(
        tmp_path / "d.onnx",
        [helper.make_node("Reshape", ["x", "t"], ["y"])],
        {"x": (F, ["N", 4])},
        {"y": (F, [2, None])},
        {"t": np.array([2, -1], np.int64)},
    )
    with pytest.raises(PassError, match=r"node #0 of graph 'g' \(Reshape\)"):
        PassManager.parse("make-dynamic-batch")(load_onnx_model(dealing))
    view = graph_model(
        tmp_path / "v.onnx",
        [helper.make_node("Reshape", ["x", "t"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        {"x": (F, [1, 6])},
        {"y": (F, [1, 1, 6])},
        {"t": np.array([-1, 1, 6], np.int64)},
    )
    target = _dynamic(view, tmp_path)
    assert _symbol_axes(target, "N") == ({"x": 0}, [0])
    assert_batch_polymorphic(target, "N", {"x": normal(1, 6)})


def test_a_constant_sized_for_the_exported_batch_is_named(tmp_path: Path) -> None:
    """y = x + c with c an initializer of the exported batch's rows (a dynamo export folds
    zeros_like(x) so): the refusal named the Add and the output only; it names c, its shape
    and the way out."""
    path = graph_model(
        tmp_path / "m.onnx",
        [helper.make_node("Add", ["c", "x"], ["y"])],
        {"x": (F, [2, 5])},
        {"y": (F, [2, 5])},
        {"c": np.zeros((2, 5), np.float32)},
    )
    model = load_onnx_model(path)
    with pytest.raises(
        PassError, match=r"constant input 'c' \[2, 5\] holds the exported batch of 2"
    ):
        PassManager.parse("make-dynamic-batch")(model)
    assert [op.type for op in model.predict_net] == ["Add"]  # left as it was


def test_an_export_dynamic_already_is_still_refused_where_it_mixes_the_rows(
    tmp_path: Path,
) -> None:
    """Inference names the batch anew after a ``Concat`` or a ``Slice`` along it as after a
    residual ``Add``; only the broadcasting op passes the batch on: a softmax over the
    concatenated rows is no batch of separate results, and stays refused."""
    concat = [
        helper.make_node("Concat", ["x", "c"], ["t"], axis=0),
        helper.make_node("Softmax", ["t"], ["y"], axis=0),
    ]
    path = graph_model(
        tmp_path / "cat.onnx",
        concat,
        {"x": (F, ["N", 4])},
        {"y": (F, ["K", 4])},
        {"c": np.zeros((1, 4), np.float32)},
    )
    with pytest.raises(PassError, match=r"\(Concat\) takes the batch N in and gives none out"):
        PassManager.parse("make-dynamic-batch")(load_onnx_model(path))
    # the residual Add of a value reshaped at run time (a transformer's attention) passes it
    # on: inference, not following the target through Abs, names the Add's rows unk__2
    residual = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Abs", ["s"], ["target"]),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    path = graph_model(tmp_path / "res.onnx", residual, {"x": (F, ["N", 4])}, {"y": (F, ["N", 4])})
    (record,) = PassManager.parse("make-dynamic-batch", steps=1)(load_onnx_model(path))
    assert record.stats["symbol"] == "N"


def test_a_dead_head_does_not_keep_the_batch_from_being_made_dynamic(tmp_path: Path) -> None:
    """``run --outputs y -p optimize --dynamic-batch``: the head that mixes the rows is dead
    once the outputs are chosen; the pipeline removes it before the batch is made free."""
    nodes = [
        helper.make_node("Relu", ["x"], ["y"]),
        helper.make_node("Softmax", ["x"], ["z"], axis=0),
    ]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, 4])}, {"y": (F, [1, 4]), "z": (F, [1, 4])}
    )
    model = load_onnx_model(path)
    model.predict_net.set_external_outputs(["y"])
    run_stages(model, PassManager.parse("optimize"), dynamic_batch=True)
    assert [op.type for op in model.predict_net] == ["Relu"]
    assert model.predict_net.types["x"].shape == ("N", 4)


def test_rewritten_shapes_leave_no_unused_or_duplicate_initializer(tmp_path: Path) -> None:
    """A GRU export's two Reshapes of one target came out reading two equal new constants,
    with the old target kept unread (onnxruntime warns about it)."""
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["a"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "target"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 8, 1, 1])},
        {"y": (F, [1, 8])},
        {"target": np.array([1, 8], np.int64)},
    )
    written = onnx.load(str(_dynamic(path, tmp_path)))
    assert [t.name for t in written.graph.initializer] == ["target_batch"]
    assert [n.input[1] for n in written.graph.node if n.op_type == "Reshape"] == [
        "target_batch"
    ] * 2
    assert_batch_polymorphic(tmp_path / "dyn_m.onnx", "N", {"x": normal(1, 8, 1, 1)})


def test_recurrent_states_batched_on_axis_1_beside_a_batch_first_input(tmp_path: Path) -> None:
    """A batch-first LSTM fed its initial states ``h``, ``c`` ``[layers, batch, hidden]``:
    axis 0 of every input was tried, refused at the LSTM's state, and the refusal did not
    say how to name the axes. The states are now tried on axis 1."""
    hidden, features = 4, 3
    nodes = [
        helper.make_node("Transpose", ["x"], ["xs"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["xs", "W", "R", "B", "", "h", "c"], ["y"], hidden_size=hidden),
    ]
    weights = {
        "W": normal(1, 4 * hidden, features),
        "R": normal(1, 4 * hidden, hidden),
        "B": normal(1, 8 * hidden),
    }
    inputs = {"x": (F, [2, 5, features]), "h": (F, [1, 2, hidden]), "c": (F, [1, 2, hidden])}
    path = graph_model(tmp_path / "m.onnx", nodes, inputs, {"y": (F, [5, 1, 2, hidden])}, weights)
    target = _dynamic(path, tmp_path)
    assert _symbol_axes(target, "N")[0] == {"x": 0, "h": 1, "c": 1}
    feeds = {"x": normal(1, 5, features), "h": normal(1, 1, hidden), "c": normal(1, 1, hidden)}
    assert_batch_polymorphic(target, "N", feeds)
    # a node mixing the rows is still refused, now saying how to name the axes
    mixing = [*nodes, helper.make_node("Softmax", ["y"], ["z"], axis=2)]
    mixed = graph_model(
        tmp_path / "mix.onnx", mixing, inputs, {"z": (F, [5, 1, 2, hidden])}, weights
    )
    with pytest.raises(PassError, match=r"make-dynamic-batch\{inputs=x=0;h=0;c=0\}"):
        PassManager.parse("make-dynamic-batch")(load_onnx_model(mixed))


def test_a_net_two_sequence_ops_pin_on_both_axes_is_refused_not_looped_on(
    tmp_path: Path,
) -> None:
    """A batch-first LSTM feeding a GRU that reads its batch as time (torch's batch_first
    LSTM into a seq-first GRU): axis 0 is refused at the GRU, axis 1 at the LSTM, and the
    pass tried axis 1 again for ever."""
    hidden, features = 4, 3
    nodes = [
        helper.make_node("Transpose", ["x"], ["xs"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["xs", "W", "R", "B"], ["y"], hidden_size=hidden),
        helper.make_node("Squeeze", ["y", "one"], ["ys"]),
        helper.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2]),
        helper.make_node("GRU", ["yb", "GW", "GR", "GB"], ["z"], hidden_size=2),
    ]
    weights = {
        "W": normal(1, 4 * hidden, features),
        "R": normal(1, 4 * hidden, hidden),
        "B": normal(1, 8 * hidden),
        "GW": normal(1, 6, hidden),
        "GR": normal(1, 6, 2),
        "GB": normal(1, 12),
        "one": np.asarray([1], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 5, features])}, {"z": (F, [2, 1, 5, 2])}, weights
    )
    with pytest.raises(PassError, match="cannot make the batch dynamic"):
        PassManager.parse("make-dynamic-batch")(load_onnx_model(path))


def test_an_op_of_another_domain_is_refused_saying_where_to_free_the_batch(
    tmp_path: Path,
) -> None:
    """A contrib op (a quantizer's QGemm) pins nothing we can see through: the refusal
    suggested naming the inputs' axes, which changes nothing for it."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mystery", ["r"], ["y"], domain="com.example"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    with pytest.raises(PassError, match=r"Mystery.*is not a standard op") as refused:
        PassManager.parse("make-dynamic-batch")(load_onnx_model(path))
    assert "before the step that brought that op in" in str(refused.value)
    assert "inputs=" not in str(refused.value)


def test_a_body_output_declared_without_a_type_is_refused_by_name_not_a_codec_error(
    tmp_path: Path,
) -> None:
    """A Loop body whose condition output is declared without a type (graphtools' own
    exports of recurrent nets write it so): the pass names the Loop, the model is kept."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Relu", ["x_in"], ["x_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", F, [2, 3]),
        ],
        [
            helper.make_value_info("c_out", onnx.TypeProto()),
            helper.make_tensor_value_info("x_out", F, [2, 3]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "c", "x"], ["y"], body=body)],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
        [
            helper.make_tensor("m", TensorProto.INT64, [], [2]),
            helper.make_tensor("c", TensorProto.BOOL, [], [True]),
        ],
    )
    path = tmp_path / "loop.onnx"
    path.write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    )
    model = load_onnx_model(path)
    before = model.copy()
    with pytest.raises(PassError, match=r"node #0 of graph 'g' \(Loop\) carries the batch"):
        PassManager.parse("make-dynamic-batch")(model)
    assert model.predict_net.same_as(before.predict_net)
    save_onnx_model(model, tmp_path / "same.onnx")
    assert onnx.load(str(tmp_path / "same.onnx")) == onnx.load(str(path))
    # run's --dynamic-batch stage raises the first refusal with its cause (--traceback's chain)
    with pytest.raises(PassError) as refused:
        run_stages(model, PassManager.parse("default"), dynamic_batch=True)
    assert "carries the batch" in str(refused.value.__cause__)


def test_a_model_dynamic_already_is_told_it_needs_no_dynamic_batch(tmp_path: Path) -> None:
    """An export with a symbolic batch that combines its rows (a batch mean) is refused, as
    any model whose rows are not separate results; the refusal now says the model is
    dynamic already, so leaving the option out is what the user wants."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["y"]),
    ]
    path = tmp_path / "centred.onnx"
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, str(path))
    loaded = load_onnx_model(path)
    with pytest.raises(PassError, match="combines the rows") as caught:
        PassManager.parse("make-dynamic-batch")(loaded)
    assert "the inputs' batch is symbolic already ('N')" in str(caught.value)

"""``optimize`` against onnxsim on the corpus and on the onnx package's models, proven by
onnxruntime; bisection naming a broken pass; ``run`` on an ONNX model.

The table of ``fixtures/onnx/optimize_table.md`` holds, per model, the nodes before (bodies
included, as ``tests/onnx_peers.node_count`` counts), onnxsim's nodes and file size, ours and
our file size; each model's test recomputes ours and fails when it changes (``pytest
--update-goldens`` rewrites the row, asking onnxsim again when it is installed: the ``peers``
extra). Ours is never more than onnxsim's, except where onnxsim's fewer nodes come from folding
constants bigger than ``fold-constants``' size guard allows (the onnx package's ``light``
models hold their weights as ``ConstantOfShape`` placeholders: onnxsim turns a 4 KB AlexNet
into 244 MB): there the row also holds our count with onnxsim's own size limit, which must
not be more than onnxsim's, and onnxsim's file must be bigger than ours by more than the
guard. Every result passes ``check_model(full_check=True)``, keeps the opsets and gives
onnxruntime's outputs of the original on seeded inputs (fp32 rtol 1e-4, atol 1e-5).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import re
import sys
import types as pytypes
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest

pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
from conftest import REPO, run_cli
from onnx import TensorProto, helper
from onnx_check import (
    ATOL,
    RTOL,
    assert_same_outputs,
    check,
    graph_model,
    normal,
    run,
    run_model_bytes,
)
from onnx_corpus import CORPUS, CorpusModel, seeded_inputs
from onnx_peers import node_count
from onnx_testdata import PackageModel, onnx_package_models, read_data_set

from graphtools.ir import Model
from graphtools.pass_infra import ENTRY_POINT_GROUP, Pass, PassManager, PassResult, registry
from graphtools.passes.fold_constants import FoldConstants
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model
from graphtools.testing import compare_outputs, first_diverging_pass

TABLE = REPO / "fixtures" / "onnx" / "optimize_table.md"
ONNXSIM_LIMIT = 1536 * 2**20
"""onnxsim's default ``tensor_size_threshold`` (1.5 GB)."""
GUARD = FoldConstants().max_bytes
PACKAGE = {model.name: model for model in onnx_package_models()}
HEADER = (
    "| model | nodes | onnxsim | optimize | optimize, onnxsim's size limit | onnxsim bytes "
    "| our bytes |\n|---|---|---|---|---|---|---|\n"
)


@dataclass(frozen=True)
class Row:
    """One model's line of the table (``None``: not measured; onnxsim ``-1``: it failed)."""

    model: str
    nodes: int
    onnxsim: int | None
    ours: int
    unguarded: int | None
    onnxsim_bytes: int | None
    our_bytes: int

    def line(self) -> str:
        def cell(value: int | None) -> str:
            return "-" if value is None else ("error" if value == -1 else str(value))

        cells = [
            f"`{self.model}`",
            str(self.nodes),
            cell(self.onnxsim),
            str(self.ours),
            cell(self.unguarded),
            cell(self.onnxsim_bytes),
            str(self.our_bytes),
        ]
        return "| " + " | ".join(cells) + " |\n"


def _parse(cell: str) -> int | None:
    return None if cell == "-" else (-1 if cell == "error" else int(cell))


def table() -> dict[str, Row]:
    rows = {}
    for line in TABLE.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        rows[name] = Row(
            name,
            int(cells[1]),
            _parse(cells[2]),
            int(cells[3]),
            _parse(cells[4]),
            _parse(cells[5]),
            int(cells[6]),
        )
    return rows


def _write(rows: Mapping[str, Row]) -> None:
    intro = TABLE.read_text().split("\n| model |")[0]
    TABLE.write_text(intro + "\n" + HEADER + "".join(rows[k].line() for k in sorted(rows)))


# -- measuring ------------------------------------------------------------------------------------


def _optimized(path: Path, target: Path, pipeline: str = "optimize") -> tuple[Model, int, int]:
    """``pipeline`` on the model at ``path`` written to ``target``: the model, its nodes and
    its bytes (external data included)."""
    model = load_onnx_model(path)
    opsets = dict(model.opset_imports)
    PassManager.parse(pipeline)(model)
    assert dict(model.opset_imports) == opsets
    target.parent.mkdir(parents=True, exist_ok=True)
    save_onnx_model(model, target)
    size = sum(p.stat().st_size for p in target.parent.iterdir() if p.is_file())
    return model, node_count(onnx.load(str(target), load_external_data=False)), size


def _onnxsim(path: Path) -> tuple[int, int] | None:
    """onnxsim's nodes and bytes with its defaults; ``(-1, -1)`` when it fails; ``None``
    without onnxsim."""
    if importlib.util.find_spec("onnxsim") is None:
        return None
    import onnxsim

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            simplified, _ = onnxsim.simplify(onnx.load(str(path)))
        except Exception:  # onnxsim refusing a model is a result of the table
            return -1, -1
    return node_count(simplified), simplified.ByteSize()


def _package_feeds(model: PackageModel) -> dict[str, Any] | None:
    """The model's own data set, else seeded arrays of its inputs' types (a symbolic dim 1);
    ``None`` when an input is no tensor."""
    if model.data_set is not None:
        inputs, _ = read_data_set(model.data_set)
        graph = onnx.load(str(model.path), load_external_data=False).graph
        held = {t.name for t in graph.initializer}
        names = [i.name for i in graph.input if i.name not in held]
        return dict(zip(names, inputs, strict=False))
    graph = onnx.load(str(model.path), load_external_data=False).graph
    held = {t.name for t in graph.initializer}
    rng = np.random.default_rng(0)
    feeds: dict[str, Any] = {}
    for value in graph.input:
        if value.name in held:
            continue
        if not value.type.HasField("tensor_type"):
            return None
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype.kind == "f":
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iub":
            feeds[value.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            return None
    return feeds


def _outputs_equal(source: Path, target: Path, feeds: Mapping[str, Any] | None) -> None:
    """onnxruntime's outputs of ``target`` equal ``source``'s (when ``source`` runs at all)."""
    if feeds is None:
        return
    try:
        want = run(source, feeds)
    except Exception:  # onnxruntime cannot run the original (locale, a broken test model)
        return
    assert_same_outputs(want, run(target, feeds), source.name)


# -- the table ------------------------------------------------------------------------------------


def _cases() -> list[Any]:
    cases = [pytest.param(entry.name, id=entry.name) for entry in CORPUS]
    for name in PACKAGE:
        slow = [pytest.mark.slow] if name.startswith("light/") else []
        cases.append(pytest.param(name, id=name, marks=slow))
    return cases


@pytest.mark.parametrize("name", _cases())
def test_optimize_gives_no_more_nodes_than_onnxsim_and_the_same_outputs(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, update_goldens: bool
) -> None:
    if name in PACKAGE:
        package = PACKAGE[name]
        source, feeds = package.path, _package_feeds(package)
    else:
        corpus: list[CorpusModel] = request.getfixturevalue("onnx_corpus")
        found = next(model for model in corpus if model.name == name)
        source, feeds = found.path, seeded_inputs(found)
    target = tmp_path / "ours" / source.name
    _, ours, our_bytes = _optimized(source, target)
    check(target)
    _outputs_equal(source, target, feeds)
    nodes = node_count(onnx.load(str(source), load_external_data=False))
    rows = table()
    row = rows.get(name)
    if update_goldens:
        measured = _onnxsim(source)
        simmed = (
            (row.onnxsim, row.onnxsim_bytes)
            if measured is None and row
            else measured or (None, None)
        )
        unguarded = None
        if simmed[0] is not None and ours > simmed[0] >= 0:
            unguarded = _optimized(
                source,
                tmp_path / "unguarded" / source.name,
                f"fold-constants{{max_bytes={ONNXSIM_LIMIT}}},optimize",
            )[1]
        row = Row(name, nodes, simmed[0], ours, unguarded, simmed[1], our_bytes)
        rows[name] = row
        _write(rows)
    assert row is not None, f"{name} is not in {TABLE.name}: run pytest --update-goldens"
    assert (row.nodes, row.ours) == (nodes, ours), f"{name}: the table says {row}"
    if row.onnxsim is None or row.onnxsim < 0 or ours <= row.onnxsim:
        return
    # Fewer nodes for onnxsim only by folding past the size guard, into a bigger file.
    assert row.unguarded is not None and row.unguarded <= row.onnxsim, row
    assert row.onnxsim_bytes is not None and row.onnxsim_bytes > our_bytes + GUARD, row


def test_the_table_lists_every_model_and_optimize_wins_on_some() -> None:
    rows = table()
    assert set(rows) == {entry.name for entry in CORPUS} | set(PACKAGE)
    fewer = [r.model for r in rows.values() if r.onnxsim is not None and 0 <= r.ours < r.onnxsim]
    assert len(fewer) >= 15, fewer
    assert rows["gpt_block_dynamo"].ours < rows["gpt_block_dynamo"].nodes  # onnxsim grows it
    # The peers' known mistakes: the Loop body's Identity, the training batch norm.
    assert rows["scripted_loop_legacy"].ours <= rows["scripted_loop_legacy"].onnxsim  # type: ignore[operator]


@pytest.mark.slow
def test_the_onnxsim_column_is_what_onnxsim_gives(onnx_corpus: list[CorpusModel]) -> None:
    """onnxsim's counts in the table are current (needs the ``peers`` extra)."""
    pytest.importorskip("onnxsim", reason="onnxsim is in the optional 'peers' extra")
    paths = {model.name: model.path for model in onnx_corpus}
    paths.update({name: model.path for name, model in PACKAGE.items()})
    stale = {}
    for name, row in table().items():
        measured = _onnxsim(paths[name])
        if measured is not None and measured[0] != row.onnxsim:
            stale[name] = (row.onnxsim, measured[0])
    assert not stale, f"onnxsim's counts changed (table, now): {stale}"


def test_optimize_reaches_its_fixpoint(onnx_corpus: list[CorpusModel]) -> None:
    """A second run of the pipeline on its own result changes nothing."""
    for corpus_model in onnx_corpus:
        model = load_onnx_model(corpus_model.path)
        PassManager.parse("optimize")(model)
        again = PassManager.parse("optimize")(model)
        assert not any(record.modified for record in again), corpus_model.name


# -- bisection ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrongBatchNormFusion(Pass):
    """A broken ``fuse-batchnorm``: drops every inference BatchNormalization as if it were an
    identity (the scale and shift are lost), as a careless fusion would."""

    name: ClassVar[str] = "fuse-batchnorm"

    def call(self, model: Model) -> PassResult:
        net = model.predict_net
        found = [i for i, op in enumerate(net) if op.type == "BatchNormalization"]
        with net.edit() as edit:
            for index in found:
                op = net[index]
                edit.replace_all_uses_with((op.outputs[0], 1), (op.inputs[0], 1))
                edit.remove(index)
        return PassResult(model, edit.changed, {"fused": len(found)})


def _plug_in(monkeypatch: pytest.MonkeyPatch, cls: type[Pass]) -> None:
    """Publish ``cls`` as the pass of its name, in place of graphtools' own: its entry point
    and its registration (what ``available_passes`` reads)."""
    module = pytypes.ModuleType("graphtools_broken_passes")
    module.Broken = cls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    plugged = importlib.metadata.EntryPoint(
        cls.name, f"{module.__name__}:Broken", ENTRY_POINT_GROUP
    )
    installed = importlib.metadata.entry_points

    def entry_points(**kwargs: Any) -> Any:
        found = installed(**kwargs)
        if kwargs.get("group") != ENTRY_POINT_GROUP:
            return found
        kept = [ep for ep in found if ep.name != cls.name]
        return [*kept, plugged] if kwargs.get("name") in (None, cls.name) else kept

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    # Built-in pass modules also register their classes when imported: take that name too.
    monkeypatch.setitem(registry._REGISTRY, cls.name, cls)


def _bisect(model: Model, manager: PassManager, feeds: Mapping[str, Any]) -> tuple[str, int] | None:
    """What ``verify --bisect`` does on an ONNX model, with onnxruntime's outputs compared
    at the corpus' tolerances: the first pass and round after which they differ."""
    reference = dict(enumerate(run_model_bytes(model, feeds)))
    found = first_diverging_pass(
        model,
        manager,
        lambda current: compare_outputs(
            reference, dict(enumerate(run_model_bytes(current, feeds))), rtol=RTOL, atol=ATOL
        ),
    )
    return None if found is None else (found.pass_name, found.round)


def _conv_bn_relu(path: Path, *, identity_first: bool) -> Path:
    """A Conv -> BatchNormalization -> Relu model (after an Identity if asked), for the tests
    that plug a wrong batch-norm fusion into ``optimize``."""
    rng = np.random.default_rng(7)
    first = "i" if identity_first else "x"
    nodes = [
        *([helper.make_node("Identity", ["x"], ["i"])] if identity_first else []),
        helper.make_node("Conv", [first, "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    weights = {
        "w": normal(4, 3, 3, 3),
        "b": normal(4, seed=1),
        "s": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "t": rng.uniform(-1, 1, 4).astype(np.float32),
        "m": rng.uniform(-1, 1, 4).astype(np.float32),
        "v": rng.uniform(0.5, 1.5, 4).astype(np.float32),
    }
    return graph_model(
        path,
        nodes,
        {"x": (TensorProto.FLOAT, [1, 3, 5, 5])},
        {"y": (TensorProto.FLOAT, [1, 4, 5, 5])},
        weights,
    )


def test_bisect_names_a_broken_fusion_plugged_into_optimize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _conv_bn_relu(tmp_path / "m.onnx", identity_first=True)
    feeds = {"x": normal(1, 3, 5, 5)}
    model = load_onnx_model(path)
    assert _bisect(model, PassManager.parse("optimize"), feeds) is None  # the real passes
    _plug_in(monkeypatch, WrongBatchNormFusion)
    manager = PassManager.parse("optimize")
    assert "fuse-batchnorm" in [p.name for p in manager.passes_for(model.dialect)]
    broken = model.copy()
    manager(broken)  # every check passes: only the numbers show the mistake
    with pytest.raises(AssertionError):
        assert_same_outputs(run(path, feeds), run_model_bytes(broken, feeds), "broken")
    assert _bisect(model, manager, feeds) == ("fuse-batchnorm", 1)


# -- the command line -----------------------------------------------------------------------------


def test_run_optimizes_an_onnx_file_and_prints_the_op_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["f"]),
        helper.make_node("Gemm", ["f", "w"], ["y"], transB=1),
    ]
    weights = {
        "zero": np.array(0, np.int64),
        "axes": np.array([0], np.int64),
        "minus_one": np.array([-1], np.int64),
        "w": normal(5, 12),
    }
    source = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (TensorProto.FLOAT, [1, 3, 4])},
        {"y": (TensorProto.FLOAT, [1, 5])},
        weights,
        opset=13,
    )
    target = tmp_path / "out.onnx"
    code, out, _ = run_cli(
        capsys, "run", str(source), "-p", "optimize", "-o", str(target), "--dynamic-batch"
    )
    assert code == 0, out
    assert "opsets ai.onnx 13" in out
    table_lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert table_lines["Shape"] == ["1", "0"] and table_lines["Gemm"] == ["1", "1"]
    assert table_lines["nodes"] == ["6", "2"]
    assert "file size" in out
    written = onnx.load(str(target))
    assert next(d.dim_param for d in written.graph.input[0].type.tensor_type.shape.dim) == "N"
    x = normal(3, 3, 4)
    assert_same_outputs(run(source, {"x": x[:1]}), [run(target, {"x": x})[0][:1]], "batch")
    code, out, _ = run_cli(
        capsys,
        "run",
        str(source),
        "-p",
        "optimize",
        "-o",
        str(tmp_path / "o17.onnx"),
        "--opset",
        "17",
    )
    assert code == 0 and "opsets ai.onnx 17" in out


def test_run_refuses_a_batch_it_cannot_free_naming_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0),
        helper.make_node("Add", ["x", "m"], ["y"]),
    ]
    source = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (TensorProto.FLOAT, [2, 3])},
        {"y": (TensorProto.FLOAT, [2, 3])},
    )
    target = tmp_path / "out.onnx"
    code, _, err = run_cli(capsys, "run", str(source), "-o", str(target), "--dynamic-batch")
    assert code == 2 and not target.exists()
    assert re.search(r"node #0 .*\(ReduceMean\) combines the rows of the batch", err), err


def test_verify_bisect_names_the_broken_fusion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _conv_bn_relu(tmp_path / "m.onnx", identity_first=False)
    code, out, err = run_cli(capsys, "verify", str(path), "-p", "optimize", "--bisect")
    assert code == 0, out + err
    _plug_in(monkeypatch, WrongBatchNormFusion)
    code, out, err = run_cli(capsys, "verify", str(path), "-p", "optimize", "--bisect")
    assert code == 1, out + err
    assert "first pass that changed the outputs: fuse-batchnorm (round 1)" in out, out


# -- the backend node cases ----------------------------------------------------------------------


def test_optimize_on_every_backend_node_case(onnx_backend_node_cases: list[Any]) -> None:
    """The pipeline on 1,884 single-op models of every opset: the checker passes and
    onnxruntime gives the case's outputs wherever it runs the original. (The expanded 2-D
    AffineGrid feeds ``Range`` one-element vectors; once folding made the ``If`` choosing the
    2-D branch constant, onnxruntime inlined that branch at load and refused the Range;
    inlined by ``inline-constant-if`` (113 nodes to 74), the model loads and gives the case's
    outputs.)"""
    refused = {}
    for case in onnx_backend_node_cases:
        model = load_onnx_model(case.path)
        records = PassManager.parse("optimize")(model)
        if not any(record.modified for record in records):
            continue
        target = case.path.with_name(f"optimized_{case.path.name}")
        save_onnx_model(model, target)
        check(target)
        feeds = dict(case.inputs)
        if not all(isinstance(v, np.ndarray) for v in feeds.values()):
            continue
        try:
            want = run(case.path, feeds)
        except Exception:  # onnxruntime lacks the op or the type: nothing to compare with
            continue
        try:
            got = run(target, feeds)
        except Exception as exc:  # onnxruntime refuses the result
            refused[case.name] = str(exc)
            continue
        tolerances = {"rtol": max(case.rtol, 1e-4), "atol": max(case.atol, 1e-5)}
        for a, b in zip(want, got, strict=True):
            if a.dtype.kind in "fc":
                np.testing.assert_allclose(b, a, err_msg=case.name, **tolerances)
            elif a.dtype.kind != "O":
                np.testing.assert_array_equal(b, a, err_msg=case.name)
    assert refused == {}

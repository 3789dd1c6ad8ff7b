"""The CLI on real exports (issue 18's "Done when"): on every model of the PyTorch corpus,
``run -o`` keeps the opsets, keeps LSTM/GRU, removes every Identity the legacy exporter writes
(but one returning an outer-scope value from a body, which onnxruntime needs), the result passes
onnx's checker, ``verify -p default`` reports equal outputs, ``run -p ""`` gives the same model,
and ``show``, ``diff`` and ``draw`` work; on a sample of the backend node cases ``run -p ""``
gives the same model too (the codec's own tests cover every case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest
from conftest import run_cli

NODE_CASE_STRIDE = 8
"""Every 8th backend node case runs through the CLI (about 240 cases)."""


def _identities(graph: Any, nested: bool = False) -> list[tuple[str, bool, set[str]]]:
    """``(input, in a body, names the body defines)`` of every Identity node."""
    local = {o for n in graph.node for o in n.output}
    local |= {i.name for i in graph.input} | {t.name for t in graph.initializer}
    found = []
    for node in graph.node:
        if node.op_type == "Identity":
            found.append((node.input[0], nested, local))
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                found += _identities(sub, True)
    return found


def _same(first: Path, second: Path) -> None:
    a = onnx.load(str(first), load_external_data=False)
    b = onnx.load(str(second), load_external_data=False)
    assert a == b, first
    locations = {
        {e.key: e.value for e in t.external_data}["location"]
        for t in a.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
    }
    for location in locations:
        assert (first.parent / location).read_bytes() == (second.parent / location).read_bytes()


def test_the_cli_on_every_corpus_model(
    onnx_corpus: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy_identities = 0
    for corpus_model in onnx_corpus:
        source = corpus_model.path
        name = corpus_model.name
        target = tmp_path / name / f"{name}.onnx"
        code, out, err = run_cli(capsys, "run", str(source), "-o", str(target))
        assert code == 0, f"{name}: {err}"
        assert "warning" not in err, f"{name}: {err}"
        before = onnx.load(str(source), load_external_data=False)
        after = onnx.load(str(target), load_external_data=False)
        assert after.opset_import == before.opset_import, name
        assert after.ir_version == before.ir_version, name
        for op_type in ("LSTM", "GRU", "RNN"):
            count = [n.op_type for n in before.graph.node].count(op_type)
            assert [n.op_type for n in after.graph.node].count(op_type) == count, name
        if corpus_model.exporter == "legacy":
            legacy_identities += len(_identities(before.graph))
        for value, nested, local in _identities(after.graph):
            assert nested and value not in local, f"{name}: Identity of {value!r} left"
        onnx.checker.check_model(str(target), full_check=True)

        code, out, err = run_cli(capsys, "verify", str(source), "-p", "default")
        assert code == 0, f"{name}: {out}{err}"
        assert "outputs equal" in out

        same = tmp_path / f"{name}_same" / source.name
        assert run_cli(capsys, "run", str(source), "-p", "", "-o", str(same))[0] == 0, name
        _same(source, same)

        assert run_cli(capsys, "show", str(source))[0] == 0, name
        assert run_cli(capsys, "show", str(source), "--full")[0] == 0, name
        assert run_cli(capsys, "diff", str(source), str(target))[0] in (0, 1), name
        assert run_cli(capsys, "diff", str(source), str(same))[0] == 0, name
        dot = tmp_path / f"{name}.dot"
        assert run_cli(capsys, "draw", str(source), "--diff", str(target), "-o", str(dot))[0] == 0
    assert legacy_identities > 0  # the legacy exporter's Identity nodes were there to remove


def test_run_without_passes_keeps_node_cases(
    onnx_backend_node_cases: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = onnx_backend_node_cases[::NODE_CASE_STRIDE]
    assert len(cases) > 200
    for case in cases:
        target = tmp_path / f"{case.name}.onnx"
        code, _, err = run_cli(capsys, "run", str(case.path), "-p", "", "-o", str(target))
        assert code == 0, f"{case.name}: {err}"
        _same(case.path, target)

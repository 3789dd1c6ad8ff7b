"""Hostile ONNX input: mutants of real models load and survive, or are refused with a typed
error; through the CLI they exit 0 or 2 with one error line, and what ``run`` writes passes
onnx's checker (unless the checker rejected the input too, which run then says).

A short, seeded run of ``benchmarks/fuzz_onnx.py`` (the long campaign and its figures are
there), on the backend node cases and, with the ``torch`` extra, on the PyTorch corpus.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_onnx.py"
_spec = importlib.util.spec_from_file_location("fuzz_onnx", _PATH)
assert _spec is not None and _spec.loader is not None
fuzz = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fuzz  # its dataclasses look their module up
_spec.loader.exec_module(fuzz)

NODE_CASE_MUTANTS = 300
CORPUS_MUTANTS = 120
NODE_CASE_STRIDE = 6


def _report(bugs: list[tuple[Any, Any]]) -> str:
    return "\n".join(f"{m.how} (source {m.source}) at {o.step}:\n{o.detail}" for m, o in bugs[:3])


@pytest.fixture(scope="module")
def node_sources(onnx_backend_node_cases: list[Any]) -> list[Any]:
    return [
        fuzz.Source(c.name, c.path.read_bytes())
        for c in onnx_backend_node_cases[::NODE_CASE_STRIDE]
    ]


def test_node_case_mutants_are_survived_or_refused(node_sources: list[Any], tmp_path: Path) -> None:
    counts, bugs = fuzz.run_campaign(node_sources, NODE_CASE_MUTANTS, seed=18, work=tmp_path)
    assert not bugs, _report(bugs)
    assert counts["api ok"] + counts["api refused"] == NODE_CASE_MUTANTS
    assert counts["cli ok"] == NODE_CASE_MUTANTS
    # the mutants reach past the loader: many load, run and are written
    assert counts["run exit 0"] >= NODE_CASE_MUTANTS // 4
    assert counts["run exit 2"] >= NODE_CASE_MUTANTS // 10


def test_corpus_mutants_are_survived_or_refused(onnx_corpus: list[Any], tmp_path: Path) -> None:
    sources = [fuzz.file_source(m.path) for m in onnx_corpus]
    counts, bugs = fuzz.run_campaign(sources, CORPUS_MUTANTS, seed=5, work=tmp_path)
    assert not bugs, _report(bugs)
    assert counts["cli ok"] == CORPUS_MUTANTS
    assert counts["run exit 0"] >= CORPUS_MUTANTS // 4


def test_mutations_are_deterministic(node_sources: list[Any]) -> None:
    first = [m.data for m in fuzz.make_mutants(node_sources, 30, seed=3)]
    assert first == [m.data for m in fuzz.make_mutants(node_sources, 30, seed=3)]
    assert first != [m.data for m in fuzz.make_mutants(node_sources, 30, seed=4)]


@pytest.mark.parametrize(
    "how",
    ["nest", "odd-attribute", "no-branches", "bad-utf8", "external-location", "function"],
)
def test_the_campaign_makes_each_hostile_kind(node_sources: list[Any], how: str) -> None:
    kinds = {m.how for m in fuzz.make_mutants(node_sources, NODE_CASE_MUTANTS, seed=18)}
    assert how in kinds


def test_console_script_on_mutants_never_shows_a_traceback(
    node_sources: list[Any], tmp_path: Path
) -> None:
    found = shutil.which("graphtools", path=str(Path(sys.executable).parent))
    command = [found] if found else [sys.executable, "-m", "graphtools"]
    for number, mutant in enumerate(fuzz.make_mutants(node_sources, 3, seed=99)):
        path = tmp_path / f"m{number}.onnx"
        path.write_bytes(mutant.data)
        for argv in (["show", str(path)], ["run", str(path), "-o", str(tmp_path / f"o{number}")]):
            done = subprocess.run(
                [*command, *argv], capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode in (0, 2), done.stderr
            assert "Traceback" not in done.stderr
            if done.returncode == 2:
                assert len(done.stderr.splitlines()) == 1, done.stderr

"""Hostile input: mutants of real nets either survive everything or are refused with a typed error.

A short, seeded run of ``benchmarks/fuzz_nets.py`` (the long campaign and its figures are there):
each API mutant loads and survives print, the SSA table, verify, the default pipeline and a save
+ reload (which must load and print the same), or is refused with a ``GraphToolsError``; CLI
mutants exit 0 or 2 without raising, in-process and through the console script.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_nets.py"
_spec = importlib.util.spec_from_file_location("fuzz_nets", _PATH)
assert _spec is not None and _spec.loader is not None
fuzz = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fuzz  # its dataclasses look their module up
_spec.loader.exec_module(fuzz)

API_MUTANTS = 300
CLI_MUTANTS = 40


def _report(bugs: list[tuple[object, object]]) -> str:
    return "\n".join(
        f"{m.how} ({m.which} of source {m.source}) at {o.step}:\n{o.detail}"  # type: ignore[attr-defined]
        for m, o in bugs[:3]
    )


def test_mutants_are_survived_or_refused_with_typed_errors(
    real_fixtures: Path, tmp_path: Path
) -> None:
    sources = fuzz.load_sources(real_fixtures)
    counts, bugs = fuzz.run_campaign(sources, API_MUTANTS, CLI_MUTANTS, seed=14, work=tmp_path)
    assert not bugs, _report(bugs)
    assert counts["api ok"] + counts["api refused"] == API_MUTANTS
    assert counts["cli ok"] == CLI_MUTANTS
    # The mutants reach past the loader: many load and run the whole way.
    assert counts["api ok"] >= API_MUTANTS // 4


def test_mutations_are_deterministic(real_fixtures: Path) -> None:
    sources = fuzz.load_sources(real_fixtures)
    first = [m.data for m in fuzz.make_mutants(sources, 30, seed=3)]
    assert first == [m.data for m in fuzz.make_mutants(sources, 30, seed=3)]
    assert first != [m.data for m in fuzz.make_mutants(sources, 30, seed=4)]


def test_console_script_on_mutants_never_shows_a_traceback(
    real_fixtures: Path, tmp_path: Path
) -> None:
    found = shutil.which("graphtools", path=str(Path(sys.executable).parent))
    command = [found] if found else [sys.executable, "-m", "graphtools"]
    sources = fuzz.load_sources(real_fixtures)
    for number, mutant in enumerate(fuzz.make_mutants(sources, 4, seed=99)):
        path = tmp_path / f"m{number}.pb"
        path.write_bytes(mutant.data)
        for argv in (["show", str(path)], ["run", str(path), "-o", str(tmp_path / f"o{number}")]):
            done = subprocess.run(
                [*command, *argv], capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode in (0, 2), done.stderr
            assert "Traceback" not in done.stderr
            if done.returncode == 2:
                assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize("how", ["nest", "step-net", "bad-utf8", "text-deep"])
def test_the_campaign_makes_each_hostile_kind(real_fixtures: Path, how: str) -> None:
    sources = fuzz.load_sources(real_fixtures)
    kinds = {m.how for m in fuzz.make_mutants(sources, API_MUTANTS, seed=14)}
    assert how in kinds

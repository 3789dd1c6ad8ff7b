"""graphtools' pytest plugin, as a user's test suite meets it: registered under ``pytest11``,
``--update-goldens``, golden and equivalence assertions, the model fixtures."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from graphtools.pass_infra import PassManager
from graphtools.pytest_plugin import (
    assert_matches_golden,
    assert_models_equivalent,
    assert_net_matches_golden,
)
from graphtools.serde import load_model_dir

TINY = FIXTURES / "models" / "tiny_export"

USER_TESTS = f'''
from graphtools.pass_infra import PassManager
from graphtools.pytest_plugin import assert_models_equivalent


def test_pipeline_keeps_outputs(load_model, golden):
    model = load_model("{TINY}")
    before = model.copy()
    PassManager.parse("default")(model)
    assert_models_equivalent(before, model)
    golden.check(model, "goldens/tiny.txt")


def test_fixture_says_whether_goldens_are_updated(update_goldens):
    assert isinstance(update_goldens, bool)
'''


def test_the_plugin_is_published_under_pytest11() -> None:
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert found.get("graphtools") == "graphtools.pytest_plugin"


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_users_suite_writes_checks_and_updates_goldens(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(USER_TESTS)
    golden = tmp_path / "goldens" / "tiny.txt"
    first = _pytest(tmp_path)
    assert first.returncode == 1 and "did not exist; it was written" in first.stdout
    assert golden.read_text().startswith("net init_net 'tiny_export_init'")
    assert _pytest(tmp_path).returncode == 0
    golden.write_text(golden.read_text().replace("Relu", "Tanh", 1))
    stale = _pytest(tmp_path)
    assert stale.returncode == 1
    assert "golden mismatch" in stale.stdout and "-  %1 Tanh" in stale.stdout
    assert _pytest(tmp_path, "--update-goldens").returncode == 0
    assert "Tanh" not in golden.read_text()
    assert "--update-goldens" in _pytest(tmp_path, "--help").stdout


def test_assertions_fail_on_what_differs(tmp_path: Path) -> None:
    model = load_model_dir(TINY)
    broken = model.copy()
    net = broken.predict_net
    index = next(i for i, op in enumerate(net) if op.type == "Relu")
    net.replace_op(index, net[index].replace(type="Sigmoid"))
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(model, broken)
    cleaned = model.copy()
    PassManager.parse("default")(cleaned)
    assert_models_equivalent(model, cleaned)
    path = tmp_path / "g.txt"
    assert_net_matches_golden(model.predict_net, path, update=True)
    assert_net_matches_golden(model.predict_net, path)
    with pytest.raises(pytest.fail.Exception, match="golden mismatch"):
        assert_net_matches_golden(broken.predict_net, path)
    with pytest.raises(pytest.fail.Exception, match="did not exist"):
        assert_matches_golden("text\n", tmp_path / "new.txt")
    assert (tmp_path / "new.txt").read_text() == "text\n"


RELATIVE_TESTS = """
def test_load_model_resolves_beside_the_test_file(load_model, golden):
    model = load_model("model")  # beside this file, as golden.check's paths are
    golden.check(model, "goldens/model.txt")
"""


def test_load_model_and_golden_resolve_paths_alike_and_updates_are_listed(
    tmp_path: Path,
) -> None:
    """Issue 21 item 10: ``load_model`` resolves a relative path beside the test file, as
    ``golden`` does (it used to resolve it from the working directory), and
    ``--update-goldens`` lists the golden files it rewrote."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_relative.py").write_text(RELATIVE_TESTS)
    shutil.copytree(TINY, suite / "model")
    first = _pytest(tmp_path)  # the working directory is not the test file's folder
    assert "did not exist; it was written" in first.stdout, first.stdout
    assert _pytest(tmp_path).returncode == 0
    golden = suite / "goldens" / "model.txt"
    golden.write_text(golden.read_text().replace("Relu", "Tanh", 1))
    updated = _pytest(tmp_path, "--update-goldens")
    assert updated.returncode == 0
    assert f"golden files written (review the diff): 1\n  {golden}" in updated.stdout
    assert "golden files written" not in _pytest(tmp_path, "--update-goldens").stdout

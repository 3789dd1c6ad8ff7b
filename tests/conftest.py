"""Shared test fixtures: where the real model files are, how to run the CLI, and the ONNX models
to test the ONNX dialect on (``onnx_corpus``, ``onnx_backend_node_cases``).

``--update-goldens`` and the ``update_goldens`` fixture come from graphtools' own pytest plugin
(``graphtools.pytest_plugin``, entry point ``pytest11``), which the golden tests use.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from graphtools.cli import main
from graphtools.errors import SerdeError
from graphtools.pass_infra import ENTRY_POINT_GROUP
from graphtools.serde import load_ir_net

if TYPE_CHECKING:
    from onnx_corpus import CorpusModel
    from onnx_testdata import NodeCase

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
SHARED_REAL = Path(
    os.environ.get("GRAPHTOOLS_REAL_FIXTURES", REPO.parent / "shared" / "fixtures-real")
)
"""The real published model files: ``../shared/fixtures-real``, or ``$GRAPHTOOLS_REAL_FIXTURES``."""
ONNX_CORPUS_CACHE = os.environ.get("GRAPHTOOLS_ONNX_CORPUS")
"""A folder that keeps the exported ONNX corpus between sessions (``$GRAPHTOOLS_ONNX_CORPUS``);
unset, each session exports it again into its own temporary folder."""


def pytest_report_header(config: pytest.Config) -> str:
    if SHARED_REAL.is_dir():
        return f"real model fixtures: {SHARED_REAL}"
    return (
        f"real model fixtures: NOT FOUND at {SHARED_REAL}; the tests that use them will skip "
        "(set GRAPHTOOLS_REAL_FIXTURES=/path/to/fixtures-real)"
    )


_REAL_ENTRY_POINTS = importlib.metadata.entry_points


def _own_entry_points(**kwargs: Any) -> Any:
    found = _REAL_ENTRY_POINTS(**kwargs)
    if kwargs.get("group") == ENTRY_POINT_GROUP:
        return [ep for ep in found if ep.value.startswith("graphtools.passes.")]
    return found


@pytest.fixture(autouse=True)
def _only_graphtools_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see graphtools' own passes only: a pass another installed package publishes
    (say a user's ``break-relu``) must not change what a test finds or clash with its names."""
    monkeypatch.setattr(importlib.metadata, "entry_points", _own_entry_points)


def publish_passes(
    monkeypatch: pytest.MonkeyPatch, classes: Mapping[str, object], **targets: str
) -> None:
    """Publish plugin entry points beside graphtools' own, for one test.

    ``classes`` become attributes of a fake module ``graphtools_test_plugin``; each
    ``targets`` item is an entry point ``name = "module:attribute"``.
    """
    module = types.ModuleType("graphtools_test_plugin")
    for attribute, value in classes.items():
        setattr(module, attribute, value)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    extra = [
        importlib.metadata.EntryPoint(name, target, ENTRY_POINT_GROUP)
        for name, target in targets.items()
    ]

    def with_plugins(**kwargs: Any) -> Any:
        found = _own_entry_points(**kwargs)
        if kwargs.get("group") != ENTRY_POINT_GROUP:
            return found
        named = [ep for ep in extra if kwargs.get("name") in (None, ep.name)]
        return [*found, *named]

    monkeypatch.setattr(importlib.metadata, "entry_points", with_plugins)


def real_net_files() -> list[Path]:
    """The real files (``.pb``/``.pbtxt`` under ``SHARED_REAL``) that load as a NetDef, sorted;
    none when the folder is absent. The scans over every real net parametrize with these."""
    found = []
    for path in sorted(SHARED_REAL.rglob("*")):
        if path.suffix not in (".pb", ".pbtxt"):
            continue
        try:
            load_ir_net(path)
        except SerdeError:
            continue
        found.append(path)
    return found


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """The folder of real published model files; skips the test when it is absent."""
    if not SHARED_REAL.is_dir():
        pytest.skip(
            f"real model fixtures not found at {SHARED_REAL} (put ../shared beside the repo or "
            "set GRAPHTOOLS_REAL_FIXTURES)"
        )
    return SHARED_REAL


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``graphtools ARGV`` in-process; returns ``(exit code, stdout, stderr)``."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def save_pair_with_unfit_weights(folder: Path) -> Path:
    """An FC pair whose init_net fills a bias of the wrong size (5 for 3 outputs), saved in
    ``folder``: the weights a verify or an export must not take as they are."""
    from graphtools.ir import Model, Net, Op
    from graphtools.serde import save_model

    net = Net([Op("FC", ["x", "w", "b"], ["y"])], ["x", "w", "b"], ["y"], name="net")
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"], args={"shape": [3, 7], "values": [0.5] * 21}),
            Op("GivenTensorFill", [], ["b"], args={"shape": [5], "values": [0.0] * 5}),
        ],
        name="init",
    )
    save_model(Model(net, init), folder)
    return folder


TINY_DEAD_HEAD_NOTE = (
    "note: no op writes unused_debug any more: nothing read it and the net does not declare "
    "it as an output (to keep an output, declare it: --outputs A,B)\n"
)
"""What ``run`` says when its pipeline removes the bundled fixture's dead debug head."""


def assert_one_error_line(err: str, *fragments: str) -> None:
    """The CLI's bad-input contract: one ``error: ...`` line holding every fragment."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="session")
def onnx_corpus(tmp_path_factory: pytest.TempPathFactory) -> list[CorpusModel]:
    """The ONNX corpus of ``tests/onnx_corpus.py``, exported once per session (about 25 s);
    skips the test without the ``torch`` extra (torch and onnxscript)."""
    pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript (extra 'torch')")
    from onnx_corpus import build_corpus

    if ONNX_CORPUS_CACHE:
        return build_corpus(Path(ONNX_CORPUS_CACHE))
    return build_corpus(tmp_path_factory.mktemp("onnx_corpus"))


@pytest.fixture(scope="session")
def onnx_backend_node_cases(tmp_path_factory: pytest.TempPathFactory) -> list[NodeCase]:
    """Every backend node case of the installed onnx package, generated with onnx's own data
    generator and written as model files once per session (about 5 s)."""
    from onnx_testdata import write_node_cases

    return write_node_cases(tmp_path_factory.mktemp("onnx_node_cases"))

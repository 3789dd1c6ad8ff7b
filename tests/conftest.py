"""Shared test fixtures: where the real model files are, and the ``--update-goldens`` option."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphtools.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
SHARED_REAL = REPO.parent / "shared" / "fixtures-real"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite fixtures/golden/**/expected.txt from the current output (review the diff)",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """The folder of real published model files; skips the test when it is absent."""
    if not SHARED_REAL.is_dir():
        pytest.skip(
            f"real model fixtures not found at {SHARED_REAL} (../shared is not beside the repo)"
        )
    return SHARED_REAL


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``graphtools ARGV`` in-process; returns ``(exit code, stdout, stderr)``."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, *fragments: str) -> None:
    """The CLI's bad-input contract: one ``error: ...`` line holding every fragment."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]

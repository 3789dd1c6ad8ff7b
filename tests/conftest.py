"""Shared test fixtures: where the real model files are, and the ``--update-goldens`` option."""

from __future__ import annotations

from pathlib import Path

import pytest

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

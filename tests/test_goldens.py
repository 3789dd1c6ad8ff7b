"""Golden pipeline cases under fixtures/golden: dump before/after, modified flag, stats.

Run ``pytest tests/test_goldens.py --update-goldens`` to rewrite the expected files after an
intended change, then review the diff. The comparison and the option are graphtools' pytest
plugin's (``graphtools.pytest_plugin``), the one users get for their own fixture nets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from graphtools.golden import EXPECTED, GoldenCase, find_cases, render_case
from graphtools.pytest_plugin import assert_matches_golden

GOLDEN_ROOT = FIXTURES / "golden"
CASES = find_cases(GOLDEN_ROOT)


@pytest.mark.parametrize("folder", CASES, ids=[str(c.relative_to(GOLDEN_ROOT)) for c in CASES])
def test_golden_case(folder: Path, update_goldens: bool) -> None:
    case = GoldenCase.load(folder)
    text, after, _ = render_case(case, FIXTURES.parent)
    assert_matches_golden(text, folder / EXPECTED, update=update_goldens)
    if after is not None:
        assert "// second run modified: False" in text, "the pipeline is not at a fixpoint"
    else:
        assert "// model unchanged: True" in text, "a refused pipeline changed the model"


def test_every_golden_pass_folder_has_cases() -> None:
    folders = [p for p in GOLDEN_ROOT.iterdir() if p.is_dir()] if GOLDEN_ROOT.exists() else []
    assert folders, "no golden cases found"
    for folder in folders:
        assert find_cases(folder), f"{folder} holds no case"

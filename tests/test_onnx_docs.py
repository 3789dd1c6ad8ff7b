"""The claimed-ops table in docs/onnx.md matches what the importer implements."""

from __future__ import annotations

import re
from pathlib import Path

from graphtools.onnx import supported_ops

DOC = Path(__file__).resolve().parents[1] / "docs" / "onnx.md"


def _documented() -> dict[str, tuple[int, ...]]:
    text = DOC.read_text()
    match = re.search(r"<!-- import-table -->\n(.*?)<!-- /import-table -->", text, re.S)
    assert match, "docs/onnx.md has no import table"
    table = {}
    for line in match.group(1).splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        table[cells[0]] = tuple(int(v) for v in cells[1].split(","))
    return table


def test_docs_table_lists_every_claimed_op_and_schema_version() -> None:
    assert _documented() == supported_ops()

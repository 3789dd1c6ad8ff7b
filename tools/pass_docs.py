"""Write docs/passes/<name>.md for every registered pass, from its class's docstring.

Run it after changing a pass's docstring or options: ``python tools/pass_docs.py``;
tests/test_docs.py fails while a page differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from graphtools.pass_infra import available_passes
from graphtools.pass_infra.describe import pass_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "passes"


def main() -> None:
    DOCS.mkdir(parents=True, exist_ok=True)
    for name, cls in available_passes().items():
        if cls.__module__.startswith("graphtools.passes."):
            (DOCS / f"{name}.md").write_text(pass_markdown(cls))
            print(f"wrote {DOCS / f'{name}.md'}")


if __name__ == "__main__":
    main()

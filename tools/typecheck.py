"""Type-check the installed layout of graphtools with mypy.

``passes/`` and ``proto/`` install as ``graphtools.passes`` and ``graphtools.proto`` through
setuptools' ``package-dir`` mapping, which mypy cannot follow. This script builds a link tree in
``.typecheck/`` that mirrors the installed package (symlinks, so nothing is copied) and runs
mypy on it. Usage: ``python tools/typecheck.py`` from the repository root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE = REPO / ".typecheck"


def build_tree() -> Path:
    """Recreate ``.typecheck/graphtools`` as links to the sources; return the package path."""
    shutil.rmtree(TREE, ignore_errors=True)
    package = TREE / "graphtools"
    package.mkdir(parents=True)
    for entry in (REPO / "graphtools").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, package / entry.name)
    os.symlink(REPO / "passes", package / "passes")
    os.symlink(REPO / "proto", package / "proto")
    return package


def main() -> int:
    build_tree()
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
    command += ["--exclude", r"_pb2\.py$", "-p", "graphtools"]
    return subprocess.call(command, cwd=TREE)


if __name__ == "__main__":
    sys.exit(main())

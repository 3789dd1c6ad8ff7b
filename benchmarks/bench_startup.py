"""Start-up benchmark: the whole process of short commands, as a batch over a folder pays it
once per model.

Each command runs once to warm up, then ``--repeats`` times (default 7) as a fresh process,
and keeps its fastest wall time. The children write and read bytecode in a temporary folder
(``PYTHONPYCACHEPREFIX``), whatever ``PYTHONDONTWRITEBYTECODE`` says here: an installed
package has its bytecode, and compiling graphtools' modules at every start would double a
short command's time. The commands:

* ``python -c pass`` (the interpreter's floor) and ``python -c "import onnx"`` (the floor of
  any command that reads an ONNX model: onnx imports numpy, protobuf and ml_dtypes);
* ``graphtools --version``, ``graphtools show`` of the bundled Caffe2 fixture
  (``fixtures/models/tiny_export``), ``show`` and ``run -p default`` of a 100-node
  synthetic ONNX model (``synth_onnx.py``).

Printed with the ratio of each command to the floor its work needs (the interpreter for the
Caffe2 commands, ``import onnx`` for the ONNX ones: what graphtools adds) and to the
interpreter (what a user waits for: a slow dependency hides in the first ratio, not in this
one), and the import time of ml_dtypes as this environment has it (0.7.0 took 0.5 s: the
reason for pyproject's ``ml_dtypes!=0.7.0``).

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --repeats 3
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import format_table, with_bytecode
from synth_onnx import make_synthetic_onnx, write_model

ROOT = Path(__file__).resolve().parent.parent
CAFFE2_FIXTURE = ROOT / "fixtures" / "models" / "tiny_export"
SMALL_ONNX_NODES = 100


def fastest(command: Sequence[str], repeats: int, env: dict[str, str]) -> float:
    """The fastest wall time of ``command`` over ``repeats`` fresh processes, after one
    uncounted run (which compiles what the bytecode folder lacks).

    Raises:
        RuntimeError: the command failed (its error output is in the message).
    """
    best = math.inf
    for run in range(repeats + 1):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
        if run:
            best = min(best, elapsed)
    return best


def ml_dtypes_import_seconds(env: dict[str, str]) -> tuple[str, float]:
    """ml_dtypes' version and the time its import takes once numpy is imported (fresh
    process)."""
    code = (
        "import time, numpy; start = time.perf_counter(); import ml_dtypes; "
        "print(ml_dtypes.__version__, time.perf_counter() - start)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    version, seconds = done.stdout.split()
    return version, float(seconds)


def install_kind(env: dict[str, str]) -> str:
    """How the measured graphtools is installed: an editable install's import finder runs at
    every start of the interpreter (``python -c pass`` included), which ``pip install .``
    does not have."""
    code = "import sys, graphtools; print(any(m.startswith('__editable__') for m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    editable = done.stdout.strip() == "True"
    return "an editable install (pip install -e)" if editable else "a regular install"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh processes per command")
    options = parser.parse_args()
    python = sys.executable
    graphtools = [python, "-m", "graphtools"]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        small = write_model(make_synthetic_onnx(SMALL_ONNX_NODES), Path(folder) / "small.onnx")
        out = Path(folder) / "out"
        env = with_bytecode(Path(folder) / "bytecode")
        floors = {
            "python": fastest([python, "-c", "pass"], options.repeats, env),
            "import onnx": fastest([python, "-c", "import onnx"], options.repeats, env),
        }
        commands = [
            ("graphtools --version", [*graphtools, "--version"], "python"),
            (
                "graphtools show (Caffe2 fixture)",
                [*graphtools, "show", str(CAFFE2_FIXTURE)],
                "python",
            ),
            (
                f"graphtools show ({SMALL_ONNX_NODES}-node ONNX)",
                [*graphtools, "show", str(small)],
                "import onnx",
            ),
            (
                f"graphtools run ({SMALL_ONNX_NODES}-node ONNX)",
                [*graphtools, "run", str(small), "-o", str(out), "-q"],
                "import onnx",
            ),
        ]
        python_floor = floors["python"]
        rows = [
            [name, f"{seconds:.3f}s", "", "", f"{seconds / python_floor:.1f}x"]
            for name, seconds in floors.items()
        ]
        for name, command, floor in commands:
            seconds = fastest(command, options.repeats, env)
            by_floor = f"{seconds / floors[floor]:.1f}x"
            rows.append(
                [name, f"{seconds:.3f}s", floor, by_floor, f"{seconds / python_floor:.1f}x"]
            )
        version, seconds = ml_dtypes_import_seconds(env)
        kind = install_kind(env)
    print(
        f"Fresh processes with bytecode, fastest of {options.repeats}; ratio to the floor "
        "each command needs, and to the interpreter's start"
    )
    print(format_table(["command", "seconds", "floor", "ratio", "to python"], rows))
    print(f"ml_dtypes {version}: import {seconds * 1000:.0f} ms after numpy")
    print(f"graphtools measured: {kind}")


if __name__ == "__main__":
    main()

"""How the inspecting commands scale: ``graphtools show`` (with shape inference),
``graphtools verify`` (the executor runs the net before and after the default pipeline),
``graphtools ssa`` and ``show --params`` (a table row per blob or parameter) and
``graphtools diff`` (a model against what ``run`` made of it) on synthetic Caffe2 pairs of
growing size, and ``diff`` on synthetic ONNX models (``synth_onnx.py``), each as a fresh
process (best of ``--repeats``).

Printed per command and size: the wall time, the time per op and the growth against the
smaller size (linear work grows as the net does: 4x for 4x the ops; a membership test against
a list inside a loop over ops shows as 16x). ``show`` and ``verify`` once took 45 s and 90 s
on nets of 40k and 20k ops that way; ``diff`` of a 10^5-op pair and its optimised copy more
than ten minutes (its init_net's fills, all of one type and reading nothing, were each
matched against all the others).

    python benchmarks/bench_commands.py                      # 10^4 and 4x10^4 ops, ~1 min
    python benchmarks/bench_commands.py --sizes 20000,80000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import format_table, generate
from synth_onnx import make_synthetic_onnx, write_model

SHAPES = "data=1x2x2x2"
"""The synthetic nets' data input (``synth.py``)."""


def _seconds(argv: list[str], repeats: int) -> float:
    """The best wall time of ``argv`` (exit 1, ``diff``'s "the models differ", is a result)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed (exit {done.returncode})")
    return best


def _diff_argv(model: Path) -> list[str]:
    return [sys.executable, "-m", "graphtools", "diff", str(model), str(_optimised(model))]


def _optimised(model: Path) -> Path:
    """Where the default pipeline's result of ``model`` is written (beside it)."""
    return model.with_name(f"{model.stem}.optimised{model.suffix}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,40000", help="ops per net, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    graphtools = [sys.executable, "-m", "graphtools"]
    commands = {
        "show": lambda model: [*graphtools, "show", str(model), "--shapes", SHAPES],
        "verify": lambda model: [*graphtools, "verify", str(model), "--shapes", SHAPES],
        "ssa": lambda model: [*graphtools, "ssa", str(model)],
        "show --params": lambda model: [*graphtools, "show", str(model), "--params"],
        "diff": _diff_argv,
        "diff (ONNX)": _diff_argv,
    }
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        models: dict[str, dict[int, Path]] = {"pair": {}, "onnx": {}}
        for size in sizes:
            folder = Path(scratch) / str(size)
            folder.mkdir()
            generate(size, 0, folder)
            models["pair"][size] = folder
            onnx_path = write_model(make_synthetic_onnx(size, 0), Path(scratch) / f"{size}.onnx")
            models["onnx"][size] = onnx_path
            for model in (folder, onnx_path):  # what diff compares with, made untimed
                subprocess.run(
                    [*graphtools, "run", "-q", str(model), "-o", str(_optimised(model))],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
        for name, argv in commands.items():
            first = None
            for size in sizes:
                model = models["onnx" if "ONNX" in name else "pair"][size]
                seconds = _seconds(argv(model), options.repeats)
                growth = (
                    "-"
                    if first is None
                    else f"{seconds / first[1]:.1f}x for {size / first[0]:.0f}x ops"
                )
                first = first or (size, seconds)
                rows.append(
                    [
                        name,
                        f"{size:,}",
                        f"{seconds:.2f} s",
                        f"{seconds / size * 1e6:.0f} us",
                        growth,
                    ]
                )
    print(format_table(["command", "ops", "wall", "per op", "growth"], rows))


if __name__ == "__main__":
    main()

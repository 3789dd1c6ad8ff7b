"""How the inspecting commands scale: ``graphtools show`` (with shape inference) and
``graphtools verify`` (the executor runs the net before and after the default pipeline) on
synthetic Caffe2 pairs of growing size, each as a fresh process (best of ``--repeats``).

Printed per command and size: the wall time, the time per op and the growth against the
smaller size (linear work grows as the net does: 4x for 4x the ops; a membership test against
a list inside a loop over ops shows as 16x). ``show`` and ``verify`` once took 45 s and 90 s
on nets of 40k and 20k ops that way.

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

SHAPES = "data=1x2x2x2"
"""The synthetic nets' data input (``synth.py``)."""


def _seconds(argv: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,40000", help="ops per net, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    graphtools = [sys.executable, "-m", "graphtools"]
    commands = {
        "show": lambda folder: [*graphtools, "show", str(folder), "--shapes", SHAPES],
        "verify": lambda folder: [*graphtools, "verify", str(folder), "--shapes", SHAPES],
    }
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folders = {}
        for size in sizes:
            folders[size] = Path(scratch) / str(size)
            folders[size].mkdir()
            generate(size, 0, folders[size])
        for name, argv in commands.items():
            first = None
            for size in sizes:
                seconds = _seconds(argv(folders[size]), options.repeats)
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

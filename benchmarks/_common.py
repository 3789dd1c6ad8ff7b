"""Helpers shared by the benchmark scripts: timing, loading, peak-memory children, tables.

Run as a script (``python benchmarks/_common.py MODE PREDICT [INIT]``) it is the child process
that measures the peak resident memory one step adds: it notes the resident size after the
imports, runs the step (reading the files included) and prints the peak increase in bytes as
JSON.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from resource import RUSAGE_SELF, getrusage
from typing import Any

from graphtools.ir import Model, Net
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_ir_net, netdef_bytes
from graphtools.serde import load_model as serde_load_model

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from synth import make_synthetic_pair, write_pair  # noqa: E402


def with_bytecode(folder: Path) -> dict[str, str]:
    """This process's environment, with bytecode written to and read from ``folder``
    whatever ``PYTHONDONTWRITEBYTECODE`` says: an installed package has its bytecode, so a
    fresh child must not be timed compiling the modules it imports on first use."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder)
    return env


def children_use_bytecode(folder: Path) -> None:
    """Let every child process this one starts from now on keep its bytecode in ``folder``
    (``with_bytecode``); the first child compiles, the others time the code alone."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)


def cpu_usage() -> tuple[float, float, int]:
    """This process's user seconds, system seconds and minor page faults so far."""
    usage = getrusage(RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime, usage.ru_minflt


def cpu_since(before: tuple[float, float, int]) -> dict[str, float]:
    """User and system seconds and minor page faults since ``before`` (``cpu_usage``): where
    a wall time went. On a virtual machine the kernel's time to fault in fresh memory grows
    with the footprint, for protobuf's run as for ours, and varies from run to run."""
    user, system, faults = cpu_usage()
    return {"user": user - before[0], "system": system - before[1], "faults": faults - before[2]}


def cpu_cells(run: dict[str, Any]) -> str:
    """``user + system s, N faults`` of a run's ``cpu_since`` figures."""
    return f"{run['user']:.2f}+{run['system']:.2f}s, {run['faults'] / 1000:,.0f}k faults"


def growth_of(small: float, large: float) -> str:
    """``x<large / small>``, or ``-`` when the small figure is below the clock's resolution."""
    return f"x{large / small:.1f}" if small > 0 else "-"


def best_of(repeats: int, step: Callable[[], Any]) -> float:
    """Best wall time of ``step`` over ``repeats`` runs; results are freed outside the timing."""
    best = math.inf
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = step()
        elapsed = time.perf_counter() - start
        del result
        best = min(best, elapsed)
    return best


def repeats_for(num_ops: int) -> int:
    """Best-of-3 below a million ops, a single run from there."""
    return 3 if num_ops < 1_000_000 else 1


def generate(num_ops: int, seed: int, folder: Path) -> tuple[Path, Path, float]:
    """Write a synthetic pair into ``folder``; returns the paths and the generation time."""
    start = time.perf_counter()
    predict, init = make_synthetic_pair(num_ops, seed)
    seconds = time.perf_counter() - start
    predict_path, init_path = write_pair(predict, init, folder)
    return predict_path, init_path, seconds


def parse(data: bytes) -> caffe2_pb2.NetDef:
    """Plain protobuf parse (the baseline)."""
    net = caffe2_pb2.NetDef()
    net.ParseFromString(data)
    return net


def load_net(path: Path) -> tuple[Net, str]:
    """graphtools' load of one net, and how it was done."""
    return load_ir_net(path)[0], "serde.load_ir_net"


def load_model(predict_path: Path, init_path: Path | None) -> Model:
    """graphtools' load of a pair."""
    return serde_load_model(predict_path, init_path)


def net_bytes(net: Net) -> bytes:
    """graphtools' binary save of one net, without the disk."""
    return netdef_bytes(net, text=False)


def save_bytes(model: Model) -> list[bytes]:
    """graphtools' binary save of every net of ``model`` (init_net first), without the disk."""
    return [net_bytes(net) for net in model.nets()]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain fixed-width table (first column left-aligned, the others right-aligned)."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


_CLI_RUN = """
import sys
from graphtools.interrupt import exit_on_signals
exit_on_signals()
from graphtools.cli import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print(int(status) * 1024)
sys.exit(code)
"""
"""``graphtools run`` as ``console_main`` runs it, then its own peak (``VmHWM``: ``ru_maxrss``
of a child starts at its parent's peak on Linux, and the console script ends by ``os._exit``)."""


def cli_run(predict_path: Path, init_path: Path | None, out_dir: Path) -> tuple[float, int]:
    """Wall seconds and whole-process peak resident bytes of a fresh ``graphtools run -q`` of
    the pair into ``out_dir``: what a user's command costs, start-up and reporting included."""
    argv = ["run", "-q", str(predict_path), "-o", str(out_dir)]
    argv += [] if init_path is None else ["--init", str(init_path)]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CLI_RUN, *argv], check=True, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    return seconds, int(done.stdout.split()[-1])


def peak_memory(mode: str, predict_path: Path, init_path: Path | None = None) -> int:
    """Peak resident bytes that step ``mode`` adds, measured in a fresh child process."""
    command = [sys.executable, str(Path(__file__).resolve()), mode, str(predict_path)]
    if init_path is not None:
        command.append(str(init_path))
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return int(json.loads(done.stdout.strip().splitlines()[-1])["bytes"])


def _child_step(mode: str, paths: list[Path]) -> Callable[[], Any]:
    init_path = paths[1] if len(paths) > 1 else None
    if mode == "pb-parse":
        return lambda: [parse(path.read_bytes()) for path in paths]
    if mode == "gt-load":
        return lambda: load_model(paths[0], init_path)
    if mode == "gt-load-ssa":

        def load_and_ssa() -> Any:
            from graphtools.ssa import get_ssa

            model = load_model(paths[0], init_path)
            return model, get_ssa(model.predict_net)

        return load_and_ssa
    if mode == "gt-pipeline":

        def pipeline() -> Any:
            from bench_passes import build_pipeline

            model = load_model(paths[0], init_path)
            manager, _ = build_pipeline()
            if manager is not None:
                manager(model)
            return model, save_bytes(model)

        return pipeline
    raise SystemExit(f"unknown memory mode {mode!r}")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _child_main(argv: Sequence[str]) -> None:
    mode, *names = argv
    step = _child_step(mode, [Path(name) for name in names])
    gc.collect()
    # ru_maxrss survives exec (it starts at the parent's peak), so on Linux the peak is reset
    # with clear_refs and read as VmHWM; elsewhere ru_maxrss (KiB on Linux) is the fallback.
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
        use_proc = True
    except OSError:
        before = getrusage(RUSAGE_SELF).ru_maxrss
        use_proc = False
    result = step()
    after = _status_kib("VmHWM") if use_proc else getrusage(RUSAGE_SELF).ru_maxrss
    del result
    print(json.dumps({"mode": mode, "bytes": (after - before) * 1024}))


if __name__ == "__main__":
    _child_main(sys.argv[1:])

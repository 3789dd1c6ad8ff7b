"""Pass benchmark: load + default pipeline + save, against protobuf and against naive upstream.

For each size (default 10^5 and 10^6 ops) a synthetic pair (``synth.py``) is written to disk,
then timed:

* ``pb``: ``ParseFromString`` + ``SerializeToString`` of both files' bytes (the floor any tool
  reading and writing the files pays);
* ``graphtools``: ``serde.load_model`` + ``PassManager`` (``default`` pipeline unless
  ``--pipeline`` says otherwise; the manager's verify and checks included) + serialisation of
  both nets; printed with its parts and as a ratio to ``pb``.

Each timed run happens in a fresh Python process, as a user's ``graphtools run`` would (in
this process, the largest size would run in a heap left fragmented by generating the nets and
by the smaller runs), and every size keeps the fastest of ``--repeats`` (3) such runs: the
scaling ratio compares like with like only if both sizes get the same number of tries.

Then the scaling ratio t(largest) / t(previous size), the comparison with ``upstream_naive``
(detectron2's algorithms re-implemented with their quadratic restarts) at ``--naive-sizes``
and at the first benchmark size, measured when the fitted growth says it fits in
``--naive-budget`` seconds, otherwise extrapolated and labelled so, and the peak memory of
the whole graphtools run at the largest size against parsing the two protobufs.

A pass of ``remove-reshape-for-fc``, ``fuse-copy-ops``, ``remove-dead-ends`` that is not
registered yet is skipped with a printed note, so the script runs while passes are missing.

    python benchmarks/bench_passes.py
    python benchmarks/bench_passes.py --quick            # 10^4 and 10^5, naive at 10^3, 10^4
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import upstream_naive
from _common import (
    best_of,
    children_use_bytecode,
    cli_run,
    cpu_cells,
    cpu_since,
    cpu_usage,
    format_table,
    generate,
    growth_of,
    load_model,
    parse,
    peak_memory,
    save_bytes,
)

from graphtools._core import CAFFE2
from graphtools.pass_infra import PassManager

WANTED_PASSES = ("remove-reshape-for-fc", "fuse-copy-ops", "remove-dead-ends")
WATCHED_TYPES = ("Reshape", "CopyCPUToGPU", "CopyGPUToCPU", "Sigmoid")


def build_pipeline(spec: str = "default") -> tuple[PassManager | None, list[str]]:
    """The manager for ``spec`` and notes on the wanted passes it lacks.

    When ``spec`` names a pass that is not registered, or is ``default`` and leaves out a
    registered pass of ``WANTED_PASSES``, the registered subset of ``WANTED_PASSES`` runs
    instead (``None`` when there is none).
    """
    from graphtools.pass_infra import PipelineSpecError, available_passes

    known = available_passes()
    notes = [
        f"pass {name!r} is not registered yet: skipped"
        for name in WANTED_PASSES
        if name not in known
    ]
    try:
        manager: PassManager | None = PassManager.parse(spec)
    except PipelineSpecError as exc:
        subset = [name for name in WANTED_PASSES if name in known]
        notes.append(f"pipeline {spec!r} does not parse ({exc}); running {subset or 'nothing'}")
        manager = PassManager.parse(",".join(subset)) if subset else None
    if manager is not None:
        running = {item.name for item in manager.passes_for(CAFFE2)}  # 'default' expanded
        absent = [name for name in WANTED_PASSES if name in known and name not in running]
        if absent and spec == "default":
            subset = [name for name in WANTED_PASSES if name in known]
            notes.append(
                f"'default' is {manager.spec!r}, without {absent}; running {','.join(subset)} "
                "instead so that the comparison with upstream_naive is like for like"
            )
            manager = PassManager.parse(",".join(subset))
        elif absent:
            notes.append(f"pipeline {manager.spec!r} does not run registered passes {absent}")
    return manager, notes


def _graphtools_run(
    manager: PassManager | None, predict_path: Path, init_path: Path
) -> tuple[dict[str, float], dict[str, Any]]:
    """One load + pipeline + save; the seconds of each part and what the passes did."""
    parts: dict[str, float] = {}
    start = time.perf_counter()
    model = load_model(predict_path, init_path)
    parts["load"] = time.perf_counter() - start
    ops_before = len(model.predict_net)
    start = time.perf_counter()
    records = manager(model) if manager is not None else []
    parts["pipeline"] = time.perf_counter() - start
    for record in records:
        parts[record.name] = parts.get(record.name, 0.0) + record.seconds
    start = time.perf_counter()
    saved = save_bytes(model)
    parts["save"] = time.perf_counter() - start
    parts["total"] = parts["load"] + parts["pipeline"] + parts["save"]
    del saved
    predict_out = model.predict_net
    report = {
        "ops": (ops_before, len(predict_out)),
        "rounds": max((record.round for record in records), default=0),
        "left": Counter(op.type for op in predict_out if op.type in WATCHED_TYPES),
    }
    return parts, report


def _child_measure(kind: str, spec: str, predict_path: Path, init_path: Path) -> dict[str, Any]:
    """One timing of ``kind`` (``pb`` or ``graphtools``) in a fresh Python process.

    Each run starts from a clean interpreter, as a user's ``graphtools run`` does: timed in
    this process, the largest size would run in a heap left fragmented by generating the
    nets and by the smaller sizes' runs, which slows the runs that come last for reasons that
    have nothing to do with the code measured.
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind]
    command += ["--pipeline", spec, str(predict_path), str(init_path)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _best_graphtools_run(
    spec: str, predict_path: Path, init_path: Path, repeats: int
) -> tuple[dict[str, float], dict[str, Any]]:
    """The fastest of ``repeats`` fresh-process runs: its parts and what the passes did."""
    runs = [_child_measure("graphtools", spec, predict_path, init_path) for _ in range(repeats)]
    best = min(runs, key=lambda run: run["parts"]["total"])
    report = best["report"]
    report["left"] = Counter(report["left"])
    return best["parts"], report


def _pb_run(spec: str, predict_path: Path, init_path: Path, repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` fresh-process parse+serialise runs of both files: its
    seconds and ``cpu_since`` figures."""
    runs = [_child_measure("pb", spec, predict_path, init_path) for _ in range(repeats)]
    return min(runs, key=lambda run: float(run["seconds"]))


def _child_main(kind: str, spec: str, predict_path: Path, init_path: Path) -> None:
    """Time one run of ``kind`` in this (fresh) process and print it as JSON."""
    gc.collect()
    if kind == "pb":
        data = [predict_path.read_bytes(), init_path.read_bytes()]
        usage, start = cpu_usage(), time.perf_counter()
        saved = [parse(blob).SerializeToString() for blob in data]
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, **cpu_since(usage)}))
        del saved
        return
    manager, _ = build_pipeline(spec)
    usage = cpu_usage()
    parts, report = _graphtools_run(manager, predict_path, init_path)
    report["cpu"] = cpu_since(usage)
    report["left"] = dict(report["left"])
    print(json.dumps({"parts": parts, "report": report}))


def _naive_time(predict_path: Path, init_path: Path, repeats: int) -> float:
    predict, init = predict_path.read_bytes(), init_path.read_bytes()
    return best_of(repeats, lambda: upstream_naive.run_pipeline(predict, init))


def _times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:,.0f}x"


def _secs(value: float) -> str:
    return f"{value:.3f}s" if value < 100 else f"{value:,.0f}s"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated op counts (default 100000,1000000)")
    parser.add_argument(
        "--naive-sizes", help="sizes to time upstream_naive at (default 1000,10000)"
    )
    parser.add_argument("--naive-budget", type=float, default=600.0, help="seconds for naive runs")
    parser.add_argument("--pipeline", default="default", help="pipeline spec (default: default)")
    parser.add_argument("--quick", action="store_true", help="sizes 10^4, 10^5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="fresh-process runs per size, the fastest kept (default 3)",
    )
    parser.add_argument("--child", choices=("pb", "graphtools"), help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        _child_main(options.child, options.pipeline, *options.files)
        return
    sizes = [
        int(s)
        for s in (options.sizes or ("10000,100000" if options.quick else "100000,1000000")).split(
            ","
        )
    ]
    naive_sizes = [int(s) for s in (options.naive_sizes or "1000,10000").split(",")]

    manager, notes = build_pipeline(options.pipeline)
    for note in notes:
        print(f"note: {note}")
    print(f"pipeline: {manager.spec if manager is not None else '(none)'}")

    with tempfile.TemporaryDirectory(prefix="graphtools-bench-") as tmp:
        children_use_bytecode(Path(tmp) / "bytecode")  # as installed: no run times compiling
        paths: dict[int, tuple[Path, Path]] = {}
        for size in sorted({*sizes, *naive_sizes}):
            predict_path, init_path, seconds = generate(size, options.seed, Path(tmp) / str(size))
            paths[size] = (predict_path, init_path)
            megabytes = (predict_path.stat().st_size + init_path.stat().st_size) / 1e6
            print(
                f"{size:>9,} ops: generated in {seconds:.1f}s, {megabytes:.1f} MB (both nets)",
                flush=True,
            )

        runs: dict[int, tuple[float, dict[str, float], dict[str, Any]]] = {}
        for size in sorted({*sizes, *naive_sizes}):
            repeats = options.repeats
            pb_run = _pb_run(options.pipeline, *paths[size], repeats)
            pb = pb_run["seconds"]
            parts, report = _best_graphtools_run(options.pipeline, *paths[size], repeats)
            report["pb_cpu"] = pb_run
            runs[size] = (pb, parts, report)
            print(f"{size:>9,} ops: pb {_secs(pb)}, graphtools {_secs(parts['total'])}", flush=True)

        print()
        print(
            f"Load + pipeline + save, best of {options.repeats} processes; ratio to pb in the "
            "same run"
        )
        pass_names = [name for name in WANTED_PASSES if any(name in runs[s][1] for s in sizes)]
        headers = ["ops", "pb parse+ser", "graphtools", "ratio", "load", *pass_names]
        headers += ["pipeline", "save", "ops after", "rounds", "left"]
        rows = []
        for size in sizes:
            pb, parts, report = runs[size]
            left = ", ".join(f"{k}:{v}" for k, v in sorted(report["left"].items())) or "-"
            rows.append(
                [f"{size:,}", _secs(pb), _secs(parts["total"]), f"{parts['total'] / pb:.1f}x"]
                + [_secs(parts[name]) for name in ["load", *pass_names, "pipeline", "save"]]
                + [f"{report['ops'][1]:,}", str(report["rounds"]), left]
            )
        print(format_table(headers, rows))
        print("(pipeline = the manager's whole run: the passes plus its verify and checks)")
        print("CPU time (user+system) and page faults of those runs:")
        for size in sizes:
            report = runs[size][2]
            print(
                f"  {size:,}: pb {cpu_cells(report['pb_cpu'])}; "
                f"graphtools {cpu_cells(report['cpu'])}"
            )
        if len(sizes) > 1:
            small, large = sizes[-2], sizes[-1]
            ratio = runs[large][1]["total"] / runs[small][1]["total"]
            pb_ratio = runs[large][0] / runs[small][0]
            print(
                f"\nScaling t({large:,}) / t({small:,}): graphtools {ratio:.1f}, pb {pb_ratio:.1f} "
                f"({large / small:g}x the ops)"
            )
            for kind in ("user", "system"):
                ours = [runs[size][2]["cpu"][kind] for size in (small, large)]
                theirs = [runs[size][2]["pb_cpu"][kind] for size in (small, large)]
                print(f"{kind} time growth: graphtools {growth_of(*ours)}, pb {growth_of(*theirs)}")

        _compare_naive(options, sizes[0], naive_sizes, paths, runs)

        if not options.no_memory:
            largest = sizes[-1]
            pb_bytes = peak_memory("pb-parse", *paths[largest])
            load_bytes = peak_memory("gt-load", *paths[largest])
            run_bytes = peak_memory("gt-pipeline", *paths[largest])
            with tempfile.TemporaryDirectory() as scratch:
                cli_seconds, cli_peak = cli_run(*paths[largest], Path(scratch) / "out")
            print(f"\nPeak resident memory at {largest:,} ops (fresh process each), both nets")
            print(
                format_table(
                    ["pb parse", "gt load", "gt load+pipeline+save", "graphtools run (whole)"],
                    [
                        [
                            f"{pb_bytes / 1e6:.0f} MB",
                            f"{load_bytes / 1e6:.0f} MB {load_bytes / pb_bytes:.1f}x",
                            f"{run_bytes / 1e6:.0f} MB {run_bytes / pb_bytes:.1f}x",
                            f"{cli_peak / 1e6:.0f} MB, {cli_seconds:.1f} s",
                        ]
                    ],
                )
            )
            print(
                "(the first three: what the step adds to the interpreter's; the last: a fresh "
                "`graphtools run PAIR -o OUT`'s whole peak and wall time, start-up included)"
            )


def _compare_naive(
    options: argparse.Namespace,
    target: int,
    naive_sizes: list[int],
    paths: dict[int, tuple[Path, Path]],
    runs: dict[int, tuple[float, dict[str, float], dict[str, Any]]],
) -> None:
    """Time upstream_naive at the naive sizes, then measure or extrapolate it at ``target``."""
    print(f"\nupstream_naive (budget {options.naive_budget:.0f}s)", flush=True)
    spent = 0.0
    naive: dict[int, float] = {}
    for size in naive_sizes:
        naive[size] = _naive_time(*paths[size], 3 if size <= 1_000 else 1)
        spent += naive[size] * (3 if size <= 1_000 else 1)
        print(f"{size:>9,} ops: naive {_secs(naive[size])}", flush=True)
    label = "measured"
    explanation = ""
    if target not in naive:
        measured = sorted(naive)
        if len(measured) >= 2:
            (n1, t1), (n2, t2) = [(n, naive[n]) for n in measured[-2:]]
            exponent = math.log(t2 / t1) / math.log(n2 / n1)
        else:
            n2, t2, exponent = measured[-1], naive[measured[-1]], 2.0
        fitted = t2 * (target / n2) ** exponent
        quadratic = t2 * (target / n2) ** 2
        if spent + fitted <= options.naive_budget and target in paths:
            naive[target] = _naive_time(*paths[target], 1)
        else:
            naive[target] = min(fitted, quadratic)
            label = "EXTRAPOLATED"
            explanation = (
                f"EXTRAPOLATED: not run at {target:,} ops (~{_secs(fitted)}, over the "
                f"budget). From t({n2:,}) = {_secs(t2)}: growth exponent {exponent:.2f} fitted "
                f"on the measured sizes gives {_secs(fitted)}, exponent 2 (the algorithms' "
                f"order) gives {_secs(quadratic)}; the table shows the smaller."
            )
    rows = []
    for size in sorted(naive):
        graphtools = runs[size][1]["total"] if size in runs else math.nan
        rows.append(
            [
                f"{size:,}",
                _secs(naive[size]),
                _secs(graphtools),
                _times(naive[size] / graphtools),
                label if size == target else "measured",
            ]
        )
    headers = ["ops", "upstream_naive", "graphtools", "naive / graphtools", "naive time"]
    print(format_table(headers, rows))
    if explanation:
        print(explanation)
    print(
        "(both include parse/load and serialise/save; upstream_naive is a lower bound on upstream)"
    )


if __name__ == "__main__":
    main()

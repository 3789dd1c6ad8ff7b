"""Foundation benchmark: graphtools load / SSA / save against plain protobuf, 10^3 to 10^6 ops.

For each size a synthetic predict_net (``synth.py``) is written to a temporary folder, then
timed (best of 3, one run at 10^6 ops):

* ``pb``: ``NetDef.ParseFromString`` + ``SerializeToString`` of the same bytes, the baseline;
* ``load``: graphtools' load (``serde.load_ir_net``: read, sniff, parse, IR);
* ``ssa``: ``graphtools.ssa.get_ssa`` on the loaded IR net;
* ``save``: ``serde.netdef_bytes(net, text=False)`` (``to_netdef().SerializeToString()``
  without serde);
* ``load+save``: the round trip, the number to hold against ``pb``.

Every graphtools time is also printed as a ratio to ``pb`` measured in the same run, then the
scaling ratio of the largest size to the one before it (10x more ops should cost about 10x),
then the peak memory each step adds, measured in a fresh child process per size and step, as
a ratio to what parsing the protobuf adds.

    python benchmarks/bench_foundation.py                  # 10^3 .. 10^6
    python benchmarks/bench_foundation.py --quick          # 10^3 .. 10^5
    python benchmarks/bench_foundation.py --sizes 100000,1000000
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _common import (
    best_of,
    format_table,
    generate,
    load_net,
    net_bytes,
    parse,
    peak_memory,
    repeats_for,
)

from graphtools.ssa import get_ssa

DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
STEPS = ("pb", "load", "ssa", "save", "load+save")


def _measure(predict_path: Path, repeats: int) -> tuple[dict[str, float], bool, str]:
    """Times of every step, whether the round trip was byte-identical, and how load was done."""
    data = predict_path.read_bytes()
    times = {
        "pb": best_of(repeats, lambda: parse(data).SerializeToString()),
        "load": best_of(repeats, lambda: load_net(predict_path)),
    }
    net, how = load_net(predict_path)
    times["ssa"] = best_of(repeats, lambda: get_ssa(net))
    times["save"] = best_of(repeats, lambda: net_bytes(net))
    times["load+save"] = times["load"] + times["save"]
    identical = net_bytes(net) == data
    return times, identical, how


def _seconds(value: float) -> str:
    return f"{value:.3f}s" if value < 100 else f"{value:.0f}s"


def _ratio(value: float, base: float) -> str:
    """``value / base`` as ``12.3x``; ``-`` when the base is below a megabyte (noise)."""
    return f"{value / base:4.1f}x" if base >= 1e6 else "   -"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated op counts (default 10^3..10^6)")
    parser.add_argument("--quick", action="store_true", help="sizes 10^3..10^5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    options = parser.parse_args(argv)
    if options.sizes:
        sizes = [int(size) for size in options.sizes.split(",")]
    else:
        sizes = list(QUICK_SIZES if options.quick else DEFAULT_SIZES)

    results: dict[int, dict[str, float]] = {}
    memory: dict[int, dict[str, int]] = {}
    rows, memory_rows = [], []
    how = ""
    with tempfile.TemporaryDirectory(prefix="graphtools-bench-") as tmp:
        for size in sizes:
            folder = Path(tmp) / str(size)
            predict_path, _, generated = generate(size, options.seed, folder)
            megabytes = predict_path.stat().st_size / 1e6
            print(f"{size:>9,} ops: generated in {generated:.1f}s, {megabytes:.1f} MB", flush=True)
            times, identical, how = _measure(predict_path, repeats_for(size))
            results[size] = times
            base = times["pb"]
            rows.append(
                [f"{size:,}", f"{megabytes:.1f}", _seconds(base)]
                + [f"{_seconds(times[s])} {times[s] / base:5.1f}x" for s in STEPS[1:]]
                + ["yes" if identical else "NO"]
            )
            if not options.no_memory:
                usage = {
                    mode: peak_memory(mode, predict_path)
                    for mode in ("pb-parse", "gt-load", "gt-load-ssa")
                }
                memory[size] = usage
                parsed = usage["pb-parse"]
                memory_rows.append(
                    [f"{size:,}", f"{parsed / 1e6:.0f} MB"]
                    + [
                        f"{usage[m] / 1e6:.0f} MB {_ratio(usage[m], parsed)}"
                        for m in ("gt-load", "gt-load-ssa")
                    ]
                )

    print()
    print(f"Time per step, best of 3 (1 at 10^6), ratio to pb in the same run; load = {how}")
    headers = ["ops", "MB", "pb parse+ser", "load", "ssa", "save", "load+save", "identical"]
    print(format_table(headers, rows))
    if len(sizes) > 1:
        small, large = sizes[-2], sizes[-1]
        print()
        print(f"Scaling t({large:,}) / t({small:,}) for {large / small:g}x the ops")
        print(
            format_table(
                list(STEPS),
                [[f"{results[large][s] / results[small][s]:.1f}" for s in STEPS]],
            )
        )
    if memory_rows:
        print()
        print("Peak resident memory added by the step (fresh process each), ratio to pb parse")
        print(format_table(["ops", "pb parse", "gt load", "gt load+ssa"], memory_rows))


if __name__ == "__main__":
    main()

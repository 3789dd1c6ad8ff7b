"""Rewriter benchmark: an edit of k ops costs O(k + what it touches), not O(n).

For each net size n (default 10^5 and 10^6 ops, synthetic nets from ``synth.py``) whose SSA
view is current, times with k fixed (default 100):

* ``insert``: one ``net.edit()`` inserting k ops at spread positions (each reads a blob of the
  net and writes a fresh one) and removing k dead ops, then use-def queries about every
  inserted blob (``net.producer``) and the blobs they read (``net.uses``): what a pass does
  between two full sweeps;
* ``derive``: the whole view of the edited net afterwards (``net.ssa()``, derived from the
  overlay the edit left: numpy over the old view's columns, no name hashed again);
* ``build``: the whole view built from scratch (``SSAView.build``), the cost an edit would pay
  without the overlay.

Each column is the best of ``--repeats`` runs on a fresh copy of the net. The last table
divides the times at the largest size by those at the smallest: for 10x the ops, about 1
means the cost does not grow with the net, about 10 means linear.

    python benchmarks/bench_rewriter.py
    python benchmarks/bench_rewriter.py --sizes 10000,100000 --k 1000
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from _common import format_table, make_synthetic_pair

from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef
from graphtools.ssa_view import SSAView


def _timed(step: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def _dead_ops(net: Net, k: int) -> list[int]:
    """Up to ``k`` ops whose outputs nothing reads and no external output names."""
    outputs = set(net.external_outputs)
    read = {name for op in net for name in op.inputs}
    return [
        i
        for i, op in enumerate(net)
        if op.outputs and not outputs.intersection(op.outputs) and read.isdisjoint(op.outputs)
    ][:k]


def _plan(net: Net, k: int) -> tuple[list[tuple[int, Op]], list[int]]:
    """k ops to insert at spread positions, and up to k dead ops to remove: chosen before the
    timing, as a pass's analysis would. Each inserted op reads a blob written once (so what
    it touches does not grow with the net: an in-place chain of the synthetic trunk, written
    at every block, would make the queries about it grow with the net, as they should)."""
    writes = Counter(name for op in net for name in op.outputs)
    single = [i for i, op in enumerate(net) if op.outputs and writes[op.outputs[0]] == 1]
    step = max(1, len(single) // k)
    positions = single[::step][:k]
    new = [(p, Op("Relu", [net[p].outputs[0]], [f"bench_new_{p}"])) for p in positions]
    return new, _dead_ops(net, k)


def _edit(net: Net, new: list[tuple[int, Op]], dead: list[int]) -> None:
    """The timed part: one edit, then ask about every blob involved."""
    with net.edit() as edit:
        for position, op in new:
            edit.insert(position + 1, [op])
        for index in dead:
            edit.remove(index)
    for _, op in new:
        assert net.producer((op.outputs[0], 1)) is not None
        net.uses((op.inputs[0], 1))


def _measure(n: int, k: int, repeats: int) -> dict[str, float]:
    predict, _ = make_synthetic_pair(n, seed=0)
    data = predict.SerializeToString()
    del predict
    runs = [_one_run(data, k) for _ in range(repeats)]
    return {column: min(run[column] for run in runs) for column in runs[0]}


def _one_run(data: bytes, k: int) -> dict[str, float]:
    """The three timings on a freshly loaded net whose view is current."""
    net = net_from_netdef(caffe2_pb2.NetDef.FromString(data), serialized=data)
    new, dead = _plan(net, k)
    net.ssa()
    net.uses((net[0].outputs[0], 1))  # the view's per-key reader index, built once per view
    net.nested_op_indices()  # (cached per revision, as after a pipeline's verify)
    return {
        "insert": _timed(lambda: _edit(net, new, dead)),
        "derive": _timed(net.ssa),
        "build": _timed(lambda: SSAView.build(net)),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated op counts")
    parser.add_argument("--k", type=int, default=100, help="ops inserted (and removed) per edit")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    sizes = [int(s) for s in options.sizes.split(",")]
    results = {n: _measure(n, options.k, options.repeats) for n in sizes}
    rows = [
        [
            f"{n:,}",
            f"{r['insert'] * 1000:.1f} ms",
            f"{r['derive'] * 1000:.0f} ms",
            f"{r['build'] * 1000:.0f} ms",
            f"{r['build'] / r['insert']:.0f}x",
        ]
        for n, r in results.items()
    ]
    print(f"edit of k={options.k} inserted + {options.k} removed ops, then their use-def queries")
    print(format_table(["ops", "insert", "derive", "build", "build/insert"], rows))
    first, last = results[sizes[0]], results[sizes[-1]]
    growth = sizes[-1] / sizes[0]
    print(f"\ngrowth from {sizes[0]:,} to {sizes[-1]:,} ops ({growth:g}x the ops):")
    print(
        format_table(
            ["insert", "derive", "build"],
            [[f"{last[c] / first[c]:.2f}" for c in ("insert", "derive", "build")]],
        )
    )


if __name__ == "__main__":
    main()

"""ONNX benchmark: load + a pipeline + save, against protobuf and against onnx-ir.

For each size (default 10^5 and 10^6 nodes) a synthetic model (``synth_onnx.py``: one weight
initializer per node or nearly, exporters' attributes and names, identities, dead ends) is
written to disk, then timed, each run in a fresh Python process (process start-up aside: the
timings start after the imports, and the children keep bytecode as an installed package has
it, so no run is timed compiling a module it imports on first use):

* ``pb``: ``onnx.load`` + ``SerializeToString`` of the file (the floor any tool reading and
  writing the file pays);
* ``graphtools``: ``load_onnx_model`` + ``PassManager.parse(PIPELINE)`` (``--pipeline``,
  ``default`` unless told: ``--pipeline optimize`` times the ONNX optimisation; the manager's
  verify and checks included) + ``save_onnx_model``, with its parts, and as a ratio to ``pb``;
* ``onnx-ir``: ``onnx_ir.load`` + ``RemoveUnusedNodesPass`` + ``onnx_ir.save``, the peer users
  pick for this job, and its ratio to ``pb``.

Every size keeps the fastest of ``--repeats`` runs; then the growth t(largest) / t(previous),
with each run's CPU time split into user and system and its page faults: on a virtual machine
the system time of faulting fresh memory in grows faster than the size, for every mode.

    python benchmarks/bench_onnx.py
    python benchmarks/bench_onnx.py --sizes 10000,100000 --repeats 1
    python benchmarks/bench_onnx.py --pipeline optimize --no-peer
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from _common import (  # noqa: E402
    children_use_bytecode,
    cpu_cells,
    cpu_since,
    cpu_usage,
    growth_of,
)
from synth_onnx import make_synthetic_onnx, write_model  # noqa: E402

MODES = ("pb", "graphtools", "onnx-ir")


def _child(mode: str, source: Path, target: Path, pipeline: str = "default") -> dict[str, Any]:
    """Time one mode on ``source`` in this (fresh) process; parts in seconds."""
    if mode == "pb":
        import onnx

        usage, start = cpu_usage(), time.perf_counter()
        model = onnx.load(str(source))
        data = model.SerializeToString()
        target.write_bytes(data)
        return {"total": time.perf_counter() - start, **cpu_since(usage)}
    if mode == "graphtools":
        from graphtools.pass_infra import PassManager
        from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

        manager = PassManager.parse(pipeline)
        usage, start = cpu_usage(), time.perf_counter()
        loaded = load_onnx_model(source)
        after_load = time.perf_counter()
        records = manager(loaded)
        after_pipeline = time.perf_counter()
        save_onnx_model(loaded, target)
        end = time.perf_counter()
        parts: dict[str, Any] = {
            "total": end - start,
            "load": after_load - start,
            "pipeline": after_pipeline - after_load,
            "save": end - after_pipeline,
            "nodes": len(loaded.predict_net),
            "rounds": max((r.round for r in records), default=0),
            **cpu_since(usage),
        }
        for record in records:
            parts[record.name] = parts.get(record.name, 0.0) + record.seconds
        return parts
    import onnx_ir
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    usage, start = cpu_usage(), time.perf_counter()
    model_ir = onnx_ir.load(str(source))
    RemoveUnusedNodesPass()(model_ir)
    onnx_ir.save(model_ir, str(target))
    end = time.perf_counter()
    return {"total": end - start, "nodes": len(model_ir.graph), **cpu_since(usage)}


def _run(mode: str, source: Path, target: Path, pipeline: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            mode,
            "--pipeline",
            pipeline,
            str(source),
            str(target),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed on {source.name}:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _best(mode: str, source: Path, target: Path, repeats: int, pipeline: str) -> dict[str, Any]:
    runs = [_run(mode, source, target, pipeline) for _ in range(repeats)]
    return min(runs, key=lambda parts: parts["total"])


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated node counts")
    parser.add_argument("--repeats", type=int, default=3, help="fresh-process runs per size")
    parser.add_argument("--no-peer", action="store_true", help="skip onnx-ir")
    parser.add_argument(
        "--pipeline",
        default="default",
        help="the pipeline graphtools runs (default: %(default)s; e.g. optimize)",
    )
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(_child(options.child, *options.files, pipeline=options.pipeline)))
        return
    sizes = [int(s) for s in options.sizes.split(",")]
    modes = [m for m in MODES if not (options.no_peer and m == "onnx-ir")]
    results: dict[int, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="graphtools-onnx-bench-") as tmp:
        children_use_bytecode(Path(tmp) / "bytecode")
        for size in sizes:
            start = time.perf_counter()
            source = write_model(make_synthetic_onnx(size), Path(tmp) / f"m{size}.onnx")
            megabytes = source.stat().st_size / 1e6
            print(
                f"{size:>9,} nodes: generated in {time.perf_counter() - start:.1f}s, "
                f"{megabytes:.1f} MB",
                flush=True,
            )
            results[size] = {
                mode: _best(
                    mode,
                    source,
                    Path(tmp) / f"out_{mode}_{size}.onnx",
                    options.repeats,
                    options.pipeline,
                )
                for mode in modes
            }
            row = results[size]
            print(
                f"{size:>9,} nodes: pb {row['pb']['total']:.3f}s, graphtools "
                f"{row['graphtools']['total']:.3f}s"
                + (f", onnx-ir {row['onnx-ir']['total']:.3f}s" if "onnx-ir" in row else ""),
                flush=True,
            )
    print()
    print(
        f"Load + pipeline {options.pipeline!r} + save, best of {options.repeats} fresh "
        "processes; ratios to pb (onnx.load + SerializeToString) in the same run"
    )
    header = ["nodes", "pb", "graphtools", "ratio", "load", "pipeline", "save", "nodes after"]
    if "onnx-ir" in modes:
        header += ["onnx-ir", "ratio", "nodes after"]
    print(" | ".join(header))
    for size in sizes:
        row = results[size]
        pb, ours = row["pb"]["total"], row["graphtools"]
        cells = [f"{size:,}", f"{pb:.3f}s", f"{ours['total']:.3f}s", f"{ours['total'] / pb:.1f}x"]
        cells += [f"{ours[k]:.3f}s" for k in ("load", "pipeline", "save")]
        cells.append(f"{ours['nodes']:,}")
        if "onnx-ir" in row:
            peer = row["onnx-ir"]
            cells += [f"{peer['total']:.3f}s", f"{peer['total'] / pb:.1f}x", f"{peer['nodes']:,}"]
        print(" | ".join(cells))
    print("CPU time (user+system) and page faults of those runs:")
    for size in sizes:
        print(f"  {size:,}: " + "; ".join(f"{m} {cpu_cells(results[size][m])}" for m in modes))
    if len(sizes) > 1:
        small, large = sizes[-2], sizes[-1]
        growth = results[large]["graphtools"]["total"] / results[small]["graphtools"]["total"]
        ratio_small = results[small]["graphtools"]["total"] / results[small]["pb"]["total"]
        ratio_large = results[large]["graphtools"]["total"] / results[large]["pb"]["total"]
        print(
            f"\ngrowth {small:,} -> {large:,} nodes: x{growth:.1f} for x{large / small:.0f} "
            f"nodes; ratio to pb {ratio_small:.1f}x -> {ratio_large:.1f}x"
        )
        for kind in ("user", "system"):
            print(
                f"{kind} time growth: "
                + ", ".join(
                    f"{mode} {growth_of(results[small][mode][kind], results[large][mode][kind])}"
                    for mode in modes
                )
            )
        passes = [k for k in results[large]["graphtools"] if "-" in k]
        print(
            "pipeline parts at the largest size: "
            + ", ".join(f"{name} {results[large]['graphtools'][name]:.3f}s" for name in passes)
        )


if __name__ == "__main__":
    main()

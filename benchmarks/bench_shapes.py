"""How shape inference scales: ``infer_model_shapes`` on synthetic pairs of growing size.

Run: ``python benchmarks/bench_shapes.py [--sizes 10000,100000,1000000] [--seed S]``.
For each size it prints the time of the first ``infer_model_shapes`` (init_net fills as
params, then the predict_net with a symbolic batch; it pays for decoding the ops' arguments,
which the IR then keeps), the best of the later ones, the time per op of those and its ratio to
the smallest size's: a linear walk keeps that ratio near 1. The load and one ``protobuf``
parse of the same predict_net bytes are printed for scale.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import best_of, format_table, generate, load_model, parse, repeats_for
from synth import CHANNELS, DATA, OUTPUT, SPATIAL

from graphtools.analysis.shapes import TensorType, infer_model_shapes


def _measure(num_ops: int, seed: int, folder: Path) -> tuple[float, float, float, float, str]:
    """Load, protobuf parse, first inference (decodes the ops' arguments), best later one."""
    predict_path, init_path, _ = generate(num_ops, seed, folder)
    data = TensorType(np.dtype(np.float32), ("batch", CHANNELS, SPATIAL, SPATIAL))
    start = time.perf_counter()
    model = load_model(predict_path, init_path)
    load = time.perf_counter() - start
    raw = predict_path.read_bytes()
    protobuf = best_of(repeats_for(num_ops), lambda: parse(raw))
    start = time.perf_counter()
    info = infer_model_shapes(model, {DATA: data})
    first = time.perf_counter() - start
    again = best_of(repeats_for(num_ops), lambda: infer_model_shapes(model, {DATA: data}))
    return load, protobuf, first, again, str(info.final(OUTPUT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for num_ops in (int(s) for s in args.sizes.split(",")):
            load, protobuf, first, again, final = _measure(num_ops, args.seed, Path(tmp) / "n")
            per_op = again / num_ops * 1e6
            base = base if base is not None else per_op
            rows.append(
                [
                    f"{num_ops:,}",
                    f"{load:.2f}",
                    f"{protobuf:.2f}",
                    f"{first:.2f}",
                    f"{again:.2f}",
                    f"{per_op:.1f}",
                    f"{per_op / base:.2f}",
                    final,
                ]
            )
    headers = ["ops", "load s", "parse s", "1st infer s", "infer s", "us/op", "vs first"]
    print(format_table([*headers, f"final {OUTPUT}"], rows))


if __name__ == "__main__":
    main()

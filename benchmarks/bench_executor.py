"""Time the numpy reference executor on ResNet-50 (zoo predict net, random weights), batch 1.

Run from the repository root: ``.venv/bin/python benchmarks/bench_executor.py [--repeat N]
[--fixtures DIR]`` (default: ``$GRAPHTOOLS_REAL_FIXTURES``, else ``../shared/fixtures-real``
beside the repository, as the tests find them). Prints the seconds of the parameter
generation and of each run, and the best run.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from graphtools.executor import run_model
from graphtools.serde import load_model
from graphtools.testing import random_params

_DEFAULT = Path(
    os.environ.get(
        "GRAPHTOOLS_REAL_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures-real"
    )
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--channels", type=int, default=64, help="conv/FC width for random weights")
    parser.add_argument("--fixtures", type=Path, default=_DEFAULT)
    args = parser.parse_args()
    model = load_model(args.fixtures / "caffe2-models" / "resnet50" / "predict_net.pbtxt")
    data = model.predict_net[0].inputs[0]
    shape = (1, 3, 224, 224)
    start = time.perf_counter()
    params = random_params(model.predict_net, {data: shape}, seed=0, channels=args.channels)
    print(f"random_params: {time.perf_counter() - start:.3f} s ({len(params)} parameters)")
    feeds = {data: np.random.default_rng(0).standard_normal(shape).astype(np.float32), **params}
    times = []
    for i in range(args.repeat):
        start = time.perf_counter()
        run_model(model, feeds)
        times.append(time.perf_counter() - start)
        print(f"run {i}: {times[-1]:.3f} s")
    ops = len(model.predict_net)
    print(f"resnet50 batch 1, {ops} ops, channels={args.channels}: best {min(times):.3f} s")


if __name__ == "__main__":
    main()

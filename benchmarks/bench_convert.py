"""Conversion benchmark: Caffe2 pair -> ONNX (``export_onnx``) and back (``import_onnx``).

Each model is timed in a fresh Python process (imports aside), best of ``--repeats`` runs:

* ``export``: ``graphtools.onnx.export_onnx`` of the pair (init_net run, conversion, shape
  inference, onnx's full check), typed from ``prepare_export``'s feeds, with a dynamic batch;
* ``import``: ``graphtools.onnx.import_onnx`` of the exported model's bytes;
* ``save``: ``graphtools.save_model`` of the imported pair (binary NetDefs).

The models: real pairs of ``../shared/fixtures-real`` (the biggest weights there: Miyuan2018's
classifier, the Int8 Mask R-CNN2Go pair, WRN-50 with its Xavier-filled 69M weights) and a
synthetic pair of ``--synthetic`` ops (``synth.py``).

    python benchmarks/bench_convert.py
    python benchmarks/bench_convert.py --repeats 1 --synthetic 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REAL = Path(
    os.environ.get("GRAPHTOOLS_REAL_FIXTURES", BENCH_DIR.parents[1] / "shared" / "fixtures-real")
)
REAL_PAIRS = {
    "miyuan2018": ("Miyuan2018-TrafficLight-Test/predict_net.pb", {}),
    "mask_rcnn_int8": ("caffe2-models/mask_rcnn_2go/2018-12/int8/model.pb", {}),
    "wrn_50": ("jolibrain-deepdetect/wrn_50/predict_net.pb", {"data": (1, 3, 224, 224)}),
}
"""Name -> (predict_net under the real fixtures, input shapes other than the guessed ones)."""


def _load(name: str, folder: Path) -> tuple[Any, dict[str, tuple[int, ...]]]:
    from graphtools.serde import load_model
    from graphtools.serde.pairing import find_init_beside

    if name == "synthetic":
        pair = load_model(folder / "predict_net.pb", folder / "init_net.pb")
        return pair, {"data": (1, 2, 2, 2)}
    path, shapes = REAL_PAIRS[name]
    return load_model(REAL / path, find_init_beside(REAL / path)), dict(shapes)


def _child(name: str, folder: Path) -> dict[str, Any]:
    """Time the export, import and save of one model in this (fresh) process."""
    from graphtools.onnx import export_onnx, import_onnx, prepare_export
    from graphtools.serde import save_model

    model, shapes = _load(name, folder)
    prepared = prepare_export(model, shapes, random_params=False)
    start = time.perf_counter()
    exported = export_onnx(
        prepared.model,
        value_info=prepared.value_info,
        dynamic_batch=True,
        input_quantization=prepared.quantization,
    )
    data = exported.SerializeToString()
    after_export = time.perf_counter()
    imported = import_onnx(data)
    after_import = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphtools-convert-bench-") as tmp:
        save_model(imported, Path(tmp) / "pair")
    end = time.perf_counter()
    return {
        "ops": len(model.predict_net),
        "nodes": len(exported.graph.node),
        "megabytes": len(data) / 1e6,
        "export": after_export - start,
        "import": after_import - after_export,
        "save": end - after_import,
    }


def _run(name: str, folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh-process runs per model")
    parser.add_argument("--synthetic", type=int, default=20000, help="ops of the synthetic pair")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("folder", nargs="?", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(_child(options.child, options.folder)))
        return
    names = [*REAL_PAIRS, "synthetic"]
    if options.only:
        names = [n for n in names if n in options.only.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="graphtools-convert-bench-") as tmp:
        folder = Path(tmp)
        if "synthetic" in names:
            sys.path.insert(0, str(BENCH_DIR))
            from synth import make_synthetic_pair, write_pair

            write_pair(*make_synthetic_pair(options.synthetic, 0), folder)
        for name in names:
            runs = [_run(name, folder) for _ in range(options.repeats)]
            best = {
                key: min(r[key] for r in runs) if key in ("export", "import", "save") else value
                for key, value in runs[0].items()
            }
            rows.append((name, best))
            print(f"{name}: {json.dumps(best)}", flush=True)
    print(f"\nbest of {options.repeats} fresh processes, seconds")
    print("model | ops | ONNX nodes | MB | export | import | save")
    for name, row in rows:
        print(
            f"{name} | {row['ops']:,} | {row['nodes']:,} | {row['megabytes']:.1f} | "
            f"{row['export']:.2f} | {row['import']:.2f} | {row['save']:.2f}"
        )


if __name__ == "__main__":
    main()

"""What the ONNX optimisers users reach for do to the ONNX corpus: nodes after, time, same outputs.

Run: ``python benchmarks/onnx_peers.py [--corpus DIR] [--models a,b,...]`` from the repository
root, with the ``torch`` extra (to export the corpus) and the ``peers`` extra (the optimisers):
``pip install -e ".[torch,peers]"``.

For every model of ``tests/onnx_corpus.py`` (exported into ``--corpus``, cached there by content
key) it runs, each on its own copy of the loaded model and timed around that call alone:

* ``graphtools``: ``-p optimize`` on the model's bytes (the IR built from them and written back
  to protobuf, as onnx-ir's column does);
* ``onnxsim``: ``onnxsim.simplify(model)`` with its defaults;
* ``onnx-ir``: onnx-ir's cleanup passes from ``onnx_ir.passes.common`` (lift small constants to
  initializers, identity elimination, common subexpressions, duplicate initializers, unused
  nodes, functions and opsets), load and save into protobuf included;
* ``onnxscript``: ``onnxscript.optimizer.optimize(model)`` (constant folding and rewrites on
  onnx-ir);
* ``onnxoptimizer``: ``onnxoptimizer.optimize(model)`` with its default fuse and elimination
  passes;
* ``graphsurgeon``: onnx-graphsurgeon's ``fold_constants().cleanup().toposort()``.

Each cell is the node count after the peer (nested If/Loop bodies included, as
``tests/onnx_peers.node_count`` counts) and its time; a ``!`` marks a result whose onnxruntime
outputs on the corpus's seeded inputs differ from the original model's (rtol 1e-4, atol 1e-5)
or that does not run, ``error`` a peer that raised, ``-`` a peer that is not installed or does
not import beside this onnx. The reasons are listed under the table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.metadata
import importlib.util
import io
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _common import format_table  # noqa: E402
from onnx_corpus import CorpusModel, build_corpus, seeded_inputs  # noqa: E402


def _tests_module(name: str) -> ModuleType:
    """A test-support module loaded by path: ``tests/onnx_peers.py`` shares this script's name."""
    spec = importlib.util.spec_from_file_location(f"tests_{name}", REPO / "tests" / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"tests/{name}.py not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node_count: Callable[[onnx.ModelProto], int] = _tests_module("onnx_peers").node_count

RTOL, ATOL = 1e-4, 1e-5
Optimiser = Callable[[onnx.ModelProto], onnx.ModelProto]


@dataclass
class Peer:
    """An optimiser: its name, the packages it needs, and how to run it (None: unavailable)."""

    name: str
    packages: tuple[str, ...]
    run: Optimiser | None
    problem: str = ""


def _onnxsim() -> Optimiser:
    import onnxsim

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        simplified, _ = onnxsim.simplify(model)
        return simplified

    return run


def _onnx_ir() -> Optimiser:
    import onnx_ir as ir
    from onnx_ir.passes import common

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        passes = ir.passes.PassManager(
            [
                common.LiftConstantsToInitializersPass(),
                common.IdentityEliminationPass(),
                common.CommonSubexpressionEliminationPass(),
                common.DeduplicateHashedInitializersPass(),
                common.RemoveUnusedNodesPass(),
                common.RemoveUnusedFunctionsPass(),
                common.RemoveUnusedOpsetsPass(),
            ]
        )
        loaded = ir.serde.deserialize_model(model)
        passes(loaded)
        return ir.serde.serialize_model(loaded)

    return run


def _onnxscript() -> Optimiser:
    from onnxscript import optimizer

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        optimized: onnx.ModelProto = optimizer.optimize(model)
        return optimized

    return run


def _onnxoptimizer() -> Optimiser:
    import onnxoptimizer

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        optimized: onnx.ModelProto = onnxoptimizer.optimize(model)
        return optimized

    return run


def _graphsurgeon() -> Optimiser:
    import onnx_graphsurgeon as gs

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        graph = gs.import_onnx(model)
        graph.fold_constants().cleanup().toposort()
        exported: onnx.ModelProto = gs.export_onnx(graph)
        return exported

    return run


def _graphtools() -> Optimiser:
    from graphtools.pass_infra import PassManager
    from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes

    manager = PassManager.parse("optimize")

    def run(model: onnx.ModelProto) -> onnx.ModelProto:
        loaded = model_from_onnx_bytes(model.SerializeToString())
        manager(loaded)
        return onnx.ModelProto.FromString(model_to_onnx_bytes(loaded))

    return run


PEERS: tuple[tuple[str, tuple[str, ...], Callable[[], Optimiser]], ...] = (
    ("graphtools", ("graphtools-caffe2",), _graphtools),
    ("onnxsim", ("onnxsim",), _onnxsim),
    ("onnx-ir", ("onnx-ir",), _onnx_ir),
    ("onnxscript", ("onnxscript",), _onnxscript),
    ("onnxoptimizer", ("onnxoptimizer",), _onnxoptimizer),
    ("graphsurgeon", ("onnx-graphsurgeon",), _graphsurgeon),
)


def load_peers() -> list[Peer]:
    """Every peer, with the reason it cannot run when it cannot (absent, or fails to import)."""
    peers = []
    for name, packages, make in PEERS:
        try:
            peers.append(Peer(name, packages, make()))
        except ImportError as error:
            missing = [p for p in packages if not _installed(p)]
            why = (
                f"not installed ({', '.join(missing)})" if missing else f"does not import: {error}"
            )
            peers.append(Peer(name, packages, None, why))
    return peers


def _installed(package: str) -> bool:
    try:
        importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _outputs(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return [np.asarray(value) for value in session.run(None, feeds)]


def _same(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> bool:
    return len(expected) == len(actual) and all(
        e.shape == a.shape and np.allclose(a, e, rtol=RTOL, atol=ATOL)
        for e, a in zip(expected, actual, strict=True)
    )


@dataclass
class Cell:
    """One peer on one model: nodes after, seconds, outputs equal; or the error it raised."""

    nodes: int = 0
    seconds: float = 0.0
    equal: bool = True
    error: str = ""

    def text(self) -> str:
        if self.error:
            return "error"
        return f"{self.nodes}{'' if self.equal else '!'} {self.seconds:.2f}s"


def measure(model: CorpusModel, peers: Sequence[Peer], notes: list[str]) -> list[Cell | None]:
    """Run every available peer on ``model``; a problem goes to ``notes``."""
    original = onnx.load(model.path)
    feeds = seeded_inputs(model)
    expected = _outputs(original, feeds)
    cells: list[Cell | None] = []
    for peer in peers:
        if peer.run is None:
            cells.append(None)
            continue
        work = copy.deepcopy(original)
        start = time.perf_counter()
        try:
            with _quiet():
                result = peer.run(work)
        except Exception as error:  # a peer failing is a result to report, not a crash
            cells.append(Cell(error=f"{type(error).__name__}: {error}"))
            notes.append(f"{model.name}, {peer.name}: {type(error).__name__}: {_short(error)}")
            continue
        cell = Cell(node_count(result), time.perf_counter() - start)
        try:
            cell.equal = _same(expected, _outputs(result, feeds))
            if not cell.equal:
                notes.append(f"{model.name}, {peer.name}: outputs differ from the original's")
        except Exception as error:
            cell.equal = False
            notes.append(f"{model.name}, {peer.name}: result does not run: {_short(error)}")
        cells.append(cell)
    return cells


@contextlib.contextmanager
def _quiet() -> Any:
    """Keep the peers' prints, log records and warnings out of the table."""
    logging.disable(logging.WARNING)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 400 else text[:397] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(tempfile.gettempdir()) / "graphtools-onnx-corpus"
    parser.add_argument("--corpus", type=Path, default=default, help=f"default {default}")
    parser.add_argument("--models", help="comma-separated corpus model names (default: all)")
    args = parser.parse_args(argv)

    names = args.models.split(",") if args.models else None
    ort.set_default_logger_severity(3)  # onnxsim's and graphsurgeon's sessions too
    start = time.perf_counter()
    models = build_corpus(args.corpus, names)
    print(f"corpus: {len(models)} models in {args.corpus} ({time.perf_counter() - start:.1f} s)")
    peers = load_peers()
    versions = [f"onnx {onnx.__version__}", f"onnxruntime {ort.__version__}"]
    for peer in peers:
        for package in peer.packages:
            if _installed(package):
                versions.append(f"{package} {importlib.metadata.version(package)}")
    print("versions: " + ", ".join(versions))

    notes: list[str] = []
    rows = []
    totals = [0] + [0] * len(peers)
    seconds = [0.0] * len(peers)
    for model in models:
        cells = measure(model, peers, notes)
        nodes = node_count(onnx.load(model.path, load_external_data=False))
        totals[0] += nodes
        row = [model.name, model.exporter, str(nodes)]
        for i, cell in enumerate(cells):
            row.append("-" if cell is None else cell.text())
            if cell is not None and not cell.error:
                totals[i + 1] += cell.nodes
                seconds[i] += cell.seconds
        rows.append(row)
        print(f"  {model.name}: done", file=sys.stderr)
    rows.append(
        ["total", "", str(totals[0])]
        + [
            "-" if p.run is None else f"{totals[i + 1]} {seconds[i]:.2f}s"
            for i, p in enumerate(peers)
        ]
    )
    print()
    print(format_table(["model", "exporter", "nodes", *(p.name for p in peers)], rows))
    print()
    print("nodes after each peer (nested bodies included) and its time; '!': outputs differ")
    print("or the result does not run in onnxruntime")
    for peer in peers:
        if peer.run is None:
            print(f"{peer.name}: {peer.problem}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

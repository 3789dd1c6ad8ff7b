"""Numeric proof against a real engine: onnxruntime on the ONNX model, our executor on the pair.

``compare_with_onnxruntime`` compares the outputs (``graphtools.testing.OutputDiff`` entries,
onnxruntime's value as ``before``); ``compare_blobs_with_onnxruntime`` also compares every
intermediate blob both sides name, with the same statistics and (per-name) tolerances, and
reports the first op of the pair whose output is outside them, which is where to look when a
conversion or a pass went wrong. The verdict is the outputs' (``outputs_equal``): an
intermediate difference that does not reach them (float rounding in a big reduction, say) only
locates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto

from graphtools.errors import GraphToolsError
from graphtools.executor import Workspace, run_net, run_op
from graphtools.ir import Model
from graphtools.onnx.external import ModelSource, load_onnx
from graphtools.onnx.runtime import quiet_run, runtime_failure
from graphtools.passes import ssa_rewrite
from graphtools.testing import OutputDiff, compare_outputs

__all__ = [
    "BlobComparison",
    "Divergence",
    "compare_blobs_with_onnxruntime",
    "compare_with_onnxruntime",
    "run_onnxruntime",
]


def run_onnxruntime(
    onnx_model: ModelSource, feeds: Mapping[str, Any], outputs: list[str] | None = None
) -> dict[str, np.ndarray]:
    """Run ``onnx_model`` on onnxruntime's CPU provider; ``{output name: value}``.

    Args:
        onnx_model: a ModelProto, path or bytes (external data is loaded).
        feeds: values of the graph inputs; entries the graph does not take are ignored.
        outputs: names of values to fetch (graph outputs when ``None``).

    Raises:
        RuntimeFailure: onnxruntime cannot load the model or fails running it.
    """
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise GraphToolsError(
            "onnxruntime is not installed; install it (pip install onnxruntime) to compare"
        ) from exc
    path = Path(onnx_model) if isinstance(onnx_model, str | Path) else None
    model = load_onnx(onnx_model)
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors are raised, not printed
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise runtime_failure(exc, path, "load") from exc
    wanted = {i.name for i in session.get_inputs()}
    names = outputs if outputs is not None else [o.name for o in session.get_outputs()]
    try:
        arrays = {k: np.asarray(v) for k, v in feeds.items() if k in wanted}
        values = session.run(names, arrays, quiet_run(ort))
    except Exception as exc:  # onnxruntime raises its own exception types
        raise runtime_failure(exc, path, "run") from exc
    return dict(zip(names, values, strict=True))


def _matched(onnx_outputs: list[str], model: Model, ours: dict[str, Any]) -> dict[str, Any]:
    """Our outputs under the ONNX names (by position when the names differ but counts match)."""
    declared = list(model.predict_net.external_outputs)
    if set(declared) != set(onnx_outputs) and len(declared) == len(onnx_outputs):
        return {
            onnx_name: ours[name] for onnx_name, name in zip(onnx_outputs, declared, strict=True)
        }
    return ours


def _our_feeds(model: Model, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """The feeds the pair takes: its declared inputs, and blobs it reads before writing them
    without declaring them (a predictor's data blob, which ``export_onnx`` makes an input)."""
    declared = set(model.predict_net.external_inputs)
    if not declared:
        return dict(feeds)
    written: set[str] = set()
    for op in model.predict_net:
        declared.update(name for name in op.inputs if name not in written)
        written.update(op.outputs)
    return {k: v for k, v in feeds.items() if k in declared}


def compare_with_onnxruntime(
    onnx_model: ModelSource,
    model: Model,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> list[OutputDiff]:
    """Run onnxruntime on ``onnx_model`` and our executor on ``model``; compare the outputs
    (``per_output``: ``(rtol, atol)`` by name, as ``testing.compare_outputs`` takes them).

    Returns:
        One ``OutputDiff`` per output (onnxruntime's value is ``before``, ours ``after``).
    """
    from graphtools.executor import run_model

    proto = load_onnx(onnx_model)
    reference = run_onnxruntime(proto, feeds)
    ours = run_model(model, _our_feeds(model, feeds))
    ours = _matched(list(reference), model, ours)
    return compare_outputs(reference, ours, rtol=rtol, atol=atol, per_output=per_output)


@dataclass(frozen=True)
class Divergence:
    """The first op of the pair whose output is outside the tolerances of onnxruntime's value
    of that name."""

    op_index: int
    op_type: str
    diff: OutputDiff


@dataclass(frozen=True)
class BlobComparison:
    """Outputs and intermediate blobs compared (blobs in the pair's op order)."""

    outputs: list[OutputDiff]
    blobs: list[OutputDiff]
    first_divergence: Divergence | None

    @property
    def outputs_equal(self) -> bool:
        """Whether every output matched: the verdict (a blob only locates a difference)."""
        return all(d.ok for d in self.outputs)

    @property
    def ok(self) -> bool:
        """Whether every output and every compared blob matched."""
        return self.outputs_equal and self.first_divergence is None

    @property
    def blobs_outside(self) -> list[OutputDiff]:
        """The compared blobs outside their tolerances, in the pair's op order."""
        return [d for d in self.blobs if not d.ok]


def compare_blobs_with_onnxruntime(
    onnx_model: ModelSource,
    model: Model,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> BlobComparison:
    """Compare every value of the main graph onnxruntime computes with the blob of the same
    name as the pair's op writes it, and name the first op (in the pair's order) whose output
    is outside the tolerances (``per_output``: ``(rtol, atol)`` by output or blob name).

    The pair's blobs are matched under the names ``export_onnx`` gives them (``ssa_rewrite``),
    so a model exported from the pair compares blob by blob. Values inside sub-graphs are not
    fetched (onnxruntime cannot return them).
    """
    proto = load_onnx(onnx_model)
    graph_outputs = [o.name for o in proto.graph.output]
    probe = ModelProto()
    probe.CopyFrom(proto)
    present = set(graph_outputs)
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in present:
                probe.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    reference = run_onnxruntime(probe, feeds)
    # The pair's blobs under the names export_onnx gives them (in-place writes get their
    # versions' names), so both sides name the same values; op indices do not change.
    model = model.copy()
    params = [] if model.init_net is None else [n for op in model.init_net for n in op.outputs]
    ssa_rewrite(model.predict_net, None, dict.fromkeys(params))
    workspace = Workspace()
    if model.init_net is not None:
        run_net(model.init_net, workspace)
    for name, value in _our_feeds(model, feeds).items():
        workspace.feed(name, value)
    blobs: list[OutputDiff] = []
    first: Divergence | None = None
    net = model.predict_net
    for index, op in enumerate(net):
        run_op(op, workspace, index=index, net=net)
        for name in op.outputs:
            if name in reference:
                diff = compare_outputs(
                    {name: reference[name]},
                    {name: workspace.fetch(name)},
                    rtol=rtol,
                    atol=atol,
                    per_output=per_output,
                )[0]
                blobs.append(diff)
                if not diff.ok and first is None:
                    first = Divergence(index, op.type, diff)
    ours = {name: workspace.fetch(name) for name in net.external_outputs if workspace.has(name)}
    wanted = {name: reference[name] for name in graph_outputs}
    ours = _matched(graph_outputs, model, ours)
    outputs = compare_outputs(wanted, ours, rtol=rtol, atol=atol, per_output=per_output)
    return BlobComparison(outputs, blobs, first)

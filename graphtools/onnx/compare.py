"""Numeric proof against a real engine: onnxruntime on the ONNX model, our executor on the pair.

``compare_with_onnxruntime`` compares the outputs (``graphtools.testing.OutputDiff`` entries,
onnxruntime's value as ``before``); ``compare_blobs_with_onnxruntime`` also compares every
intermediate blob both sides name, with the same statistics and (per-name) tolerances, and
reports the first op of the pair whose output is outside them, which is where to look when a
conversion or a pass went wrong. The verdict is the outputs' (``outputs_equal``): an
intermediate difference that does not reach them only locates. An intermediate float blob
gets ``atol`` at least ``rtol`` times its largest magnitude: each side runs every op on its own
values, and float32 sums round at the scale of their terms, not of the result.

Two kinds of blobs are not compared value by value with ``rtol``/``atol``:

* Int8 blobs (``Int8Tensor`` on our side, their uint8/int32 values in ONNX) are compared in
  quantization steps: equal within ``int8_steps`` units (Int8 feeds go to onnxruntime as their
  values).
* The uint8 image ``BRGNCHWCToPackedInt8BGRAStylizerDeprocess`` truncates from floats is
  compared within one unit: a last-bit difference in the floats before it moves a pixel.
* A blob a random fill writes (``GaussianFill``, ``UniformFill``, ``XavierFill``, ...) holds
  other draws on each side: it is compared by shape, dtype and distribution (values within a
  uniform's bounds; sample mean and standard deviation within six standard errors of the
  fill's), said in the entry's ``reason``.

Detections whose scores tie within the tolerances may come in either order on each side
(which is first rests on a score's last bit): our rows are put in onnxruntime's order before
anything is compared or computed from them (``tie_order``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from math import prod, sqrt
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto

from graphtools._core import ONNX
from graphtools.analysis.ssa_names import renamed_for_export
from graphtools.errors import GraphToolsError
from graphtools.executor import Int8Tensor, Workspace, run_net, run_op
from graphtools.executor.kernels_fill import RANDOM_FILLS
from graphtools.ir import Model, Op
from graphtools.nested import names_in_nested_nets, nested_access
from graphtools.onnx.external import ModelSource, load_onnx
from graphtools.onnx.runtime import feeds_for, quiet_run, run_model, runtime_failure
from graphtools.onnx.tie_order import TIE_ORDERED, align_tied_rows
from graphtools.testing import OutputDiff, compare_outputs, with_half_precision

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
        GraphToolsError: an input onnxruntime needs is not fed.
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
    wanted = [i.name for i in session.get_inputs()]
    missing = [name for name in wanted if name not in feeds]
    if missing:
        raise GraphToolsError(f"onnxruntime needs inputs {missing}, which are not fed")
    names = outputs if outputs is not None else [o.name for o in session.get_outputs()]
    try:
        arrays = {k: _onnx_value(feeds[k]) for k in wanted}
        values = session.run(names, arrays, quiet_run(ort))
    except Exception as exc:  # onnxruntime raises its own exception types
        raise runtime_failure(exc, path, "run") from exc
    return dict(zip(names, values, strict=True))


def _onnx_value(value: Any) -> np.ndarray:
    """A feed as onnxruntime takes it (an Int8 blob as its quantized values)."""
    return np.asarray(value.values if isinstance(value, Int8Tensor) else value)


_TRUNCATED = frozenset({"BRGNCHWCToPackedInt8BGRAStylizerDeprocess"})
"""Ops writing integers truncated from floats, compared within one unit."""


def _truncated(model: Model) -> dict[str, tuple[float, float]]:
    """``(rtol, atol)`` of the blobs ``_TRUNCATED`` ops write."""
    return {op.outputs[0]: (0.0, 1.0) for op in model.predict_net if op.type in _TRUNCATED}


def _random_fills(model: Model) -> dict[str, Op]:
    """The predict_net's random fills, by the blob each writes."""
    return {op.outputs[0]: op for op in model.predict_net if op.type in RANDOM_FILLS}


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    size = prod(shape)
    fan_in = size // shape[0] if shape and shape[0] else size
    fan_out = size // shape[1] if len(shape) > 1 and shape[1] else size
    return max(fan_in, 1), max(fan_out, 1)


def _distribution(op: Op, shape: tuple[int, ...]) -> tuple[str, float, float]:
    """``(kind, a, b)``: ``("uniform", low, high)``, ``("integers", low, high)`` or
    ``("normal", mean, std)`` of a random fill's values (the executor's rules)."""
    if op.type == "XavierFill":
        bound = sqrt(3.0 / _fans(shape)[0])
        return "uniform", -bound, bound
    if op.type == "MSRAFill":
        return "normal", 0.0, sqrt(2.0 / _fans(shape)[1])
    if op.type == "GaussianFill":
        return "normal", float(op.arg("mean", 0.0)), float(op.arg("std", 1.0))
    kind = "integers" if op.type == "UniformIntFill" else "uniform"
    return kind, float(op.arg("min", 0)), float(op.arg("max", 1))


def _moments(kind: str, a: float, b: float) -> tuple[float, float]:
    if kind == "normal":
        return a, b
    if kind == "integers":
        count = b - a + 1
        return (a + b) / 2, sqrt((count * count - 1) / 12)
    return (a + b) / 2, (b - a) / sqrt(12)


def _random_diff(name: str, op: Op, reference: Any, ours: Any) -> OutputDiff:
    """Two draws of one random fill compared by shape, dtype and distribution."""
    a, b = np.asarray(reference), np.asarray(ours)
    shape = tuple(a.shape)
    if len(op.inputs) > 1:
        why = "random fill with bounds as inputs: not comparable"
        return OutputDiff(name, False, shape_before=shape, shape_after=b.shape, reason=why)
    kind, low, high = _distribution(op, shape)
    mean, std = _moments(kind, low, high)
    problems = []
    if a.shape != b.shape:
        problems.append("shape differs")
    elif a.dtype != b.dtype:
        problems.append(f"dtype {a.dtype} != {b.dtype}")
    for side, values in (("onnxruntime", a), ("ours", b)):
        if not values.size:
            continue
        flat = values.astype(np.float64).reshape(-1)
        slack = 1e-6 * (high - low)  # the draws are float32 products of the bounds
        if kind != "normal" and (flat.min() < low - slack or flat.max() > high + slack):
            problems.append(f"{side}'s values leave [{low:g}, {high:g}]")
        if abs(flat.mean() - mean) > 6 * std / sqrt(flat.size) + 1e-6:
            problems.append(f"{side}'s mean {flat.mean():.4g} is not {mean:.4g}")
        if flat.size > 1 and abs(flat.std() - std) > 6 * std / sqrt(2 * flat.size) + 1e-6:
            problems.append(f"{side}'s std {flat.std():.4g} is not {std:.4g}")
    detail = "; ".join(problems) or "same shape, dtype and distribution"
    return OutputDiff(
        name,
        not problems,
        shape_before=shape,
        shape_after=tuple(b.shape),
        reason=f"random ({op.type}, {kind} {low:g}, {high:g}): {detail}",
        size=a.size,
    )


def _diffs(
    reference: Mapping[str, Any],
    ours: Mapping[str, Any],
    random: Mapping[str, Op],
    rtol: float,
    atol: float,
    int8_steps: int,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> list[OutputDiff]:
    """``compare_outputs`` with Int8 blobs compared in quantization steps and random fills
    by distribution (``per_output`` overrides the tolerances of named blobs)."""
    plain = {k: v for k, v in ours.items() if k not in random}
    per: dict[str, tuple[float, float]] = dict(per_output or {})
    for name, value in plain.items():
        if isinstance(value, Int8Tensor):
            plain[name] = value.values
            per.setdefault(name, (0.0, float(int8_steps)))
    found = compare_outputs(
        {k: v for k, v in reference.items() if k not in random},
        plain,
        rtol=rtol,
        atol=atol,
        per_output=per,
    )
    for name, op in random.items():
        if name in reference and name in ours:
            found.append(_random_diff(name, op, reference[name], ours[name]))
    return found


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


def _as_exported(model: Model) -> Model:
    """The pair with its blobs under the names ``export_onnx`` gives them (in-place writes get
    their versions' names; op indices do not change), so both sides name the same values."""
    params = [] if model.init_net is None else [n for op in model.init_net for n in op.outputs]
    init = None if model.init_net is None else model.init_net.copy()
    net = model.predict_net
    renamed = renamed_for_export(net, params)
    moved = {
        old
        for before, after in zip(net.ops, renamed.ops, strict=True)
        for old, new in zip(
            (*before.inputs, *before.outputs), (*after.inputs, *after.outputs), strict=True
        )
        if old != new
    }
    if moved & names_in_nested_nets(net):
        # a nested net reads a renamed blob by name, which our executor cannot follow: the
        # pair runs under its own names (its outputs still match by name or position)
        return Model(net.copy(), init)
    return Model(renamed, init)


def compare_with_onnxruntime(
    onnx_model: ModelSource,
    model: Model,
    feeds: Mapping[str, Any],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    int8_steps: int = 1,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> list[OutputDiff]:
    """Run onnxruntime on ``onnx_model`` and our executor on ``model``; compare the outputs
    (``per_output``: ``(rtol, atol)`` by name, as ``testing.compare_outputs`` takes them).
    An ONNX-dialect ``model`` (an optimised copy of the export, say) runs on onnxruntime too.
    Given neither ``rtol`` nor ``atol``: 1e-4 and 1e-5, and a half-precision output at
    ``testing.HALF_TOLERANCES`` (as ``verify`` compares them).

    Int8 outputs are compared in quantization steps (``int8_steps``), outputs of random fills
    by distribution (see the module docstring); ``per_output`` gives ``(rtol, atol)`` for named
    outputs.

    Returns:
        One ``OutputDiff`` per output (onnxruntime's value is ``before``, ours ``after``).
    """
    by_precision = rtol is None and atol is None
    rtol = 1e-4 if rtol is None else rtol
    atol = 1e-5 if atol is None else atol
    proto = load_onnx(onnx_model)
    graph_outputs = [o.name for o in proto.graph.output]
    if model.dialect == ONNX:
        reference = run_onnxruntime(proto, feeds)
        held = {t.name for t in proto.graph.initializer}
        fed = [i.name for i in proto.graph.input if i.name not in held]
        ran = _matched(graph_outputs, model, run_model(model, feeds_for(model, feeds, fed)))
        if by_precision:
            per_output = with_half_precision(reference, rtol, atol, per_output)
        return _diffs(reference, ran, {}, rtol, atol, int8_steps, per_output)
    model = _as_exported(model)
    tied = [name for op in model.predict_net if op.type in TIE_ORDERED for name in op.outputs]
    reference = run_onnxruntime(_with_outputs(proto, tied), feeds)
    workspace = Workspace()
    for _ in _run_ours(model, feeds, reference, workspace, rtol, atol):
        pass
    ours = _matched(graph_outputs, model, _outputs_of(model, workspace))
    wanted = {name: reference[name] for name in graph_outputs}
    per = {**_truncated(model), **(per_output or {})}
    if by_precision:
        per = with_half_precision(wanted, rtol, atol, per)
    return _diffs(wanted, ours, _random_fills(model), rtol, atol, int8_steps, per)


def _with_outputs(proto: ModelProto, names: list[str]) -> ModelProto:
    """``proto``, or a copy whose graph also outputs those of ``names`` its nodes compute
    (values onnxruntime is to return beside the outputs; a model optimised after its export
    may no longer compute them)."""
    present = {o.name for o in proto.graph.output}
    computed = {name for node in proto.graph.node for name in node.output}
    extra = [n for n in dict.fromkeys(names) if n and n not in present and n in computed]
    if not extra:
        return proto
    probe = ModelProto()
    probe.CopyFrom(proto)
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in extra)
    return probe


def _run_ours(
    model: Model,
    feeds: Mapping[str, Any],
    reference: Mapping[str, Any],
    workspace: Workspace,
    rtol: float,
    atol: float,
) -> Iterator[tuple[int, Op]]:
    """Run the pair in ``workspace`` as a predictor does (init_net, feeds, predict_net),
    yielding each predict_net op after it ran; the rows of an op whose output order rests on
    tied scores are put in onnxruntime's order of them (``tie_order``), so the blobs computed
    from them compare row by row."""
    if model.init_net is not None:
        run_net(model.init_net, workspace)
    for name, value in _our_feeds(model, feeds).items():
        workspace.feed(name, value)
    net = model.predict_net
    for index, op in enumerate(net):
        run_op(op, workspace, index=index, net=net)
        align_tied_rows(op, workspace, reference, rtol, atol)
        yield index, op


def _outputs_of(model: Model, workspace: Workspace) -> dict[str, Any]:
    """The predict_net's external outputs ``workspace`` holds, by name."""
    outputs = model.predict_net.external_outputs
    return {name: workspace.fetch(name) for name in outputs if workspace.has(name)}


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


def _blob_atol(reference: Any, ours: Any, rtol: float, atol: float) -> float:
    """The absolute tolerance of an intermediate float blob: ``atol``, raised to ``rtol`` times
    the blob's largest magnitude (float32 rounding of a sum scales with its terms, not with
    the result, and each side runs every op on its own values)."""
    if isinstance(ours, Int8Tensor):
        return atol
    values = np.asarray(reference)
    if values.dtype.kind != "f" or values.size == 0:
        return atol
    finite = np.abs(values[np.isfinite(values)])
    return max(atol, rtol * float(finite.max())) if finite.size else atol


def compare_blobs_with_onnxruntime(
    onnx_model: ModelSource,
    model: Model,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    int8_steps: int = 1,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> BlobComparison:
    """Compare every value of the main graph onnxruntime computes with the blob of the same
    name as the pair's op writes it, and name the first op (in the pair's order) whose output
    is outside the tolerances (Int8 blobs in quantization steps, random fills by distribution:
    see the module docstring;
    ``per_output`` gives ``(rtol, atol)`` for named blobs). An intermediate float blob's
    ``atol`` is at least ``rtol`` times its largest magnitude (float32 sums round at the scale
    of their terms); the graph outputs are compared with ``rtol``/``atol`` as given.

    The pair's blobs are matched under the names ``export_onnx`` gives them (``ssa_rewrite``),
    so a model exported from the pair compares blob by blob. Values inside sub-graphs are not
    fetched (onnxruntime cannot return them).
    """
    proto = load_onnx(onnx_model)
    graph_outputs = [o.name for o in proto.graph.output]
    reference = run_onnxruntime(
        _with_outputs(proto, [name for node in proto.graph.node for name in node.output]), feeds
    )
    model = _as_exported(model)
    workspace = Workspace()
    blobs: list[OutputDiff] = []
    first: Divergence | None = None
    net = model.predict_net
    random = _random_fills(model)
    per_output = {**_truncated(model), **(per_output or {})}
    # A blob a nested net writes too has other versions in the export than the pair's
    # spelling shows, and so has one the pair still writes twice (it runs under its own
    # names when a nested net reads a renamed blob): compared as graph outputs only.
    writes = Counter(n for op in net for n in op.outputs)
    branch_written = {n for op in net for n in nested_access(op).writes}
    branch_written.update(name for name, count in writes.items() if count > 1)
    for index, op in _run_ours(model, feeds, reference, workspace, rtol, atol):
        for name in op.outputs:
            if name in reference and name not in branch_written:
                ours = workspace.fetch(name)
                per = per_output
                if name not in per_output and name not in random:
                    per = {
                        **per_output,
                        name: (rtol, _blob_atol(reference[name], ours, rtol, atol)),
                    }
                (diff,) = _diffs(
                    {name: reference[name]},
                    {name: ours},
                    {name: op} if name in random else {},
                    rtol,
                    atol,
                    int8_steps,
                    per,
                )
                blobs.append(diff)
                if not diff.ok and first is None:
                    first = Divergence(index, op.type, diff)
    ours = _outputs_of(model, workspace)
    wanted = {name: reference[name] for name in graph_outputs}
    ours = _matched(graph_outputs, model, ours)
    outputs = _diffs(wanted, ours, random, rtol, atol, int8_steps, per_output)
    return BlobComparison(outputs, blobs, first)

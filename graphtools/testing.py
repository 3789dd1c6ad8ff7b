"""Helpers for users' regression tests: random feeds and parameters, model equivalence.

``assert_models_equivalent(before, after)`` runs both models with the numpy reference executor
on the same feeds and fails with a table of the largest differences per external output;
``compare_models`` returns the same findings as data (the CLI prints them).
``check_gradients`` compares a net's backward pass with central finite differences. For zoo predict
nets shipped without their weights, ``random_params`` makes a consistent set of parameters.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.channels import plan_channels
from graphtools.analysis.liveness import unread_outputs
from graphtools.errors import ExecutionError, InvalidNetError, PreconditionError, did_you_mean
from graphtools.executor import Int8Tensor, Workspace, run_model, run_net, run_op
from graphtools.feeds import ParamMaker, Synthesis, synthesize
from graphtools.gradient_check import GradientCheck, check_gradients
from graphtools.ir import Model, Net, expect_model
from graphtools.pass_infra import PassManager
from graphtools.printer import describe_net

__all__ = [
    "BisectResult",
    "GradientCheck",
    "OutputDiff",
    "assert_models_equivalent",
    "assert_no_difference",
    "bisect_pipeline",
    "check_gradients",
    "compare_models",
    "compare_outputs",
    "declaring_outputs",
    "first_diverging_pass",
    "format_diffs",
    "make_feeds",
    "model_inputs",
    "random_params",
    "run_after",
    "run_both",
]


def model_inputs(model: Model) -> list[str]:
    """External inputs of the predict_net that the init_net does not produce, in order.

    A predict_net that declares no external inputs declares them implicitly (as Caffe2 and
    ``get_ssa`` read it): its inputs are then the blobs its ops read before any op writes them.
    """
    produced: set[str] = set()
    if model.init_net is not None:
        for op in model.init_net:
            produced.update(op.outputs)
    net = model.predict_net
    declared = net.external_inputs or _read_before_written(net)
    return [name for name in declared if name not in produced]


def _read_before_written(net: Net) -> list[str]:
    written: set[str] = set()
    found: dict[str, None] = {}
    for op in net:
        found.update((name, None) for name in op.inputs if name not in written)
        written.update(op.outputs)
    return list(found)


def make_feeds(
    model: Model, shapes: Mapping[str, Sequence[int]], seed: int = 0
) -> dict[str, np.ndarray]:
    """Standard-normal float32 feeds for every input of ``model`` (see ``model_inputs``),
    and for a declared input the init_net fills when ``shapes`` gives it one (a placeholder
    the exporter wrote so that the blob exists: a feed replaces it).

    Raises:
        InvalidNetError: an input has no entry in ``shapes``.
    """
    names = model_inputs(model)
    declared = set(model.predict_net.external_inputs)
    names += [name for name in shapes if name in declared and name not in names]
    missing = [name for name in names if name not in shapes]
    if missing:
        raise InvalidNetError(f"no shape given for model inputs {missing}; pass them in shapes")
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(tuple(shapes[name])).astype(np.float32) for name in names}


@dataclass(frozen=True)
class OutputDiff:
    """How one external output differs between two models.

    Attributes:
        name: the output blob.
        ok: whether the output matches within tolerance (same name, shape and dtype too).
        max_abs: largest absolute difference (``nan`` when not comparable).
        max_rel: largest difference relative to the ``before`` value (over non-zero values).
        shape_before / shape_after: shapes, ``None`` when the output is missing on that side.
        reason: why the output is not comparable, empty when it is.
        mean_abs / mean_rel: mean absolute and relative difference.
        mismatches: values outside ``atol + rtol * |before|`` (of ``size``).
        size: values compared.
        rtol / atol: the tolerances this output was compared with.
        histogram: ``(counts, edges)`` of the absolute differences in 10 bins (empty when
            not comparable).
        nan_both: values NaN in both models, counted as equal (made-up inputs outside an
            op's domain, a square root of a negative say, compare nothing there).
    """

    name: str
    ok: bool
    max_abs: float = float("nan")
    max_rel: float = float("nan")
    shape_before: tuple[int, ...] | None = None
    shape_after: tuple[int, ...] | None = None
    reason: str = ""
    mean_abs: float = float("nan")
    mean_rel: float = float("nan")
    mismatches: int = 0
    size: int = 0
    rtol: float = 1e-5
    atol: float = 1e-6
    histogram: tuple[tuple[int, ...], tuple[float, ...]] = ((), ())
    nan_both: int = 0


def _as_array(value: Any) -> np.ndarray:
    return value.dequantize() if isinstance(value, Int8Tensor) else np.asarray(value)


_BINS = 10


def _diff(name: str, before: Any, after: Any, rtol: float, atol: float) -> OutputDiff:
    if before is after:  # one value (an unchanged model's outputs): nothing to compute
        a = _as_array(before)
        same: tuple[tuple[int, ...], tuple[float, ...]] = ((), ())
        if a.size:
            same = ((a.size,), (0.0, 0.0))
        nans = int(np.count_nonzero(np.isnan(a))) if a.dtype.kind in "fc" else 0
        return OutputDiff(
            name, True, 0.0, 0.0, a.shape, a.shape, "", 0.0, 0.0, 0, a.size, rtol, atol, same, nans
        )
    a, b = _as_array(before), _as_array(after)
    nan = float("nan")

    def failed(reason: str) -> OutputDiff:
        return OutputDiff(
            name, False, nan, nan, a.shape, b.shape, reason, rtol=rtol, atol=atol, size=a.size
        )

    if a.shape != b.shape:
        return failed("shape differs")
    if a.dtype != b.dtype:
        return failed(f"dtype {a.dtype} != {b.dtype}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        unequal = int(np.count_nonzero(a != b)) if a.shape else int(a != b)
        gap = 0.0 if not unequal else float("inf")
        return OutputDiff(
            name,
            not unequal,
            gap,
            0.0,
            a.shape,
            b.shape,
            "",
            gap,
            0.0,
            unequal,
            a.size,
            rtol,
            atol,
        )
    if a.size == 0:
        return OutputDiff(name, True, 0.0, 0.0, a.shape, b.shape, "", 0.0, 0.0, 0, 0, rtol, atol)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    a_nan, b_nan = np.isnan(a64), np.isnan(b64)
    with np.errstate(invalid="ignore"):
        # equal values (the same infinity too) differ by 0, a NaN against a number by inf
        delta = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
        delta = np.where(a_nan & b_nan, 0.0, np.where(a_nan ^ b_nan, np.inf, delta))
        delta = np.where(np.isnan(delta), np.inf, delta)  # inf against -inf
        if a.dtype.kind in "iub":
            exact = _integer_distance(a, b)
            # an infinite atol takes any value, a NaN none
            close = exact <= int(atol) if np.isfinite(atol) else np.full(exact.shape, atol > 0)
            delta = exact.astype(np.float64)
        else:
            close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
        # relative to a zero (or a NaN): 0 within the tolerances (atol covers it), else inf
        scale = np.abs(a64)
        measurable = (scale > 0) & ~a_nan
        relative = delta / np.where(measurable, scale, 1.0)
        rel = np.where(measurable, relative, np.where(close, 0.0, np.inf))
        rel = np.where(delta == 0, 0.0, np.where(np.isnan(rel), np.inf, rel))  # inf vs -inf
    finite = delta[np.isfinite(delta)]
    histogram: tuple[tuple[int, ...], tuple[float, ...]] = ((), ())
    if finite.size:
        try:
            # |differences| all equal (all 0, say): numpy centres its bins on the value, and
            # the bins of an absolute value would start below 0
            low, top = float(finite.min()), float(finite.max())
            span = (low, top) if top > low else (0.0, top or 1.0)
            counts, edges = np.histogram(finite, bins=_BINS, range=span)
            histogram = (tuple(int(c) for c in counts), tuple(float(e) for e in edges))
        except ValueError:  # one value too large for bins of its spread (2**64 - 1, say)
            histogram = ((finite.size,), (float(finite.min()), float(finite.max())))
    mismatches = int(a.size - np.count_nonzero(close))
    return OutputDiff(
        name,
        mismatches == 0,
        float(np.nanmax(delta)),
        float(np.nanmax(rel)),
        a.shape,
        b.shape,
        "",
        float(np.nanmean(delta)),
        float(np.nanmean(rel)),
        mismatches,
        a.size,
        rtol,
        atol,
        histogram,
        int(np.count_nonzero(a_nan & b_nan)),
    )


def _integer_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` of two integer (or bool) arrays of one dtype, exactly, as uint64: indices,
    ids and counts are compared in whole units, never through float64 (which rounds above
    2**53), and a relative tolerance does not apply to them."""
    wide = np.uint64 if a.dtype.kind == "u" else np.int64
    x, y = a.astype(wide), b.astype(wide)
    # modulo 2**64 the difference of the larger and the smaller is exact
    return np.where(
        x >= y, x.astype(np.uint64) - y.astype(np.uint64), y.astype(np.uint64) - x.astype(np.uint64)
    )


def _feeds_for(model: Model, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """The feeds ``model`` takes: its declared external inputs and the blobs its predict_net
    reads before writing them (all of them when it declares none)."""
    declared = set(model.predict_net.external_inputs)
    if not declared:
        return dict(feeds)
    read = set(model.predict_net.ssa().read_names(feeds))
    return {name: value for name, value in feeds.items() if name in declared or name in read}


def compare_models(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any] | None = None,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> list[OutputDiff]:
    """Run both models on the same feeds and compare every external output.

    Feeds default to ``make_feeds(before, shapes, seed)``; each model gets the feeds it
    declares as external inputs. An output present in only one model is a failed entry.
    ONNX models are refused (``graphtools.pytest_plugin.assert_models_equivalent`` runs them).
    """
    expect_model(before, "compare_models")
    expect_model(after, "compare_models")
    if ONNX in (before.dialect, after.dialect):
        raise PreconditionError(
            "compare_models runs Caffe2 pairs on the reference executor; compare ONNX models "
            "on onnxruntime with graphtools.pytest_plugin.assert_models_equivalent (or "
            "graphtools verify)"
        )
    if feeds is None:
        feeds = make_feeds(before, shapes or {}, seed)
    before = declaring_outputs(before)
    after = declaring_outputs(after, before)
    out_before, out_after = run_both(before, after, feeds, seed)
    return compare_outputs(out_before, out_after, rtol=rtol, atol=atol)


def declaring_outputs(model: Model, like: Model | None = None) -> Model:
    """``model``, or a copy whose predict_net declares the outputs to compare when it declares
    none: ``like``'s (a model compared with it), else the blobs it writes and never reads,
    as ``graphtools verify`` compares them (without any, a comparison compared nothing)."""
    if model.predict_net.external_outputs:
        return model
    names = list(like.predict_net.external_outputs) if like is not None else []
    written = {name for op in model.predict_net for name in op.outputs}
    if not written.issuperset(names):
        names = []  # a pass renamed them: its own unread blobs, matched by position (run_both)
    copy = model.copy()
    with copy.predict_net.edit() as edit:
        edit.set_external_outputs(names or unread_outputs(model.predict_net))
    return copy


def run_both(
    before: Model, after: Model, feeds: Mapping[str, Any], seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run both models on the same feeds; ``after``'s outputs carry ``before``'s names.

    A pass that renames the interface (``ssa-rewrite{style=all}``) keeps positions: a feed
    the rewritten model no longer declares goes to the input at its position when both
    declare as many inputs, and outputs are matched by position when both declare as many
    under other names (the same names are matched by name, whatever their order).
    """
    out_before = run_model(before, _feeds_for(before, feeds), seed=seed)
    return out_before, _run_matched(before, after, feeds, seed)


def _run_matched(
    before: Model, after: Model, feeds: Mapping[str, Any], seed: int
) -> dict[str, Any]:
    """Run ``after`` on ``before``'s feeds; its outputs carry ``before``'s names (see run_both)."""
    return run_after(before, after, feeds, seed=seed)


def run_after(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any],
    *,
    seed: int = 0,
    names: Sequence[str] | None = None,
    init_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``after`` (a rewrite of ``before``) on ``before``'s feeds; outputs carry
    ``before``'s names (see ``run_both`` for interfaces renamed by position).

    With ``names`` (``before``'s names of the blobs to fetch), the outputs never written are
    left out instead of raising, and blobs need not be declared outputs. ``init_values``
    (what ``before``'s init_net computed) is used instead of running ``after``'s init_net
    when every op of it is one of ``before``'s init_net ops, unchanged: fills are seeded by
    their output names, so the values would be the same.
    """
    old_in, new_in = before.predict_net.external_inputs, after.predict_net.external_inputs
    declared = set(new_in)
    by_position = len(old_in) == len(new_in)
    position = {name: i for i, name in enumerate(old_in)}
    after_feeds: dict[str, Any] = {}
    read = set(after.predict_net.ssa().read_names(feeds))
    for name, value in feeds.items():
        if name in declared or not declared or name in read:
            after_feeds[name] = value
        elif by_position and name in position:
            after_feeds[new_in[position[name]]] = value
    old_out, new_out = before.predict_net.external_outputs, after.predict_net.external_outputs
    renamed = _renamed_outputs(old_out, new_out)
    if names is None:
        out_after = run_model(after, after_feeds, seed=seed)
        back = {new: old for old, new in renamed.items()}
        return {back.get(name, name): value for name, value in out_after.items()}
    ws = Workspace(seed=seed)
    if after.init_net is not None:
        if init_values is not None and _kept_init(before, after, init_values):
            for name in {n for op in after.init_net for n in op.outputs}:
                ws.feed(name, init_values[name])
        else:
            run_net(after.init_net, ws)
    for name, value in after_feeds.items():
        ws.feed(name, value)
    run_net(after.predict_net, ws)
    fetched = {}
    for name in names:
        found = renamed.get(name, name)
        if ws.has(found):
            fetched[name] = ws.fetch(found)
    return fetched


def _renamed_outputs(old: Sequence[str], new: Sequence[str]) -> dict[str, str]:
    """``before``'s output names to ``after``'s: by position when a rewrite renamed the
    interface (as many outputs, other names), else by name (the same names in another
    order are the same outputs)."""
    if len(old) != len(new) or set(old) == set(new):
        return {}
    return dict(zip(old, new, strict=True))


def _kept_init(before: Model, after: Model, values: Mapping[str, Any]) -> bool:
    """Whether every op of ``after``'s init_net is an unchanged op of ``before``'s whose
    outputs ``values`` holds."""
    if before.init_net is None or after.init_net is None:
        return False
    by_outputs = {tuple(op.outputs): op for op in before.init_net}
    for op in after.init_net:
        if by_outputs.get(tuple(op.outputs)) != op or not all(n in values for n in op.outputs):
            return False
    return True


def compare_outputs(
    out_before: Mapping[str, Any],
    out_after: Mapping[str, Any],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> list[OutputDiff]:
    """Compare two ``{output name: value}`` results; an output in only one is a failed entry.

    ``per_output`` gives ``(rtol, atol)`` for named outputs, overriding ``rtol``/``atol``.
    Integer and bool outputs are compared exactly, in whole units: within ``int(atol)``
    (``rtol`` does not apply; Int8 values within their steps, say), never through floats.
    """
    diffs = []
    for name, value in out_before.items():
        tolerances = (per_output or {}).get(name, (rtol, atol))
        if name not in out_after:
            shape = np.shape(_as_array(value))
            diffs.append(OutputDiff(name, False, shape_before=shape, reason="missing after"))
        else:
            diffs.append(_diff(name, value, out_after[name], *tolerances))
    for name, value in out_after.items():
        if name not in out_before:
            shape = np.shape(_as_array(value))
            diffs.append(OutputDiff(name, False, shape_after=shape, reason="missing before"))
    return diffs


HALF_TOLERANCES = (1e-2, 1e-3)
"""``(rtol, atol)`` of a half-precision output when none is given: float16 keeps about three
decimal digits, and a rewrite that rounds once more (a fused BatchNorm) moves the last."""


def with_half_precision(
    reference: Mapping[str, Any],
    rtol: float,
    atol: float,
    per_output: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, tuple[float, float]]:
    """``per_output`` with each half-precision output of ``reference`` it does not name
    compared at ``HALF_TOLERANCES`` at least: float32's tolerances would call one rounding of
    a float16 value a difference."""
    per = dict(per_output or {})
    for name, value in reference.items():
        dtype = getattr(value, "dtype", None)
        if name not in per and getattr(dtype, "name", "") in ("float16", "bfloat16"):
            per[name] = (max(rtol, HALF_TOLERANCES[0]), max(atol, HALF_TOLERANCES[1]))
    return per


@dataclass(frozen=True)
class BisectResult:
    """The first pass run whose rewrite changed the model's outputs.

    Attributes:
        pass_name: pipeline name of that pass.
        round: the pipeline round in which it ran (1-based).
        diffs: the output comparison right after it, against the original model (none
            when the model fails to run after it).
        failure: why the model fails to run after it, where the original ran (``None``
            when it runs).
    """

    pass_name: str
    round: int
    diffs: list[OutputDiff]
    failure: str | None = None


def bisect_pipeline(
    model: Model,
    manager: PassManager,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
    per_output: Mapping[str, tuple[float, float]] | None = None,
    names: Sequence[str] | None = None,
) -> BisectResult | None:
    """Rerun ``manager``'s pipeline pass by pass on a copy of ``model`` and name the first pass
    after which the executor's outputs differ from the original's; ``None`` when none does.

    The outputs and tolerances are the verdict's: ``names`` (blobs to compare, as
    ``run_after`` takes them; the declared outputs when ``None``) and ``per_output`` (as
    ``compare_outputs`` takes it)."""
    if names is None:
        reference = run_model(model, _feeds_for(model, feeds), seed=seed)
    else:
        reference = run_after(model, model, feeds, seed=seed, names=names)
    return first_diverging_pass(
        model,
        manager,
        lambda current: compare_outputs(
            reference,
            run_after(model, current, feeds, seed=seed, names=names),
            rtol=rtol,
            atol=atol,
            per_output=per_output,
        ),
    )


def first_diverging_pass(
    model: Model, manager: PassManager, compare: Callable[[Model], list[OutputDiff]]
) -> BisectResult | None:
    """The first pass of ``manager``'s pipeline after which ``compare`` (the model as it is
    then, against the original's outputs) finds a difference, or the model fails to run
    (``ExecutionError``); ``None`` when none does.

    Passes run on a copy of ``model`` in the manager's order (named pipelines expanded for
    its dialect), round after round to the fixpoint, each under the same checks as in the
    manager; ``compare`` runs only after a pass that modified the model. The bisection
    of ``verify`` for both dialects: only how outputs are computed differs.
    """
    current = model.copy()
    for round_ in range(1, manager.steps + 1):
        changed = False
        for item in manager.passes_for(model.dialect):
            record = PassManager([item], steps=1)(current)[0]
            if not record.modified:
                continue
            changed = True
            try:
                diffs = compare(current)
            except ExecutionError as exc:  # the rewrite broke what ran before it
                return BisectResult(record.name, round_, [], failure=str(exc))
            if not all(d.ok for d in diffs):
                return BisectResult(record.name, round_, diffs)
        if not changed:
            break
    return None


def format_diffs(diffs: Sequence[OutputDiff]) -> str:
    """A fixed-width table of ``diffs``: output, status, max abs/rel difference, shapes, reason."""
    rows = [("output", "ok", "max_abs", "max_rel", "before", "after", "reason")]
    for d in diffs:
        rows.append(
            (
                d.name,
                "yes" if d.ok else "NO",
                f"{d.max_abs:.3g}",
                f"{d.max_rel:.3g}",
                "-" if d.shape_before is None else str(list(d.shape_before)),
                "-" if d.shape_after is None else str(list(d.shape_after)),
                d.reason,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


class MadeUpParameters(UserWarning):
    """``assert_models_equivalent`` ran a pair on parameters it made up."""


def assert_models_equivalent(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> None:
    """Fail with a table of per-output differences unless both Caffe2 pairs compute the same
    outputs on the reference executor (ONNX models: ``graphtools.pytest_plugin``'s function of
    this name, on onnxruntime).

    Without ``feeds``, inputs and missing parameters are made up as ``verify`` makes them
    (``graphtools.feeds.synthesize``: input roles and element types, ``shapes`` winning over
    guesses and init_net placeholders); an init_net op that cannot run here (a ``Load`` from a
    database not shipped) is left out of both, its blobs made up. Parameters made up, or
    replaced because the made-up inputs do not fit them, raise a ``MadeUpParameters`` warning.

    Raises:
        AssertionError: an output differs beyond ``atol + rtol * |before|``, or has a different
            shape or dtype, or exists in only one model; or nothing was compared.
        PreconditionError: ``feeds`` names no input of the model.
    """
    expect_model(before, "assert_models_equivalent")
    expect_model(after, "assert_models_equivalent")
    if feeds is None:
        synthesis = synthesize(before, shapes or {}, seed=seed)
        feeds = synthesis.feeds
        _warn_made_up(synthesis)
        skipped = [(s.type, s.outputs) for s in synthesis.skipped_ops if s.net == "init_net"]
        before, after = _without_init_ops(before, skipped), _without_init_ops(after, skipped)
    else:
        _refuse_unknown_feeds(before, feeds)
    diffs = compare_models(before, after, feeds, rtol=rtol, atol=atol, seed=seed)
    assert_no_difference(diffs, rtol, atol)


def _warn_made_up(synthesis: Synthesis) -> None:
    """The ``MadeUpParameters`` warning of a synthesis that made up or replaced parameters,
    saying which and why (a guessed input shape that the real weights do not fit, say)."""
    reasons = []
    made = [name for name in synthesis.params if name not in synthesis.replaced]
    if made:
        reasons.append(
            f"made up {len(made)} parameters that nothing provides (no init_net, an init_net "
            "op that cannot run here, or blobs it lacks)"
        )
    for name, why in synthesis.replaced.items():
        reasons.append(f"replaced the init_net's {name!r} by a made-up one: {why}")
    if reasons:
        warnings.warn(
            "; ".join(reasons) + ": the check is about the rewrite, not the weights (give the "
            "input shapes the weights fit with shapes=)",
            MadeUpParameters,
            stacklevel=3,
        )


def _without_init_ops(model: Model, skipped: Sequence[tuple[str, tuple[str, ...]]]) -> Model:
    """``model`` without the init_net ops of ``skipped`` (by type and outputs: a pipeline may
    have moved them)."""
    init = model.init_net
    if not skipped or init is None:
        return model
    wanted = set(skipped)
    indices = [i for i, op in enumerate(init) if (op.type, tuple(op.outputs)) in wanted]
    if not indices:
        return model
    copy = model.copy()
    assert copy.init_net is not None
    copy.init_net.remove_ops(indices)
    return copy


def _refuse_unknown_feeds(model: Model, feeds: Mapping[str, Any]) -> None:
    """A feed for no input of the model (a misspelt name) is an error, not dropped."""
    from graphtools.analysis.input_shapes import first_readers

    net = model.predict_net
    known = net.external_input_set() | first_readers(net).keys()
    if model.init_net is not None:
        known |= {name for op in model.init_net for name in op.outputs}
    for name in feeds:
        if name not in known:
            raise PreconditionError(
                f"feeds name {name!r}, which is no input of the model{did_you_mean(name, known)}"
            )


def assert_no_difference(diffs: Sequence[OutputDiff], rtol: float, atol: float) -> None:
    """Fail with the table of ``diffs`` unless every output matches, and when nothing was
    compared (a check of no output would pass whatever the models compute)."""
    if not diffs:
        raise AssertionError(
            "no output was compared: the models declare none and write none that nothing "
            "reads; declare the outputs to compare (predict_net.edit().set_external_outputs)"
        )
    if not all(d.ok for d in diffs):
        raise AssertionError(f"models differ (rtol={rtol}, atol={atol}):\n{format_diffs(diffs)}")


# -- random parameters for nets without an init_net ---------------------------------------------


def random_params(
    net: Net,
    input_shapes: Mapping[str, Sequence[int]],
    seed: int = 0,
    *,
    channels: int = 16,
    param_shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """Random parameters for a predict net that ships without its init_net.

    Output channel counts are not in a Caffe2 net's arguments, so they are first derived from
    the net's own constraints (``graphtools.analysis.channels.plan_channels``): a Sum/Add
    makes its operands' channel counts equal, a grouped conv (depthwise included) needs its
    input and output divisible by its group, a ChannelShuffle its input divisible by its
    group, a channel Concat adds its operands, and a forced conv weight or SpatialBN scale
    fixes a count. Each Conv,
    ConvTranspose and FC otherwise outputs the least count its constraints allow that is at
    least ``channels``. Then ``net`` runs once on standard-normal inputs of ``input_shapes``;
    whenever an op reads a blob that does not exist yet, the blob is made from the op's shapes
    (``graphtools.analysis.channels.param_spec``):

    * Conv / ConvTranspose: weights for the planned output count, following the op's
      ``order``; biases match.
    * FC / FCTransposed / MatMul: the planned outputs (``channels`` for MatMul) over the
      flattened input features.
    * SpatialBN / InstanceNorm / PRelu: one value per input channel (positive scales and
      variances).
    * Add / Sub / Mul / Div / Sum: A's shape, or with ``broadcast=1`` one value per dim at
      ``axis`` (Caffe2's usual per-channel use).

    Any consistent assignment is a valid network for equivalence tests; ``param_shapes`` forces
    the shape of named parameters when the real ones are wanted. Not derived: constraints
    through ops outside these rules (a Reshape, a Slice, a transpose between layouts), and
    equalities that need a non-unit multiple of a count.

    Returns:
        The generated parameters by name (the inputs are not included).

    Raises:
        InvalidNetError: a parameter's shape cannot be derived, or the net's constraints
            cannot be met (name the weights in ``param_shapes``).
        UnsupportedOpError / ExecutionError: as ``run_net`` does.
    """
    rng = np.random.default_rng(seed)
    forced = {name: tuple(int(d) for d in shape) for name, shape in (param_shapes or {}).items()}
    maker = ParamMaker(rng, plan_channels(net, input_shapes, channels, forced), channels)
    ws = Workspace(seed=seed)
    for name, shape in input_shapes.items():
        ws.feed(name, rng.standard_normal(tuple(shape)).astype(np.float32))
    params: dict[str, np.ndarray] = {}
    for index, op in enumerate(net):
        for position, name in enumerate(op.inputs):
            if ws.has(name):
                continue
            if name in forced:
                shape = forced[name]
                value = maker.weight(shape, prod(shape[1:]) if len(shape) > 1 else 1)
            elif position == 0:
                value = None
            else:
                value = maker.make(index, op, position, np.asarray(ws.fetch(op.inputs[0])))
            if value is None:
                raise InvalidNetError(
                    f"op #{index} ({op.type}) in {describe_net(net)}: cannot derive the shape of "
                    f"parameter {name!r}; give it in param_shapes"
                )
            params[name] = value
            ws.feed(name, value)
        run_op(op, ws, index=index, net=net)
    return params

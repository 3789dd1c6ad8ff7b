"""``verify`` on an ONNX model: onnxruntime runs the model before and after the pipeline on
the same inputs, and every graph output is compared.

The inputs are made from the graph inputs'
declared types (``graphtools.onnx.runtime``: ``--shapes`` gives whole shapes, a symbolic or
unknown dim is otherwise 1, said so; ``--feeds`` gives arrays of one's own, fed as they are), or
are those of a ``--save-outputs`` file given to ``--load-outputs`` (whose outputs are then the
reference). ``--bisect`` reruns the pipeline pass by pass and names the first pass after which
onnxruntime's outputs differ. Tolerances, statistics and the report are ``verify``'s
(``graphtools.cli.check`` renders them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphtools.cli.common import UsageError, parse_shape_items, set_outputs
from graphtools.errors import GraphToolsError
from graphtools.feeds import MadeInput
from graphtools.ir import Model
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.testing import (
    HALF_TOLERANCES,
    BisectResult,
    OutputDiff,
    compare_outputs,
    first_diverging_pass,
    with_half_precision,
)

__all__ = ["OnnxVerification", "saved_arrays", "verify_onnx_model"]

_INPUTS, _OUTPUTS = "inputs/", "outputs/"


@dataclass
class OnnxVerification:
    """What verifying one ONNX model found (``check.verify_one`` turns it into its report).

    Attributes:
        inputs: the data fed, and where each shape came from.
        notes: what the report should say besides.
        outputs_compared: the graph outputs compared.
        records: the pipeline's records.
        diffs: one comparison per output.
        bisect: the first pass that changed the outputs (``--bisect`` when they differ), or
            ``None`` (no bisect asked or no pass alone changed them; see ``bisected``).
        bisected: whether ``--bisect`` ran.
        feeds / reference: the data fed and the original's outputs (for ``--save-outputs``).
    """

    inputs: list[MadeInput] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    outputs_compared: list[str] = field(default_factory=list)
    records: list[PassRecord] = field(default_factory=list)
    diffs: list[OutputDiff] = field(default_factory=list)
    bisect: BisectResult | None = None
    bisected: bool = False
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    reference: dict[str, np.ndarray] = field(default_factory=dict)
    ops_before: int = 0
    ops_after: int = 0


def _run(model: Model, feeds: Mapping[str, Any], names: Sequence[str]) -> dict[str, np.ndarray]:
    from graphtools.onnx.runtime import run_model

    return run_model(model, feeds, list(names))


def _after_names(before: Model, after: Model, names: Sequence[str]) -> dict[str, str]:
    """``after``'s name of each of ``before``'s outputs (by position when a pass renamed the
    graph outputs)."""
    old, new = before.predict_net.external_outputs, after.predict_net.external_outputs
    renamed = dict(zip(old, new, strict=True)) if len(old) == len(new) else {}
    return {name: renamed.get(name, name) for name in names}


def _run_after(
    before: Model, after: Model, feeds: Mapping[str, Any], names: Sequence[str]
) -> dict[str, np.ndarray]:
    mapping = _after_names(before, after, names)
    values = _run(after, feeds, list(mapping.values()))
    return {name: values[found] for name, found in mapping.items()}


def _run_rewritten(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any],
    names: Sequence[str],
    records: Sequence[Any],
) -> dict[str, np.ndarray]:
    """``_run_after``, a failure of onnxruntime said to be on the pipeline's result (the
    model given ran), naming the passes that changed it."""
    from graphtools.onnx.runtime import RuntimeFailure

    try:
        return _run_after(before, after, feeds, names)
    except RuntimeFailure as exc:
        changed = ", ".join(dict.fromkeys(r.name for r in records if r.modified)) or "none"
        raise RuntimeFailure(
            exc.path,
            exc.stage,
            f"{exc.reason} (passes that changed it: {changed})",
            exc.node,
            exc.op_type,
            subject="the model the pipeline made of it",
        ) from exc


def _run_made_up(
    model: Model, feeds: Mapping[str, Any], names: Sequence[str], made: Sequence[MadeInput]
) -> dict[str, np.ndarray]:
    """``_run`` of the model given, on inputs made up from its declared types: a failure says
    which symbolic dims were taken as 1 (a size the model may not take)."""
    from graphtools.onnx.runtime import RuntimeFailure

    try:
        return _run(model, feeds, names)
    except RuntimeFailure as exc:
        guessed = [f"{item.name}: {item.reason}" for item in made if "taken as 1" in item.reason]
        if not guessed:
            raise
        raise RuntimeFailure(
            exc.path,
            exc.stage,
            f"{exc.reason} (made-up inputs, symbolic dims at 1: {'; '.join(guessed)})",
            exc.node,
            exc.op_type,
            exc.subject,
        ) from exc


def _shapes(model: Model, items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    shapes = parse_shape_items(items or (), "--shapes")
    inputs = list(model.predict_net.external_inputs)
    for name in shapes:
        if name not in inputs:
            raise UsageError(
                f"--shapes names {name!r}, which is not an input of the model; its inputs "
                f"are: {', '.join(inputs) or 'none'}"
            )
    return shapes


def _feeds_from_file(
    loaded: Mapping[str, np.ndarray], names: Sequence[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[MadeInput]]:
    feeds = {k[len(_INPUTS) :]: v for k, v in loaded.items() if k.startswith(_INPUTS)}
    reference = {k[len(_OUTPUTS) :]: v for k, v in loaded.items() if k.startswith(_OUTPUTS)}
    missing = [name for name in names if name not in reference]
    if missing:
        raise UsageError(f"--load-outputs file has no reference for outputs {missing}")
    made = [
        MadeInput(n, tuple(v.shape), str(v.dtype), "given", "--load-outputs")
        for n, v in feeds.items()
    ]
    return feeds, {n: reference[n] for n in names}, made


def _check_recorded_inputs(model: Model, feeds: Mapping[str, np.ndarray]) -> None:
    """Refuse recorded inputs the original model cannot take (a name it has no input for, a
    shape or element type other than the declared ones), naming the file: the original is not
    run with them, and onnxruntime refusing the pipeline's result would blame the pipeline."""
    from graphtools.onnx.runtime import feed_type_problem, seeded_inputs

    try:
        seeded_inputs(model, {}, 0, given=feeds)  # names and shapes, as --feeds checks them
    except GraphToolsError as exc:
        raise UsageError(f"the --load-outputs file's inputs do not fit the model: {exc}") from exc
    problem = feed_type_problem(model, feeds)
    if problem is not None:
        raise UsageError(f"the --load-outputs file's inputs do not fit the model: {problem}")


def _bisect(
    model: Model,
    manager: PassManager,
    feeds: Mapping[str, Any],
    reference: Mapping[str, np.ndarray],
    names: Sequence[str],
    tolerances: Mapping[str, Any],
) -> BisectResult | None:
    """The first pass run after which onnxruntime's outputs differ from ``reference``."""
    return first_diverging_pass(
        model,
        manager,
        lambda current: compare_outputs(
            reference, _run_after(model, current, feeds, names), **tolerances
        ),
    )


def verify_onnx_model(
    model: Model,
    settings: Mapping[str, Any],
    loaded: Mapping[str, np.ndarray] | None,
    tolerances: Mapping[str, Any],
    after_pass: Callable[[PassRecord, Model], None] | None = None,
    *,
    given: Mapping[str, Any] | None = None,
) -> OnnxVerification:
    """Verify the pipeline of ``settings`` on ``model`` with onnxruntime (see the module
    docstring); ``loaded`` is a ``--load-outputs`` file's arrays, ``tolerances`` the keyword
    arguments of ``compare_outputs``, ``given`` the ``--feeds`` arrays by input name.

    Raises:
        UsageError: an option does not fit the model (a shape, an output, a loaded file).
        RuntimeFailure: onnxruntime cannot load or run the model before or after.
    """
    from graphtools.onnx.runtime import seeded_inputs

    if settings["outputs"]:
        set_outputs(model, settings["outputs"])
    result = OnnxVerification()
    names = list(model.predict_net.external_outputs)
    if not names:
        raise UsageError("the graph declares no outputs: name the values to compare with --outputs")
    result.outputs_compared = names
    manager = PassManager.parse(settings["pipeline"], steps=settings["steps"])
    if loaded is None:
        try:
            feeds, made = seeded_inputs(
                model, _shapes(model, settings["shapes"]), settings["seed"], given=given
            )
        except UsageError:
            raise
        except GraphToolsError as exc:
            raise UsageError(str(exc)) from exc
        reference = _run_made_up(model, feeds, names, made)
    else:
        feeds, reference, made = _feeds_from_file(loaded, names)
        _check_recorded_inputs(model, feeds)
    result.inputs, result.feeds, result.reference = made, feeds, reference
    if not settings.get("tolerances_given"):
        tolerances = _half_precision(tolerances, reference, result.notes)
    after = model.copy()
    result.ops_before = sum(len(net) for net in model.nets())
    result.records = manager(after, after_pass=after_pass)
    result.ops_after = sum(len(net) for net in after.nets())
    if loaded is not None or any(record.modified for record in result.records):
        out_after = _run_rewritten(model, after, feeds, names, result.records)
    else:
        out_after = dict(reference)
        result.notes.append("no pass changed the model: its outputs are the original's")
    result.diffs = compare_outputs(reference, out_after, **tolerances)
    differ = not all(d.ok for d in result.diffs)
    if differ and settings["bisect"]:
        unchanged = loaded is None or all(
            d.ok for d in compare_outputs(reference, _run(model, feeds, names), **tolerances)
        )
        if unchanged:
            result.bisected = True
            result.bisect = _bisect(model, manager, feeds, reference, names, tolerances)
        else:
            result.notes.append(
                "bisect: the model differs from the loaded outputs before any pass ran, so "
                "no pass is to blame (were they recorded from another model or inputs?)"
            )
    return result


def _half_precision(
    tolerances: Mapping[str, Any], reference: Mapping[str, np.ndarray], notes: list[str]
) -> dict[str, Any]:
    """``tolerances`` with the half-precision outputs of ``reference`` compared at
    ``testing.HALF_TOLERANCES`` (said in a note)."""
    given = tolerances.get("per_output") or {}
    per = with_half_precision(
        reference, tolerances.get("rtol", 0.0), tolerances.get("atol", 0.0), given
    )
    half = [name for name in per if name not in given]
    if half:
        notes.append(
            f"half-precision outputs {', '.join(half)} compared with rtol "
            f"{HALF_TOLERANCES[0]:g}, atol {HALF_TOLERANCES[1]:g} (--rtol/--atol to choose)"
        )
    return {**tolerances, "per_output": per}


def saved_arrays(result: OnnxVerification) -> dict[str, np.ndarray]:
    """What ``--save-outputs`` writes: ``inputs/NAME`` and ``outputs/NAME`` arrays."""
    arrays = {f"{_INPUTS}{k}": np.asarray(v) for k, v in result.feeds.items()}
    arrays.update({f"{_OUTPUTS}{k}": np.asarray(v) for k, v in result.reference.items()})
    return arrays

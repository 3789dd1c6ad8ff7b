"""``verify``: run a pipeline on a copy of a model and compare the outputs numerically.

The original model runs once on made-up data (``graphtools.feeds``: ``--shapes`` and fed
inputs win; other shapes are guessed and said so; parameters a predict_net-only model lacks
are made up, seeded and reported; an init_net op that cannot run here, a ``Load`` from a
missing database, is left out and its blobs made up, said so). The pipeline's result runs on
the same data; every output is compared with its own tolerance (``--rtol 1e-3 prob:1e-2``),
with max/mean absolute and relative error, the mismatch count and a histogram of the errors.
``--feeds`` gives input arrays of one's own (inputs it lacks are still made up).
``--save-outputs`` keeps the data and the outputs in an ``.npz`` file; ``--load-outputs``
compares against such a file instead of running the original.

Exit codes: 0 outputs equal, 1 outputs differ, 2 bad input or error. Several models (several
paths, a folder of models) run one process each, ``-j`` at a time.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphtools._core import CAFFE2, ONNX
from graphtools.analysis.liveness import unread_outputs
from graphtools.cli import batch, onnx_commands
from graphtools.cli.common import (
    Output,
    UsageError,
    diff_json,
    diff_table,
    load_input,
    new_table,
    output_file,
    parse_name_list,
    read_shapes,
    record_data,
    refuse_dump_in_json,
    refuse_overwriting_input,
    report_records,
    set_outputs,
    tolerances_by_name,
    vacuous_notes,
)
from graphtools.cli.npz_files import feeds_of, load_npz, npz_bytes, saved_inputs
from graphtools.cli.onnx_files import is_onnx_file
from graphtools.cli.onnx_verify import saved_arrays, verify_onnx_model
from graphtools.cli.pass_shapes import with_input_shapes
from graphtools.cli.pipeline import is_collection, printer_after_pass
from graphtools.errors import ExecutionError, GraphToolsError, did_you_mean
from graphtools.executor import Int8Tensor
from graphtools.feeds import MadeInput, Synthesis, synthesize
from graphtools.feeds.report import unfit_weights
from graphtools.ir import Model
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.serde.atomic import atomic_write_bytes
from graphtools.serde.pairing import ModelRef, discover_models
from graphtools.testing import (
    BisectResult,
    OutputDiff,
    bisect_pipeline,
    compare_outputs,
    run_after,
)

__all__ = ["HANDLERS", "VerifyReport", "verify_one"]

_OUTPUTS = "outputs/"


@dataclass
class VerifyReport:
    """Everything one ``verify`` found, for the text report, JSON and batch summaries."""

    model: str
    pipeline: str
    verdict: str = "equal"
    records: list[PassRecord] = field(default_factory=list)
    inputs: list[MadeInput] = field(default_factory=list)
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    outputs_compared: list[str] = field(default_factory=list)
    diffs: list[OutputDiff] = field(default_factory=list)
    bisect: dict[str, Any] | None = None
    ops_before: int = 0
    ops_after: int = 0
    tolerance: str = ""

    def data(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "pipeline": self.pipeline,
            "verdict": self.verdict,
            "rounds": record_data(self.records),
            "inputs": [asdict(i) for i in self.inputs],
            "made_up_params": {k: list(v) for k, v in self.params.items()},
            "notes": self.notes,
            "outputs": [diff_json(d) for d in self.diffs],
            "bisect": self.bisect,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
        }


# -- tolerances ---------------------------------------------------------------------------------


def _tolerances(
    items: Sequence[str] | None, default: float, flag: str
) -> tuple[float, dict[str, float]]:
    """``["1e-5,prob:1e-3"]`` (or the items repeated) -> ``(1e-5, {"prob": 1e-3})``."""
    value, given = default, False
    per: dict[str, float] = {}
    split = [part.strip() for raw in items or () for part in raw.split(",") if part.strip()]
    for item in split:
        name, sep, number = item.rpartition(":")
        try:
            parsed = float(number)
        except ValueError:
            raise UsageError(f"{flag} {item!r} is not a number or NAME:number") from None
        if parsed != parsed:  # NaN: every comparison with it fails
            raise UsageError(f"{flag} {item!r} is not a number or NAME:number")
        if parsed < 0:
            raise UsageError(f"{flag} {item!r} is negative")
        earlier = per.get(name) if sep else (value if given else None)
        if earlier is not None and earlier != parsed:  # which one was meant?
            whose = f"output {name!r}" if sep else "every output"
            raise UsageError(
                f"{flag} gives {whose} two tolerances ({earlier:g} and {parsed:g}): give one "
                "(NAME:number for one output)"
            )
        if sep:
            per[name] = parsed
        else:
            value, given = parsed, True
    return value, per


# -- the work ----------------------------------------------------------------------------------


def _strip(model: Model, synthesis: Synthesis) -> Model:
    """A copy of ``model`` without the ops that could not run here."""
    copy = model.copy()
    for label, net in (("init_net", copy.init_net), ("predict_net", copy.predict_net)):
        indices = [s.index for s in synthesis.skipped_ops if s.net == label]
        if net is not None and indices:
            net.remove_ops(indices)
    return copy


def _array(value: Any) -> np.ndarray:
    return value.dequantize() if isinstance(value, Int8Tensor) else np.asarray(value)


def _notes(synthesis: Synthesis, report: VerifyReport) -> None:
    for name, fill in synthesis.placeholders.items():
        report.notes.append(f"input {name!r}: fed instead of the init_net's placeholder ({fill})")
    for skipped in synthesis.skipped_ops:
        report.notes.append(
            f"{skipped.net} op #{skipped.index} ({skipped.type}) cannot run here and is left "
            f"out; what reads {', '.join(skipped.outputs)} gets made-up values ({skipped.reason})"
        )
    for name, why in synthesis.replaced.items():
        report.notes.append(f"parameter {name!r} replaced by a made-up one: {why}")
    if synthesis.params:
        report.notes.append(
            f"made up {len(synthesis.params)} parameters ({synthesis.param_values} values) "
            "that nothing provides; the verdict is about the pipeline, not the weights"
        )
    for name in synthesis.missing_outputs:
        report.notes.append(f"output {name!r} is never written by the original model")


def verify_one(
    path: str,
    settings: Mapping[str, Any],
    out: Output | None = None,
    init: str | None = None,
) -> VerifyReport:
    """Verify one model (see the module docstring); ``settings`` holds the options."""
    model = load_input(path, init, no_init=settings["no_init"], out=out)
    if settings["save_outputs"]:
        saved = [Path(settings["save_outputs"])]
        refuse_overwriting_input(model, saved, "name another --save-outputs file")
    if model.dialect == ONNX:
        return _verify_onnx(model, path, settings, out)
    if settings["outputs"]:
        set_outputs(model, settings["outputs"])
    manager = PassManager.parse(settings["pipeline"], steps=settings["steps"])
    report = VerifyReport(path, manager.spec)
    names = list(model.predict_net.external_outputs)
    if not names:
        names = unread_outputs(model.predict_net)
        shown = ", ".join(names[:6]) + (f", ... ({len(names)})" if len(names) > 6 else "")
        report.notes.append(
            f"the predict_net declares no external outputs: comparing the blobs it writes "
            f"and never reads ({shown or 'none'}); choose others with --outputs A,B"
        )
    report.outputs_compared = names
    shapes, where = read_shapes(model, path, settings["shapes"])
    loaded = (
        load_npz(Path(settings["load_outputs"]), "outputs") if settings["load_outputs"] else None
    )
    try:
        if loaded is None:
            synthesis = synthesize(
                model,
                shapes,
                values=given_feeds(settings),
                seed=settings["seed"],
                random_params=settings["random_params"],
                outputs=names,
            )
        else:
            synthesis = _from_file(loaded, names)
    except GraphToolsError as exc:
        guessed = [n for n in getattr(exc, "__notes__", []) if "guessed" in n]
        if guessed:
            raise UsageError(f"{exc}; {guessed[0]}") from exc
        raise
    unfit = unfit_weights(synthesis) if settings["random_params"] is None else None
    if unfit is not None:  # "equal" would be about weights the model does not have
        raise UsageError(
            f"{unfit}; the model cannot run on its own weights at the input shapes guessed: "
            "give the shapes they were made for (--shapes), or pass --random-params to verify "
            "the pipeline on made-up ones"
        )
    compared = [name for name in names if name not in synthesis.missing_outputs]
    if not compared:  # "equal" over no value would prove nothing
        never = ", ".join(repr(n) for n in names[:6])
        what = f"never writes its outputs ({never})" if names else "writes no output"
        raise UsageError(
            f"nothing to compare: the model {what}; choose outputs it writes with --outputs A,B"
        )
    named = {"--shapes": where, "fed values": "--feeds"}  # where the CLI's user gave them
    report.inputs = [
        MadeInput(i.name, i.shape, i.dtype, i.origin, named.get(i.reason, i.reason))
        for i in synthesis.inputs
    ]
    report.params = synthesis.params
    _notes(synthesis, report)
    given = [i for i in synthesis.inputs if i.origin == "given"]  # never a guess's length
    manager = with_input_shapes(
        manager, {i.name: i.shape for i in given}, {i.name: i.dtype for i in given}
    )
    before = _strip(model, synthesis)
    after = before.copy()
    report.ops_before = len(before.predict_net)
    after_pass = (
        printer_after_pass(out) if out is not None and settings["print_after_each"] else None
    )
    report.records = manager(after, after_pass=after_pass)
    report.ops_after = len(after.predict_net)
    if loaded is not None or any(record.modified for record in report.records):
        try:
            out_after = run_after(
                before,
                after,
                synthesis.feeds,
                seed=settings["seed"],
                names=names,
                init_values=synthesis.init_values if loaded is None else None,
            )
        except ExecutionError as exc:  # the original ran on these data: the pipeline broke it
            return _broken_by_pipeline(report, exc, before, manager, synthesis, names, settings)
    else:  # nothing changed: the executor is deterministic, the outputs are the original's
        out_after = dict(synthesis.outputs)
        report.notes.append("no pass changed the model: its outputs are the original's")
    tolerances = _tolerance_settings(settings, names)
    rtol, atol = tolerances["rtol"], tolerances["atol"]
    report.diffs = compare_outputs(synthesis.outputs, out_after, **tolerances)
    report.tolerance = f"rtol={rtol:g}, atol={atol:g}, seed={settings['seed']}"
    report.verdict = "equal" if all(d.ok for d in report.diffs) else "differ"
    report.notes += vacuous_notes(report.diffs) + _nan_notes(report.diffs)
    if settings["save_outputs"]:
        _save(Path(settings["save_outputs"]), synthesis)
    if report.verdict == "differ" and settings["bisect"]:
        _bisect_into(report, before, manager, synthesis, names, loaded, settings, tolerances)
    return report


def _broken_by_pipeline(
    report: VerifyReport,
    exc: ExecutionError,
    before: Model,
    manager: PassManager,
    synthesis: Synthesis,
    names: Sequence[str],
    settings: Mapping[str, Any],
) -> VerifyReport:
    """The verdict when the model fails to run after the pipeline where the original ran:
    the outputs differ (there are none to compare); ``--bisect`` names the pass."""
    report.verdict = "differ"
    report.tolerance = f"seed={settings['seed']}"
    report.notes.append(f"the model fails to run after the pipeline, where the original ran: {exc}")
    if settings["bisect"]:
        tolerances = _tolerance_settings(settings, names)
        _bisect_into(report, before, manager, synthesis, names, None, settings, tolerances)
    return report


def _bisect_into(
    report: VerifyReport,
    before: Model,
    manager: PassManager,
    synthesis: Synthesis,
    names: Sequence[str],
    loaded: Mapping[str, np.ndarray] | None,
    settings: Mapping[str, Any],
    tolerances: Mapping[str, Any],
) -> None:
    """``--bisect``: the first pass after which the outputs differ. Against loaded outputs,
    only when the original itself gives them (else no pass is to blame, and the report says
    so, as for an ONNX model)."""
    seed = settings["seed"]
    if loaded is not None:
        original = run_after(before, before, synthesis.feeds, seed=seed, names=names)
        if not all(d.ok for d in compare_outputs(synthesis.outputs, original, **tolerances)):
            report.notes.append(
                "bisect: the model differs from the loaded outputs before any pass ran, so "
                "no pass is to blame (were they recorded from another model or inputs?)"
            )
            return
    found = bisect_pipeline(before, manager, synthesis.feeds, seed=seed, names=names, **tolerances)
    report.bisect = _bisect_data(found)


def _nan_notes(diffs: Sequence[OutputDiff]) -> list[str]:
    """A note per output NaN in both models somewhere: those values are counted equal, so
    'equal' says nothing of them."""
    return [
        f"output {d.name!r} is NaN in both models in {d.nan_both} of {d.size} values, counted "
        "as equal: the inputs reach values outside an op's domain (--feeds gives real ones)"
        for d in diffs
        if d.nan_both
    ]


def given_feeds(settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """The arrays of the ``--feeds`` file by input name (a ``--save-outputs`` file gives its
    inputs), ``None`` without one."""
    if not settings.get("feeds"):
        return None
    return feeds_of(load_npz(Path(settings["feeds"]), "feeds"))


def _tolerance_settings(settings: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """``compare_outputs``' tolerance arguments from ``--rtol``/``--atol``."""
    rtol, atol, per = tolerances_by_name(settings)
    compared = set(names)
    for name in per:
        if name not in compared:
            listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise UsageError(
                f"--rtol/--atol name {name!r}, which is not an output compared"
                f"{did_you_mean(name, names)}; the outputs compared: {listed or 'none'}"
            )
    return {"rtol": rtol, "atol": atol, "per_output": per}


def _verify_onnx(
    model: Model, path: str, settings: Mapping[str, Any], out: Output | None
) -> VerifyReport:
    """``verify`` on an ONNX model: onnxruntime before and after (``cli.onnx_verify``)."""
    manager = PassManager.parse(settings["pipeline"], steps=settings["steps"])
    report = VerifyReport(path, manager.spec)
    names = parse_name_list(settings["outputs"]) or list(model.predict_net.external_outputs)
    tolerances = _tolerance_settings(settings, names)
    loaded = (
        load_npz(Path(settings["load_outputs"]), "outputs") if settings["load_outputs"] else None
    )
    after_pass = (
        printer_after_pass(out) if out is not None and settings["print_after_each"] else None
    )
    found = verify_onnx_model(
        model, settings, loaded, tolerances, after_pass, given=given_feeds(settings)
    )
    report.inputs = found.inputs
    report.notes = found.notes
    report.outputs_compared = found.outputs_compared
    report.records = found.records
    report.diffs = found.diffs
    report.ops_before, report.ops_after = found.ops_before, found.ops_after
    report.tolerance = (
        f"{_tolerances_used(report.diffs, tolerances)}, seed={settings['seed']}; onnxruntime"
    )
    report.verdict = "equal" if all(d.ok for d in report.diffs) else "differ"
    report.notes += vacuous_notes(report.diffs) + _nan_notes(report.diffs)
    if settings["save_outputs"]:
        atomic_write_bytes(Path(settings["save_outputs"]), npz_bytes(saved_arrays(found)))
    if found.bisected:
        report.bisect = _bisect_data(found.bisect)
    return report


def _bisect_data(found: BisectResult | None) -> dict[str, Any]:
    if found is None:
        return {"pass": None}
    return {
        "pass": found.pass_name,
        "round": found.round,
        "outputs": [diff_json(d) for d in found.diffs],
        "failure": found.failure,
    }


def _from_file(loaded: Mapping[str, np.ndarray], names: Sequence[str]) -> Synthesis:
    """The feeds and reference outputs of a ``--save-outputs`` file."""
    result = Synthesis()
    for name, value in feeds_of(loaded).items():
        result.feeds[name] = value
        kind = "int8" if isinstance(value, Int8Tensor) else str(value.dtype)
        result.inputs.append(MadeInput(name, tuple(value.shape), kind, "given", "--load-outputs"))
    for key, value in loaded.items():
        if key.startswith(_OUTPUTS):
            result.outputs[key[len(_OUTPUTS) :]] = value
    missing = [name for name in names if name not in result.outputs]
    if missing:
        raise UsageError(f"--load-outputs file has no reference for outputs {missing}")
    return result


def _save(path: Path, synthesis: Synthesis) -> None:
    arrays = saved_inputs(synthesis.feeds)
    arrays.update({f"{_OUTPUTS}{k}": _array(v) for k, v in synthesis.outputs.items()})
    atomic_write_bytes(path, npz_bytes(arrays))


# -- the report ---------------------------------------------------------------------------------


def _number(value: float) -> str:
    return "-" if value != value else f"{value:.3g}"


def _histogram(out: Output, d: OutputDiff) -> None:
    counts, edges = d.histogram
    if not counts:
        return
    out.line(f"|difference| histogram of {d.name} ({d.size} values):")
    top = max(counts) or 1
    labels = _edge_labels(edges)
    for i, count in enumerate(counts):
        bar = "#" * round(30 * count / top)
        out.line(f"  [{labels[i]}, {labels[i + 1]}) {count:>8} {bar}")


def _edge_labels(edges: Sequence[float]) -> list[str]:
    """The bins' edges in the fewest significant digits (3 at least) that tell them apart:
    differences all near one value (a shifted output) have edges close together."""
    for digits in range(3, 18):
        labels = [f"{edge:.{digits}g}" for edge in edges]
        if len(set(labels)) == len(set(edges)):
            return labels
    return [repr(edge) for edge in edges]


def render(out: Output, report: VerifyReport) -> None:
    """The text report: rounds, data, notes, verdict, per-output table, histograms."""
    for made in report.inputs:
        dims = ", ".join(map(str, made.shape))
        out.line(f"input {made.name}: {made.dtype}[{dims}] ({made.origin}: {made.reason})")
    for note in report.notes:
        out.note(note)
    verdict = "outputs equal" if report.verdict == "equal" else "outputs differ"
    pipeline = report.pipeline or "(no passes)"
    out.line(f"pipeline {pipeline}: {verdict} ({report.tolerance})", level=0)
    if report.diffs:  # none when the model fails to run after the pipeline
        out.table(diff_table(report.diffs))
    for d in report.diffs:
        if not d.ok or out.verbosity >= 2:
            _histogram(out, d)
    if report.bisect is not None:
        found = report.bisect.get("pass")
        if found is None:
            out.line("bisect: no single pass run changed the outputs", level=0)
        else:
            out.line(
                f"first pass that changed the outputs: {found} (round {report.bisect['round']})",
                level=0,
            )
            if report.bisect.get("failure"):
                out.line(f"after it the model fails to run: {report.bisect['failure']}", level=0)
            table = new_table("output", "ok", "max abs", "max rel")
            if not report.bisect["outputs"]:
                return
            for row in report.bisect["outputs"]:
                table.add_row(
                    row["name"],
                    "yes" if row["ok"] else "NO",
                    _number(row["max_abs"] if row["max_abs"] is not None else float("nan")),
                    _number(row["max_rel"] if row["max_rel"] is not None else float("nan")),
                )
            out.table(table, level=0)


def _settings(options: argparse.Namespace) -> dict[str, Any]:
    return {
        "pipeline": options.pipeline,
        "steps": options.steps,
        "shapes": options.shapes,
        "seed": options.seed,
        "rtol": _tolerances(options.rtol, 1e-5, "--rtol"),
        "atol": _tolerances(options.atol, 1e-6, "--atol"),
        "tolerances_given": bool(options.rtol or options.atol),
        "random_params": options.random_params,
        "outputs": parse_name_list(options.outputs),
        "save_outputs": options.save_outputs,
        "load_outputs": options.load_outputs,
        "feeds": options.feeds,
        "bisect": options.bisect,
        "no_init": options.no_init,
        "print_after_each": options.print_after_each,
    }


def _cmd_verify(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    refuse_dump_in_json(options)
    settings = _settings(options)
    if options.save_outputs:
        output_file(options.save_outputs)
    if options.onnx is not None:
        return onnx_commands.verify_onnx(options, settings, out)
    if options.per_blob or options.test_mode:
        raise UsageError("--per-blob and --test-mode are options of verify --onnx")
    parsed = PassManager.parse(options.pipeline, steps=options.steps)  # fails before any run
    if len(options.inputs) == 1:
        _refuse_one_way_conversion(parsed, options.inputs[0])
    if len(options.inputs) > 1 or is_collection(options.inputs[0]):
        one_model = (options.init, options.save_outputs, options.load_outputs, options.feeds)
        if any(one_model) or options.print_after_each:
            raise UsageError(
                "--init, --save-outputs, --load-outputs, --feeds and --print-after-each take one "
                "model"
            )
        refs = discover_models(options.inputs)
        results = batch.run_batch(refs, verify_worker, settings, options.jobs, out)
        batch.render_batch(out, results, f"verify -p {options.pipeline}")
        return batch.exit_code(results)
    report = verify_one(options.inputs[0], settings, out, options.init)
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    report_records(out, manager, report.records, options.time_passes)
    if options.json:
        out.json(report.data())
    else:
        render(out, report)
    return 0 if report.verdict == "equal" else 1


def _tolerances_used(diffs: Sequence[OutputDiff], asked: Mapping[str, Any]) -> str:
    """The tolerances the outputs were compared with: one pair when all share it, otherwise
    each pair with its outputs (half-precision outputs get wider ones, per-output options)."""
    used: dict[tuple[float, float], list[str]] = {}
    for diff in diffs:
        used.setdefault((diff.rtol, diff.atol), []).append(diff.name)
    if len(used) <= 1:
        rtol, atol = next(iter(used), (asked["rtol"], asked["atol"]))
        return f"rtol={rtol:g}, atol={atol:g}"
    return "; ".join(
        f"rtol={r:g}, atol={a:g} for {', '.join(names)}" for (r, a), names in used.items()
    )


def _refuse_one_way_conversion(manager: PassManager, source: str) -> None:
    """verify compares a model with itself before the pipeline: one that ends in the other
    dialect has nothing to be compared with (the model's own runtime cannot run it). The
    conversions counted are those that take the model as it is at their turn."""
    start = dialect = ONNX if is_onnx_file(source) else CAFFE2
    last = None
    for item in manager.passes:
        if item.changes_dialect and dialect in item.dialects:
            dialect, last = (CAFFE2 if dialect == ONNX else ONNX), item.name
    if dialect == start:
        return
    advice = (
        "end the pipeline with convert-to-onnx"
        if start == ONNX
        else "check an export against the pair with verify --onnx X.onnx PAIR"
    )
    raise UsageError(
        f"the pipeline converts the model ({last}) and does not convert it back, so its "
        f"outputs have nothing to be compared with: {advice}"
    )


def verify_worker(ref: ModelRef, settings: dict[str, Any]) -> batch.BatchResult:
    """Verify one model of a batch."""
    report = verify_one(str(ref.path), settings, None, None if ref.init is None else str(ref.init))
    code = 0 if report.verdict == "equal" else 1
    return batch.BatchResult(
        ref.name,
        str(ref.path),
        report.verdict,
        code,
        report.ops_before,
        report.ops_after,
        data=report.data(),
    )


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"verify": _cmd_verify}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

"""``run`` (a pass pipeline over one model or many) and ``exec`` (run a model on feeds).

``run`` never overwrites its input unless ``--in-place`` is given, ``exec`` never overwrites
its feeds, and every file they write appears atomically.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.liveness import unread_outputs
from graphtools.analysis.model_diff import diff_models
from graphtools.cli import batch, onnx_commands
from graphtools.cli.common import (
    SHAPES_FILE,
    Output,
    Shape,
    UsageError,
    check_input_names,
    did_you_mean,
    load_input,
    model_input_names,
    output_file,
    output_folder,
    parse_name_list,
    read_shape_specs,
    record_data,
    refuse_dump_in_json,
    refuse_links_in_place,
    refuse_overwriting_input,
    report_records,
    set_outputs,
    shapes_text,
)
from graphtools.cli.diff import render_diff
from graphtools.cli.npz_files import feeds_of, load_npz, npz_bytes
from graphtools.cli.onnx_files import is_onnx_file, one_onnx_model
from graphtools.cli.onnx_run import (
    check_run_options,
    exec_onnx,
    onnx_manager,
    run_onnx_batch_one,
    run_onnx_model,
)
from graphtools.cli.pass_shapes import takes_input_shapes, with_input_shapes
from graphtools.errors import GraphToolsError, SerdeError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.passes.infer_devices import InferDevices, parse_input_devices
from graphtools.printer import print_model
from graphtools.serde import (
    check_output_folder,
    model_output_paths,
    save_model,
    save_model_in_place,
)
from graphtools.serde.atomic import atomic_write_bytes
from graphtools.serde.pairing import ModelRef, discover_models, left_out_note

__all__ = [
    "HANDLERS",
    "is_collection",
    "manager_for",
    "printer_after_pass",
]


def manager_for(pipeline: str, steps: int, devices: tuple[str, ...] = ()) -> PassManager:
    """The pipeline of ``-p``, plus ``infer-devices`` when ``--device`` items are given."""
    manager = PassManager.parse(pipeline, steps=steps)
    if not devices:
        return manager
    parse_input_devices(devices)
    return PassManager([*manager.passes, InferDevices(inputs=devices)], steps=manager.steps)


def check_devices(model: Model, devices: tuple[str, ...]) -> None:
    """``--device NAME=...`` must name external inputs of the predict_net."""
    declared = list(model.predict_net.external_inputs)
    for name in parse_input_devices(devices):
        if name not in declared:
            raise UsageError(
                f"--device names {name!r}, which is not an input of the predict_net"
                f"{did_you_mean(name, declared)}; its inputs are: "
                + (", ".join(declared[:6]) + (", ..." if len(declared) > 6 else "") or "none")
            )


def warn_no_outputs(out: Output, model: Model, command: str) -> None:
    """The warning for a net that declares no external outputs."""
    if not model.predict_net.external_outputs:
        out.warn(
            f"the predict_net declares no external outputs: {command}; name them with --outputs A,B"
        )


def _output_plan(model: Model, options: argparse.Namespace) -> Path | None:
    """Where ``run`` writes: ``None`` for in place; refuses to overwrite the input otherwise."""
    if options.in_place:
        if options.output is not None:
            raise UsageError("give -o or --in-place, not both")
        refuse_links_in_place([p for p in (model.predict_path, model.init_path) if p])
        return None
    if options.output is None:
        raise UsageError(
            "give an output folder with -o OUTDIR, or --in-place to overwrite the input"
        )
    out_dir = output_folder(options.output).resolve()
    inputs = {p.resolve() for p in (model.predict_path, model.init_path) if p is not None}
    planned = set(model_output_paths(model, out_dir, text=options.text))
    clash = sorted(str(p) for p in inputs & planned)
    if clash:
        raise UsageError(f"refusing to overwrite the input {clash[0]}; pass --in-place to do that")
    try:
        check_output_folder(model, out_dir, text=options.text)
    except SerdeError as exc:
        if out_dir not in {p.parent for p in inputs}:
            raise
        raise UsageError(f"{exc} (or pass --in-place to replace the model's own files)") from exc
    return out_dir


def _write(
    model: Model, options: argparse.Namespace, out_dir: Path | None, out: Output
) -> list[Path]:
    """Write the pair as a unit (``graphtools.serde.atomic``): into ``out_dir``, or in place,
    each file keeping its own format unless ``--text``/``--binary`` asks for one."""
    if out_dir is not None:
        return save_model(model, out_dir, text=options.text)
    if model.predict_path is None:
        raise UsageError("--in-place needs a model loaded from a file")
    written, removed = save_model_in_place(model, text=options.text)
    for path in removed:
        twin = next((w for w in written if w.with_suffix("") == path.with_suffix("")), None)
        out.line(f"removed {path}" + (f" (replaced by {twin.name})" if twin else ""))
    return written


def source_shapes(
    model: Model, source: str | Path, items: Sequence[str] | None = None
) -> dict[str, Shape]:
    """The input shapes ``--shapes`` (``items``) gives, else those ``shapes.txt`` beside
    ``source`` gives ``model`` (none when it has no such file, or one that does not fit it).

    Raises:
        UsageError: an item of ``items`` is malformed or names no input of ``model``.
    """
    if items:
        return read_shape_specs(model, source, items)[0]
    try:
        shapes, _ = read_shape_specs(model, source, None)
    except GraphToolsError:
        return {}
    return shapes


def _model_folder(model: Model) -> Path | None:
    return None if model.predict_path is None else model.predict_path.parent


def carry_shapes(
    shapes: Mapping[str, Shape],
    model: Model,
    folder: Path,
    out: Output | None = None,
    *,
    given: bool = False,
) -> Path | None:
    """Write the input shapes ``--shapes`` or the source's ``shapes.txt`` gave into the output
    ``folder``, for the inputs the run left (a later command on the output reads them as
    given, not guessed again); ``None`` when there are none. A ``shapes.txt`` already there
    that this run does not replace is another model's, which later commands would take as this
    one's: said. The source's own folder gets them only when ``given`` (``--shapes``, which may
    differ from the ``shapes.txt`` there)."""
    if not given and folder.resolve() == Path(model.predict_path or folder).parent.resolve():
        return None
    kept: dict[str, Shape] = {}
    if shapes:  # finding the inputs walks the whole net: a quarter of a big run's time
        data, params = model_input_names(model)
        still = set(data) | set(params)
        kept = {name: shape for name, shape in shapes.items() if name in still}
    if not kept:
        stale = folder / SHAPES_FILE
        if out is not None and stale.is_file():
            out.warn(
                f"{stale} was not written by this run (the source gives no input shapes): "
                "later commands read it as this model's; remove it if it is another's"
            )
        return None
    return atomic_write_bytes(folder / SHAPES_FILE, shapes_text(kept).encode())


def printer_after_pass(out: Output) -> Callable[[PassRecord, Model], None]:
    """``--print-after-each``: the canonical dump after each pass that changed the model."""

    def after_pass(record: PassRecord, model: Model) -> None:
        if record.modified:
            out.line(f"// after {record.name} (round {record.round})", level=0)
            out.line(print_model(model).rstrip("\n"), level=0)

    return after_pass


def _cmd_run(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    refuse_dump_in_json(options)
    if len(options.inputs) > 1 or is_collection(options.inputs[0]):
        return _run_batch(options, out)
    source = Path(options.inputs[0])
    if source.is_dir() and not options.init:
        found = one_onnx_model(source)
        if found is not None:
            options.inputs = [str(found)]  # the folder of one ONNX model is that model
    if is_onnx_file(options.inputs[0]):
        printer = printer_after_pass(out) if options.print_after_each else None
        return run_onnx_model(options, out, printer)
    if onnx_commands.wants_export(options):
        manager = manager_for(options.pipeline, options.steps, tuple(options.device or ()))
        return onnx_commands.run_onnx(options, manager, out)
    _refuse_export_options(options)
    model = load_input(options.inputs[0], options.init, no_init=options.no_init, out=out)
    # --diff shows what the run changed, the outputs --outputs declares included
    before = model.copy() if options.diff else None
    outputs = parse_name_list(options.outputs)
    if outputs:
        set_outputs(model, outputs)
    check_devices(model, tuple(options.device or ()))
    manager = manager_for(options.pipeline, options.steps, tuple(options.device or ()))
    # Read strictly when a pass takes them; a stale shapes.txt stops no other pipeline.
    if takes_input_shapes(manager):
        shapes = read_shape_specs(model, options.inputs[0], options.shapes)[0]
        manager = with_input_shapes(manager, shapes)
    else:
        shapes = source_shapes(model, options.inputs[0], options.shapes)
    if any(item.name == "remove-dead-ends" for item in manager.passes_for(model.dialect)):
        warn_no_outputs(out, model, "remove-dead-ends keeps every op then")
    converting = [item.name for item in manager.passes if item.changes_dialect]
    if converting:
        raise UsageError(
            f"the pipeline converts the model ({converting[0]}): a Caffe2 pair cannot hold "
            "the result; write it to an .onnx file (-o OUT.onnx)"
        )
    out_dir = _output_plan(model, options)
    after_pass = printer_after_pass(out) if options.print_after_each else None
    # no pass, no view to build (run -p '' copies a big net)
    dead_ends = _undeclared_dead_ends(model) if manager.passes_for(model.dialect) else []
    records = manager(model, after_pass=after_pass)
    report_records(out, manager, records, options.time_passes)
    written = _write(model, options, out_dir, out)
    # said once the write stood: a refused write prints its one error line alone
    _note_dead_ends_gone(out, model, dead_ends)
    # in place, --shapes replace the shapes.txt beside the model: the net may be made for them
    folder = out_dir if out_dir is not None or not options.shapes else _model_folder(model)
    carried = (
        None
        if folder is None
        else carry_shapes(shapes, model, folder, out, given=bool(options.shapes))
    )
    written += [] if carried is None else [carried]
    for path in written:
        out.line(f"wrote {path}")
    data: dict[str, Any] = {
        "model": options.inputs[0],
        "pipeline": manager.spec,
        "rounds": record_data(records),
        "written": [str(p) for p in written],
    }
    if before is not None:
        change = diff_models(before, model)
        render_diff(out, change)
        data["diff"] = change.to_dict()
    if options.json:
        out.json(data)
    return 0


_EXPORT_OPTIONS = (
    ("opset", "--opset"),
    ("dynamic_batch", "--dynamic-batch"),
    ("external_data", "--external-data"),
    ("test_mode", "--test-mode"),
)


def _refuse_export_options(options: argparse.Namespace) -> None:
    """The ONNX export's options with a Caffe2 pair written: they shape an ONNX output, and
    were ignored silently (a ``--dynamic-batch`` the user then relied on)."""
    given = [
        flag for field, flag in _EXPORT_OPTIONS if getattr(options, field) not in (None, False)
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)}: {'options' if len(given) > 1 else 'an option'} of the ONNX "
            "export, and this run writes a Caffe2 pair; write an ONNX model with -o OUT.onnx"
        )


def _undeclared_dead_ends(model: Model) -> list[str]:
    """What ops write that nothing reads (none of their outputs) and the net does not declare
    as outputs, when it declares some (a second head a file forgot to declare, MTCNN's box
    regression): the pipeline may remove those ops, said by ``_note_dead_ends_gone``."""
    net = model.predict_net
    if not net.external_outputs:
        return []  # warn_no_outputs says it; remove-dead-ends keeps every op then
    declared = set(net.external_outputs)
    return [name for name in net.ssa().dead_end_writes() if name not in declared]


def _note_dead_ends_gone(out: Output, model: Model, dead_ends: list[str]) -> None:
    """A note naming the undeclared dead ends no op writes any more."""
    if not dead_ends:
        return
    # One C-level sweep of the outputs: the view of the rewritten net is not kept, and
    # building it again would cost more than the whole note is worth.
    still = model.predict_net.written_among(dead_ends)
    gone = [name for name in dead_ends if name not in still]
    if gone:
        shown = ", ".join(gone[:4]) + (f", ... ({len(gone)} in all)" if len(gone) > 4 else "")
        them = "it" if len(gone) == 1 else "them"
        out.note(
            f"no op writes {shown} any more: nothing read {them} and the net does not declare "
            f"{them} as an output (to keep an output, declare it: --outputs A,B)"
        )


def is_collection(path: str) -> bool:
    """A folder that is not itself a model: neither a model folder (a Caffe2 pair) nor the
    folder of one ONNX model and nothing else a model could be (``load_input`` takes such a
    folder as that model: so does every command)."""
    from graphtools.serde.pairing import is_one_model_folder

    source = Path(path)
    if not source.is_dir() or is_one_model_folder(source):
        return False
    return one_onnx_model(source) is None


def _run_batch(options: argparse.Namespace, out: Output) -> int:
    if options.in_place or options.init or options.diff or options.print_after_each:
        raise UsageError(
            "--in-place, --init, --diff and --print-after-each take one model; "
            "several models are written under -o OUTDIR/NAME"
        )
    if options.output is None:
        raise UsageError("several models need an output folder: -o OUTDIR (one folder each)")
    if str(options.output).lower().endswith(".onnx"):
        discover_models(options.inputs)  # a folder holding no model says so
        raise UsageError("several models are written to a folder: -o OUTDIR, not an .onnx file")
    written = output_folder(options.output).resolve()
    # a previous run's results inside an input folder are not models to run again
    refs = [
        r for r in discover_models(options.inputs) if not r.path.resolve().is_relative_to(written)
    ]
    if not refs:
        raise UsageError(f"no model to run outside the output folder {options.output}")
    for ref in refs:
        note = left_out_note(ref.path) if ref.path.is_dir() else None
        if note is not None:
            out.note(note)
    manager_for(options.pipeline, options.steps, tuple(options.device or ()))  # check it now
    if any(is_onnx_file(ref.path) for ref in refs):
        check_run_options(options)  # what an ONNX model of the batch cannot take
        onnx_manager(options.pipeline, options.steps)
    settings = {
        "pipeline": options.pipeline,
        "steps": options.steps,
        "devices": tuple(options.device or ()),
        "text": options.text,
        "outputs": parse_name_list(options.outputs),
        "output": options.output,
        "no_init": options.no_init,
        "dynamic_batch": options.dynamic_batch,
        "opset": options.opset,
        "external_data": options.external_data,
    }
    results = batch.run_batch(refs, run_worker, settings, options.jobs, out)
    batch.render_batch(out, results, f"run -p {options.pipeline}")
    return batch.exit_code(results)


def run_worker(ref: ModelRef, settings: dict[str, Any]) -> batch.BatchResult:
    """Run the pipeline on one model of a batch and write it to ``OUTDIR/NAME``."""
    model = load_input(
        ref.path, None if ref.init is None else str(ref.init), no_init=settings["no_init"]
    )
    if model.dialect == ONNX:
        return run_onnx_batch_one(model, ref, settings)
    if settings["outputs"]:
        set_outputs(model, settings["outputs"])
    manager = manager_for(settings["pipeline"], settings["steps"], settings["devices"])
    before = len(model.predict_net)
    shapes = source_shapes(model, ref.path)
    manager = with_input_shapes(manager, shapes)
    records = manager(model)
    folder = Path(settings["output"]) / ref.name
    written = save_model(model, folder, text=settings["text"])
    carried = carry_shapes(shapes, model, folder)
    written += [] if carried is None else [carried]
    after = len(model.predict_net)
    data = {"rounds": record_data(records), "written": [str(p) for p in written]}
    return batch.BatchResult(ref.name, str(ref.path), "ok", 0, before, after, data=data)


# -- exec --------------------------------------------------------------------------------------


def _cmd_exec(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    output_file(options.output)
    model = load_input(options.input, options.init, no_init=options.no_init, out=out)
    onnx = model.dialect == ONNX
    outputs = parse_name_list(options.outputs)
    if not outputs and not onnx and not model.predict_net.external_outputs:
        outputs = unread_outputs(model.predict_net)  # what verify compares in that case
        shown = ", ".join(outputs[:6]) + (f", ... ({len(outputs)})" if len(outputs) > 6 else "")
        out.note(
            "the predict_net declares no external outputs: writing the blobs it writes and "
            f"never reads ({shown or 'none'}); choose others with --outputs A,B"
        )
    if outputs and not onnx:
        set_outputs(model, outputs)
    if not outputs:
        warn_no_outputs(out, model, "the .npz file will hold no arrays")
    feeds_path = Path(options.feeds)
    out_path = Path(options.output)
    if out_path.resolve() == feeds_path.resolve():
        raise UsageError(f"refusing to overwrite the input {out_path}; name another -o file")
    refuse_overwriting_input(model, [out_path], "name another -o file")  # data files too
    from graphtools.executor import Int8Tensor, run_model  # exec alone runs it: run does not

    feeds = feeds_of(load_npz(feeds_path, "feeds"))
    if onnx:  # an Int8 blob is an ONNX graph input as its quantized values (export's rule)
        plain = {n: v.values if isinstance(v, Int8Tensor) else v for n, v in feeds.items()}
        results = exec_onnx(model, plain, outputs)
    else:
        check_input_names(model, feeds, f"--feeds {feeds_path}")
        results = run_model(model, feeds, seed=options.seed)
    arrays: dict[str, np.ndarray] = {}
    for name, value in results.items():
        quantized = isinstance(value, Int8Tensor)
        array = value.dequantize() if quantized else np.asarray(value)
        arrays[name] = array
        note = " (int8, dequantized)" if quantized else ""
        out.line(f"{name}: {array.dtype}{list(array.shape)}{note}")
    out.line(f"wrote {atomic_write_bytes(out_path, npz_bytes(arrays))}")
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _cmd_run, "exec": _cmd_exec}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

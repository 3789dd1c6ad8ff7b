"""``run`` and ``exec`` on ONNX models: the pipeline runs on the ONNX graph itself (no
conversion), the result keeps the model's opsets and is written atomically with its external
data beside it; ``exec`` runs a model on onnxruntime.

``run X.onnx -o Y.onnx`` writes ``Y.onnx``; ``-o OUTDIR`` (not ending in ``.onnx``, or
ending in a slash) writes ``OUTDIR/X.onnx``; in a batch each model goes to
``OUTDIR/NAME/<its file name>``, so the external data files of two models never meet.
Nothing the input is made of (the model file, its external data files) is written over unless
``--in-place`` asks for it. onnx's checker reads the input and the output (see
``graphtools.cli.onnx_files``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphtools._core import ONNX
from graphtools.analysis.model_diff import diff_models
from graphtools.cli import batch, optimize_report
from graphtools.cli.common import (
    Output,
    UsageError,
    did_you_mean,
    parse_name_list,
    record_data,
    refuse_links_in_place,
    report_records,
    set_outputs,
)
from graphtools.cli.diff import render_diff
from graphtools.cli.onnx_diff import add_initializer_changes
from graphtools.cli.onnx_files import (
    ONNX_SUFFIX,
    InputCheck,
    checker_problem,
    inferred_types,
    load_onnx_file,
    model_files,
    output_files,
)
from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.serde.atomic import folder_for_write
from graphtools.serde.netdef_io import TEXT_SUFFIXES
from graphtools.serde.pairing import ModelRef

__all__ = [
    "check_run_options",
    "declare_outputs",
    "exec_onnx",
    "onnx_manager",
    "run_onnx_batch_one",
    "run_onnx_model",
]


def check_run_options(options: argparse.Namespace) -> None:
    """Refuse what ``run`` cannot do on an ONNX input: write it as text, or take shapes,
    devices or a test mode it has no use for."""
    refused = (
        ("--text/--binary", options.text is not None, "ONNX models are written in binary"),
        ("--shapes", bool(options.shapes), "its inputs are typed in the model"),
        ("--device", bool(options.device), "devices are Caffe2's (infer-devices)"),
        (
            "--test-mode",
            options.test_mode,
            "it sets is_test on a Caffe2 pair's ops for an export; an ONNX model keeps the "
            "training mode its export gave it",
        ),
    )
    for flag, given, why in refused:
        if given:
            raise UsageError(f"{flag} is not for an ONNX model: {why}")


def onnx_manager(pipeline: str, steps: int) -> PassManager:
    """The pipeline of ``-p`` for an ONNX model (``--opset`` and ``--dynamic-batch`` are stages
    around it: ``graphtools.cli.optimize_report.run_stages``)."""
    return PassManager.parse(pipeline, steps=steps)


def declare_outputs(model: Model, names: list[str]) -> None:
    """``--outputs`` on an ONNX model: the graph outputs become ``names``, each with a type
    (an ONNX graph output needs one): its declared one, else what onnx's shape inference
    gives it.

    Raises:
        UsageError: a name the graph never computes, or one no type can be found for.
    """
    set_outputs(model, names)
    net = model.predict_net
    untyped = [name for name in names if name not in net.types]
    if not untyped:
        return
    found = inferred_types(model, untyped)
    missing = [name for name in untyped if name not in found]
    if missing:
        raise UsageError(
            f"--outputs names {missing[0]!r}, which has no declared type and onnx's shape "
            "inference gives it none: an ONNX graph output needs a type"
        )
    with net.edit() as edit:
        for name in untyped:
            edit.set_type(name, found[name])


def _target(source: Path, options: argparse.Namespace) -> Path:
    """Where a single ``run`` of the model file ``source`` writes (see the module
    docstring)."""
    if options.in_place:
        if options.output is not None:
            raise UsageError("give -o or --in-place, not both")
        refuse_links_in_place([source])
        return source
    if options.output is None:
        raise UsageError(
            "give an output file with -o OUT.onnx, or --in-place to overwrite the input"
        )
    output = Path(options.output)
    as_folder = options.output.endswith(("/", os.sep))  # Path drops the slash that says so
    if output.suffix.lower() == ONNX_SUFFIX and not as_folder and not output.is_dir():
        return output
    if output.exists() and not output.is_dir():
        raise UsageError(
            f"-o {options.output} names a folder to write the model into (a name not ending "
            "in .onnx, or ending in /), and a file is there: give -o OUT.onnx or a folder"
        )
    if output.suffix.lower() in {".pb", *TEXT_SUFFIXES} and not output.is_dir():
        raise UsageError(
            f"-o {output} is named like a net file, and run writes an ONNX model as ONNX: "
            "give -o OUT.onnx or a folder (import-onnx writes a Caffe2 pair)"
        )
    name = source.name
    return output / (name if name.lower().endswith(ONNX_SUFFIX) else name + ONNX_SUFFIX)


def _refuse_overwrite(
    files: list[tuple[Path, bytes]], inputs: list[Path], *, external_data: bool
) -> None:
    """Refuse to overwrite a file of the input model, or an external data file already in
    the output's folder, with other bytes: data files keep their names, and two models cut
    from one export, or a model and its copy, read one file. The output written over may be
    one of its readers (a run into the same output again), never known to be the only one;
    the message says which it is."""
    from graphtools.serde.onnx_io import data_files_read  # not for run of a Caffe2 pair

    inputs_set = set(inputs)
    for index, (path, data) in enumerate(files):
        resolved = path.resolve()
        if resolved.is_file() and _same_bytes(resolved, data):
            continue
        if resolved in inputs_set:
            data_file = (
                ", pass --external-data to give this model a data file of its own"
                if index and not external_data
                else ""
            )
            raise UsageError(
                f"refusing to overwrite {path}, a file of the input model; write to another "
                f"file or folder{data_file}, or pass --in-place"
            )
        if index and resolved.exists():
            model = files[0][0]
            whose = (
                f"the data of the {model.name} this run replaces, and maybe of other models"
                if resolved in data_files_read(model)
                else f"which {model.name} does not read (another model's?)"
            )
            own_file = model.name + ".data"
            other_name = (
                f", pass --external-data to write its tensors to {own_file}"
                if not external_data and path.name != own_file
                else ""
            )
            raise UsageError(
                f"refusing to overwrite {path}, an external data file already there with other "
                f"data, {whose}; write to another folder{other_name}, or delete it first if no "
                "other model reads it"
            )


def _in_place_data_files(
    model: Model,
    target: Path,
    files: list[tuple[Path, bytes]],
    inputs: list[Path],
    out: Output,
) -> list[tuple[Path, bytes]]:
    """``--in-place --external-data``: the tensors' file is never written over when it
    holds other data (the model read it, and another model may read it too, or it is
    another's): they go to ``<model>.<n>.data`` beside the model instead, the first such
    file that is free or holds these very bytes (a run again finds its own). A note names
    the file left as it was, unless the run found its own again."""
    taken = next(
        ((path, data) for path, data in files[1:] if path.exists() and not _same_bytes(path, data)),
        None,
    )
    if taken is None:
        return files
    number = 1
    while True:
        location = f"{target.name}.{number}.data"
        candidate = target.parent / location
        if not candidate.exists():
            break
        if _same_bytes(candidate, taken[1]):
            return output_files(model, target, external_data=True, data_location=location)
        number += 1
    whose = (
        "the data the model read, which another model may read too"
        if taken[0].resolve() in set(inputs)
        else "an earlier run's or another model's, which may still be read"
    )
    out.note(
        f"{taken[0]} holds other data ({whose}): left as it was, the tensors go to {location}; "
        "delete it if nothing reads it"
    )
    return output_files(model, target, external_data=True, data_location=location)


def _inputs_data_read(model: Model, target: Path, inputs: list[Path]) -> list[Path]:
    """The input's external data files the model written to ``target`` would read, its
    tensors keeping their locations (the output lies beside its input)."""
    from graphtools.serde.onnx_codec import external_tensors  # not for run of a Caffe2 pair

    read = {
        (target.parent / tensor.external.location).resolve()  # type: ignore[attr-defined]
        for _, _, tensor in external_tensors(model)
    }
    return sorted(read.intersection(inputs))


def _data_not_written(
    model: Model,
    target: Path,
    files: list[tuple[Path, bytes]],
    written: list[Path],
    external_data: bool,
) -> list[Path]:
    """The external data files the model written to ``target`` reads but this run did not
    write: the input's, when the output lies beside it (its tensors keep their locations)."""
    from graphtools.serde.onnx_codec import external_tensors  # not for run of a Caffe2 pair

    data = {Path(os.path.normpath(path)) for path, _ in files[1:]}
    if not external_data:
        data.update(
            Path(os.path.normpath(target.parent / tensor.external.location))  # type: ignore[attr-defined]
            for _, _, tensor in external_tensors(model)
        )
    done = {Path(os.path.normpath(path)) for path in written}
    return sorted(data - done)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _write(files: list[tuple[Path, bytes]]) -> list[Path]:
    """Write the files as one unit, creating the model's folder (removed again when the
    write fails and it was made for it)."""
    from graphtools.serde.onnx_io import write_onnx_files

    with folder_for_write(files[0][0].parent):
        return write_onnx_files(files)


def _checked(
    model: Model, files: list[tuple[Path, bytes]], input_problem: str | None, out: Output | None
) -> str | None:
    """The checker's verdict on the files to write: an error when only the output fails; the
    warnings about input and output otherwise, said only now that the run succeeded (an error
    stays the one line a failed run prints)."""
    problem = checker_problem(files, model)
    if problem is not None and input_problem is None:
        raise SerdeError(
            files[0][0],
            f"the result fails onnx's checker although the input passed it: {problem}; "
            "nothing was written (a pass broke the model: --bisect with verify, or report it)",
        )
    if out is not None and input_problem is not None:
        out.warn(
            f"onnx's checker rejects {model.predict_path}: {input_problem} (graphtools' own "
            "checks pass: ran anyway)"
        )
        if problem is not None:
            out.warn(f"onnx's checker rejects the result too: {problem}")
    return problem


def run_onnx_model(
    options: argparse.Namespace,
    out: Output,
    after_pass: Callable[[PassRecord, Model], None] | None = None,
) -> int:
    """``run`` on one ONNX model file; ``after_pass`` is ``--print-after-each``'s printer.

    onnx's checker reads the input in a child process started before the load, so that it
    works while the model is loaded and rewritten (``InputCheck``).
    """
    check_run_options(options)
    with InputCheck(Path(options.inputs[0])) as input_check:
        return _run_model(options, out, after_pass, input_check)


def _run_model(
    options: argparse.Namespace,
    out: Output,
    after_pass: Callable[[PassRecord, Model], None] | None,
    input_check: InputCheck,
) -> int:
    path = options.inputs[0]
    model = load_onnx_file(path, input_check.data)
    from graphtools.serde.onnx_codec import check_external_data  # not for run of a pair

    check_external_data(model)  # a missing data file is the input's fault, not a pass's
    manager = onnx_manager(options.pipeline, options.steps)
    # --diff shows what the run changed, the outputs --outputs declares included
    before = model.copy() if options.diff else None
    outputs = parse_name_list(options.outputs)
    if outputs:
        declare_outputs(model, outputs)
    target = _target(Path(path), options)
    inputs = model_files(model)
    if not options.in_place and target.resolve() in inputs:
        raise UsageError(f"refusing to overwrite the input {target}; pass --in-place to do that")
    sizes = optimize_report.input_sizes(model, input_check.data)
    census = optimize_report.census(model, sizes)
    ran = optimize_report.run_stages(
        model,
        manager,
        opset=options.opset,
        dynamic_batch=options.dynamic_batch,
        after_pass=after_pass,
    )
    for stage, stage_records in ran:
        report_records(out, stage, stage_records, options.time_passes)
    records = [record for _, stage_records in ran for record in stage_records]
    if model.dialect != ONNX:
        raise UsageError(
            f"the pipeline turned {path} into a {model.dialect} model, but run writes an ONNX "
            "input back as ONNX: end the pipeline with convert-to-onnx (import-onnx writes a "
            "pair)"
        )
    external_data = options.external_data
    shared = [] if options.in_place or external_data else _inputs_data_read(model, target, inputs)
    if shared:  # the output would read the input's data file: it gets a file of its own
        external_data = True
        out.note(
            f"{target.name} gets its own external data file: the one it would share, "
            f"{shared[0]}, stays the input's"
        )
    files = output_files(model, target, external_data=external_data)
    if options.in_place and external_data:
        files = _in_place_data_files(model, target, files, inputs, out)
    if not options.in_place:
        _refuse_overwrite(files, inputs, external_data=external_data)
    input_problem = input_check.problem()
    checker = _checked(model, files, input_problem, out)
    written = _write(files)
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in model.opset_imports.items())
    header_ir = getattr(model.header, "ir_version", 0)
    for index, file in enumerate(written):
        what = f" (opsets {opsets}; IR {header_ir})" if index == 0 else " (external data)"
        out.line(f"wrote {file}{what}")
    kept = _data_not_written(model, target, files, written, external_data)
    for file in kept:
        out.line(
            f"{target.name} keeps weights in {file}, already there (not written): ship both, "
            "or use --external-data for a data file of its own"
        )
    sizes = [len(data) for _, data in files] + [_size(file) for file in kept]
    census_after = optimize_report.census(model, sizes)
    out.table(optimize_report.census_table(census, census_after))
    data: dict[str, Any] = {
        "model": path,
        "format": "onnx",
        "pipeline": manager.spec,
        "rounds": record_data(records),
        "written": [str(p) for p in written],
        "checker": {"input": input_problem, "output": checker},
        "census": optimize_report.census_data(census, census_after),
    }
    if before is not None:
        change = diff_models(before, model)
        add_initializer_changes(change, before, model)
        render_diff(out, change)
        data["diff"] = change.to_dict()
    if options.json:
        out.json(data)
    return 0


def run_onnx_batch_one(model: Model, ref: ModelRef, settings: dict[str, Any]) -> batch.BatchResult:
    """One ONNX model of a ``run`` batch, written to ``OUTDIR/NAME/<file name>``; onnx's
    checker reads the input while the pipeline runs."""
    with InputCheck(Path(ref.path)) as input_check:
        return _run_batch_model(model, ref, settings, input_check)


def _run_batch_model(
    model: Model, ref: ModelRef, settings: dict[str, Any], input_check: InputCheck
) -> batch.BatchResult:
    from graphtools.serde.onnx_codec import check_external_data  # not for run of a pair

    check_external_data(model)
    manager = onnx_manager(settings["pipeline"], settings["steps"])
    if settings["outputs"]:
        declare_outputs(model, settings["outputs"])
    before = sum(1 for net in model.nets() for _ in net)
    inputs = model_files(model)
    ran = optimize_report.run_stages(
        model, manager, opset=settings["opset"], dynamic_batch=settings["dynamic_batch"]
    )
    records = [record for _, stage_records in ran for record in stage_records]
    target = Path(settings["output"]) / ref.name / Path(ref.path).name
    files = output_files(model, target, external_data=settings["external_data"])
    _refuse_overwrite(files, inputs, external_data=settings["external_data"])
    input_problem = input_check.problem()
    checker = _checked(model, files, input_problem, None)
    written = _write(files)
    after = sum(1 for net in model.nets() for _ in net)
    data = {
        "rounds": record_data(records),
        "written": [str(p) for p in written],
        "checker": {"input": input_problem, "output": checker},
    }
    return batch.BatchResult(ref.name, str(ref.path), "ok", 0, before, after, data=data)


# -- exec ----------------------------------------------------------------------------------------


def exec_onnx(model: Model, feeds: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    """``exec`` on an ONNX model: onnxruntime's values of ``outputs`` (default: the graph
    outputs; any value of the main graph may be named).

    Raises:
        UsageError: a feed that is not a graph input, an input without a feed, an output the
            graph never computes.
        RuntimeFailure: onnxruntime cannot load or run the model.
    """
    from graphtools.onnx.runtime import graph_inputs, run_model

    inputs = [spec.name for spec in graph_inputs(model)]
    known = set(model.predict_net.external_inputs)
    for name in feeds:
        if name not in known:
            raise UsageError(
                f"--feeds names {name!r}, which is not an input of the model"
                f"{did_you_mean(name, inputs)}; its inputs are: {', '.join(inputs) or 'none'}"
            )
    missing = [name for name in inputs if name not in feeds]
    if missing:
        raise UsageError(f"--feeds has no value for the model's inputs {missing}")
    if outputs:
        written = model.predict_net.written_names() | set(model.predict_net.external_inputs)
        for name in outputs:
            if name not in written:
                raise UsageError(f"--outputs names {name!r}, which the main graph never computes")
    return run_model(model, feeds, outputs or None)

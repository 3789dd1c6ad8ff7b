"""The ONNX bridge on the command line: ``import-onnx``, ``export-onnx``, ``run`` of a pair
with an ``.onnx`` output (pipeline, then export), and ``verify --onnx`` (onnxruntime against
the executor). ONNX models themselves run natively: ``graphtools.cli.onnx_run``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from graphtools._core import ONNX
from graphtools.cli.common import (
    Output,
    UsageError,
    add_model_options,
    diff_table,
    load_input,
    model_input_names,
    output_folder,
    read_shapes,
    report_records,
    shapes_file,
    tolerances_by_name,
)
from graphtools.cli.onnx_files import is_onnx_file, load_onnx_file
from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.serde import save_model
from graphtools.testing import OutputDiff, make_feeds

__all__ = [
    "add_export_options",
    "add_verify_options",
    "register",
    "required_shapes",
    "run_onnx",
    "verify_onnx",
    "wants_export",
]


def required_shapes(
    model: Model, path: str, items: Sequence[str] | None
) -> dict[str, tuple[int, ...]]:
    """Input shapes that must all be given (``--shapes`` or ``shapes.txt``): an export types
    its inputs with them, so nothing is guessed.

    Raises:
        UsageError: a predict_net without its init_net (it reads blobs at a parameter
            position, as ``show`` counts them: values, not shapes to give), or an input
            without a shape.
    """
    shapes, _ = read_shapes(model, path, items)
    data, _ = model_input_names(model)
    _refuse_missing_weights(model, data, shapes)
    missing = [
        name for name in data if name not in shapes and name in model.predict_net.external_inputs
    ]
    if missing:
        raise UsageError(
            f"inputs {missing} need shapes: pass --shapes {missing[0]}=1x3x224x224 ... "
            f"or write them in {shapes_file(path)}"
        )
    return shapes


def _refuse_missing_weights(
    model: Model, data: Sequence[str], shapes: Mapping[str, Any]
) -> None:
    """A predict_net without its init_net reads blobs at a parameter position (as ``show``
    counts them): those are values to give, not shapes; refuse saying so."""
    from graphtools.analysis.input_shapes import first_readers

    readers = first_readers(model.predict_net)
    weights = [
        name for name in data if name not in shapes and name in readers and readers[name][2] >= 1
    ]
    if weights and model.init_net is None:
        listed = ", ".join(repr(n) for n in weights[:4]) + (", ..." if len(weights) > 4 else "")
        raise UsageError(
            f"the pair has no weights: {len(weights)} parameters its ops read ({listed}) come "
            "from no init_net; give its init_net with --init FILE (or put init_net.pb beside "
            "the predict_net)"
        )


def _float_inputs(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, list[int]]]:
    return {name: (1, list(shape)) for name, shape in shapes.items()}  # 1: ONNX FLOAT


def _shapes_from_onnx(
    model: Model, path: str, items: Sequence[str] | None, onnx_path: str, out: Output
) -> dict[str, tuple[int, ...]]:
    """Input shapes for ``verify --onnx``: ``--shapes`` or ``shapes.txt`` first, then the
    ONNX model's declared input shapes (a symbolic dim taken as 1, said so)."""
    shapes, _ = read_shapes(model, path, items)
    data, _ = model_input_names(model)
    _refuse_missing_weights(model, data, shapes)
    missing = [
        name for name in data if name not in shapes and name in model.predict_net.external_inputs
    ]
    if not missing:
        return shapes
    onnx_model = load_onnx_file(onnx_path)
    types = onnx_model.predict_net.types
    for name in missing:
        value_type = types.get(name)
        if value_type is None or value_type.shape is None:
            raise UsageError(
                f"input {name!r} has no shape in {onnx_path}: pass --shapes "
                f"{name}=1x3x224x224 ... or write it in {shapes_file(path)}"
            )
        free = [i for i, d in enumerate(value_type.shape) if not isinstance(d, int) or d < 0]
        shapes[name] = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in value_type.shape)
        said = f" (dims {free} symbolic: taken as 1)" if free else ""
        out.note(f"input {name!r}: shape {list(shapes[name])} from {onnx_path}{said}")
    return shapes


def _export(
    model: Model, options: argparse.Namespace, value_info: Mapping[str, Any], out: Output
) -> None:
    from graphtools.onnx import export_onnx, save_onnx

    exported = export_onnx(
        model, opset=options.opset, value_info=value_info, dynamic_batch=options.dynamic_batch
    )
    target = Path(options.output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        path = save_onnx(exported, target, external_data=options.external_data)
    except OSError as exc:
        raise SerdeError(target, f"cannot write: {exc.strerror or exc}") from exc
    out.line(f"wrote {path} (opset {exported.opset_import[0].version}, IR {exported.ir_version})")


def wants_export(options: argparse.Namespace) -> bool:
    """Whether ``run`` on a pair writes an ``.onnx`` file (pipeline, then export)."""
    return (options.output or "").lower().endswith(".onnx")


def run_onnx(options: argparse.Namespace, manager: PassManager, out: Output) -> int:
    """``run`` of a pair with an ``.onnx`` output: the pipeline, then the export."""
    source = options.inputs[0]
    model = load_input(source, options.init, no_init=options.no_init, out=out)
    value_info = _float_inputs(required_shapes(model, source, options.shapes))
    records = manager(model)
    report_records(out, manager, records, options.time_passes)
    _export(model, options, value_info, out)
    return 0


def _diff_json(d: OutputDiff) -> dict[str, Any]:
    data = asdict(d)
    counts, edges = d.histogram
    data["histogram"] = {"counts": list(counts), "edges": list(edges)}
    for key in ("max_abs", "max_rel", "mean_abs", "mean_rel"):
        data[key] = None if data[key] != data[key] else data[key]  # NaN is not JSON
    return data


def verify_onnx(options: argparse.Namespace, settings: Mapping[str, Any], out: Output) -> int:
    """onnxruntime on the ONNX model against our executor on the pair (``--per-blob``: also
    every blob both name, and the first op whose output is outside the tolerances). One
    verdict, the outputs'; blobs are compared with the same statistics and tolerances. Input
    shapes from ``--shapes``, ``shapes.txt``, else the ONNX model's declared ones."""
    from graphtools.onnx import compare_blobs_with_onnxruntime, compare_with_onnxruntime

    if len(options.inputs) != 1:
        raise UsageError("verify --onnx takes one model")
    path = options.inputs[0]
    model = load_input(path, options.init, no_init=options.no_init, out=out)
    if model.dialect == ONNX:
        raise UsageError(
            f"verify --onnx compares an ONNX model with a Caffe2 pair, and {path} is an ONNX "
            "model; to prove a pipeline on it: verify MODEL.onnx -p PIPELINE"
        )
    if not is_onnx_file(options.onnx):
        raise UsageError(f"--onnx {options.onnx} is not an ONNX model")
    shapes = _shapes_from_onnx(model, path, options.shapes, options.onnx, out)
    feeds = make_feeds(model, shapes, options.seed)
    rtol, atol, per = tolerances_by_name(settings)
    tolerance = f"rtol={rtol:g}, atol={atol:g}, seed={options.seed}"
    data: dict[str, Any] = {
        "onnx": options.onnx,
        "model": path,
        "inputs": {name: list(shape) for name, shape in shapes.items()},
        "tolerance": {"rtol": rtol, "atol": atol, "seed": options.seed},
    }
    if not options.per_blob:
        diffs = compare_with_onnxruntime(
            options.onnx, model, feeds, rtol=rtol, atol=atol, per_output=per
        )
        equal = all(d.ok for d in diffs)
    else:
        report = compare_blobs_with_onnxruntime(
            options.onnx, model, feeds, rtol=rtol, atol=atol, per_output=per
        )
        diffs, equal = report.outputs, report.outputs_equal
        found = report.first_divergence
        data.update(
            blobs=[_diff_json(d) for d in report.blobs],
            first_divergence=None
            if found is None
            else {"op_index": found.op_index, "op_type": found.op_type, **_diff_json(found.diff)},
        )
    data.update(verdict="equal" if equal else "differ", outputs=[_diff_json(d) for d in diffs])
    if options.json:
        out.json(data)
        return 0 if equal else 1
    verdict = "outputs equal" if equal else "outputs differ"
    out.line(f"onnxruntime vs executor: {verdict} ({tolerance})", level=0)
    out.table(diff_table(diffs))
    if options.per_blob:
        _render_blobs(out, report, equal)
    return 0 if equal else 1


def _render_blobs(out: Output, report: Any, equal: bool) -> None:
    """The per-blob part of ``verify --onnx``: how many blobs are outside the tolerances, and
    the first of them in the outputs' table."""
    outside = report.blobs_outside
    found = report.first_divergence
    out.line(
        f"compared {len(report.blobs)} intermediate blobs: {len(outside)} outside the tolerances"
    )
    if found is None:
        out.line("no blob outside the tolerances", level=0)
        return
    out.line(
        f"first blob outside the tolerances: op #{found.op_index} ({found.op_type}) "
        f"writing {found.diff.name!r}",
        level=0,
    )
    out.table(diff_table([found.diff], "blob"), level=0)
    if equal:
        out.line(
            "the outputs are equal: these differences do not reach them (float rounding in "
            "big reductions, most often); --rtol/--atol NAME:value loosen one blob",
            level=0,
        )


def add_export_options(parser: argparse.ArgumentParser) -> None:
    """``--opset``, ``--dynamic-batch`` and ``--external-data``."""
    parser.add_argument(
        "--opset", type=int, default=None, help="ONNX opset of an .onnx output (default: 17)"
    )
    parser.add_argument(
        "--dynamic-batch", action="store_true", help="write dim 0 of the ONNX inputs as free (N)"
    )
    parser.add_argument(
        "--external-data", action="store_true", help="write ONNX weights to MODEL.onnx.data"
    )


def add_verify_options(parser: argparse.ArgumentParser) -> None:
    """``--onnx`` and ``--per-blob`` for ``verify``."""
    parser.add_argument(
        "--onnx",
        metavar="MODEL.onnx",
        help="instead of a pipeline: compare onnxruntime on this ONNX model with the pair",
    )
    parser.add_argument(
        "--per-blob",
        action="store_true",
        help="with --onnx: also compare every intermediate blob and name the first op outside "
        "the tolerances (the verdict stays the outputs')",
    )


def _cmd_import_onnx(options: argparse.Namespace) -> int:
    from graphtools.onnx import import_onnx

    out = Output(options.verbosity, False)
    output_folder(options.output)
    model = import_onnx(options.input)
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    report_records(out, manager, manager(model), False)
    for path in save_model(model, options.output, text=options.text):
        out.line(f"wrote {path}")
    return 0


def _cmd_export_onnx(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    model = load_input(options.input, options.init, no_init=options.no_init, out=out)
    if model.dialect == ONNX:
        raise UsageError(
            f"{options.input} is an ONNX model already: export-onnx converts a Caffe2 pair "
            "(to rewrite an ONNX model: run MODEL.onnx -o OUT.onnx)"
        )
    shapes = required_shapes(model, options.input, options.shapes)
    _export(model, options, _float_inputs(shapes), out)
    return 0


def shapes_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--shapes", action="append", metavar="NAME=1x3x224x224", help=help_text)


def register(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``import-onnx`` and ``export-onnx``."""
    importing = commands.add_parser(
        "import-onnx",
        parents=parents,
        formatter_class=formatter,
        help="convert an ONNX model into an init_net/predict_net pair",
        description="Convert an ONNX model into a pair (see docs/onnx.md for the ops), "
        "optionally running a pipeline on it, and write it to -o OUTDIR.",
    )
    importing.add_argument("input", metavar="MODEL.onnx", help="the ONNX model")
    importing.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="output folder")
    importing.add_argument(
        "-p",
        "--pipeline",
        default="",
        metavar="SPEC",
        help="passes to run on the imported pair (default: none)",
    )
    importing.add_argument(
        "--steps",
        type=int,
        default=10,
        metavar="N",
        help="rounds of the pipeline at most (default: %(default)s)",
    )
    importing.add_argument("--text", action="store_true", help="write text-format nets")
    importing.set_defaults(handler=_cmd_import_onnx)

    exporting = commands.add_parser(
        "export-onnx",
        parents=parents,
        formatter_class=formatter,
        help="convert an init_net/predict_net pair into an ONNX model",
        description="Export a pair to ONNX; every input needs a shape (--shapes or shapes.txt).",
    )
    exporting.add_argument("input", metavar="IN", help="model folder or predict_net file")
    exporting.add_argument(
        "-o", "--output", required=True, metavar="MODEL.onnx", help="output file"
    )
    add_model_options(exporting)
    shapes_option(
        exporting,
        "input shapes, comma-separated or repeated (default: shapes.txt beside the model)",
    )
    add_export_options(exporting)
    exporting.set_defaults(handler=_cmd_export_onnx)

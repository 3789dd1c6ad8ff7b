"""The ONNX bridge on the command line: ``import-onnx``, ``export-onnx``, ``run`` with an
``.onnx`` input or output, and ``verify --onnx`` (onnxruntime against the executor)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.serde import save_model
from graphtools.testing import make_feeds

__all__ = [
    "add_export_options",
    "add_verify_options",
    "register",
    "required_shapes",
    "run_onnx",
    "verify_onnx",
    "wants_onnx",
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
    from graphtools.analysis.input_shapes import first_readers

    shapes, _ = read_shapes(model, path, items)
    data, _ = model_input_names(model)
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
    missing = [
        name for name in data if name not in shapes and name in model.predict_net.external_inputs
    ]
    if missing:
        raise UsageError(
            f"inputs {missing} need shapes: pass --shapes {missing[0]}=1x3x224x224 ... "
            f"or write them in {shapes_file(path)}"
        )
    return shapes


def _load_any(path: str, init: str | None, no_init: bool, out: Output) -> Model:
    """A pair, or a model imported from an ``.onnx`` file."""
    if path.endswith(".onnx"):
        from graphtools.onnx import import_onnx

        return import_onnx(path)
    return load_input(path, init, no_init=no_init, out=out)


def _float_inputs(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, list[int]]]:
    return {name: (1, list(shape)) for name, shape in shapes.items()}  # 1: ONNX FLOAT


def _onnx_inputs(path: str) -> dict[str, tuple[int, list[int | str | None]]]:
    """Types and shapes of an ONNX model's graph inputs (initializers excluded)."""
    from graphtools.onnx import load_onnx

    graph = load_onnx(path).graph
    params = {t.name for t in graph.initializer}
    return {
        i.name: (
            i.type.tensor_type.elem_type,
            [
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in i.type.tensor_type.shape.dim
            ],
        )
        for i in graph.input
        if i.name not in params
    }


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


def wants_onnx(options: argparse.Namespace) -> bool:
    """Whether ``run`` reads or writes an ``.onnx`` file."""
    inputs = getattr(options, "inputs", [])
    return any(str(p).endswith(".onnx") for p in inputs) or (options.output or "").endswith(".onnx")


def run_onnx(options: argparse.Namespace, manager: PassManager, out: Output) -> int:
    """``run`` with an ``.onnx`` input or output: import, pipeline, then save or export."""
    if len(options.inputs) != 1:
        raise UsageError("run on an .onnx model takes one model")
    source = options.inputs[0]
    model = _load_any(source, options.init, options.no_init, out)
    output = options.output
    if output is None:
        raise UsageError("run on an .onnx model needs -o (a model folder or an .onnx file)")
    value_info: Mapping[str, Any] = {}
    if not output.endswith(".onnx"):
        output_folder(output)
    elif source.endswith(".onnx") and not options.shapes:
        value_info = _onnx_inputs(source)  # the source model's own input types
    else:
        value_info = _float_inputs(required_shapes(model, source, options.shapes))
    records = manager(model)
    report_records(out, manager, records, options.time_passes)
    if output.endswith(".onnx"):
        _export(model, options, value_info, out)
    else:
        for path in save_model(model, output, text=options.text):
            out.line(f"wrote {path}")
    return 0


def verify_onnx(options: argparse.Namespace, settings: Mapping[str, Any], out: Output) -> int:
    """onnxruntime on the ONNX model against our executor on the pair (``--per-blob``: also
    every blob both name, and the first op whose output is outside the tolerances). One
    verdict, the outputs'; blobs are compared with the same statistics and tolerances."""
    from graphtools.onnx import compare_blobs_with_onnxruntime, compare_with_onnxruntime

    if len(options.inputs) != 1:
        raise UsageError("verify --onnx takes one model")
    path = options.inputs[0]
    model = load_input(path, options.init, no_init=options.no_init, out=out)
    feeds = make_feeds(model, required_shapes(model, path, options.shapes), options.seed)
    rtol, atol, per = tolerances_by_name(settings)
    tolerance = f"rtol={rtol:g}, atol={atol:g}, seed={options.seed}"
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

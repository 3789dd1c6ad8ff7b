"""The ``graphtools`` command line: show, ssa, run, verify, exec, list-passes, import-onnx,
export-onnx (``run`` and ``verify --onnx`` take ONNX models too).

Bad input exits with code 2 and one line ``error: ...`` (``--traceback`` shows the chain);
success exits 0; ``verify`` exits 1 when the pipeline changed the outputs; Ctrl-C exits 130 and
SIGTERM 143, with one line. ``run`` never overwrites its input unless ``--in-place`` is given,
``exec`` never overwrites its feeds, and every file they write appears atomically; a model's
pair is written as a unit into a locked folder (``graphtools.serde.atomic``), each file keeping
its own format unless ``--text``/``--binary`` asks for one.
"""

from __future__ import annotations

import argparse
import io
import sys
import traceback
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphtools.errors import GraphToolsError, SerdeError
from graphtools.executor import Int8Tensor, run_model
from graphtools.interrupt import INTERRUPTED_EXIT_CODE, Terminated, signals_as_exceptions
from graphtools.ir import Model
from graphtools.pass_infra import DEFAULT_PIPELINE, PassManager, PassRecord, available_passes
from graphtools.passes.infer_devices import InferDevices, parse_input_devices
from graphtools.printer import print_model, print_net, print_ssa_table
from graphtools.serde import (
    check_output_folder,
    load_model,
    load_model_dir,
    load_net,
    model_output_paths,
    save_model,
    save_model_in_place,
)
from graphtools.serde.atomic import atomic_write_bytes
from graphtools.serde.codec import net_from_netdef
from graphtools.testing import (
    OutputDiff,
    bisect_pipeline,
    compare_models,
    format_diffs,
    make_feeds,
    model_inputs,
)

SHAPES_FILE = "shapes.txt"
"""The case file beside a model that gives its input shapes, one ``name=1x3x8x8`` a line."""


class UsageError(GraphToolsError):
    """The command line asks for something that cannot be done (e.g. overwrite the input)."""


def _load(path: str, init: str | None = None) -> Model:
    source = Path(path)
    if source.is_dir():
        if init is not None:
            raise UsageError("--init is only for a predict_net file, not a model folder")
        return load_model_dir(source, allow_empty=True)
    return load_model(source, init, allow_empty=True)


def _cmd_show(options: argparse.Namespace) -> int:
    for index, path in enumerate(options.paths):
        if index:
            print()
        if len(options.paths) > 1:
            print(f"# {path}")
        if Path(path).is_dir():
            print(print_model(_load(path)), end="")
        else:
            print(print_net(net_from_netdef(load_net(path, allow_empty=True)), Path(path).name))
    return 0


def _cmd_ssa(options: argparse.Namespace) -> int:
    source = Path(options.path)
    net = _load(options.path).predict_net if source.is_dir() else None
    if net is None:
        net = net_from_netdef(load_net(source, allow_empty=True))
    print(print_ssa_table(net), end="")
    return 0


def _output_plan(model: Model, options: argparse.Namespace) -> Path | None:
    """Where ``run`` writes: ``None`` for in place; refuses to overwrite the input otherwise."""
    if options.in_place:
        return None
    if options.output is None:
        raise UsageError(
            "give an output folder with -o OUTDIR, or --in-place to overwrite the input"
        )
    out_dir = Path(options.output).resolve()
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


def _format_record(record: PassRecord) -> str:
    """``round 1 fuse-copy-ops: 15 -> 13 ops, modified, 0.001s {stats}``."""
    state = "modified" if record.modified else "unchanged"
    stats = f" {record.stats}" if record.stats else ""
    return (
        f"round {record.round} {record.name}: {record.ops_before} -> {record.ops_after} ops, "
        f"{state}, {record.seconds:.3f}s{stats}"
    )


def _manager(options: argparse.Namespace) -> PassManager:
    """The pipeline of ``-p``, plus ``infer-devices`` when ``--device`` items are given."""
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    devices = tuple(getattr(options, "device", None) or ())
    if not devices:
        return manager
    parse_input_devices(devices)
    return PassManager([*manager.passes, InferDevices(inputs=devices)], steps=manager.steps)


def _cmd_run(options: argparse.Namespace) -> int:
    if options.input.endswith(".onnx") or (options.output or "").endswith(".onnx"):
        return _cmd_run_onnx(options)
    model = _load(options.input, options.init)
    manager = _manager(options)
    out_dir = _output_plan(model, options)
    records = manager(model)
    for record in records:
        print(_format_record(record))
    removed: list[Path] = []
    if out_dir is None:
        written, removed = save_model_in_place(model, text=options.text)
    else:
        written = save_model(model, out_dir, text=options.text)
    for path in written:
        print(f"wrote {path}")
    for path in removed:
        twin = next((w for w in written if w.with_suffix("") == path.with_suffix("")), None)
        print(f"removed {path}" + (f" (replaced by {twin.name})" if twin else ""))
    return 0


def _parse_shape_items(items: Sequence[str], where: str) -> dict[str, tuple[int, ...]]:
    """``["data=1x3x8x8", "im_info=1x3"]`` -> ``{"data": (1, 3, 8, 8), "im_info": (1, 3)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        except ValueError:
            raise UsageError(
                f"{where}: shape {item!r} is not of the form name=1x3x224x224"
            ) from None
        if any(d < 0 for d in shape):
            raise UsageError(f"{where}: shape {item!r} has a negative dimension")
        if name in shapes:
            raise UsageError(f"{where}: input {name!r} is given a shape twice")
        shapes[name] = shape
    return shapes


def _shapes_file(path: str) -> Path:
    """Where the case file of a model folder or a predict_net file is (beside the file)."""
    source = Path(path)
    return (source if source.is_dir() else source.parent) / SHAPES_FILE


def _input_shapes(model: Model, options: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """Input shapes from ``--shapes``, else from ``shapes.txt`` beside the model."""
    if options.shapes:
        shapes = _parse_shape_items(options.shapes, "--shapes")
    else:
        case_file = _shapes_file(options.input)
        if case_file.is_file():
            try:
                text = case_file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise SerdeError(case_file, f"cannot read: {exc}") from exc
            items = [
                item
                for line in text.splitlines()
                if not line.lstrip().startswith("#")
                for item in line.split()
            ]
            shapes = _parse_shape_items(items, str(case_file))
        else:
            shapes = {}
    missing = [name for name in model_inputs(model) if name not in shapes]
    if missing:
        raise UsageError(
            f"inputs {missing} need shapes: pass --shapes {missing[0]}=1x3x224x224 ... "
            f"or write them in {_shapes_file(options.input)}"
        )
    return shapes


def _print_diffs(title: str, diffs: Sequence[OutputDiff]) -> None:
    print(title)
    print(format_diffs(diffs))


def _cmd_verify(options: argparse.Namespace) -> int:
    if options.onnx is not None:
        return _cmd_verify_onnx(options)
    model = _load(options.input, options.init)
    if not model.predict_net.external_outputs:
        raise UsageError(f"{options.input}: the predict_net declares no external outputs")
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    shapes = _input_shapes(model, options)
    feeds = make_feeds(model, shapes, options.seed)
    after = model.copy()
    for record in manager(after):
        print(_format_record(record))
    diffs = compare_models(
        model, after, feeds, rtol=options.rtol, atol=options.atol, seed=options.seed
    )
    tolerance = f"rtol={options.rtol:g}, atol={options.atol:g}, seed={options.seed}"
    equal = all(d.ok for d in diffs)
    verdict = "outputs equal" if equal else "outputs differ"
    _print_diffs(f"pipeline {manager}: {verdict} ({tolerance})", diffs)
    if equal:
        return 0
    if options.bisect:
        found = bisect_pipeline(
            model, manager, feeds, rtol=options.rtol, atol=options.atol, seed=options.seed
        )
        if found is None:
            print("bisect: no single pass run changed the outputs")
        else:
            _print_diffs(
                f"first pass that changed the outputs: {found.pass_name} (round {found.round})",
                found.diffs,
            )
    return 1


# -- the ONNX bridge ------------------------------------------------------------------------


def _load_any(path: str, init: str | None = None) -> Model:
    """A pair from a model folder or predict_net file, or imported from an ``.onnx`` file."""
    if path.endswith(".onnx"):
        from graphtools.onnx import import_onnx

        return import_onnx(path)
    return _load(path, init)


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


def _export(model: Model, options: argparse.Namespace, value_info: Mapping[str, Any]) -> None:
    from graphtools.onnx import export_onnx, save_onnx

    exported = export_onnx(
        model, opset=options.opset, value_info=value_info, dynamic_batch=options.dynamic_batch
    )
    path = save_onnx(exported, options.output, external_data=options.external_data)
    print(f"wrote {path} (opset {exported.opset_import[0].version}, IR {exported.ir_version})")


def _cmd_import_onnx(options: argparse.Namespace) -> int:
    from graphtools.onnx import import_onnx

    model = import_onnx(options.input)
    for record in PassManager.parse(options.pipeline, steps=options.steps)(model):
        print(_format_record(record))
    for path in save_model(model, options.output, text=options.text):
        print(f"wrote {path}")
    return 0


def _cmd_export_onnx(options: argparse.Namespace) -> int:
    model = _load(options.input, options.init)
    _export(model, options, _float_inputs(_input_shapes(model, options)))
    return 0


def _cmd_run_onnx(options: argparse.Namespace) -> int:
    """``run`` with an ``.onnx`` input or output: import, pipeline, then save or export."""
    model = _load_any(options.input, options.init)
    output = options.output
    if output is None:
        raise UsageError("run on an .onnx model needs -o (a model folder or an .onnx file)")
    value_info: Mapping[str, Any] = {}
    if output.endswith(".onnx"):
        if options.input.endswith(".onnx") and not options.shapes:
            value_info = _onnx_inputs(options.input)  # the source model's own input types
        else:
            value_info = _float_inputs(_input_shapes(model, options))
    for record in _manager(options)(model):
        print(_format_record(record))
    if output.endswith(".onnx"):
        _export(model, options, value_info)
    else:
        for path in save_model(model, output, text=options.text):
            print(f"wrote {path}")
    return 0


def _cmd_verify_onnx(options: argparse.Namespace) -> int:
    """onnxruntime on the ONNX model against our executor on the pair (``--per-blob``: every
    blob both name, and the first op whose output diverges)."""
    from graphtools.onnx import compare_blobs_with_onnxruntime, compare_with_onnxruntime

    model = _load(options.input, options.init)
    feeds = make_feeds(model, _input_shapes(model, options), options.seed)
    tolerance = f"rtol={options.rtol:g}, atol={options.atol:g}, seed={options.seed}"
    if not options.per_blob:
        diffs = compare_with_onnxruntime(
            options.onnx, model, feeds, rtol=options.rtol, atol=options.atol
        )
        equal = all(d.ok for d in diffs)
        verdict = "outputs equal" if equal else "outputs differ"
        _print_diffs(f"onnxruntime vs executor: {verdict} ({tolerance})", diffs)
        return 0 if equal else 1
    report = compare_blobs_with_onnxruntime(
        options.onnx, model, feeds, rtol=options.rtol, atol=options.atol
    )
    verdict = "outputs equal" if all(d.ok for d in report.outputs) else "outputs differ"
    _print_diffs(f"onnxruntime vs executor: {verdict} ({tolerance})", report.outputs)
    print(f"compared {len(report.blobs)} intermediate blobs")
    found = report.first_divergence
    if found is None:
        print("no blob diverges")
    else:
        diff = found.diff
        print(
            f"first divergence: op #{found.op_index} ({found.op_type}) writing {diff.name!r}: "
            f"max_abs {diff.max_abs:.3g} {diff.reason}".rstrip()
        )
    return 0 if report.ok else 1


def _onnx_export_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset (default 17)")
    parser.add_argument(
        "--dynamic-batch", action="store_true", help="write dim 0 of the inputs as free (N)"
    )
    parser.add_argument(
        "--external-data", action="store_true", help="write weights to MODEL.onnx.data"
    )


def _shapes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes",
        action="extend",
        nargs="+",
        metavar="NAME=1x3x224x224",
        help=f"input shapes (default: {SHAPES_FILE} beside the model)",
    )


def _add_onnx_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    importing = commands.add_parser("import-onnx", help="convert an ONNX model into a pair")
    importing.add_argument("input", metavar="MODEL.onnx")
    importing.add_argument("-o", "--output", required=True, metavar="OUTDIR")
    importing.add_argument("-p", "--pipeline", default="", metavar="SPEC")
    importing.add_argument("--steps", type=int, default=10, help="fixpoint rounds at most")
    importing.add_argument("--text", action="store_true", help="write text-format nets")
    importing.set_defaults(handler=_cmd_import_onnx)

    exporting = commands.add_parser("export-onnx", help="convert a pair into an ONNX model")
    exporting.add_argument("input", metavar="IN", help="model folder or predict_net file")
    exporting.add_argument("-o", "--output", required=True, metavar="MODEL.onnx")
    exporting.add_argument("--init", metavar="INIT", help="init_net file for a predict_net file")
    _shapes_option(exporting)
    _onnx_export_options(exporting)
    exporting.set_defaults(handler=_cmd_export_onnx)


def _load_feeds(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name (``numpy.savez(path, data=x)``)."""
    if not path.is_file():
        raise SerdeError(path, "cannot read feeds: no such file")
    if not zipfile.is_zipfile(path):
        raise SerdeError(path, "not an .npz archive of named arrays (write it with numpy.savez)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise SerdeError(path, f"cannot read feeds: {exc}") from exc


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """What ``numpy.savez`` writes, built in memory; any blob name is fine (``savez(**arrays)``
    would take a blob named ``file`` or ``allow_pickle`` for its own argument)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    return buffer.getvalue()


def _cmd_exec(options: argparse.Namespace) -> int:
    model = _load(options.input, options.init)
    feeds_path = Path(options.feeds)
    out_path = Path(options.output)
    inputs = (feeds_path, model.predict_path, model.init_path)
    if out_path.resolve() in {p.resolve() for p in inputs if p is not None}:
        raise UsageError(f"refusing to overwrite the input {out_path}; name another -o file")
    outputs = run_model(model, _load_feeds(feeds_path), seed=options.seed)
    arrays: dict[str, np.ndarray] = {}
    for name, value in outputs.items():
        quantized = isinstance(value, Int8Tensor)
        array = value.dequantize() if quantized else np.asarray(value)
        arrays[name] = array
        note = " (int8, dequantized)" if quantized else ""
        print(f"{name}: {array.dtype}{list(array.shape)}{note}")
    print(f"wrote {atomic_write_bytes(out_path, _npz_bytes(arrays))}")
    return 0


def _cmd_list_passes(options: argparse.Namespace) -> int:
    for name, cls in sorted(available_passes().items()):
        doc = (cls.__doc__ or "").strip().splitlines()
        print(f"{name:28} {doc[0] if doc else ''}")
    print(f"\ndefault = {DEFAULT_PIPELINE}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog="graphtools", description="Read, analyse and rewrite Caffe2 NetDef pairs."
    )
    parser.add_argument("--traceback", action="store_true", help="show the full error chain")
    commands = parser.add_subparsers(dest="command", required=True)

    show = commands.add_parser("show", help="print the canonical dump of nets or model folders")
    show.add_argument("paths", nargs="+", metavar="PATH")
    show.set_defaults(handler=_cmd_show)

    ssa = commands.add_parser("ssa", help="print the versioned blobs of a net")
    ssa.add_argument("path", metavar="PATH")
    ssa.set_defaults(handler=_cmd_ssa)

    run = commands.add_parser("run", help="run a pass pipeline over a model")
    run.add_argument("input", metavar="IN", help="model folder or predict_net file")
    run.add_argument("-p", "--pipeline", default="default", metavar="SPEC")
    run.add_argument("-o", "--output", metavar="OUTDIR")
    run.add_argument("--init", metavar="INIT", help="init_net file for a predict_net file")
    run.add_argument("--in-place", action="store_true", help="overwrite the input files")
    run.add_argument("--steps", type=int, default=10, help="fixpoint rounds at most")
    run.add_argument(
        "--device",
        action="append",
        metavar="NAME=cpu|gpu",
        help="device of a predict_net input (repeatable): runs infer-devices after the pipeline",
    )
    fmt = run.add_mutually_exclusive_group()
    fmt.add_argument("--text", dest="text", action="store_const", const=True, default=None)
    fmt.add_argument("--binary", dest="text", action="store_const", const=False)
    _shapes_option(run)
    _onnx_export_options(run)
    run.set_defaults(handler=_cmd_run)

    check = commands.add_parser(
        "verify", help="run a pipeline on a copy and compare the outputs with the executor"
    )
    check.add_argument("input", metavar="IN", help="model folder or predict_net file")
    check.add_argument("-p", "--pipeline", default="default", metavar="SPEC")
    check.add_argument("--init", metavar="INIT", help="init_net file for a predict_net file")
    check.add_argument(
        "--shapes",
        action="extend",
        nargs="+",
        metavar="NAME=1x3x224x224",
        help=f"input shapes (default: {SHAPES_FILE} beside the model)",
    )
    check.add_argument("--seed", type=int, default=0, help="seed of the random feeds")
    check.add_argument("--rtol", type=float, default=1e-5)
    check.add_argument("--atol", type=float, default=1e-6)
    check.add_argument("--steps", type=int, default=10, help="fixpoint rounds at most")
    check.add_argument(
        "--bisect", action="store_true", help="on a mismatch, name the first pass that caused it"
    )
    check.add_argument(
        "--onnx", metavar="MODEL.onnx", help="compare onnxruntime on this model with the pair"
    )
    check.add_argument(
        "--per-blob", action="store_true", help="with --onnx: compare every intermediate blob"
    )
    check.set_defaults(handler=_cmd_verify)

    execute = commands.add_parser("exec", help="run a model on feeds from an .npz file")
    execute.add_argument("input", metavar="IN", help="model folder or predict_net file")
    execute.add_argument("--feeds", required=True, metavar="FEEDS.npz")
    execute.add_argument("-o", "--output", required=True, metavar="OUT.npz")
    execute.add_argument("--init", metavar="INIT", help="init_net file for a predict_net file")
    execute.add_argument("--seed", type=int, default=0, help="seed of random fill ops")
    execute.set_defaults(handler=_cmd_exec)

    listing = commands.add_parser("list-passes", help="list the registered passes")
    listing.set_defaults(handler=_cmd_list_passes)
    _add_onnx_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphtools`` console script; returns the exit code."""
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        with signals_as_exceptions():
            return int(options.handler(options))
    except GraphToolsError as exc:
        if options.traceback:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Terminated as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())

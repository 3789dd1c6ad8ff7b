"""The ``graphtools`` command line: show, ssa, run, list-passes.

Bad input exits with code 2 and one line ``error: ...`` (``--traceback`` shows the chain);
success exits 0. ``run`` never overwrites its input unless ``--in-place`` is given, and every
file it writes appears atomically.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from graphtools.errors import GraphToolsError
from graphtools.ir import Model, Net
from graphtools.pass_infra import DEFAULT_PIPELINE, PassManager, PassRecord, available_passes
from graphtools.printer import print_model, print_net, print_ssa_table
from graphtools.serde import load_model, load_model_dir, load_net, save_model, save_net


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
            print(print_net(Net.from_netdef(load_net(path, allow_empty=True)), Path(path).name))
    return 0


def _cmd_ssa(options: argparse.Namespace) -> int:
    source = Path(options.path)
    net = _load(options.path).predict_net if source.is_dir() else None
    if net is None:
        net = Net.from_netdef(load_net(source, allow_empty=True))
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
    suffix = ".pbtxt" if (model.text if options.text is None else options.text) else ".pb"
    planned = {out_dir / f"predict_net{suffix}", out_dir / f"init_net{suffix}"}
    clash = sorted(str(p) for p in inputs & planned)
    if clash:
        raise UsageError(f"refusing to overwrite the input {clash[0]}; pass --in-place to do that")
    return out_dir


def _format_record(record: PassRecord) -> str:
    """``round 1 fuse-copy-ops: 15 -> 13 ops, modified, 0.001s {stats}``."""
    state = "modified" if record.modified else "unchanged"
    stats = f" {record.stats}" if record.stats else ""
    return (
        f"round {record.round} {record.name}: {record.ops_before} -> {record.ops_after} ops, "
        f"{state}, {record.seconds:.3f}s{stats}"
    )


def _source_path(model: Model) -> Path:
    if model.predict_path is None:
        raise UsageError("--in-place needs a model loaded from a file")
    return model.predict_path


def _cmd_run(options: argparse.Namespace) -> int:
    model = _load(options.input, options.init)
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    out_dir = _output_plan(model, options)
    records = manager(model)
    for record in records:
        print(_format_record(record))
    if out_dir is None:
        text = model.text if options.text is None else options.text
        written = [save_net(model.predict_net, _source_path(model), text=text)]
        if model.init_net is not None and model.init_path is not None:
            written.append(save_net(model.init_net, model.init_path, text=text))
    else:
        written = save_model(model, out_dir, text=options.text)
    for path in written:
        print(f"wrote {path}")
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
    fmt = run.add_mutually_exclusive_group()
    fmt.add_argument("--text", dest="text", action="store_const", const=True, default=None)
    fmt.add_argument("--binary", dest="text", action="store_const", const=False)
    run.set_defaults(handler=_cmd_run)

    listing = commands.add_parser("list-passes", help="list the registered passes")
    listing.set_defaults(handler=_cmd_list_passes)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphtools`` console script; returns the exit code."""
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        return int(options.handler(options))
    except GraphToolsError as exc:
        if options.traceback:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

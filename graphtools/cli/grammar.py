"""The command line's grammar: every command's options and help, and which module runs it.

Building the parser imports no command's machinery (models, passes, numpy, onnx, the
executor): ``graphtools --version`` and ``--help`` answer from here alone, and a command
imports only the module that runs it. Each command's parser sets ``handler_module``, the
module of ``graphtools.cli`` whose ``HANDLERS`` maps the command's name to its function;
``graphtools.cli.main`` imports that one module. A new command is a ``_register_*`` function
here (listed in ``_REGISTER`` with the names it adds) and its handler in its module's ``HANDLERS``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from graphtools._core import DIALECTS

__all__ = [
    "DEFAULT_STEPS",
    "add_export_options",
    "add_input_options",
    "add_json",
    "add_model_options",
    "add_pipeline_options",
    "add_verify_options",
    "attach_ops_values",
    "build_parser",
    "command_parser",
    "shapes_option",
]

DEFAULT_STEPS = 10
"""``--steps``' default: ``graphtools.pass_infra.DEFAULT_STEPS``, which a test checks it is
(importing the pass infrastructure here would load every pass)."""

_VERIFY_DESCRIPTION = """\
Run a pipeline on a copy of a model and compare the outputs: a Caffe2 pair runs on the
reference executor, an ONNX model on onnxruntime.

The original model runs once on made-up data: --shapes (or shapes.txt) and fed inputs win;
other input shapes are guessed from how the net reads them and said so; parameters a
predict_net-only model lacks are made up, seeded and reported; an init_net op that cannot run
here (a Load from a missing database) is left out and its blobs made up, said so. The
pipeline's result runs on the same data; every output is compared with its own tolerance
(--rtol 1e-3,prob:1e-2): max/mean absolute and relative error, mismatches, and a histogram of
the errors when they differ. --feeds runs both on your own input arrays (real token ids, an
image) instead. --save-outputs keeps the data and the outputs in an .npz file; --load-outputs
compares against such a file instead of running the original.

Exit codes: 0 outputs equal, 1 outputs differ, 2 bad input or error. Several models (several
paths, a folder of models) run one process each, -j at a time."""


_NEGATIVE_SLICE = re.compile(r"-\d+(:-?\d*)?")
"""A slice value beginning with a minus: ``-2:``, ``-5:-1``, ``-3``."""
_SLICE = re.compile(r"all|-?\d*(:-?\d*)?")
"""Anything ``--ops`` could mean as its value (``parse_slice`` says which are valid)."""


def attach_ops_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of each ``--ops`` made unambiguous for argparse.

    argparse takes a separate value beginning with ``-`` and a digit for an option unless it
    is a plain number, so ``show --ops -2:`` (the last two ops) would be refused as an
    unknown argument: it is written ``--ops=-2:``. And ``show --ops model.onnx`` would take
    the model for the range (``--ops`` has an optional value) and then ask for a path: a
    value that cannot be a range and names a file or folder stays the path it is, after
    ``--ops=all`` (any other is the range's to refuse).
    """
    attached: list[str] = []
    waiting = False
    for arg in argv:
        if waiting and _NEGATIVE_SLICE.fullmatch(arg):
            attached[-1] = f"--ops={arg}"
        elif waiting and not _SLICE.fullmatch(arg) and os.path.exists(arg):
            attached[-1] = "--ops=all"
            attached.append(arg)
        else:
            attached.append(arg)
        waiting = arg == "--ops"
    return attached


def _at_least(least: int, noun: str, too_small: str) -> Callable[[str], int]:
    """An argparse type: a whole number of ``least`` or more, refused in the option's words."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {noun}") from None
        if number < least:
            raise argparse.ArgumentTypeError(f"{number}: {too_small}")
        return number

    return parse


_seed = _at_least(0, "a whole number", "a seed is 0 or more")
"""``--seed N``: a random generator's seed (numpy refuses a negative one)."""
_jobs = _at_least(1, "a number of processes", "at least one process runs the models")
"""``-j N``: how many models run at once."""


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("graphtools-caffe2")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: prints ``graphtools VERSION`` and exits. The version is looked up only
    then (``importlib.metadata`` scans the installed packages: a cost every other command
    would pay for nothing)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help")
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"graphtools {_version()}", file=sys.stdout)
        parser.exit()


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Options accepted before or after the command; a subparser leaves the value alone
    unless the option is given after the command."""
    keep: Any = argparse.SUPPRESS
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=False if top else keep,
        help="on an error, show the full chain of exceptions",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if top else keep,
        help="say more: rounds that changed nothing, every note (repeatable)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0 if top else keep,
        help="say less: verdicts, warnings and errors only",
    )


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Help that keeps the description's line breaks and is not squeezed narrow."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=100)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests).

    Given the command line, only the parser of the command it names is built (the whole
    grammar for the top-level help and for a word it lacks, none for ``--version``): a short
    command starts faster (``benchmarks/bench_startup.py``); what it parses is the same.
    """
    parser = argparse.ArgumentParser(
        prog="graphtools",
        description="Read, analyse, rewrite and verify exported Caffe2 models "
        "(init_net + predict_net pairs) and ONNX models.",
        epilog="Exit codes: 0 ok, 1 verify/diff found a difference, 2 bad input or error. "
        "Run 'graphtools COMMAND --help' for a command's options.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    _global_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, top=False)
    named = None if argv is None else _named_command(argv)
    for names, register in _REGISTER:
        if named is None or named in names:
            register(commands, [common], _Formatter)
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is no option) when the grammar has it,
    ``""`` when it names none (``--version``, or the error that a command is missing); ``None``
    for a word the grammar lacks (the error lists the commands) and for the top-level help."""
    for word in argv:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if any(word in names for names, _ in _REGISTER) else None
    return ""


# -- options several commands share -----------------------------------------------------------


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--init`` and ``--no-init``, for commands that take a model."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--init",
        metavar="INIT",
        help="init_net file for a predict_net file (default: the init_net beside it, if any)",
    )
    group.add_argument(
        "--no-init",
        action="store_true",
        help="load a predict_net file alone, even when an init_net lies beside it",
    )


def add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    """``-p``, ``--steps``, ``--time-passes`` and ``--print-after-each``."""
    parser.add_argument(
        "-p",
        "--pipeline",
        default="default",
        metavar="SPEC",
        help="passes to run, e.g. 'remove-dead-ends,fuse-copy-ops'; 'default' is the default "
        "pipeline, '' none (see list-passes) (default: %(default)s)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        metavar="N",
        help="rounds of the pipeline at most while it still changes the model "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--time-passes",
        action="store_true",
        help="print the time each pass took, summed over rounds",
    )
    parser.add_argument(
        "--print-after-each",
        action="store_true",
        help="print the canonical dump of the model after each pass that changed it",
    )


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``command`` (``parser`` itself when it has no such command)."""
    for action in parser._actions:  # argparse keeps its subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return parser


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="write the result as JSON on stdout")


def add_export_options(parser: argparse.ArgumentParser, *, pairs_only: bool = False) -> None:
    """``--opset``, ``--dynamic-batch``, ``--external-data`` and ``--test-mode``;
    ``pairs_only``: the command takes Caffe2 pairs alone (``export-onnx``)."""
    opset_help = (
        "opset of the ONNX model (default 17)"
        if pairs_only
        else "opset of the ONNX output: an ONNX model keeps its own unless given (onnx's "
        "version converter), a Caffe2 pair is exported at 17 unless given"
    )
    parser.add_argument("--opset", type=int, default=None, help=opset_help)
    parser.add_argument(
        "--dynamic-batch",
        action="store_true",
        help="make the batch of the ONNX output symbolic (N), or name the node that pins it",
    )
    parser.add_argument(
        "--external-data",
        action="store_true",
        help="write ONNX weights of 1 KB or more to MODEL.onnx.data (smaller ones inline)",
    )
    parser.add_argument(
        "--test-mode",
        action="store_true",
        help="export a training net's inference form: is_test=1 on the ops that have it "
        "(Dropout, SpatialBN), which are refused in training mode otherwise",
    )


def add_verify_options(parser: argparse.ArgumentParser) -> None:
    """``--onnx``, ``--per-blob`` and ``--test-mode`` for ``verify``."""
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
    parser.add_argument(
        "--test-mode",
        action="store_true",
        help="with --onnx: run the pair's inference form (is_test=1), as export-onnx "
        "--test-mode exported it",
    )


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """``--outputs``, ``--random-params`` and ``--seed`` of ``export-onnx`` (``verify`` has
    its own)."""
    parser.add_argument(
        "--outputs",
        action="append",
        metavar="A,B",
        help="outputs of the ONNX model (default: the declared external outputs, else the "
        "blobs the net writes and never reads)",
    )
    parser.add_argument(
        "--random-params",
        action="store_true",
        default=False,
        help="make up the parameters nothing provides, as verify does (to try an export "
        "before the weights are at hand)",
    )
    parser.add_argument(
        "--seed", type=_seed, default=0, help="seed of made-up data (default: %(default)s)"
    )


def shapes_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--shapes", action="append", metavar="NAME=1x3x224x224", help=help_text)


# -- commands ----------------------------------------------------------------------------------


def _register_inspect(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``show``, ``ssa`` and ``list-passes``."""
    show = commands.add_parser(
        "show",
        parents=parents,
        formatter_class=formatter,
        help="summarise models; dump their ops or parameters",
        description="A summary of each model: op counts and types, inputs and outputs with "
        "their inferred types, parameters and their size, devices, nested nets.\n"
        "--ops, --params and --full dump instead.",
    )
    show.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="model folders, predict_net/init_net files or ONNX models",
    )
    add_model_options(show)
    show.add_argument(
        "--ops",
        nargs="?",
        const="all",
        metavar="A:B",
        help="list the ops of the predict_net or ONNX graph (all, or ops A to B-1), long "
        "argument values cut",
    )
    show.add_argument(
        "--params",
        action="store_true",
        help="list the parameters (the init_net's, the ONNX initializers)",
    )
    show.add_argument(
        "--full",
        action="store_true",
        help="the whole canonical dump, nothing cut (with --ops: those ops, values not cut)",
    )
    show.add_argument(
        "--shapes",
        action="append",
        metavar="NAME=1x3x224x224",
        help="input shapes for the inferred types, comma-separated or repeated "
        "(default: shapes.txt beside the model, else guessed)",
    )
    add_json(show)
    show.set_defaults(handler_module="inspect")

    ssa = commands.add_parser(
        "ssa",
        parents=parents,
        formatter_class=formatter,
        help="table of the versioned blobs of a predict_net",
        description="Every versioned blob name@version: the op writing it and the ops reading it.",
    )
    ssa.add_argument("path", metavar="PATH", help="model folder or predict_net file")
    add_model_options(ssa)
    add_json(ssa)
    ssa.set_defaults(handler_module="inspect")

    listing = commands.add_parser(
        "list-passes",
        parents=parents,
        formatter_class=formatter,
        help="the passes, their options and the named pipelines",
        description="Every registered pass (built in and plugins) with the models it takes "
        "and its options, and what the pipeline names (default, optimize) run on each kind of "
        "model; 'list-passes NAME' shows one pass's documentation.",
    )
    listing.add_argument(
        "name", nargs="?", metavar="NAME", help="a pass to document, or a pipeline name"
    )
    listing.add_argument(
        "--dialect",
        choices=DIALECTS,
        help="only the passes that take models of this dialect, and its pipelines",
    )
    add_json(listing)
    listing.set_defaults(handler_module="list_passes")


def _register_pipeline(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``run`` and ``exec``."""
    run = commands.add_parser(
        "run",
        parents=parents,
        formatter_class=formatter,
        help="run a pass pipeline over models and write them",
        description="Run a pipeline over a model (a folder, or a predict_net file with the "
        "init_net beside it) and write the result to -o OUTDIR.\n"
        "Several models (several paths, or a folder of models) run one process each, -j at "
        "a time, and are written to OUTDIR/NAME.",
    )
    run.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="model folders, predict_net files, ONNX models, or folders of them",
    )
    add_pipeline_options(run)
    run.add_argument(
        "-o", "--output", metavar="OUTDIR", help="output folder (OUT.onnx for an ONNX model)"
    )
    add_model_options(run)
    run.add_argument(
        "--in-place", action="store_true", help="overwrite the input files instead of -o"
    )
    run.add_argument(
        "--device",
        action="append",
        metavar="NAME=cpu|gpu",
        help="device of a predict_net input (repeatable): runs infer-devices after the pipeline",
    )
    run.add_argument(
        "--outputs",
        action="append",
        metavar="A,B",
        help="declare these blobs the predict_net's external outputs (written to the result)",
    )
    run.add_argument(
        "--diff", action="store_true", help="print what the pipeline changed (graphtools diff)"
    )
    run.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="models run at once in a batch (default: %(default)s)",
    )
    run.add_argument("--json", action="store_true", help="write the result as JSON on stdout")
    shapes_option(
        run,
        "input shapes of a Caffe2 pair, for its export (-o X.onnx) and the lengths "
        "lower-recurrent-networks unrolls for; comma-separated or repeated (default: "
        "shapes.txt beside the model; an ONNX input is typed already)",
    )
    add_export_options(run)
    add_format_options(run)
    run.set_defaults(handler_module="pipeline")

    execute = commands.add_parser(
        "exec",
        parents=parents,
        formatter_class=formatter,
        help="run a model on named arrays from an .npz file",
        description="Run a model (a Caffe2 pair on the numpy reference executor, an ONNX model "
        "on onnxruntime) on the arrays of "
        "FEEDS.npz (numpy.savez(path, data=x), or a verify --save-outputs file) and write its "
        "outputs to OUT.npz.",
    )
    execute.add_argument(
        "input", metavar="IN", help="model folder, predict_net file or ONNX model (onnxruntime)"
    )
    execute.add_argument("--feeds", required=True, metavar="FEEDS.npz", help="input arrays by name")
    execute.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="output file")
    add_model_options(execute)
    execute.add_argument(
        "--outputs",
        action="append",
        metavar="A,B",
        help="blobs to write (default: the declared external outputs)",
    )
    execute.add_argument(
        "--seed", type=_seed, default=0, help="seed of random fill ops (default: %(default)s)"
    )
    execute.set_defaults(handler_module="pipeline")


def _register_check(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``verify``."""
    check = commands.add_parser(
        "verify",
        parents=parents,
        formatter_class=formatter,
        help="prove numerically that a pipeline keeps a model's outputs (exit 1 if not)",
        description=_VERIFY_DESCRIPTION,
    )
    check.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="model folders, predict_net files, ONNX models (run on onnxruntime), or folders "
        "of them",
    )
    add_pipeline_options(check)
    add_model_options(check)
    check.add_argument(
        "--shapes",
        action="append",
        metavar="NAME=1x3x224x224",
        help="input shapes, comma-separated or repeated; they win over init_net placeholders "
        "(default: shapes.txt beside the model, else guessed and said so)",
    )
    check.add_argument(
        "--outputs",
        action="append",
        metavar="A,B",
        help="outputs to compare (default: the declared external outputs, else the blobs the "
        "net writes and never reads)",
    )
    check.add_argument(
        "--seed", type=_seed, default=0, help="seed of all made-up data (default: %(default)s)"
    )
    check.add_argument(
        "--rtol",
        action="append",
        metavar="[NAME:]X",
        help="relative tolerance, and NAME:X for one output; comma-separated or repeated "
        "(default: 1e-05)",
    )
    check.add_argument(
        "--atol",
        action="append",
        metavar="[NAME:]X",
        help="absolute tolerance, and NAME:X for one output; comma-separated or repeated "
        "(default: 1e-06)",
    )
    params = check.add_mutually_exclusive_group()
    params.add_argument(
        "--random-params",
        dest="random_params",
        action="store_const",
        const=True,
        default=None,
        help="make up every parameter nothing provides, and those of the init_net that do "
        "not fit the net (default: only for a predict_net without init_net, and for init_net "
        "ops that cannot run here)",
    )
    params.add_argument(
        "--no-random-params",
        dest="random_params",
        action="store_const",
        const=False,
        help="never make up parameters: a missing one is an error",
    )
    check.add_argument(
        "--save-outputs", metavar="FILE.npz", help="save the data fed and the original outputs"
    )
    recorded = check.add_mutually_exclusive_group()
    recorded.add_argument(
        "--load-outputs",
        metavar="FILE.npz",
        help="compare against a --save-outputs file instead of running the original",
    )
    recorded.add_argument(
        "--feeds",
        metavar="FEEDS.npz",
        help="run both models on these input arrays by name (numpy.savez(path, data=x), or a "
        "--save-outputs file); inputs it lacks are made up",
    )
    check.add_argument(
        "--bisect", action="store_true", help="on a mismatch, name the first pass that caused it"
    )
    check.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="models verified at once in a batch (default: %(default)s)",
    )
    add_verify_options(check)
    check.add_argument("--json", action="store_true", help="write the report as JSON on stdout")
    check.set_defaults(handler_module="check")


def _register_draw(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``draw``."""
    parser = commands.add_parser(
        "draw",
        parents=parents,
        formatter_class=formatter,
        help="draw a predict_net (DOT, or SVG/PNG with Graphviz)",
        description="Ops are boxes (index and type) coloured by device, blobs are ellipses "
        "name@version, external inputs and outputs bold, nested nets clusters.\n"
        "--diff OTHER colours what changes from IN to OTHER: removed red, added green, "
        "changed or renamed orange.\n"
        "SVG and PNG need Graphviz's 'dot' program (apt-get install graphviz).",
    )
    parser.add_argument("input", metavar="IN", help="model folder, predict_net file or ONNX model")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="net.dot (or .gv), net.svg or net.png; a folder (gets NAME.dot); - for DOT on stdout",
    )
    add_model_options(parser)
    parser.add_argument(
        "--ops", metavar="A:B", help="draw only ops A to B-1 (a slice of a big net)"
    )
    parser.add_argument("--diff", metavar="OTHER", help="colour what changes from IN to this model")
    parser.add_argument("--diff-init", metavar="INIT", help="init_net file for OTHER")
    parser.set_defaults(handler_module="draw")


def _register_diff(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``diff``."""
    parser = commands.add_parser(
        "diff",
        parents=parents,
        formatter_class=formatter,
        help="structural diff of two models (exit 1 when they differ)",
        description="Ops removed, added or changed (rewired inputs, renamed outputs, "
        "arguments, devices, engines), matched by what they compute (SSA identity: the same "
        "type reading the same values), not by position; params added or removed.\n"
        "Exit 0 when the models are the same, 1 when they differ.",
    )
    parser.add_argument(
        "first", metavar="A", help="the first model (folder, predict_net file or ONNX model)"
    )
    parser.add_argument("second", metavar="B", help="the second model")
    add_model_options(parser)
    parser.add_argument(
        "--other-init", metavar="INIT", help="init_net file for B when B is a predict_net file"
    )
    parser.add_argument("--json", action="store_true", help="write the diff as JSON on stdout")
    parser.set_defaults(handler_module="diff")


def add_format_options(parser: argparse.ArgumentParser) -> None:
    """``--text``/``--binary``: the format of the nets written (default: each file's own, as
    it was loaded)."""
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument(
        "--text",
        dest="text",
        action="store_const",
        const=True,
        default=None,
        help="write text-format nets (default: the input's format)",
    )
    fmt.add_argument(
        "--binary",
        dest="text",
        action="store_const",
        const=False,
        help="write binary nets (default: the input's format)",
    )


def _register_extract(
    commands: Any, parents: list[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """Add ``extract``."""
    parser = commands.add_parser(
        "extract",
        parents=parents,
        formatter_class=formatter,
        help="write the sub-net computing --outputs from --inputs",
        description="Keep exactly the ops needed to compute the outputs from the inputs "
        "(each at the value the last op writing it gives), with the parameters they read; "
        "outputs the inputs do not determine are refused by name.\n"
        "A pair is written into the folder -o OUTDIR with a shapes.txt of the new inputs; "
        "an ONNX model (by onnx.utils.Extractor) to -o OUT.onnx, or into the folder -o OUTDIR.",
    )
    parser.add_argument("input", metavar="MODEL", help="model folder, predict_net file or .onnx")
    parser.add_argument(
        "--inputs", action="append", required=True, metavar="A,B", help="blobs to start from"
    )
    parser.add_argument(
        "--outputs", action="append", required=True, metavar="Y", help="blobs to compute"
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="output folder (a pair) or .onnx"
    )
    add_model_options(parser)
    parser.add_argument(
        "--shapes",
        action="append",
        metavar="NAME=1x3x224x224",
        help="shapes of the source's inputs, to type the new inputs (default: shapes.txt "
        "beside the model, else guessed; a shape resting on a guess is not written)",
    )
    add_format_options(parser)
    parser.add_argument(
        "--external-data", action="store_true", help="write ONNX weights to OUT.onnx.data"
    )
    parser.set_defaults(handler_module="extract")


def _register_onnx_commands(
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
    importing.set_defaults(handler_module="onnx_commands")

    exporting = commands.add_parser(
        "export-onnx",
        parents=parents,
        formatter_class=formatter,
        help="convert an init_net/predict_net pair into an ONNX model",
        description="Export a pair to ONNX (see docs/onnx.md). Input shapes come from "
        "--shapes, else shapes.txt beside the model, else they are guessed from how the net "
        "reads each input, and said so; an init_net placeholder of a data input becomes a "
        "graph input. A pair without its weights is refused unless --random-params.",
    )
    exporting.add_argument("input", metavar="IN", help="model folder or predict_net file")
    exporting.add_argument(
        "-o", "--output", required=True, metavar="MODEL.onnx", help="output file"
    )
    add_model_options(exporting)
    shapes_option(
        exporting,
        "input shapes, comma-separated or repeated, {N} for a dim of any size (a symbolic "
        "dim 0 stays free, by that name; default: shapes.txt beside the model, else guessed "
        "and said so)",
    )
    add_input_options(exporting)
    add_export_options(exporting, pairs_only=True)
    exporting.set_defaults(handler_module="onnx_commands")


_REGISTER = (
    (("show", "ssa", "list-passes"), _register_inspect),
    (("run", "exec"), _register_pipeline),
    (("verify",), _register_check),
    (("draw",), _register_draw),
    (("diff",), _register_diff),
    (("extract",), _register_extract),
    (("import-onnx", "export-onnx"), _register_onnx_commands),
)
"""The commands each function adds, in help order."""

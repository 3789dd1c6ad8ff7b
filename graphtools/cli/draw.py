"""``draw IN -o net.svg|png|dot``: a picture of a model's predict_net (``graphtools.dot``).

DOT is written directly; SVG and PNG are rendered by Graphviz's ``dot`` program (the Debian
and Ubuntu package ``graphviz``; Homebrew ``graphviz`` on macOS). Without it, ``.dot`` output
still works and the error says what to install.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path
from typing import Any

from graphtools.cli.common import Output, UsageError, add_model_options, load_input
from graphtools.cli.inspect import parse_slice
from graphtools.dot import model_to_dot
from graphtools.serde.atomic import atomic_write_bytes

__all__ = ["FORMATS", "register", "render"]

FORMATS = ("dot", "svg", "png")
_INSTALL = (
    "install Graphviz (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install "
    "graphviz) or write DOT with -o FILE.dot"
)


def render(dot_text: str, fmt: str) -> bytes:
    """``dot_text`` rendered by Graphviz's ``dot`` program to ``fmt`` (svg, png).

    Raises:
        UsageError: ``dot`` is not installed, or it failed.
    """
    program = shutil.which("dot")
    if program is None:
        raise UsageError(f"writing .{fmt} needs Graphviz's 'dot' program, not found: {_INSTALL}")
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, check=False
        )
    except OSError as exc:
        raise UsageError(f"cannot run {program}: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"dot -T{fmt} failed: {message[0] if message else done.returncode}")
    return done.stdout


def _cmd_draw(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    target = Path(options.output)
    fmt = target.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise UsageError(f"-o {target}: the file name must end in .dot, .svg or .png")
    model = load_input(options.input, options.init, no_init=options.no_init, out=out)
    other = None
    if options.diff is not None:
        other = load_input(options.diff, options.diff_init, out=out)
    text = model_to_dot(model, ops=parse_slice(options.ops), diff_with=other)
    data = text.encode() if fmt == "dot" else render(text, fmt)
    out.line(f"wrote {atomic_write_bytes(target, data)}")
    return 0


def register(
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
    parser.add_argument("input", metavar="IN", help="model folder or predict_net file")
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="net.dot, net.svg or net.png"
    )
    add_model_options(parser)
    parser.add_argument(
        "--ops", metavar="A:B", help="draw only ops A to B-1 (a slice of a big net)"
    )
    parser.add_argument("--diff", metavar="OTHER", help="colour what changes from IN to this model")
    parser.add_argument("--diff-init", metavar="INIT", help="init_net file for OTHER")
    parser.set_defaults(handler=_cmd_draw)

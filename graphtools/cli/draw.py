"""``draw IN -o net.svg|png|dot``: a picture of a model's predict_net (``graphtools.dot``).

DOT is written directly; SVG and PNG are rendered by Graphviz's ``dot`` program (the Debian
and Ubuntu package ``graphviz``; Homebrew ``graphviz`` on macOS). Without it, ``.dot`` output
still works and the error says what to install.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from graphtools.cli.common import Output, UsageError, load_input, output_file
from graphtools.cli.inspect import ops_of
from graphtools.dot import model_to_dot
from graphtools.serde.atomic import atomic_write_bytes

__all__ = ["FORMATS", "HANDLERS", "render"]

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


def _target(output: str, source: str) -> tuple[Path | None, str]:
    """Where ``-o`` says to write and in which format: ``-`` is DOT on stdout, a folder gets
    ``<model name>.dot``, ``.gv`` is DOT too."""
    if output == "-":
        return None, "dot"
    target = Path(output)
    if target.is_dir() or output.endswith(("/", os.sep)):
        stem = Path(source.rstrip("/" + os.sep)).name
        target = target / f"{stem.removesuffix('.onnx').removesuffix('.ONNX')}.dot"
    fmt = target.suffix.lstrip(".").lower()
    fmt = "dot" if fmt == "gv" else fmt
    if fmt not in FORMATS:
        raise UsageError(
            f"-o {target}: the file name must end in .dot (or .gv), .svg or .png; -o - writes "
            "DOT on stdout"
        )
    return target, fmt


def _cmd_draw(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    target, fmt = _target(options.output, options.input)
    if str(target) != "-":
        output_file(str(target))
    model = load_input(options.input, options.init, no_init=options.no_init, out=out)
    other = None
    if options.diff is not None:
        other = load_input(options.diff, options.diff_init, out=out)
    chosen = ops_of(options.ops, len(model.predict_net))
    text = model_to_dot(model, ops=chosen, diff_with=other)
    if target is None:
        sys.stdout.write(text)
        return 0
    data = text.encode() if fmt == "dot" else render(text, fmt)
    out.line(f"wrote {atomic_write_bytes(target, data)}")
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"draw": _cmd_draw}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

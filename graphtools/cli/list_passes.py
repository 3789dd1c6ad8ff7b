"""``graphtools list-passes``: every registered pass (built in and plugins) with the models it
takes and its options, and the named pipelines by dialect; or one pass's documentation. Its
own module: listing the passes imports them all, which ``show`` and ``ssa``
(``graphtools.cli.inspect``) have no use for."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from graphtools._core import DIALECT_NAMES, DIALECTS
from graphtools.cli.common import Output, did_you_mean, new_table
from graphtools.errors import UsageError
from graphtools.pass_infra import DEFAULT_PIPELINE, NAMED_PIPELINES, Pass, available_passes
from graphtools.pass_infra.describe import describe_pass

__all__ = ["HANDLERS"]


def _cmd_list_passes(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    passes = available_passes()
    if options.name in NAMED_PIPELINES:
        return _one_pipeline(out, options.name)
    if options.name is not None:
        cls = passes.get(options.name)
        if cls is None:
            raise UsageError(
                f"no pass named {options.name!r}"
                f"{did_you_mean(options.name, [*passes, *NAMED_PIPELINES])}; "
                f"'graphtools list-passes' lists them"
            )
        return _one_pass(out, cls)
    dialects = DIALECTS if options.dialect is None else (options.dialect,)
    chosen = [cls for cls in passes.values() if set(cls.dialects) & set(dialects)]
    pipelines = {
        name: {dialect: spec for dialect, spec in by_dialect.items() if dialect in dialects}
        for name, by_dialect in NAMED_PIPELINES.items()
    }
    if options.json:
        out.json(
            {
                "passes": [_pass_data(cls) for cls in chosen],
                "pipelines": {name: specs for name, specs in pipelines.items() if specs},
                "default": DEFAULT_PIPELINE,
            }
        )
        return 0
    table = new_table("pass", "models", "what it does", "options (type, default)")
    for cls in chosen:
        info = describe_pass(cls)
        listed = "; ".join(f"{o.name}: {o.type} = {o.default}" for o in info.options)
        table.add_row(info.name, info.models, info.summary, listed or "-")
    out.table(table, level=0)
    out.line("", level=0)
    for name, specs in pipelines.items():
        _pipeline_lines(out, name, specs)
    out.line("'graphtools list-passes NAME' shows a pass's whole documentation", level=1)
    return 0


def _pass_data(cls: type[Pass]) -> dict[str, Any]:
    info = describe_pass(cls)
    return {
        "name": info.name,
        "summary": info.summary,
        "doc": info.body,
        "dialects": list(cls.dialects),
        "changes_dialect": cls.changes_dialect,
        "options": [vars(o) for o in info.options],
        "class": info.class_path,
    }


def _one_pass(out: Output, cls: type[Pass]) -> int:
    if out.json_mode:
        out.json(_pass_data(cls))
        return 0
    info = describe_pass(cls)
    out.line(f"{info.name}: {info.summary}", level=0)
    out.line(f"models: {info.models}", level=0)
    if info.body:
        out.line("", level=0)
        out.line(info.body, level=0)
    out.line("", level=0)
    if info.options:
        table = new_table("option", "type", "default", "what it does")
        for option in info.options:
            table.add_row(option.name, option.type, option.default, option.help)
        out.table(table, level=0)
    else:
        out.line("options: none", level=0)
    if info.module_doc:
        out.line("\nHow it works:\n", level=0)
        out.line(info.module_doc, level=0)
    out.line(f"\nclass {info.class_path}", level=1)
    return 0


def _pipeline_lines(out: Output, name: str, specs: dict[str, str]) -> None:
    """``default on ONNX models = ...``: what a pipeline name runs, a line per dialect."""
    for dialect, spec in specs.items():
        out.line(f"{name} on {DIALECT_NAMES[dialect]} models = {spec}", level=0)


def _one_pipeline(out: Output, name: str) -> int:
    """``list-passes default``: what a pipeline name runs, on each kind of model."""
    specs = NAMED_PIPELINES[name]
    if out.json_mode:
        out.json({"pipeline": name, "passes": specs})
        return 0
    _pipeline_lines(out, name, specs)
    out.line("'graphtools list-passes PASS' shows each pass's documentation", level=1)
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"list-passes": _cmd_list_passes}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

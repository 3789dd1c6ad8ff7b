"""What a pass is, read off its class: summary, documentation and options.

``describe_pass(cls)`` gives the pass's summary line, the rest of its docstring and its
module's docstring as plain text (double-backtick code spans become plain text), and one
``OptionInfo`` per dataclass field with its type, default and the help its docstring's
``Options:`` section gives. ``list-passes`` prints this, and ``pass_markdown`` renders the
same as the page ``docs/passes/<name>.md`` (a test keeps every page equal to it).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from typing import Any

from graphtools._core import CAFFE2, DIALECT_NAMES, ONNX
from graphtools.pass_infra.base import Pass
from graphtools.pass_infra.spec import pass_spec

__all__ = [
    "OptionInfo",
    "PassDescription",
    "describe_pass",
    "pass_markdown",
    "plain_text",
]

_CODE = re.compile(r"``(.+?)``")
_OPTION = re.compile(r"^(\w+):\s*(.*)$")
_SECTION = re.compile(r"^(Options|Stats|Raises|Example|Examples):")


def plain_text(text: str) -> str:
    """Docstring text without reStructuredText's double backticks."""
    return _CODE.sub(r"\1", text)


@dataclass(frozen=True)
class OptionInfo:
    """One option of a pass: a dataclass field."""

    name: str
    type: str
    default: str
    help: str


@dataclass(frozen=True)
class PassDescription:
    """A pass as ``list-passes`` and its doc page show it (``module_doc``: its module's
    docstring, which usually explains the rules with an example; ``models``: the dialects of
    the models it takes, as the listing writes them)."""

    name: str
    summary: str
    body: str
    options: tuple[OptionInfo, ...]
    class_path: str
    module_doc: str = ""
    models: str = ""


def _type_name(annotation: Any) -> str:
    if annotation is bool:
        return "bool (true/false)"
    if annotation in (int, float, str):
        return str(annotation.__name__)
    if typing.get_origin(annotation) is tuple and typing.get_args(annotation) == (str, ...):
        return "list of str (a;b;c)"
    return str(annotation)


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "(required)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ";".join(str(v) for v in value) or "(none)"
    if value == "":
        return "(empty)"
    return str(value)


def _sections(doc: str) -> tuple[str, str, dict[str, str]]:
    """Summary, body without the ``Options:`` section, and each option's help."""
    lines = inspect.cleandoc(doc).splitlines() if doc.strip() else [""]
    # The summary is the first paragraph, which may wrap over several lines (and ends at a
    # section a docstring begins without a blank line before it).
    first = next(
        (i for i, line in enumerate(lines) if not line.strip() or _SECTION.match(line.strip())),
        len(lines),
    )
    summary = " ".join(line.strip() for line in lines[:first])
    body: list[str] = []
    helps: dict[str, str] = {}
    current: str | None = None
    in_options = False
    for line in lines[first:]:
        if line.strip() == "Options:":
            in_options = True
            continue
        if in_options:
            if not line.strip():
                in_options = False
                current = None
                body.append(line)
                continue
            match = _OPTION.match(line.strip())
            if match and line.startswith("    ") and not line.startswith("     "):
                current = match.group(1)
                helps[current] = match.group(2)
            elif current is not None:
                helps[current] += " " + line.strip()
            continue
        body.append(line)
    return summary, "\n".join(body).strip(), helps


def _for_readers(text: str) -> str:
    """A docstring's text as the listing and the doc page show it: they show the module's
    docstring as "How it works", which is what "the module docstring" means to its author."""
    return plain_text(text).replace("the module docstring", '"How it works"')


def describe_pass(cls: type[Pass]) -> PassDescription:
    """The description of pass class ``cls`` (see the module docstring)."""
    summary, body, helps = _sections(cls.__doc__ or "")
    hints = typing.get_type_hints(cls)
    options = tuple(
        OptionInfo(
            field.name,
            _type_name(hints.get(field.name)),
            _default(field),
            _for_readers(helps.get(field.name, "")),
        )
        for field in dataclasses.fields(cls)
        if field.init
    )
    module = sys.modules.get(cls.__module__)
    module_doc = inspect.cleandoc(module.__doc__) if module is not None and module.__doc__ else ""
    return PassDescription(
        cls.name,
        _for_readers(summary),
        _for_readers(body),
        options,
        f"{cls.__module__}.{cls.__qualname__}",
        plain_text(module_doc),
        _models(cls),
    )


def _models(cls: type[Pass]) -> str:
    """The dialects of the models a pass takes, as people write them; a conversion says so
    (its result is a model of another dialect)."""
    names = ", ".join(DIALECT_NAMES.get(dialect, dialect) for dialect in cls.dialects)
    return f"{names} (converts)" if cls.changes_dialect else names


def use_commands(cls: type[Pass]) -> list[str]:
    """The commands a pass's page shows, each runnable once ``MODEL`` (``MODEL.onnx`` for an
    ONNX model, ``PAIR`` for a Caffe2 pair) and ``OUT`` are filled in: ``run`` writes a model
    of the dialect it read, so a conversion runs through the CLI command doing it, or inside
    a pipeline that converts back."""
    spec = cls.example or pass_spec(cls())
    if cls.changes_dialect and CAFFE2 in cls.dialects:
        return [
            f'graphtools run PAIR -p "{spec}" -o OUT.onnx',
            "graphtools export-onnx PAIR -o OUT.onnx",
        ]
    if cls.changes_dialect:
        round_trip = f"{spec},remove-reshape-for-fc,convert-to-onnx"  # Caffe2 passes between
        return [
            "graphtools import-onnx MODEL.onnx -o OUT",
            f'graphtools run MODEL.onnx -p "{round_trip}" -o OUT.onnx',
            f'graphtools verify MODEL.onnx -p "{round_trip}"',
        ]
    model = (
        "MODEL.onnx"
        if cls.dialects == (ONNX,)
        else "PAIR"
        if cls.dialects == (CAFFE2,)
        else "MODEL"
    )
    out = "OUT.onnx" if model == "MODEL.onnx" else "OUT"
    return [
        f'graphtools run {model} -p "{spec}" -o {out}',
        f'graphtools verify {model} -p "{spec}"',
    ]


def pass_markdown(cls: type[Pass]) -> str:
    """The doc page of a pass: its docstring, options table and pipeline spelling."""
    info = describe_pass(cls)
    lines = [f"# `{info.name}`", "", info.summary, "", f"Models: {info.models}.", ""]
    if info.body:
        lines += ["```text", info.body, "```", ""]
    lines += ["## Options", ""]
    if info.options:
        lines += ["| option | type | default | what it does |", "| --- | --- | --- | --- |"]
        for option in info.options:
            text = option.help.replace("|", "\\|")
            lines.append(f"| `{option.name}` | {option.type} | `{option.default}` | {text} |")
    else:
        lines.append("None.")
    if info.module_doc:
        lines += ["", "## How it works", "", "```text", info.module_doc, "```"]
    lines += ["", "## Use", "", "```sh", *use_commands(cls), "```", ""]
    lines += [
        f"Class: `{info.class_path}`. This page is generated from the class's docstring "
        "(`python tools/pass_docs.py`); a test keeps them equal.",
        "",
    ]
    return "\n".join(lines)

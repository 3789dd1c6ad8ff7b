"""Pipeline specs: one spelling everywhere (Python, CLI, goldens).

``remove-reshape-for-fc,fuse-copy-ops,remove-dead-ends{keep_side_effects=false}``: pass names
with options in braces, converted by the type of the pass's dataclass field. Two names stand
for pipelines of the model's dialect, expanded when the dialect is known: ``default``
(``DEFAULT_PIPELINES``) and ``optimize`` (``OPTIMIZE_PIPELINES``: ONNX models only).
``parse_pipeline`` builds the passes, ``pass_spec`` prints one back.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from typing import Any

from graphtools._core import CAFFE2, ONNX
from graphtools.errors import GraphToolsError, PassError, PipelineSpecError
from graphtools.ir import Model
from graphtools.pass_infra.base import Pass, PassResult

__all__ = [
    "DEFAULT_PIPELINE",
    "DEFAULT_PIPELINES",
    "NAMED_PIPELINES",
    "OPTIMIZE_PIPELINES",
    "DefaultPipeline",
    "OptimizePipeline",
    "expand_default",
    "parse_pipeline",
    "pass_spec",
]

DEFAULT_PIPELINES: dict[str, str] = {
    CAFFE2: "remove-identity-ops,remove-reshape-for-fc,fuse-copy-ops,remove-dead-ends",
    ONNX: "remove-identity-ops,remove-dead-ends,remove-unused-params",
}
"""What the pipeline name ``default`` expands to, by the dialect of the model."""
DEFAULT_PIPELINE = DEFAULT_PIPELINES[CAFFE2]
"""Caffe2's default pipeline (``DEFAULT_PIPELINES[CAFFE2]``)."""
OPTIMIZE_PIPELINES: dict[str, str] = {
    ONNX: (
        "fold-constants,inline-constant-if,fuse-batchnorm,fuse-affine,fuse-pad,fuse-matmul-add,"
        "fuse-layer-norm,merge-consecutive-ops,remove-noop-ops,remove-identity-ops,dedupe-initializers,"
        "merge-common-subexpressions,remove-dead-ends,remove-unused-params,in-branches"
    ),
}
"""What the pipeline name ``optimize`` expands to: the ONNX passes in the order that reaches
the smallest graph (a ``PassManager`` runs them to a fixpoint); no other dialect has one."""
NAMED_PIPELINES: dict[str, dict[str, str]] = {
    "default": DEFAULT_PIPELINES,
    "optimize": OPTIMIZE_PIPELINES,
}
"""The pipeline names a spec may use, and what each expands to by dialect."""


@dataclasses.dataclass(frozen=True)
class DefaultPipeline(Pass):
    """``default`` in a pipeline whose models' dialect is not known yet: a ``PassManager``
    puts the passes of ``DEFAULT_PIPELINES[model.dialect]`` in its place when it runs (a
    subclass names another of ``NAMED_PIPELINES``)."""

    name: typing.ClassVar[str] = "default"

    def call(self, model: Model) -> PassResult:
        """Never run: the manager expands it (a pass object run by hand refuses)."""
        raise PassError(
            self.name,
            [],
            f"the '{self.name}' pipeline runs through a PassManager, which picks the passes of "
            "the model's dialect",
        )


@dataclasses.dataclass(frozen=True)
class OptimizePipeline(DefaultPipeline):
    """``optimize`` in a pipeline whose models' dialect is not known yet (see
    ``DefaultPipeline``)."""

    name: typing.ClassVar[str] = "optimize"


_PLACEHOLDERS: dict[str, type[DefaultPipeline]] = {
    "default": DefaultPipeline,
    "optimize": OptimizePipeline,
}


def _named(name: str, dialect: str) -> str:
    """The spec ``name`` (one of ``NAMED_PIPELINES``) stands for on a ``dialect`` model."""
    spec = NAMED_PIPELINES[name].get(dialect)
    if spec is None:
        dialects = " and ".join(NAMED_PIPELINES[name])
        raise PipelineSpecError(
            f"the '{name}' pipeline is for {dialects} models; this is a {dialect} model "
            f"(its passes: 'default' = {DEFAULT_PIPELINES.get(dialect, 'none')})"
        )
    return spec


def expand_default(
    passes: typing.Sequence[Pass], dialect: str, known: dict[str, type[Pass]]
) -> list[Pass]:
    """``passes`` with each ``DefaultPipeline`` (``default``, ``optimize``) replaced by the
    passes that pipeline has for ``dialect``."""
    expanded: list[Pass] = []
    for item in passes:
        if isinstance(item, DefaultPipeline):
            expanded.extend(parse_pipeline(_named(item.name, dialect), known, dialect=dialect))
        else:
            expanded.append(item)
    return expanded


_SPECIAL = frozenset(',{}="\\')


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return _quote(";".join(value))
    if isinstance(value, float):
        return repr(value)
    return _quote(str(value))


def _quote(text: str) -> str:
    if text and not any(c in _SPECIAL or c.isspace() for c in text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def pass_spec(pass_: Pass) -> str:
    """The canonical spec of one configured pass: its name, then options that differ from
    their defaults (``remove-dead-ends{keep_side_effects=false}``)."""
    options = []
    for f in dataclasses.fields(pass_):
        if not f.init:
            continue
        value = getattr(pass_, f.name)
        if f.default is not dataclasses.MISSING and value == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
            continue
        if isinstance(value, tuple) and any(";" in str(item) for item in value):
            raise PipelineSpecError(
                f"option {f.name} of pass '{pass_.name}' holds {value!r}: items of a tuple "
                "option cannot contain ';' in a pipeline spec"
            )
        options.append(f"{f.name}={_format_value(value)}")
    return pass_.name + (f"{{{','.join(options)}}}" if options else "")


class _SpecReader:
    """Splits a pipeline spec into ``(name, {option: raw value})`` items.

    An unquoted value runs to the next option (``, name=``) or the end of the options: it may
    hold commas and balanced braces, so a pipeline is an option's value as it is written at
    the top level (``in-branches{pipeline=remove-dead-ends{keep_side_effects=false},
    fold-constants}``); a value needing anything else is double-quoted.
    """

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.pos = 0

    def error(self, what: str) -> PipelineSpecError:
        return PipelineSpecError(f"bad pipeline spec {self.spec!r} at column {self.pos}: {what}")

    def skip_space(self) -> None:
        while self.pos < len(self.spec) and self.spec[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.spec[self.pos] if self.pos < len(self.spec) else ""

    def word(self, what: str) -> str:
        self.skip_space()
        start = self.pos
        while self.pos < len(self.spec) and (
            self.spec[self.pos].isalnum() or self.spec[self.pos] in "-_."
        ):
            self.pos += 1
        if start == self.pos:
            raise self.error(f"expected {what}")
        return self.spec[start : self.pos]

    def value(self) -> str:
        self.skip_space()
        if self.peek() == '"':
            self.pos += 1
            chars: list[str] = []
            while self.pos < len(self.spec):
                char = self.spec[self.pos]
                self.pos += 1
                if char == '"':
                    return "".join(chars)
                if char == "\\" and self.pos < len(self.spec):
                    char = self.spec[self.pos]
                    self.pos += 1
                chars.append(char)
            raise self.error("unterminated quoted value")
        start, depth = self.pos, 0
        while self.pos < len(self.spec):
            char = self.spec[self.pos]
            if char == '"' or (char == "}" and not depth):
                break
            if char == "," and not depth and _OPTION_START.match(self.spec, self.pos + 1):
                break  # the next option; a comma before anything else is the value's
            depth += {"{": 1, "}": -1}.get(char, 0)
            self.pos += 1
        if depth:
            raise self.error("a '{' in an option's value is never closed")
        return self.spec[start : self.pos].strip()

    def items(self) -> list[tuple[str, dict[str, str]]]:
        items: list[tuple[str, dict[str, str]]] = []
        if not self.peek():
            return items
        while True:
            name = self.word("a pass name")
            options: dict[str, str] = {}
            if self.peek() == "{":
                self.pos += 1
                while self.peek() != "}":
                    key = self.word(f"an option name for pass '{name}'")
                    if self.peek() != "=":
                        raise self.error(f"expected '=' after option {key} of pass '{name}'")
                    self.pos += 1
                    if key in options:
                        raise self.error(f"option {key} of pass '{name}' given twice")
                    options[key] = self.value()
                    if self.peek() == ",":
                        self.pos += 1
                    elif self.peek() != "}":
                        raise self.error(f"expected ',' or '}}' in the options of pass '{name}'")
                self.pos += 1
            items.append((name, options))
            if not self.peek():
                return items
            if self.peek() != ",":
                raise self.error("expected ',' between passes")
            self.pos += 1


_OPTION_START = re.compile(r"\s*[\w.-]+\s*=")
"""What follows the comma that ends an unquoted option value: the next option's name and ``=``."""


def _convert(pass_name: str, option: str, annotation: Any, raw: str) -> Any:
    """Convert the text ``raw`` to the option's annotated type."""
    bad = f"option {option} of pass '{pass_name}'"
    if annotation is bool:
        lowered = raw.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise PipelineSpecError(f"{bad} expects true/false/1/0, got {raw!r}")
    if annotation is int or annotation is float:
        try:
            return annotation(raw)
        except ValueError:
            raise PipelineSpecError(f"{bad} expects {annotation.__name__}, got {raw!r}") from None
    if annotation is str:
        return raw
    if typing.get_origin(annotation) is tuple and typing.get_args(annotation) == (str, ...):
        return tuple(item.strip() for item in raw.split(";")) if raw.strip() else ()
    raise PipelineSpecError(f"{bad} has type {annotation!r}, which a pipeline spec cannot set")


def _build_pass(cls: type[Pass], raw_options: dict[str, str]) -> Pass:
    hints = typing.get_type_hints(cls)
    settable = {f.name for f in dataclasses.fields(cls) if f.init}
    values: dict[str, Any] = {}
    for key, raw in raw_options.items():
        if key not in settable:
            known = ", ".join(sorted(settable)) or "none"
            raise PipelineSpecError(
                f"pass '{cls.name}' has no option {key!r} (its options: {known})"
            )
        values[key] = _convert(cls.name, key, hints[key], raw)
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        example = ",".join(f"{name}=..." for name in missing)
        raise PipelineSpecError(
            f"pass '{cls.name}' needs a value for {', '.join(missing)}: write "
            f"{cls.name}{{{example}}} ('graphtools list-passes {cls.name}' describes its options)"
        )
    try:
        return cls(**values)
    except (TypeError, ValueError, GraphToolsError) as exc:
        raise PipelineSpecError(f"cannot configure pass '{cls.name}': {exc}") from exc


def parse_pipeline(
    spec: str, known: dict[str, type[Pass]], *, dialect: str | None = None
) -> list[Pass]:
    """The configured passes of ``spec``, looked up in ``known`` (name -> class); ``default``
    becomes ``dialect``'s default passes, or a ``DefaultPipeline`` when ``dialect`` is None."""
    return _parse_passes(spec, known, dialect, allow_default=True)


def _parse_passes(
    spec: str, known: dict[str, type[Pass]], dialect: str | None, *, allow_default: bool
) -> list[Pass]:
    passes: list[Pass] = []
    for name, options in _SpecReader(spec).items():
        if name in NAMED_PIPELINES and allow_default:
            if options:
                raise PipelineSpecError(f"the '{name}' pipeline takes no options")
            if dialect is None:
                passes.append(_PLACEHOLDERS[name]())
            else:
                passes.extend(
                    _parse_passes(_named(name, dialect), known, dialect, allow_default=False)
                )
            continue
        cls = known.get(name)
        if cls is None:
            choices = [*known, *NAMED_PIPELINES]
            close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PipelineSpecError(
                f"unknown pass {name!r} in pipeline spec {spec!r}{hint}; known passes: "
                f"{', '.join(known) or 'none'}, and the pipelines "
                f"{', '.join(map(repr, NAMED_PIPELINES))} ('graphtools list-passes' shows "
                "them all)"
            )
        passes.append(_build_pass(cls, options))
    return passes

"""Passes: the ``Pass`` base, ``PassResult``, the registry, pipeline specs and ``PassManager``.

A pass is a small frozen dataclass: its fields are its options, ``name`` is its kebab-case
pipeline name, and ``call(model)`` rewrites the model in place and reports what it did.
Optional ``requires``/``ensures`` hooks check pre- and post-conditions. Passes see the IR
(``graphtools.ir``), never protobuf messages.

A pipeline has one spelling everywhere (Python, CLI, goldens):
``remove-reshape-for-fc,fuse-copy-ops,remove-dead-ends{keep_side_effects=false}``;
``PassManager.parse`` builds it from the passes ``available_passes`` finds, and
``PassManager.spec`` prints it back.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import logging
import pkgutil
import re
import time
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from graphtools._gc import paused_gc
from graphtools.errors import GraphToolsError, PassError
from graphtools.ir import Model
from graphtools.verify import Finding, verify

logger = logging.getLogger(__name__)


@dataclass
class PassResult:
    """What one pass did.

    Attributes:
        model: the model after the pass (the same object, rewritten in place).
        modified: whether the pass changed anything; must agree with the model's revision.
        stats: counters for reports and goldens (``{"ops_removed": 3}``).
    """

    model: Model
    modified: bool
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pass:
    """Base of every pass; subclasses are frozen dataclasses whose fields are their options.

    Class attributes:
        name: the pipeline name (kebab-case), unique in the registry.
        changes_interface: whether the pass may change the names of predict_net's external
            inputs and outputs (the manager's interface guard refuses it otherwise).
        idempotent: whether a second run right after a run never changes anything (one run
            reaches the pass's fixpoint); the manager then skips the pass while the model is
            unchanged since its last run, and records it as skipped.
        reads_ssa: whether the pass reads ``model.predict_net.ssa()``; when one does, the
            manager builds the view before its first ``verify``, which then reads the findings
            off it instead of walking the ops.
    """

    name: ClassVar[str] = ""
    changes_interface: ClassVar[bool] = False
    idempotent: ClassVar[bool] = False
    reads_ssa: ClassVar[bool] = False

    def call(self, model: Model) -> PassResult:
        """Rewrite ``model`` in place and say what changed."""
        raise NotImplementedError(f"{type(self).__name__} does not implement call()")

    def requires(self, model: Model) -> None:
        """Raise ``PreconditionError`` when ``model`` is not fit for this pass."""

    def ensures(self, model: Model) -> None:
        """Raise ``PostconditionError`` when the rewritten ``model`` breaks a promise."""


_REGISTRY: dict[str, type[Pass]] = {}


_P = TypeVar("_P", bound=Pass)


def register_pass(cls: type[_P]) -> type[_P]:
    """Class decorator adding a pass to the registry under its ``name``."""
    if not cls.name:
        raise ValueError(f"pass class {cls.__name__} has no pipeline name")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise ValueError(
            f"pass name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}"
        )
    _REGISTRY[cls.name] = cls
    return cls


class PipelineSpecError(GraphToolsError):
    """A pipeline spec or a pass registration is wrong: unknown pass or option, bad value."""


DEFAULT_PIPELINE = "remove-reshape-for-fc,fuse-copy-ops,remove-dead-ends"
"""What the pipeline name ``default`` expands to."""

DEFAULT_STEPS = 10
"""Rounds a ``PassManager`` runs at most before giving up on reaching a fixpoint."""

ENTRY_POINT_GROUP = "graphtools.passes"

_builtins_loaded = False


def _load_builtin_passes() -> None:
    """Import every module of ``graphtools.passes`` so their ``@register_pass`` run."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    import graphtools.passes as package

    for module in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{module.name}"
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PipelineSpecError(f"cannot import pass module {name}: {exc}") from exc
    _builtins_loaded = True


def _entry_point_passes() -> dict[str, type[Pass]]:
    found: dict[str, type[Pass]] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = (
            f"entry point {entry_point.name!r} ({entry_point.value}) of group {ENTRY_POINT_GROUP!r}"
        )
        try:
            cls = entry_point.load()
        except Exception as exc:
            raise PipelineSpecError(f"cannot load {where}: {type(exc).__name__}: {exc}") from exc
        if not (isinstance(cls, type) and issubclass(cls, Pass) and dataclasses.is_dataclass(cls)):
            raise PipelineSpecError(f"{where} does not name a Pass dataclass: got {cls!r}")
        if not cls.name:
            raise PipelineSpecError(f"{where}: pass class {cls.__qualname__} has no name")
        found[cls.name] = cls
    return found


def available_passes() -> dict[str, type[Pass]]:
    """Every known pass by pipeline name, sorted by name.

    Covers passes registered with ``@register_pass`` in the modules of ``graphtools.passes``
    (all imported on the first call) and classes published under the ``graphtools.passes``
    entry-point group by other packages, so users can add their own. An entry point that
    fails to load, does not name a ``Pass`` dataclass, or claims a name a different class
    holds raises ``PipelineSpecError`` naming it.
    """
    _load_builtin_passes()
    passes = dict(_REGISTRY)
    for name, cls in _entry_point_passes().items():
        existing = passes.get(name)
        if existing is not None and existing is not cls:
            raise PipelineSpecError(
                f"entry point pass {cls.__module__}.{cls.__qualname__} claims the name "
                f"{name!r}, held by {existing.__module__}.{existing.__qualname__}"
            )
        passes[name] = cls
    return dict(sorted(passes.items()))


# -- pipeline specs ---------------------------------------------------------------------------

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
    """Splits a pipeline spec into ``(name, {option: raw value})`` items."""

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
        start = self.pos
        while self.pos < len(self.spec) and self.spec[self.pos] not in ',{}"':
            self.pos += 1
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
    try:
        return cls(**values)
    except (TypeError, ValueError, GraphToolsError) as exc:
        raise PipelineSpecError(f"cannot configure pass '{cls.name}': {exc}") from exc


def _parse_passes(spec: str, known: dict[str, type[Pass]], *, allow_default: bool) -> list[Pass]:
    passes: list[Pass] = []
    for name, options in _SpecReader(spec).items():
        if name == "default" and allow_default:
            if options:
                raise PipelineSpecError("the 'default' pipeline takes no options")
            passes.extend(_parse_passes(DEFAULT_PIPELINE, known, allow_default=False))
            continue
        cls = known.get(name)
        if cls is None:
            raise PipelineSpecError(
                f"unknown pass {name!r} in pipeline spec {spec!r}; known passes: "
                f"{', '.join(known) or 'none'} (and 'default' = {DEFAULT_PIPELINE})"
            )
        passes.append(_build_pass(cls, options))
    return passes


# -- the pass manager -------------------------------------------------------------------------


@dataclass(frozen=True)
class PassRecord:
    """What one run of one pass did inside a ``PassManager``.

    Attributes:
        name: the pass's pipeline name.
        round: 1-based round of the pipeline in which it ran.
        seconds: wall time of ``call``.
        ops_before / ops_after: top-level ops of predict_net plus init_net around the pass.
        modified: the pass's own (checked) ``modified`` flag.
        stats: the pass's stats (empty when skipped).
        skipped: the pass is ``idempotent`` and the model had not changed since its last run,
            so it was not run.
    """

    name: str
    round: int
    seconds: float
    ops_before: int
    ops_after: int
    modified: bool
    stats: dict[str, Any]
    skipped: bool = False


def _op_count(model: Model) -> int:
    return sum(len(net) for net in model.nets())


def _finding_key(finding: Finding) -> tuple[str, str, str]:
    # Op indices shift when a pass removes or inserts ops; a finding is "the same" when the
    # same kind of problem concerns the same blob in the same (nested) net.
    return (finding.kind, _OP_INDEX.sub("op[", finding.net), finding.blob)


_OP_INDEX = re.compile(r"op\[\d+:")


class PassManager:
    """Runs passes in order over a model, round after round until none modifies it.

    After each pass it checks that ``modified`` agrees with ``model.revision``, that the
    predict_net's external input and output names did not change (unless the pass class sets
    ``changes_interface``), and runs the pass's ``ensures``; ``requires`` runs before the pass.
    ``verify``, the costly check, runs once at the end of each round that changed the model,
    refusing any new finding. Any failure restores the model exactly as it was before the pass
    at fault and raises ``PassError`` naming it and the passes before it: a failing round is
    replayed from its start with ``verify`` after every pass, so that a finding is pinned on
    the pass that made it (passes must therefore be deterministic; the replay runs the round's
    earlier passes again). An interrupt (``KeyboardInterrupt``) restores the model as it was
    at the start of the round, its last verified state, and propagates. An ``idempotent``
    pass is skipped while the model is unchanged since its last run.

    Example::

        manager = PassManager.parse("remove-dead-ends{keep_side_effects=false}", steps=4)
        records = manager(model)
    """

    def __init__(self, passes: Sequence[Pass], steps: int = DEFAULT_STEPS) -> None:
        for item in passes:
            if not isinstance(item, Pass):
                raise PipelineSpecError(
                    f"PassManager takes Pass instances, got {item!r}; "
                    "instantiate the pass class (e.g. RemoveDeadEnds())"
                )
        if steps < 1:
            raise PipelineSpecError(f"steps must be at least 1, got {steps}")
        self.passes: tuple[Pass, ...] = tuple(passes)
        self.steps = steps

    @classmethod
    def parse(cls, spec: str, steps: int = DEFAULT_STEPS) -> PassManager:
        """Build a manager from a pipeline spec such as ``a,b{key=value,other=3}``.

        Option values are converted by the type of the pass's dataclass field: ``int``,
        ``float``, ``bool`` (``true``/``false``/``1``/``0``), ``str``, and ``tuple[str, ...]``
        written ``a;b;c``. Double-quote a value to include ``,{}=`` (``\\`` escapes ``"``).
        The name ``default`` expands to ``DEFAULT_PIPELINE`` and may appear among others.
        """
        return cls(_parse_passes(spec, available_passes(), allow_default=True), steps=steps)

    @property
    def spec(self) -> str:
        """The canonical pipeline spec; ``PassManager.parse(manager.spec)`` rebuilds it."""
        return ",".join(pass_spec(item) for item in self.passes)

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"PassManager.parse({self.spec!r}, steps={self.steps})"

    def __call__(self, model: Model) -> list[PassRecord]:
        """Rewrite ``model`` in place and return one record per pass run, in order."""
        with paused_gc():  # passes build many small objects; see graphtools._gc
            return self._run(model)

    def _run(self, model: Model) -> list[PassRecord]:
        records: list[PassRecord] = []
        if any(item.reads_ssa for item in self.passes):
            model.predict_net.ssa()  # built now, read by verify and then by the passes
        findings = {_finding_key(f) for f in verify(model)}
        ran_at: dict[int, _RanAt] = {}  # pipeline position -> the model when the pass last ran
        for round_ in range(1, self.steps + 1):
            state = model.snapshot()
            records_before, ran_before = len(records), dict(ran_at)
            try:
                changed, findings_after = self._round(
                    model, round_, records, ran_at, findings, strict=False
                )
            except BaseException as exc:
                model.restore(state)
                del records[records_before:]
                if not isinstance(exc, _RoundFailed):
                    raise  # an interrupt (passes' own errors arrive as _RoundFailed)
                # Replay the round checking after every pass, to roll back to just before the
                # pass at fault and name it (raises PassError); if the replay succeeds (a pass
                # that behaves differently when run again), its checked result stands.
                ran_at = ran_before
                changed, findings_after = self._round(
                    model, round_, records, ran_at, findings, strict=True
                )
            findings = findings_after
            if not changed:
                return records
        logger.info(
            "pipeline %s stopped after %d rounds without reaching a fixpoint", self, self.steps
        )
        return records

    def _skipped(
        self, item: Pass, position: int, model: Model, round_: int, ran_at: dict[int, _RanAt]
    ) -> PassRecord | None:
        """The record of an idempotent pass the model has not changed since, else ``None``."""
        if not (item.idempotent and ran_at.get(position) == _ran_at(model)):
            return None
        ops = _op_count(model)
        return PassRecord(item.name, round_, 0.0, ops, ops, False, {}, True)

    def _round(
        self,
        model: Model,
        round_: int,
        records: list[PassRecord],
        ran_at: dict[int, _RanAt],
        findings: set[tuple[str, str, str]],
        *,
        strict: bool,
    ) -> tuple[bool, set[tuple[str, str, str]]]:
        """One round; returns whether it changed the model and the findings after it.

        Fast (``strict=False``): each pass's own promises are checked after it and ``verify``,
        the costly check, runs once at the end; any failure raises ``_RoundFailed`` (the
        caller restores the round's start). Strict: everything, ``verify`` included, is
        checked after every pass, and a failure raises ``PassError`` naming the pass.
        """
        changed = False
        for position, item in enumerate(self.passes):
            skipped = self._skipped(item, position, model, round_, ran_at)
            if skipped is not None:
                records.append(skipped)
                continue
            if strict:
                record, findings = self._run_one(item, model, round_, records, findings)
            else:
                record = self._run_unverified(item, model, round_)
            records.append(record)
            ran_at[position] = _ran_at(model)
            changed = changed or record.modified
        if strict or not changed:
            return changed, findings
        try:
            after = verify(model)
        except Exception as exc:
            raise _RoundFailed from exc
        if _check_findings(after, findings) is not None:
            raise _RoundFailed
        return True, {_finding_key(f) for f in after}

    def _run_unverified(self, item: Pass, model: Model, round_: int) -> PassRecord:
        """``_call_checked`` for a fast round: any failure becomes ``_RoundFailed``."""
        try:
            record, _ = self._call_checked(item, model, round_)
        except Exception as exc:
            raise _RoundFailed from exc
        if record is None:
            raise _RoundFailed
        return record

    def _call_checked(
        self, item: Pass, model: Model, round_: int
    ) -> tuple[PassRecord | None, tuple[str, str] | None]:
        """Run one pass with its ``requires``/``ensures`` and the manager's checks of its
        result (not ``verify``); returns its record, or ``None`` and the failed check."""
        revision = model.revision
        interface = _interface(model)
        ops_before = _op_count(model)
        item.requires(model)
        start = time.perf_counter()
        result = item.call(model)
        seconds = time.perf_counter() - start
        failure = _check_result(item, model, result, revision, interface)
        if failure is not None:
            return None, failure
        item.ensures(model)
        if result.modified:
            logger.info("%s: %s", item.name, result.stats)
        record = PassRecord(
            item.name, round_, seconds, ops_before, _op_count(model), result.modified, result.stats
        )
        return record, failure

    def _run_one(
        self,
        item: Pass,
        model: Model,
        round_: int,
        records: list[PassRecord],
        findings: set[tuple[str, str, str]],
    ) -> tuple[PassRecord, set[tuple[str, str, str]]]:
        previous = [record.name for record in records]
        state = model.snapshot()
        after: list[Finding] = []
        record: PassRecord | None = None
        try:
            record, failure = self._call_checked(item, model, round_)
            if failure is None:
                after = verify(model)
                failure = _check_findings(after, findings)
        except BaseException as exc:
            model.restore(state)
            if not isinstance(exc, Exception):
                raise
            reason = (
                str(exc) if isinstance(exc, GraphToolsError) else f"{type(exc).__name__}: {exc}"
            )
            error = PassError(item.name, previous, reason)
            error.add_note(f"in round {round_} of pipeline {self}; the model was rolled back")
            raise error from exc
        if record is None or failure is not None:
            assert failure is not None  # _call_checked gives a record or a failure
            model.restore(state)
            reason, details = failure
            error = PassError(item.name, previous, reason)
            error.add_note(f"in round {round_} of pipeline {self}; the model was rolled back")
            if details:
                error.add_note(details)
            raise error
        return record, {_finding_key(f) for f in after}


# The nets themselves, not only model.revision (which holds their ids): keeping them referenced
# means a freed net's id cannot come back as another net at the same revision.
_RanAt = tuple[tuple[int, int, int, int], object, object]


def _ran_at(model: Model) -> _RanAt:
    return (model.revision, model.predict_net, model.init_net)


class _RoundFailed(Exception):
    """A check failed during a fast round: the manager replays the round strictly."""


def _interface(model: Model) -> tuple[tuple[str, ...], tuple[str, ...]]:
    net = model.predict_net
    return tuple(net.external_inputs), tuple(net.external_outputs)


def _check_result(
    item: Pass,
    model: Model,
    result: Any,
    revision: tuple[int, int, int, int],
    interface: tuple[tuple[str, ...], tuple[str, ...]],
) -> tuple[str, str] | None:
    """The pass's own promises: a PassResult for this model, an honest flag, same interface."""
    if not isinstance(result, PassResult) or result.model is not model:
        return (
            f"call() must return a PassResult holding the model it was given, got {result!r}",
            "",
        )
    changed = model.revision != revision
    if result.modified != changed:
        return (
            f"reported modified={result.modified} but the model's revision "
            f"{'changed' if changed else 'did not change'} ({revision} -> {model.revision})",
            "a pass must mutate the model only through the Net methods and report exactly "
            "whether it called one",
        )
    if not item.changes_interface and _interface(model) != interface:
        before_in, before_out = interface
        after_in, after_out = _interface(model)
        return (
            "changed the names of predict_net's external inputs or outputs, which only a pass "
            "class with changes_interface = True may do",
            f"external inputs: {list(before_in)} -> {list(after_in)}\n"
            f"external outputs: {list(before_out)} -> {list(after_out)}",
        )
    return None


def _check_findings(
    after: list[Finding], before: set[tuple[str, str, str]]
) -> tuple[str, str] | None:
    new = [finding for finding in after if _finding_key(finding) not in before]
    if not new:
        return None
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return (
        f"verify found a new problem: {new[0]}{more}",
        "new verify findings:\n" + "\n".join(f"  {finding}" for finding in new),
    )

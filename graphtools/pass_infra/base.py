"""The ``Pass`` base class, ``PassResult``, and the checks every run of a pass goes through.

A pass is a small frozen dataclass: its fields are its options, ``name`` is its kebab-case
pipeline name, and ``call(model)`` rewrites the model in place and reports what it did.
Calling the pass object (``RemoveDeadEnds()(model)``) runs ``requires``, ``call``, the result
check, ``ensures`` and ``verify`` (a finding the model did not have fails it), and restores the
model when any of them fails: a pass run by hand gets the same checks as one run by a
``PassManager``.
"""

from __future__ import annotations

import dataclasses
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from graphtools._core import DIALECTS
from graphtools.errors import PassError, PipelineSpecError, PreconditionError
from graphtools.ir import Model
from graphtools.pass_infra.findings import CheckFailure, FindingsBefore, new_findings
from graphtools.wellformed import verify

__all__ = ["CheckFailure", "Pass", "PassResult", "check_result", "interface", "run_checked"]


@dataclass
class PassResult:
    """What one pass did.

    Attributes:
        model: the model after the pass (the same object, rewritten in place).
        modified: whether the pass changed anything; must agree with the model's revision.
        stats: counters for reports and goldens (``{"ops_removed": 3}``).
        may_enable: the pipeline names of the passes this run's change may have given new
            work to; ``None`` (the default) for any pass. A manager keeps skipping an
            ``idempotent`` pass while every change since its last run names other passes
            only, so the round that confirms a fixpoint does not rerun it to learn nothing.
    """

    model: Model
    modified: bool
    stats: dict[str, Any] = field(default_factory=dict)
    may_enable: frozenset[str] | None = None


@dataclass(frozen=True)
class Pass:
    """Base of every pass; subclasses are frozen dataclasses whose fields are their options.

    Class attributes:
        name: the pipeline name (kebab-case), unique among the available passes.
        changes_interface: whether the pass may change the names of predict_net's external
            inputs and outputs (the interface check refuses it otherwise).
        idempotent: whether a second run right after a run never changes anything (one run
            reaches the pass's fixpoint); a manager then skips the pass while the model is
            unchanged since its last run, or changed only by runs whose ``may_enable`` leaves
            it out, and records it as skipped.
        reads_ssa: whether the pass reads ``model.predict_net.ssa()``; when one does, a
            manager builds the view before its first ``verify``, which then reads the findings
            off it instead of walking the ops.
        dialects: the dialects of the models the pass rewrites; a model of another dialect
            is refused (``PreconditionError`` naming the pass and both dialects).
        changes_dialect: whether the pass converts the model into another dialect (the result
            check refuses a change of dialect otherwise); a ``PassManager`` runs such a pass
            once, between the fixpoints of the passes before and after it.
        example: the pass spelled with the options a use needs (``rename{op=3,output=0,to=y}``),
            for its doc page; empty when its name alone runs.
    """

    name: ClassVar[str] = ""
    changes_interface: ClassVar[bool] = False
    idempotent: ClassVar[bool] = False
    reads_ssa: ClassVar[bool] = False
    dialects: ClassVar[tuple[str, ...]] = DIALECTS
    changes_dialect: ClassVar[bool] = False
    example: ClassVar[str] = ""

    def call(self, model: Model) -> PassResult:
        """Rewrite ``model`` in place and say what changed (the work; no checks)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement call()")

    def requires(self, model: Model) -> None:
        """Raise ``PreconditionError`` when ``model`` is not fit for this pass."""

    def ensures(self, model: Model) -> None:
        """Raise ``PostconditionError`` when the rewritten ``model`` breaks a promise."""

    def __call__(self, model: Model) -> PassResult:
        """Run the pass with its checks; on any failure the model is left as it was.

        Raises:
            PreconditionError / PostconditionError: from ``requires`` / ``ensures``.
            PassError: ``call`` broke the pass contract (no ``PassResult`` for this model, a
                ``modified`` flag that disagrees with the model's revision, or a changed
                interface without ``changes_interface``), or ``verify`` finds a problem in
                the result that the model did not have (a value read but never defined).
            Whatever ``call`` raised, unchanged.
        """
        state = model.snapshot()
        before = FindingsBefore(model)
        try:
            result, failure = run_checked(self, model)
            if failure is None and result.modified:
                failure = new_findings(verify(model), before)
            if failure is not None:
                error = PassError(self.name, [], failure.reason)
                if failure.details:
                    error.add_note(failure.details)
                raise error
        except BaseException:
            model.restore(state)
            raise
        return result


Interface = tuple[tuple[str, ...], tuple[str, ...]]


def interface(model: Model) -> Interface:
    """The predict_net's external input and output names (what users feed and fetch)."""
    net = model.predict_net
    return tuple(net.external_inputs), tuple(net.external_outputs)


_OPTION_TYPES: dict[type, dict[str, Any]] = {}
"""A pass class's options and their annotations, resolved once."""


def _option_types(cls: type[Pass]) -> dict[str, Any]:
    found = _OPTION_TYPES.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError):  # a user's annotation names what it cannot resolve
            hints = {}
        found = {
            f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init and f.name in hints
        }
        _OPTION_TYPES[cls] = found
    return found


def _fits(annotation: Any, value: Any) -> bool:
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if typing.get_origin(annotation) is tuple and typing.get_args(annotation) == (str, ...):
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    return True  # an option a spec cannot set: the pass checks it itself


def check_option_types(item: Pass) -> None:
    """Refuse a pass built in Python with an option of the wrong type (``Rename(op="1")``),
    naming it, before it fails inside the pass (a spec's options are converted already); a
    list of names given for a tuple of them is taken as that tuple.

    Raises:
        PipelineSpecError: the first option whose value does not fit its annotation.
    """
    for option, annotation in _option_types(type(item)).items():
        value = getattr(item, option)
        if isinstance(value, list) and _fits(annotation, tuple(value)):
            # a list where a tuple of names is due (types=["Dropout"]): the same names; the
            # pass is frozen, and a hashable option keeps it so
            object.__setattr__(item, option, tuple(value))
            continue
        if not _fits(annotation, value):
            name = getattr(annotation, "__name__", str(annotation))
            raise PipelineSpecError(
                f"option {option} of pass '{item.name}' expects {name}, got "
                f"{type(value).__name__} {value!r}"
            )


def run_checked(item: Pass, model: Model) -> tuple[Any, CheckFailure | None]:
    """``requires``, ``call``, the result check and ``ensures``, without restoring anything.

    Returns the pass's result and ``None``, or its result and the broken promise (then
    ``ensures`` did not run). Exceptions from the hooks and ``call`` propagate.
    """
    revision = model.revision
    before = interface(model)
    dialect = model.dialect
    if dialect not in item.dialects:
        raise PreconditionError(
            f"pass '{item.name}' rewrites {' and '.join(item.dialects)} models; this is "
            f"{'an' if model.dialect[0] in 'aeiou' else 'a'} {model.dialect} model"
        )
    check_option_types(item)
    item.requires(model)
    result = item.call(model)
    failure = check_result(item, model, result, revision, before, dialect)
    if failure is None:
        item.ensures(model)
    return result, failure


def check_result(
    item: Pass,
    model: Model,
    result: Any,
    revision: tuple[int, ...],
    before: Interface,
    dialect: str | None = None,
) -> CheckFailure | None:
    """The pass's own promises: a PassResult for this model, an honest flag, same interface,
    same dialect (``dialect``: the model's before the pass, when known)."""
    if not isinstance(result, PassResult) or result.model is not model:
        return CheckFailure(
            f"call() must return a PassResult holding the model it was given, got {result!r}"
        )
    changed = model.revision != revision
    if result.modified != changed:
        return CheckFailure(
            f"reported modified={result.modified} but the model "
            f"{'changed' if changed else 'did not change'}",
            "a pass must mutate the model only through the Net methods (an edit: "
            "'with net.edit() as e:') and report exactly whether it changed it; "
            "returning PassResult(model, e.changed, ...) from the edit keeps the flag honest",
        )
    if dialect is not None and not item.changes_dialect and model.dialect != dialect:
        return CheckFailure(
            f"turned the {dialect} model into a {model.dialect} one, which only a pass class "
            "with changes_dialect = True may do"
        )
    if not item.changes_interface and interface(model) != before:
        before_in, before_out = before
        after_in, after_out = interface(model)
        return CheckFailure(
            "changed the names of predict_net's external inputs or outputs, which only a pass "
            "class with changes_interface = True may do",
            f"external inputs: {list(before_in)} -> {list(after_in)}\n"
            f"external outputs: {list(before_out)} -> {list(after_out)}",
        )
    return None

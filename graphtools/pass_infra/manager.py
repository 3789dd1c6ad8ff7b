"""``PassManager``: runs a pipeline of passes over a model to a fixpoint, checked and verified.

Each pass runs with its own checks (``requires``, the result check, ``ensures``: see
``graphtools.pass_infra.base``); ``verify`` runs once per round that changed the model and
refuses any new finding; a failure rolls the model back to before the pass at fault and names
it in a ``PassError``.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from graphtools._gc import paused_gc
from graphtools.errors import GraphToolsError, InvalidArgumentError, PassError, PipelineSpecError
from graphtools.ir import Model
from graphtools.pass_infra.base import Pass, run_checked
from graphtools.pass_infra.findings import (
    CheckFailure,
    FindingsBefore,
    Known,
    finding_key,
    new_findings,
)
from graphtools.pass_infra.registry import available_passes
from graphtools.pass_infra.spec import (
    DefaultPipeline,
    expand_default,
    parse_pipeline,
    pass_spec,
)
from graphtools.wellformed import Finding, verify

__all__ = ["DEFAULT_STEPS", "PassManager", "PassRecord"]

logger = logging.getLogger(__name__)

DEFAULT_STEPS = 10
"""Rounds a ``PassManager`` runs at most before giving up on reaching a fixpoint."""


@dataclass(frozen=True)
class PassRecord:
    """What one run of one pass did inside a ``PassManager``.

    Attributes:
        name: the pass's pipeline name.
        round: 1-based round of the pipeline in which it ran.
        seconds: wall time of the pass with its own checks.
        ops_before / ops_after: top-level predict_net ops around the pass (what ``graphtools
            show`` counts as the model's ops).
        modified: the pass's own (checked) ``modified`` flag.
        stats: the pass's stats (empty when skipped).
        skipped: the pass is ``idempotent`` and the model had not changed since its last run
            (or only by runs whose ``PassResult.may_enable`` left it out), so it was not run.
        init_ops_before / init_ops_after: init_net ops around the pass (0 without one).
    """

    name: str
    round: int
    seconds: float
    ops_before: int
    ops_after: int
    modified: bool
    stats: dict[str, Any]
    skipped: bool = False
    init_ops_before: int = 0
    init_ops_after: int = 0


def _op_counts(model: Model) -> tuple[int, int]:
    """Top-level ops of the predict_net and of the init_net (0 without one)."""
    return len(model.predict_net), 0 if model.init_net is None else len(model.init_net)


class NoFixpointWarning(UserWarning):
    """A pipeline stopped at its round limit while its last round still changed the model
    (the CLI says so in its own words)."""


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
    pass is skipped while no change since its last run may have given it work (the
    ``PassResult.may_enable`` of the passes that changed the model). A pass that changes the
    model's dialect (``changes_dialect``: a conversion) runs once, checked and verified,
    between the fixpoints of the passes before and after it (``default`` among those after it
    is the new dialect's pipeline).

    Example::

        manager = PassManager.parse("remove-dead-ends{keep_side_effects=false}", steps=4)
        records = manager(model)
    """

    def __init__(self, passes: Iterable[Pass], steps: int = DEFAULT_STEPS) -> None:
        passes = tuple(passes)  # an iterator is read once
        for item in passes:
            if not isinstance(item, Pass):
                raise PipelineSpecError(
                    f"PassManager takes Pass instances, got {item!r}; "
                    "instantiate the pass class (e.g. RemoveDeadEnds())"
                )
        if steps < 1:
            raise PipelineSpecError(f"steps must be at least 1, got {steps}")
        self.passes: tuple[Pass, ...] = passes
        self.steps = steps

    @classmethod
    def parse(cls, spec: str, steps: int = DEFAULT_STEPS) -> PassManager:
        """Build a manager from a pipeline spec such as ``a,b{key=value,other=3}``.

        Option values are converted by the type of the pass's dataclass field: ``int``,
        ``float``, ``bool`` (``true``/``false``/``1``/``0``), ``str``, and ``tuple[str, ...]``
        written ``a;b;c``. A value may hold commas and balanced braces, a pipeline as written
        at the top level (``in-branches{pipeline=a,b{k=1}}``); double-quote one holding
        anything else, or a comma followed by ``name=`` (``\\`` escapes ``"``).
        The name ``default`` may appear among others: it is the default pipeline of the
        dialect of the model the manager runs on (``DEFAULT_PIPELINES``), and so may
        ``optimize`` (``OPTIMIZE_PIPELINES``).
        """
        if not isinstance(spec, str):
            raise PipelineSpecError(
                f"a pipeline spec is a string such as 'default' or 'a,b{{k=v}}', not "
                f"{type(spec).__name__} {spec!r}"
            )
        return cls(parse_pipeline(spec, available_passes()), steps=steps)

    @property
    def spec(self) -> str:
        """The canonical pipeline spec; ``PassManager.parse(manager.spec)`` rebuilds it."""
        return ",".join(pass_spec(item) for item in self.passes)

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"PassManager.parse({self.spec!r}, steps={self.steps})"

    def __call__(
        self, model: Model, *, after_pass: Callable[[PassRecord, Model], None] | None = None
    ) -> list[PassRecord]:
        """Rewrite ``model`` in place and return one record per pass run, in order.

        ``after_pass(record, model)`` is called after each pass that ran (before the round's
        ``verify``; a round that fails is replayed, so its passes may be reported twice).
        The nets' cached SSA views are let go at the end (``Net.release_ssa``).
        """
        if not isinstance(model, Model):
            raise InvalidArgumentError(
                f"a pass manager rewrites a graphtools Model, not a {type(model).__name__}: "
                "load one (graphtools.load_model), or wrap what you have: Model(net) for a "
                "Net, graphtools.serde.codec.model_from_netdefs(predict_net, init_net) for "
                "NetDefs (Caffe2's helpers, graphtools.passes, take NetDefs as they are)"
            )
        self._after_pass = after_pass
        records: list[PassRecord] = []
        with paused_gc():  # passes build many small objects; see graphtools._gc
            for segment in _segments(self.passes):
                if segment[0].changes_dialect:
                    records.append(self._convert(segment[0], model, records))
                    continue
                self._active = _expanded(segment, model.dialect)
                self._run(model, records)
        for net in model.nets():  # the passes' views: a save that follows reads none of them
            net.release_ssa()
        return records

    _after_pass: Callable[[PassRecord, Model], None] | None = None
    _active: tuple[Pass, ...] = ()
    _may_enable: frozenset[str] | None = None  # the last run's PassResult.may_enable

    def passes_for(self, dialect: str) -> tuple[Pass, ...]:
        """The passes this manager runs on a model of ``dialect`` (``default`` expanded)."""
        return _expanded(self.passes, dialect)

    def _convert(self, item: Pass, model: Model, records: list[PassRecord]) -> PassRecord:
        """Run a pass that changes the model's dialect once, checked and verified (a finding
        the model did not have before is refused); the passes after it see its result."""
        findings = {finding_key(f) for f in verify(model)}
        record, _ = self._run_one(item, model, 1, records, findings)
        if self._after_pass is not None:
            self._after_pass(record, model)
        return record

    def _run(self, model: Model, records: list[PassRecord]) -> list[PassRecord]:
        """Run ``self._active`` over ``model`` to a fixpoint, appending to ``records``."""
        if any(item.reads_ssa for item in self._active):
            model.predict_net.ssa()  # built now, read by the passes
        findings: Known = FindingsBefore(model)
        # Pipeline positions of the idempotent passes with nothing to do: each ran, and no
        # change since may have given it work.
        settled: set[int] = set()
        for round_ in range(1, self.steps + 1):
            state = model.snapshot()
            records_before, settled_before = len(records), set(settled)
            try:
                changed, findings_after = self._round(
                    model, round_, records, settled, findings, strict=False
                )
            except BaseException as exc:
                model.restore(state)
                del records[records_before:]
                if not isinstance(exc, _RoundFailed):
                    raise  # an interrupt (passes' own errors arrive as _RoundFailed)
                # Replay the round checking after every pass, to roll back to just before the
                # pass at fault and name it (raises PassError); if the replay succeeds (a pass
                # that behaves differently when run again), its checked result stands.
                settled = settled_before
                if isinstance(findings, FindingsBefore):
                    findings.work_out()  # here, not inside the checks of the replay's first pass
                changed, findings_after = self._round(
                    model, round_, records, settled, findings, strict=True
                )
            findings = findings_after
            if not changed:
                return records
        warnings.warn(
            f"pipeline {self} did not reach a fixpoint in {self.steps} rounds (the last round "
            "still changed the model): raise steps, or look for passes undoing each other",
            NoFixpointWarning,
            stacklevel=3,
        )
        return records

    def _skipped(
        self, item: Pass, position: int, model: Model, round_: int, settled: set[int]
    ) -> PassRecord | None:
        """The record of an idempotent pass with nothing to do (``settled``), else ``None``."""
        if not (item.idempotent and position in settled):
            return None
        ops, init_ops = _op_counts(model)
        return PassRecord(item.name, round_, 0.0, ops, ops, False, {}, True, init_ops, init_ops)

    def _settle(self, position: int, record: PassRecord, settled: set[int]) -> None:
        """Update ``settled`` after the pass at ``position`` ran: it has nothing left to do
        (if idempotent), and a change unsettles the passes it may have given work to."""
        if record.modified:
            enabled = self._may_enable
            for other, item in enumerate(self._active):
                if enabled is None or item.name in enabled:
                    settled.discard(other)
        settled.add(position)

    def _round(
        self,
        model: Model,
        round_: int,
        records: list[PassRecord],
        settled: set[int],
        findings: Known,
        *,
        strict: bool,
    ) -> tuple[bool, Known]:
        """One round; returns whether it changed the model and the findings after it.

        Fast (``strict=False``): each pass's own promises are checked after it and ``verify``,
        the costly check, runs once at the end; any failure raises ``_RoundFailed`` (the
        caller restores the round's start). Strict: everything, ``verify`` included, is
        checked after every pass, and a failure raises ``PassError`` naming the pass.
        """
        changed = False
        for position, item in enumerate(self._active):
            skipped = self._skipped(item, position, model, round_, settled)
            if skipped is not None:
                records.append(skipped)
                continue
            if strict:
                record, findings = self._run_one(item, model, round_, records, findings)
            else:
                record = self._run_unverified(item, model, round_)
            records.append(record)
            self._settle(position, record, settled)
            changed = changed or record.modified
            if self._after_pass is not None:
                self._after_pass(record, model)
        if strict or not changed:
            return changed, findings
        try:
            after = verify(model)
        except Exception as exc:
            raise _RoundFailed from exc
        if new_findings(after, findings) is not None:
            raise _RoundFailed
        return True, {finding_key(f) for f in after}

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
    ) -> tuple[PassRecord | None, CheckFailure | None]:
        """Run one pass with its checks (not ``verify``); returns its record, or ``None`` and
        the broken promise."""
        ops_before, init_before = _op_counts(model)
        start = time.perf_counter()
        result, failure = run_checked(item, model)
        seconds = time.perf_counter() - start
        if failure is not None:
            return None, failure
        self._may_enable = result.may_enable
        if result.modified:
            logger.info("%s: %s", item.name, result.stats)
        ops_after, init_after = _op_counts(model)
        record = PassRecord(
            item.name,
            round_,
            seconds,
            ops_before,
            ops_after,
            result.modified,
            result.stats,
            init_ops_before=init_before,
            init_ops_after=init_after,
        )
        return record, None

    def _run_one(
        self,
        item: Pass,
        model: Model,
        round_: int,
        records: list[PassRecord],
        findings: Known,
    ) -> tuple[PassRecord, Known]:
        previous = [record.name for record in records]
        state = model.snapshot()
        after: list[Finding] = []
        record: PassRecord | None = None
        try:
            record, failure = self._call_checked(item, model, round_)
            if failure is None:
                after = verify(model)
                failure = new_findings(after, findings)
        except BaseException as exc:
            model.restore(state)
            if not isinstance(exc, Exception):
                raise
            reason = (
                str(exc) if isinstance(exc, GraphToolsError) else f"{type(exc).__name__}: {exc}"
            )
            error = PassError(item.name, previous, reason)
            error.add_note(_rolled_back(self, round_, previous))
            raise error from exc
        if record is None or failure is not None:
            assert failure is not None  # _call_checked gives a record or a failure
            model.restore(state)
            error = PassError(item.name, previous, failure.reason)
            error.add_note(_rolled_back(self, round_, previous))
            if failure.details:
                error.add_note(failure.details)
            raise error
        return record, {finding_key(f) for f in after}


def _rolled_back(manager: PassManager, round_: int, previous: Sequence[str]) -> str:
    """Where a failed pass left the model: as it was before that pass, so the passes run
    before it keep their (checked) changes."""
    kept = (
        f"; the changes of the passes run before it ({', '.join(dict.fromkeys(previous))}) stay"
        if previous
        else ""
    )
    return (
        f"in round {round_} of pipeline {manager}; the model was rolled back to its state "
        f"before this pass{kept} (to keep the original, run the pipeline on a copy)"
    )


def _expanded(passes: tuple[Pass, ...], dialect: str) -> tuple[Pass, ...]:
    """``passes`` with ``default`` and ``optimize`` expanded for ``dialect``."""
    if not any(isinstance(item, DefaultPipeline) for item in passes):
        return passes  # nothing to expand: no need to look the passes up
    return tuple(expand_default(passes, dialect, available_passes()))


def _segments(passes: Sequence[Pass]) -> list[tuple[Pass, ...]]:
    """``passes`` cut around each pass that changes the dialect: the runs of other passes
    (each run to its fixpoint) and each such pass alone (run once)."""
    segments: list[tuple[Pass, ...]] = []
    current: list[Pass] = []
    for item in passes:
        if item.changes_dialect:
            if current:
                segments.append(tuple(current))
            segments.append((item,))
            current = []
        else:
            current.append(item)
    if current:
        segments.append(tuple(current))
    return segments


class _RoundFailed(Exception):
    """A check failed during a fast round: the manager replays the round strictly."""

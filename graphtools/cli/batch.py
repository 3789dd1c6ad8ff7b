"""Batch runs: ``run``/``verify`` over many models, each in its own process.

``discover_models`` (``graphtools.serde.pairing``) turns the paths into models;
``run_batch`` hands each to a worker function in a fresh process of its own (spawned; a
crash or a leak stays with its model), ``-j N`` at a time, shows a progress bar when stderr
is a terminal, and renders a summary table (per model: ops before and after, seconds,
verdict). Every model runs even when some fail; the exit code is the worst: 2 when any
errored, else 1 when any verify found a difference, else 0.

Ctrl-C (or SIGTERM) stops the batch: the workers start with SIGINT ignored (the terminal
sends it to them too, and this process answers for them: a worker still loading its modules
prints no traceback), no model is started after it and the workers at work are killed, so no
model is written after the interrupt (a write cut short is completed or undone by the next
read: ``graphtools.serde.atomic``).
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graphtools.cli.common import Output, new_table
from graphtools.cli.quiet import numpy_quiet, reports_quiet
from graphtools.errors import GraphToolsError
from graphtools.serde.pairing import ModelRef

__all__ = ["BatchResult", "exit_code", "render_batch", "run_batch"]


@dataclass
class BatchResult:
    """What one model's run gave.

    Attributes:
        name: the model's short name (its output folder for ``run``).
        path: the model folder or predict_net file.
        verdict: ``ok`` (run), ``equal``/``differ`` (verify), or ``error``.
        code: the model's exit code (0, 1 or 2).
        ops_before / ops_after: predict_net ops around the pipeline (as ``show`` counts them).
        seconds: wall time of the model's run.
        error: the error message when ``verdict`` is ``error``.
        data: the command's JSON result for the model.
    """

    name: str
    path: str
    verdict: str
    code: int
    ops_before: int | None = None
    ops_after: int | None = None
    seconds: float = 0.0
    error: str = ""
    data: dict[str, Any] = field(default_factory=dict)


Worker = Callable[[ModelRef, dict[str, Any]], BatchResult]


def guarded(worker: Worker, ref: ModelRef, settings: dict[str, Any]) -> BatchResult:
    """Run ``worker``; an error of graphtools becomes the model's ``error`` result."""
    start = time.perf_counter()
    try:
        result = worker(ref, settings)
    except GraphToolsError as exc:
        message = str(exc).replace("\n", " ")
        result = BatchResult(ref.name, str(ref.path), "error", 2, error=message)
    result.seconds = time.perf_counter() - start
    return result


def run_batch(
    refs: Sequence[ModelRef],
    worker: Worker,
    settings: dict[str, Any],
    jobs: int,
    out: Output,
) -> list[BatchResult]:
    """Run ``worker`` on every model in its own process, ``jobs`` at a time; results in the
    order of ``refs``."""
    # Here, not at the top: a run of one model (the common case) needs neither.
    import multiprocessing
    from multiprocessing.connection import wait

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited
    results: dict[int, BatchResult] = {}
    show = out.stderr.is_terminal and out.verbosity >= 1 and not out.json_mode
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out.stderr,
        disable=not show,
        transient=True,
    )
    waiting = list(enumerate(refs))[::-1]  # taken from the end: refs' order
    running: dict[Any, _Worker] = {}  # by the connection its result comes through
    try:
        with progress:
            task = progress.add_task("models", total=len(refs))
            while waiting or running:
                while waiting and len(running) < max(jobs, 1):
                    index, ref = waiting.pop()
                    # Tracked before it starts: an interrupt that waited out the start
                    # (blocked meanwhile) must find it, or it would run on untold.
                    starting = _Worker.create(context, index, worker, ref, settings)
                    running[starting.reader] = starting
                    starting.start()
                for reader in wait(list(running)):
                    done = running[reader]
                    results[done.index] = done.result()
                    del running[reader]  # only now: an interrupt in result() still kills it
                    progress.update(task, advance=1, description=refs[done.index].name)
    except BaseException:  # Ctrl-C, SIGTERM: nothing more is started, nothing more written
        for left in running.values():
            left.kill()
        raise
    return [results[i] for i in range(len(refs))]


@dataclass
class _Worker:
    """One model at work in a process of its own, its result coming through ``reader``."""

    index: int
    ref: ModelRef
    process: Any
    reader: Any
    writer: Any

    @classmethod
    def create(
        cls, context: Any, index: int, worker: Worker, ref: ModelRef, settings: dict[str, Any]
    ) -> _Worker:
        """The worker's process and pipe, not started yet."""
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(
            target=_work, args=(worker, ref, settings, writer), name=f"graphtools-{ref.name}"
        )
        return cls(index, ref, process, reader, writer)

    def start(self) -> None:
        """Start the process; this end of the pipe keeps only its reader."""
        with _interrupts_ignored():
            self.process.start()
        self.writer.close()

    def result(self) -> BatchResult:
        """The model's result (an error result when the process died without one)."""
        try:
            found: BatchResult | None = self.reader.recv()
        except EOFError:
            found = None
        self.reader.close()
        self.process.join()
        if found is not None:
            return found
        code = self.process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return BatchResult(
            self.ref.name, str(self.ref.path), "error", 2, error=f"its process died ({how})"
        )

    def kill(self) -> None:
        """SIGKILL: the process runs no Python on its way out, so it prints nothing."""
        if self.process.pid is not None:  # None: interrupted before it started
            self.process.kill()
            self.process.join()
        self.reader.close()
        self.writer.close()


def _work(worker: Worker, ref: ModelRef, settings: dict[str, Any], writer: Any) -> None:
    """A worker process's whole life: the model's result, sent to the batch (its reports kept
    as quiet as the main process keeps them: a new process inherits none of its filters)."""
    try:
        with reports_quiet(), numpy_quiet():
            result = guarded(worker, ref, settings)
    except Exception as exc:  # a bug: the model's error, the batch goes on
        result = BatchResult(
            ref.name,
            str(ref.path),
            "error",
            2,
            error=f"internal error: {type(exc).__name__}: {exc}",
        )
    try:
        writer.send(result)
    except BrokenPipeError:  # the batch itself was killed: nobody is left to tell
        return
    writer.close()


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Start a worker with SIGINT ignored, which it keeps across its exec (Python installs no
    handler then): a terminal's Ctrl-C reaches the whole process group, and only this process
    answers it. SIGINT is blocked here meanwhile, so one coming now is delivered after, not
    lost (a blocked signal is never discarded as ignored)."""
    blockable = hasattr(signal, "pthread_sigmask")
    if blockable:
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if blockable:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


def exit_code(results: Sequence[BatchResult]) -> int:
    """The worst exit code of the models (0 when there are none)."""
    return max((r.code for r in results), default=0)


def render_batch(out: Output, results: Sequence[BatchResult], title: str) -> None:
    """The summary table, and the errors in full below it (or the JSON list)."""
    if out.json_mode:
        out.json([asdict(r) for r in results])
        return
    table = new_table("model", "ops before", "ops after", "seconds", "verdict", title=title)
    for r in results:
        table.add_row(
            r.name,
            "-" if r.ops_before is None else str(r.ops_before),
            "-" if r.ops_after is None else str(r.ops_after),
            f"{r.seconds:.2f}",
            r.verdict,
        )
    out.table(table, level=0)
    for r in results:
        if r.error:
            out.error(f"{r.name}: error: {r.error}")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    out.line(", ".join(f"{n} {v}" for v, n in sorted(counts.items())), level=0)

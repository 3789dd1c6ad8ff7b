"""Batch runs: ``run``/``verify`` over many models, each in its own process.

``discover_models`` (``graphtools.serde.pairing``) turns the paths into models;
``run_batch`` hands each to a worker function in a ``ProcessPoolExecutor`` of ``-j N``
processes, one fresh process per model (a crash or a leak stays with its model), shows a
progress bar when stderr is a terminal, and renders a summary table (per model: ops before
and after, seconds, verdict). Every model runs even when some fail; the exit code is the
worst: 2 when any errored, else 1 when any verify found a difference, else 0.

Ctrl-C (or SIGTERM) stops the batch: the workers start with SIGINT blocked (the terminal
sends it to them too, and this process answers for them; blocked from their very start, a
worker still loading its modules prints no traceback), models not started are cancelled and
the workers at work are terminated, so no model is written after the interrupt (a write cut
short is completed or undone by the next read: ``graphtools.serde.atomic``).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graphtools.cli.common import Output, new_table
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
    from concurrent.futures import Future, ProcessPoolExecutor, as_completed

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
    pool: ProcessPoolExecutor | None = None
    try:
        with progress:
            task = progress.add_task("models", total=len(refs))
            # Workers, and the executor's thread that starts the later ones, inherit the mask
            # of the thread starting them: SIGINT blocked while the models are submitted.
            with _interrupts_blocked():
                pool = ProcessPoolExecutor(max_workers=max(jobs, 1), max_tasks_per_child=1)
                futures: dict[Future[BatchResult], int] = {
                    pool.submit(guarded, worker, ref, settings): index
                    for index, ref in enumerate(refs)
                }
            for future in as_completed(futures):
                index = futures[future]
                results[index] = future.result()
                progress.update(task, advance=1, description=refs[index].name)
        pool.shutdown()
    except BaseException as stopped:  # Ctrl-C, SIGTERM, a crash: nothing more is started
        if pool is not None:
            _stop(pool)
        interrupted = stopped
    else:
        return [results[i] for i in range(len(refs))]
    # The executor's queues release their semaphores when collected, which the console
    # script's os._exit would skip (the resource tracker then reports them as leaked): collect
    # it here, outside the except block, with only the exception left to raise.
    pool = None
    gc.collect()
    raise interrupted


@contextlib.contextmanager
def _interrupts_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block (where signal masks exist)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop(pool: Any) -> None:
    """Cancel the models not started and terminate the workers at work (the executor has
    no public way to: its ``_processes`` maps each worker's pid to its process)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
    pool.shutdown(wait=True)  # the workers are gone: joins the executor's thread and queues


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
            out.line(f"{r.name}: error: {r.error}", level=0)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    out.line(", ".join(f"{n} {v}" for v, n in sorted(counts.items())), level=0)

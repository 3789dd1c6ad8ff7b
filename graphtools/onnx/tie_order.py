"""Detections whose scores tie: the same rows in another order on each side.

``BoxWithNMSLimit`` orders its detections by class, then by descending score. When two
detections of a class score the same within float32 rounding (near-degenerate boxes often
do, made-up weights more so), which comes first is decided by the last bit of a score, and
onnxruntime and our executor compute that bit on their own: both orders are the op's result,
yet compared row by row the boxes (and every blob computed from them, such as masks) differ.

``align_tied_rows`` puts our rows in onnxruntime's order when that is all that differs: only
rows of one class whose scores tie within the tolerances are moved, and only to a row whose
every per-detection value matches. Anything else is left for the comparison to report.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.executor import Workspace
from graphtools.ir import Op

__all__ = ["TIE_ORDERED", "TieOrder", "align_tied_rows"]


@dataclass(frozen=True)
class TieOrder:
    """Where an op's tie-ordered rows are: the output positions of the score, of the group
    a row's order is kept within (``None``: one group), and of every per-row output."""

    score: int
    group: int | None
    rows: tuple[int, ...]


TIE_ORDERED: Mapping[str, TieOrder] = {
    # scores, boxes, classes, batch_splits, keeps, keeps_size: rows in 0, 1, 2 and 4
    "BoxWithNMSLimit": TieOrder(score=0, group=2, rows=(0, 1, 2, 4)),
}
"""Caffe2 ops whose output rows are ordered by a float score, by op type."""


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _tied_runs(
    scores: np.ndarray, groups: np.ndarray | None, rtol: float, atol: float
) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each run of two or more adjacent rows of one group whose scores
    are within the tolerances of the run's first."""
    start = 0
    for stop in range(1, len(scores) + 1):
        if stop < len(scores):
            same_group = groups is None or groups[stop] == groups[start]
            first = float(scores[start])
            if same_group and abs(float(scores[stop]) - first) <= atol + rtol * abs(first):
                continue
        if stop - start > 1:
            yield start, stop
        start = stop


def _permutation(
    reference: list[np.ndarray],
    ours: list[np.ndarray],
    runs: list[tuple[int, int]],
    rtol: float,
    atols: list[float],
) -> np.ndarray | None:
    """Our row for each of onnxruntime's rows, moving rows only within ``runs``; ``None``
    when no row moves or a run's rows do not pair up."""
    order = np.arange(len(reference[0]))
    moved = False
    for start, stop in runs:
        free = list(range(start, stop))
        for row in range(start, stop):
            match = next(
                (
                    candidate
                    for candidate in free
                    if all(
                        _close(ref[row], our[candidate], rtol, atol)
                        for ref, our, atol in zip(reference, ours, atols, strict=True)
                    )
                ),
                None,
            )
            if match is None:
                return None
            free.remove(match)
            order[row] = match
            moved = moved or match != row
    return order if moved else None


def align_tied_rows(
    op: Op,
    workspace: Workspace,
    reference: Mapping[str, Any],
    rtol: float,
    atol: float,
) -> bool:
    """Reorder ``op``'s tie-ordered outputs in ``workspace`` (ours, just written) to
    onnxruntime's order of the same rows (``reference``, by name), when the two differ only
    in the order of rows whose scores tie; whether rows moved. An ``atol`` below ``rtol``
    times a per-row output's largest magnitude is raised to it there (boxes are in pixels)."""
    spec = TIE_ORDERED.get(op.type)
    if spec is None:
        return False
    names = [op.outputs[i] for i in spec.rows if i < len(op.outputs) and op.outputs[i]]
    if not all(name in reference and workspace.has(name) for name in names):
        return False
    ref_rows = [np.asarray(reference[name]) for name in names]
    our_rows = [np.asarray(workspace.fetch(name)) for name in names]
    count = len(ref_rows[0])
    if any(a.shape != b.shape or len(a) != count for a, b in zip(ref_rows, our_rows, strict=True)):
        return False
    scores = np.asarray(reference[op.outputs[spec.score]])
    groups = None if spec.group is None else np.asarray(reference[op.outputs[spec.group]])
    atols = [max(atol, rtol * float(np.abs(a).max())) if a.size else atol for a in ref_rows]
    runs = list(_tied_runs(scores, groups, rtol, atol))
    order = _permutation(ref_rows, our_rows, runs, rtol, atols)
    if order is None:
        return False
    for name, values in zip(names, our_rows, strict=True):
        workspace.feed(name, values[order])
    return True

"""Detections whose scores tie compare equal in either order (``graphtools.onnx.tie_order``).

The exported model is nudged so that onnxruntime's copy of one tied score is one float32 step
higher than ours: onnxruntime then lists that detection first, our executor the other. The
comparisons must call the outputs equal (and a blob computed from the boxes too), but still
report a real reordering (scores apart) and boxes that differ."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_round_trip import pair

from graphtools.executor import Workspace
from graphtools.ir import Op
from graphtools.onnx import compare_with_onnxruntime, export_onnx
from graphtools.onnx.compare import compare_blobs_with_onnxruntime
from graphtools.onnx.tie_order import align_tied_rows

SCORES = np.float32(
    [  # background, class 1, class 2; rows 1 and 2 tie in class 1
        [0.0, 0.9, 0.1],
        [0.0, 0.5, 0.1],
        [0.0, 0.5, 0.1],
        [0.0, 0.1, 0.8],
    ]
)
BOXES = np.tile(np.float32([[0, 0, 10, 10], [20, 20, 30, 30], [40, 0, 50, 10], [0, 40, 8, 48]]), 3)
"""Four boxes far apart (NMS keeps every one), the same for each class."""
OUTPUTS = ["score_nms", "bbox_nms", "class_nms", "squares"]


def _model_and_export(nudge: float, outputs: list[str] = OUTPUTS) -> tuple:
    """The pair (NMS, then its boxes squared) and its export, where onnxruntime
    reads row 2's class-1 score plus ``nudge``."""
    ops = [
        Op("BoxWithNMSLimit", ["scores", "boxes"], OUTPUTS[:3], args={"score_thresh": 0.05}),
        Op("Mul", ["bbox_nms", "bbox_nms"], ["squares"]),
    ]
    model = pair(ops, ["scores", "boxes"], outputs, {})
    value_info = {
        "scores": (onnx.TensorProto.FLOAT, [4, 3]),
        "boxes": (onnx.TensorProto.FLOAT, [4, 12]),
        "squares": (onnx.TensorProto.FLOAT, ["detections", 4]),
    }
    exported = export_onnx(model, value_info=value_info)
    graph = exported.graph
    graph.input[0].name = "scores_fed"
    delta = np.zeros_like(SCORES)
    delta[2, 1] = nudge
    graph.initializer.append(numpy_helper.from_array(delta, "nudge"))
    graph.node.insert(0, helper.make_node("Add", ["scores_fed", "nudge"], ["scores"]))
    onnx.checker.check_model(exported)
    return model, exported


FEEDS = {"scores": SCORES, "scores_fed": SCORES, "boxes": BOXES}


def test_tied_detections_in_the_other_order_compare_equal() -> None:
    one_step = float(np.spacing(np.float32(0.5)))
    model, exported = _model_and_export(one_step)
    diffs = compare_with_onnxruntime(exported, model, FEEDS)
    assert [d.name for d in diffs] == OUTPUTS and all(d.ok for d in diffs), diffs
    report = compare_blobs_with_onnxruntime(exported, model, FEEDS)
    assert report.ok, (report.first_divergence, report.outputs)


def test_detections_apart_in_score_are_still_reported() -> None:
    model, exported = _model_and_export(0.01)  # onnxruntime's row 2 scores 0.51: a real change
    failed = {d.name for d in compare_with_onnxruntime(exported, model, FEEDS) if not d.ok}
    assert failed == {"score_nms", "bbox_nms", "squares"}
    report = compare_blobs_with_onnxruntime(exported, model, FEEDS)
    assert report.first_divergence is not None
    assert report.first_divergence.op_type == "BoxWithNMSLimit"


def _workspace(rows: dict[str, np.ndarray]) -> Workspace:
    workspace = Workspace()
    for name, value in rows.items():
        workspace.feed(name, value)
    return workspace


NMS = Op("BoxWithNMSLimit", ["sc", "bx"], ["s", "b", "c"])
REFERENCE = {
    "s": np.float32([0.9, 0.5, 0.5, 0.5]),
    "b": np.float32([[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5], [6, 6, 7, 7]]),
    "c": np.float32([1, 1, 1, 2]),
}


@pytest.mark.parametrize(
    ("ours", "moved"),
    [
        ({"b": REFERENCE["b"][[0, 2, 1, 3]]}, True),  # rows 1, 2 tie in class 1: put back
        ({"b": REFERENCE["b"][[0, 1, 3, 2]]}, False),  # rows 2, 3 tie but in two classes
        ({"b": REFERENCE["b"][[1, 0, 2, 3]]}, False),  # rows 0, 1 do not tie
        ({"b": REFERENCE["b"][[0, 2, 1, 3]] + [[0], [0], [1], [0]]}, False),  # a tied box differs
    ],
    ids=["tied", "other-class", "apart", "box-differs"],
)
def test_only_tied_rows_of_one_class_move(ours: dict[str, np.ndarray], moved: bool) -> None:
    rows = {**REFERENCE, **ours}
    workspace = _workspace(rows)
    assert align_tied_rows(NMS, workspace, REFERENCE, 1e-4, 1e-5) is moved
    expected = REFERENCE["b"] if moved else rows["b"]
    np.testing.assert_array_equal(workspace.fetch("b"), expected)


def test_a_model_no_longer_computing_the_detections_still_compares_its_outputs() -> None:
    """An ONNX model optimised after its export may not compute the pair's NMS blobs by name:
    asking onnxruntime for them failed the load ('graph output does not exist')."""
    model, exported = _model_and_export(0.0, ["squares"])
    for node in exported.graph.node:  # the boxes under another name inside the graph
        node.output[:] = [f"{n}_inner" if n == "bbox_nms" else n for n in node.output]
        node.input[:] = [f"{n}_inner" if n == "bbox_nms" else n for n in node.input]
    onnx.checker.check_model(exported)
    diffs = compare_with_onnxruntime(exported, model, FEEDS)
    assert [d.name for d in diffs] == ["squares"] and diffs[0].ok, diffs

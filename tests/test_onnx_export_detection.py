"""Detection ops in ONNX (``export_detection``): each exported as a ``caffe2``-domain function,
checked, run by onnxruntime against our executor blob by blob (fp32 rtol 1e-4; indices,
counts and classes exact) and imported back: proposals over two images, box transforms in
their argument variants, RoIAlign with and without the batch column, hard and soft NMS
(linear and gaussian) with and without batch splits; rotated boxes refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.convert.caffe2_to_onnx.context import CAFFE2_DOMAIN, VARIANT_SEPARATOR
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx import export_onnx

RNG = np.random.default_rng(0)
IM_INFO = np.array([[90, 100, 1.0], [80, 110, 1.5]], np.float32)


def _rois(count: int) -> np.ndarray:
    """``count`` RoIs ``(batch, x1, y1, x2, y2)`` over two images."""
    rois = np.concatenate(
        [RNG.integers(0, 2, (count, 1)), RNG.random((count, 4)) * 50], axis=1
    ).astype(np.float32)
    rois[:, 3:] += rois[:, 1:3]
    return rois


def _functions(exported: onnx.ModelProto) -> set[str]:
    """The Caffe2 op types the graph calls as functions (a form after ``__`` left out)."""
    nodes = exported.graph.node
    return {n.op_type.split(VARIANT_SEPARATOR)[0] for n in nodes if n.domain == CAFFE2_DOMAIN}


def test_generate_proposals_over_two_images() -> None:
    anchors = np.array([[-8, -8, 8, 8], [-16, -8, 16, 8], [-4, -12, 4, 12]], np.float32)
    count, height, width = 3, 6, 7
    feeds = {
        "s": RNG.random((2, count, height, width)).astype(np.float32),
        "d": (RNG.standard_normal((2, 4 * count, height, width)) * 0.3).astype(np.float32),
        "im": IM_INFO,
    }
    args = {
        "spatial_scale": 1 / 16,
        "pre_nms_topN": 50,
        "post_nms_topN": 20,
        "nms_thresh": 0.7,
        "min_size": 2.0,
    }
    ops = [Op("GenerateProposals", ["s", "d", "im", "a"], ["rois", "probs"], args=args)]
    model = pair(ops, ["s", "d", "im"], ["rois", "probs"], {"a": anchors})
    exported = round_trip(model, feeds)
    assert _functions(exported) == {"GenerateProposals"}


@pytest.mark.parametrize(
    "args",
    [
        {"weights": [10.0, 10.0, 5.0, 5.0]},
        {"apply_scale": 0, "correct_transform_coords": 0},
        {"legacy_plus_one": 0},
    ],
    ids=["weights", "no-scale-2018", "no-plus-one"],
)
def test_bbox_transform_variants(args: dict[str, Any]) -> None:
    rois = _rois(9)
    deltas = (RNG.standard_normal((9, 12)) * 0.5).astype(np.float32)
    ops = [Op("BBoxTransform", ["r", "d", "im"], ["b", "splits"], args=args)]
    model = pair(ops, ["r", "d", "im"], ["b", "splits"], {})
    round_trip(model, {"r": rois, "d": deltas, "im": IM_INFO})


@pytest.mark.parametrize(
    "args",
    [
        {"pooled_h": 3, "pooled_w": 2, "spatial_scale": 0.5, "sampling_ratio": 0},
        {"pooled_h": 2, "pooled_w": 2, "sampling_ratio": 2, "aligned": 1},
    ],
    ids=["adaptive", "aligned"],
)
@pytest.mark.parametrize("columns", [5, 4])
def test_roi_align(args: dict[str, Any], columns: int) -> None:
    """RoIs with a batch column over two images, or of 4 columns over image 0."""
    x = RNG.standard_normal((2 if columns == 5 else 1, 4, 12, 10)).astype(np.float32)
    rois = _rois(9)[:, 5 - columns :] / 4
    ops = [Op("RoIAlign", ["x", "r"], ["y"], args=args)]
    round_trip(pair(ops, ["x", "r"], ["y"], {}), {"x": x, "r": rois})


def _boxes(count: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    scores = RNG.random((count, classes)).astype(np.float32)
    boxes = (RNG.random((count, 4 * classes)) * 60).astype(np.float32)
    boxes[:, 2::4] += boxes[:, 0::4]
    boxes[:, 3::4] += boxes[:, 1::4]
    return scores, boxes


@pytest.mark.parametrize(
    "args",
    [
        {"score_thresh": 0.3, "nms": 0.4, "detections_per_im": 30},
        {"score_thresh": 0.05, "nms": 0.3, "detections_per_im": 10, "soft_nms_enabled": 1},
        {
            "score_thresh": 0.05,
            "nms": 0.3,
            "detections_per_im": 100,
            "soft_nms_enabled": 1,
            "soft_nms_method": "gaussian",
        },
        {"score_thresh": 0.2, "cls_agnostic_bbox_reg": 1, "output_classes_include_bg_cls": 0},
    ],
    ids=["hard", "soft-linear", "soft-gaussian", "class-agnostic"],
)
@pytest.mark.parametrize("splits", [False, True], ids=["one-image", "batch-splits"])
def test_box_with_nms_limit(args: dict[str, Any], splits: bool) -> None:
    scores, boxes = _boxes(40, 5)
    if args.get("cls_agnostic_bbox_reg"):
        boxes = boxes[:, :4]
    feeds: dict[str, np.ndarray] = {"sc": scores, "bx": boxes}
    if splits:
        feeds["sp"] = np.float32([15, 0, 25])
    outputs = ["s", "b", "c", "bs", "k", "ks"]
    ops = [Op("BoxWithNMSLimit", list(feeds), outputs, args=args)]
    exported = round_trip(pair(ops, list(feeds), outputs, {}), feeds)
    assert _functions(exported) == {"BoxWithNMSLimit"}


def test_rotated_boxes_are_refused() -> None:
    ops = [Op("BBoxTransform", ["r", "d", "im"], ["b", "splits"], args={"rotated": 1})]
    model = pair(ops, ["r", "d", "im"], ["b", "splits"], {})
    value_info = {"r": (1, [9, 6]), "d": (1, [9, 15]), "im": (1, [2, 3])}
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(BBoxTransform\).*rotated boxes"):
        export_onnx(model, value_info=value_info)

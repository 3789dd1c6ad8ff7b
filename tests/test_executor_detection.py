"""Detection kernels: RoIAlign against onnxruntime's RoiAlign; GenerateProposals, BBoxTransform
and BoxWithNMSLimit against plain-Python references written box by box from Detectron's
definitions (not from the kernels' vectorised code)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from graphtools.errors import ExecutionError, UnsupportedOpError
from graphtools.executor import Workspace, run_op
from graphtools.ir import Op


def run(op: Op, *values: Any) -> list[Any]:
    ws = Workspace()
    for name, value in zip(op.inputs, values, strict=True):
        ws.feed(name, value)
    run_op(op, ws)
    return [ws.fetch(name) for name in op.outputs]


def random_rois(rng: np.random.Generator, count: int, size: float, batch: int) -> np.ndarray:
    x1 = rng.uniform(-4, size * 0.8, count)
    y1 = rng.uniform(-4, size * 0.8, count)
    w = rng.uniform(0.2, size * 0.6, count)
    h = rng.uniform(0.2, size * 0.6, count)
    ids = rng.integers(0, batch, count)
    return np.stack([ids, x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)


# -- RoIAlign against onnxruntime ------------------------------------------------------------


def onnx_roi_align(x: np.ndarray, rois: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    import onnx
    import onnxruntime as ort

    helper = onnx.helper
    node = helper.make_node("RoiAlign", ["x", "rois", "ids"], ["y"], mode="avg", **attrs)
    f32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "roi",
        [
            helper.make_tensor_value_info("x", f32, x.shape),
            helper.make_tensor_value_info("rois", f32, (rois.shape[0], 4)),
            helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, (rois.shape[0],)),
        ],
        [onnx.ValueInfoProto(name="y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"x": x, "rois": rois[:, 1:].copy(), "ids": rois[:, 0].astype(np.int64)}
    return session.run(["y"], feeds)[0]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("aligned", [0, 1])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_onnxruntime(layout: str, aligned: int, ratio: int) -> None:
    rng = np.random.default_rng(3 + aligned + ratio)
    x = rng.standard_normal((2, 3, 12, 10)).astype(np.float32)
    rois = random_rois(rng, 7, 40.0, 2)
    args = {"pooled_h": 3, "pooled_w": 4, "spatial_scale": 0.25, "sampling_ratio": ratio}
    op = Op("RoIAlign", ["x", "r"], ["y"], args={**args, "aligned": aligned, "order": layout})
    feed = x.transpose(0, 2, 3, 1).copy() if layout == "NHWC" else x
    (ours,) = run(op, feed, rois)
    mode = "half_pixel" if aligned else "output_half_pixel"
    expected = onnx_roi_align(
        x,
        rois,
        {
            "output_height": 3,
            "output_width": 4,
            "sampling_ratio": ratio,
            "spatial_scale": 0.25,
            "coordinate_transformation_mode": mode,
        },
    )
    if layout == "NHWC":
        expected = expected.transpose(0, 2, 3, 1)
    assert ours.shape == expected.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_roi_align_four_column_rois_and_empty_rois() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    rois = random_rois(rng, 3, 20.0, 1)
    op = Op(
        "RoIAlign", ["x", "r"], ["y"], args={"pooled_h": 2, "pooled_w": 2, "spatial_scale": 0.5}
    )
    (with_ids,) = run(op, x, rois)
    (without,) = run(op, x, rois[:, 1:].copy())
    np.testing.assert_array_equal(with_ids, without)
    (empty,) = run(op, x, np.zeros((0, 5), np.float32))
    assert empty.shape == (0, 2, 2, 2)


def test_roi_align_rejects_bad_rois() -> None:
    op = Op("RoIAlign", ["x", "r"], ["y"])
    with pytest.raises(ExecutionError, match="RoIs must have shape"):
        run(op, np.zeros((1, 1, 4, 4), np.float32), np.zeros((2, 3), np.float32))
    with pytest.raises(ExecutionError, match="batch index"):
        run(op, np.zeros((1, 1, 4, 4), np.float32), np.array([[2, 0, 0, 1, 1]], np.float32))


# -- reference box arithmetic, one box at a time (Detectron's boxes.py) ----------------------


def ref_transform(box: list[float], delta: list[float], weights: list[float]) -> list[float]:
    width = box[2] - box[0] + 1.0
    height = box[3] - box[1] + 1.0
    cx, cy = box[0] + 0.5 * width, box[1] + 0.5 * height
    dx, dy = delta[0] / weights[0], delta[1] / weights[1]
    dw = min(delta[2] / weights[2], math.log(1000.0 / 16.0))
    dh = min(delta[3] / weights[3], math.log(1000.0 / 16.0))
    px, py = dx * width + cx, dy * height + cy
    pw, ph = math.exp(dw) * width, math.exp(dh) * height
    return [px - 0.5 * pw, py - 0.5 * ph, px + 0.5 * pw - 1.0, py + 0.5 * ph - 1.0]


def ref_clip(box: list[float], height: float, width: float) -> list[float]:
    lim = [width - 1, height - 1, width - 1, height - 1]
    return [max(min(v, m), 0.0) for v, m in zip(box, lim, strict=True)]


def ref_iou(a: list[float], b: list[float]) -> float:
    iw = max(min(a[2], b[2]) - max(a[0], b[0]) + 1.0, 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]) + 1.0, 0.0)
    inter = iw * ih
    area_a = (a[2] - a[0] + 1.0) * (a[3] - a[1] + 1.0)
    area_b = (b[2] - b[0] + 1.0) * (b[3] - b[1] + 1.0)
    return inter / (area_a + area_b - inter)


def ref_nms(boxes: list[list[float]], order: list[int], thresh: float, top: int) -> list[int]:
    kept: list[int] = []
    for i in order:
        if top >= 0 and len(kept) >= top:
            break
        if all(ref_iou(boxes[i], boxes[k]) <= thresh for k in kept):
            kept.append(i)
    return kept


# -- GenerateProposals -------------------------------------------------------------------------


def ref_generate_proposals(
    scores: np.ndarray,
    deltas: np.ndarray,
    im_info: np.ndarray,
    anchors: np.ndarray,
    stride: float,
    pre: int,
    post: int,
    thresh: float,
    min_size: float,
) -> tuple[np.ndarray, np.ndarray]:
    n, a, h, w = scores.shape
    rois, probs = [], []
    for image in range(n):
        candidates = []
        for y in range(h):
            for x in range(w):
                for k in range(a):
                    anchor = [float(v) for v in anchors[k]]
                    shifted = [anchor[0] + x * stride, anchor[1] + y * stride]
                    shifted += [anchor[2] + x * stride, anchor[3] + y * stride]
                    delta = [float(deltas[image, 4 * k + c, y, x]) for c in range(4)]
                    candidates.append((float(scores[image, k, y, x]), shifted, delta))
        candidates.sort(key=lambda c: -c[0])
        if 0 < pre < len(candidates):
            candidates = candidates[:pre]
        im_h, im_w, im_scale = (float(v) for v in im_info[image])
        boxes, kept_scores = [], []
        for score, anchor, delta in candidates:
            box = ref_clip(ref_transform(anchor, delta, [1, 1, 1, 1]), int(im_h), int(im_w))
            bw, bh = box[2] - box[0] + 1, box[3] - box[1] + 1
            if (
                bw >= min_size * im_scale
                and bh >= min_size * im_scale
                and box[0] + bw / 2 < im_w
                and box[1] + bh / 2 < im_h
            ):
                boxes.append(box)
                kept_scores.append(score)
        top = post if 0 < post < len(boxes) else -1
        for i in ref_nms(boxes, list(range(len(boxes))), thresh, top):
            rois.append([image, *boxes[i]])
            probs.append(kept_scores[i])
    return np.array(rois, np.float32).reshape(-1, 5), np.array(probs, np.float32)


@pytest.mark.parametrize(("pre", "post"), [(6000, 300), (20, 5), (0, 0)])
def test_generate_proposals_matches_reference(pre: int, post: int) -> None:
    rng = np.random.default_rng(11)
    n, a, h, w = 2, 3, 4, 5
    scores = rng.random((n, a, h, w)).astype(np.float32)
    deltas = (rng.standard_normal((n, 4 * a, h, w)) * 0.3).astype(np.float32)
    im_info = np.array([[60, 75, 1.0], [50, 70, 0.8]], np.float32)
    anchors = np.array([[-8, -8, 7, 7], [-16, -8, 15, 7], [-4, -12, 3, 11]], np.float32)
    args = {
        "spatial_scale": 1 / 16,
        "pre_nms_topN": pre,
        "post_nms_topN": post,
        "nms_thresh": 0.5,
        "min_size": 4.0,
        "correct_transform_coords": 1,
    }
    op = Op("GenerateProposals", ["s", "d", "i", "a"], ["rois", "probs"], args=args)
    rois, probs = run(op, scores, deltas, im_info, anchors)
    ref_rois, ref_probs = ref_generate_proposals(
        scores, deltas, im_info, anchors, 16.0, pre, post, 0.5, 4.0
    )
    assert rois.dtype == np.float32 and rois.shape[1] == 5 and rois.shape[0] > 0
    np.testing.assert_allclose(rois, ref_rois, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-6)


def test_generate_proposals_refuses_rotated_anchors_and_bad_shapes() -> None:
    scores = np.zeros((1, 1, 2, 2), np.float32)
    op = Op("GenerateProposals", ["s", "d", "i", "a"], ["r", "p"])
    with pytest.raises(UnsupportedOpError, match="rotated"):
        run(op, scores, np.zeros((1, 5, 2, 2), np.float32), np.ones((1, 3), np.float32),
            np.zeros((1, 5), np.float32))  # fmt: skip
    with pytest.raises(ExecutionError, match="bbox_deltas"):
        run(op, scores, np.zeros((1, 3, 2, 2), np.float32), np.ones((1, 3), np.float32),
            np.zeros((1, 4), np.float32))  # fmt: skip


# -- BBoxTransform -----------------------------------------------------------------------------


@pytest.mark.parametrize("apply_scale", [0, 1])
def test_bbox_transform_matches_reference(apply_scale: int) -> None:
    rng = np.random.default_rng(2)
    rois = random_rois(rng, 6, 50.0, 2)
    rois = rois[np.argsort(rois[:, 0], kind="stable")]
    deltas = (rng.standard_normal((6, 12)) * 0.5).astype(np.float32)
    im_info = np.array([[64, 80, 1.5], [48, 60, 1.0]], np.float32)
    weights = (10.0, 10.0, 5.0, 5.0)
    args = {"weights": weights, "apply_scale": apply_scale, "correct_transform_coords": 1}
    op = Op("BBoxTransform", ["r", "d", "i"], ["out", "splits"], args=args)
    out, splits = run(op, rois, deltas, im_info)
    expected = np.zeros_like(deltas)
    for r, roi in enumerate(rois):
        im_h, im_w, scale = (float(v) for v in im_info[int(roi[0])])
        box = [float(v) / scale for v in roi[1:]]
        for k in range(3):
            moved = ref_transform(box, [float(v) for v in deltas[r, 4 * k : 4 * k + 4]], weights)
            clipped = ref_clip(moved, int(im_h / scale + 0.5), int(im_w / scale + 0.5))
            expected[r, 4 * k : 4 * k + 4] = [v * (scale if apply_scale else 1) for v in clipped]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(splits, np.bincount(rois[:, 0].astype(int), minlength=2))


def test_bbox_transform_legacy_flags() -> None:
    rois = np.array([[0, 10, 10, 30, 40]], np.float32)
    deltas = np.array([[0.1, -0.2, 0.3, 0.1]], np.float32)
    im_info = np.array([[100, 100, 1.0]], np.float32)
    base = {"apply_scale": 0}
    (corrected,) = run(
        Op("BBoxTransform", ["r", "d", "i"], ["o"], args=base), rois, deltas, im_info
    )
    old = {**base, "correct_transform_coords": 0}
    (legacy,) = run(Op("BBoxTransform", ["r", "d", "i"], ["o"], args=old), rois, deltas, im_info)
    np.testing.assert_allclose(legacy[0, 2:] - corrected[0, 2:], [1.0, 1.0], rtol=1e-5)
    no_plus = {**base, "legacy_plus_one": 0}
    (plain,) = run(Op("BBoxTransform", ["r", "d", "i"], ["o"], args=no_plus), rois, deltas, im_info)
    width, height = 20.0, 30.0
    cx, cy = 10 + width / 2 + 0.1 * width, 10 + height / 2 - 0.2 * height
    pw, ph = math.exp(0.3) * width, math.exp(0.1) * height
    np.testing.assert_allclose(
        plain[0], [cx - pw / 2, cy - ph / 2, cx + pw / 2, cy + ph / 2], rtol=1e-5
    )
    with pytest.raises(UnsupportedOpError, match="rotated"):
        run(Op("BBoxTransform", ["r", "d", "i"], ["o"], args={"rotated": 1}), rois, deltas, im_info)


# -- BoxWithNMSLimit ---------------------------------------------------------------------------


def ref_box_with_nms(
    scores: np.ndarray, boxes: np.ndarray, thresh: float, nms_t: float, limit: int
) -> list[tuple[float, list[float], int]]:
    per_class: dict[int, list[int]] = {}
    for j in range(1, scores.shape[1]):
        cand = [i for i in range(scores.shape[0]) if scores[i, j] > thresh]
        cand.sort(key=lambda i: -scores[i, j])
        cls_boxes = [[float(v) for v in boxes[i, 4 * j : 4 * j + 4]] for i in range(len(boxes))]
        per_class[j] = ref_nms(cls_boxes, cand, nms_t, -1)
    pairs = [(j, i) for j in per_class for i in per_class[j]]
    if 0 < limit < len(pairs):
        pairs = sorted(pairs, key=lambda p: -scores[p[1], p[0]])[:limit]
    result = []
    for j in sorted(per_class):
        for jj, i in pairs:
            if jj == j:
                result.append(
                    (float(scores[i, j]), [float(v) for v in boxes[i, 4 * j : 4 * j + 4]], j)
                )
    return result


@pytest.mark.parametrize("limit", [100, 7])
def test_box_with_nms_limit_matches_reference(limit: int) -> None:
    rng = np.random.default_rng(8)
    count, classes = 30, 4
    scores = rng.random((count, classes)).astype(np.float32)
    base = random_rois(rng, count, 40.0, 1)[:, 1:]
    boxes = np.concatenate([base + rng.normal(0, 2, base.shape) for _ in range(classes)], axis=1)
    boxes = boxes.astype(np.float32)
    args = {"score_thresh": 0.3, "nms": 0.4, "detections_per_im": limit}
    outputs = ["s", "b", "c", "splits", "keeps", "sizes"]
    op = Op("BoxWithNMSLimit", ["scores", "boxes"], outputs, args=args)
    got_scores, got_boxes, got_classes, splits, keeps, sizes = run(op, scores, boxes)
    expected = ref_box_with_nms(scores, boxes, 0.3, 0.4, limit)
    assert len(expected) == got_scores.size and 0 < got_scores.size <= limit
    np.testing.assert_allclose(got_scores, [e[0] for e in expected], rtol=1e-6)
    np.testing.assert_allclose(got_boxes, [e[1] for e in expected], rtol=1e-6)
    np.testing.assert_array_equal(got_classes, [e[2] for e in expected])
    assert splits.tolist() == [len(expected)] and sizes.shape == (1, classes)
    assert sizes.sum() == len(expected) and keeps.dtype == np.int32
    np.testing.assert_array_equal(got_scores, scores[keeps, got_classes.astype(int)])


def test_box_with_nms_limit_soft_nms_linear() -> None:
    boxes_one = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [30, 30, 40, 40]], np.float32)
    boxes = np.concatenate([boxes_one, boxes_one], axis=1)
    scores = np.array([[0.1, 0.9], [0.1, 0.8], [0.1, 0.7]], np.float32)
    args = {"soft_nms_enabled": 1, "soft_nms_method": "linear", "nms": 0.3, "score_thresh": 0.05}
    op = Op("BoxWithNMSLimit", ["s", "b"], ["os", "ob", "oc"], args=args)
    out_scores, _, classes = run(op, scores, boxes)
    overlap = ref_iou([0, 0, 10, 10], [1, 1, 11, 11])
    np.testing.assert_allclose(out_scores, [0.9, 0.7, 0.8 * (1 - overlap)], rtol=1e-6)
    np.testing.assert_array_equal(classes, [1, 1, 1])


def test_box_with_nms_limit_rejects_mismatched_boxes() -> None:
    op = Op("BoxWithNMSLimit", ["s", "b"], ["os", "ob", "oc"])
    with pytest.raises(ExecutionError, match="boxes must be"):
        run(op, np.zeros((3, 2), np.float32), np.zeros((3, 4), np.float32))

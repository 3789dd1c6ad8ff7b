"""Detection kernels (Detectron / Mask R-CNN2Go exports): RoIAlign, GenerateProposals,
BBoxTransform, BoxWithNMSLimit.

They follow Caffe2's CPU operators: boxes are ``[x1, y1, x2, y2]`` in pixels, widths carry the
legacy "+ 1" (``legacy_plus_one``, on by default; an explicit ``correct_transform_coords=0``
keeps the 2018 transform whose ``x2``/``y2`` were not corrected), NMS keeps a box whose IoU with
every kept higher-scored box is ``<= thresh``. Ties between equal scores are broken by position
(a stable sort), where Caffe2's unstable sort leaves them unspecified. Rotated boxes (RRPN,
``rotated=1`` or 5-column anchors) are refused: their polygon NMS is not implemented.
"""

from __future__ import annotations

from math import ceil, log
from typing import Any

import numpy as np

from graphtools.analysis.op_args import from_nchw, order, to_nchw
from graphtools.errors import UnsupportedOpError
from graphtools.executor.registry import kernel
from graphtools.ir import Op

# Caffe2's BBOX_XFORM_CLIP_DEFAULT: the largest log-space width/height delta.
_XFORM_CLIP = log(1000.0 / 16.0)


def _f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _refuse_rotated(op: Op, box_dim: int = 4) -> None:
    if op.arg("rotated", 0) or box_dim == 5:
        raise UnsupportedOpError(
            f"{op.type} with rotated boxes (RRPN) is not supported by the executor"
        )


def _plus_one(op: Op) -> float:
    return 1.0 if op.arg("legacy_plus_one", 1) else 0.0


# -- RoIAlign ------------------------------------------------------------------------------


def _sample_weights(start: float, bin_size: float, pooled: int, grid: int, size: int) -> np.ndarray:
    """Bilinear weights (pooled, size) of one axis, averaged over the ``grid`` samples per bin.

    RoIAlign's 2-D weights are the product of one such matrix per axis (the out-of-range test
    is per axis too), so the pooled map is ``Wy @ X @ Wx.T``.
    """
    weights = np.zeros((pooled, size), dtype=np.float64)
    bins = np.arange(pooled)[:, None]
    samples = np.arange(grid)[None, :]
    coords = start + bins * bin_size + (samples + 0.5) * bin_size / grid  # (pooled, grid)
    valid = (coords >= -1.0) & (coords <= size)
    coords = np.maximum(coords, 0.0)
    low = coords.astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    coords = np.where(at_edge, low, coords)
    frac = coords - low
    rows = np.broadcast_to(bins, coords.shape)
    np.add.at(weights, (rows[valid], low[valid]), (1.0 - frac)[valid])
    np.add.at(weights, (rows[valid], high[valid]), frac[valid])
    return weights


@kernel("RoIAlign")
def _roi_align(op: Op, inputs: list[Any]) -> list[Any]:
    """Caffe2 ``RoIAlign``: average of bilinear samples per bin (``aligned`` shifts by -0.5)."""
    layout = order(op)
    x = to_nchw(_f32(inputs[0]), layout)
    rois = _f32(inputs[1])
    if x.ndim != 4:
        raise ValueError(f"RoIAlign needs a 4-D feature map, got {x.ndim}-D")
    ph, pw = int(op.arg("pooled_h", 1)), int(op.arg("pooled_w", 1))
    scale = float(op.arg("spatial_scale", 1.0))
    ratio = int(op.arg("sampling_ratio", -1))
    aligned = bool(op.arg("aligned", 0))
    if ph <= 0 or pw <= 0:
        raise ValueError(f"pooled_h and pooled_w must be positive, got {ph}, {pw}")
    n, c, h, w = x.shape
    if rois.size == 0:
        return [from_nchw(np.zeros((0, c, ph, pw), np.float32), layout)]
    if rois.ndim != 2 or rois.shape[1] not in (4, 5):
        raise ValueError(f"RoIs must have shape (R, 4) or (R, 5), got {list(rois.shape)}")
    offset = 0.5 if aligned else 0.0
    y = np.empty((rois.shape[0], c, ph, pw), dtype=np.float32)
    for r, roi in enumerate(rois.astype(np.float64)):
        batch = int(roi[0]) if rois.shape[1] == 5 else 0
        if not 0 <= batch < n:
            raise ValueError(f"RoI {r} names batch index {batch}, the input has {n} images")
        x1, y1, x2, y2 = roi[-4:] * scale - offset
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        grid_h = ratio if ratio > 0 else ceil(roi_h / ph)
        grid_w = ratio if ratio > 0 else ceil(roi_w / pw)
        wy = _sample_weights(y1, roi_h / ph, ph, grid_h, h)
        wx = _sample_weights(x1, roi_w / pw, pw, grid_w, w)
        count = max(grid_h * grid_w, 1)
        y[r] = np.einsum("ph,chw,qw->cpq", wy, x[batch], wx) / count
    return [from_nchw(y, layout)]


# -- box utilities -------------------------------------------------------------------------


def bbox_transform(
    boxes: np.ndarray,
    deltas: np.ndarray,
    weights: tuple[float, ...],
    plus_one: float,
    correct: bool,
) -> np.ndarray:
    """Caffe2's ``bbox_transform_upright``: apply ``[dx, dy, dw, dh]`` deltas to boxes."""
    widths = boxes[:, 2] - boxes[:, 0] + plus_one
    heights = boxes[:, 3] - boxes[:, 1] + plus_one
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    dx = deltas[:, 0] / weights[0]
    dy = deltas[:, 1] / weights[1]
    dw = np.minimum(deltas[:, 2] / weights[2], _XFORM_CLIP)
    dh = np.minimum(deltas[:, 3] / weights[3], _XFORM_CLIP)
    pred_x, pred_y = dx * widths + ctr_x, dy * heights + ctr_y
    pred_w, pred_h = np.exp(dw) * widths, np.exp(dh) * heights
    tail = plus_one if correct else 0.0
    return np.stack(
        [
            pred_x - 0.5 * pred_w,
            pred_y - 0.5 * pred_h,
            pred_x + 0.5 * pred_w - tail,
            pred_y + 0.5 * pred_h - tail,
        ],
        axis=1,
    )


def clip_boxes(boxes: np.ndarray, height: int, width: int, plus_one: float) -> np.ndarray:
    """Clip x to ``[0, width - 1]`` and y to ``[0, height - 1]`` (``- 0`` without plus-one)."""
    limits = np.array([width, height, width, height], dtype=np.float64) - plus_one
    return np.maximum(np.minimum(boxes, limits), 0.0)


def nms(
    boxes: np.ndarray, order_: np.ndarray, thresh: float, top_n: int, plus_one: float
) -> list[int]:
    """Greedy NMS over ``boxes[order_]`` (indices sorted by descending score)."""
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    areas = (x2 - x1 + plus_one) * (y2 - y1 + plus_one)
    keep: list[int] = []
    pending = np.asarray(order_, dtype=np.int64)
    while pending.size:
        if 0 <= top_n <= len(keep):
            break
        i, rest = int(pending[0]), pending[1:]
        iw = np.maximum(np.minimum(x2[rest], x2[i]) - np.maximum(x1[rest], x1[i]) + plus_one, 0)
        ih = np.maximum(np.minimum(y2[rest], y2[i]) - np.maximum(y1[rest], y1[i]) + plus_one, 0)
        inter = iw * ih
        overlap = inter / (areas[i] + areas[rest] - inter)
        keep.append(i)
        pending = rest[overlap <= thresh]
    return keep


def soft_nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    indices: np.ndarray,
    sigma: float,
    thresh: float,
    min_score: float,
    gaussian: bool,
    plus_one: float,
) -> tuple[list[int], np.ndarray]:
    """Soft-NMS (linear or gaussian decay); returns kept indices and the decayed scores."""
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    areas = (x2 - x1 + plus_one) * (y2 - y1 + plus_one)
    scores = scores.astype(np.float64).copy()
    keep: list[int] = []
    pending = np.asarray(indices, dtype=np.int64)
    while pending.size:
        best = int(np.argmax(scores[pending]))
        i = int(pending[best])
        keep.append(i)
        pending = pending.copy()
        pending[0], pending[best] = pending[best], pending[0]
        rest = pending[1:]
        iw = np.maximum(np.minimum(x2[rest], x2[i]) - np.maximum(x1[rest], x1[i]) + plus_one, 0)
        ih = np.maximum(np.minimum(y2[rest], y2[i]) - np.maximum(y1[rest], y1[i]) + plus_one, 0)
        inter = iw * ih
        overlap = inter / (areas[i] + areas[rest] - inter)
        if gaussian:
            weight = np.exp(-overlap * overlap / sigma)
        else:
            weight = np.where(overlap > thresh, 1.0 - overlap, 1.0)
        scores[rest] *= weight
        pending = rest[scores[rest] >= min_score]
    return keep, scores


def _descending(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, kind="stable")


# -- GenerateProposals ---------------------------------------------------------------------


@kernel("GenerateProposals", "GenerateProposalsCPP")
def _generate_proposals(op: Op, inputs: list[Any]) -> list[Any]:
    """RPN proposals: decode anchors, clip, drop small boxes, NMS; rois are (n, 5)."""
    scores, deltas, im_info, anchors = (_f32(v) for v in inputs[:4])
    if scores.ndim != 4:
        raise ValueError(f"scores must be (N, A, H, W), got {list(scores.shape)}")
    n, a, h, w = scores.shape
    if anchors.ndim != 2 or anchors.shape[1] not in (4, 5) or anchors.shape[0] != a:
        raise ValueError(f"anchors must be ({a}, 4), got {list(anchors.shape)}")
    _refuse_rotated(op, anchors.shape[1])
    if deltas.shape != (n, 4 * a, h, w):
        raise ValueError(f"bbox_deltas must be {[n, 4 * a, h, w]}, got {list(deltas.shape)}")
    if im_info.shape != (n, 3):
        raise ValueError(f"im_info must be ({n}, 3), got {list(im_info.shape)}")
    stride = 1.0 / float(op.arg("spatial_scale", 1.0 / 16))
    pre_n = int(op.arg("pre_nms_topN", 6000))
    post_n = int(op.arg("post_nms_topN", 300))
    thresh = float(op.arg("nms_thresh", 0.7))
    min_size = float(op.arg("min_size", 16.0))
    plus_one = _plus_one(op)
    correct = bool(op.arg("correct_transform_coords", 1))
    shift_x, shift_y = np.meshgrid(np.arange(w) * stride, np.arange(h) * stride)
    shifts = np.stack([shift_x, shift_y, shift_x, shift_y], axis=-1).reshape(-1, 1, 4)
    all_anchors = (anchors.astype(np.float64)[None] + shifts).reshape(-1, 4)  # (H*W*A, 4)
    rois, probs = [], []
    for i in range(n):
        image_deltas = deltas[i].reshape(a, 4, h, w).transpose(2, 3, 0, 1).reshape(-1, 4)
        image_scores = scores[i].transpose(1, 2, 0).reshape(-1)
        ranked = _descending(image_scores)
        if 0 < pre_n < ranked.size:
            ranked = ranked[:pre_n]
        sorted_scores = image_scores[ranked]
        boxes = bbox_transform(
            all_anchors[ranked], image_deltas[ranked].astype(np.float64), (1, 1, 1, 1),
            plus_one, correct,
        )  # fmt: skip
        im_h, im_w, im_scale = (float(v) for v in im_info[i])
        boxes = clip_boxes(boxes, int(im_h), int(im_w), plus_one)
        widths = boxes[:, 2] - boxes[:, 0] + plus_one
        heights = boxes[:, 3] - boxes[:, 1] + plus_one
        scaled_min = min_size * im_scale
        mask = (
            (widths >= scaled_min)
            & (heights >= scaled_min)
            & (boxes[:, 0] + widths / 2 < im_w)
            & (boxes[:, 1] + heights / 2 < im_h)
        )
        keep = np.flatnonzero(mask)
        top_n = post_n if 0 < post_n < keep.size else -1
        kept = nms(boxes, keep, thresh, top_n, plus_one)
        rois.append(np.concatenate([np.full((len(kept), 1), i), boxes[kept]], axis=1))
        probs.append(sorted_scores[kept])
    return [_f32(np.concatenate(rois).reshape(-1, 5)), _f32(np.concatenate(probs))]


# -- BBoxTransform -------------------------------------------------------------------------


@kernel("BBoxTransform")
def _bbox_transform(op: Op, inputs: list[Any]) -> list[Any]:
    """Apply per-class deltas to RoIs, clip to the image; optional second output: RoIs per image."""
    _refuse_rotated(op)
    rois, deltas, im_info = (_f32(v).astype(np.float64) for v in inputs[:3])
    if rois.ndim != 2 or rois.shape[1] not in (4, 5):
        raise ValueError(f"rois must be (M, 4) or (M, 5), got {list(rois.shape)}")
    if deltas.ndim != 2 or deltas.shape[0] != rois.shape[0] or deltas.shape[1] % 4:
        raise ValueError(f"deltas must be ({rois.shape[0]}, 4 * K), got {list(deltas.shape)}")
    if im_info.ndim != 2 or im_info.shape[1] != 3:
        raise ValueError(f"im_info must be (batch, 3), got {list(im_info.shape)}")
    weights = tuple(float(v) for v in op.arg("weights", (1.0, 1.0, 1.0, 1.0)))
    if len(weights) != 4:
        raise ValueError(f"weights must have 4 values, got {len(weights)}")
    apply_scale = bool(op.arg("apply_scale", 1))
    plus_one = _plus_one(op)
    correct = bool(op.arg("correct_transform_coords", 1))
    batch = im_info.shape[0]
    if rois.shape[1] == 4:
        if batch != 1:
            raise ValueError("rois without a batch column need im_info for exactly one image")
        image_of = np.zeros(rois.shape[0], dtype=np.int64)
    else:
        image_of = rois[:, 0].astype(np.int64)
        if image_of.size and (image_of.min() < 0 or image_of.max() >= batch):
            raise ValueError(f"roi batch indices must be in [0, {batch})")
    boxes = rois[:, -4:]
    classes = deltas.shape[1] // 4
    out = np.empty_like(deltas)
    for i in range(batch):
        rows = np.flatnonzero(image_of == i)
        im_h, im_w, scale = im_info[i]
        img_h, img_w = int(im_h / scale + 0.5), int(im_w / scale + 0.5)
        after = scale if apply_scale else 1.0
        for k in range(classes):
            cols = slice(4 * k, 4 * k + 4)
            moved = bbox_transform(
                boxes[rows] / scale, deltas[rows, cols], weights, plus_one, correct
            )
            out[rows, cols] = clip_boxes(moved, img_h, img_w, plus_one) * after
    splits = np.bincount(image_of, minlength=batch).astype(np.float32)
    return [_f32(out), splits]


# -- BoxWithNMSLimit -----------------------------------------------------------------------


def _as_2d(value: Any, what: str) -> np.ndarray:
    array = _f32(value)
    if array.ndim == 4 and array.shape[2:] == (1, 1):
        array = array.reshape(array.shape[:2])
    if array.ndim != 2:
        raise ValueError(f"{what} must be 2-D (or 4-D with trailing 1x1), got {list(array.shape)}")
    return array


@kernel("BoxWithNMSLimit")
def _box_with_nms_limit(op: Op, inputs: list[Any]) -> list[Any]:
    """Per-class NMS (or soft-NMS) then the top ``detections_per_im`` over all classes."""
    _refuse_rotated(op)
    scores = _as_2d(inputs[0], "scores").astype(np.float64)
    boxes = _as_2d(inputs[1], "boxes").astype(np.float64)
    count, num_classes = scores.shape
    score_thresh = float(op.arg("score_thresh", 0.05))
    nms_thresh = float(op.arg("nms", 0.3))
    per_image = int(op.arg("detections_per_im", 100))
    soft = bool(op.arg("soft_nms_enabled", 0))
    method = op.arg("soft_nms_method", b"linear")
    method = method.decode() if isinstance(method, bytes) else str(method)
    if method not in ("linear", "gaussian"):
        raise ValueError(f"soft_nms_method must be 'linear' or 'gaussian', got {method!r}")
    sigma = float(op.arg("soft_nms_sigma", 0.5))
    min_score = float(op.arg("soft_nms_min_score_thres", 0.001))
    agnostic = bool(op.arg("cls_agnostic_bbox_reg", 0))
    boxes_with_bg = bool(op.arg("input_boxes_include_bg_cls", 1))
    classes_with_bg = bool(op.arg("output_classes_include_bg_cls", 1))
    plus_one = _plus_one(op)
    score_start = 1 if boxes_with_bg else 0

    def box_col(j: int) -> int:
        return 0 if agnostic else (j if boxes_with_bg else j - 1)

    box_classes = box_col(num_classes - 1) + 1
    if boxes.shape != (count, 4 * box_classes):
        raise ValueError(f"boxes must be ({count}, {4 * box_classes}), got {list(boxes.shape)}")
    if len(inputs) > 2:
        splits = np.asarray(inputs[2]).reshape(-1).astype(np.int64)
    else:
        splits = np.array([count], dtype=np.int64)
    if splits.sum() != count:
        raise ValueError(f"batch_splits sum to {int(splits.sum())}, there are {count} boxes")
    out_scores, out_boxes, out_classes, out_keeps = [], [], [], []
    keeps_size = np.zeros((splits.size, num_classes), dtype=np.int32)
    per_batch = np.zeros(splits.size, dtype=np.float32)
    offset = 0
    for b, size in enumerate(splits):
        rows = slice(offset, offset + int(size))
        image_scores = scores[rows].copy()
        keeps: dict[int, list[int]] = {}
        for j in range(1, num_classes):
            col = j - 1 + score_start
            class_scores = image_scores[:, col]
            class_boxes = boxes[rows, 4 * box_col(j) : 4 * box_col(j) + 4]
            candidates = np.flatnonzero(class_scores > score_thresh)
            if soft:
                keeps[j], image_scores[:, col] = soft_nms(
                    class_boxes, class_scores, candidates, sigma, nms_thresh, min_score,
                    method == "gaussian", plus_one,
                )  # fmt: skip
            else:
                ranked = candidates[_descending(class_scores[candidates])]
                limit = per_image if per_image > 0 else -1
                keeps[j] = nms(class_boxes, ranked, nms_thresh, limit, plus_one)
        total = sum(len(k) for k in keeps.values())
        if 0 < per_image < total:
            pairs = [(j, i) for j in range(1, num_classes) for i in keeps[j]]
            values = np.array([image_scores[i, j - 1 + score_start] for j, i in pairs])
            chosen = [pairs[p] for p in _descending(values)[:per_image]]
            keeps = {j: [i for jj, i in chosen if jj == j] for j in range(1, num_classes)}
            total = per_image
        per_batch[b] = total
        for j in range(1, num_classes):
            kept = np.asarray(keeps[j], dtype=np.int64)
            col = j - 1 + score_start
            out_scores.append(image_scores[kept, col])
            out_boxes.append(boxes[rows][kept, 4 * box_col(j) : 4 * box_col(j) + 4])
            out_classes.append(np.full(kept.size, j - (0 if classes_with_bg else 1)))
            out_keeps.append(kept)
            keeps_size[b, j] = kept.size
        offset += int(size)
    return [
        _f32(np.concatenate([np.zeros(0), *out_scores])),
        _f32(np.concatenate([np.zeros((0, 4)), *out_boxes])),
        _f32(np.concatenate([np.zeros(0), *out_classes])),
        per_batch,
        np.concatenate([np.zeros(0, np.int64), *out_keeps]).astype(np.int32),
        keeps_size,
    ]

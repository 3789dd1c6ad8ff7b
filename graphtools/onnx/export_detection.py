"""Exporters for Caffe2's detection ops (Detectron, Mask R-CNN2Go): ``caffe2``-domain functions
of opset 16 or later whose bodies compute what the executor's kernels compute.

* ``RoIAlign``: ONNX's ``RoiAlign`` (``output_half_pixel``, or ``half_pixel`` when ``aligned``),
  the batch column split off the RoIs (RoIs of 4 columns read image 0); NHWC between
  Transposes.
* ``BBoxTransform``: the deltas applied to each RoI and clipped to its image, per class, in
  float64 with the executor's sequence of operations (``bbox_transform_upright`` with the
  legacy ``+1``, the 2018 transform without the correction when
  ``correct_transform_coords=0``), and the RoIs per image.
* ``GenerateProposals``: a ``Loop`` over the images; per image the anchors shifted over the
  feature map, the ``pre_nms_topN`` best scores (``TopK``, ties by position as the executor's
  stable sort), the boxes decoded and clipped (float64), the small and off-image ones
  dropped, then ``NonMaxSuppression``. NMS is given each box's rank as its score, so it visits
  the boxes in the executor's order, and boxes with ``+1`` added to ``x2``/``y2`` for the
  legacy area; onnxruntime computes the IoU in float32 (the executor in float64: a box whose
  IoU lies within float32 rounding of the threshold could go the other way).
* ``BoxWithNMSLimit``: a ``Loop`` over the images (``batch_splits``); per image every class's
  NMS at once (``NonMaxSuppression`` with one batch per class, the per-class ranks as scores,
  the score threshold applied first), or soft-NMS (linear or gaussian, a ``Loop`` decaying
  every class's scores in float64 as the executor does), then the ``detections_per_im`` best
  over all classes (a stable ``TopK``), grouped by class again. Outputs are the executor's:
  scores, boxes, classes, detections per image, the kept box indices, counts per class.

Rotated boxes (``rotated=1``, 5-column anchors) are refused, as by the executor.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper

from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter
from graphtools.onnx.export_helpers import Emitter, reduce
from graphtools.onnx.export_nn import channels_first

__all__: list[str] = []

_SINCE = 16
"""RoiAlign's coordinate_transformation_mode, ScatterElements' reductions: opset 16."""
FLOAT, DOUBLE, INT64, INT32, BOOL = (
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.INT64,
    TensorProto.INT32,
    TensorProto.BOOL,
)
_XFORM_CLIP = float(np.log(1000.0 / 16.0))
"""Caffe2's BBOX_XFORM_CLIP_DEFAULT, as the executor has it."""
_BIG = np.iinfo(np.int64).max


def _refuse_rotated(cx: ExportContext, op: Op) -> None:
    if op.arg("rotated", 0):
        raise cx.refuse(f"{op.type} with rotated boxes (RRPN), which the executor refuses too")


def _attr(e: Emitter, name: str, to: int) -> str:
    return e("Cast", e.cx.attr(name), to=to, hint=name)


def _flag(e: Emitter, name: str) -> str:
    return _attr(e, name, BOOL)


# -- RoIAlign ---------------------------------------------------------------------------------


def _roi_align_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    rois = e("Cast", "R", to=FLOAT)
    columns = e("Shape", "R", start=1, end=2)
    batched = e("Squeeze", e("Equal", columns, e.i64(5)), e.i64(0))
    first = e.column(rois, 0)
    image = e("Where", batched, first, e.const(0.0, np.float32))
    boxes = e("Slice", rois, e.i64(-4), e.i64(_BIG), e.i64(1))
    fx.node(
        "RoiAlign",
        ["X", boxes, e("Cast", image, to=INT64)],
        ["Y"],
        mode="avg",
        output_height=AttrRef("pooled_h"),
        output_width=AttrRef("pooled_w"),
        sampling_ratio=AttrRef("sampling_ratio"),
        spatial_scale=AttrRef("spatial_scale"),
        coordinate_transformation_mode=AttrRef("_coordinate_transformation_mode"),
    )


_ROI_ALIGN = Function(
    "RoIAlign",
    ("X", "R"),
    ("Y",),
    {
        "pooled_h": "int",
        "pooled_w": "int",
        "sampling_ratio": "int",
        "spatial_scale": "float",
        "aligned": "int",
        "_coordinate_transformation_mode": "string",
    },
    _roi_align_body,
    _SINCE,
)


@exporter("RoIAlign")
@channels_first()
def _roi_align(cx: ExportContext, op: Op) -> None:
    aligned = int(op.arg("aligned", 0))
    pooled = int(op.arg("pooled_h", 1)), int(op.arg("pooled_w", 1))
    if min(pooled) <= 0:
        raise cx.refuse(f"pooled_h and pooled_w must be positive, got {pooled}")
    cx.call(
        _ROI_ALIGN,
        op.inputs[:2],
        op.outputs[:1],
        pooled_h=pooled[0],
        pooled_w=pooled[1],
        sampling_ratio=int(op.arg("sampling_ratio", -1)),
        spatial_scale=float(op.arg("spatial_scale", 1.0)),
        aligned=aligned,
        _coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )


# -- box arithmetic (float64, the executor's order of operations) ----------------------------


def _bbox_transform(
    e: Emitter, boxes: str, deltas: str, weights: list[str], plus_one: str, tail: str
) -> str:
    """``bbox_transform_upright`` over the last axis (boxes broadcast against deltas)."""
    x1, y1, x2, y2 = (e.column(boxes, k) for k in range(4))
    half = e.f64(0.5)
    widths = e("Add", e("Sub", x2, x1), plus_one, hint="widths")
    heights = e("Add", e("Sub", y2, y1), plus_one, hint="heights")
    ctr_x = e("Add", x1, e("Mul", half, widths), hint="ctr_x")
    ctr_y = e("Add", y1, e("Mul", half, heights), hint="ctr_y")
    clip = e.f64(_XFORM_CLIP)
    dx, dy, dw, dh = (e("Div", e.column(deltas, k), weights[k]) for k in range(4))
    dw, dh = e("Min", dw, clip), e("Min", dh, clip)
    pred_x = e("Add", e("Mul", dx, widths), ctr_x, hint="pred_x")
    pred_y = e("Add", e("Mul", dy, heights), ctr_y, hint="pred_y")
    pred_w = e("Mul", e("Exp", dw), widths, hint="pred_w")
    pred_h = e("Mul", e("Exp", dh), heights, hint="pred_h")
    half_w, half_h = e("Mul", half, pred_w), e("Mul", half, pred_h)
    return e.stack(
        e("Sub", pred_x, half_w),
        e("Sub", pred_y, half_h),
        e("Sub", e("Add", pred_x, half_w), tail),
        e("Sub", e("Add", pred_y, half_h), tail),
    )


def _clip(e: Emitter, boxes: str, height: str, width: str, plus_one: str) -> str:
    """Boxes clipped to ``[0, width - 1] x [0, height - 1]`` (``- 0`` without plus-one)."""
    x_limit, y_limit = e("Sub", width, plus_one), e("Sub", height, plus_one)
    limits = e.stack(x_limit, y_limit, x_limit, y_limit)
    return e("Max", e("Min", boxes, limits), e.f64(0.0), hint="clipped")


def _legacy(e: Emitter) -> tuple[str, str]:
    """``(plus_one, tail)`` as float64: the legacy ``+1`` and the corrected ``x2/y2`` shift."""
    plus_one = _attr(e, "legacy_plus_one", DOUBLE)
    tail = e("Where", _flag(e, "correct_transform_coords"), plus_one, e.f64(0.0), hint="tail")
    return plus_one, tail


_BOX_ATTRS = {"legacy_plus_one": "int", "correct_transform_coords": "int"}


def _box_args(op: Op) -> dict[str, Any]:
    return {
        "legacy_plus_one": int(op.arg("legacy_plus_one", 1)),
        "correct_transform_coords": int(op.arg("correct_transform_coords", 1)),
    }


# -- BBoxTransform ----------------------------------------------------------------------------


def _bbox_transform_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    plus_one, tail = _legacy(e)
    rois = e("Cast", "rois", to=DOUBLE)
    deltas = e("Cast", "deltas", to=DOUBLE)
    info = e("Cast", "im_info", to=DOUBLE)
    columns = e("Shape", "rois", start=1, end=2)
    batched = e("Squeeze", e("Equal", columns, e.i64(5)), e.i64(0))
    image_of = e("Cast", e("Where", batched, e.column(rois, 0), e.f64(0.0)), to=INT64)
    boxes = e("Slice", rois, e.i64(-4), e.i64(_BIG), e.i64(1))
    row_info = e("Gather", info, image_of, axis=0)
    im_h, im_w, scale = (e("Unsqueeze", e.column(row_info, k), e.i64(1)) for k in range(3))
    scaled = e("Div", boxes, scale, hint="scaled")
    per_class = e.groups_of(deltas, 4)
    weights_all = e("Cast", fx.attr("weights"), to=DOUBLE)
    weights = [e("Gather", weights_all, e.scalar64(k), axis=0) for k in range(4)]
    moved = _bbox_transform(e, e("Unsqueeze", scaled, e.i64(1)), per_class, weights, plus_one, tail)
    half = e.f64(0.5)
    img_h = e("Floor", e("Add", e("Div", im_h, scale), half), hint="img_h")
    img_w = e("Floor", e("Add", e("Div", im_w, scale), half), hint="img_w")
    clipped = _clip(e, moved, img_h, img_w, plus_one)
    after = e("Where", _flag(e, "apply_scale"), scale, e.f64(1.0), hint="after")
    out = e("Mul", clipped, e("Unsqueeze", after, e.i64(2)))
    fx.node("Cast", [e("Reshape", out, e("Shape", "deltas"))], ["box_out"], to=FLOAT)
    images = e("Range", e.scalar64(0), e.rows("im_info"), e.scalar64(1))
    one_hot = e("Equal", e("Unsqueeze", image_of, e.i64(1)), images)
    counts = e("ReduceSum", e("Cast", one_hot, to=FLOAT), e.i64(0), keepdims=0)
    fx.node("Identity", [counts], ["roi_batch_splits"])


_BBOX_TRANSFORM = Function(
    "BBoxTransform",
    ("rois", "deltas", "im_info"),
    ("box_out", "roi_batch_splits"),
    {"weights": "floats", "apply_scale": "int", **_BOX_ATTRS},
    _bbox_transform_body,
    _SINCE,
)


@exporter("BBoxTransform")
def _bbox_transform_op(cx: ExportContext, op: Op) -> None:
    _refuse_rotated(cx, op)
    weights = [float(w) for w in op.arg("weights", (1.0, 1.0, 1.0, 1.0))]
    if len(weights) != 4:
        raise cx.refuse(f"weights must have 4 values, got {weights}")
    cx.call(
        _BBOX_TRANSFORM,
        op.inputs[:3],
        op.outputs[:2],
        weights=weights,
        apply_scale=int(op.arg("apply_scale", 1)),
        **_box_args(op),
    )


# -- GenerateProposals ------------------------------------------------------------------------


def _anchors(e: Emitter) -> str:
    """Every anchor shifted over the feature map, ``(H * W * A, 4)`` float64 in the order
    (row, column, anchor)."""
    shape = e("Shape", "scores")
    height, width = (e("Gather", shape, e.scalar64(k), axis=0) for k in (2, 3))
    stride = e("Div", e.f64(1.0), _attr(e, "spatial_scale", DOUBLE), hint="stride")
    shift_x = e(
        "Mul", e("Cast", e("Range", e.scalar64(0), width, e.scalar64(1)), to=DOUBLE), stride
    )
    shift_y = e(
        "Mul", e("Cast", e("Range", e.scalar64(0), height, e.scalar64(1)), to=DOUBLE), stride
    )
    grid = e("Concat", e.vector(height), e.vector(width), axis=0)
    xs = e("Expand", e("Unsqueeze", shift_x, e.i64(0)), grid)
    ys = e("Expand", e("Unsqueeze", shift_y, e.i64(1)), grid)
    shifts = e("Reshape", e.stack(xs, ys, xs, ys), e.i64(-1, 1, 4))
    anchors = e("Unsqueeze", e("Cast", "anchors", to=DOUBLE), e.i64(0))
    return e("Reshape", e("Add", anchors, shifts), e.i64(-1, 4), hint="all_anchors")


def _at_most(e: Emitter, limit: str, count: str) -> str:
    """``limit`` when ``0 < limit < count``, else ``count`` (0-d int64)."""
    inside = e("And", e("Greater", limit, e.scalar64(0)), e("Less", limit, count))
    return e("Where", inside, limit, count, hint="count")


def _nms_boxes(e: Emitter, boxes: str, plus_one: str) -> str:
    """float32 boxes with ``+1`` on ``x2``/``y2`` (ONNX's NMS has no legacy area)."""
    zero = e.f64(0.0)
    shift = e("Concat", *(e.vector(v) for v in (zero, zero, plus_one, plus_one)), axis=0)
    return e("Cast", e("Add", boxes, shift), to=FLOAT, hint="nms_boxes")


def _proposals_of_image(fx: ExportContext, all_anchors: str, knobs: dict[str, str]) -> Any:
    """The Loop body producing one image's RoIs and probabilities, appended to the carried
    ones (``knobs``: the attributes as values of the enclosing body)."""
    plus_one, tail = knobs["plus_one"], knobs["tail"]
    sub = fx.subgraph(
        "image",
        [
            ("image", INT64, []),
            ("cond", BOOL, []),
            ("rois_in", FLOAT, None),
            ("probs_in", FLOAT, None),
        ],
    )
    e = Emitter(sub)
    image, cond, rois_in, probs_in = sub.input_names()
    scores = e(
        "Reshape",
        e("Transpose", e("Gather", "scores", image, axis=0), perm=[1, 2, 0]),
        e.i64(-1),
        hint="image_scores",
    )
    shape = e("Shape", "scores")
    anchors, height, width = (e("Gather", shape, e.scalar64(k), axis=0) for k in (1, 2, 3))
    grouped = e("Concat", e.vector(anchors), e.i64(4), e.vector(height), e.vector(width), axis=0)
    deltas = e("Gather", "bbox_deltas", image, axis=0)
    deltas = e(
        "Reshape",
        e("Transpose", e("Reshape", deltas, grouped), perm=[2, 3, 0, 1]),
        e.i64(-1, 4),
        hint="image_deltas",
    )
    info = e("Cast", e("Gather", "im_info", image, axis=0), to=DOUBLE)
    im_h, im_w, im_scale = (e("Gather", info, e.scalar64(k), axis=0) for k in range(3))
    total = e("Size", scores)
    k = _at_most(e, knobs["pre_nms_topN"], total)
    values, ranked = e.outputs("TopK", [scores, e.vector(k)], 2, axis=0, largest=1, sorted=1)
    one = e.f64(1.0)
    boxes = _bbox_transform(
        e,
        e("Gather", all_anchors, ranked, axis=0),
        e("Cast", e("Gather", deltas, ranked, axis=0), to=DOUBLE),
        [one, one, one, one],
        plus_one,
        tail,
    )
    boxes = _clip(e, boxes, e("Floor", im_h), e("Floor", im_w), plus_one)
    x1, y1, x2, y2 = (e.column(boxes, c) for c in range(4))
    widths = e("Add", e("Sub", x2, x1), plus_one)
    heights = e("Add", e("Sub", y2, y1), plus_one)
    smallest = e("Mul", knobs["min_size"], im_scale)
    two = e.f64(2.0)
    big = e("And", e("GreaterOrEqual", widths, smallest), e("GreaterOrEqual", heights, smallest))
    inside = e(
        "And",
        e("Less", e("Add", x1, e("Div", widths, two)), im_w),
        e("Less", e("Add", y1, e("Div", heights, two)), im_h),
    )
    keep = e("Compress", e("Range", e.scalar64(0), k, e.scalar64(1)), e("And", big, inside), axis=0)
    kept_boxes = e("Gather", boxes, keep, axis=0)
    kept_scores = e("Gather", values, keep, axis=0)
    count = e("Size", keep)
    limit = _at_most(e, knobs["post_nms_topN"], count)
    ranks = e("Cast", e("Range", count, e.scalar64(0), e.scalar64(-1)), to=FLOAT)
    selected = e(
        "NonMaxSuppression",
        e("Unsqueeze", _nms_boxes(e, kept_boxes, plus_one), e.i64(0)),
        e("Reshape", ranks, e.i64(1, 1, -1)),
        e.vector(limit),
        knobs["nms_thresh"],
    )
    chosen = e("Gather", selected, e.scalar64(2), axis=1, hint="chosen")
    rows = e("Size", chosen)
    batch = e(
        "Expand",
        e("Reshape", e("Cast", image, to=DOUBLE), e.i64(1, 1)),
        e("Concat", e.vector(rows), e.i64(1), axis=0),
    )
    rois = e("Concat", batch, e("Gather", kept_boxes, chosen, axis=0), axis=1)
    rois_out = e("Concat", rois_in, e("Cast", rois, to=FLOAT), axis=0, hint="rois_out")
    probs_out = e("Concat", probs_in, e("Gather", kept_scores, chosen, axis=0), axis=0)
    return sub.graph("image", [cond, rois_out, probs_out])


def _generate_proposals_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    plus_one, tail = _legacy(e)
    knobs = {
        "plus_one": plus_one,
        "tail": tail,
        "pre_nms_topN": fx.attr("pre_nms_topN"),
        "post_nms_topN": fx.attr("post_nms_topN"),
        "min_size": _attr(e, "min_size", DOUBLE),
        "nms_thresh": _attr(e, "nms_thresh", FLOAT),
    }
    body = _proposals_of_image(fx, _anchors(e), knobs)
    images = e.rows("scores")
    no_rois = e("ConstantOfShape", e.i64(0, 5), hint="no_rois")
    no_probs = e("ConstantOfShape", e.i64(0), hint="no_probs")
    fx.node("Loop", [images, "", no_rois, no_probs], ["rois", "rois_probs"], body=body)


_GENERATE_PROPOSALS = Function(
    "GenerateProposals",
    ("scores", "bbox_deltas", "im_info", "anchors"),
    ("rois", "rois_probs"),
    {
        "spatial_scale": "float",
        "pre_nms_topN": "int",
        "post_nms_topN": "int",
        "nms_thresh": "float",
        "min_size": "float",
        **_BOX_ATTRS,
    },
    _generate_proposals_body,
    _SINCE,
)


@exporter("GenerateProposals", "GenerateProposalsCPP")
def _generate_proposals(cx: ExportContext, op: Op) -> None:
    _refuse_rotated(cx, op)
    anchors = cx.info(op.inputs[3])
    if anchors is not None and anchors.shape is not None and anchors.shape[-1] == 5:
        raise cx.refuse("5-column (rotated) anchors, which the executor refuses too")
    cx.call(
        _GENERATE_PROPOSALS,
        op.inputs[:4],
        op.outputs[:2],
        spatial_scale=float(op.arg("spatial_scale", 1.0 / 16)),
        pre_nms_topN=int(op.arg("pre_nms_topN", 6000)),
        post_nms_topN=int(op.arg("post_nms_topN", 300)),
        nms_thresh=float(op.arg("nms_thresh", 0.7)),
        min_size=float(op.arg("min_size", 16.0)),
        **_box_args(op),
    )
    cx.declare(op.outputs[0], np.float32, (None, 5))
    if len(op.outputs) > 1:
        cx.declare(op.outputs[1], np.float32, (None,))


# -- BoxWithNMSLimit --------------------------------------------------------------------------


def _class_view(e: Emitter, scores: str, boxes: str, knobs: dict[str, str]) -> tuple[str, str]:
    """One image's class scores ``(C - 1, n)`` and class boxes ``(C - 1, n, 4)`` (float64) of
    the classes 1..C-1, as the executor picks their columns."""
    classes = e("Gather", e("Shape", scores), e.scalar64(1), axis=0, hint="classes")
    start = knobs["score_start"]
    stop = e("Add", start, e("Sub", classes, e.scalar64(1)))
    class_scores = e(
        "Transpose",
        e("Slice", scores, e.vector(start), e.vector(stop), e.i64(1)),
        perm=[1, 0],
        hint="class_scores",
    )
    ids = e("Range", e.scalar64(1), classes, e.scalar64(1), hint="class_ids")
    with_bg = e("Sub", ids, e("Sub", e.scalar64(1), knobs["boxes_with_bg"]))
    columns = e("Where", knobs["agnostic"], e("Mul", ids, e.scalar64(0)), with_bg)
    per_class = e("Transpose", e.groups_of(boxes, 4), perm=[1, 0, 2])
    return class_scores, e("Gather", per_class, columns, axis=0, hint="class_boxes")


def _hard_nms(e: Emitter, scores: str, boxes: str, knobs: dict[str, str]) -> tuple[str, str, str]:
    """Every class's greedy NMS at once: ``(class index, box index)`` kept, class-major in
    selection order, and their scores."""
    count = e("Gather", e("Shape", scores), e.scalar64(1), axis=0, hint="count")
    _, order_ = e.outputs("TopK", [scores, e.vector(count)], 2, axis=1, largest=1, sorted=1)
    positions = e("Expand", e("Range", e.scalar64(0), count, e.scalar64(1)), e("Shape", scores))
    ranks = e("ScatterElements", e("Mul", positions, e.scalar64(0)), order_, positions, axis=1)
    visiting = e("Cast", e("Sub", count, ranks), to=FLOAT, hint="visiting")
    candidates = e("Greater", scores, knobs["score_thresh"])
    nms_scores = e("Where", candidates, visiting, e.const(-1.0, np.float32))
    limit = e("Where", e("Greater", knobs["per_image"], e.scalar64(0)), knobs["per_image"], count)
    selected = e(
        "NonMaxSuppression",
        _nms_boxes(e, boxes, knobs["plus_one"]),
        e("Unsqueeze", nms_scores, e.i64(1)),
        e.vector(limit),
        knobs["nms"],
        e.const(0.0, np.float32),
    )
    kept_class = e("Gather", selected, e.scalar64(0), axis=1, hint="kept_class")
    kept_box = e("Gather", selected, e.scalar64(2), axis=1, hint="kept_box")
    values = e("GatherND", scores, e.stack(kept_class, kept_box), hint="kept_scores")
    return kept_class, kept_box, values


def _overlaps(e: Emitter, chosen: str, boxes: str, plus_one: str) -> str:
    """IoU (float64, legacy ``+1``) of each class's chosen box ``(C', 1, 4)`` with its boxes
    ``(C', n, 4)``, in the executor's order of operations."""
    cx1, cy1, cx2, cy2 = (e.column(chosen, k) for k in range(4))
    x1, y1, x2, y2 = (e.column(boxes, k) for k in range(4))
    zero = e.f64(0.0)
    iw = e("Max", e("Add", e("Sub", e("Min", x2, cx2), e("Max", x1, cx1)), plus_one), zero)
    ih = e("Max", e("Add", e("Sub", e("Min", y2, cy2), e("Max", y1, cy1)), plus_one), zero)
    inter = e("Mul", iw, ih)
    areas = e("Mul", e("Add", e("Sub", x2, x1), plus_one), e("Add", e("Sub", y2, y1), plus_one))
    area = e("Mul", e("Add", e("Sub", cx2, cx1), plus_one), e("Add", e("Sub", cy2, cy1), plus_one))
    return e("Div", inter, e("Sub", e("Add", area, areas), inter), hint="overlap")


def _soft_nms_step(fx: ExportContext, boxes: str, knobs: dict[str, str]) -> Any:
    """The soft-NMS loop body: each class with boxes pending keeps its best and decays the
    scores of the others (``1 - IoU`` above the threshold, or ``exp(-IoU^2 / sigma)``).

    Ties go as in the executor, whose pending list is reordered as it goes: the best moves to
    the front, the front box to the best's place. ``keys`` hold each box's place in that list
    (the front one takes the best's key), and the best is the tied box of the smallest key."""
    sub = fx.subgraph(
        "soft_nms",
        [
            ("step", INT64, []),
            ("cond", BOOL, []),
            ("scores", DOUBLE, [None, None]),
            ("pending", BOOL, [None, None]),
            ("keys", INT64, [None, None]),
        ],
    )
    e = Emitter(sub)
    _, _, scores, pending, keys = sub.input_names()
    masked = e("Where", pending, scores, e.f64(-np.inf))
    top = reduce(sub, "ReduceMax", masked, [1], True)
    last = e.scalar64(np.iinfo(np.int64).max)
    tied = e("And", pending, e("Equal", masked, top), hint="tied")
    best = e("ArgMin", e("Where", tied, keys, last), axis=1, keepdims=1, hint="best")
    front = e("ArgMin", e("Where", pending, keys, last), axis=1, keepdims=1, hint="front")
    best_key = e("GatherElements", keys, best, axis=1)
    moved_keys = e("ScatterElements", keys, front, best_key, axis=1, hint="moved_keys")
    has = e("Cast", reduce(sub, "ReduceMax", e("Cast", pending, to=INT32), [1], True), to=BOOL)
    gather_at = e(
        "Expand", e("Unsqueeze", best, e.i64(2)), e("Concat", e("Shape", best), e.i64(4), axis=0)
    )
    chosen = e("GatherElements", boxes, gather_at, axis=1, hint="chosen")
    overlap = _overlaps(e, chosen, boxes, knobs["plus_one"])
    one = e.f64(1.0)
    linear = e("Where", e("Greater", overlap, knobs["nms_d"]), e("Sub", one, overlap), one)
    gaussian = e("Exp", e("Div", e("Mul", e("Neg", overlap), overlap), knobs["sigma"]))
    weight = e("Where", knobs["gaussian"], gaussian, linear, hint="weight")
    columns = e(
        "Range",
        e.scalar64(0),
        e("Gather", e("Shape", scores), e.scalar64(1), axis=0),
        e.scalar64(1),
    )
    is_best = e("Equal", columns, best)
    decaying = e("And", e("And", pending, e("Not", is_best)), has, hint="decaying")
    decayed = e("Where", decaying, e("Mul", scores, weight), scores, hint="decayed")
    still = e("And", decaying, e("GreaterOrEqual", decayed, knobs["min_score"]), hint="still")
    picked = e("Squeeze", e("Where", has, best, e.scalar64(-1)), e.i64(1), hint="picked")
    again = e("Cast", e("ReduceMax", e("Cast", still, to=INT32), keepdims=0), to=BOOL)
    return sub.graph("soft_nms", [again, decayed, still, moved_keys, picked])


def _soft_nms(e: Emitter, scores: str, boxes: str, knobs: dict[str, str]) -> tuple[str, str, str]:
    """Soft-NMS of every class at once (float64): ``(class index, box index)`` kept,
    class-major in selection order, and their decayed scores. A padding column (never
    pending) keeps the loop's arg-max defined for an image without boxes."""
    fx = e.cx
    classes = e("Gather", e("Shape", scores), e.scalar64(0), axis=0)
    count = e("Gather", e("Shape", scores), e.scalar64(1), axis=0)
    column = e("Concat", e.vector(classes), e.i64(1), axis=0)
    padded_scores = e(
        "Concat", scores, e("ConstantOfShape", column, value=_filler(-np.inf)), axis=1
    )
    pending = e("Greater", scores, knobs["score_thresh"], hint="pending")
    padded_pending = e(
        "Concat", pending, e("ConstantOfShape", column, value=_filler(False)), axis=1
    )
    box_column = e("Concat", column, e.i64(4), axis=0)
    padded_boxes = e("Concat", boxes, e("ConstantOfShape", box_column, value=_filler(0.0)), axis=1)
    trips = e("Add", count, e.scalar64(1))
    body = _soft_nms_step(fx, padded_boxes, knobs)
    places = e("Range", e.scalar64(0), trips, e.scalar64(1))
    keys = e("Expand", places, e("Shape", padded_scores), hint="keys")
    final, _, _, picks = e.outputs(
        "Loop",
        [trips, e.const(True, np.bool_), padded_scores, padded_pending, keys],
        4,
        body=body,
    )
    by_class = e("Transpose", picks, perm=[1, 0], hint="by_class")
    class_ids = e("Unsqueeze", e("Range", e.scalar64(0), classes, e.scalar64(1)), e.i64(1))
    class_grid = e("Expand", class_ids, e("Shape", by_class))
    flat_picks = e("Reshape", by_class, e.i64(-1))
    valid = e("GreaterOrEqual", flat_picks, e.scalar64(0))
    kept_class = e("Compress", e("Reshape", class_grid, e.i64(-1)), valid, axis=0)
    kept_box = e("Compress", flat_picks, valid, axis=0)
    values = e("GatherND", final, e.stack(kept_class, kept_box), hint="kept_scores")
    return kept_class, kept_box, values


def _filler(value: Any) -> Any:
    """A ``ConstantOfShape`` value of the scalar's type."""
    return numpy_helper.from_array(
        np.asarray([value], np.float64 if isinstance(value, float) else None)
    )


def _detections_of_image(fx: ExportContext, soft: bool, knobs: dict[str, str]) -> Any:
    """The Loop body over images: NMS per class, the best ``detections_per_im``, the outputs
    appended to the carried ones; the image's count and per-class counts as scan outputs."""
    sub = fx.subgraph(
        "image",
        [
            ("image", INT64, []),
            ("cond", BOOL, []),
            ("scores_in", FLOAT, [None]),
            ("boxes_in", FLOAT, [None, 4]),
            ("classes_in", FLOAT, [None]),
            ("keeps_in", INT32, [None]),
        ],
    )
    e = Emitter(sub)
    image, cond, scores_in, boxes_in, classes_in, keeps_in = sub.input_names()
    start = e("Gather", knobs["offsets"], image, axis=0)
    stop = e("Add", start, e("Gather", knobs["splits"], image, axis=0))
    rows = e("Slice", knobs["scores"], e.vector(start), e.vector(stop), e.i64(0), hint="rows")
    row_boxes = e("Slice", knobs["boxes"], e.vector(start), e.vector(stop), e.i64(0))
    class_scores, class_boxes = _class_view(e, rows, row_boxes, knobs)
    nms = _soft_nms if soft else _hard_nms
    kept_class, kept_box, values = nms(e, class_scores, class_boxes, knobs)
    total = e("Size", values)
    per_image = knobs["per_image"]
    k = e(
        "Where",
        e("And", e("Greater", per_image, e.scalar64(0)), e("Less", per_image, total)),
        per_image,
        total,
    )
    _, best = e.outputs("TopK", [values, e.vector(k)], 2, axis=0, largest=1, sorted=1)
    grouped, _ = e.outputs("TopK", [best, e.vector(k)], 2, axis=0, largest=0, sorted=1)
    kept_class = e("Gather", kept_class, grouped, axis=0)
    kept_box = e("Gather", kept_box, grouped, axis=0)
    values = e("Gather", values, grouped, axis=0)
    pairs = e.stack(kept_class, kept_box)
    chosen_boxes = e("GatherND", class_boxes, pairs, hint="chosen_boxes")
    offset = e("Sub", e.scalar64(1), e("Sub", e.scalar64(1), knobs["classes_with_bg"]))
    labels = e("Cast", e("Add", kept_class, offset), to=FLOAT, hint="labels")
    outputs = [
        cond,
        e("Concat", scores_in, e("Cast", values, to=FLOAT), axis=0, hint="scores_out"),
        e("Concat", boxes_in, e("Cast", chosen_boxes, to=FLOAT), axis=0, hint="boxes_out"),
        e("Concat", classes_in, labels, axis=0, hint="classes_out"),
        e("Concat", keeps_in, e("Cast", kept_box, to=INT32), axis=0, hint="keeps_out"),
        e("Cast", e("Size", values), to=FLOAT, hint="detections"),
    ]
    all_classes = e(
        "Range", e.scalar64(0), e("Gather", e("Shape", rows), e.scalar64(1), axis=0), e.scalar64(1)
    )
    one_hot = e("Equal", e("Unsqueeze", e("Add", kept_class, e.scalar64(1)), e.i64(1)), all_classes)
    counts = e("ReduceSum", e("Cast", one_hot, to=INT32), e.i64(0), keepdims=0, hint="per_class")
    outputs.append(counts)
    return sub.graph("image", outputs)


def _box_with_nms_limit_body(soft: bool, splits_input: bool, fx: ExportContext) -> None:
    e = Emitter(fx)
    scores = e("Cast", e("Flatten", "scores", axis=1), to=DOUBLE, hint="all_scores")
    boxes = e("Cast", e("Flatten", "boxes", axis=1), to=DOUBLE, hint="all_boxes")
    if splits_input:
        splits = e("Cast", e("Reshape", "batch_splits", e.i64(-1)), to=INT64, hint="splits")
    else:
        splits = e.vector(e.rows(scores))
    knobs = {
        "scores": scores,
        "boxes": boxes,
        "splits": splits,
        "offsets": e("CumSum", splits, e.scalar64(0), exclusive=1, hint="offsets"),
        "plus_one": _attr(e, "legacy_plus_one", DOUBLE),
        "score_thresh": _attr(e, "score_thresh", DOUBLE),
        "nms": _attr(e, "nms", FLOAT),
        "nms_d": _attr(e, "nms", DOUBLE),
        "per_image": fx.attr("detections_per_im"),
        "sigma": _attr(e, "soft_nms_sigma", DOUBLE),
        "min_score": _attr(e, "soft_nms_min_score_thres", DOUBLE),
        "gaussian": _flag(e, "_gaussian"),
        "agnostic": _flag(e, "cls_agnostic_bbox_reg"),
        "boxes_with_bg": fx.attr("input_boxes_include_bg_cls"),
        "score_start": fx.attr("input_boxes_include_bg_cls"),
        "classes_with_bg": fx.attr("output_classes_include_bg_cls"),
    }
    body = _detections_of_image(fx, soft, knobs)
    empty = {
        "scores": e("ConstantOfShape", e.i64(0), hint="no_scores"),
        "boxes": e("ConstantOfShape", e.i64(0, 4), hint="no_boxes"),
        "classes": e("ConstantOfShape", e.i64(0), hint="no_classes"),
        "keeps": e("Cast", e("ConstantOfShape", e.i64(0)), to=INT32, hint="no_keeps"),
    }
    fx.node(
        "Loop",
        [e.rows(splits), "", *empty.values()],
        ["scores_out", "boxes_out", "classes", "keeps", "batch_splits_out", "keeps_size"],
        body=body,
    )


_NMS_ATTRS = {
    "score_thresh": "float",
    "nms": "float",
    "detections_per_im": "int",
    "soft_nms_enabled": "int",
    "soft_nms_method": "string",
    "soft_nms_sigma": "float",
    "soft_nms_min_score_thres": "float",
    "cls_agnostic_bbox_reg": "int",
    "input_boxes_include_bg_cls": "int",
    "output_classes_include_bg_cls": "int",
    "legacy_plus_one": "int",
    "_gaussian": "int",
}
_BOX_WITH_NMS_LIMIT = {
    (soft, splits): Function(
        "BoxWithNMSLimit",
        ("scores", "boxes", "batch_splits") if splits else ("scores", "boxes"),
        ("scores_out", "boxes_out", "classes", "batch_splits_out", "keeps", "keeps_size"),
        _NMS_ATTRS,
        partial(_box_with_nms_limit_body, soft, splits),
        _SINCE,
        variant="_".join(n for n, on in (("soft", soft), ("splits", splits)) if on),
    )
    for soft in (False, True)
    for splits in (False, True)
}


@exporter("BoxWithNMSLimit")
def _box_with_nms_limit(cx: ExportContext, op: Op) -> None:
    _refuse_rotated(cx, op)
    method = op.arg("soft_nms_method", b"linear")
    method = method.decode() if isinstance(method, bytes) else str(method)
    if method not in ("linear", "gaussian"):
        raise cx.refuse(f"soft_nms_method must be 'linear' or 'gaussian', got {method!r}")
    soft = bool(op.arg("soft_nms_enabled", 0))
    fn = _BOX_WITH_NMS_LIMIT[(soft, len(op.inputs) > 2)]
    cx.call(
        fn,
        op.inputs[:3],
        op.outputs[:6],
        score_thresh=float(op.arg("score_thresh", 0.05)),
        nms=float(op.arg("nms", 0.3)),
        detections_per_im=int(op.arg("detections_per_im", 100)),
        soft_nms_enabled=int(soft),
        soft_nms_method=method,
        soft_nms_sigma=float(op.arg("soft_nms_sigma", 0.5)),
        soft_nms_min_score_thres=float(op.arg("soft_nms_min_score_thres", 0.001)),
        cls_agnostic_bbox_reg=int(op.arg("cls_agnostic_bbox_reg", 0)),
        input_boxes_include_bg_cls=int(op.arg("input_boxes_include_bg_cls", 1)),
        output_classes_include_bg_cls=int(op.arg("output_classes_include_bg_cls", 1)),
        legacy_plus_one=int(op.arg("legacy_plus_one", 1)),
        _gaussian=int(method == "gaussian"),
    )
    kinds = [
        (np.float32, (None,)),
        (np.float32, (None, 4)),
        (np.float32, (None,)),
        (np.float32, (None,)),
        (np.int32, (None,)),
        (np.int32, (None, None)),
    ]
    for name, (dtype, shape) in zip(op.outputs, kinds, strict=False):
        cx.declare(name, dtype, shape)

"""Shape rules of the detection ops whose output sizes follow from their inputs' (the
executor's ``kernels_detection``): ``RoIAlign`` and ``BBoxTransform``. The proposal and NMS
ops keep as many boxes as the scores let through: they are in ``shapes.DATA_DEPENDENT``."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.op_args import order
from graphtools.analysis.shape_rules_nn import from_nchw, need, to_nchw
from graphtools.analysis.shape_types import Dim, TensorType, count, same_dim, shape_rule
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

_F32 = np.dtype(np.float32)


def _rank(t: TensorType, rank: int, what: str) -> tuple[Dim, ...] | None:
    if t.shape is not None and len(t.shape) != rank:
        raise ValueError(f"{what}, got {t}")
    return t.shape


def _box_columns(shape: tuple[Dim, ...] | None, what: str) -> None:
    if shape is not None and isinstance(shape[1], int) and shape[1] not in (4, 5):
        raise ValueError(f"{what} must be (R, 4) or (R, 5), got {list(shape)}")


@shape_rule("RoIAlign")
def _roi_align(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """One ``pooled_h`` x ``pooled_w`` map per RoI: float32 (R, C, ph, pw), in ``order``."""
    need(op, inputs, 2)
    layout = order(op)
    x, rois = inputs[0], inputs[1]
    ph, pw = int(op.arg("pooled_h", 1)), int(op.arg("pooled_w", 1))
    if ph <= 0 or pw <= 0:
        raise ValueError(f"pooled_h and pooled_w must be positive, got {ph}, {pw}")
    shape = to_nchw(_rank(x, 4, "RoIAlign needs a 4-D feature map"), layout)
    channels = None if shape is None else shape[1]
    boxes: Dim = None
    if count(rois.shape) == 0:
        boxes = 0  # no RoI: the kernel returns an empty map whatever the RoIs' shape
    elif rois.shape is not None:
        _box_columns(_rank(rois, 2, "RoIs must have shape (R, 4) or (R, 5)"), "RoIs")
        boxes = rois.shape[0]
    return [TensorType(_F32, from_nchw((boxes, channels, ph, pw), layout))]


@shape_rule("BBoxTransform")
def _bbox_transform(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Boxes moved by their per-class deltas: float32 like the deltas (M, 4K); the optional
    second output counts the RoIs of each image: float32 (batch,)."""
    if op.arg("rotated", 0):
        raise UnsupportedOpError(f"{op.type} with rotated boxes (RRPN) is not supported")
    need(op, inputs, 3)
    rois = _rank(inputs[0], 2, "rois must be (M, 4) or (M, 5)")
    deltas = _rank(inputs[1], 2, "deltas must be (M, 4 * K)")
    im_info = _rank(inputs[2], 2, "im_info must be (batch, 3)")
    _box_columns(rois, "rois")
    if len(tuple(op.arg("weights", (1.0, 1.0, 1.0, 1.0)))) != 4:
        raise ValueError("weights must have 4 values")
    rows = None if rois is None else rois[0]
    if deltas is not None:
        rows = same_dim(rows, deltas[0], f"the rows of deltas {inputs[1]} against the rois")
        if isinstance(deltas[1], int) and deltas[1] % 4:
            raise ValueError(f"deltas must be (M, 4 * K), got {inputs[1]}")
    batch = None if im_info is None else im_info[0]
    if im_info is not None:
        same_dim(im_info[1], 3, f"the columns of im_info {inputs[2]}")
    if rois is not None and rois[1] == 4 and isinstance(batch, int) and batch != 1:
        raise ValueError("rois without a batch column need im_info for exactly one image")
    out = (rows, None) if deltas is None else (rows, deltas[1])
    return [TensorType(_F32, out), TensorType(_F32, (batch,))]

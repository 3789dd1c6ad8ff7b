"""Image-layout kernels of real exports: nearest upsampling (``Upsample``, ``Int8ResizeNearest``),
the YOLOv3 head (``Yolo``) and the mobile style-transfer pre/deprocessing ops.

``Upsample`` and ``Yolo`` are custom operators of the Caffe2-yolo-v3 project
(dongfangduoshou123/Caffe2-yolo-v3, ``Yolo/upsample_op.*`` and ``Yolo/yolo_op.*``); the
stylizer ops are Caffe2's ``caffe2/operators/stylizer_ops.cc`` (the portable, non-NEON path).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.errors import UnsupportedOpError
from graphtools.executor.registry import OpContext, kernel
from graphtools.executor.workspace import Int8Tensor
from graphtools.ir import Op


@kernel("Upsample")
def _upsample(op: Op, inputs: list[Any]) -> list[Any]:
    """Nearest-neighbour upsampling of an NCHW map by the integer ``scale`` (default 2)."""
    x = np.asarray(inputs[0])
    scale = int(op.arg("scale", 2))
    if x.ndim != 4:
        raise ValueError(f"Upsample needs a 4-D NCHW input, got {x.ndim}-D")
    if scale < 1:
        raise ValueError(f"Upsample scale must be >= 1, got {scale}")
    return [np.repeat(np.repeat(x, scale, axis=2), scale, axis=3)]


@kernel("Int8ResizeNearest")
def _int8_resize_nearest(op: Op, inputs: list[Any]) -> list[Any]:
    """Caffe2's quantized NHWC nearest resize; the output keeps the input's quantization,
    which ``Y_scale``/``Y_zero_point`` (defaults 1 and 0) must repeat."""
    x = inputs[0]
    if not isinstance(x, Int8Tensor):
        raise TypeError(f"input must be an Int8 blob, got {type(x).__name__}")
    if x.values.ndim != 4:
        raise ValueError(f"Int8ResizeNearest needs a 4-D NHWC input, got {x.values.ndim}-D")
    w_scale = float(np.float32(op.arg("width_scale", 1.0)))
    h_scale = float(np.float32(op.arg("height_scale", 1.0)))
    if w_scale <= 0 or h_scale <= 0:
        raise ValueError(f"scales must be positive, got {h_scale}, {w_scale}")
    y_scale, y_zero = np.float32(op.arg("Y_scale", 1.0)), int(op.arg("Y_zero_point", 0))
    if y_scale != np.float32(x.scale) or y_zero != x.zero_point:
        raise ValueError(
            f"Y_scale/Y_zero_point ({y_scale}, {y_zero}) must equal the input's "
            f"({x.scale}, {x.zero_point})"
        )
    _, h, w, _ = x.values.shape
    out_h, out_w = int(h * np.float32(h_scale)), int(w * np.float32(w_scale))
    rows = np.minimum((np.arange(out_h) / np.float32(h_scale)).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(out_w) / np.float32(w_scale)).astype(np.int64), w - 1)
    values = np.ascontiguousarray(x.values[:, rows][:, :, cols])
    return [Int8Tensor(values, x.scale, x.zero_point)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


@kernel("Yolo")
def _yolo(op: Op, inputs: list[Any]) -> list[Any]:
    """The YOLOv3 head of Caffe2-yolo-v3, as its CUDA kernel computes it at inference.

    Per masked anchor ``n`` with ``K = numclass`` classes, channels ``n*(5+K) + e`` hold entry
    ``e``. Outputs: Y (x, y, objectness and class entries through a sigmoid, w/h raw); tx
    ``(N, A, H, W)`` = sigmoid(x) + column; ty = sigmoid(y) + ``j // H`` over the flat H*W
    position ``j`` (the source's row index for square maps); tw/th = exp(raw) times the masked
    anchor size over ``stride``; det_conf; class_prob ``(N*A, K, H*W)``; and the scratch blob,
    left holding the masked anchor heights. tx..det_conf after the first are flat, as the
    source leaves them. Batches above 1 (the source overwrites image 0's slots and leaves the
    rest unwritten) and ``is_train`` (a loss the op computes in place) are refused.
    """
    if op.arg("is_train", 0):
        raise UnsupportedOpError("Yolo with is_train=1 (the training loss) is not supported")
    if len(op.outputs) != 8:
        raise ValueError(f"Yolo has 8 outputs, the op names {len(op.outputs)}")
    x = np.asarray(inputs[0], dtype=np.float32)
    if x.ndim != 4:
        raise ValueError(f"Yolo needs a 4-D NCHW input, got {x.ndim}-D")
    if x.shape[0] != 1:
        raise UnsupportedOpError(
            f"Yolo on a batch of {x.shape[0]}: the source op defines its outputs only for batch 1"
        )
    classes = int(op.arg("numclass", 80))
    num_anchors = int(op.arg("numanchors", 9))
    stride = int(op.arg("stride", 16))
    anchors = [int(v) for v in op.arg("anchors", ())]
    mask = [int(v) for v in op.arg("anchor_mask", ())]
    if num_anchors <= 0 or not anchors or stride == 0:
        raise ValueError("Yolo needs 'anchors', a positive 'numanchors' and a non-zero 'stride'")
    step = len(anchors) // num_anchors
    if not mask or any(m * step + 1 >= len(anchors) or m < 0 for m in mask):
        raise ValueError(f"anchor_mask {mask} does not index the {len(anchors)} anchor values")
    _, channels, h, w = x.shape
    per_anchor = 5 + classes
    if channels < len(mask) * per_anchor:
        raise ValueError(
            f"Yolo input has {channels} channels, {len(mask)} anchors of {classes} classes "
            f"need {len(mask) * per_anchor}"
        )
    anchor_w = np.array([anchors[m * step] / stride for m in mask], dtype=np.float32)
    anchor_h = np.array([anchors[m * step + 1] / stride for m in mask], dtype=np.float32)
    y = x.copy()
    heads = x[0, : len(mask) * per_anchor].reshape(len(mask), per_anchor, h, w)
    squashed = _sigmoid(heads)
    activated = y[0, : len(mask) * per_anchor].reshape(len(mask), per_anchor, h, w)
    activated[:, 0:2] = squashed[:, 0:2]
    activated[:, 4:] = squashed[:, 4:]
    column = np.arange(h * w) % w
    tx = (squashed[:, 0].reshape(len(mask), -1) + column).astype(np.float32)
    ty = (squashed[:, 1].reshape(len(mask), -1) + np.arange(h * w) // h).astype(np.float32)
    tw = np.exp(heads[:, 2].astype(np.float64)).reshape(len(mask), -1) * anchor_w[:, None]
    th = np.exp(heads[:, 3].astype(np.float64)).reshape(len(mask), -1) * anchor_h[:, None]
    return [
        y,
        tx.reshape(1, len(mask), h, w),
        ty.reshape(-1),
        tw.astype(np.float32).reshape(-1),
        th.astype(np.float32).reshape(-1),
        squashed[:, 4].reshape(-1),
        np.ascontiguousarray(squashed[:, 5:].reshape(len(mask), classes, h * w)),
        anchor_h.copy(),
    ]


#: Workspace blob where Caffe2 caches the stylizer's noise (drawn once, reused for coherence).
STYLIZER_NOISE_BLOB = "__CAFFE2_STYLIZER_NOISE__"


@kernel("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", context=True)
def _stylizer_preprocess(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """uint8 BGRA NHWC -> float BGR NCHW minus ``mean``, plus cycled Gaussian noise.

    The noise (``noise_size`` values, default 491, std ``noise_std``, default 10) is drawn once
    per workspace, seeded by the op's seed and Caffe2's cache blob name (not the op's output,
    which the ONNX export renames), and cached under that name; value ``k`` of an
    image (pixel-major, channel-minor) gets ``noise[k % noise_size]``.
    """
    x = np.asarray(inputs[0])
    mean = np.asarray(inputs[1], dtype=np.float32).reshape(-1)
    if x.ndim != 4 or x.shape[3] != 4:
        raise ValueError(f"input must be (N, H, W, 4) BGRA, got {list(x.shape)}")
    if x.dtype != np.uint8:
        raise TypeError(f"input must be uint8, got {x.dtype}")
    if mean.size != 3:
        raise ValueError(f"mean must have 3 values, got {mean.size}")
    size = int(op.arg("noise_size", 491))
    if size <= 0:
        raise ValueError(f"noise_size must be positive, got {size}")
    workspace = ctx.workspace
    if workspace.has(STYLIZER_NOISE_BLOB):
        noise = np.asarray(workspace.fetch(STYLIZER_NOISE_BLOB), dtype=np.float32).reshape(-1)
    else:
        std = float(op.arg("noise_std", 10.0))
        noise = ctx.rng(op, STYLIZER_NOISE_BLOB).normal(0.0, std, size).astype(np.float32)
        workspace.feed(STYLIZER_NOISE_BLOB, noise)
    if noise.size < size:
        raise ValueError(f"cached noise has {noise.size} values, noise_size is {size}")
    _, h, w, _ = x.shape
    cycle = noise[np.arange(h * w * 3) % size].reshape(h, w, 3)
    bgr = x[..., :3].astype(np.float32) - mean + cycle
    return [np.ascontiguousarray(bgr.transpose(0, 3, 1, 2))]


@kernel("BRGNCHWCToPackedInt8BGRAStylizerDeprocess")
def _stylizer_deprocess(op: Op, inputs: list[Any]) -> list[Any]:
    """float BGR NCHW plus ``mean`` -> uint8 BGRA NHWC, clamped to [0, 255] and truncated,
    alpha 255."""
    x = np.asarray(inputs[0], dtype=np.float32)
    mean = np.asarray(inputs[1], dtype=np.float32).reshape(-1)
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"input must be (N, 3, H, W), got {list(x.shape)}")
    if mean.size != 3:
        raise ValueError(f"mean must have 3 values, got {mean.size}")
    values = np.nan_to_num(x.transpose(0, 2, 3, 1) + mean, nan=0.0)
    bgr = np.trunc(np.clip(values, 0.0, 255.0)).astype(np.uint8)
    alpha = np.full((*bgr.shape[:3], 1), 255, dtype=np.uint8)
    return [np.concatenate([bgr, alpha], axis=3)]

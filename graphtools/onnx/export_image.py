"""Exporters for the image ops of real exports the executor runs: Caffe2-yolo-v3's ``Yolo``
head and Caffe2's mobile style-transfer pre/deprocessing (``caffe2``-domain functions).

* ``Yolo`` (inference, batch 1 as the source defines it): the x, y, objectness and class
  entries of each masked anchor through a sigmoid in ``Y`` (w/h raw); ``tx`` the sigmoid of x
  plus the column; ``ty`` that of y plus ``j // H`` over the flat position ``j`` (the
  source's row index for square maps); ``tw``/``th`` ``exp`` of the raw w/h (float64) times
  the anchor size over the stride; the objectness; the class probabilities; the anchors'
  heights. The masked anchor sizes are computed at export from the arguments.
* ``PackedInt8BGRANHWCToNCHWCStylizerPreprocess``: uint8 BGRA NHWC to float BGR NCHW, minus
  the mean, plus the op's noise cycled over the image. Caffe2 draws the noise once per
  workspace and reuses it; the export draws it with the executor's generator and seed and
  writes it in the call (``_noise``), so the model computes the executor's values.
* ``BRGNCHWCToPackedInt8BGRAStylizerDeprocess``: float BGR NCHW plus the mean, NaN as 0,
  clipped to [0, 255], truncated to uint8, alpha 255, NHWC.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from graphtools.errors import GraphToolsError
from graphtools.executor import Workspace, run_op
from graphtools.executor.kernels_image import STYLIZER_NOISE_BLOB
from graphtools.ir import Op
from graphtools.onnx.export_context import ExportContext, Function, exporter
from graphtools.onnx.export_helpers import Emitter

__all__: list[str] = []

FLOAT, DOUBLE, UINT8, INT64 = (
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.UINT8,
    TensorProto.INT64,
)


def _channels(e: Emitter, value: str, start: str, stop: str) -> str:
    """``value[:, start:stop]`` (axis 1; bounds as 1-element int64 values)."""
    return e("Slice", value, start, stop, e.i64(1), hint="channels")


def _yolo_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    anchor_w = fx.attr("_anchor_w")
    anchor_h = fx.attr("_anchor_h")
    count = e("Shape", anchor_w, hint="count")
    classes = e.vector(fx.attr("numclass"))
    per_anchor = e("Add", classes, e.i64(5), hint="per_anchor")
    used = e("Mul", count, per_anchor, hint="used")
    shape = e("Shape", "X")
    height, width = (e("Gather", shape, e.scalar64(k), axis=0) for k in (2, 3))
    hw = e("Mul", height, width, hint="hw")
    heads = e(
        "Reshape",
        _channels(e, "X", e.i64(0), used),
        e("Concat", count, per_anchor, e.vector(height), e.vector(width), axis=0),
    )
    squashed = e("Sigmoid", heads, hint="squashed")
    activated = e(
        "Concat",
        _channels(e, squashed, e.i64(0), e.i64(2)),
        _channels(e, heads, e.i64(2), e.i64(4)),
        _channels(e, squashed, e.i64(4), per_anchor),
        axis=1,
    )
    rest = _channels(e, "X", used, e.i64(np.iinfo(np.int64).max))
    flat_heads = e(
        "Reshape", activated, e("Concat", e.i64(1, -1), e.vector(height), e.vector(width), axis=0)
    )
    fx.node("Concat", [flat_heads, rest], ["Y"], axis=1)
    rows = e("Concat", count, e.vector(hw), axis=0, hint="rows")

    def entry(source: str, k: int) -> str:
        picked = e("Gather", source, e.scalar64(k), axis=1)
        return e("Reshape", picked, rows, hint=f"entry_{k}")

    positions = e("Range", e.scalar64(0), hw, e.scalar64(1), hint="positions")
    column = e("Cast", e("Mod", positions, width), to=FLOAT)
    row = e("Cast", e("Div", positions, height), to=FLOAT)
    tx = e("Add", entry(squashed, 0), column)
    fx.node(
        "Reshape",
        [tx, e("Concat", e.i64(1), count, e.vector(height), e.vector(width), axis=0)],
        ["tx"],
    )
    fx.node("Reshape", [e("Add", entry(squashed, 1), row), e.i64(-1)], ["ty"])
    for k, out, size in ((2, "tw", anchor_w), (3, "th", anchor_h)):
        grown = e("Exp", e("Cast", entry(heads, k), to=DOUBLE))
        scaled = e("Mul", grown, e("Unsqueeze", e("Cast", size, to=DOUBLE), e.i64(1)))
        fx.node("Reshape", [e("Cast", scaled, to=FLOAT), e.i64(-1)], [out])
    fx.node("Reshape", [entry(squashed, 4), e.i64(-1)], ["det_conf"])
    probs = e("Slice", squashed, e.i64(5), per_anchor, e.i64(1))
    fx.node("Reshape", [probs, e("Concat", count, classes, e.vector(hw), axis=0)], ["class_prob"])
    fx.node("Identity", [anchor_h], ["scratch"])


_YOLO = Function(
    "Yolo",
    ("X",),
    ("Y", "tx", "ty", "tw", "th", "det_conf", "class_prob", "scratch"),
    {
        "numclass": "int",
        "numanchors": "int",
        "stride": "int",
        "anchors": "ints",
        "anchor_mask": "ints",
        "conf_thresh": "float",
        "is_train": "int",
        "_anchor_w": "floats",
        "_anchor_h": "floats",
    },
    _yolo_body,
)


@exporter("Yolo")
def _yolo(cx: ExportContext, op: Op) -> None:
    if op.arg("is_train", 0):
        raise cx.refuse("Yolo with is_train=1 (the training loss it computes in place)")
    if len(op.outputs) != 8:
        raise cx.refuse(f"Yolo has 8 outputs, the op names {len(op.outputs)}")
    info = cx.info(op.inputs[0])
    if info is not None and info.shape and isinstance(info.shape[0], int) and info.shape[0] != 1:
        raise cx.refuse(f"Yolo on a batch of {info.shape[0]} (the source defines batch 1 only)")
    classes = int(op.arg("numclass", 80))
    count = int(op.arg("numanchors", 9))
    stride = int(op.arg("stride", 16))
    anchors = [int(v) for v in op.arg("anchors", ())]
    mask = [int(v) for v in op.arg("anchor_mask", ())]
    if count <= 0 or not anchors or stride == 0:
        raise cx.refuse("Yolo needs 'anchors', a positive 'numanchors' and a non-zero 'stride'")
    step = len(anchors) // count
    if not mask or any(m < 0 or m * step + 1 >= len(anchors) for m in mask):
        raise cx.refuse(f"anchor_mask {mask} does not index the {len(anchors)} anchor values")
    widths = [float(np.float32(anchors[m * step] / stride)) for m in mask]
    heights = [float(np.float32(anchors[m * step + 1] / stride)) for m in mask]
    cx.call(
        _YOLO,
        op.inputs[:1],
        op.outputs,
        numclass=classes,
        numanchors=count,
        stride=stride,
        anchors=anchors,
        anchor_mask=mask,
        conf_thresh=float(op.arg("conf_thresh", 0.0)),
        is_train=0,
        _anchor_w=widths,
        _anchor_h=heights,
    )


def _preprocess_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    bgr = e("Slice", "X", e.i64(0), e.i64(3), e.i64(3), hint="bgr")
    values = e("Cast", bgr, to=FLOAT)
    mean = e("Reshape", e("Cast", "mean", to=FLOAT), e.i64(-1))
    shape = e("Shape", "X", start=1, end=3, hint="image")
    count = e("Mul", e("ReduceProd", shape, keepdims=0), e.scalar64(3))
    noise = fx.attr("_noise")
    cycle = e("Mod", e("Range", e.scalar64(0), count, e.scalar64(1)), e("Size", noise))
    cycled = e("Reshape", e("Gather", noise, cycle, axis=0), e("Concat", shape, e.i64(3), axis=0))
    shifted = e("Add", e("Sub", values, mean), cycled)
    fx.node("Transpose", [shifted], ["Y"], perm=[0, 3, 1, 2])


_PREPROCESS = Function(
    "PackedInt8BGRANHWCToNCHWCStylizerPreprocess",
    ("X", "mean"),
    ("Y",),
    {"noise_size": "int", "noise_std": "float", "_noise": "floats"},
    _preprocess_body,
)


def _noise(cx: ExportContext, op: Op, size: int) -> list[float]:
    """The noise the executor draws for ``op`` (its generator, seed and rule)."""
    workspace = Workspace()
    probe = op.replace(inputs=["image", "mean"], outputs=[op.outputs[0]])
    workspace.feed("image", np.zeros((1, 1, 1, 4), np.uint8))
    workspace.feed("mean", np.zeros(3, np.float32))
    try:
        run_op(probe, workspace, index=cx.index)
    except GraphToolsError as exc:
        raise cx.refuse(f"cannot draw the noise: {exc}") from exc
    noise = np.asarray(workspace.fetch(STYLIZER_NOISE_BLOB), np.float32).reshape(-1)
    return [float(v) for v in noise[:size]]


@exporter("PackedInt8BGRANHWCToNCHWCStylizerPreprocess")
def _stylizer_preprocess(cx: ExportContext, op: Op) -> None:
    size = int(op.arg("noise_size", 491))
    if size <= 0:
        raise cx.refuse(f"noise_size must be positive, got {size}")
    cx.call(
        _PREPROCESS,
        op.inputs[:2],
        op.outputs[:1],
        noise_size=size,
        noise_std=float(op.arg("noise_std", 10.0)),
        _noise=_noise(cx, op, size),
    )


def _deprocess_body(fx: ExportContext) -> None:
    e = Emitter(fx)
    channels_last = e("Transpose", e("Cast", "X", to=FLOAT), perm=[0, 2, 3, 1])
    shifted = e("Add", channels_last, e("Reshape", e("Cast", "mean", to=FLOAT), e.i64(-1)))
    zero, top = e.const(0.0, np.float32), e.const(255.0, np.float32)
    cleaned = e("Where", e("IsNaN", shifted), zero, shifted)
    bgr = e("Cast", e("Clip", cleaned, zero, top), to=UINT8, hint="bgr")
    alpha_shape = e("Concat", e("Shape", bgr, end=3), e.i64(1), axis=0)
    filler = numpy_helper.from_array(np.asarray([255], np.uint8))
    alpha = e("ConstantOfShape", alpha_shape, value=filler, hint="alpha")
    fx.node("Concat", [bgr, alpha], ["Y"], axis=3)


_DEPROCESS = Function(
    "BRGNCHWCToPackedInt8BGRAStylizerDeprocess", ("X", "mean"), ("Y",), {}, _deprocess_body
)


@exporter("BRGNCHWCToPackedInt8BGRAStylizerDeprocess")
def _stylizer_deprocess(cx: ExportContext, op: Op) -> None:
    cx.call(_DEPROCESS, op.inputs[:2], op.outputs[:1])

"""Exporters for neural-network ops: convolutions, pooling, normalisation, activations, softmax,
padding and nearest resizing.

ONNX's image ops are channels-first: an NHWC op becomes its NCHW form between two Transposes
(its filter transposed too), through ``ExportContext.transpose``, so the Transposes between two
NHWC ops cancel and vanish. ``ConvRelu`` is Conv + Relu, ``Upsample`` (Caffe2-yolo-v3's
nearest upsampling by an integer ``scale``) a nearest ``Resize``.
"""

from __future__ import annotations

from collections.abc import Callable

from graphtools.analysis.op_args import (
    CAFFE_LEGACY_POOLING,
    NOTSET,
    SAME,
    VALID,
    order,
    window_args,
)
from graphtools.convert.caffe2_to_onnx.context import ExportContext, exporter, onnx_int64
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Net, Op, make_arg

__all__: list[str] = []


def _layout(cx: ExportContext, op: Op) -> str:
    try:
        return order(op)
    except ValueError as exc:
        raise cx.refuse(str(exc)) from exc


Exporter = Callable[[ExportContext, Op], None]


def channels_first(weights: tuple[int, ...] = ()) -> Callable[[Exporter], Exporter]:
    """Make an NCHW exporter take NHWC ops too: input 0 (and the inputs at ``weights``)
    transposed channels-first, the NCHW form written to fresh values, its outputs transposed
    back to the op's names."""

    def wrap(fn: Exporter) -> Exporter:
        def exported(cx: ExportContext, op: Op) -> None:
            if _layout(cx, op) == "NCHW":
                fn(cx, op)
                return
            rank = cx.rank(op.inputs[0]) or _spatial_dims(cx, op) + 2
            first = [0, rank - 1, *range(1, rank - 1)]
            inputs = list(op.inputs)
            for position in (0, *weights):
                if position < len(inputs):
                    inputs[position] = cx.transpose(inputs[position], first)
            outputs = [cx.fresh(f"{name}_nchw") for name in op.outputs]
            args = [a for a in op.args if a.name != "order"]
            start = len(cx.nodes)
            fn(cx, op.replace(inputs=inputs, outputs=outputs, args=args))
            written = {name for node in cx.nodes[start:] for name in node.outputs}
            last = [0, *range(2, rank), 1]
            for inner, name in zip(outputs, op.outputs, strict=True):
                if inner in written:
                    cx.transpose(inner, last, out=name)

        exported.__doc__ = fn.__doc__
        return exported

    return wrap


def _spatial_dims(cx: ExportContext, op: Op) -> int:
    """Number of spatial dims: from the kernel arguments, the filter or the input's rank."""
    kernels = op.arg("kernels")
    if kernels is not None:
        return len(kernels) if isinstance(kernels, tuple) else 1
    if any(op.has_arg(n) for n in ("kernel_h", "kernel_w", "stride_h", "pad_t")):
        return 2
    for name in op.inputs[:2]:
        rank = cx.rank(name)
        if rank is not None:
            return rank - 2
    if op.has_arg("kernel"):
        return 2
    raise cx.refuse("cannot tell the number of spatial dims (give kernels or value_info)")


def _window_attrs(cx: ExportContext, op: Op) -> dict[str, object]:
    nd = _spatial_dims(cx, op)
    try:
        kernel, strides, dilations, pads = window_args(op, nd)
    except ValueError as exc:
        raise cx.refuse(str(exc)) from exc
    attrs: dict[str, object] = {}
    if kernel is not None:
        attrs["kernel_shape"] = kernel
    if any(s != 1 for s in strides):
        attrs["strides"] = strides
    if any(d != 1 for d in dilations):
        attrs["dilations"] = dilations
    legacy = int(op.arg("legacy_pad", NOTSET))
    if legacy == VALID:
        return attrs
    if legacy == SAME:
        attrs["auto_pad"] = "SAME_UPPER"
        return attrs
    if legacy == CAFFE_LEGACY_POOLING:
        # Caffe's ceil rule, dropping a last window that starts in the padding: ONNX ceil_mode
        # (onnxruntime applies the same drop).
        if op.type.startswith("Conv"):
            raise cx.refuse("legacy_pad CAFFE_LEGACY_POOLING on a convolution")
        attrs["ceil_mode"] = 1
    elif legacy != NOTSET:
        raise cx.refuse(f"unknown legacy_pad {legacy}")
    if any(pads):
        attrs["pads"] = pads
    return attrs


def _conv_nchw(cx: ExportContext, op: Op, output: str) -> None:
    attrs = _window_attrs(cx, op)
    group = int(op.arg("group", 1))
    cx.node("Conv", op.inputs, [output], group=group if group != 1 else None, **attrs)


@exporter("Conv", "Conv1D", "Conv2D", "Conv3D")
@channels_first(weights=(1,))
def _conv(cx: ExportContext, op: Op) -> None:
    _conv_nchw(cx, op, op.outputs[0])


@exporter("ConvRelu")
@channels_first(weights=(1,))
def _conv_relu(cx: ExportContext, op: Op) -> None:
    """Caffe2's fused ``ConvRelu``: ``Conv`` then ``Relu``."""
    conv = cx.fresh(f"{op.outputs[0]}_conv")
    _conv_nchw(cx, op, conv)
    cx.node("Relu", [conv], op.outputs[:1])


@exporter("ConvTranspose")
@channels_first(weights=(1,))
def _conv_transpose(cx: ExportContext, op: Op) -> None:
    attrs = _window_attrs(cx, op)
    if attrs.get("auto_pad") is not None:
        raise cx.refuse("legacy_pad SAME on ConvTranspose has no ONNX form")
    adjs = op.arg("adjs")
    if adjs is None and op.has_arg("adj"):
        adjs = (int(op.arg("adj")),) * len(attrs.get("kernel_shape", (0, 0)))  # type: ignore[arg-type]
    group = int(op.arg("group", 1))
    cx.node(
        "ConvTranspose",
        op.inputs,
        op.outputs[:1],
        output_padding=list(adjs) if adjs and any(adjs) else None,
        group=group if group != 1 else None,
        **attrs,
    )


def _pool(cx: ExportContext, op: Op, onnx_type: str) -> None:
    if op.arg("global_pooling", 0):
        cx.node(f"Global{onnx_type}", op.inputs[:1], op.outputs[:1])
        return
    attrs = _window_attrs(cx, op)
    if onnx_type == "AveragePool" and op.arg("count_include_pad", 0):
        attrs["count_include_pad"] = 1
    cx.node(onnx_type, op.inputs[:1], op.outputs[:1], **attrs)


@exporter("MaxPool", "MaxPool1D", "MaxPool2D", "MaxPool3D")
@channels_first()
def _max_pool(cx: ExportContext, op: Op) -> None:
    _pool(cx, op, "MaxPool")


@exporter("AveragePool", "AveragePool1D", "AveragePool2D", "AveragePool3D")
@channels_first()
def _average_pool(cx: ExportContext, op: Op) -> None:
    _pool(cx, op, "AveragePool")


TEST_MODE_OPS = frozenset({"Dropout", "SpatialBN"})
"""Op types whose ``is_test`` argument ``export_onnx(test_mode=True)`` sets."""


def in_test_mode(op: Op) -> Op:
    """``op`` with ``is_test=1`` when it is one of ``TEST_MODE_OPS``, else ``op``."""
    if op.type not in TEST_MODE_OPS or op.arg("is_test", 0):
        return op
    args = [a for a in op.args if a.name != "is_test"]
    return op.replace(args=[*args, make_arg("is_test", 1)])


def net_in_test_mode(net: Net) -> Net:
    """``net`` with ``is_test=1`` on its ops (nested nets included) that have it."""
    ops = []
    for op in net.ops:
        nets = {name: net_in_test_mode(nested) for name, nested in op.nested_nets() if name}
        if nets:
            op = op.replace(
                args=[make_arg(a.name, nets[a.name]) if a.name in nets else a for a in op.args]
            )
        ops.append(in_test_mode(op))
    return Net(ops, net.external_inputs, net.external_outputs, name=net.name)


def _refuse_training(cx: ExportContext, op: Op, what: str) -> UnsupportedOpError:
    return cx.refuse(
        f"{op.type} in training mode (is_test=0: {what}); a training net: export its "
        "inference form with test_mode=True (graphtools export-onnx --test-mode), which sets "
        "is_test=1"
    )


@exporter("SpatialBN")
@channels_first()
def _spatial_bn(cx: ExportContext, op: Op) -> None:
    if not op.arg("is_test", 0) and len(op.outputs) > 1:
        raise _refuse_training(cx, op, "batch statistics and running averages")
    cx.node(
        "BatchNormalization",
        op.inputs[:5],
        op.outputs[:1],
        epsilon=float(op.arg("epsilon", 1e-5)),
    )


@exporter("LRN")
@channels_first()
def _lrn(cx: ExportContext, op: Op) -> None:
    if len(op.outputs) > 1 and cx.used(op.outputs[1]):
        raise cx.refuse("LRN's scale output has no ONNX counterpart")
    cx.node(
        "LRN",
        op.inputs[:1],
        op.outputs[:1],
        size=int(op.arg("size")),
        alpha=float(op.arg("alpha", 0.0)),
        beta=float(op.arg("beta", 0.0)),
        bias=float(op.arg("bias", 1.0)),
    )


@exporter("Dropout")
def _dropout(cx: ExportContext, op: Op) -> None:
    if not op.arg("is_test", 0):
        raise _refuse_training(cx, op, "random masks")
    outputs = list(op.outputs[:1])
    if len(op.outputs) > 1 and cx.used(op.outputs[1]):
        outputs.append(op.outputs[1])
    cx.node("Dropout", op.inputs[:1], outputs)


_SAME_NAME = ("Relu", "Sigmoid", "Tanh", "Softplus", "Exp", "Log", "Sqrt", "Abs")


@exporter(*_SAME_NAME)
def _unary(cx: ExportContext, op: Op) -> None:
    cx.elementwise(op.type, op.inputs[:1], op.outputs[0])


@exporter("Neg", "Negative")
def _negative(cx: ExportContext, op: Op) -> None:
    cx.node("Neg", op.inputs, op.outputs)


@exporter("Sqr")
def _sqr(cx: ExportContext, op: Op) -> None:
    cx.node("Mul", [op.inputs[0], op.inputs[0]], op.outputs)


@exporter("LeakyRelu")
def _leaky_relu(cx: ExportContext, op: Op) -> None:
    cx.node("LeakyRelu", op.inputs, op.outputs, alpha=float(op.arg("alpha", 0.01)))


@exporter("Softmax")
def _softmax(cx: ExportContext, op: Op) -> None:
    """Caffe2 normalises the input flattened to 2-D at ``axis``: ONNX before opset 13 too;
    from 13, the last axis directly, any other as Flatten + Softmax + Reshape back."""
    x, y = op.inputs[0], op.outputs[0]
    axis = int(op.arg("axis", 1))
    if cx.opset < 13:
        cx.node("Softmax", [x], [y], axis=axis)
        return
    rank = cx.rank(x)
    if axis == -1 or (rank is not None and axis % rank == rank - 1):
        cx.node("Softmax", [x], [y], axis=-1)
        return
    flat, normed, shape = cx.fresh(f"{y}_flat"), cx.fresh(f"{y}_normed"), cx.fresh(f"{x}_shape")
    cx.node("Flatten", [x], [flat], axis=axis)
    cx.node("Softmax", [flat], [normed], axis=-1)
    cx.node("Shape", [x], [shape])
    cx.node("Reshape", [normed, shape], [y])


@exporter("InstanceNorm")
@channels_first()
def _instance_norm(cx: ExportContext, op: Op) -> None:
    if any(cx.used(name) for name in op.outputs[1:]):
        raise cx.refuse("InstanceNorm's mean and inverse-std outputs have no ONNX counterpart")
    cx.node(
        "InstanceNormalization",
        op.inputs[:3],
        op.outputs[:1],
        epsilon=float(op.arg("epsilon", 1e-5)),
    )


@exporter("PadImage")
@channels_first()
def _pad_image(cx: ExportContext, op: Op) -> None:
    _, _, _, pads = window_args(op, 2)
    mode = op.arg("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    info = cx.info(op.inputs[0])
    if mode == "reflect" and info is not None and info.shape is not None:
        spatial = (max(pads[0], pads[2]), max(pads[1], pads[3]))
        for size, pad in zip(info.shape[2:], spatial, strict=False):
            if isinstance(size, int) and pad >= size:
                raise cx.refuse(
                    f"reflect pads of {pad} on a spatial dim of {size}: ONNX's Pad reflects "
                    "once (pads below the dim), Caffe2 again at the far edge; export at a "
                    "larger input size"
                )
    inputs = [
        op.inputs[0],
        cx.const(
            onnx_int64([0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]]), f"{op.outputs[0]}_pads"
        ),
    ]
    if mode == "constant":
        value = float(op.arg("value", 0.0))
        inputs.append(cx.const(value, f"{op.outputs[0]}_value", cx.dtype(op.inputs[0])))
    cx.node("Pad", inputs, op.outputs[:1], mode=mode)


@exporter("ResizeNearest")
@channels_first()
def _resize_nearest(cx: ExportContext, op: Op) -> None:
    """Caffe2 picks ``min(floor(i / scale), size - 1)``: ONNX asymmetric coordinates, floor."""
    if len(op.inputs) > 1:
        raise cx.refuse("ResizeNearest with scales given as an input")
    _nearest(cx, op, float(op.arg("height_scale", 1.0)), float(op.arg("width_scale", 1.0)))


@exporter("Upsample")
def _upsample(cx: ExportContext, op: Op) -> None:
    """Caffe2-yolo-v3's ``Upsample``: every pixel repeated ``scale`` times (NCHW)."""
    scale = int(op.arg("scale", 2))
    if scale < 1:
        raise cx.refuse(f"scale must be >= 1, got {scale}")
    _nearest(cx, op, float(scale), float(scale))


def _nearest(cx: ExportContext, op: Op, height: float, width: float) -> None:
    scales = [1.0, 1.0, height, width]
    # roi is optional from opset 13; before, an empty tensor stands for it.
    roi = "" if cx.opset >= 13 else cx.const([], f"{op.outputs[0]}_roi", "float32")
    cx.node(
        "Resize",
        [op.inputs[0], roi, cx.const(scales, f"{op.outputs[0]}_scales", "float32")],
        op.outputs[:1],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )

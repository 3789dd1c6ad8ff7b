"""Exporters for Caffe2's Int8 ops (QNNPACK): ``caffe2``-domain functions over uint8 tensors.

An Int8 blob is its quantized values in ONNX (uint8; int32 for a bias), its scale and zero point
known at export (``ExportContext.quant``: from the Int8 fills, the ops' ``Y_scale``/
``Y_zero_point``, or the inputs' given quantization) and written in the graph's
``quantization_annotation`` for its inputs, outputs and initializers. Each call carries the op's
arguments and, as ``_``-attributes, the quantization of its inputs and the permutations of its
layout (the functions keep the op's order: an NHWC op transposes inside its body; onnxruntime's
layout optimizer removes the pairs once the functions are inlined).

The bodies compute what the int8 executor computes, in the same arithmetic:

* ``Int8Conv``/``Int8ConvRelu`` and ``Int8FC``: ``ConvInteger``/``MatMulInteger`` (exact int32
  accumulators) plus the raw int32 bias, then the requantization in float64:
  ``clip(round(acc * (x_scale * w_scale / y_scale)) + y_zero_point, low, 255)`` (round half to
  even; ``low`` the zero point for the Relu form, else 0) - **exact**;
* ``Int8ConvTranspose``: ``ConvTranspose`` over the centered values in float32 (exact integers
  while the accumulator stays below 2^24), then the same requantization - **exact** there;
* ``Int8Quantize``, ``Int8Sum``/``Int8SumRelu``/``Int8Add``/``Int8AddRelu``: float32
  ``clip(round(x * (1 / scale) + zero_point))`` of the input or of the sum of the dequantized
  inputs - **exact**;
* ``Int8Dequantize`` (float32 ``(q - zero_point) * scale``), ``Int8Relu`` (``Max`` with the
  zero point),
  ``Int8MaxPool`` (``MaxPool`` on uint8), ``Int8ResizeNearest`` (nearest ``Resize`` on uint8) -
  **exact**;
* ``Int8AveragePool``: dequantized, pooled in float32 (the executor pools in float64;
  onnxruntime has no float64 ``AveragePool``), quantized; ``Int8Softmax``: dequantized,
  Caffe2's ``Softmax`` in float32, quantized (onnxruntime's ``exp`` is not numpy's) - **within
  one quantization step** (a last-bit difference can flip a rounding tie).

An Int8 fill in the predict_net is a ``Constant`` of its values (quantization annotated).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper

from graphtools.analysis.op_args import NOTSET, VALID, order, window_args
from graphtools.errors import GraphToolsError
from graphtools.executor import Int8Tensor, Workspace, run_op
from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter
from graphtools.onnx.export_helpers import int64s, unsqueeze

__all__: list[str] = []

UINT8, INT32, INT64, FLOAT, DOUBLE = (
    TensorProto.UINT8,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
)
_OUTPUT = {"Y_scale": "float", "Y_zero_point": "int"}
_LAYOUT = {"order": "string", "_to_nchw": "ints", "_from_nchw": "ints"}
_WINDOW = {"kernels": "ints", "strides": "ints", "pads": "ints", "dilations": "ints"}


def _quantized_input(name: str) -> dict[str, str]:
    return {f"_{name}_scale": "float", f"_{name}_zero_point": "int"}


def _fresh(fx: ExportContext, *hints: str) -> list[str]:
    return [fx.fresh(hint) for hint in hints]


def _attr_as(fx: ExportContext, name: str, to: int) -> str:
    out = fx.fresh(f"{name.lstrip('_')}_as")
    fx.node("Cast", [fx.attr(name)], [out], to=to)
    return out


def _layout_perms(op: Op, cx: ExportContext) -> dict[str, Any]:
    try:
        layout = order(op)
    except ValueError as exc:
        raise cx.refuse(str(exc)) from exc
    nhwc = layout == "NHWC"
    return {
        "order": layout,
        "_to_nchw": [0, 3, 1, 2] if nhwc else [0, 1, 2, 3],
        "_from_nchw": [0, 2, 3, 1] if nhwc else [0, 1, 2, 3],
    }


def _quantization_of(cx: ExportContext, name: str, label: str) -> dict[str, Any]:
    scale, zero_point = cx.quantization(name)
    return {f"_{label}_scale": scale, f"_{label}_zero_point": zero_point}


def _window(cx: ExportContext, op: Op) -> dict[str, list[int]]:
    """The op's window as canonical Caffe2 arguments (2-D), legacy padding refused."""
    legacy = int(op.arg("legacy_pad", NOTSET))
    if legacy not in (NOTSET, VALID):
        raise cx.refuse(f"legacy_pad {legacy} on an Int8 op")
    try:
        kernel, strides, dilations, pads = window_args(op, 2)
    except ValueError as exc:
        raise cx.refuse(str(exc)) from exc
    if kernel is None:
        raise cx.refuse("no kernel size given (kernel, kernels or kernel_h/kernel_w)")
    if legacy == VALID:
        pads = [0, 0, 0, 0]
    return {"kernels": kernel, "strides": strides, "pads": pads, "dilations": dilations}


def _quantize(fx: ExportContext, value: str, relu: bool, out: str) -> None:
    """The executor's ``quantize``: float32 ``rint(x * (1 / Y_scale) + zp)``, clipped to
    ``[0 or zp, 255]``, as uint8."""
    names = ("real", "inverse", "scaled", "zero", "moved", "rounded", "low", "clipped")
    x, inverse, scaled, zero, moved, rounded, low, clipped = _fresh(fx, *names)
    one = fx.const(np.float32(1.0), "one")
    fx.node("CastLike", [value, one], [x])
    fx.node("Div", [one, fx.attr("Y_scale")], [inverse])
    fx.node("Mul", [x, inverse], [scaled])
    fx.node("Cast", [fx.attr("Y_zero_point")], [zero], to=FLOAT)
    fx.node("Add", [scaled, zero], [moved])
    fx.node("Round", [moved], [rounded])
    bottom = zero if relu else fx.const(np.float32(0.0), "bottom")
    fx.node("Identity", [bottom], [low])
    fx.node("Clip", [rounded, low, fx.const(np.float32(255.0), "top")], [clipped])
    fx.node("Cast", [clipped], [out], to=UINT8)


def _dequantize(fx: ExportContext, value: str, label: str, out: str) -> None:
    """The executor's ``Int8Tensor.dequantize``: float32 ``(q - zero point) * scale``.

    Written in arithmetic, not ``DequantizeLinear`` (the same values): onnxruntime's
    DequantizeLinear propagation pass aborts on some of these graphs (a crash in its C++)."""
    real, zero, centered = _fresh(fx, "real", "zero", "centered")
    fx.node("Cast", [value], [real], to=FLOAT)
    fx.node("Cast", [fx.attr(f"_{label}_zero_point")], [zero], to=FLOAT)
    fx.node("Sub", [real, zero], [centered])
    fx.node("Mul", [centered, fx.attr(f"_{label}_scale")], [out])


def _requantize(fx: ExportContext, accumulator: str, relu: bool, out: str) -> None:
    """The executor's ``_requantize`` in float64:
    ``clip(rint(acc * (x_scale * w_scale / Y_scale)) + zp, 0 or zp, 255)``."""
    names = ("acc", "real", "multiplier", "product", "rounded", "zero", "moved", "low", "clip")
    acc, real, multiplier, product, rounded, zero, moved, low, clipped = _fresh(fx, *names)
    fx.node("Cast", [accumulator], [acc], to=DOUBLE)
    x_scale, w_scale = _attr_as(fx, "_X_scale", DOUBLE), _attr_as(fx, "_W_scale", DOUBLE)
    fx.node("Mul", [x_scale, w_scale], [real])
    fx.node("Div", [real, _attr_as(fx, "Y_scale", DOUBLE)], [multiplier])
    fx.node("Mul", [acc, multiplier], [product])
    fx.node("Round", [product], [rounded])
    fx.node("Cast", [fx.attr("Y_zero_point")], [zero], to=DOUBLE)
    fx.node("Add", [rounded, zero], [moved])
    fx.node("Identity", [zero if relu else fx.const(np.float64(0.0), "bottom")], [low])
    fx.node("Clip", [moved, low, fx.const(np.float64(255.0), "top")], [clipped])
    fx.node("Cast", [clipped], [out], to=UINT8)


def _zero_point(fx: ExportContext, label: str) -> str:
    return _attr_as(fx, f"_{label}_zero_point", UINT8)


def _bias_column(fx: ExportContext, bias: str, to: int) -> str:
    """The bias as ``(1, M, 1, 1)`` of type ``to`` (its raw values)."""
    cast, shaped = _fresh(fx, "bias_cast", "bias_column")
    fx.node("Cast", [bias], [cast], to=to)
    fx.node("Reshape", [cast, int64s(fx, [1, -1, 1, 1], "column")], [shaped])
    return shaped


# -- Quantize / Dequantize ------------------------------------------------------------------


def _quantize_body(fx: ExportContext) -> None:
    _quantize(fx, "X", False, "Y")


_QUANTIZE = Function("Int8Quantize", ("X",), ("Y",), _OUTPUT, _quantize_body)


@exporter("Int8Quantize")
def _int8_quantize(cx: ExportContext, op: Op) -> None:
    args = _output_quantization(op)
    cx.call(_QUANTIZE, op.inputs[:1], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _output_quantization(op: Op) -> dict[str, Any]:
    return {
        "Y_scale": float(op.arg("Y_scale", 1.0)),
        "Y_zero_point": int(op.arg("Y_zero_point", 0)),
    }


def _dequantize_body(fx: ExportContext) -> None:
    _dequantize(fx, "X", "X", "Y")


_DEQUANTIZE = Function("Int8Dequantize", ("X",), ("Y",), _quantized_input("X"), _dequantize_body)


@exporter("Int8Dequantize")
def _int8_dequantize(cx: ExportContext, op: Op) -> None:
    x = op.inputs[0]
    cx.call(_DEQUANTIZE, [x], op.outputs[:1], **_quantization_of(cx, x, "X"))


# -- convolutions and FC --------------------------------------------------------------------


def _conv_body(relu: bool, with_bias: bool, fx: ExportContext) -> None:
    x, w, acc, total = _fresh(fx, "x_nchw", "w_nchw", "acc", "total")
    fx.node("Transpose", ["X"], [x], perm=AttrRef("_to_nchw"))
    fx.node("Transpose", ["W"], [w], perm=AttrRef("_to_nchw"))
    fx.node(
        "ConvInteger",
        [x, w, _zero_point(fx, "X"), _zero_point(fx, "W")],
        [acc],
        kernel_shape=AttrRef("kernels"),
        strides=AttrRef("strides"),
        pads=AttrRef("pads"),
        dilations=AttrRef("dilations"),
        group=AttrRef("group"),
    )
    if with_bias:
        fx.node("Add", [acc, _bias_column(fx, "B", INT32)], [total])
    else:
        fx.node("Identity", [acc], [total])
    y = fx.fresh("y_nchw")
    _requantize(fx, total, relu, y)
    fx.node("Transpose", [y], ["Y"], perm=AttrRef("_from_nchw"))


_CONV_ATTRS = {
    **_WINDOW,
    "group": "int",
    **_LAYOUT,
    **_OUTPUT,
    **_quantized_input("X"),
    **_quantized_input("W"),
}
_CONVS = {
    (op_type, bias): Function(
        op_type,
        ("X", "W", "B") if bias else ("X", "W"),
        ("Y",),
        _CONV_ATTRS,
        partial(_conv_body, op_type == "Int8ConvRelu", bias),
        variant="" if bias else "nobias",
    )
    for op_type in ("Int8Conv", "Int8ConvRelu")
    for bias in (True, False)
}


@exporter("Int8Conv", "Int8ConvRelu")
def _int8_conv(cx: ExportContext, op: Op) -> None:
    x, w = op.inputs[:2]
    args = {
        **_window(cx, op),
        "group": int(op.arg("group", 1)),
        **_layout_perms(op, cx),
        **_output_quantization(op),
        **_quantization_of(cx, x, "X"),
        **_quantization_of(cx, w, "W"),
    }
    fn = _CONVS[(op.type, len(op.inputs) > 2)]
    cx.call(fn, op.inputs[:3], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _centered(fx: ExportContext, value: str, label: str) -> str:
    """``value - zero point`` as float32 (exact integers)."""
    wide, zero, centered, out = _fresh(fx, f"{label}_int", "zero", "centered", f"{label}_float")
    fx.node("Cast", [value], [wide], to=INT32)
    fx.node("Cast", [fx.attr(f"_{label}_zero_point")], [zero], to=INT32)
    fx.node("Sub", [wide, zero], [centered])
    fx.node("Cast", [centered], [out], to=FLOAT)
    return out


def _conv_transpose_body(fx: ExportContext) -> None:
    x, w, acc, total = _fresh(fx, "x_nchw", "w_nchw", "acc", "total")
    fx.node("Transpose", [_centered(fx, "X", "X")], [x], perm=AttrRef("_to_nchw"))
    fx.node("Transpose", [_centered(fx, "W", "W")], [w], perm=AttrRef("_to_nchw"))
    fx.node(
        "ConvTranspose",
        [x, w],
        [acc],
        kernel_shape=AttrRef("kernels"),
        strides=AttrRef("strides"),
        pads=AttrRef("pads"),
        output_padding=AttrRef("adjs"),
    )
    fx.node("Add", [acc, _bias_column(fx, "B", FLOAT)], [total])
    y = fx.fresh("y_nchw")
    _requantize(fx, total, False, y)
    fx.node("Transpose", [y], ["Y"], perm=AttrRef("_from_nchw"))


_CONV_TRANSPOSE = Function(
    "Int8ConvTranspose",
    ("X", "W", "B"),
    ("Y",),
    {
        "kernels": "ints",
        "strides": "ints",
        "pads": "ints",
        "adjs": "ints",
        **_LAYOUT,
        **_OUTPUT,
        **_quantized_input("X"),
        **_quantized_input("W"),
    },
    _conv_transpose_body,
)


@exporter("Int8ConvTranspose")
def _int8_conv_transpose(cx: ExportContext, op: Op) -> None:
    if len(op.inputs) != 3:
        raise cx.refuse("Int8ConvTranspose without a bias")
    x, w = op.inputs[:2]
    window = _window(cx, op)
    if any(d != 1 for d in window.pop("dilations")):
        raise cx.refuse("Int8ConvTranspose with dilations")
    adjs = op.arg("adjs")
    if adjs is None:
        adjs = (
            [int(op.arg("adj", 0))] * 2
            if op.has_arg("adj")
            else [int(op.arg("adj_h", 0)), int(op.arg("adj_w", 0))]
        )
    args = {
        **window,
        "adjs": [int(a) for a in adjs],
        **_layout_perms(op, cx),
        **_output_quantization(op),
        **_quantization_of(cx, x, "X"),
        **_quantization_of(cx, w, "W"),
    }
    cx.call(_CONV_TRANSPOSE, op.inputs[:3], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _fc_body(with_bias: bool, fx: ExportContext) -> None:
    x, w, w_t, acc, total = _fresh(fx, "x_rows", "w_rows", "w_columns", "acc", "total")
    fx.node("Flatten", ["X"], [x], axis=1)
    fx.node("Flatten", ["W"], [w], axis=1)
    fx.node("Transpose", [w], [w_t], perm=[1, 0])
    fx.node("MatMulInteger", [x, w_t, _zero_point(fx, "X"), _zero_point(fx, "W")], [acc])
    if with_bias:
        bias = fx.fresh("bias")
        fx.node("Cast", ["B"], [bias], to=INT32)
        fx.node("Add", [acc, bias], [total])
    else:
        fx.node("Identity", [acc], [total])
    _requantize(fx, total, False, "Y")


_FC_ATTRS = {
    "axis": "int",
    "axis_w": "int",
    "dequantize_output": "int",
    **_OUTPUT,
    **_quantized_input("X"),
    **_quantized_input("W"),
}
_FCS = {
    bias: Function(
        "Int8FC",
        ("X", "W", "B") if bias else ("X", "W"),
        ("Y",),
        _FC_ATTRS,
        partial(_fc_body, bias),
        variant="" if bias else "nobias",
    )
    for bias in (True, False)
}


@exporter("Int8FC")
def _int8_fc(cx: ExportContext, op: Op) -> None:
    """The executor's Int8FC reads the input as ``(N, rest)`` and the weight as ``(M, rest)``
    whatever ``axis`` says; ``axis``, ``axis_w`` and ``dequantize_output`` are carried for the
    import."""
    x, w = op.inputs[:2]
    args = {
        "axis": int(op.arg("axis", 1)),
        "axis_w": int(op.arg("axis_w", 1)),
        "dequantize_output": int(op.arg("dequantize_output", 0)),
        **_output_quantization(op),
        **_quantization_of(cx, x, "X"),
        **_quantization_of(cx, w, "W"),
    }
    cx.call(_FCS[len(op.inputs) > 2], op.inputs[:3], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


# -- element-wise -------------------------------------------------------------------------


def _sum_body(relu: bool, fx: ExportContext) -> None:
    a, b, total = _fresh(fx, "a", "b", "total")
    _dequantize(fx, "A", "A", a)
    _dequantize(fx, "B", "B", b)
    fx.node("Add", [a, b], [total])
    _quantize(fx, total, relu, "Y")


_SUMS = {
    op_type: Function(
        op_type,
        ("A", "B"),
        ("Y",),
        {"order": "string", **_OUTPUT, **_quantized_input("A"), **_quantized_input("B")},
        partial(_sum_body, op_type.endswith("Relu")),
    )
    for op_type in ("Int8Sum", "Int8SumRelu", "Int8Add", "Int8AddRelu")
}


@exporter(*_SUMS)
def _int8_sum(cx: ExportContext, op: Op) -> None:
    if len(op.inputs) != 2:
        raise cx.refuse(f"{op.type} of {len(op.inputs)} inputs (two are exported)")
    a, b = op.inputs
    args = {
        "order": _layout_perms(op, cx)["order"],
        **_output_quantization(op),
        **_quantization_of(cx, a, "A"),
        **_quantization_of(cx, b, "B"),
    }
    cx.call(_SUMS[op.type], [a, b], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _relu_body(fx: ExportContext) -> None:
    fx.node("Max", ["X", _zero_point(fx, "X")], ["Y"])


_RELU = Function(
    "Int8Relu", ("X",), ("Y",), {"order": "string", **_quantized_input("X")}, _relu_body
)


@exporter("Int8Relu")
def _int8_relu(cx: ExportContext, op: Op) -> None:
    x = op.inputs[0]
    scale, zero_point = cx.quantization(x)
    zero_point = min(max(zero_point, 0), 255)
    order_arg = _layout_perms(op, cx)["order"]
    cx.call(_RELU, [x], op.outputs[:1], order=order_arg, _X_scale=scale, _X_zero_point=zero_point)
    cx.quant[op.outputs[0]] = cx.quant[x]


def _max_pool_body(fx: ExportContext) -> None:
    x, y = _fresh(fx, "x_nchw", "y_nchw")
    fx.node("Transpose", ["X"], [x], perm=AttrRef("_to_nchw"))
    fx.node(
        "MaxPool",
        [x],
        [y],
        kernel_shape=AttrRef("kernels"),
        strides=AttrRef("strides"),
        pads=AttrRef("pads"),
        dilations=AttrRef("dilations"),
    )
    fx.node("Transpose", [y], ["Y"], perm=AttrRef("_from_nchw"))


_MAX_POOL = Function("Int8MaxPool", ("X",), ("Y",), {**_WINDOW, **_LAYOUT}, _max_pool_body)


def _average_pool_body(fx: ExportContext) -> None:
    x, real, pooled = _fresh(fx, "x_nchw", "real", "pooled")
    fx.node("Transpose", ["X"], [x], perm=AttrRef("_to_nchw"))
    _dequantize(fx, x, "X", real)
    fx.node(
        "AveragePool",
        [real],
        [pooled],
        kernel_shape=AttrRef("kernels"),
        strides=AttrRef("strides"),
        pads=AttrRef("pads"),
        count_include_pad=AttrRef("count_include_pad"),
    )
    y = fx.fresh("y_nchw")
    _quantize(fx, pooled, False, y)
    fx.node("Transpose", [y], ["Y"], perm=AttrRef("_from_nchw"))


_AVERAGE_POOL = Function(
    "Int8AveragePool",
    ("X",),
    ("Y",),
    {
        "kernels": "ints",
        "strides": "ints",
        "pads": "ints",
        "count_include_pad": "int",
        **_LAYOUT,
        **_OUTPUT,
        **_quantized_input("X"),
    },
    _average_pool_body,
)


@exporter("Int8MaxPool", "Int8AveragePool")
def _int8_pool(cx: ExportContext, op: Op) -> None:
    if op.arg("global_pooling", 0):
        raise cx.refuse(f"{op.type} with global_pooling")
    x = op.inputs[0]
    window = _window(cx, op)
    if op.type == "Int8MaxPool":
        cx.call(_MAX_POOL, [x], op.outputs[:1], **window, **_layout_perms(op, cx))
        cx.quant[op.outputs[0]] = cx.quantization(x)
        return
    if any(d != 1 for d in window.pop("dilations")):
        raise cx.refuse("Int8AveragePool with dilations")
    args = {
        **window,
        "count_include_pad": int(op.arg("count_include_pad", 0)),
        **_layout_perms(op, cx),
        **_output_quantization(op),
        **_quantization_of(cx, x, "X"),
    }
    cx.call(_AVERAGE_POOL, [x], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _softmax_body(fx: ExportContext) -> None:
    real, rows, normed, shape, back = _fresh(fx, "real", "rows", "normed", "shape", "back")
    _dequantize(fx, "X", "X", real)
    fx.node("Flatten", [real], [rows], axis=AttrRef("axis"))
    fx.node("Softmax", [rows], [normed], axis=-1)
    fx.node("Shape", [real], [shape])
    fx.node("Reshape", [normed, shape], [back])
    _quantize(fx, back, False, "Y")


_SOFTMAX = Function(
    "Int8Softmax",
    ("X",),
    ("Y",),
    {"axis": "int", "order": "string", **_OUTPUT, **_quantized_input("X")},
    _softmax_body,
)


@exporter("Int8Softmax")
def _int8_softmax(cx: ExportContext, op: Op) -> None:
    """The executor's Int8Softmax normalises at ``axis`` (default 1) whatever the order."""
    x = op.inputs[0]
    args = {
        "axis": int(op.arg("axis", 1)),
        "order": _layout_perms(op, cx)["order"],
        **_output_quantization(op),
        **_quantization_of(cx, x, "X"),
    }
    cx.call(_SOFTMAX, [x], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (args["Y_scale"], args["Y_zero_point"])


def _resize_body(fx: ExportContext) -> None:
    names = ("x_nchw", "height", "width", "scales", "y_nchw")
    x, height, width, scales, y = _fresh(fx, *names)
    fx.node("Transpose", ["X"], [x], perm=[0, 3, 1, 2])
    unsqueeze(fx, fx.attr("height_scale"), [0], out=height)
    unsqueeze(fx, fx.attr("width_scale"), [0], out=width)
    ones = fx.const(np.asarray([1.0, 1.0], np.float32), "ones")
    fx.node("Concat", [ones, height, width], [scales], axis=0)
    fx.node(
        "Resize",
        [x, "", scales],
        [y],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    fx.node("Transpose", [y], ["Y"], perm=[0, 2, 3, 1])


_RESIZE = Function(
    "Int8ResizeNearest",
    ("X",),
    ("Y",),
    {"height_scale": "float", "width_scale": "float", "order": "string", **_OUTPUT},
    _resize_body,
)


@exporter("Int8ResizeNearest")
def _int8_resize_nearest(cx: ExportContext, op: Op) -> None:
    """The executor's Int8ResizeNearest reads NHWC and keeps the input's quantization."""
    x = op.inputs[0]
    scale, zero_point = cx.quantization(x)
    args = {
        "height_scale": float(op.arg("height_scale", 1.0)),
        "width_scale": float(op.arg("width_scale", 1.0)),
        "order": _layout_perms(op, cx)["order"],
        **_output_quantization(op),
    }
    if np.float32(args["Y_scale"]) != np.float32(scale) or args["Y_zero_point"] != zero_point:
        raise cx.refuse(
            f"Y_scale/Y_zero_point ({args['Y_scale']}, {args['Y_zero_point']}) differ from "
            f"the input's ({scale}, {zero_point})"
        )
    cx.call(_RESIZE, [x], op.outputs[:1], **args)
    cx.quant[op.outputs[0]] = (scale, zero_point)


# -- fills ------------------------------------------------------------------------------------


@exporter("Int8GivenTensorFill", "Int8GivenIntTensorFill")
def _int8_fill(cx: ExportContext, op: Op) -> None:
    if op.inputs:
        raise cx.refuse(f"{op.type} with an input")
    workspace = Workspace()
    try:
        run_op(op, workspace, index=cx.index)
    except GraphToolsError as exc:
        raise cx.refuse(f"cannot evaluate the fill: {exc}") from exc
    value = workspace.fetch(op.outputs[0])
    if not isinstance(value, Int8Tensor):
        raise cx.refuse(f"the fill wrote a {type(value).__name__}, not an Int8 tensor")
    cx.node("Constant", [], op.outputs[:1], value=numpy_helper.from_array(value.values))
    cx.quant[op.outputs[0]] = (float(value.scale), int(value.zero_point))

"""Exporters for shape and data-movement ops, copies, casts and fills.

Caffe2's Slice counts negative bounds inclusively from the end (``-1`` is the end); ONNX's
exclusively, so ``-1`` becomes ``INT64_MAX`` and other negatives move by one. Fills in the
predict_net become ``Constant`` nodes (their value computed by the executor's kernel), or
``ConstantOfShape`` when they take a shape input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import numpy_helper

from graphtools.analysis.copies import VALUE_COPIES
from graphtools.analysis.op_args import order
from graphtools.convert.caffe2_to_onnx.context import ExportContext, Function, exporter, onnx_int64
from graphtools.convert.caffe2_to_onnx.helpers import INT64, Emitter
from graphtools.convert.dtypes import CAFFE2_TO_ONNX, caffe2_dtype_number, numpy_of_onnx
from graphtools.errors import GraphToolsError
from graphtools.executor import Workspace, run_op
from graphtools.ir import Op

__all__: list[str] = []

_INT64_MAX = np.iinfo(np.int64).max


def _axes_operand(
    cx: ExportContext, op_type: str, axes: list[int], since: int
) -> tuple[list[str], dict[str, object]]:
    """Axes as an input (from opset ``since``) or as an attribute (before)."""
    if cx.opset >= since:
        return [cx.const(onnx_int64(axes), f"{op_type.lower()}_axes")], {}
    return [], {"axes": axes}


def _channel_axis(op: Op) -> int:
    if op.has_arg("axis"):
        return int(op.arg("axis"))
    return 3 if order(op) == "NHWC" else 1


def _ints(value: object) -> list[int]:
    if value is None:
        return []
    if isinstance(value, tuple):
        return [int(v) for v in value]
    return [int(value)]  # type: ignore[call-overload]


@exporter("Concat", "DepthConcat")
def _concat(cx: ExportContext, op: Op) -> None:
    axis = _channel_axis(op)
    if len(op.outputs) > 1 and cx.used(op.outputs[1]):
        _split_info(cx, op, axis)
    inputs = list(op.inputs)
    if op.arg("add_axis", 0):
        expanded = []
        for name in inputs:
            out = cx.fresh(f"{name}_expanded")
            extra, attrs = _axes_operand(cx, "Unsqueeze", [axis], 13)
            cx.node("Unsqueeze", [name, *extra], [out], **attrs)
            expanded.append(out)
        inputs = expanded
    cx.node("Concat", inputs, op.outputs[:1], axis=axis)


def _split_info(cx: ExportContext, op: Op, axis: int) -> None:
    """Concat's second output: each input's size along the axis (1 with ``add_axis``), int32."""
    out = op.outputs[1]
    if op.arg("add_axis", 0):
        sizes = cx.const(np.ones(len(op.inputs), np.int32), f"{out}_ones")
        cx.node("Identity", [sizes], [out])
        return
    if axis < 0:
        axis += cx.need_rank(op.inputs[0], "Concat's split_info at a negative axis")
    parts = []
    for name in op.inputs:
        shape, part = cx.fresh(f"{name}_shape"), cx.fresh(f"{name}_size")
        cx.node("Shape", [name], [shape])
        cx.node("Gather", [shape, cx.const(onnx_int64([axis]), "axis")], [part], axis=0)
        parts.append(part)
    sizes = cx.fresh(f"{out}_int64")
    cx.node("Concat", parts, [sizes], axis=0)
    cx.node("Cast", [sizes], [out], to=6)  # INT32


@exporter("Split", "DepthSplit")
def _split(cx: ExportContext, op: Op) -> None:
    axis = _channel_axis(op)
    x = op.inputs[0]
    sizes = _ints(op.arg("split"))
    inputs = [x]
    attrs: dict[str, object] = {"axis": axis}
    if len(op.inputs) > 1:
        if cx.opset < 13:
            raise cx.refuse("Split sizes given as an input need opset 13")
        cast = cx.fresh(f"{op.inputs[1]}_int64")
        cx.node("Cast", [op.inputs[1]], [cast], to=7)
        inputs.append(cast)
    elif sizes:
        if cx.opset >= 13:
            inputs.append(cx.const(onnx_int64(sizes), f"{x}_split"))
        else:
            attrs["split"] = sizes
    elif cx.opset >= 18:
        attrs["num_outputs"] = len(op.outputs)
    outputs = list(op.outputs)
    if op.arg("add_axis", 0):
        squeezed = [cx.fresh(f"{name}_unsqueezed") for name in outputs]
        cx.node("Split", inputs, squeezed, **attrs)
        for inner, name in zip(squeezed, outputs, strict=True):
            extra, axes_attr = _axes_operand(cx, "Squeeze", [axis], 13)
            cx.node("Squeeze", [inner, *extra], [name], **axes_attr)
        return
    cx.node("Split", inputs, outputs, **attrs)


def _onnx_bound(value: int) -> int:
    if value >= 0:
        return value
    return _INT64_MAX if value == -1 else value + 1


def _slice_inputs_body(fx: ExportContext) -> None:
    """Caffe2's negative bound ``b`` is ``dim + 1 + b``, computed at run time."""
    e = Emitter(fx)
    starts, ends = e("Cast", "starts", to=INT64), e("Cast", "ends", to=INT64)
    count = e.vector(e("Size", starts))
    dims = e("Slice", e("Shape", "X"), e.i64(0), count, hint="dims")
    one, zero = e.scalar64(1), e.scalar64(0)

    def absolute(bound: str) -> str:
        return e("Where", e("Less", bound, zero), e("Add", e("Add", dims, one), bound), bound)

    axes = e("Range", zero, e("Size", starts), one, hint="axes")
    fx.node("Slice", ["X", absolute(starts), absolute(ends), axes], ["Y"])


_SLICE_INPUTS = Function(
    "Slice", ("X", "starts", "ends"), ("Y",), {}, _slice_inputs_body, variant="inputs"
)


@exporter("Slice")
def _slice(cx: ExportContext, op: Op) -> None:
    if len(op.inputs) == 3:
        cx.call(_SLICE_INPUTS, op.inputs, op.outputs[:1])
        return
    if len(op.inputs) > 1:
        raise cx.refuse(f"Slice with {len(op.inputs)} inputs (data, or data, starts, ends)")
    starts, ends = _ints(op.arg("starts")), _ints(op.arg("ends"))
    if len(starts) != len(ends):
        raise cx.refuse(f"starts {starts} and ends {ends} differ in length")
    y = op.outputs[0]
    inputs = [
        op.inputs[0],
        cx.const(onnx_int64(_onnx_bound(s) for s in starts), f"{y}_starts"),
        cx.const(onnx_int64(_onnx_bound(e) for e in ends), f"{y}_ends"),
        cx.const(onnx_int64(range(len(starts))), f"{y}_axes"),
    ]
    cx.node("Slice", inputs, [y])


@exporter("Reshape")
def _reshape(cx: ExportContext, op: Op) -> None:
    x, y = op.inputs[0], op.outputs[0]
    if len(op.inputs) > 1:
        shape = op.inputs[1]
        if cx.dtype(shape, np.int64) != np.int64:
            cast = cx.fresh(f"{shape}_int64")
            cx.node("Cast", [shape], [cast], to=7)
            shape = cast
    else:
        shape = cx.const(onnx_int64(_ints(op.arg("shape"))), f"{y}_shape")
    if len(op.outputs) > 1 and cx.used(op.outputs[1]):
        cx.node("Shape", [x], [op.outputs[1]])
    cx.node("Reshape", [x, shape], [y])


@exporter("Flatten")
def _flatten(cx: ExportContext, op: Op) -> None:
    cx.node("Flatten", op.inputs[:1], op.outputs[:1], axis=int(op.arg("axis", 1)))


@exporter("FlattenToVec")
def _flatten_to_vec(cx: ExportContext, op: Op) -> None:
    shape = cx.const(onnx_int64([-1]), f"{op.outputs[0]}_shape")
    cx.node("Reshape", [op.inputs[0], shape], op.outputs[:1])


@exporter("Transpose")
def _transpose(cx: ExportContext, op: Op) -> None:
    axes = op.arg("axes")
    cx.node("Transpose", op.inputs[:1], op.outputs[:1], perm=None if axes is None else _ints(axes))


@exporter("NCHW2NHWC", "NHWC2NCHW")
def _layout(cx: ExportContext, op: Op) -> None:
    rank = cx.need_rank(op.inputs[0], "layout transposition")
    to_nhwc = op.type == "NCHW2NHWC"
    perm = [0, *range(2, rank), 1] if to_nhwc else [0, rank - 1, *range(1, rank - 1)]
    cx.transpose(op.inputs[0], perm, out=op.outputs[0])


@exporter("Squeeze")
def _squeeze(cx: ExportContext, op: Op) -> None:
    dims = _ints(op.arg("dims"))
    extra, attrs = _axes_operand(cx, "Squeeze", dims, 13) if dims else ([], {})
    cx.node("Squeeze", [op.inputs[0], *extra], op.outputs[:1], **attrs)


@exporter("ExpandDims")
def _expand_dims(cx: ExportContext, op: Op) -> None:
    extra, attrs = _axes_operand(cx, "Unsqueeze", sorted(_ints(op.arg("dims"))), 13)
    cx.node("Unsqueeze", [op.inputs[0], *extra], op.outputs[:1], **attrs)


@exporter("Shape")
def _shape(cx: ExportContext, op: Op) -> None:
    axes = op.arg("axes")
    if axes is None:
        cx.node("Shape", op.inputs[:1], op.outputs[:1])
        return
    full = cx.fresh(f"{op.outputs[0]}_full")
    cx.node("Shape", op.inputs[:1], [full])
    indices = cx.const(onnx_int64(_ints(axes)), f"{op.outputs[0]}_axes")
    cx.node("Gather", [full, indices], op.outputs[:1], axis=0)


@exporter("Gather")
def _gather(cx: ExportContext, op: Op) -> None:
    cx.node("Gather", op.inputs[:2], op.outputs[:1], axis=int(op.arg("axis", 0)))


@exporter("Cast")
def _cast(cx: ExportContext, op: Op) -> None:
    try:
        code = caffe2_dtype_number(op.arg("to"))
    except GraphToolsError as exc:
        raise cx.refuse(str(exc)) from exc
    to = CAFFE2_TO_ONNX.get(code)
    if to is None:
        raise cx.refuse(f"Caffe2 data type {code} has no ONNX counterpart")
    cx.node("Cast", op.inputs[:1], op.outputs[:1], to=to)


@exporter(*VALUE_COPIES)
def _copy(cx: ExportContext, op: Op) -> None:
    cx.node("Identity", op.inputs[:1], op.outputs[:1])


def _fill_value(cx: ExportContext, op: Op) -> np.ndarray:
    """The value a fill op without inputs writes, computed by the executor's kernel."""
    workspace = Workspace()
    try:
        run_op(op, workspace, index=cx.index)
    except GraphToolsError as exc:
        raise cx.refuse(f"cannot evaluate the fill: {exc}") from exc
    return np.asarray(workspace.fetch(op.outputs[0]))


@exporter(
    "GivenTensorFill",
    "GivenTensorDoubleFill",
    "GivenTensorFp16Fill",
    "GivenTensorIntFill",
    "GivenTensorInt64Fill",
    "GivenTensorInt16Fill",
    "GivenTensorBoolFill",
    "GivenTensorStringFill",
    "GivenTensorByteStringToUInt8Fill",
    "ConstantFill",
    "RangeFill",
)
def _fill(cx: ExportContext, op: Op) -> None:
    if not op.inputs:
        value = _fill_value(cx, op)
        cx.node("Constant", [], op.outputs[:1], value=numpy_helper.from_array(value))
        return
    if op.type != "ConstantFill" or op.arg("extra_shape") is not None:
        raise cx.refuse(f"{op.type} with an input")
    dtype: np.dtype[Any] = np.dtype(np.float32)
    if op.has_arg("dtype"):
        onnx_type = CAFFE2_TO_ONNX.get(caffe2_dtype_number(op.arg("dtype")))
        if onnx_type is None:
            raise cx.refuse(f"dtype {op.arg('dtype')} has no ONNX counterpart")
        dtype = numpy_of_onnx(onnx_type)
    elif isinstance(op.arg("value", 0.0), int):
        dtype = np.dtype(np.int64)
    filler = numpy_helper.from_array(np.asarray([op.arg("value", 0)], dtype=dtype))
    shape = op.inputs[0]
    if op.arg("input_as_shape", 0):
        if cx.dtype(shape, np.int64) != np.int64:
            cast = cx.fresh(f"{shape}_int64")
            cx.node("Cast", [shape], [cast], to=7)
            shape = cast
    else:
        of = cx.fresh(f"{shape}_shape")
        cx.node("Shape", [shape], [of])
        shape = of
    cx.node("ConstantOfShape", [shape], op.outputs[:1], value=filler)

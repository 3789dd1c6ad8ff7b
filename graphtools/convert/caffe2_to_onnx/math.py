"""Exporters for math ops: FC as Flatten + Gemm, matrix products, arithmetic (legacy broadcast
included), Sum, Scale, Clip, reductions and arg-reductions."""

from __future__ import annotations

from graphtools.convert.caffe2_to_onnx.context import ExportContext, exporter, onnx_int64
from graphtools.ir import Op

__all__: list[str] = []


def _flatten(cx: ExportContext, name: str, axis: int, hint: str) -> str:
    """``name`` as a 2-D matrix split at ``axis`` (no node when it already is one)."""
    if axis == 1 and cx.rank(name) == 2:
        return name
    flat = cx.fresh(hint)
    cx.node("Flatten", [name], [flat], axis=axis)
    return flat


@exporter("FC", "FCTransposed")
def _fc(cx: ExportContext, op: Op) -> None:
    """Flatten + Gemm: never a Reshape with a baked batch size. With ``axis > 1`` the leading
    dims are restored from the input's runtime shape."""
    x, w = op.inputs[:2]
    y = op.outputs[0]
    axis, axis_w = int(op.arg("axis", 1)), int(op.arg("axis_w", 1))
    if axis < 0:
        axis += cx.need_rank(x, "negative FC axis")
    flat_x = _flatten(cx, x, axis, f"{x}_flat")
    flat_w = _flatten(cx, w, axis_w, f"{w}_flat")
    trans_b = 1 if op.type == "FC" else 0
    out = y if axis == 1 else cx.fresh(f"{y}_2d")
    cx.node("Gemm", [flat_x, flat_w, *op.inputs[2:3]], [out], transB=trans_b)
    if axis == 1:
        return
    x_shape, out_shape = cx.fresh(f"{x}_shape"), cx.fresh(f"{out}_shape")
    lead, width, target = cx.fresh(f"{y}_lead"), cx.fresh(f"{y}_width"), cx.fresh(f"{y}_shape")
    cx.node("Shape", [x], [x_shape])
    cx.node(
        "Slice",
        [x_shape, cx.const(onnx_int64([0]), "zero"), cx.const(onnx_int64([axis]), "axis")],
        [lead],
    )
    cx.node("Shape", [out], [out_shape])
    cx.node(
        "Slice",
        [out_shape, cx.const(onnx_int64([1]), "one"), cx.const(onnx_int64([2]), "two")],
        [width],
    )
    cx.node("Concat", [lead, width], [target], axis=0)
    cx.node("Reshape", [out, target], [y])


@exporter("MatMul")
def _matmul(cx: ExportContext, op: Op) -> None:
    a = _flatten(cx, op.inputs[0], int(op.arg("axis_a", 1)), f"{op.inputs[0]}_flat")
    b = _flatten(cx, op.inputs[1], int(op.arg("axis_b", 1)), f"{op.inputs[1]}_flat")
    trans_a, trans_b = int(op.arg("trans_a", 0)), int(op.arg("trans_b", 0))
    cx.node("Gemm", [a, b], op.outputs[:1], transA=trans_a or None, transB=trans_b or None)


def _swap_last(cx: ExportContext, name: str) -> str:
    rank = cx.need_rank(name, "BatchMatMul transposition")
    if rank < 2:
        return name
    perm = [*range(rank - 2), rank - 1, rank - 2]
    out = cx.fresh(f"{name}_t")
    cx.node("Transpose", [name], [out], perm=perm)
    return out


@exporter("BatchMatMul")
def _batch_matmul(cx: ExportContext, op: Op) -> None:
    a, b = op.inputs[:2]
    if op.arg("trans_a", 0):
        a = _swap_last(cx, a)
    if op.arg("trans_b", 0):
        b = _swap_last(cx, b)
    cx.node("MatMul", [a, b], op.outputs[:1])


@exporter("Add", "Sub", "Mul", "Div")
def _arithmetic(cx: ExportContext, op: Op) -> None:
    """numpy broadcasting is ONNX's; Caffe2's legacy ``broadcast=1`` with an ``axis`` aligns B
    at that axis, which an Unsqueeze of B's trailing dims reproduces."""
    a, b = op.inputs[:2]
    axis = op.arg("axis")
    if op.arg("broadcast", 0) and axis is not None:
        rank_a = cx.need_rank(a, "legacy broadcast with an axis")
        rank_b = cx.need_rank(b, "legacy broadcast with an axis")
        axis = int(axis) if int(axis) >= 0 else rank_a - rank_b
        trailing = list(range(rank_b, rank_a - axis))
        if trailing:
            expanded = cx.fresh(f"{b}_aligned")
            if cx.opset >= 13:
                cx.node("Unsqueeze", [b, cx.const(onnx_int64(trailing), "axes")], [expanded])
            else:
                cx.node("Unsqueeze", [b], [expanded], axes=trailing)
            b = expanded
    elif op.arg("broadcast", 0) and op.has_arg("axis_str"):
        raise cx.refuse("legacy broadcast with axis_str")
    cx.node(op.type, [a, b], op.outputs[:1])


@exporter("Sum")
def _sum(cx: ExportContext, op: Op) -> None:
    cx.node("Sum", op.inputs, op.outputs[:1])


@exporter("Scale")
def _scale(cx: ExportContext, op: Op) -> None:
    x = op.inputs[0]
    factor = cx.const(float(op.arg("scale", 1.0)), f"{op.outputs[0]}_scale", cx.dtype(x))
    cx.node("Mul", [x, factor], op.outputs[:1])


@exporter("Clip")
def _clip(cx: ExportContext, op: Op) -> None:
    x = op.inputs[0]
    bounds = []
    for name in ("min", "max"):
        value = op.arg(name)
        bounds.append(
            "" if value is None else cx.const(value, f"{op.outputs[0]}_{name}", cx.dtype(x))
        )
    while bounds and not bounds[-1]:
        bounds.pop()
    cx.node("Clip", [x, *bounds], op.outputs[:1])


_AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18}


@exporter(*_AXES_INPUT_SINCE)
def _reduce(cx: ExportContext, op: Op) -> None:
    axes = op.arg("axes")
    keepdims = int(op.arg("keepdims", 1))
    inputs = [op.inputs[0]]
    attrs: dict[str, object] = {"keepdims": keepdims}
    if axes is not None:
        axes = [int(a) for a in (axes if isinstance(axes, tuple) else (axes,))]
        if cx.opset >= _AXES_INPUT_SINCE[op.type]:
            inputs.append(cx.const(onnx_int64(axes), f"{op.outputs[0]}_axes"))
        else:
            attrs["axes"] = axes
    cx.node(op.type, inputs, op.outputs[:1], **attrs)


@exporter("ArgMax", "ArgMin")
def _arg_reduce(cx: ExportContext, op: Op) -> None:
    cx.node(
        op.type,
        op.inputs[:1],
        op.outputs[:1],
        axis=int(op.arg("axis", -1)),
        keepdims=int(op.arg("keepdims", 1)),
    )


_COMPARISONS = {"LT": ("Less", 7), "GT": ("Greater", 7), "EQ": ("Equal", 7)}
_COMPARISONS |= {"LE": ("LessOrEqual", 12), "GE": ("GreaterOrEqual", 12)}


@exporter(*_COMPARISONS)
def _compare(cx: ExportContext, op: Op) -> None:
    """Caffe2's comparisons broadcast as numpy does, as ONNX's."""
    onnx_type, since = _COMPARISONS[op.type]
    if cx.opset < since:
        raise cx.refuse(f"{onnx_type} needs opset {since}")
    if op.arg("broadcast", 0) and op.arg("axis") is not None:
        raise cx.refuse("legacy broadcast with an axis")
    cx.node(onnx_type, op.inputs[:2], op.outputs[:1])

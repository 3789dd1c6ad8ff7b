"""Importers for math ops: Gemm, MatMul, broadcasting arithmetic, Sum, Clip, reductions, unary.

Caffe2's Add/Sub/Mul/Div without a ``broadcast`` argument broadcast the numpy way, as ONNX does
from opset 7. ``Gemm`` becomes ``FC`` (``FCTransposed`` when B is not transposed) when it is
``A B^T + c`` with a 1-D ``c`` of the output width, else ``MatMul`` + ``Scale`` + ``Add``.
"""

from __future__ import annotations

from graphtools.convert.onnx_to_caffe2.context import NodeContext, int_list
from graphtools.convert.onnx_to_caffe2.registry import converter

__all__: list[str] = []


@converter("Gemm", since=(7, 9, 11, 13), attributes=("alpha", "beta", "transA", "transB"))
def _gemm(ctx: NodeContext) -> None:
    a, b = ctx.inputs[:2]
    c = ctx.input(2)
    y = ctx.outputs[0]
    alpha = float(ctx.attr("alpha", 1.0))
    beta = float(ctx.attr("beta", 1.0))
    trans_a = int(ctx.attr("transA", 0))
    trans_b = int(ctx.attr("transB", 0))
    b_shape = ctx.shape(b)
    c_shape = ctx.shape(c)
    width = None if b_shape is None or len(b_shape) != 2 else b_shape[0 if trans_b else 1]
    if beta == 0.0:
        c = None
    if (
        c is not None
        and not trans_a
        and alpha == 1.0
        and beta == 1.0
        and c_shape is not None
        and len(c_shape) == 1
        and c_shape[0] is not None
        and (c_shape[0] == width or (width is None and c_shape[0] != 1))
    ):
        ctx.emit("FC" if trans_b else "FCTransposed", [a, b, c], [y])
        return
    product = y if c is None and alpha == 1.0 else ctx.fresh(f"{y}_product")
    ctx.emit(
        "MatMul",
        [a, b],
        [product],
        trans_a=trans_a or None,
        trans_b=trans_b or None,
    )
    if alpha != 1.0:
        scaled = y if c is None else ctx.fresh(f"{y}_scaled")
        ctx.emit("Scale", [product], [scaled], scale=alpha)
        product = scaled
    if c is None:
        return
    if beta != 1.0:
        c_scaled = ctx.fresh(f"{c}_scaled")
        ctx.emit("Scale", [c], [c_scaled], scale=beta)
        c = c_scaled
    ctx.emit("Add", [product, c], [y])


@converter("MatMul", since=(1, 9, 13))
def _matmul(ctx: NodeContext) -> None:
    ctx.emit("BatchMatMul", ctx.inputs, ctx.outputs, broadcast=1)


@converter("Add", "Sub", "Mul", "Div", since=(7, 13, 14))
def _arithmetic(ctx: NodeContext) -> None:
    ctx.emit(ctx.node.type, ctx.inputs, ctx.outputs)


@converter("Sum", since=(6, 8, 13))
def _sum(ctx: NodeContext) -> None:
    """Caffe2's Sum needs equal shapes; operands that may broadcast are added pairwise."""
    inputs, y = ctx.inputs, ctx.outputs[0]
    if len(inputs) == 1:
        ctx.emit("Copy", inputs, [y])
        return
    shapes = [ctx.shape(name) for name in inputs]
    static = all(s is not None and None not in s for s in shapes)
    if ctx.since == 6 or (static and len(set(shapes)) == 1):
        ctx.emit("Sum", inputs, [y])
        return
    total = inputs[0]
    for position, name in enumerate(inputs[1:], start=2):
        out = y if position == len(inputs) else ctx.fresh(f"{y}_partial")
        ctx.emit("Add", [total, name], [out])
        total = out


@converter("Clip", since=(6, 11, 12, 13), attributes=("min", "max"))
def _clip(ctx: NodeContext) -> None:
    if ctx.since < 11:
        low, high = ctx.attr("min"), ctx.attr("max")
    else:
        low = None if ctx.input(1) is None else float(ctx.need_const(1, "min").reshape(-1)[0])
        high = None if ctx.input(2) is None else float(ctx.need_const(2, "max").reshape(-1)[0])
    ctx.emit(
        "Clip",
        [ctx.inputs[0]],
        ctx.outputs,
        min=None if low is None else float(low),
        max=None if high is None else float(high),
    )


def _reduce(ctx: NodeContext, axes_as_input_since: int) -> None:
    axes: list[int] | None
    if ctx.since >= axes_as_input_since:
        axes = None if ctx.input(1) is None else int_list(ctx.need_const(1, "axes"))
    else:
        axes = None if ctx.attr("axes") is None else list(ctx.attr("axes"))
    keepdims = int(ctx.attr("keepdims", 1))
    x, y = ctx.inputs[0], ctx.outputs[0]
    if not axes:
        if int(ctx.attr("noop_with_empty_axes", 0)):
            ctx.emit("Copy", [x], [y])
            return
        axes = None
    if ctx.node.type in ("ReduceMax", "ReduceMin"):
        shape = ctx.shape(x)
        reduced = range(len(shape)) if shape is not None and axes is None else (axes or [])
        if shape is not None and any(shape[a] == 0 for a in reduced):
            raise ctx.refuse("reduces an empty dim, where Caffe2 has no identity value to give")
    ctx.emit(ctx.node.type, [x], [y], axes=axes, keepdims=keepdims)


_REDUCE_ATTRS = ("axes", "keepdims", "noop_with_empty_axes")


@converter("ReduceMean", since=(1, 11, 13, 18), attributes=_REDUCE_ATTRS)
def _reduce_mean(ctx: NodeContext) -> None:
    _reduce(ctx, 18)


@converter("ReduceSum", since=(1, 11, 13), attributes=_REDUCE_ATTRS)
def _reduce_sum(ctx: NodeContext) -> None:
    _reduce(ctx, 13)


@converter("ReduceMax", "ReduceMin", since=(1, 11, 12, 13, 18, 20), attributes=_REDUCE_ATTRS)
def _reduce_max_min(ctx: NodeContext) -> None:
    _reduce(ctx, 18)


@converter("Exp", "Log", "Sqrt", "Abs", since=(6, 13))
def _unary(ctx: NodeContext) -> None:
    ctx.emit(ctx.node.type, ctx.inputs, ctx.outputs)


@converter("Neg", since=(6, 13))
def _neg(ctx: NodeContext) -> None:
    ctx.emit("Negative", ctx.inputs, ctx.outputs)

"""Importers for element-wise and selection ops with a Caffe2 counterpart: ``Sign``, ``Mod``,
``Mean``, ``PRelu``, ``Equal``, ``ArgMax``/``ArgMin`` and ``TopK``.

``Mod`` and ``TopK`` need their divisor and ``K`` as constants (Caffe2 takes them as arguments);
``PRelu``'s slope must broadcast along one channel axis (axis 1 as ``(C, 1, ..., 1)``, or the
last as ``(C,)``), as Caffe2's per-channel slope does; ``Mean`` of inputs that may broadcast is
an ``Add`` chain scaled by ``1/n``.
"""

from __future__ import annotations

import math

import numpy as np

from graphtools.onnx.context import NodeContext
from graphtools.onnx.registry import converter

__all__: list[str] = []


@converter("Sign", since=(9, 13))
def _sign(ctx: NodeContext) -> None:
    ctx.emit("Sign", ctx.inputs, ctx.outputs)


@converter("Mod", since=(10, 13, 28), attributes=("fmod",))
def _mod(ctx: NodeContext) -> None:
    """Caffe2's ``Mod`` divides integers by a constant ``divisor``."""
    divisor = ctx.need_const(1, "divisor")
    if divisor.size != 1 or not np.issubdtype(divisor.dtype, np.integer):
        raise ctx.refuse(f"a divisor of {divisor.dtype}{list(divisor.shape)} (one integer)")
    if int(divisor.reshape(-1)[0]) == 0:
        raise ctx.refuse("a zero divisor")
    follow = 0 if int(ctx.attr("fmod", 0)) else 1
    ctx.emit(
        "Mod",
        ctx.inputs[:1],
        ctx.outputs,
        divisor=int(divisor.reshape(-1)[0]),
        sign_follow_divisor=follow,
    )


@converter("Mean", since=(6, 8, 13))
def _mean(ctx: NodeContext) -> None:
    inputs, y = ctx.inputs, ctx.outputs[0]
    shapes = [ctx.shape(name) for name in inputs]
    static = all(s is not None and None not in s for s in shapes)
    if ctx.since == 6 or (static and len(set(shapes)) == 1):
        ctx.emit("Mean", inputs, [y])
        return
    total = inputs[0]
    for name in inputs[1:]:
        out = ctx.fresh(f"{y}_partial")
        ctx.emit("Add", [total, name], [out])
        total = out
    ctx.emit("Scale", [total], [y], scale=1.0 / len(inputs))


@converter("PRelu", since=(7, 9, 16))
def _prelu(ctx: NodeContext) -> None:
    x, slope = ctx.inputs[:2]
    x_shape, s_shape = ctx.shape(x), ctx.shape(slope)
    if x_shape is None or s_shape is None or any(d is None for d in s_shape):
        raise ctx.refuse("needs the static shapes of X and slope (Caffe2's slope is per channel)")
    size = math.prod(d or 0 for d in s_shape)
    channels = [d for d in s_shape if d != 1]
    if size == 1:
        ctx.emit("PRelu", [x, slope], ctx.outputs)
    elif len(s_shape) == len(x_shape) - 1 and s_shape[0] == size and x_shape[1] in (size, None):
        ctx.emit("PRelu", [x, slope], ctx.outputs)  # (C, 1, ..., 1): channel axis 1
    elif len(channels) == 1 and s_shape[-1] == size and x_shape[-1] in (size, None):
        ctx.emit("PRelu", [x, slope], ctx.outputs, order="NHWC")  # broadcast on the last axis
    else:
        raise ctx.refuse(
            f"slope {list(s_shape)} does not broadcast along one channel axis of X "
            f"{list(x_shape)} (Caffe2's slope is per channel)"
        )


@converter("Equal", since=(7, 11, 13, 19))
def _equal(ctx: NodeContext) -> None:
    ctx.emit("EQ", ctx.inputs, ctx.outputs)


@converter(
    "ArgMax",
    "ArgMin",
    since=(1, 11, 12, 13),
    attributes=("axis", "keepdims", "select_last_index"),
)
def _arg_reduce(ctx: NodeContext) -> None:
    if int(ctx.attr("select_last_index", 0)):
        raise ctx.refuse("Caffe2 picks the first extreme index", "select_last_index")
    ctx.emit(
        ctx.node.op_type,
        ctx.inputs,
        ctx.outputs,
        axis=int(ctx.attr("axis", 0)),
        keepdims=int(ctx.attr("keepdims", 1)),
    )


@converter("TopK", since=(1, 10, 11, 24), attributes=("axis", "k", "largest", "sorted"))
def _top_k(ctx: NodeContext) -> None:
    """Caffe2's TopK returns the largest values, sorted, ties by the lower index (ONNX's
    ``sorted=0`` leaves the order free, so the sorted order is one)."""
    if not int(ctx.attr("largest", 1)):
        raise ctx.refuse("Caffe2's TopK returns the largest values only", "largest")
    k = ctx.attr("k") if ctx.since == 1 else int(ctx.need_const(1, "K").reshape(-1)[0])
    outputs = [ctx.output(0) or ctx.fresh("values"), ctx.output(1) or ctx.fresh("indices")]
    ctx.emit("TopK", ctx.inputs[:1], outputs, k=int(k), axis=int(ctx.attr("axis", -1)))

"""Importers for neural-network ops: convolutions, pooling, normalisation, activations, softmax.

Window attributes map to Caffe2's ``kernels``/``strides``/``dilations``/``pads`` (ONNX pads are
all heads then all tails, Caffe2's order too). ``auto_pad=SAME_*`` and ``ceil_mode=1`` have no
Caffe2 argument: they are turned into explicit pads from the input's static spatial sizes
(ceil mode as extra tail padding, which max pooling and average pooling without padding counted
ignore), and refused when the sizes are unknown.
"""

from __future__ import annotations

from math import ceil

from graphtools.convert.onnx_to_caffe2.context import NodeContext
from graphtools.convert.onnx_to_caffe2.registry import converter

__all__ = ["window_args"]

_WINDOW = ("auto_pad", "dilations", "kernel_shape", "pads", "strides")


def _spatial(ctx: NodeContext, nd: int, why: str) -> list[int]:
    shape = ctx.shape(ctx.input(0))
    if shape is None or len(shape) != nd + 2 or any(d is None for d in shape[2:]):
        raise ctx.refuse(f"needs the static spatial sizes of input {ctx.input(0)!r} ({why})")
    return [int(d) for d in shape[2:] if d is not None]


def window_args(
    ctx: NodeContext, kernel: list[int] | None, *, ceil_ok: bool
) -> dict[str, list[int]]:
    """Caffe2 window arguments of a conv or pool node (see the module docstring).

    Args:
        ctx: the node.
        kernel: the kernel sizes (``kernel_shape``, or the filter's spatial shape), ``None``
            when unknown.
        ceil_ok: whether extra tail padding is an exact stand-in for ``ceil_mode=1``.
    """
    if ctx.attr("kernel_shape") is not None:
        kernel = list(ctx.attr("kernel_shape"))
    nd = len(kernel) if kernel is not None else None
    args: dict[str, list[int]] = {}
    if ctx.attr("kernel_shape") is not None:
        args["kernels"] = list(ctx.attr("kernel_shape"))
    strides = ctx.attr("strides")
    dilations = ctx.attr("dilations")
    pads = ctx.attr("pads")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if strides is not None:
        args["strides"] = list(strides)
    if dilations is not None:
        args["dilations"] = list(dilations)
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.refuse("is not an auto_pad value ONNX defines", "auto_pad")
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    if auto_pad == "VALID":
        pads = None
    if auto_pad.startswith("SAME") or ceil_mode:
        if kernel is None or nd is None:
            raise ctx.refuse("needs the kernel size to compute explicit pads", "auto_pad")
        sizes = _spatial(ctx, nd, "auto_pad SAME or ceil_mode")
        st = list(strides or [1] * nd)
        dl = list(dilations or [1] * nd)
        heads = list(pads[:nd]) if pads and auto_pad == "NOTSET" else [0] * nd
        tails = list(pads[nd:]) if pads and auto_pad == "NOTSET" else [0] * nd
        for i in range(nd):
            span = (kernel[i] - 1) * dl[i] + 1
            if auto_pad.startswith("SAME"):
                out = ceil(sizes[i] / st[i])
                total = max((out - 1) * st[i] + span - sizes[i], 0)
                small = total // 2
                heads[i] = small if auto_pad == "SAME_UPPER" else total - small
                tails[i] = total - heads[i]
            if ceil_mode:
                padded = sizes[i] + heads[i] + tails[i]
                out = ceil((padded - span) / st[i]) + 1
                if (out - 1) * st[i] >= sizes[i] + heads[i]:
                    out -= 1
                extra = (out - 1) * st[i] + span - padded
                if extra > 0:
                    if not ceil_ok:
                        raise ctx.refuse(
                            "with count_include_pad=1 cannot be expressed as Caffe2 padding",
                            "ceil_mode",
                        )
                    tails[i] += extra
        pads = heads + tails
    if pads is not None and any(pads):
        args["pads"] = list(pads)
    return args


def _filter_kernel(ctx: NodeContext) -> list[int] | None:
    shape = ctx.shape(ctx.input(1))
    if shape is None or any(d is None for d in shape[2:]):
        return None
    return [int(d) for d in shape[2:] if d is not None]


@converter("Conv", since=(1, 11, 22), attributes=(*_WINDOW, "group"))
def _conv(ctx: NodeContext) -> None:
    args = window_args(ctx, _filter_kernel(ctx), ceil_ok=False)
    group = int(ctx.attr("group", 1))
    ctx.emit("Conv", ctx.inputs, ctx.outputs, group=group if group != 1 else None, **args)


@converter(
    "ConvTranspose",
    since=(1, 11, 22),
    attributes=(*_WINDOW, "group", "output_padding", "output_shape"),
)
def _conv_transpose(ctx: NodeContext) -> None:
    if ctx.attr("output_shape") is not None:
        raise ctx.refuse("(explicit output shape) is not supported", "output_shape")
    if ctx.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ctx.refuse("is not supported for ConvTranspose", "auto_pad")
    if any(d != 1 for d in ctx.attr("dilations", [])):
        raise ctx.refuse("Caffe2's ConvTranspose has no dilation", "dilations")
    args = window_args(ctx, _filter_kernel(ctx), ceil_ok=False)
    args.pop("dilations", None)
    adjs = ctx.attr("output_padding")
    group = int(ctx.attr("group", 1))
    ctx.emit(
        "ConvTranspose",
        ctx.inputs,
        ctx.outputs,
        adjs=list(adjs) if adjs is not None and any(adjs) else None,
        group=group if group != 1 else None,
        **args,
    )


def _pool(ctx: NodeContext, op_type: str) -> None:
    if ctx.output(1) is not None:
        raise ctx.refuse("the Indices output of MaxPool is not supported")
    include_pad = bool(ctx.attr("count_include_pad", 0))
    args = window_args(ctx, None, ceil_ok=not include_pad)
    ctx.emit(
        op_type,
        [ctx.inputs[0]],
        [ctx.outputs[0]],
        count_include_pad=1 if include_pad else None,
        **args,
    )


@converter(
    "MaxPool",
    since=(1, 8, 10, 11, 12, 22),
    attributes=(*_WINDOW, "ceil_mode", "storage_order"),
)
def _max_pool(ctx: NodeContext) -> None:
    _pool(ctx, "MaxPool")


@converter(
    "AveragePool",
    since=(7, 10, 11, 19, 22),
    attributes=(*_WINDOW, "ceil_mode", "count_include_pad"),
)
def _average_pool(ctx: NodeContext) -> None:
    _pool(ctx, "AveragePool")


@converter("GlobalAveragePool", "GlobalMaxPool", since=(1, 22))
def _global_pool(ctx: NodeContext) -> None:
    op_type = "AveragePool" if ctx.node.type == "GlobalAveragePool" else "MaxPool"
    ctx.emit(op_type, ctx.inputs, ctx.outputs, global_pooling=1)


@converter(
    "BatchNormalization",
    since=(7, 9, 14, 15),
    attributes=("epsilon", "momentum", "spatial", "training_mode"),
)
def _batch_norm(ctx: NodeContext) -> None:
    if int(ctx.attr("spatial", 1)) != 1:
        raise ctx.refuse("(per-activation batch norm) has no Caffe2 SpatialBN form", "spatial")
    if int(ctx.attr("training_mode", 0)):
        raise ctx.refuse("(training mode) is not supported: inference only", "training_mode")
    if len(ctx.outputs) > 1:
        raise ctx.refuse("the running statistics outputs (training mode) are not supported")
    ctx.emit(
        "SpatialBN",
        ctx.inputs,
        ctx.outputs,
        is_test=1,
        epsilon=float(ctx.attr("epsilon", 1e-5)),
    )


@converter("LRN", since=(1, 13), attributes=("alpha", "beta", "bias", "size"))
def _lrn(ctx: NodeContext) -> None:
    ctx.emit(
        "LRN",
        ctx.inputs,
        ctx.outputs,
        size=int(ctx.attr("size")),
        alpha=float(ctx.attr("alpha", 1e-4)),
        beta=float(ctx.attr("beta", 0.75)),
        bias=float(ctx.attr("bias", 1.0)),
    )


@converter("Dropout", since=(7, 10, 12, 13, 22), attributes=("ratio", "seed"))
def _dropout(ctx: NodeContext) -> None:
    if ctx.input(2) is not None:
        training = ctx.need_const(2, "training_mode")
        if bool(training.reshape(-1)[0]):
            raise ctx.refuse("training_mode=True (random masks) is not supported")
    if ctx.input(1) is not None:
        ctx.need_const(1, "ratio")
    x, mask = ctx.inputs[0], ctx.output(1)
    if mask is not None and ctx.since < 10:
        # Before opset 10 the mask has the data's type: ones, not Caffe2's boolean mask.
        ctx.emit("Dropout", [x], [ctx.outputs[0]], is_test=1)
        ctx.emit("ConstantFill", [x], [mask], value=1.0)
        return
    ctx.emit("Dropout", [x], ctx.outputs, is_test=1)


@converter("Relu", since=(6, 13, 14))
def _relu(ctx: NodeContext) -> None:
    ctx.emit("Relu", ctx.inputs, ctx.outputs)


@converter("Sigmoid", "Tanh", since=(6, 13))
def _sigmoid_tanh(ctx: NodeContext) -> None:
    ctx.emit(ctx.node.type, ctx.inputs, ctx.outputs)


@converter("Softplus", since=(1, 22))
def _softplus(ctx: NodeContext) -> None:
    ctx.emit("Softplus", ctx.inputs, ctx.outputs)


@converter("LeakyRelu", since=(6, 16), attributes=("alpha",))
def _leaky_relu(ctx: NodeContext) -> None:
    ctx.emit("LeakyRelu", ctx.inputs, ctx.outputs, alpha=float(ctx.attr("alpha", 0.01)))


@converter("Softmax", since=(1, 11, 13), attributes=("axis",))
def _softmax(ctx: NodeContext) -> None:
    """Before 13 ONNX flattens to 2-D at ``axis`` like Caffe2; from 13 it normalises one axis,
    which Caffe2's Softmax does only for the last one (others are moved there and back)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.since < 13:
        ctx.emit("Softmax", [x], [y], axis=int(ctx.attr("axis", 1)))
        return
    axis = int(ctx.attr("axis", -1))
    if axis == -1:
        ctx.emit("Softmax", [x], [y], axis=-1)
        return
    rank = ctx.need_rank(x, "Softmax over an axis that is not the last")
    axis %= rank
    if axis == rank - 1:
        ctx.emit("Softmax", [x], [y], axis=axis)
        return
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = ctx.fresh(f"{y}_moved")
    normed = ctx.fresh(f"{y}_normed")
    ctx.emit("Transpose", [x], [moved], axes=perm)
    ctx.emit("Softmax", [moved], [normed], axis=rank - 1)
    ctx.emit("Transpose", [normed], [y], axes=perm)


@converter("LogSoftmax", since=(1, 11, 13), attributes=("axis",))
def _log_softmax(ctx: NodeContext) -> None:
    """``x - max - log(sum(exp(x - max)))`` over the softmax axes: Caffe2 has no LogSoftmax,
    and ``Log(Softmax)`` (upstream's mapping) gives -inf where the softmax underflows."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.since < 13:
        axis = int(ctx.attr("axis", 1))
        rank = ctx.rank(x)
        if axis in (-1,) or (rank is not None and axis % rank == rank - 1):
            axes = [-1]
        else:
            rank = ctx.need_rank(x, "LogSoftmax flattening at an axis")
            axes = list(range(axis % rank, rank))
    else:
        axes = [int(ctx.attr("axis", -1))]
    peak = ctx.fresh(f"{y}_max")
    shifted = ctx.fresh(f"{y}_shifted")
    exp = ctx.fresh(f"{y}_exp")
    total = ctx.fresh(f"{y}_sum")
    log_total = ctx.fresh(f"{y}_logsum")
    ctx.emit("ReduceMax", [x], [peak], axes=axes, keepdims=1)
    ctx.emit("Sub", [x, peak], [shifted])
    ctx.emit("Exp", [shifted], [exp])
    ctx.emit("ReduceSum", [exp], [total], axes=axes, keepdims=1)
    ctx.emit("Log", [total], [log_total])
    ctx.emit("Sub", [shifted, log_total], [y])

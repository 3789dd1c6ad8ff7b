"""Built-in gradient makers: the ops Caffe2's C++ makers emit, with their names and blob order.

Each maker says which gradient ops a forward op needs (``semantics.md`` 2.5); the executor has a
kernel for every op type made here. Schemas are the forward ops' input/output counts.
"""

from __future__ import annotations

from graphtools.gradients._proto import OperatorDef
from graphtools.gradients.registry import (
    MakerContext,
    builtin_gradient,
    builtin_no_gradient,
    builtin_should_not_do,
)

ONE = (1, 1)


@builtin_gradient("FC", inputs=(3, 3), outputs=ONE)
def _fc(ctx: MakerContext) -> list[OperatorDef]:
    return [
        ctx.make("FCGradient", [ctx.I(0), ctx.I(1), ctx.GO(0)], [ctx.GI(1), ctx.GI(2), ctx.GI(0)])
    ]


def _uses_output(gradient_type: str):  # type: ignore[no-untyped-def]
    def maker(ctx: MakerContext) -> list[OperatorDef]:
        return [ctx.make(gradient_type, [ctx.O(0), ctx.GO(0)], [ctx.GI(0)])]

    return maker


for _type in ("Relu", "Sigmoid", "Tanh", "Softmax"):
    builtin_gradient(_type, inputs=ONE, outputs=ONE)(_uses_output(_type + "Gradient"))


@builtin_gradient("Sum", inputs=(1, None), outputs=ONE)
def _sum(ctx: MakerContext) -> list[OperatorDef]:
    for i in range(len(ctx.op.input)):
        ctx.set_dense(i, ctx.GO(0))
    return []


def _binary(gradient_type: str):  # type: ignore[no-untyped-def]
    def maker(ctx: MakerContext) -> list[OperatorDef]:
        return [ctx.make(gradient_type, [ctx.GO(0), ctx.I(0), ctx.I(1)], [ctx.GI(0), ctx.GI(1)])]

    return maker


for _type in ("Add", "Sub", "Mul"):
    builtin_gradient(_type, inputs=(2, 2), outputs=ONE)(_binary(_type + "Gradient"))


@builtin_gradient("Div", inputs=(2, 2), outputs=ONE)
def _div(ctx: MakerContext) -> list[OperatorDef]:
    return [
        ctx.make("DivGradient", [ctx.GO(0), ctx.I(0), ctx.I(1), ctx.O(0)], [ctx.GI(0), ctx.GI(1)])
    ]


@builtin_gradient("MatMul", inputs=(2, 3), outputs=ONE, copy_arguments=False)
def _matmul(ctx: MakerContext) -> list[OperatorDef]:
    """Two MatMul ops; the third input names the shape of the result (Caffe2's maker, whose
    ``axis_a``/``axis_b`` are kept as C++ ``bool``, so any non-zero axis reads as 1)."""
    trans_a, trans_b = bool(ctx.arg("trans_a", 0)), bool(ctx.arg("trans_b", 0))
    axis_a = int(bool(ctx.arg("axis_a", 1)))
    axis_b = int(bool(ctx.arg("axis_b", 1)))
    a, b, g = ctx.I(0), ctx.I(1), ctx.GO(0)
    da, db = ctx.GI(0), ctx.GI(1)
    if trans_a and trans_b:
        return [
            ctx.make("MatMul", [b, g, a], [da], trans_a=1, trans_b=1, axis_a=axis_b),
            ctx.make("MatMul", [g, a, b], [db], trans_a=1, trans_b=1, axis_b=axis_a),
        ]
    if trans_a:
        return [
            ctx.make("MatMul", [b, g, a], [da], trans_b=1, axis_a=axis_b),
            ctx.make("MatMul", [a, g, b], [db], axis_a=axis_a),
        ]
    if trans_b:
        return [
            ctx.make("MatMul", [g, b, a], [da], axis_b=axis_b),
            ctx.make("MatMul", [g, a, b], [db], trans_a=1, axis_b=axis_a),
        ]
    return [
        ctx.make("MatMul", [g, b, a], [da], trans_b=1, axis_b=axis_b),
        ctx.make("MatMul", [a, g, b], [db], trans_a=1, axis_a=axis_a),
    ]


@builtin_gradient("Copy", inputs=ONE, outputs=ONE)
def _copy(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("CopyOnDeviceLike", [ctx.GO(0), ctx.I(0)], [ctx.GI(0)])]


@builtin_gradient("CopyGPUToCPU", inputs=ONE, outputs=ONE)
def _gpu_to_cpu(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("CopyCPUToGPU", [ctx.GO(0)], [ctx.GI(0)])]


@builtin_gradient("CopyCPUToGPU", inputs=ONE, outputs=ONE)
def _cpu_to_gpu(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("CopyGPUToCPU", [ctx.GO(0)], [ctx.GI(0)])]


@builtin_gradient("Conv", inputs=(2, 3), outputs=ONE)
def _conv(ctx: MakerContext) -> list[OperatorDef]:
    """Caffe2's ``GetConvGradient``: ``ConvGradient(X, W, dY) -> dW, db, dX``, without ``db``
    (and with ``no_bias=1``) for a Conv without bias, without ``dX`` with
    ``no_gradient_to_input``."""
    to_input = not ctx.arg("no_gradient_to_input", 0)
    inputs = [ctx.I(0), ctx.I(1), ctx.GO(0)]
    if len(ctx.op.input) == 3:
        outputs = [ctx.GI(1), ctx.GI(2)] + ([ctx.GI(0)] if to_input else [])
        return [ctx.make("ConvGradient", inputs, outputs)]
    outputs = [ctx.GI(1)] + ([ctx.GI(0)] if to_input else [])
    return [ctx.make("ConvGradient", inputs, outputs, no_bias=1)]


def _pool(gradient_type: str):  # type: ignore[no-untyped-def]
    """Caffe2's ``GetPoolGradient``: ``<Pool>Gradient(X, Y, dY) -> dX``."""

    def maker(ctx: MakerContext) -> list[OperatorDef]:
        return [ctx.make(gradient_type, [ctx.I(0), ctx.O(0), ctx.GO(0)], [ctx.GI(0)])]

    return maker


for _type in ("MaxPool", "AveragePool"):
    builtin_gradient(_type, inputs=ONE, outputs=ONE)(_pool(_type + "Gradient"))


@builtin_gradient("Concat", inputs=(1, None), outputs=(1, 2))
def _concat(ctx: MakerContext) -> list[OperatorDef]:
    if not ctx.has_GO(0):
        return []
    grads = [ctx.GI(i) for i in range(len(ctx.op.input))]
    return [ctx.make("Split", [ctx.GO(0), ctx.O(1)], grads)]


@builtin_gradient("Split", inputs=(1, 2), outputs=(1, None))
def _split(ctx: MakerContext) -> list[OperatorDef]:
    """Concat of the output gradients. Caffe2 concatenates only the gradients that exist, which
    gives a gradient of the wrong size when some are missing; here a missing one is a zero
    ``ConstantFill`` shaped like its output, so the input gradient keeps the input's shape."""
    if not any(ctx.has_GO(i) for i in range(len(ctx.op.output))):
        return []
    ops: list[OperatorDef] = []
    parts: list[str] = []
    for i, output in enumerate(ctx.op.output):
        if ctx.has_GO(i):
            parts.append(ctx.GO(i))
        else:
            zero = f"_{output}_grad_zero"
            ops.append(ctx.make("ConstantFill", [output], [zero], value=0.0))
            parts.append(zero)
    gi = ctx.GI(0)
    return [*ops, ctx.make("Concat", parts, [gi, f"_{gi}_dims"])]


@builtin_gradient("Reshape", inputs=(1, 2), outputs=(2, 2), copy_arguments=False)
def _reshape(ctx: MakerContext) -> list[OperatorDef]:
    gi = ctx.GI(0)
    return [ctx.make("Reshape", [ctx.GO(0), ctx.O(1)], [gi, f"_{gi}_dims"])]


@builtin_gradient("Transpose", inputs=ONE, outputs=ONE, copy_arguments=False)
def _transpose(ctx: MakerContext) -> list[OperatorDef]:
    op = ctx.make("Transpose", [ctx.GO(0)], [ctx.GI(0)])
    op.arg.extend(ctx.op.arg)
    axes = ctx.arg("axes")
    if axes is not None:
        inverse = [0] * len(axes)
        for i, axis in enumerate(axes):
            inverse[axis] = i
        for arg in op.arg:
            if arg.name == "axes":
                del arg.ints[:]
                arg.ints.extend(inverse)
                break
    return [op]


@builtin_gradient("ExpandDims", inputs=ONE, outputs=ONE)
def _expand_dims(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("Squeeze", [ctx.GO(0)], [ctx.GI(0)])]


@builtin_gradient("Squeeze", inputs=ONE, outputs=ONE)
def _squeeze(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("ExpandDims", [ctx.GO(0)], [ctx.GI(0)])]


@builtin_gradient("AveragedLoss", inputs=ONE, outputs=ONE)
def _averaged_loss(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("AveragedLossGradient", [ctx.I(0), ctx.GO(0)], [ctx.GI(0)])]


def _two_inputs(gradient_type: str):  # type: ignore[no-untyped-def]
    def maker(ctx: MakerContext) -> list[OperatorDef]:
        return [ctx.make(gradient_type, [ctx.I(0), ctx.I(1), ctx.GO(0)], [ctx.GI(0), ctx.GI(1)])]

    return maker


for _type in ("SquaredL2Distance", "DotProduct"):
    builtin_gradient(_type, inputs=(2, 2), outputs=ONE)(_two_inputs(_type + "Gradient"))


@builtin_gradient("SoftmaxWithLoss", inputs=(2, 3), outputs=(2, 2))
def _softmax_with_loss(ctx: MakerContext) -> list[OperatorDef]:
    names = [ctx.I(0), ctx.I(1), ctx.O(0), ctx.GO(1)]
    if len(ctx.op.input) == 3:
        names.insert(2, ctx.I(2))
    return [ctx.make("SoftmaxWithLossGradient", names, [ctx.GI(0)])]


@builtin_gradient("LSTMUnit", inputs=(4, 5), outputs=(2, 2))
def _lstm_unit(ctx: MakerContext) -> list[OperatorDef]:
    with_lengths = bool(ctx.arg("sequence_lengths", 1))
    count = 5 if with_lengths else 4
    inputs = [ctx.I(i) for i in range(count)] + [ctx.O(0), ctx.O(1), ctx.GO(0), ctx.GO(1)]
    return [ctx.make("LSTMUnitGradient", inputs, [ctx.GI(0), ctx.GI(1), ctx.GI(2)])]


@builtin_gradient("ZeroGradient", inputs=ONE, outputs=(0, 0), copy_arguments=True)
def _zero_gradient(ctx: MakerContext) -> list[OperatorDef]:
    return [ctx.make("ConstantFill", [ctx.I(0)], [ctx.GI(0)], value=0.0)]


builtin_no_gradient("StopGradient", inputs=ONE, outputs=ONE)
builtin_no_gradient("ConstantFill", inputs=(0, 1), outputs=ONE)
builtin_no_gradient(
    "UniformFill",
    "GaussianFill",
    "GivenTensorFill",
    "XavierFill",
    "MSRAFill",
    inputs=(0, 1),
    outputs=ONE,
)
builtin_no_gradient("LearningRate", inputs=ONE, outputs=ONE)
builtin_should_not_do("Print", inputs=(1, None), outputs=(0, 0))
builtin_should_not_do("Shape", inputs=ONE, outputs=ONE)
builtin_should_not_do("CreateScope", inputs=(0, 0), outputs=ONE)
builtin_should_not_do("HasScope", inputs=ONE, outputs=ONE)
builtin_should_not_do(
    "LT", "LE", "GT", "GE", "EQ", "NE", "And", "Or", "Xor", inputs=(2, 2), outputs=ONE
)
builtin_should_not_do("Not", inputs=ONE, outputs=ONE)

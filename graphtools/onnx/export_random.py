"""Exporters for Caffe2's random fills in a predict_net: ONNX's random generators.

A fill with a ``shape`` argument is ``RandomNormal``/``RandomUniform``; one that takes its input's
shape is ``RandomNormalLike``/``RandomUniformLike``. The other forms are ``caffe2``-domain
functions over those generators: a shape from the input's values (``input_as_shape``) or with
``extra_shape``, ``XavierFill`` (uniform in ``±sqrt(3 / fan_in)``, ``fan_in = size / shape[0]``),
``MSRAFill`` (normal with std ``sqrt(2 / fan_out)``, ``fan_out = size / shape[1]``) and
``UniformIntFill`` (integers in ``[min, max]``: the floor of a uniform draw in
``[min, max + 1)``). The draws are onnxruntime's, not the executor's: outputs are compared by
distribution (``graphtools.onnx.compare``). Fills of the init_net run at export time and become
initializers like any other parameter.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from onnx import TensorProto

from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter

__all__: list[str] = []


def _shape(op: Op) -> list[int]:
    value = op.arg("shape", ())
    return [int(v) for v in (value if isinstance(value, tuple) else (value,))]


def _bounds(op: Op) -> tuple[float, float]:
    return float(op.arg("min", 0.0)), float(op.arg("max", 1.0))


def _shape_of_input_body(fx: ExportContext) -> str:
    """The fill's shape in a function body: the input's values (``input_as_shape``) or its
    shape, then ``extra_shape``."""
    names = ("as_shape", "values", "flat", "dims", "chosen", "extra", "shape")
    as_shape, values, flat, dims, chosen, extra, shape = (fx.fresh(k) for k in names)
    fx.node("Cast", [fx.attr("input_as_shape")], [as_shape], to=TensorProto.BOOL)
    then = fx.subgraph("then", [])
    then.node("Cast", ["X"], [values], to=TensorProto.INT64)
    then.node("Reshape", [values, then.const(np.asarray([-1], np.int64), "all")], [flat])
    other = fx.subgraph("else", [])
    other.node("Shape", ["X"], [dims])
    fx.node(
        "If",
        [as_shape],
        [chosen],
        then_branch=then.graph("values", [flat]),
        else_branch=other.graph("shape", [dims]),
    )
    fx.node("Constant", [], [extra], value_ints=AttrRef("extra_shape"))
    fx.node("Concat", [chosen, extra], [shape], axis=0)
    return shape


def _like_body(op_type: str, fx: ExportContext) -> None:
    zeros = fx.fresh("zeros")
    fx.node("ConstantOfShape", [_shape_of_input_body(fx)], [zeros])  # float32 zeros
    if op_type == "GaussianFill":
        fx.node("RandomNormalLike", [zeros], ["Y"], mean=AttrRef("mean"), scale=AttrRef("std"))
    else:
        fx.node("RandomUniformLike", [zeros], ["Y"], low=AttrRef("min"), high=AttrRef("max"))


_SHAPE_ATTRS = {"input_as_shape": "int", "extra_shape": "ints"}
_SHAPED = {
    "GaussianFill": Function(
        "GaussianFill",
        ("X",),
        ("Y",),
        {**_SHAPE_ATTRS, "mean": "float", "std": "float"},
        partial(_like_body, "GaussianFill"),
    ),
    "UniformFill": Function(
        "UniformFill",
        ("X",),
        ("Y",),
        {**_SHAPE_ATTRS, "min": "float", "max": "float"},
        partial(_like_body, "UniformFill"),
    ),
}


@exporter("GaussianFill", "UniformFill")
def _gaussian_or_uniform(cx: ExportContext, op: Op) -> None:
    y = op.outputs[0]
    gaussian = op.type == "GaussianFill"
    params = (
        {"mean": float(op.arg("mean", 0.0)), "scale": float(op.arg("std", 1.0))}
        if gaussian
        else dict(zip(("low", "high"), _bounds(op), strict=True))
    )
    kind = "RandomNormal" if gaussian else "RandomUniform"
    if not op.inputs:
        if op.arg("input_as_shape", 0) or op.has_arg("extra_shape"):
            raise cx.refuse("input_as_shape/extra_shape need an input")
        cx.node(kind, [], [y], shape=_shape(op), dtype=TensorProto.FLOAT, **params)
        return
    if len(op.inputs) > 1:
        raise cx.refuse(f"{op.type} with its bounds given as inputs")
    if op.has_arg("shape"):
        raise cx.refuse(f"{op.type} with both an input and a 'shape' argument")
    if not op.arg("input_as_shape", 0) and not op.arg("extra_shape"):
        cx.node(f"{kind}Like", op.inputs[:1], [y], dtype=TensorProto.FLOAT, **params)
        return
    extra = [int(v) for v in op.arg("extra_shape", ())]
    if gaussian:
        cx.call(
            _SHAPED[op.type],
            op.inputs[:1],
            [y],
            input_as_shape=int(op.arg("input_as_shape", 0)),
            extra_shape=extra,
            mean=params["mean"],
            std=params["scale"],
        )
    else:
        low, high = _bounds(op)
        cx.call(
            _SHAPED[op.type],
            op.inputs[:1],
            [y],
            input_as_shape=int(op.arg("input_as_shape", 0)),
            extra_shape=extra,
            min=low,
            max=high,
        )


def _fan_body(op_type: str, fx: ExportContext) -> None:
    """Xavier/MSRA: a unit draw scaled by the bound or std computed from the fans."""
    names = ("shape", "zeros", "unit", "size", "lead", "fan", "ratio", "root", "second")
    shape, zeros, unit, size, lead, fan, ratio, root, second = (fx.fresh(k) for k in names)
    fx.node("Constant", [], [shape], value_ints=AttrRef("shape"))
    fx.node("ConstantOfShape", [shape], [zeros])
    if op_type == "XavierFill":
        fx.node("RandomUniformLike", [zeros], [unit], low=-1.0, high=1.0)
    else:
        fx.node("RandomNormalLike", [zeros], [unit], mean=0.0, scale=1.0)
    fx.node("ReduceProd", [shape], [size], keepdims=0)
    position = fx.const(np.int64(0 if op_type == "XavierFill" else 1), "axis")
    fx.node("Gather", [shape, position], [lead], axis=0)
    fx.node("Div", [size, lead], [fan])  # shapes here have no zero dims (checked at export)
    numerator = fx.const(np.float32(3.0 if op_type == "XavierFill" else 2.0), "numerator")
    as_float = fx.fresh("fan_float")
    fx.node("Cast", [fan], [as_float], to=TensorProto.FLOAT)
    fx.node("Div", [numerator, as_float], [ratio])
    fx.node("Sqrt", [ratio], [root])
    fx.node("Mul", [unit, root], [second])
    fx.node("Identity", [second], ["Y"])


def _int_body(fx: ExportContext) -> None:
    names = ("shape", "zeros", "unit", "low", "high", "span", "scaled", "moved", "floor")
    shape, zeros, unit, low, high, span, scaled, moved, floor = (fx.fresh(k) for k in names)
    fx.node("Constant", [], [shape], value_ints=AttrRef("shape"))
    fx.node("ConstantOfShape", [shape], [zeros])
    fx.node("RandomUniformLike", [zeros], [unit], low=0.0, high=1.0)
    fx.node("Cast", [fx.attr("min")], [low], to=TensorProto.FLOAT)
    fx.node("Cast", [fx.attr("max")], [high], to=TensorProto.FLOAT)
    one = fx.const(np.float32(1.0), "one")
    top = fx.fresh("top")
    fx.node("Add", [high, one], [top])
    fx.node("Sub", [top, low], [span])
    fx.node("Mul", [unit, span], [scaled])
    fx.node("Add", [scaled, low], [moved])
    fx.node("Floor", [moved], [floor])
    fx.node("Cast", [floor], ["Y"], to=TensorProto.INT32)


_FANS = {
    name: Function(name, (), ("Y",), {"shape": "ints"}, partial(_fan_body, name))
    for name in ("XavierFill", "MSRAFill")
}
_UNIFORM_INT = Function(
    "UniformIntFill", (), ("Y",), {"shape": "ints", "min": "int", "max": "int"}, _int_body
)


@exporter("XavierFill", "MSRAFill", "UniformIntFill")
def _fan_fill(cx: ExportContext, op: Op) -> None:
    if op.inputs:
        raise cx.refuse(f"{op.type} taking its shape from an input")
    shape = _shape(op)
    if op.type == "UniformIntFill":
        low, high = (int(op.arg(k, d)) for k, d in (("min", 0), ("max", 1)))
        cx.call(_UNIFORM_INT, [], op.outputs[:1], shape=shape, min=low, max=high)
        return
    axis = 0 if op.type == "XavierFill" else 1
    if len(shape) <= axis or 0 in shape:
        raise cx.refuse(f"{op.type} of shape {shape} (its fan needs dim {axis}, non-empty)")
    cx.call(_FANS[op.type], [], op.outputs[:1], shape=shape)

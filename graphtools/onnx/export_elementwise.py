"""Exporters for Caffe2's element-wise ops beyond the basic arithmetic.

Direct maps where ONNX has the op: ``Sign``, ``Mod`` (``fmod=1`` for C's sign, 0 when the sign
follows the divisor), ``Mean``, ``PRelu`` (the per-channel slope reshaped to broadcast along the
channel axis), ``HalfToFloat`` as ``Cast``, ``Gelu`` from opset 20. The others are functions of
the ``caffe2`` domain whose bodies follow the executor's formulas:

* ``Swish``: ``x / (1 + exp(-x))``;
* ``Gelu`` (before opset 20): ``0.5 x (1 + erf(x / sqrt 2))``, or with ``fast_gelu`` the tanh
  approximation;
* ``Logit``: ``log(c / (1 - c))`` of ``c`` clipped to ``[eps, 1 - eps]``;
* ``Log1p``: ``u = 1 + x``, then ``x`` where ``u == 1``, else ``log(u) * x / (u - 1)`` (exact
  to a few ulps where ``log(1 + x)`` loses the digits of a small ``x``);
* ``ReplaceNaN``: ``Where(IsNaN(x), value, x)``;
* ``Bucketize``: the number of ``boundaries`` below each value (int32);
* ``IsEmpty``: ``Size(x) == 0`` as a 0-d bool;
* ``BatchBoxCox``: per column ``((x + l2)^l1 - 1) / l1``, or ``log(x + l2)`` where ``l1 == 0``,
  with ``x + l2`` floored at 1e-6.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from onnx import TensorProto

from graphtools.analysis.op_args import order
from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter
from graphtools.onnx.export_helpers import int64s, reduce, scalar

__all__: list[str] = []


def _like(cx: ExportContext, value: float, like: str, hint: str) -> str:
    """A 0-d constant ``value`` of ``like``'s element type (function bodies are generic)."""
    out = cx.fresh(hint)
    cx.node("CastLike", [scalar(cx, value, np.float32, hint), like], [out])
    return out


# -- direct maps ----------------------------------------------------------------------------------


@exporter("Sign")
def _sign(cx: ExportContext, op: Op) -> None:
    cx.node("Sign", op.inputs[:1], op.outputs[:1])


@exporter("Mean")
def _mean(cx: ExportContext, op: Op) -> None:
    cx.node("Mean", op.inputs, op.outputs[:1])


@exporter("HalfToFloat")
def _half_to_float(cx: ExportContext, op: Op) -> None:
    cx.node("Cast", op.inputs[:1], op.outputs[:1], to=TensorProto.FLOAT)


@exporter("Mod")
def _mod(cx: ExportContext, op: Op) -> None:
    """ONNX's integer ``Mod`` takes the divisor's sign (``fmod=0``) or the dividend's
    (``fmod=1``, C's ``%``, Caffe2's default)."""
    divisor = op.arg("divisor")
    if divisor is None or int(divisor) == 0:
        raise cx.refuse("Mod needs a non-zero 'divisor' argument")
    x = op.inputs[0]
    dtype = cx.dtype(x, np.int64)
    if dtype not in (np.int32, np.int64):
        raise cx.refuse(f"Mod of a {dtype} input (int32 or int64 expected)")
    value = scalar(cx, int(divisor), dtype, f"{op.outputs[0]}_divisor")
    fmod = 0 if op.arg("sign_follow_divisor", 0) else 1
    cx.node("Mod", [x, value], op.outputs[:1], fmod=fmod)


@exporter("PRelu")
def _prelu(cx: ExportContext, op: Op) -> None:
    """ONNX broadcasts the slope numpy's way; Caffe2 applies a per-channel slope along the
    channel axis (1 in NCHW, the last in NHWC), so an NCHW slope gets trailing 1-dims."""
    x, slope = op.inputs[:2]
    try:
        layout = order(op)
    except ValueError as exc:
        raise cx.refuse(str(exc)) from exc
    info = cx.info(slope)
    single = info is not None and info.shape is not None and all(d == 1 for d in info.shape)
    if layout == "NCHW" and not single:
        rank = cx.need_rank(x, "a per-channel slope along axis 1")
        if rank > 2:
            shaped = cx.fresh(f"{slope}_channels")
            cx.node("Reshape", [slope, int64s(cx, [-1] + [1] * (rank - 2), "shape")], [shaped])
            slope = shaped
    cx.node("PRelu", [x, slope], op.outputs[:1])


# -- functions --------------------------------------------------------------------------------


def _swish_body(fx: ExportContext) -> None:
    negated, exp, denominator = fx.fresh("negated"), fx.fresh("exp"), fx.fresh("denominator")
    fx.node("Neg", ["X"], [negated])
    fx.node("Exp", [negated], [exp])
    fx.node("Add", [_like(fx, 1.0, "X", "one"), exp], [denominator])
    fx.node("Div", ["X", denominator], ["Y"])


_SWISH = Function("Swish", ("X",), ("Y",), {}, _swish_body)


@exporter("Swish")
def _swish(cx: ExportContext, op: Op) -> None:
    cx.call(_SWISH, op.inputs[:1], op.outputs[:1])


def _gelu_body(fx: ExportContext) -> None:
    if fx.opset >= 20:
        fx.node("Gelu", ["X"], ["Y"], approximate=AttrRef(_APPROXIMATE))
        return
    one = _like(fx, 1.0, "X", "one")
    scaled, erf, exact = fx.fresh("scaled"), fx.fresh("erf"), fx.fresh("exact")
    fx.node("Mul", ["X", _like(fx, 1 / math.sqrt(2), "X", "inv_sqrt2")], [scaled])
    fx.node("Erf", [scaled], [erf])
    fx.node("Add", [one, erf], [exact])
    names = ("square", "cube", "inner", "sum", "argument", "tanh", "approx")
    square, cube, inner, total, argument, tanh, approx = (fx.fresh(k) for k in names)
    fx.node("Mul", ["X", "X"], [square])
    fx.node("Mul", [square, "X"], [cube])
    fx.node("Mul", [cube, _like(fx, 0.044715, "X", "cubic")], [inner])
    fx.node("Add", ["X", inner], [total])
    fx.node("Mul", [total, _like(fx, math.sqrt(2 / math.pi), "X", "sqrt_2_pi")], [argument])
    fx.node("Tanh", [argument], [tanh])
    fx.node("Add", [one, tanh], [approx])
    fast, factor, halved = fx.fresh("fast"), fx.fresh("factor"), fx.fresh("halved")
    fx.node("Cast", [fx.attr("fast_gelu")], [fast], to=TensorProto.BOOL)
    fx.node("Where", [fast, approx, exact], [factor])
    fx.node("Mul", ["X", _like(fx, 0.5, "X", "half")], [halved])
    fx.node("Mul", [halved, factor], ["Y"])


_APPROXIMATE = "_approximate"
_GELU = Function("Gelu", ("X",), ("Y",), {"fast_gelu": "int", _APPROXIMATE: "string"}, _gelu_body)


@exporter("Gelu")
def _gelu(cx: ExportContext, op: Op) -> None:
    fast = int(op.arg("fast_gelu", 0))
    approximate = "tanh" if fast else "none"
    cx.call(_GELU, op.inputs[:1], op.outputs[:1], fast_gelu=fast, **{_APPROXIMATE: approximate})


def _logit_body(fx: ExportContext) -> None:
    eps, one = fx.fresh("eps"), _like(fx, 1.0, "X", "one")
    fx.node("CastLike", [fx.attr("eps"), "X"], [eps])
    high, clipped, rest, ratio = (fx.fresh(k) for k in ("high", "clipped", "rest", "ratio"))
    fx.node("Sub", [one, eps], [high])
    fx.node("Clip", ["X", eps, high], [clipped])
    fx.node("Sub", [one, clipped], [rest])
    fx.node("Div", [clipped, rest], [ratio])
    fx.node("Log", [ratio], ["Y"])


_LOGIT = Function("Logit", ("X",), ("Y",), {"eps": "float"}, _logit_body)


@exporter("Logit")
def _logit(cx: ExportContext, op: Op) -> None:
    cx.call(_LOGIT, op.inputs[:1], op.outputs[:1], eps=float(op.arg("eps", 1e-6)))


def _log1p_body(fx: ExportContext) -> None:
    one = _like(fx, 1.0, "X", "one")
    u, exact, log, shift, ratio, product = (
        fx.fresh(k) for k in ("u", "exact", "log", "shift", "ratio", "product")
    )
    fx.node("Add", [one, "X"], [u])
    fx.node("Equal", [u, one], [exact])
    fx.node("Log", [u], [log])
    fx.node("Sub", [u, one], [shift])
    fx.node("Div", ["X", shift], [ratio])
    fx.node("Mul", [log, ratio], [product])
    fx.node("Where", [exact, "X", product], ["Y"])


_LOG1P = Function("Log1p", ("X",), ("Y",), {}, _log1p_body)


@exporter("Log1p")
def _log1p(cx: ExportContext, op: Op) -> None:
    cx.call(_LOG1P, op.inputs[:1], op.outputs[:1])


def _replace_nan_body(fx: ExportContext) -> None:
    nan, value = fx.fresh("nan"), fx.fresh("value")
    fx.node("IsNaN", ["X"], [nan])
    fx.node("CastLike", [fx.attr("value"), "X"], [value])
    fx.node("Where", [nan, value, "X"], ["Y"])


_REPLACE_NAN = Function("ReplaceNaN", ("X",), ("Y",), {"value": "float"}, _replace_nan_body)


@exporter("ReplaceNaN")
def _replace_nan(cx: ExportContext, op: Op) -> None:
    cx.call(_REPLACE_NAN, op.inputs[:1], op.outputs[:1], value=float(op.arg("value", 0.0)))


def _bucketize_body(fx: ExportContext) -> None:
    boundaries, column, below, counts = (
        fx.fresh(k) for k in ("boundaries", "column", "below", "counts")
    )
    fx.node("CastLike", [fx.attr("boundaries"), "X"], [boundaries])
    fx.node("Unsqueeze", ["X", int64s(fx, [-1], "axes")], [column])
    fx.node("Less", [boundaries, column], [below])
    fx.node("Cast", [below], [counts], to=TensorProto.INT32)
    reduce(fx, "ReduceSum", counts, [-1], keepdims=False, out="Y")


_BUCKETIZE = Function("Bucketize", ("X",), ("Y",), {"boundaries": "floats"}, _bucketize_body)


@exporter("Bucketize")
def _bucketize(cx: ExportContext, op: Op) -> None:
    boundaries = [float(v) for v in op.arg("boundaries", ())]
    if any(b >= c for b, c in itertools.pairwise(boundaries)):
        raise cx.refuse(f"boundaries must increase strictly, got {boundaries}")
    cx.call(_BUCKETIZE, op.inputs[:1], op.outputs[:1], boundaries=boundaries)


def _is_empty_body(fx: ExportContext) -> None:
    size = fx.fresh("size")
    fx.node("Size", ["X"], [size])
    fx.node("Equal", [size, fx.const(np.int64(0), "zero")], ["Y"])


_IS_EMPTY = Function("IsEmpty", ("X",), ("Y",), {}, _is_empty_body)


@exporter("IsEmpty")
def _is_empty(cx: ExportContext, op: Op) -> None:
    cx.call(_IS_EMPTY, op.inputs[:1], op.outputs[:1])


def _box_cox_body(fx: ExportContext) -> None:
    names = ("rows", "l1", "l2", "sum", "shifted", "zero", "safe", "power", "minus", "ratio")
    rows, l1, l2, total, shifted, zero, safe, power, minus, ratio = (fx.fresh(k) for k in names)
    flat = int64s(fx, [-1], "flat")
    fx.node("Flatten", ["data"], [rows], axis=1)
    fx.node("Reshape", ["lambda1", flat], [l1])
    fx.node("Reshape", ["lambda2", flat], [l2])
    fx.node("Add", [rows, l2], [total])
    fx.node("Max", [total, _like(fx, 1e-6, "data", "floor")], [shifted])
    fx.node("Equal", [l1, _like(fx, 0.0, "data", "zero_value")], [zero])
    fx.node("Where", [zero, _like(fx, 1.0, "data", "one"), l1], [safe])
    fx.node("Pow", [shifted, safe], [power])
    fx.node("Sub", [power, _like(fx, 1.0, "data", "one_again")], [minus])
    fx.node("Div", [minus, safe], [ratio])
    log, chosen, shape = fx.fresh("log"), fx.fresh("chosen"), fx.fresh("shape")
    fx.node("Log", [shifted], [log])
    fx.node("Where", [zero, log, ratio], [chosen])
    fx.node("Shape", ["data"], [shape])
    fx.node("Reshape", [chosen, shape], ["Y"])


_BOX_COX = Function("BatchBoxCox", ("data", "lambda1", "lambda2"), ("Y",), {}, _box_cox_body)


@exporter("BatchBoxCox")
def _batch_box_cox(cx: ExportContext, op: Op) -> None:
    cx.call(_BOX_COX, op.inputs[:3], op.outputs[:1])

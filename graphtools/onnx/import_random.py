"""Importers for ONNX's random generators: Caffe2's ``GaussianFill`` and ``UniformFill``.

``RandomNormal``/``RandomUniform`` take their ``shape`` argument, the ``*Like`` forms their
input's shape. Only float32 draws map (Caffe2's fills are float); a ``seed`` is refused: the
executor draws from its own generator, seeded per op, so a seeded ONNX sequence cannot be kept.
"""

from __future__ import annotations

from onnx import TensorProto

from graphtools.onnx.context import NodeContext
from graphtools.onnx.registry import converter

__all__: list[str] = []

_NORMAL = ("dtype", "mean", "scale", "seed", "shape")
_UNIFORM = ("dtype", "high", "low", "seed", "shape")


def _checked(ctx: NodeContext) -> None:
    if ctx.attr("seed") is not None:
        raise ctx.refuse("a seeded sequence cannot be kept by Caffe2's generator", "seed")
    dtype = ctx.attr("dtype")
    if dtype is not None and int(dtype) != TensorProto.FLOAT:
        raise ctx.refuse("Caffe2's random fills draw float32 only", "dtype")


def _args(ctx: NodeContext) -> dict[str, float]:
    if ctx.node.op_type.startswith("RandomNormal"):
        return {"mean": float(ctx.attr("mean", 0.0)), "std": float(ctx.attr("scale", 1.0))}
    return {"min": float(ctx.attr("low", 0.0)), "max": float(ctx.attr("high", 1.0))}


def _fill_type(ctx: NodeContext) -> str:
    return "GaussianFill" if ctx.node.op_type.startswith("RandomNormal") else "UniformFill"


@converter("RandomNormal", since=(1, 22), attributes=_NORMAL)
@converter("RandomUniform", since=(1, 22), attributes=_UNIFORM)
def _random(ctx: NodeContext) -> None:
    _checked(ctx)
    shape = [int(v) for v in ctx.attr("shape", ())]
    ctx.emit(_fill_type(ctx), [], ctx.outputs, shape=shape, **_args(ctx))


@converter("RandomNormalLike", since=(1, 22), attributes=_NORMAL[:-1])
@converter("RandomUniformLike", since=(1, 22), attributes=_UNIFORM[:-1])
def _random_like(ctx: NodeContext) -> None:
    _checked(ctx)
    ctx.emit(_fill_type(ctx), ctx.inputs[:1], ctx.outputs, **_args(ctx))

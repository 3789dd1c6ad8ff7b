"""The weights of a layer that absorbs a per-channel scale and shift after it, computed by
onnxruntime from ONNX arithmetic (never by a kernel of ours).

A ``Conv``, ``ConvTranspose`` or ``Gemm`` with weight ``W`` (its output channels along
``axis``) and bias ``b`` followed by ``y -> (y - mean) * num / sqrt(var + eps) + shift`` per
channel is the same layer with::

    s  = num / sqrt(var + eps)
    W' = W * alpha * s          (s along ``axis`` of W)
    b' = (b * beta - mean) * s + shift

which covers a ``BatchNormalization`` (``num`` its scale, ``shift`` its bias), a ``Mul`` by
``v`` (``num = v``, ``var = 1``, ``eps = 0``) and an ``Add`` of ``v`` (``num = 1``,
``shift = v``), and a ``Gemm``'s ``alpha``/``beta``. Fusions of one shape are stacked and
computed by one set of ops, so a model with a hundred thousand of them costs a few sessions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphtools.dialects.onnx import onnx_table
from graphtools.ir import Op

__all__ = ["ScaleShift", "overflows", "scale_and_shift"]

_OPSET = {"": 17}
"""The opset the arithmetic runs in: it means the same in every one."""


@dataclass(frozen=True)
class ScaleShift:
    """One fusion: the layer's weight and bias, and the per-channel terms (1-D, one entry per
    output channel; ``alpha``, ``beta``, ``eps`` scalars)."""

    weight: np.ndarray
    axis: int
    bias: np.ndarray
    num: np.ndarray
    var: np.ndarray
    eps: float
    mean: np.ndarray
    shift: np.ndarray
    alpha: float = 1.0
    beta: float = 1.0


def scale_and_shift(items: Sequence[ScaleShift]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(W', b')`` of each item, in order (see the module docstring)."""
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for number, item in enumerate(items):
        key = (item.weight.dtype, item.weight.shape, item.axis, item.bias.shape, item.num.shape)
        groups[key].append(number)
    ops: list[Op] = []
    feeds: dict[str, np.ndarray] = {}
    wanted: list[str] = []
    for group, members in enumerate(groups.values()):
        _group_ops(group, [items[m] for m in members], ops, feeds, wanted)
    values = onnx_table(_OPSET).evaluate_ops(ops, feeds, wanted)
    results: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * len(items)
    for group, members in enumerate(groups.values()):
        weights, biases = values[f"g{group}_w_out"], values[f"g{group}_b_out"]
        for position, member in enumerate(members):
            results[member] = (weights[position], biases[position])
    return results


def overflows(item: ScaleShift, result: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether ``result`` (``scale_and_shift``'s for ``item``) holds an infinity or NaN that
    ``item``'s finite terms did not: a weight scaled past its type's range (a float16 weight
    of 100 times a scale of 1000), which the layer unfused would not have reached when its
    input was small. Such a fusion must not be made."""
    terms = (item.weight, item.bias, item.num, item.var, item.mean, item.shift)
    if not all(np.all(np.isfinite(np.asarray(term, np.float64))) for term in terms):
        return False  # an infinity in, an infinity out: the fusion keeps what the layer did
    return not all(np.all(np.isfinite(part)) for part in result)


def _group_ops(
    group: int,
    items: list[ScaleShift],
    ops: list[Op],
    feeds: dict[str, np.ndarray],
    wanted: list[str],
) -> None:
    """The ops computing one group's stacked weights and biases."""
    first = items[0]
    dtype = first.weight.dtype
    count = len(items)
    channels = first.num.shape[0]
    weight_rank, bias_rank = first.weight.ndim, first.bias.ndim
    along_weight = [count] + [1] * weight_rank
    along_weight[first.axis + 1] = channels
    along_bias = [count] + [1] * max(bias_rank - 1, 0) + [channels]
    scalar_weight = [count] + [1] * weight_rank
    scalar_bias = [count] + [1] * bias_rank

    def feed(name: str, value: np.ndarray) -> str:
        full = f"g{group}_{name}"
        feeds[full] = value
        return full

    def op(kind: str, inputs: list[str], name: str) -> str:
        full = f"g{group}_{name}"
        ops.append(Op(kind, inputs, [full]))
        return full

    def stack(field: str) -> np.ndarray:
        return np.stack([np.asarray(getattr(item, field), dtype=dtype) for item in items])

    w = feed("w", stack("weight"))
    b = feed("b", stack("bias"))
    num, var, mean, shift = (feed(f, stack(f)) for f in ("num", "var", "mean", "shift"))
    eps = feed("eps", stack("eps").reshape(count, 1))
    alpha = feed("alpha", stack("alpha").reshape(scalar_weight))
    beta = feed("beta", stack("beta").reshape(scalar_bias))
    shapes = {
        name: feed(name, np.asarray(shape, np.int64))
        for name, shape in (("sw", along_weight), ("sb", along_bias))
    }
    sd = op("Sqrt", [op("Add", [var, eps], "ve")], "sd")
    s = op("Div", [num, sd], "s")
    scaled = op("Mul", [w, alpha], "wa")
    op("Mul", [scaled, op("Reshape", [s, shapes["sw"]], "s_w")], "w_out")
    s_b = op("Reshape", [s, shapes["sb"]], "s_b")
    mean_b = op("Reshape", [mean, shapes["sb"]], "mean_b")
    shift_b = op("Reshape", [shift, shapes["sb"]], "shift_b")
    centred = op("Sub", [op("Mul", [b, beta], "bb"), mean_b], "bm")
    op("Add", [op("Mul", [centred, s_b], "bs"), shift_b], "b_out")
    wanted += [f"g{group}_w_out", f"g{group}_b_out"]

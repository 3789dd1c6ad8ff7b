"""Element-wise, normalisation and selection kernels of Caffe2's wider op set: Box-Cox, GELU,
Swish, Logit, Mod, Sign, LayerNorm, RMSNorm, LpNorm, back reductions, TopK, the fp16 FC
(``FbFCPacked``), ``ConvRelu`` and ``IsEmpty``.
"""

from __future__ import annotations

import math
from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.executor.kernels_math import fc
from graphtools.executor.registry import KERNELS, kernel
from graphtools.ir import Op

_erf = np.frompyfunc(math.erf, 1, 1)


def _float(value: Any) -> np.ndarray:
    x = np.asarray(value)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"expected a float tensor, got {x.dtype}")
    return x


@kernel("Negative")
def _negative(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.negative(np.asarray(inputs[0]))]


@kernel("Sign")
def _sign(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.sign(np.asarray(inputs[0]))]


@kernel("Log1p")
def _log1p(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.log1p(_float(inputs[0]))]


@kernel("HalfToFloat")
def _half_to_float(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    if x.dtype != np.float16:
        raise TypeError(f"HalfToFloat needs a float16 input, got {x.dtype}")
    return [x.astype(np.float32)]


@kernel("Swish")
def _swish(op: Op, inputs: list[Any]) -> list[Any]:
    """``x * sigmoid(x)``, computed as Caffe2 does: ``x / (1 + exp(-x))``."""
    x = _float(inputs[0])
    return [(x / (1 + np.exp(-x))).astype(x.dtype)]


@kernel("Gelu")
def _gelu(op: Op, inputs: list[Any]) -> list[Any]:
    """Exact ``x * Phi(x)`` with erf; ``fast_gelu=1`` uses the tanh approximation."""
    x = _float(inputs[0])
    wide = x.astype(np.float64)
    if op.arg("fast_gelu", 0):
        inner = math.sqrt(2 / math.pi) * (wide + 0.044715 * wide**3)
        y = 0.5 * wide * (1 + np.tanh(inner))
    else:
        y = 0.5 * wide * (1 + np.asarray(_erf(wide / math.sqrt(2)), dtype=np.float64))
    return [y.astype(x.dtype)]


@kernel("Logit")
def _logit(op: Op, inputs: list[Any]) -> list[Any]:
    """``log(x / (1 - x))`` of x clamped to ``[eps, 1 - eps]`` (``eps`` default 1e-6)."""
    x = _float(inputs[0])
    eps = np.asarray(op.arg("eps", 1e-6), x.dtype)
    clamped = np.clip(x, eps, 1 - eps)
    return [np.log(clamped / (1 - clamped)).astype(x.dtype)]


@kernel("ReplaceNaN")
def _replace_nan(op: Op, inputs: list[Any]) -> list[Any]:
    x = _float(inputs[0])
    return [np.where(np.isnan(x), np.asarray(op.arg("value", 0.0), x.dtype), x)]


@kernel("Mod")
def _mod(op: Op, inputs: list[Any]) -> list[Any]:
    """Integer remainder by ``divisor``: C's sign (of the dividend) unless
    ``sign_follow_divisor=1``."""
    x = np.asarray(inputs[0])
    if x.dtype not in (np.int32, np.int64):
        raise TypeError(f"Mod needs an int32 or int64 input, got {x.dtype}")
    divisor = op.arg("divisor")
    if divisor is None or int(divisor) == 0:
        raise ValueError("Mod needs a non-zero 'divisor' argument")
    d = x.dtype.type(int(divisor))
    y = np.fmod(x, d)
    if op.arg("sign_follow_divisor", 0):
        y = np.where((y != 0) & ((y < 0) != (d < 0)), y + d, y)
    return [y.astype(x.dtype)]


@kernel("Mean")
def _mean(op: Op, inputs: list[Any]) -> list[Any]:
    """Element-wise mean of inputs of one shape."""
    arrays = [_float(v) for v in inputs]
    for array in arrays[1:]:
        if array.shape != arrays[0].shape:
            raise ValueError(f"Mean needs equal shapes, got {[list(a.shape) for a in arrays]}")
    total = arrays[0].astype(np.float64)
    for array in arrays[1:]:
        total = total + array
    return [(total / len(arrays)).astype(arrays[0].dtype)]


@kernel("BatchBoxCox")
def _batch_box_cox(op: Op, inputs: list[Any]) -> list[Any]:
    """Per column ``j``: ``((x + l2)^l1 - 1) / l1``, or ``log(x + l2)`` where ``l1 == 0``;
    ``x + l2`` is floored at 1e-6."""
    data = _float(inputs[0])
    if data.ndim < 1:
        raise ValueError("BatchBoxCox needs data of rank >= 1")
    if data.size == 0:
        return [data.copy()]
    d = prod(data.shape[1:])
    lambda1 = np.asarray(inputs[1], data.dtype).reshape(-1)
    lambda2 = np.asarray(inputs[2], data.dtype).reshape(-1)
    if lambda1.size != d or lambda2.size != d:
        raise ValueError(f"lambda1/lambda2 need {d} values, got {lambda1.size}, {lambda2.size}")
    x = data.reshape(data.shape[0], d)
    shifted = np.maximum(x + lambda2, data.dtype.type(1e-6))
    zero = lambda1 == 0
    safe = np.where(zero, 1, lambda1)
    powered = (np.power(shifted, safe) - 1) / safe
    y = np.where(zero, np.log(shifted), powered)
    return [y.astype(data.dtype).reshape(data.shape)]


@kernel("ElementwiseLinear")
def _elementwise_linear(op: Op, inputs: list[Any]) -> list[Any]:
    """``X`` seen as (N, D) at ``axis`` (default 1): ``Y = X * w + b`` per column."""
    x = _float(inputs[0])
    w, b = np.asarray(inputs[1]).reshape(-1), np.asarray(inputs[2]).reshape(-1)
    axis = canonical_axis(int(op.arg("axis", 1)), x.ndim)
    n, d = prod(x.shape[:axis]), prod(x.shape[axis:])
    if w.size != d or b.size != d:
        raise ValueError(f"w and b need {d} values, got {w.size}, {b.size}")
    return [(x.reshape(n, d) * w + b).astype(x.dtype).reshape(x.shape)]


@kernel("FbFCPacked")
def _fb_fc_packed(op: Op, inputs: list[Any]) -> list[Any]:
    """FC over fbgemm's fp16-packed weight: the weight is rounded to float16, X stays float32
    and products accumulate in float32."""
    x = _float(inputs[0])
    w = np.asarray(inputs[1]).astype(np.float16).astype(np.float32)
    b = np.asarray(inputs[2], np.float32) if len(inputs) > 2 else None
    axis, axis_w = int(op.arg("axis", 1)), int(op.arg("axis_w", 1))
    return [fc(x.astype(np.float32), w, b, axis, axis_w, False)]


@kernel("ConvRelu")
def _conv_relu(op: Op, inputs: list[Any]) -> list[Any]:
    """The fused Conv + Relu: ``Conv``'s kernel (every argument of it), then ``max(0, y)``."""
    (y,) = KERNELS["Conv"].fn(op, inputs)[:1]
    return [np.maximum(y, 0).astype(y.dtype)]


@kernel("LayerNorm")
def _layer_norm(op: Op, inputs: list[Any]) -> list[Any]:
    """Normalise over the dims from ``axis`` (default 1), ``epsilon`` default 1e-5.

    Outputs Y, mean and std (``sqrt(var + eps)``), the latter two shaped ``X.shape[:axis] +
    [1]``. ``gamma``/``beta`` inputs apply only with ``elementwise_affine=1``, as in Caffe2
    (which ignores them otherwise; Glow's importer does not).
    """
    x = _float(inputs[0])
    if x.ndim < 2:
        raise ValueError(f"LayerNorm needs an input of rank >= 2, got {x.ndim}")
    axis = canonical_axis(int(op.arg("axis", 1)), x.ndim)
    eps = float(np.float32(op.arg("epsilon", 1e-5)))
    rows = x.reshape(prod(x.shape[:axis]), -1).astype(np.float64)
    mean = rows.mean(axis=1, keepdims=True)
    std = np.sqrt(rows.var(axis=1, keepdims=True) + eps)
    y = (rows - mean) / std
    if op.arg("elementwise_affine", 0):
        if len(inputs) != 3:
            raise ValueError("LayerNorm with elementwise_affine=1 needs gamma and beta inputs")
        gamma, beta = (np.asarray(v).reshape(-1) for v in inputs[1:3])
        if gamma.size != rows.shape[1] or beta.size != rows.shape[1]:
            raise ValueError(f"gamma and beta need {rows.shape[1]} values each")
        y = y * gamma + beta
    moments = (*x.shape[:axis], 1)
    return [
        y.astype(x.dtype).reshape(x.shape),
        mean.astype(x.dtype).reshape(moments),
        std.astype(x.dtype).reshape(moments),
    ]


@kernel("RMSNorm")
def _rms_norm(op: Op, inputs: list[Any]) -> list[Any]:
    """``Y = X / sqrt(mean(X^2) + eps) * gamma + beta`` over the dims from ``axis``; second
    output the reciprocal RMS shaped ``X.shape[:axis]``. ``eps`` defaults to 0 (the schema's
    documented 0.001 is not what the constructor reads)."""
    x = _float(inputs[0])
    if x.ndim < 2:
        raise ValueError(f"RMSNorm needs an input of rank >= 2, got {x.ndim}")
    axis = canonical_axis(int(op.arg("axis", 1)), x.ndim)
    eps = float(np.float32(op.arg("eps", 0.0)))
    rows = x.reshape(prod(x.shape[:axis]), -1).astype(np.float64)
    gamma, beta = (np.asarray(v).reshape(-1) for v in inputs[1:3])
    if gamma.size != rows.shape[1] or beta.size != rows.shape[1]:
        raise ValueError(f"gamma and beta need {rows.shape[1]} values each")
    rrms = 1.0 / np.sqrt(np.mean(rows * rows, axis=1) + eps)
    y = rrms[:, None] * rows * gamma + beta
    return [y.astype(x.dtype).reshape(x.shape), rrms.astype(x.dtype).reshape(x.shape[:axis])]


@kernel("LpNorm")
def _lp_norm(op: Op, inputs: list[Any]) -> list[Any]:
    """``sum |x|`` (p=1) or ``sum x^2`` (p=2, no square root), over the size with
    ``average=1``; shape (1,)."""
    x = _float(inputs[0]).astype(np.float64)
    p = int(op.arg("p", 2))
    if p not in (1, 2):
        raise ValueError(f"LpNorm supports p=1 or p=2, got {p}")
    size = x.size if op.arg("average", 0) else 1
    if size == 0:
        raise ValueError("LpNorm with average=1 needs a non-empty input")
    total = np.abs(x).sum() if p == 1 else np.square(x).sum()
    return [np.asarray([total / size], dtype=np.float32)]


@kernel("ReduceBackSum", "ReduceBackMean")
def _reduce_back(op: Op, inputs: list[Any]) -> list[Any]:
    """Reduce the last ``num_reduce_dim`` dims (default 1); an optional ``lengths`` input
    limits row ``i`` to its first ``lengths[i]`` reduced elements."""
    x = _float(inputs[0])
    count = int(op.arg("num_reduce_dim", 1))
    if not 0 <= count <= x.ndim:
        raise ValueError(f"num_reduce_dim {count} does not fit a {x.ndim}-D input")
    kept = x.shape[: x.ndim - count]
    rows = x.reshape(prod(kept), -1).astype(np.float64)
    mean = op.type == "ReduceBackMean"
    if len(inputs) > 1:
        lengths = np.asarray(inputs[1]).reshape(-1).astype(np.int64)
        if lengths.size != rows.shape[0]:
            raise ValueError(f"lengths has {lengths.size} values for {rows.shape[0]} rows")
        if lengths.size and (lengths.min() < 0 or lengths.max() > rows.shape[1]):
            raise ValueError(f"lengths must be in [0, {rows.shape[1]}]")
        mask = np.arange(rows.shape[1]) < lengths[:, None]
        y = (rows * mask).sum(axis=1)
        if mean:
            y = y / lengths
    else:
        y = rows.mean(axis=1) if mean else rows.sum(axis=1)
    return [y.astype(x.dtype).reshape(kept)]


@kernel("TopK")
def _top_k(op: Op, inputs: list[Any]) -> list[Any]:
    """The ``k`` largest values along ``axis`` (default -1), descending, ties by lower index;
    outputs values, int64 indices and (optional) indices into the flattened input."""
    x = np.asarray(inputs[0])
    if x.ndim == 0:
        raise ValueError("TopK needs an input of rank >= 1")
    axis = canonical_axis(int(op.arg("axis", -1)), x.ndim)
    k = int(op.arg("k", -1))
    if len(inputs) > 1:
        k = int(np.asarray(inputs[1]).reshape(-1)[0])
    if not 1 <= k <= x.shape[axis]:
        raise ValueError(f"k={k} must be in [1, {x.shape[axis]}] for axis {axis}")
    moved = np.moveaxis(x, axis, -1)
    keys = moved.astype(np.int64) if np.issubdtype(moved.dtype, np.unsignedinteger) else moved
    rank = np.argsort(-keys, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(moved, rank, axis=-1)
    indices = np.moveaxis(rank, -1, axis).astype(np.int64)
    grids = list(np.meshgrid(*(np.arange(s) for s in indices.shape), indexing="ij"))
    grids[axis] = indices
    flat = np.ravel_multi_index(tuple(grids), x.shape).astype(np.int64).reshape(-1)
    return [np.ascontiguousarray(np.moveaxis(values, -1, axis)), indices, flat]


@kernel("IsEmpty")
def _is_empty(op: Op, inputs: list[Any]) -> list[Any]:
    """A 0-d bool: whether the input has no elements."""
    return [np.asarray(np.size(inputs[0]) == 0)]

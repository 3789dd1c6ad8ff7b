"""Gradient kernels: the ``*Gradient`` ops that ``graphtools.gradients``' built-in makers emit.

Each computes the vector-Jacobian product of its forward op (``kernels_math``, ``kernels_nn``,
``kernels_train``) for the gradient of the forward outputs, in the forward inputs' dtype, with
the forward op's arguments (makers copy them onto the gradient op). Binary element-wise
gradients sum the output gradient back over broadcast dimensions, for numpy broadcasting and for
Caffe2's legacy ``broadcast=1`` rule alike.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import (
    canonical_axis,
    from_nchw,
    geometry,
    order,
    to_nchw,
    windows,
    windows_adjoint,
)
from graphtools.executor.kernels_math import binary_operands
from graphtools.executor.kernels_nn import pool_counts, pool_geometry
from graphtools.executor.kernels_train import (
    lstm_unit_gates,
    softmax_with_loss_parts,
    squared_l2_rows,
)
from graphtools.executor.registry import kernel
from graphtools.ir import Op


def reduce_to_shape(gradient: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``gradient`` summed over the dimensions that broadcasting added or stretched to get
    from ``shape`` to ``gradient.shape``."""
    extra = gradient.ndim - len(shape)
    if extra < 0:
        raise ValueError(f"gradient {list(gradient.shape)} has fewer dims than {list(shape)}")
    reduced = gradient.sum(axis=tuple(range(extra))) if extra else gradient
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and reduced.shape[i] != 1)
    if axes:
        reduced = reduced.sum(axis=axes, keepdims=True)
    return reduced.reshape(shape)


def _binary_gradient(op: Op, inputs: list[Any]) -> tuple[np.ndarray, ...]:
    g, a, b = (np.asarray(v) for v in inputs[:3])
    a2, b2 = binary_operands(op, a, b)
    return g, a2, b2


def _back(op: Op, inputs: list[Any], da: np.ndarray, db: np.ndarray) -> list[Any]:
    a, b = np.asarray(inputs[1]), np.asarray(inputs[2])
    _, b2 = binary_operands(op, a, b)
    da = reduce_to_shape(np.asarray(da), a.shape).astype(a.dtype, copy=False)
    db = reduce_to_shape(np.asarray(db), b2.shape).reshape(b.shape).astype(b.dtype, copy=False)
    return [da, db]


@kernel("AddGradient")
def _add_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    g, a, b = _binary_gradient(op, inputs)
    return _back(op, inputs, np.broadcast_to(g, np.broadcast_shapes(a.shape, b.shape)), g)


@kernel("SubGradient")
def _sub_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    g, a, b = _binary_gradient(op, inputs)
    return _back(op, inputs, np.broadcast_to(g, np.broadcast_shapes(a.shape, b.shape)), -g)


@kernel("MulGradient")
def _mul_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    g, a, b = _binary_gradient(op, inputs)
    return _back(op, inputs, g * b, g * a)


@kernel("DivGradient")
def _div_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(dC, A, B, C)`` of ``C = A / B``: ``dA = dC / B``, ``dB = -dC * C / B``."""
    g, _, b = _binary_gradient(op, inputs)
    c = np.asarray(inputs[3])
    return _back(op, inputs, g / b, -g * c / b)


def _as_2d(x: np.ndarray, axis: int) -> np.ndarray:
    axis = canonical_axis(axis, x.ndim)
    return x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))


@kernel("FCGradient")
def _fc_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(X, W, dY)``, outputs ``(dW, db, dX)`` of ``Y = X W^T + b``."""
    x, w, dy = (np.asarray(v) for v in inputs[:3])
    x2 = _as_2d(x, int(op.arg("axis", 1)))
    w2 = _as_2d(w, int(op.arg("axis_w", 1)))
    dy2 = dy.reshape(x2.shape[0], w2.shape[0])
    dw = (dy2.T @ x2).reshape(w.shape)
    db = dy2.sum(axis=0)
    dx = (dy2 @ w2).reshape(x.shape)
    return [dw.astype(w.dtype, copy=False), db.astype(dy.dtype, copy=False), dx]


@kernel("ConvGradient")
def _conv_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(X, W, dY)``; outputs ``(dW, db, dX)``, ``db`` left out with ``no_bias`` and
    ``dX`` when not asked for (Caffe2's ``ConvGradient`` output order): the convolution's
    im2col matmul run backwards, ``dX`` put back through the windows."""
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    w = np.asarray(inputs[1])
    w = np.moveaxis(w, -1, 1) if layout == "NHWC" else w
    dy = to_nchw(np.asarray(inputs[2]), layout)
    geo = geometry(op, x.shape[2:], w.shape[2:])
    group = int(op.arg("group", 1))
    n, c, m, nd = x.shape[0], x.shape[1], w.shape[0], len(geo.kernel)
    cg, mg, k = c // group, m // group, prod(geo.kernel)
    positions = n * prod(geo.out_sizes)
    perm = (1, 0, *range(3, 3 + nd), 2, *range(3 + nd, 3 + 2 * nd))  # conv_nchw's
    win = windows(x, geo).reshape(n, group, cg, *geo.out_sizes, *geo.kernel)
    cols = win.transpose(perm).reshape(group, positions, cg * k)
    dyg = dy.reshape(n, group, mg, *geo.out_sizes).transpose(1, 0, *range(3, 3 + nd), 2)
    dyg = dyg.reshape(group, positions, mg)
    dw = np.matmul(cols.transpose(0, 2, 1), dyg).transpose(0, 2, 1).reshape(w.shape)
    results = [(np.moveaxis(dw, 1, -1) if layout == "NHWC" else dw).astype(w.dtype, copy=False)]
    if not op.arg("no_bias", 0):
        results.append(dy.sum(axis=(0, *range(2, dy.ndim))).astype(dy.dtype, copy=False))
    if len(op.outputs) > len(results):
        dcols = np.matmul(dyg, w.reshape(group, mg, cg * k))
        dcols = dcols.reshape(group, n, *geo.out_sizes, cg, *geo.kernel)
        dcols = dcols.transpose(np.argsort(perm)).reshape(n, c, *geo.out_sizes, *geo.kernel)
        dx = windows_adjoint(dcols, x.shape, geo).astype(x.dtype, copy=False)
        results.append(from_nchw(dx, layout))
    return results


@kernel("MaxPoolGradient", "AveragePoolGradient")
def _pool_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(X, Y, dY)``; output ``dX``. Max: every input element equal to its window's
    maximum gets the window's gradient (ties all do, as Caffe2's CPU kernel gives it); average:
    each element of a window its share (the forward pass's count)."""
    layout = order(op)
    x = to_nchw(np.asarray(inputs[0]), layout)
    y = to_nchw(np.asarray(inputs[1]), layout)
    dy = to_nchw(np.asarray(inputs[2]), layout)
    geo = pool_geometry(op, x)
    spread = (...,) + (None,) * len(geo.kernel)
    if op.type == "MaxPoolGradient":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        cols = np.where(windows(x, geo, fill) == y[spread], dy[spread], 0)
    else:
        share = dy / pool_counts(op, x, geo)
        cols = np.broadcast_to(share[spread], (*share.shape, *geo.kernel))
    dx = windows_adjoint(np.asarray(cols, dtype=dy.dtype), x.shape, geo)
    return [from_nchw(dx.astype(x.dtype, copy=False), layout)]


@kernel("ReluGradient")
def _relu_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    y, dy = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [np.where(y > 0, dy, np.zeros((), dy.dtype))]


@kernel("SigmoidGradient")
def _sigmoid_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    y, dy = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [dy * y * (1 - y)]


@kernel("TanhGradient")
def _tanh_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    y, dy = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [dy * (1 - y * y)]


@kernel("SoftmaxGradient")
def _softmax_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    y, dy = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = int(op.arg("axis", 1))
    y2, dy2 = _as_2d(y, axis), _as_2d(dy, axis)
    dx = y2 * (dy2 - (dy2 * y2).sum(axis=1, keepdims=True))
    return [dx.reshape(y.shape)]


@kernel("AveragedLossGradient")
def _averaged_loss_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    x, dloss = np.asarray(inputs[0]), np.asarray(inputs[1])
    scale = dloss.reshape(-1)[0] / max(x.size, 1)
    return [np.full(x.shape, scale, dtype=np.result_type(x, dloss))]


@kernel("SquaredL2DistanceGradient")
def _squared_l2_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    x, y, dout = (np.asarray(v) for v in inputs[:3])
    rows = squared_l2_rows(x)
    diff = (x - y).reshape(rows, prod(x.shape[1:])) * dout.reshape(rows, 1)
    return [diff.reshape(x.shape), (-diff).reshape(y.shape)]


@kernel("DotProductGradient")
def _dot_product_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    x, y, dout = (np.asarray(v) for v in inputs[:3])
    rows = squared_l2_rows(x)
    scale = dout.reshape(rows, 1)
    return [
        (y.reshape(rows, prod(y.shape[1:])) * scale).reshape(x.shape),
        (x.reshape(rows, prod(x.shape[1:])) * scale).reshape(y.shape),
    ]


@kernel("SoftmaxWithLossGradient")
def _softmax_with_loss_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(X, labels[, weights], P, dLoss)``; ``dX = (P - T) * w * scale * dLoss / W``."""
    x, labels = np.asarray(inputs[0]), np.asarray(inputs[1])
    weights = np.asarray(inputs[2]) if len(inputs) == 5 else None
    p, dloss = np.asarray(inputs[-2]), np.asarray(inputs[-1])
    parts = softmax_with_loss_parts(op, x, labels, weights)
    p2 = p.reshape(parts.targets.shape)
    coefficient = parts.weights * (parts.scale * dloss.reshape(-1)[0] / parts.total_weight)
    dx = (p2 - parts.targets) * coefficient.reshape(-1, 1)
    return [dx.reshape(x.shape).astype(x.dtype, copy=False)]


@kernel("LSTMUnitGradient")
def _lstm_unit_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(H_prev, C_prev, G, [seq_lengths,] t, H, C, dH, dC)``, outputs
    ``(dH_prev, dC_prev, dG)``."""
    with_lengths = len(inputs) == 9
    h_prev, c_prev, gates = (np.asarray(v) for v in inputs[:3])
    lengths = np.asarray(inputs[3]) if with_lengths else None
    timestep = np.asarray(inputs[4 if with_lengths else 3])
    dh, dc = np.asarray(inputs[-2]), np.asarray(inputs[-1])
    parts = lstm_unit_gates(op, h_prev, c_prev, gates, lengths, timestep)
    n, d = parts.c_prev.shape
    dh2, dc2 = dh.reshape(n, d), dc.reshape(n, d)
    tanh_c = np.tanh(parts.c)
    dc_total = dc2 + dh2 * parts.o * (1 - tanh_c * tanh_c)
    d_i = dc_total * parts.g * parts.i * (1 - parts.i)
    d_f = dc_total * parts.c_prev * parts.f * (1 - parts.f)
    d_o = dh2 * tanh_c * parts.o * (1 - parts.o)
    d_g = dc_total * parts.i * (1 - parts.g * parts.g)
    d_gates = np.concatenate([d_i, d_f, d_o, d_g], axis=1)
    d_c_prev = dc_total * parts.f
    d_h_prev = np.zeros_like(dh2)
    valid = parts.valid.reshape(n, 1)
    keep = 0.0 if parts.drop_states else 1.0
    d_gates = np.where(valid, d_gates, 0.0)
    d_c_prev = np.where(valid, d_c_prev, keep * dc2)
    d_h_prev = np.where(valid, d_h_prev, keep * dh2)
    return [
        d_h_prev.reshape(h_prev.shape).astype(h_prev.dtype, copy=False),
        d_c_prev.reshape(c_prev.shape).astype(c_prev.dtype, copy=False),
        d_gates.reshape(gates.shape).astype(gates.dtype, copy=False),
    ]

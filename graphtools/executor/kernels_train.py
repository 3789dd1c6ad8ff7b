"""Training kernels: losses, DotProduct, LSTMUnit, and the ops of a small SGD loop.

Losses follow Caffe2's definitions: ``AveragedLoss`` is the mean of every element (a scalar),
``SquaredL2Distance`` is ``0.5 * sum((X - Y)^2)`` per row of the first dimension,
``SoftmaxWithLoss`` is the (weighted) mean cross entropy times ``scale``. ``LSTMUnit`` takes
the gates in Caffe2's order ``i, f, o, g``. ``WeightedSum`` and ``LearningRate`` (policies
``fixed``, ``step``, ``exp``, ``inv``) are what a gradient-descent step needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor, prod
from typing import Any

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.errors import UnsupportedOpError
from graphtools.executor.kernels_nn import softmax
from graphtools.executor.registry import kernel
from graphtools.ir import Op


@kernel("AveragedLoss")
def _averaged_loss(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    return [np.asarray(x.mean() if x.size else 0, dtype=x.dtype)]


def squared_l2_rows(x: np.ndarray) -> int:
    """Rows of a per-row op (``SquaredL2Distance``, ``DotProduct``): the first dimension."""
    return x.shape[0] if x.ndim else 1


@kernel("SquaredL2Distance")
def _squared_l2(op: Op, inputs: list[Any]) -> list[Any]:
    x, y = np.asarray(inputs[0]), np.asarray(inputs[1])
    if x.shape != y.shape:
        raise ValueError(f"SquaredL2Distance needs equal shapes, got {x.shape} and {y.shape}")
    rows = squared_l2_rows(x)
    diff = (x - y).reshape(rows, prod(x.shape[1:]))
    return [(0.5 * (diff * diff).sum(axis=1)).astype(x.dtype, copy=False)]


@kernel("DotProduct")
def _dot_product(op: Op, inputs: list[Any]) -> list[Any]:
    x, y = np.asarray(inputs[0]), np.asarray(inputs[1])
    if x.shape != y.shape:
        raise ValueError(f"DotProduct needs equal shapes, got {x.shape} and {y.shape}")
    rows = squared_l2_rows(x)
    cols = prod(x.shape[1:])
    return [(x.reshape(rows, cols) * y.reshape(rows, cols)).sum(axis=1)]


@dataclass(frozen=True)
class SoftmaxLossParts:
    """The pieces SoftmaxWithLoss and its gradient share (2-D, one row per example)."""

    logits: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    total_weight: float
    scale: float


def softmax_with_loss_parts(
    op: Op, x: np.ndarray, labels: np.ndarray, weights: np.ndarray | None
) -> SoftmaxLossParts:
    """Logits as rows, one-hot (or given probability) targets, per-row weights."""
    if op.arg("spatial", 0):
        raise UnsupportedOpError("SoftmaxWithLoss with spatial=1 is not supported")
    axis = canonical_axis(int(op.arg("axis", 1)), x.ndim)
    rows = prod(x.shape[:axis])
    logits = x.reshape(rows, prod(x.shape[axis:]))
    if op.arg("label_prob", 0):
        targets = labels.reshape(logits.shape).astype(x.dtype)
    else:
        flat = labels.reshape(-1).astype(np.int64)
        if flat.size != rows:
            raise ValueError(f"{flat.size} labels for {rows} rows of logits")
        if flat.size and (flat.min() < 0 or flat.max() >= logits.shape[1]):
            raise ValueError(f"a label is outside [0, {logits.shape[1]})")
        targets = np.zeros_like(logits)
        targets[np.arange(rows), flat] = 1
    w = np.ones(rows, dtype=x.dtype) if weights is None else weights.reshape(-1).astype(x.dtype)
    total = float(w.sum())
    return SoftmaxLossParts(
        logits, targets, w, total if total else 1.0, float(op.arg("scale", 1.0))
    )


@kernel("SoftmaxWithLoss")
def _softmax_with_loss(op: Op, inputs: list[Any]) -> list[Any]:
    x, labels = np.asarray(inputs[0]), np.asarray(inputs[1])
    weights = np.asarray(inputs[2]) if len(inputs) > 2 else None
    parts = softmax_with_loss_parts(op, x, labels, weights)
    p = softmax(parts.logits, 1)
    log_p = np.log(np.maximum(p, np.finfo(p.dtype).tiny))
    per_row = -(parts.targets * log_p).sum(axis=1)
    loss = (parts.weights * per_row).sum() * parts.scale / parts.total_weight
    return [p.reshape(x.shape), np.asarray(loss, dtype=x.dtype)]


@dataclass(frozen=True)
class LSTMGates:
    """An LSTMUnit step as 2-D ``(N, D)`` arrays: activated gates, states, valid rows."""

    i: np.ndarray
    f: np.ndarray
    o: np.ndarray
    g: np.ndarray
    c_prev: np.ndarray
    h_prev: np.ndarray
    c: np.ndarray
    valid: np.ndarray
    drop_states: bool


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def lstm_unit_gates(
    op: Op,
    h_prev: np.ndarray,
    c_prev: np.ndarray,
    gates: np.ndarray,
    lengths: np.ndarray | None,
    timestep: np.ndarray,
) -> LSTMGates:
    """Gates ``i, f, o, g`` of ``gates`` (``(1, N, 4D)``), the new cell and the valid rows."""
    n = c_prev.size // c_prev.shape[-1] if c_prev.ndim else 1
    d = c_prev.shape[-1]
    x = gates.reshape(n, 4 * d)
    if x.shape[1] != 4 * d:
        raise ValueError(f"gates {list(gates.shape)} do not hold 4 x {d} values per row")
    forget_bias = float(op.arg("forget_bias", 0.0))
    i = _sigmoid(x[:, :d])
    f = _sigmoid(x[:, d : 2 * d] + forget_bias)
    o = _sigmoid(x[:, 2 * d : 3 * d])
    g = np.tanh(x[:, 3 * d :])
    c_prev2 = c_prev.reshape(n, d)
    t = int(np.asarray(timestep).reshape(-1)[0])
    valid = np.ones(n, dtype=bool) if lengths is None else t < lengths.reshape(-1)
    return LSTMGates(
        i,
        f,
        o,
        g,
        c_prev2,
        h_prev.reshape(n, d),
        c_prev2 * f + i * g,
        valid,
        bool(op.arg("drop_states", 0)),
    )


@kernel("LSTMUnit")
def _lstm_unit(op: Op, inputs: list[Any]) -> list[Any]:
    """Inputs ``(H_prev, C_prev, G, [seq_lengths,] timestep)``, outputs ``(H, C)``."""
    h_prev, c_prev, gates = (np.asarray(v) for v in inputs[:3])
    with_lengths = len(inputs) == 5
    lengths = np.asarray(inputs[3]) if with_lengths else None
    parts = lstm_unit_gates(op, h_prev, c_prev, gates, lengths, np.asarray(inputs[-1]))
    h = parts.o * np.tanh(parts.c)
    valid = parts.valid.reshape(-1, 1)
    keep = 0.0 if parts.drop_states else 1.0
    c = np.where(valid, parts.c, keep * parts.c_prev)
    h = np.where(valid, h, keep * parts.h_prev)
    return [
        h.reshape(h_prev.shape).astype(h_prev.dtype),
        c.reshape(c_prev.shape).astype(c_prev.dtype),
    ]


@kernel("ZeroGradient")
def _zero_gradient(op: Op, inputs: list[Any]) -> list[Any]:
    """No-op forward: it only marks its input as needing a (zero) gradient."""
    return []


@kernel("WeightedSum")
def _weighted_sum(op: Op, inputs: list[Any]) -> list[Any]:
    """``sum(X_k * w_k)`` over input pairs ``(X_0, w_0, X_1, w_1, ...)``; each ``w_k`` has
    one element."""
    if len(inputs) % 2 or not inputs:
        raise ValueError(f"WeightedSum needs pairs of inputs, got {len(inputs)}")
    x0 = np.asarray(inputs[0])
    total = np.zeros(x0.shape, dtype=x0.dtype)
    for x, w in zip(inputs[::2], inputs[1::2], strict=True):
        x, w = np.asarray(x), np.asarray(w)
        if x.shape != x0.shape or w.size != 1:
            raise ValueError(f"WeightedSum pair {list(x.shape)} x {list(w.shape)} does not fit")
        total = total + x * w.reshape(())
    return [total.astype(x0.dtype, copy=False)]


@kernel("LearningRate")
def _learning_rate(op: Op, inputs: list[Any]) -> list[Any]:
    """``base_lr`` times the policy's multiplier at iteration ``inputs[0]``."""
    iteration = int(np.asarray(inputs[0]).reshape(-1)[0])
    policy = op.arg("policy", b"fixed")
    policy = policy.decode() if isinstance(policy, bytes) else str(policy)
    gamma = float(op.arg("gamma", 0.0))
    if policy == "fixed":
        multiplier = 1.0
    elif policy == "step":
        multiplier = gamma ** floor(iteration / int(op.arg("stepsize", 1)))
    elif policy == "exp":
        multiplier = gamma**iteration
    elif policy == "inv":
        multiplier = (1 + gamma * iteration) ** -float(op.arg("power", 1.0))
    else:
        raise UnsupportedOpError(f"LearningRate policy {policy!r} is not supported")
    return [np.asarray([float(op.arg("base_lr", 0.0)) * multiplier], dtype=np.float32)]

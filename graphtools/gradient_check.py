"""Check a net's backward pass against central finite differences (Caffe2's gradient checker).

The loss is ``1/2 * sum(y ** 2)`` over the checked outputs ``ys``, so the gradient fed to each
``y`` is ``y`` itself. The analytic gradient comes from ``graphtools.gradients``' backward pass
run on the executor after the forward net, in the same workspace; the numeric one from
``(loss(x + h) - loss(x - h)) / 2h`` for each checked element. Use float64 inputs: float32
differences are too noisy for tight tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.errors import InvalidArgumentError
from graphtools.executor import Workspace, run_net
from graphtools.gradients import GradientRegistry
from graphtools.gradients._proto import net_from_netdef, op_from_proto
from graphtools.ir import Net
from graphtools.proto.caffe2_pb2 import NetDef

__all__ = ["GradientCheck", "check_gradients"]


@dataclass(frozen=True)
class GradientCheck:
    """One checked element: the blob, the element's index, both gradients, and the verdict."""

    name: str
    index: tuple[int, ...]
    analytic: float
    numeric: float
    ok: bool


def _loss(net: Net, feeds: Mapping[str, Any], ys: Sequence[str]) -> float:
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed(name, value)
    run_net(net, ws)
    return float(sum(0.5 * np.sum(np.asarray(ws.fetch(y), dtype=np.float64) ** 2) for y in ys))


def _indices(shape: tuple[int, ...], all_elements: bool) -> list[tuple[int, ...]]:
    size = int(np.prod(shape))
    if size == 0:
        return []
    flat = range(size) if all_elements else sorted({0, size - 1})
    return [tuple(int(i) for i in np.unravel_index(k, shape)) for k in flat]


def check_gradients(
    net: Net | NetDef,
    inputs: Mapping[str, Any],
    ys: Sequence[str],
    *,
    wrt: Sequence[str] | None = None,
    step: float = 1e-6,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    all_elements: bool = False,
) -> list[GradientCheck]:
    """Compare the backward pass of ``net`` with central differences; fail on a mismatch.

    Args:
        net: the forward net (not modified).
        inputs: a value for every blob the net reads before writing it.
        ys: the outputs whose ``1/2 sum(y^2)`` is the loss.
        wrt: the inputs to check (default: every floating-point input).
        step: the finite-difference step.
        rtol / atol: an element passes when ``|analytic - numeric| <= atol + rtol * |numeric|``.
        all_elements: check every element instead of the first and the last of each input.

    Returns:
        One ``GradientCheck`` per checked element. An input the backward pass gives no
        gradient counts as a zero gradient.

    Raises:
        AssertionError: some element's gradients differ (the message lists them).
        InvalidArgumentError: ``ys`` is empty or ``wrt`` names a blob missing from ``inputs``.
    """
    if not ys:
        raise InvalidArgumentError("check_gradients needs at least one output in ys")
    forward = net_from_netdef(net) if isinstance(net, NetDef) else net.copy()
    if wrt is None:
        wrt = [n for n, v in inputs.items() if np.issubdtype(np.asarray(v).dtype, np.floating)]
    missing = [name for name in wrt if name not in inputs]
    if missing:
        raise InvalidArgumentError(f"wrt names blobs {missing} that inputs does not give")
    seeds = {y: f"{y}_grad" for y in ys}
    grad_ops, grad_map = GradientRegistry.GetBackwardPass(list(forward.ops), seeds)
    backward = Net([op_from_proto(op) for op in grad_ops], name="gradient_check_backward")
    ws = Workspace()
    for name, value in inputs.items():
        ws.feed(name, value)
    run_net(forward, ws)
    for y, seed in seeds.items():
        ws.feed(seed, np.asarray(ws.fetch(y)))
    run_net(backward, ws)
    results: list[GradientCheck] = []
    for name in wrt:
        value = np.asarray(inputs[name])
        gradient_name = grad_map.get(name)
        analytic = (
            np.zeros(value.shape) if gradient_name is None else np.asarray(ws.fetch(gradient_name))
        )
        if analytic.shape != value.shape:
            raise AssertionError(
                f"gradient {gradient_name!r} of {name!r} has shape {list(analytic.shape)}, "
                f"the blob {list(value.shape)}"
            )
        for index in _indices(value.shape, all_elements):
            plus, minus = value.copy(), value.copy()
            plus[index] += step
            minus[index] -= step
            numeric = (
                _loss(forward, {**inputs, name: plus}, ys)
                - _loss(forward, {**inputs, name: minus}, ys)
            ) / (2 * step)
            got = float(analytic[index])
            ok = abs(got - numeric) <= atol + rtol * abs(numeric)
            results.append(GradientCheck(name, index, got, numeric, ok))
    bad = [r for r in results if not r.ok]
    if bad:
        lines = [
            f"  {r.name}{list(r.index)}: analytic {r.analytic:.8g}, numeric {r.numeric:.8g}"
            for r in bad
        ]
        raise AssertionError(
            f"{len(bad)} of {len(results)} gradient elements differ from central differences "
            f"(rtol={rtol}, atol={atol}):\n" + "\n".join(lines)
        )
    return results

"""Numbers for recurrent nets: a sum-mul cell, a tanh RNN, an LSTM (LSTMUnit) and a two-layer
LSTM stack, built with ``recurrent_net``.

Forward outputs of the RecurrentNetwork op = the net ``lower-recurrent-networks`` unrolls = a
plain numpy loop; input, initial-state and parameter gradients of RecurrentNetworkGradient =
the gradients of the unrolled net's own backward pass = the unrolled gradient op = central
finite differences (float64, rtol 1e-4) = torch's autograd on the same cell (when torch is
installed). Also with ``recompute_blobs_on_backward`` (fewer blobs kept per step, the same
gradients) and ``forward_only`` (the same outputs, no backward step net).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from recurrent_cells import CELLS, Cell, lstm, tanh_rnn

from graphtools.executor import Workspace, run_net
from graphtools.gradients import add_gradient_operators
from graphtools.ir import Model, Net
from graphtools.passes.lower_recurrent import LowerRecurrentNetworks
from graphtools.recurrent import retrieve_step_blobs
from graphtools.testing import check_gradients

RTOL = 1e-10


def run(net: Net, feeds: dict[str, np.ndarray]) -> Workspace:
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed(name, value)
    run_net(net, ws)
    return ws


def input_shapes(feeds: dict[str, np.ndarray]) -> tuple[str, ...]:
    return tuple(
        f"{name}:{'x'.join(map(str, value.shape))}:{value.dtype}" for name, value in feeds.items()
    )


def lowered(net: Net, feeds: dict[str, np.ndarray]) -> Net:
    """``net`` with its recurrent ops unrolled (checked: none is left)."""
    model = Model(net.copy())
    result = LowerRecurrentNetworks(input_shapes=input_shapes(feeds))(model)
    assert result.modified and result.stats["kept"] == 0
    flat = model.predict_net
    assert not [op.type for op in flat if op.type.startswith("Recurrent")]
    return flat


def floating(feeds: dict[str, np.ndarray]) -> list[str]:
    return [name for name, value in feeds.items() if value.dtype.kind == "f"]


def seeds(cell: Cell, seed: np.ndarray) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """Gradient seeds: ``seed`` for the loss output, zeros for the other ``_all`` outputs (an
    unrolled LSTM step needs a gradient for both of LSTMUnit's outputs; the op ignores them)."""
    ys, feeds = {cell.loss_output: "seed"}, {"seed": seed}
    for k, name in enumerate(n for n in cell.outputs if n.endswith("_all")):
        if name != cell.loss_output:
            ys[name] = f"zero_seed_{k}"
            feeds[ys[name]] = np.zeros_like(feeds["seed"])
    return ys, feeds


def seeded_gradients(net: Net, cell: Cell, seed: np.ndarray) -> dict[str, np.ndarray]:
    """Gradients of ``sum(loss_output * seed)`` w.r.t. every floating input, by the backward
    pass ``graphtools.gradients`` appends to a copy of ``net``."""
    net = net.copy()
    ys, feeds = seeds(cell, seed)
    grads = add_gradient_operators(net, ys)
    ws = run(net, {**cell.feeds, **feeds})
    return {name: ws.fetch(grads[name]) for name in floating(cell.feeds)}


def torch_gradients(cell: Cell, seed: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install torch)")
    tensors = {
        name: torch.tensor(value, requires_grad=value.dtype.kind == "f")
        for name, value in cell.feeds.items()
    }
    assert cell.torch is not None
    outputs = cell.torch(tensors)
    (outputs[cell.loss_output] * torch.tensor(seed)).sum().backward()
    grads = {name: tensors[name].grad.numpy() for name in floating(cell.feeds)}
    return {k: v.detach().numpy() for k, v in outputs.items()}, grads


def assert_close(actual: dict[str, Any], expected: dict[str, Any], rtol: float = RTOL) -> None:
    assert set(actual) == set(expected)
    for name in expected:
        np.testing.assert_allclose(
            actual[name], expected[name], rtol=rtol, atol=1e-12, err_msg=name
        )


@pytest.fixture(params=sorted(CELLS))
def cell(request: pytest.FixtureRequest) -> Cell:
    return CELLS[request.param]()


def test_forward_equals_numpy_and_the_unrolled_net(cell: Cell) -> None:
    ws = run(cell.net, cell.feeds)
    expected = cell.numpy(cell.feeds)
    assert_close({name: ws.fetch(name) for name in expected}, expected)
    flat = run(lowered(cell.net, cell.feeds), cell.feeds)
    assert_close(
        {name: flat.fetch(name) for name in cell.outputs},
        {name: ws.fetch(name) for name in cell.outputs},
        rtol=0,
    )


def test_gradients_equal_the_unrolled_backward_pass_and_the_unrolled_gradient_op(
    cell: Cell,
) -> None:
    seed = np.random.default_rng(1).standard_normal(
        run(cell.net, cell.feeds).fetch(cell.loss_output).shape
    )
    op_grads = seeded_gradients(cell.net, cell, seed)
    assert all(np.abs(g).sum() > 0 for g in op_grads.values())
    flat_forward = lowered(cell.net, cell.feeds)
    assert_close(seeded_gradients(flat_forward, cell, seed), op_grads)
    with_gradient = cell.net.copy()
    ys, seed_feeds = seeds(cell, seed)
    grads = add_gradient_operators(with_gradient, ys)
    assert "RecurrentNetworkGradient" in [op.type for op in with_gradient]
    feeds = {**cell.feeds, **seed_feeds}
    flat = run(lowered(with_gradient, feeds), feeds)
    assert_close({name: flat.fetch(grads[name]) for name in op_grads}, op_grads, rtol=0)


def test_gradients_equal_finite_differences(cell: Cell) -> None:
    checks = check_gradients(cell.net, cell.feeds, [cell.loss_output], all_elements=True)
    assert {check.name for check in checks} == set(floating(cell.feeds))
    assert all(check.ok for check in checks)


def test_outputs_and_gradients_equal_torch(cell: Cell) -> None:
    seed = np.random.default_rng(2).standard_normal(
        run(cell.net, cell.feeds).fetch(cell.loss_output).shape
    )
    outputs, grads = torch_gradients(cell, seed)
    ws = run(cell.net, cell.feeds)
    assert_close({name: ws.fetch(name) for name in outputs}, outputs)
    assert_close(seeded_gradients(cell.net, cell, seed), grads)


@pytest.mark.parametrize(
    ("build", "recompute"),
    [(tanh_rnn, ["s", "g"]), (lstm, ["L/gates_t"])],
    ids=["tanh_rnn", "lstm"],
)
def test_recomputing_blobs_keeps_fewer_blobs_and_the_same_gradients(
    build: Any, recompute: list[str]
) -> None:
    plain, recomputed = build(), build(recompute_blobs_on_backward=recompute)
    recomputed.feeds = plain.feeds
    seed = np.random.default_rng(3).standard_normal(
        run(plain.net, plain.feeds).fetch(plain.loss_output).shape
    )
    assert_close(
        seeded_gradients(recomputed.net, recomputed, seed),
        seeded_gradients(plain.net, plain, seed),
        rtol=0,
    )
    stored = {}
    for variant in (plain, recomputed):
        ws = run(variant.net, variant.feeds)
        stored[id(variant)] = retrieve_step_blobs(variant.net, workspace=ws)
    assert len(stored[id(recomputed)]) < len(stored[id(plain)])
    assert not [name for name in stored[id(recomputed)] if any(f"_{b}" in name for b in recompute)]
    check_gradients(recomputed.net, recomputed.feeds, [recomputed.loss_output], all_elements=True)
    flat = lowered(recomputed.net, recomputed.feeds)
    assert_close(seeded_gradients(flat, recomputed, seed), seeded_gradients(plain.net, plain, seed))


@pytest.mark.parametrize("name", sorted(CELLS))
def test_forward_only_gives_the_same_outputs_without_a_backward_net(name: str) -> None:
    cell, only = CELLS[name](), CELLS[name](forward_only=True)
    only.feeds = cell.feeds
    rnn = only.net[-1]
    names = [a.name for a in rnn.args]
    assert names[-1] == "timestep" and "backward_step_net" not in names and "param" not in names
    expected = run(cell.net, cell.feeds)
    ws = run(only.net, only.feeds)
    assert_close(
        {n: ws.fetch(n) for n in cell.outputs}, {n: expected.fetch(n) for n in cell.outputs}, rtol=0
    )
    flat = run(lowered(only.net, only.feeds), only.feeds)
    assert_close(
        {n: flat.fetch(n) for n in cell.outputs},
        {n: expected.fetch(n) for n in cell.outputs},
        rtol=0,
    )

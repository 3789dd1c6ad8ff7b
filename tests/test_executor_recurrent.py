"""The recurrent-net kernels: links, aliases, workspaces, zero-length sequences, step nets as
text, and the errors they raise."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format
from recurrent_cells import tanh_rnn
from test_recurrent_numbers import floating, run

from graphtools.errors import ExecutionError, InvalidNetError
from graphtools.executor import Workspace, run_net, run_op
from graphtools.executor.step_workspaces import scratch_of
from graphtools.gradients import GradientRegistry, add_gradient_operators
from graphtools.ir import Argument, Net, Op
from graphtools.nested import nested_access
from graphtools.recurrent import recurrent_net, retrieve_step_blobs
from graphtools.serde.codec import net_to_netdef, op_from_proto
from graphtools.testing import check_gradients

T0 = np.array([1], np.int32)


def test_apply_link_is_a_window_of_rows_at_t_plus_offset() -> None:
    ws = Workspace()
    ws.feed("t", T0)
    ws.feed("e", np.arange(24.0).reshape(6, 2, 2))
    run_op(
        Op("rnn_internal_apply_link", ["t", "e"], ["i", "e"], args={"offset": 2, "window": 3}), ws
    )
    np.testing.assert_array_equal(ws.fetch("i"), np.arange(24.0).reshape(6, 2, 2)[3:6])
    with pytest.raises(ExecutionError, match="out of range"):
        run_op(
            Op("rnn_internal_apply_link", ["t", "e"], ["i", "e"], args={"offset": 3, "window": 3}),
            ws,
        )
    with pytest.raises(ExecutionError, match="'window' argument"):
        run_op(Op("rnn_internal_apply_link", ["t", "e"], ["i", "e"], args={"offset": 0}), ws)


def test_accumulate_gradient_input_adds_row_t_at_t_plus_offset_in_place() -> None:
    ws = Workspace()
    og, g = np.arange(12.0).reshape(3, 2, 2), np.ones((4, 2, 2))
    for name, value in {"t": T0, "og": og, "g": g}.items():
        ws.feed(name, value)
    op = Op("rnn_internal_accumulate_gradient_input", ["t", "og", "g"], ["g"], args={"offset": 1})
    run_op(op, ws)
    expected = np.ones((4, 2, 2))
    expected[2] += og[1]
    np.testing.assert_array_equal(ws.fetch("g"), expected)
    ws.feed("t", np.array([3], np.int32))
    with pytest.raises(ExecutionError, match="over bounds"):
        run_op(op, ws)


def test_a_zero_length_sequence_runs_no_step() -> None:
    cell = tanh_rnn(seq_len=0, outputs_with_grads=(0, 1))
    net = cell.net.copy()
    grads = add_gradient_operators(net, {"h_all": "g_all", "h_last": "g_last"})
    g_last = np.random.default_rng(0).standard_normal((1, 2, 3))
    ws = run(net, {**cell.feeds, "g_all": np.zeros((0, 2, 3)), "g_last": g_last})
    assert ws.fetch("h_all").shape == (0, 2, 3)
    np.testing.assert_array_equal(ws.fetch("h_last"), cell.feeds["h0"][None])
    assert ws.fetch(grads["x"]).shape == (0, 2, 3)
    np.testing.assert_array_equal(ws.fetch(grads["h0"]), g_last[0])
    np.testing.assert_array_equal(ws.fetch(grads["w"]), np.zeros((3, 3)))
    assert scratch_of(ws.fetch("rnn/step_workspaces"), "s").steps == []


def test_a_one_dim_initial_state_is_shared_by_the_batch() -> None:
    cell = tanh_rnn()
    feeds = {**cell.feeds, "h0": cell.feeds["h0"][0]}
    expected = cell.numpy({**feeds, "h0": np.broadcast_to(feeds["h0"], (2, 3))})
    ws = run(cell.net, feeds)
    np.testing.assert_allclose(ws.fetch("h_all"), expected["h_all"], rtol=1e-12)
    check_gradients(cell.net, feeds, ["h_all"], all_elements=True)


def test_a_three_dim_initial_state_of_one_row() -> None:
    cell = tanh_rnn()
    expected = run(cell.net, cell.feeds)
    ws = run(cell.net, {**cell.feeds, "h0": cell.feeds["h0"][None]})
    np.testing.assert_array_equal(ws.fetch("h_all"), expected.fetch("h_all"))


def _as_text(op: Op) -> Op:
    args = []
    for argument in op.args:
        if argument.n is not None:
            text = text_format.MessageToString(net_to_netdef(argument.n)).encode()
            argument = Argument(argument.name, s=text)
        args.append(argument)
    return op.replace(args=args)


def test_step_nets_given_as_text_run_like_nested_nets() -> None:
    cell = tanh_rnn()
    textual = Net([_as_text(cell.net[0])], cell.net.external_inputs)
    assert textual[0].nested_nets() == [] and isinstance(textual[0].arg("step_net"), bytes)
    seed = np.random.default_rng(1).standard_normal((3, 2, 3))
    results = []
    for net in (cell.net, textual):
        net = net.copy()
        grads = add_gradient_operators(net, {"h_all": "seed"})
        ws = run(net, {**cell.feeds, "seed": seed})
        results.append([ws.fetch("h_all"), *(ws.fetch(grads[n]) for n in floating(cell.feeds))])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_forward_only_op_reuses_one_workspace_and_cannot_be_differentiated() -> None:
    cell = tanh_rnn()
    op = cell.net[0]
    gradient = op_from_proto(GradientRegistry.GetGradientForOp(op, ["seed", None, None])[0][0])
    forward_only = op.without_arg("backward_step_net")
    net = Net([forward_only, gradient], cell.net.external_inputs)
    ws = Workspace()
    for name, value in {**cell.feeds, "seed": np.ones((3, 2, 3))}.items():
        ws.feed(name, value)
    run_op(forward_only, ws)
    assert len(scratch_of(ws.fetch("rnn/step_workspaces"), "s").steps) == 1
    with pytest.raises(ExecutionError, match="forward-only"):
        run_net(Net([net[1]]), ws)


def test_one_workspace_per_step_when_differentiable() -> None:
    cell = tanh_rnn()
    ws = run(cell.net, cell.feeds)
    scratch = scratch_of(ws.fetch("rnn/step_workspaces"), "s")
    assert len(scratch.steps) == 3
    assert [s.fetch("timestep")[0] for s in scratch.steps] == [0, 1, 2]


def test_retrieve_step_blobs_copies_each_step_s_blobs() -> None:
    cell = tanh_rnn()
    ws = run(cell.net, cell.feeds)
    names = retrieve_step_blobs(cell.net, "dbg", workspace=ws)
    assert "dbg_h1" in names and "dbg_timestep2" in names
    np.testing.assert_array_equal(ws.fetch("dbg_h1")[0], ws.fetch("h_all")[1])
    assert ws.fetch("dbg_1").tolist() == names


def test_a_step_writes_a_blob_the_enclosing_workspace_holds_there() -> None:
    """Caffe2's ``CreateBlob`` rule: a name the parent workspace has is written there."""
    step = Net(
        [
            Op("Copy", ["x_t"], ["last_input"]),
            Op("Copy", ["x_t"], ["local"]),
            Op("Copy", ["h_prev"], ["h"]),
        ],
        ["x_t", "h_prev"],
        ["h"],
    )
    net = Net([], ["x", "h0", "last_input"])
    recurrent_net(net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, forward_only=True)
    x = np.arange(12.0).reshape(3, 2, 2)
    ws = run(net, {"x": x, "h0": np.zeros((2, 2)), "last_input": np.zeros((1, 2, 2))})
    np.testing.assert_array_equal(ws.fetch("last_input"), x[2:])
    assert not ws.has("local")


def test_the_step_nets_write_their_own_workspaces() -> None:
    op = tanh_rnn().net[0]
    access = nested_access(op)
    assert access.writes == frozenset() and {"w", "b"} <= access.reads


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda op: op.with_arg("step_net", b"op { type: "), "not a NetDef"),
        (lambda op: op.without_arg("step_net"), "needs a 'step_net'"),
        (lambda op: op.with_arg("link_offset", [0, 1]), "parallel lists"),
        (lambda op: op.with_arg("alias_offset", [5, -1]), "out of range"),
        (lambda op: op.with_arg("initial_recurrent_state_ids", [7]), "not an input position"),
    ],
    ids=["bad-text", "no-step-net", "links", "alias", "state-id"],
)
def test_malformed_ops_raise_typed_errors(change, message: str) -> None:  # type: ignore[no-untyped-def]
    cell = tanh_rnn()
    net = Net([change(cell.net[0])], cell.net.external_inputs)
    with pytest.raises(InvalidNetError, match=message):
        run(net, cell.feeds)


def test_an_initial_state_of_another_batch_size_is_refused() -> None:
    cell = tanh_rnn()
    with pytest.raises(ExecutionError, match="batch size 2"):
        run(cell.net, {**cell.feeds, "h0": np.zeros((3, 3))})

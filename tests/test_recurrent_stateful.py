"""State carried across calls.

* A stateful 1-D convolution written directly as a RecurrentNetwork op: the input state keeps
  the last ``w - 1`` inputs (a 3-D initial state of ``w - 1`` rows), each step writes its input
  at ``t + w - 1`` and reads the window of ``w`` rows at ``t``, and the alias at offset
  ``-(w - 1)`` hands the last inputs to the next call: chunk by chunk it equals one
  convolution over the whole sequence.
* The TensorFlow note's stateful RNN: two half sequences, the final state of the first carried
  into the second, give the outputs and gradients of one full sequence (the gradient flows
  through the carried state).
"""

from __future__ import annotations

import numpy as np
from recurrent_cells import tanh_rnn
from test_recurrent_numbers import floating, lowered, run

from graphtools.gradients import add_gradient_operators
from graphtools.ir import Net, Op
from graphtools.recurrent import recurrent_net

WINDOW, CHANNELS, FEATURES = 3, 2, 3


def conv_op(scope: str, x: str, x_init: str, y_init: str) -> Op:
    """``y_t = W . [x_{t-w+1} .. x_t] + b`` per step, its input window kept in a state."""
    step = Net(
        [
            Op("Copy", ["x_t"], ["x_new"]),
            Op("Transpose", ["x_window"], ["x_nwc"], args={"axes": [1, 0, 2]}),
            Op("Reshape", ["x_nwc"], ["x_flat", "x_old_shape"], args={"shape": [0, -1]}),
            Op("FC", ["x_flat", "w", "b"], ["y"]),
            Op("ExpandDims", ["y"], ["y_t"], args={"dims": [0]}),
        ],
        ["x_t", "x_window", "x_new", "w", "b", "timestep"],
        ["x_new", "y_t"],
        name=f"{scope}_step",
    )
    xs, ys = f"{scope}/xs", f"{scope}/ys"
    return Op(
        "RecurrentNetwork",
        [x, x_init, y_init, "w", "b"],
        [f"{scope}/y_all", f"{scope}/x_last", f"{scope}/step_workspaces"],
        args={
            "alias_src": [ys, xs],
            "alias_dst": [f"{scope}/y_all", f"{scope}/x_last"],
            "alias_offset": [1, -(WINDOW - 1)],
            "recurrent_states": [xs, ys],
            "initial_recurrent_state_ids": [1, 2],
            "link_internal": ["x_t", "x_window", "x_new", "y_t"],
            "link_external": [x, xs, xs, ys],
            "link_offset": [0, 0, WINDOW - 1, 1],
            "link_window": [1, WINDOW, 1, 1],
            "step_net": step,
            "timestep": "timestep",
        },
    )


def numpy_conv(x: np.ndarray, left: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The causal convolution over the whole sequence, ``left`` padding it."""
    padded = np.concatenate([left, x])
    kernel = w.reshape(FEATURES, WINDOW, CHANNELS)
    return np.stack(
        [
            np.einsum("nkc,dkc->nd", padded[t : t + WINDOW].transpose(1, 0, 2), kernel) + b
            for t in range(len(x))
        ]
    )


def test_a_stateful_convolution_equals_the_whole_sequence_convolution() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 2, CHANNELS))
    w, b = rng.standard_normal((FEATURES, WINDOW * CHANNELS)), rng.standard_normal(FEATURES)
    zeros = np.zeros((WINDOW - 1, 2, CHANNELS))
    y0 = np.zeros((2, FEATURES))
    whole = numpy_conv(x, zeros, w, b)
    conv = Net([Op("Conv", ["xp", "k", "b"], ["y"], args={"kernel_h": 1, "kernel_w": WINDOW})])
    xp = np.concatenate([zeros, x]).transpose(1, 2, 0)[:, :, None, :]
    k = w.reshape(FEATURES, WINDOW, CHANNELS).transpose(0, 2, 1)[:, :, None, :]
    by_conv = run(conv, {"xp": xp, "k": k, "b": b}).fetch("y")[:, :, 0, :].transpose(2, 0, 1)
    np.testing.assert_allclose(by_conv, whole, rtol=1e-12)

    chunks = Net(
        [
            Op("Split", ["x"], ["x1", "x2"], args={"axis": 0, "split": [2, 3]}),
            conv_op("c1", "x1", "zeros", "y0"),
            conv_op("c2", "x2", "c1/x_last", "y0"),
            Op("Concat", ["c1/y_all", "c2/y_all"], ["y", "y_split"], args={"axis": 0}),
        ],
        ["x", "zeros", "y0", "w", "b"],
        ["y", "c2/x_last"],
    )
    feeds = {"x": x, "zeros": zeros, "y0": y0, "w": w, "b": b}
    ws = run(chunks, feeds)
    np.testing.assert_allclose(ws.fetch("y"), whole, rtol=1e-12)
    np.testing.assert_array_equal(ws.fetch("c2/x_last"), x[-(WINDOW - 1) :])
    flat = run(lowered(chunks, feeds), feeds)
    np.testing.assert_array_equal(flat.fetch("y"), ws.fetch("y"))
    np.testing.assert_array_equal(flat.fetch("c2/x_last"), ws.fetch("c2/x_last"))


def _halves(first: int) -> Net:
    """Two tanh RNN ops over the two halves of ``x``, the second starting from the first's
    final state (its ``_last`` output, ``1 x N x D``)."""
    net = Net(
        [Op("Split", ["x"], ["x1", "x2"], args={"axis": 0, "split": [first, 4 - first]})],
        ["x", "h0", "w", "b"],
    )
    for half, (seq, init) in enumerate([("x1", "h0"), ("x2", "first/h_last")]):
        scope = ("first", "second")[half]
        cell = Net(
            [
                Op("FC", ["h_prev", "w", "b"], [f"{scope}/g"], args={"axis": 2}),
                Op("Sum", [f"{scope}/g", "x_t"], [f"{scope}/s"]),
                Op("Tanh", [f"{scope}/s"], [f"{scope}/h"]),
            ],
            ["x_t", "h_prev", "w", "b"],
            [f"{scope}/h"],
            name=scope,
        )
        recurrent_net(
            net,
            cell,
            [("x_t", seq)],
            [("h_prev", init)],
            {"h_prev": f"{scope}/h"},
            scope=scope,
            outputs_with_grads=(0, 1),
        )
    net.append_op(
        Op("Concat", ["first/h_all", "second/h_all"], ["h_all", "h_split"], args={"axis": 0})
    )
    return net


def test_two_half_sequences_with_the_state_carried_equal_one_full_sequence() -> None:
    full = tanh_rnn(seq_len=4)
    feeds = full.feeds
    seed = np.random.default_rng(6).standard_normal((4, 2, 3))
    whole = full.net.copy()
    whole_grads = add_gradient_operators(whole, {"h_all": "seed"})
    expected = run(whole, {**feeds, "seed": seed})
    halves = _halves(2)
    grads = add_gradient_operators(halves, {"h_all": "seed", "second/h_last": "zero"})
    ws = run(halves, {**feeds, "seed": seed, "zero": np.zeros((1, 2, 3))})
    np.testing.assert_allclose(ws.fetch("h_all"), expected.fetch("h_all"), rtol=1e-12)
    np.testing.assert_allclose(ws.fetch("second/h_last"), expected.fetch("h_last"), rtol=1e-12)
    for name in floating(feeds):
        np.testing.assert_allclose(
            ws.fetch(grads[name]), expected.fetch(whole_grads[name]), rtol=1e-10, err_msg=name
        )
    all_feeds = {**feeds, "seed": seed, "zero": np.zeros((1, 2, 3))}
    flat = run(lowered(halves, all_feeds), all_feeds)
    for name in ["h_all", "second/h_last", *(grads[n] for n in floating(feeds))]:
        np.testing.assert_array_equal(flat.fetch(name), ws.fetch(name), err_msg=name)


def test_a_stateful_rnn_called_twice_continues_the_sequence() -> None:
    """As a stateful Keras layer: run on the first half, feed the final state back."""
    full = tanh_rnn(seq_len=4)
    expected = run(full.net, full.feeds).fetch("h_all")
    first = run(full.net, {**full.feeds, "x": full.feeds["x"][:2]})
    second = run(full.net, {**full.feeds, "x": full.feeds["x"][2:], "h0": first.fetch("h_last")[0]})
    np.testing.assert_allclose(
        np.concatenate([first.fetch("h_all"), second.fetch("h_all")]), expected, rtol=1e-12
    )

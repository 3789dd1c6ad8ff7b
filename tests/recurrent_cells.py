"""Recurrent cells for the tests: each built with ``recurrent_net``, with a plain numpy
reference and (where torch is installed) the same cell in torch.

* ``sum_mul``: Caffe2's own test cell, ``h = x_t * (x_t + h_prev)``.
* ``tanh_rnn``: ``h = tanh(FC(h_prev) + x_t)`` (torch: ``nn.RNNCell`` with ``W_ih = I``).
* ``lstm``: ``rnn_cell.LSTM``'s structure: ``i2h = FC(x)`` outside the loop, ``FC(h_prev) +
  i2h_t`` then ``LSTMUnit`` in the step, sequence lengths masking the last steps (torch:
  ``nn.LSTMCell`` with the gates reordered).
* ``lstm_stack``: two LSTM layers in one step net (layer 2 reads layer 1's new hidden state,
  so that gradient arrives both from inside the step and through the link).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphtools.ir import Net, Op
from graphtools.recurrent import recurrent_net

RNG = np.random.default_rng(12)


def rand(*shape: int, scale: float = 0.5) -> np.ndarray:
    return RNG.standard_normal(shape) * scale


@dataclass
class Cell:
    """A forward net ending in one RecurrentNetwork op, its feeds and references.

    Attributes:
        net: the forward net (its last op is the RecurrentNetwork op).
        feeds: float64 inputs (int32 sequence lengths where used).
        outputs: the op's outputs (without the step workspaces).
        loss_output: the output the tests differentiate (listed in ``outputs_with_grads``).
        numpy: ``feeds -> {output: value}``, a loop written independently of the kernels.
        torch: the same cell in torch (``feeds as tensors -> {output: tensor}``).
        options: the ``recurrent_net`` options the cell was built with.
    """

    net: Net
    feeds: dict[str, np.ndarray]
    outputs: list[str]
    loss_output: str
    numpy: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    torch: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- sum-mul ----------------------------------------------------------------------------------


def sum_mul(seq_len: int = 3, batch: int = 2, dim: int = 3, **options: Any) -> Cell:
    step = Net(
        [Op("Sum", ["x_t", "h_prev"], ["s"]), Op("Mul", ["x_t", "s"], ["h"])],
        ["x_t", "h_prev"],
        ["h"],
        name="sum_mul_step",
    )
    net = Net([], ["x", "h0"], name="sum_mul")
    outputs = recurrent_net(
        net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, scope="sm", **options
    )
    feeds = {"x": rand(seq_len, batch, dim, scale=0.8), "h0": rand(batch, dim)}

    def numpy(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h, hs = f["h0"], []
        for x_t in f["x"]:
            h = x_t * (x_t + h)
            hs.append(h)
        return {"h_all": _stack(hs, f["h0"]), "h_last": h[None]}

    def torch(f: dict[str, Any]) -> dict[str, Any]:
        import torch as th

        h, hs = f["h0"], []
        for t in range(f["x"].shape[0]):
            h = f["x"][t] * (f["x"][t] + h)
            hs.append(h)
        return {"h_all": th.stack(hs), "h_last": h[None]}

    return Cell(net, feeds, outputs, "h_all", numpy, torch, options)


def _stack(rows: list[np.ndarray], like: np.ndarray) -> np.ndarray:
    return np.stack(rows) if rows else np.zeros((0, *like.shape[-2:]), like.dtype)


# -- tanh RNN ---------------------------------------------------------------------------------


def tanh_rnn(seq_len: int = 3, batch: int = 2, dim: int = 3, **options: Any) -> Cell:
    step = Net(
        [
            Op("FC", ["h_prev", "w", "b"], ["g"], args={"axis": 2}),
            Op("Sum", ["g", "x_t"], ["s"]),
            Op("Tanh", ["s"], ["h"]),
        ],
        ["x_t", "h_prev", "w", "b"],
        ["h"],
        name="tanh_step",
    )
    net = Net([], ["x", "h0", "w", "b"], name="tanh_rnn")
    outputs = recurrent_net(
        net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, scope="rnn", **options
    )
    feeds = {
        "x": rand(seq_len, batch, dim),
        "h0": rand(batch, dim),
        "w": rand(dim, dim),
        "b": rand(dim),
    }

    def numpy(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h, hs = f["h0"], []
        for x_t in f["x"]:
            h = np.tanh(h @ f["w"].T + f["b"] + x_t)
            hs.append(h)
        return {"h_all": _stack(hs, f["h0"]), "h_last": h[None]}

    def torch(f: dict[str, Any]) -> dict[str, Any]:
        import torch as th

        cell = th.nn.RNNCell(dim, dim, nonlinearity="tanh").double()
        fixed = {"weight_ih": th.eye(dim, dtype=th.float64), "bias_ih": th.zeros(dim).double()}
        for name, value in {**fixed, "weight_hh": f["w"], "bias_hh": f["b"]}.items():
            delattr(cell, name)
            setattr(cell, name, value)
        h, hs = f["h0"], []
        for t in range(f["x"].shape[0]):
            h = cell(f["x"][t], h)
            hs.append(h)
        return {"h_all": th.stack(hs), "h_last": h[None]}

    return Cell(net, feeds, outputs, "h_all", numpy, torch, options)


# -- LSTM -------------------------------------------------------------------------------------

#: Caffe2's LSTMUnit gate blocks are i, f, o, g; torch's are i, f, g, o.
TORCH_GATES = [0, 1, 3, 2]


def _lstm_step(prefix: str, h_prev: str, c_prev: str, gates: str) -> Op:
    return Op(
        "LSTMUnit",
        [h_prev, c_prev, gates, "seq_lengths", "timestep"],
        [f"{prefix}/hidden_t", f"{prefix}/cell_t"],
        args={"drop_states": 0, "forget_bias": 0.0},
    )


def _numpy_lstm_step(
    gates: np.ndarray, h: np.ndarray, c: np.ndarray, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    size = h.shape[-1]
    i, f, o, g = (gates[:, k * size : (k + 1) * size] for k in range(4))
    c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    h_new = _sigmoid(o) * np.tanh(c_new)
    keep = valid[:, None]
    return np.where(keep, h_new, h), np.where(keep, c_new, c)


def _torch_cell(x_w: Any, h_w: Any, x_b: Any, h_b: Any) -> Any:
    import torch as th

    size = h_w.shape[1]
    order = th.cat([th.arange(k * size, (k + 1) * size) for k in TORCH_GATES])
    cell = th.nn.LSTMCell(x_w.shape[1], size).double()
    for name, value in {"weight_ih": x_w, "weight_hh": h_w, "bias_ih": x_b, "bias_hh": h_b}.items():
        delattr(cell, name)
        setattr(cell, name, value[order])
    return cell


def _torch_lstm_step(cell: Any, x: Any, h: Any, c: Any, valid: Any) -> tuple[Any, Any]:
    import torch as th

    h_new, c_new = cell(x, (h, c))
    keep = valid[:, None]
    return th.where(keep, h_new, h), th.where(keep, c_new, c)


def lstm(
    seq_len: int = 3, batch: int = 2, dim_in: int = 3, hidden: int = 2, **options: Any
) -> Cell:
    step = Net(
        [
            Op(
                "FC",
                ["L/hidden_t_prev", "L/gates_t_w", "L/gates_t_b"],
                ["L/gates_t"],
                args={"axis": 2},
            ),
            Op("Sum", ["L/gates_t", "input_t"], ["L/gates_t"]),
            _lstm_step("L", "L/hidden_t_prev", "L/cell_t_prev", "L/gates_t"),
        ],
        [
            "input_t",
            "timestep",
            "L/hidden_t_prev",
            "L/cell_t_prev",
            "L/gates_t_w",
            "L/gates_t_b",
            "seq_lengths",
        ],
        ["L/hidden_t", "L/cell_t"],
        name="L",
    )
    names = ["x", "h0", "c0", "i2h_w", "i2h_b", "L/gates_t_w", "L/gates_t_b", "seq_lengths"]
    net = Net([Op("FC", ["x", "i2h_w", "i2h_b"], ["L/i2h"], args={"axis": 2})], names, name="lstm")
    outputs = recurrent_net(
        net,
        step,
        [("input_t", "L/i2h")],
        [("L/hidden_t_prev", "h0"), ("L/cell_t_prev", "c0")],
        {"L/hidden_t_prev": "L/hidden_t", "L/cell_t_prev": "L/cell_t"},
        timestep="timestep",
        scope="L",
        **options,
    )
    feeds = {
        "x": rand(seq_len, batch, dim_in),
        "h0": rand(batch, hidden),
        "c0": rand(batch, hidden),
        "i2h_w": rand(4 * hidden, dim_in),
        "i2h_b": rand(4 * hidden),
        "L/gates_t_w": rand(4 * hidden, hidden),
        "L/gates_t_b": rand(4 * hidden),
        "seq_lengths": np.array([seq_len, max(seq_len - 1, 0)][:batch], np.int32),
    }

    def numpy(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h, c, hs, cs = f["h0"], f["c0"], [], []
        for t, x_t in enumerate(f["x"]):
            gates = x_t @ f["i2h_w"].T + f["i2h_b"] + h @ f["L/gates_t_w"].T + f["L/gates_t_b"]
            h, c = _numpy_lstm_step(gates, h, c, t < f["seq_lengths"])
            hs.append(h)
            cs.append(c)
        return {
            "L/hidden_t_all": _stack(hs, f["h0"]),
            "L/hidden_t_last": h[None],
            "L/cell_t_all": _stack(cs, f["c0"]),
            "L/cell_t_last": c[None],
        }

    def torch(f: dict[str, Any]) -> dict[str, Any]:
        import torch as th

        cell = _torch_cell(f["i2h_w"], f["L/gates_t_w"], f["i2h_b"], f["L/gates_t_b"])
        h, c, hs, cs = f["h0"], f["c0"], [], []
        for t in range(f["x"].shape[0]):
            h, c = _torch_lstm_step(cell, f["x"][t], h, c, t < f["seq_lengths"])
            hs.append(h)
            cs.append(c)
        return {
            "L/hidden_t_all": th.stack(hs),
            "L/hidden_t_last": h[None],
            "L/cell_t_all": th.stack(cs),
            "L/cell_t_last": c[None],
        }

    return Cell(net, feeds, outputs, "L/hidden_t_all", numpy, torch, options)


def lstm_stack(
    seq_len: int = 3, batch: int = 2, dim_in: int = 3, hidden: int = 2, **options: Any
) -> Cell:
    """Two LSTM layers in one step net; the loss reads layer 2's hidden states."""
    ops = [
        Op("FC", ["l1/h_prev", "l1/h_w", "l1/h_b"], ["l1/gates"], args={"axis": 2}),
        Op("Sum", ["l1/gates", "input_t"], ["l1/gates"]),
        _lstm_step("l1", "l1/h_prev", "l1/c_prev", "l1/gates"),
        Op("FC", ["l1/hidden_t", "l2/x_w", "l2/x_b"], ["l2/gates_x"], args={"axis": 2}),
        Op("FC", ["l2/h_prev", "l2/h_w", "l2/h_b"], ["l2/gates_h"], args={"axis": 2}),
        Op("Sum", ["l2/gates_x", "l2/gates_h"], ["l2/gates"]),
        _lstm_step("l2", "l2/h_prev", "l2/c_prev", "l2/gates"),
    ]
    params = ["l1/h_w", "l1/h_b", "l2/x_w", "l2/x_b", "l2/h_w", "l2/h_b"]
    states = ["l1/h_prev", "l1/c_prev", "l2/h_prev", "l2/c_prev"]
    step = Net(
        ops,
        ["input_t", "timestep", *states, *params, "seq_lengths"],
        ["l1/hidden_t", "l1/cell_t", "l2/hidden_t", "l2/cell_t"],
        name="stack",
    )
    initial = ["h1_0", "c1_0", "h2_0", "c2_0"]
    names = ["x", *initial, "i2h_w", "i2h_b", *params, "seq_lengths"]
    net = Net([Op("FC", ["x", "i2h_w", "i2h_b"], ["i2h"], args={"axis": 2})], names, name="stack")
    links = {
        "l1/h_prev": "l1/hidden_t",
        "l1/c_prev": "l1/cell_t",
        "l2/h_prev": "l2/hidden_t",
        "l2/c_prev": "l2/cell_t",
    }
    options.setdefault("outputs_with_grads", (4,))
    outputs = recurrent_net(
        net,
        step,
        [("input_t", "i2h")],
        list(zip(states, initial, strict=True)),
        links,
        timestep="timestep",
        scope="stack",
        **options,
    )
    feeds = {
        "x": rand(seq_len, batch, dim_in),
        **{name: rand(batch, hidden) for name in initial},
        "i2h_w": rand(4 * hidden, dim_in),
        "i2h_b": rand(4 * hidden),
        "l1/h_w": rand(4 * hidden, hidden),
        "l1/h_b": rand(4 * hidden),
        "l2/x_w": rand(4 * hidden, hidden),
        "l2/x_b": rand(4 * hidden),
        "l2/h_w": rand(4 * hidden, hidden),
        "l2/h_b": rand(4 * hidden),
        "seq_lengths": np.array([seq_len, max(seq_len - 1, 0)][:batch], np.int32),
    }

    def numpy(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h1, c1, h2, c2 = (f[name] for name in initial)
        rows: dict[str, list[np.ndarray]] = {k: [] for k in links.values()}
        for t, x_t in enumerate(f["x"]):
            valid = t < f["seq_lengths"]
            g1 = x_t @ f["i2h_w"].T + f["i2h_b"] + h1 @ f["l1/h_w"].T + f["l1/h_b"]
            h1, c1 = _numpy_lstm_step(g1, h1, c1, valid)
            g2 = h1 @ f["l2/x_w"].T + f["l2/x_b"] + h2 @ f["l2/h_w"].T + f["l2/h_b"]
            h2, c2 = _numpy_lstm_step(g2, h2, c2, valid)
            for key, value in zip(links.values(), (h1, c1, h2, c2), strict=True):
                rows[key].append(value)
        result = {}
        for key, last in zip(links.values(), (h1, c1, h2, c2), strict=True):
            result[key + "_all"] = _stack(rows[key], f["h1_0"])
            result[key + "_last"] = last[None]
        return result

    def torch(f: dict[str, Any]) -> dict[str, Any]:
        import torch as th

        layer1 = _torch_cell(f["i2h_w"], f["l1/h_w"], f["i2h_b"], f["l1/h_b"])
        layer2 = _torch_cell(f["l2/x_w"], f["l2/h_w"], f["l2/x_b"], f["l2/h_b"])
        h1, c1, h2, c2 = (f[name] for name in initial)
        hs = []
        for t in range(f["x"].shape[0]):
            valid = t < f["seq_lengths"]
            h1, c1 = _torch_lstm_step(layer1, f["x"][t], h1, c1, valid)
            h2, c2 = _torch_lstm_step(layer2, h1, h2, c2, valid)
            hs.append(h2)
        return {"l2/hidden_t_all": th.stack(hs)}

    return Cell(net, feeds, outputs, "l2/hidden_t_all", numpy, torch, options)


CELLS: dict[str, Callable[..., Cell]] = {
    "sum_mul": sum_mul,
    "tanh_rnn": tanh_rnn,
    "lstm": lstm,
    "lstm_stack": lstm_stack,
}

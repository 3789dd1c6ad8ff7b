"""Importers for ONNX ``LSTM``, ``GRU`` and ``RNN``: each becomes a ``RecurrentNetwork`` op built
with ``recurrent_net`` (forward only), as Caffe2's backend built ``rnn_cell`` cells.

Per node (one direction): ``i2h = FC(X, W, Wb, axis=2)`` over the whole sequence, then a step
net adding ``FC(h_prev, R, Rb, axis=2)`` to row ``t`` of ``i2h``: an LSTM step is
``LSTMUnit`` (ONNX gates ``i, o, f, c`` reordered to Caffe2's ``i, f, o, c``), a GRU step is
Split/Sigmoid/Tanh/Mul/Add/Sub over the gates ``z, r, h`` (``linear_before_reset`` either way),
an RNN step its activation (Tanh, Relu or Sigmoid). The biases are split into their input and
recurrence halves; the weights must be constants (initializers), as Caffe2's backend needed.
Missing initial states are zeros (one row, repeated over the batch). With ``sequence_lens``
the states stop changing after each sequence's length and ``Y`` is zero there (a masked copy
of the hidden state is carried as one more state). ``Y`` is the ``_all`` output with the
direction axis inserted (``T x 1 x N x H``), ``Y_h``/``Y_c`` the ``_last`` outputs.

The attributes the default torch exporter writes at their default values (``direction=
forward``, ``layout=0``, ``input_forget=0``, ``linear_before_reset``) are accepted. Refused by
name: ``direction`` reverse and bidirectional, ``layout=1``, ``input_forget=1``, ``clip``,
other activations, ``activation_alpha``/``activation_beta``, and LSTM peepholes (input ``P``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.convert.onnx_to_caffe2.context import NodeContext
from graphtools.convert.onnx_to_caffe2.registry import converter
from graphtools.ir import Net, Op
from graphtools.recurrent import recurrent_net

__all__: list[str] = []

_SINCE = (7, 14, 22)
_COMMON = (
    *("activation_alpha", "activation_beta", "activations", "clip", "direction"),
    *("hidden_size", "layout"),
)
_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}
_RNN_ACTIVATIONS = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid"}
#: ONNX LSTM gate blocks are i, o, f, c; LSTMUnit reads i, f, o, c.
_LSTM_ORDER = (0, 2, 1, 3)
_CAFFE2_FLOAT = {np.dtype(np.float32): 1, np.dtype(np.float64): 13, np.dtype(np.float16): 12}


@dataclass
class _Weights:
    """One direction's constants: input and recurrence weights and biases, gate blocks in the
    order the step net reads them."""

    w: np.ndarray
    r: np.ndarray
    wb: np.ndarray
    rb: np.ndarray
    hidden: int


def _check_attributes(ctx: NodeContext, gates: int) -> int:
    """The hidden size, after refusing what the mapping does not express (by name)."""
    attrs = ctx.attrs
    if attrs.get("direction", "forward") != "forward":
        raise ctx.refuse("is not supported: only forward recurrences are imported", "direction")
    if attrs.get("layout", 0) != 0:
        raise ctx.refuse("(batch-major tensors) is not supported", "layout")
    if attrs.get("input_forget", 0) != 0:
        raise ctx.refuse("(coupled input and forget gates) is not supported", "input_forget")
    for name in ("clip", "activation_alpha", "activation_beta"):
        if name in attrs:
            raise ctx.refuse("is not supported", name)
    op_type = ctx.node.type
    activations = attrs.get("activations")
    if activations is not None:
        names = [a.lower() for a in activations]
        if op_type == "RNN":
            if len(names) != 1 or names[0] not in _RNN_ACTIVATIONS:
                raise ctx.refuse("is not supported (Tanh, Relu or Sigmoid)", "activations")
        elif names != [a.lower() for a in _DEFAULT_ACTIVATIONS[op_type]]:
            raise ctx.refuse("is not supported (only the defaults)", "activations")
    hidden = attrs.get("hidden_size")
    if hidden is None:
        raise ctx.refuse("needs the hidden_size attribute")
    w = ctx.need_const(1, "W")
    if w.ndim != 3 or w.shape[0] != 1 or w.shape[1] != gates * int(hidden):
        raise ctx.refuse(f"W {list(w.shape)} is not 1 x {gates * int(hidden)} x input_size")
    return int(hidden)


def _weights(ctx: NodeContext, gates: int, order: tuple[int, ...]) -> _Weights:
    hidden = _check_attributes(ctx, gates)
    w, r = ctx.need_const(1, "W")[0], ctx.need_const(2, "R")[0]
    b = (
        ctx.need_const(3, "B")[0]
        if ctx.input(3) is not None
        else np.zeros(2 * gates * hidden, w.dtype)
    )
    rows = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in order])
    return _Weights(w[rows], r[rows], b[: gates * hidden][rows], b[gates * hidden :][rows], hidden)


class _Builder:
    """Names, params and the step net of one recurrent node."""

    def __init__(self, ctx: NodeContext, dtype: np.dtype[Any]) -> None:
        self.ctx = ctx
        self.scope = ctx.fresh(ctx.node.name or ctx.node.type.lower())
        self.dtype = dtype
        self.ops: list[Op] = []
        self.inputs: list[str] = []

    def name(self, blob: str) -> str:
        full = f"{self.scope}/{blob}"
        self.ctx.importer.names.reserve([full])
        return full

    def param(self, blob: str, value: np.ndarray) -> str:
        name = self.name(blob)
        self.ctx.importer.add_constant(name, np.ascontiguousarray(value), self.ctx.where)
        return name

    def step(self, op_type: str, inputs: list[str], outputs: list[str], **args: Any) -> None:
        self.ops.append(Op(op_type, inputs, outputs, args=args))

    def mask(self, lengths: str | None, timestep: str) -> str | None:
        """A ``1 x N x 1`` float mask of the sequences still running at ``timestep``."""
        if lengths is None:
            return None
        valid, as_float, mask = self.name("valid"), self.name("valid_float"), self.name("mask")
        self.step("LT", [timestep, lengths], [valid])
        self.step("Cast", [valid], [as_float], to=_CAFFE2_FLOAT[self.dtype])
        self.step("ExpandDims", [as_float], [mask], dims=[0, 2])
        return mask


def _lengths(ctx: NodeContext, builder: _Builder) -> str | None:
    """``sequence_lens`` as int32 (what LSTMUnit and the timestep compare with)."""
    lengths = ctx.input(4)
    if lengths is None:
        return None
    cast = builder.name("seq_lengths")
    ctx.emit("Cast", [lengths], [cast], to=2)
    return cast


def _initial(ctx: NodeContext, builder: _Builder, index: int, blob: str, hidden: int) -> str:
    """The initial state input (``1 x N x H``), else a zero row repeated over the batch."""
    given = ctx.input(index)
    if given is not None:
        return given
    return builder.param(f"{blob}_zero", np.zeros(hidden, builder.dtype))


def _finish(
    ctx: NodeContext,
    builder: _Builder,
    weights: _Weights,
    states: list[tuple[str, str, str]],
    lengths: str | None,
    hidden_state: str,
) -> None:
    """Run the step net with ``recurrent_net``; write ``Y`` and the final states.

    ``states`` lists ``(cell input, cell output, initial blob)``; the first is the hidden
    state, whose ``_all`` output is ``Y`` (its masked copy when lengths are given).
    """
    x = ctx.inputs[0]
    i2h = builder.name("i2h")
    w, wb = builder.param("i2h_w", weights.w), builder.param("i2h_b", weights.wb)
    ctx.emit("FC", [x, w, wb], [i2h], axis=2)
    timestep = builder.name("timestep")
    mask = builder.mask(lengths, timestep)
    if mask is not None:
        y_prev, y = builder.name("y_prev"), builder.name("y")
        builder.step("Mul", [hidden_state, mask], [y])
        states = [
            *states,
            (y_prev, y, builder.param("y_zero", np.zeros(weights.hidden, builder.dtype))),
        ]
    cell_inputs = [s[0] for s in states]
    cell = Net(
        builder.ops,
        [builder.name("input_t"), timestep, *cell_inputs, *builder.inputs],
        [s[1] for s in states],
        name=builder.scope,
    )
    net = Net()
    outputs = recurrent_net(
        net,
        cell,
        [(builder.name("input_t"), i2h)],
        [(s[0], s[2]) for s in states],
        {s[0]: s[1] for s in states},
        timestep=timestep,
        scope=builder.scope,
        forward_only=True,
    )
    ctx.importer.ops.extend(net.ops)
    y_all = outputs[-2] if mask is not None else outputs[0]
    y_out = ctx.output(0)
    if y_out is not None:
        ctx.emit("ExpandDims", [y_all], [y_out], dims=[1])
    for k in range(1, len(ctx.node.outputs)):
        final = ctx.output(k)
        if final is not None:
            ctx.emit("Copy", [outputs[2 * (k - 1) + 1]], [final])


@converter("LSTM", since=_SINCE, attributes=(*_COMMON, "input_forget"))
def _lstm(ctx: NodeContext) -> None:
    if ctx.input(7) is not None:
        raise ctx.refuse("input P (peepholes) is not supported")
    weights = _weights(ctx, 4, _LSTM_ORDER)
    builder = _Builder(ctx, weights.w.dtype)
    lengths = _lengths(ctx, builder)
    h_prev, c_prev, gates = (
        builder.name("hidden_t_prev"),
        builder.name("cell_t_prev"),
        builder.name("gates_t"),
    )
    h, c = builder.name("hidden_t"), builder.name("cell_t")
    r, rb = builder.param("gates_t_w", weights.r), builder.param("gates_t_b", weights.rb)
    builder.inputs = [r, rb, *([lengths] if lengths else [])]
    builder.step("FC", [h_prev, r, rb], [gates], axis=2)
    builder.step("Sum", [gates, builder.name("input_t")], [gates])
    timestep = builder.name("timestep")
    unit_inputs = [h_prev, c_prev, gates, *([lengths] if lengths else []), timestep]
    builder.step(
        "LSTMUnit",
        unit_inputs,
        [h, c],
        drop_states=0,
        forget_bias=0.0,
        sequence_lengths=int(lengths is not None),
    )
    states = [
        (h_prev, h, _initial(ctx, builder, 5, "hidden", weights.hidden)),
        (c_prev, c, _initial(ctx, builder, 6, "cell", weights.hidden)),
    ]
    _finish(ctx, builder, weights, states, lengths, h)


def _carry(builder: _Builder, mask: str | None, previous: str, new: str, out: str) -> None:
    """``out = new`` where the sequence runs, ``previous`` after its end."""
    if mask is None:
        builder.step("Copy", [new], [out])
        return
    delta, kept = builder.name("delta"), builder.name("masked_delta")
    builder.step("Sub", [new, previous], [delta])
    builder.step("Mul", [delta, mask], [kept])
    builder.step("Add", [previous, kept], [out])


@converter("GRU", since=_SINCE, attributes=(*_COMMON, "linear_before_reset"))
def _gru(ctx: NodeContext) -> None:
    weights = _weights(ctx, 3, (0, 1, 2))
    size = weights.hidden
    builder = _Builder(ctx, weights.w.dtype)
    lengths = _lengths(ctx, builder)
    n = builder.name
    h_prev, h = n("hidden_t_prev"), n("hidden_t")
    r_zr, rb_zr = (
        builder.param("gates_zr_w", weights.r[: 2 * size]),
        builder.param("gates_zr_b", weights.rb[: 2 * size]),
    )
    r_h, rb_h = (
        builder.param("gates_h_w", weights.r[2 * size :]),
        builder.param("gates_h_b", weights.rb[2 * size :]),
    )
    builder.inputs = [r_zr, rb_zr, r_h, rb_h, *([lengths] if lengths else [])]
    step = builder.step
    step("Split", [n("input_t")], [n("x_z"), n("x_r"), n("x_h")], axis=2, split=[size] * 3)
    step("FC", [h_prev, r_zr, rb_zr], [n("h_zr")], axis=2)
    step("Split", [n("h_zr")], [n("h_z"), n("h_r")], axis=2, split=[size] * 2)
    for gate in ("z", "r"):
        step("Add", [n(f"x_{gate}"), n(f"h_{gate}")], [n(f"{gate}_pre")])
        step("Sigmoid", [n(f"{gate}_pre")], [n(gate)])
    if ctx.attr("linear_before_reset", 0):
        step("FC", [h_prev, r_h, rb_h], [n("h_h")], axis=2)
        step("Mul", [n("r"), n("h_h")], [n("r_h_h")])
    else:
        step("Mul", [n("r"), h_prev], [n("r_h_prev")])
        step("FC", [n("r_h_prev"), r_h, rb_h], [n("r_h_h")], axis=2)
    step("Add", [n("x_h"), n("r_h_h")], [n("n_pre")])
    step("Tanh", [n("n_pre")], [n("n")])
    step("Sub", [h_prev, n("n")], [n("h_minus_n")])
    step("Mul", [n("z"), n("h_minus_n")], [n("z_h_minus_n")])
    step("Add", [n("n"), n("z_h_minus_n")], [n("h_new")])
    _carry(builder, builder.mask(lengths, n("timestep")), h_prev, n("h_new"), h)
    states = [(h_prev, h, _initial(ctx, builder, 5, "hidden", size))]
    _finish(ctx, builder, weights, states, lengths, h)


@converter("RNN", since=_SINCE, attributes=_COMMON)
def _rnn(ctx: NodeContext) -> None:
    weights = _weights(ctx, 1, (0,))
    builder = _Builder(ctx, weights.w.dtype)
    lengths = _lengths(ctx, builder)
    n = builder.name
    h_prev, h = n("hidden_t_prev"), n("hidden_t")
    r, rb = builder.param("gates_t_w", weights.r), builder.param("gates_t_b", weights.rb)
    builder.inputs = [r, rb, *([lengths] if lengths else [])]
    activation = _RNN_ACTIVATIONS[(ctx.attr("activations") or ["Tanh"])[0].lower()]
    builder.step("FC", [h_prev, r, rb], [n("gates_t")], axis=2)
    builder.step("Add", [n("gates_t"), n("input_t")], [n("pre")])
    builder.step(activation, [n("pre")], [n("h_new")])
    _carry(builder, builder.mask(lengths, n("timestep")), h_prev, n("h_new"), h)
    states = [(h_prev, h, _initial(ctx, builder, 5, "hidden", weights.hidden))]
    _finish(ctx, builder, weights, states, lengths, h)

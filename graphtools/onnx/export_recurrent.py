"""Exporters for ``RecurrentNetwork`` (an ONNX ``Loop``, or a ``Scan`` on request) and
``LSTMUnit`` (basic ONNX ops).

A RecurrentNetwork op is exported when its links have the shape ``recurrent_net`` gives them
(``onnx-facts.md`` 4.1): each state is read at ``t`` and written at ``t + 1`` through one link
each (window 1) and starts from one row (``N x D``, ``1 x N x D``, or ``D`` repeated over the
batch); every other link reads row ``t`` of an op input (the sequence); aliases are ``_all``
(offset 1) or ``_last`` (offset -1). Then each state is a loop-carried ``1 x N x D`` value, the
sequence rows are gathered at the iteration number (``Loop``) or scanned (``Scan``), ``_all``
outputs are the stacked rows and ``_last`` outputs the final values; the step net's ops become
the body through the ordinary op exporters, its blobs renamed to SSA values, outer blobs read
from the enclosing graph. ``Loop`` is the default: it gives the iteration number (the
``timestep`` blob, int32 ``[1]``) and handles a zero-length sequence, where onnxruntime's
``Scan`` fails; with ``Scan`` a counter is carried when the step reads the timestep. Other link
patterns (windows, other offsets, a step reading a state tensor itself), step workspaces read
by another op, and ops holding nested nets in the step are refused.

``LSTMUnit`` (gates ``i, f, o, g`` on the last axis) becomes Split, Sigmoid, Tanh, Mul and Add;
with sequence lengths, a ``caffe2``-domain function computing the same and then
``Where(timestep < lengths, new, previous)`` (zeros with ``drop_states``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper

from graphtools.analysis.recurrent import APPLY_LINK, Link, forward_program
from graphtools.ir import Op
from graphtools.onnx.dtypes import onnx_dtype_of_numpy
from graphtools.onnx.export_context import (
    EXPORTERS,
    ExportContext,
    Function,
    TypeInfo,
    exporter,
    onnx_int64,
)

__all__ = ["LOOP", "SCAN"]

LOOP = "loop"
SCAN = "scan"


def _via(
    cx: ExportContext, op_type: str, inputs: list[str], outputs: list[str], **args: object
) -> None:
    """Emit what the Caffe2 op ``op_type`` exports to (opset differences handled there)."""
    EXPORTERS[op_type](cx, Op(op_type, inputs, outputs, args=args))


# -- LSTMUnit ---------------------------------------------------------------------------------


def _lstm_cell(
    cx: ExportContext,
    h_prev: str,
    c_prev: str,
    gates: str,
    forget_bias: str | None,
    outputs: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """The new ``(hidden, cell)`` of an LSTMUnit (gates ``i, f, o, g`` on the last axis),
    written to ``outputs`` when given; ``forget_bias`` a value of the gates' type, or
    ``None``."""
    h_new, c_new = outputs or (cx.fresh("h_new"), cx.fresh("c_new"))
    parts = [cx.fresh(f"{gates}_{k}") for k in "ifog"]
    _via(cx, "Split", [gates], parts, axis=-1)
    i, f, o, g = (cx.fresh(f"{c_prev}_{k}") for k in "ifog")
    forget = parts[1]
    if forget_bias is not None:
        forget = cx.fresh(f"{c_prev}_f_biased")
        cx.node("Add", [parts[1], forget_bias], [forget])
    cx.node("Sigmoid", [parts[0]], [i])
    cx.node("Sigmoid", [forget], [f])
    cx.node("Sigmoid", [parts[2]], [o])
    cx.node("Tanh", [parts[3]], [g])
    kept, added = cx.fresh("c_kept"), cx.fresh("c_added")
    cx.node("Mul", [f, c_prev], [kept])
    cx.node("Mul", [i, g], [added])
    cx.node("Add", [kept, added], [c_new])
    tanh_c = cx.fresh("c_tanh")
    cx.node("Tanh", [c_new], [tanh_c])
    cx.node("Mul", [o, tanh_c], [h_new])
    return h_new, c_new


def _lstm_unit_lengths_body(fx: ExportContext) -> None:
    """With sequence lengths: ``Where(timestep < lengths, new, previous)`` (zeros with
    ``drop_states``)."""
    bias = fx.fresh("forget_bias")
    fx.node("CastLike", [fx.attr("forget_bias"), "gates"], [bias])
    h_new, c_new = _lstm_cell(fx, "hidden_t_prev", "cell_t_prev", "gates", bias)
    t, valid, valid3, drop, zero = (fx.fresh(k) for k in ("t", "valid", "valid3", "drop", "zero"))
    fx.node("CastLike", ["timestep", "seq_lengths"], [t])
    fx.node("Less", [t, "seq_lengths"], [valid])
    _via(fx, "ExpandDims", [valid], [valid3], dims=[0, 2])
    fx.node("Cast", [fx.attr("drop_states")], [drop], to=TensorProto.BOOL)
    fx.node("CastLike", [fx.const(np.float32(0.0), "zero_value"), "gates"], [zero])
    for new, previous, out in (
        (c_new, "cell_t_prev", "cell_t"),
        (h_new, "hidden_t_prev", "hidden_t"),
    ):
        kept = fx.fresh(f"{out}_kept")
        fx.node("Where", [drop, zero, previous], [kept])
        fx.node("Where", [valid3, new, kept], [out])


_LSTM_UNIT_LENGTHS = Function(
    "LSTMUnit",
    ("hidden_t_prev", "cell_t_prev", "gates", "seq_lengths", "timestep"),
    ("hidden_t", "cell_t"),
    {"forget_bias": "float", "drop_states": "int"},
    _lstm_unit_lengths_body,
)


@exporter("LSTMUnit")
def _lstm_unit(cx: ExportContext, op: Op) -> None:
    """Without sequence lengths, inline ops; with them (masking by the timestep), a
    ``caffe2``-domain function, so the import finds the LSTMUnit again."""
    h_prev, c_prev, gates = op.inputs[:3]
    forget_bias = float(op.arg("forget_bias", 0.0))
    if len(op.inputs) == 5:
        drop = int(op.arg("drop_states", 0))
        cx.call(
            _LSTM_UNIT_LENGTHS, op.inputs, op.outputs[:2], forget_bias=forget_bias, drop_states=drop
        )
        return
    bias = cx.const(forget_bias, "forget_bias", cx.dtype(gates)) if forget_bias else None
    _lstm_cell(cx, h_prev, c_prev, gates, bias, (op.outputs[0], op.outputs[1]))


# -- RecurrentNetwork ---------------------------------------------------------------------------


@dataclass
class _State:
    """A recurrent state exported as a carried ``1 x N x D`` value."""

    name: str
    init: str
    reader: str  # the step's name for row t
    writer: str  # the step's name for row t + 1
    all_outputs: list[str] = field(default_factory=list)
    last_outputs: list[str] = field(default_factory=list)


@dataclass
class _Pattern:
    states: list[_State]
    sequences: list[Link]  # links reading row t of an op input
    step_ops: list[Op]
    timestep: str


def _pattern(cx: ExportContext, op: Op) -> _Pattern:
    """The op's links, states and aliases in ``recurrent_net``'s shape (else refused)."""
    program = forward_program(op)
    by_external: dict[str, list[Link]] = {}
    for link in program.links:
        by_external.setdefault(link.external, []).append(link)
    states = []
    for state in program.states:
        links = sorted(by_external.pop(state.state, []), key=lambda link: link.offset)
        shape = [(link.offset, link.window) for link in links]
        if shape != [(0, 1), (1, 1)]:
            raise cx.refuse(
                f"state {state.state!r} is linked at (offset, window) {shape}; only a read at "
                "t and a write at t + 1 have an ONNX loop form"
            )
        states.append(_State(state.state, state.input, links[0].internal, links[1].internal))
    sequences = []
    for external, links in by_external.items():
        if external not in op.inputs:
            raise cx.refuse(f"a link reads {external!r}, which is not an input of the op")
        for link in links:
            if (link.offset, link.window) != (0, 1):
                raise cx.refuse(
                    f"link {link.internal!r} reads {external!r} at offset {link.offset} with "
                    f"window {link.window}; only row t has an ONNX loop form"
                )
            sequences.append(link)
    by_state = {s.name: s for s in states}
    for alias in program.aliases:
        target = by_state.get(alias.src)
        if target is None or alias.offset not in (1, -1):
            raise cx.refuse(
                f"alias {alias.dst!r} of {alias.src!r} at offset {alias.offset}: only _all "
                "(offset 1) and _last (offset -1) of a state have an ONNX loop form"
            )
        (target.all_outputs if alias.offset == 1 else target.last_outputs).append(alias.dst)
    if cx.used(op.outputs[-1]):
        raise cx.refuse(f"its step workspaces {op.outputs[-1]!r} are read by another op")
    step_ops = [o for o in program.step_net if o.type != APPLY_LINK]
    return _Pattern(states, sequences, step_ops, program.timestep)


class _Body:
    """The step net as a sub-graph: SSA renames, then the ordinary op exporters."""

    def __init__(self, cx: ExportContext, pattern: _Pattern, label: str) -> None:
        self.cx = cx
        self.pattern = pattern
        self.label = label
        self.sub = cx.child(set(), f"{cx.net_label}, {label}")
        self.latest: dict[str, str] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[str] = []
        self.types: dict[str, TypeInfo] = {}

    def value(self, name: str, hint: str, elem_type: int, shape: list[int] | None) -> str:
        """A body input named after ``hint``, standing for the step's blob ``name``."""
        value = self.cx.fresh(f"{hint}_{self.label}")
        self.inputs.append(helper.make_tensor_value_info(value, elem_type, shape))
        if name:
            self.latest[name] = value
        return value

    def convert(self) -> None:
        cx, pattern = self.cx, self.pattern
        links = {s.reader for s in pattern.states} | {link.internal for link in pattern.sequences}
        tensors = {s.name for s in pattern.states}
        renamed = []
        for step_op in pattern.step_ops:
            if step_op.has_nested_nets():
                raise cx.refuse(f"the step op {step_op.type} holds nested nets")
            inputs = []
            for name in step_op.inputs:
                if name in tensors:
                    raise cx.refuse(f"the step reads the state tensor {name!r} itself")
                if name not in self.latest and name in cx.rewritten:
                    raise cx.refuse(
                        f"the step reads {name!r}, which the enclosing net writes more than once"
                    )
                inputs.append(self.latest.get(name, name))
            outputs = []
            for name in step_op.outputs:
                if name in links or name == pattern.timestep:
                    raise cx.refuse(f"the step writes {name!r}, which it reads through a link")
                if name in cx.outer_names and name not in self.latest:
                    raise cx.refuse(f"the step overwrites blob {name!r} of the enclosing net")
                self.latest[name] = cx.fresh(f"{name}_{self.label}")
                outputs.append(self.latest[name])
            renamed.append(step_op.replace(inputs=inputs, outputs=outputs, control_inputs=()))
        missing = [s.writer for s in pattern.states if s.writer not in self.latest]
        if missing:
            raise cx.refuse(f"the step does not write {missing}, linked to the next step")
        self.sub.read = {n for o in renamed for n in o.inputs}
        self.sub.read.update(self.latest[s.writer] for s in pattern.states)
        for index, step_op in enumerate(renamed):
            fn = EXPORTERS.get(step_op.type)
            self.sub.op, self.sub.index = step_op, index
            if fn is None:
                raise self.sub.refuse(f"no ONNX mapping for Caffe2 op type {step_op.type!r}")
            fn(self.sub, step_op)
        cx.missing_rank = cx.missing_rank or self.sub.missing_rank

    def reads_timestep(self) -> bool:
        return any(self.pattern.timestep in o.inputs for o in self.pattern.step_ops)

    def output(self, value: str, known: TypeInfo | None = None) -> None:
        """Add ``value`` to the body's outputs (a copy when it is already one), typed when its
        type is ``known`` (onnxruntime shapes an empty scan output by it)."""
        if value in self.outputs or value in {i.name for i in self.inputs}:
            copy = self.cx.fresh(f"{value}_out")
            self.sub.nodes.append(helper.make_node("Identity", [value], [copy]))
            value = copy
        self.outputs.append(value)
        if known is not None and known.dtype is not None and known.shape is not None:
            self.types[value] = known

    def graph(self, name: str) -> onnx.GraphProto:
        outputs = []
        for value in self.outputs:
            known = self.types.get(value)
            if known is None or known.dtype is None or known.shape is None:
                outputs.append(onnx.ValueInfoProto(name=value))
            else:
                elem = onnx_dtype_of_numpy(known.dtype)
                outputs.append(helper.make_tensor_value_info(value, elem, list(known.shape)))
        return helper.make_graph(self.sub.nodes, name, self.inputs, outputs)


def _elem_type(cx: ExportContext, name: str) -> int:
    return onnx_dtype_of_numpy(cx.dtype(name))


def _initial_row(cx: ExportContext, state: _State, sequence: str) -> str:
    """The state's initial ``1 x N x D`` row (from ``N x D``, ``1 x N x D`` or ``D``)."""
    rank = cx.need_rank(state.init, f"the initial value of state {state.name!r}")
    if rank == 3:
        info = cx.info(state.init)
        if info is None or info.shape is None or info.shape[0] != 1:
            raise cx.refuse(
                f"the initial value {state.init!r} of state {state.name!r} may hold several "
                "rows (only one has an ONNX loop form)"
            )
        return state.init
    row = cx.fresh(f"{state.init}_row")
    if rank == 2:
        _via(cx, "ExpandDims", [state.init], [row], dims=[0])
        return row
    if rank != 1:
        raise cx.refuse(f"the initial value {state.init!r} has rank {rank} (1 to 3 expected)")
    shape, batch, width, target = (cx.fresh(f"{row}_{k}") for k in ("seq", "n", "d", "shape"))
    cx.node("Shape", [sequence], [shape])
    one, two = cx.const(onnx_int64([1]), "one"), cx.const(onnx_int64([2]), "two")
    cx.node("Slice", [shape, one, two], [batch])
    cx.node("Shape", [state.init], [width])
    cx.node("Concat", [one, batch, width], [target], axis=0)
    cx.node("Expand", [state.init, target], [row])
    return row


def _body_step(body: _Body, pattern: _Pattern, t: str | None, rows: dict[str, str]) -> None:
    """Bind the sequence rows and (from the int64 ``[1]`` iteration ``t``) the timestep, then
    convert the step's ops into the body."""
    cx = body.cx
    if t is not None and body.reads_timestep():
        ts = cx.fresh(f"{pattern.timestep}_{body.label}")
        body.sub.nodes.append(helper.make_node("Cast", [t], [ts], to=TensorProto.INT32))
        body.latest[pattern.timestep] = ts
    for internal, row in rows.items():
        body.latest[internal] = row
    body.convert()


def _loop(cx: ExportContext, op: Op, pattern: _Pattern) -> None:
    body = _Body(cx, pattern, "loop")
    iteration = body.value("", "iteration", TensorProto.INT64, [])
    cond = body.value("", "cond", TensorProto.BOOL, [])
    for state in pattern.states:
        body.value(state.reader, state.reader, _elem_type(cx, state.init), None)
    t1 = cx.fresh(f"t_{body.label}")
    body.sub.nodes.append(
        helper.make_node("Unsqueeze", [iteration, cx.const(onnx_int64([0]), "axes")], [t1])
        if cx.opset >= 13
        else helper.make_node("Unsqueeze", [iteration], [t1], axes=[0])
    )
    rows = {}
    for link in pattern.sequences:
        rows[link.internal] = cx.fresh(f"{link.internal}_{body.label}")
        body.sub.nodes.append(
            helper.make_node("Gather", [link.external, t1], [rows[link.internal]], axis=0)
        )
    _body_step(body, pattern, t1, rows)
    body.output(cond)
    finals, stacked = _outputs(cx, body, pattern)
    sequence = op.inputs[0]
    shape, trips = cx.fresh(f"{sequence}_shape"), cx.fresh(f"{op.outputs[-1]}_trips")
    cx.node("Shape", [sequence], [shape])
    cx.node("Gather", [shape, cx.const(np.int64(0), "zero")], [trips], axis=0)
    inits = [_initial_row(cx, s, sequence) for s in pattern.states]
    cx.node(
        "Loop", [trips, "", *inits], [*finals, *stacked], body=body.graph(f"{op.outputs[-1]}_loop")
    )
    _last_copies(cx, pattern, finals)


def _scan(cx: ExportContext, op: Op, pattern: _Pattern) -> None:
    body = _Body(cx, pattern, "scan")
    for state in pattern.states:
        body.value(state.reader, state.reader, _elem_type(cx, state.init), None)
    counter = None
    if body.reads_timestep():
        counter = body.value("", "timestep", TensorProto.INT32, [1])
    rows = {}
    for link in pattern.sequences:
        element = body.value("", link.internal, _elem_type(cx, link.external), None)
        rows[link.internal] = cx.fresh(f"{link.internal}_{body.label}")
        body.sub.nodes.append(
            helper.make_node(
                "Unsqueeze", [element, cx.const(onnx_int64([0]), "axes")], [rows[link.internal]]
            )
            if cx.opset >= 13
            else helper.make_node("Unsqueeze", [element], [rows[link.internal]], axes=[0])
        )
    if counter is not None:
        body.latest[pattern.timestep] = counter
    _body_step(body, pattern, None, rows)
    extra_init: list[str] = []
    if counter is not None:
        step = cx.fresh(f"{counter}_next")
        one = cx.const(np.array([1], np.int32), "one_int32")
        body.sub.nodes.append(helper.make_node("Add", [counter, one], [step]))
        extra_init = [cx.const(np.array([0], np.int32), "timestep_start")]
    finals, stacked = _outputs(cx, body, pattern, carried_extra=[step] if counter else [])
    inits = [_initial_row(cx, s, op.inputs[0]) for s in pattern.states]
    outputs = [*finals, *([cx.fresh("timestep_end")] if counter else []), *stacked]
    cx.node(
        "Scan",
        [*inits, *extra_init, *(link.external for link in pattern.sequences)],
        outputs,
        body=body.graph(f"{op.outputs[-1]}_scan"),
        num_scan_inputs=len(pattern.sequences),
    )
    _last_copies(cx, pattern, finals)


def _outputs(
    cx: ExportContext, body: _Body, pattern: _Pattern, carried_extra: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """Body outputs (next states, extra carried values, ``_all`` rows) and the op's values
    they become (final states, stacked rows)."""
    finals = []
    for state in pattern.states:
        body.output(body.latest[state.writer])
        finals.append(
            state.last_outputs[0] if state.last_outputs else cx.fresh(f"{state.name}_final")
        )
    for value in carried_extra or []:
        body.output(value)
    stacked = []
    for state in pattern.states:
        for dst in state.all_outputs:
            row = cx.fresh(f"{dst}_row")
            _via(body.sub, "Squeeze", [body.latest[state.writer]], [row], dims=[0])
            known = cx.info(dst)
            shape = None if known is None or known.shape is None else known.shape[1:]
            body.output(row, None if known is None else TypeInfo(known.dtype, shape))
            stacked.append(dst)
    return finals, stacked


def _last_copies(cx: ExportContext, pattern: _Pattern, finals: list[str]) -> None:
    for state, final in zip(pattern.states, finals, strict=True):
        for dst in state.last_outputs[1:]:
            cx.node("Identity", [final], [dst])


@exporter("RecurrentNetwork")
def _recurrent_network(cx: ExportContext, op: Op) -> None:
    pattern = _pattern(cx, op)
    if cx.recurrent == SCAN:
        _scan(cx, op, pattern)
    else:
        _loop(cx, op, pattern)

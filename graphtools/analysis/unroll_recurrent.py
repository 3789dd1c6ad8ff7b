"""Unroll a ``RecurrentNetwork`` op (and its ``RecurrentNetworkGradient``) into flat ops.

The flat ops compute what the op computes, step by step, without workspaces or views: each
step's ops are copies of the step net Caffe2 runs (``graphtools.analysis.recurrent``) with
every blob the step writes renamed ``<scope>/t<k>/<blob>`` (``_v1``, ``_v2``, ... when a step
writes it again, so the flat net writes every name once), where ``<scope>`` is the prefix of
the op's ``step_workspaces`` output. A state tensor becomes its rows: the rows of the initial
value (``ExpandDims`` of an ``N x D`` value, ``Split`` of an ``L x N x D`` one; a value whose
shape is not known here, times ones of shape ``1 x N x 1`` made from the sequence's first row,
which broadcasts a ``D``, ``N x D`` or ``1 x N x D`` value as the kernel does), then the blob
each step writes through its link. A link reads rows at ``t + offset`` (a ``Concat`` for a
window of several rows), the sequence input is ``Split`` into rows, ``timestep`` is an int32
``ConstantFill`` per step, and each alias is a ``Concat`` (or ``Copy``) of rows.

The gradient op unrolls the same way over ``t = T - 1 .. 0``: it reads the forward rows and
each forward step's blobs (not the recomputed ones, which its step recomputes), gradient rows
start at zero (the last row at the ``_last`` output's gradient), the ``_all`` output's gradient
is split into rows added at ``t + 1`` before step ``t``, parameter gradients are summed over the
steps, and the initial states' gradients are their first rows (summed over the batch for a 1-D
initial state).

What cannot be unrolled raises ``UnsupportedOpError`` naming the op: a step op writing a blob of
the enclosing net, a write to a link window of several rows, a read of a state tensor itself,
a read of a blob the step (or an earlier step, as a reused workspace would give) did not write.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphtools.analysis.input_shapes import fill_shape, placeholder_inputs
from graphtools.analysis.recurrent import (
    ACCUMULATE_INPUT_GRADIENT,
    APPLY_LINK,
    BackwardProgram,
    ForwardProgram,
    backward_program,
    forward_program,
)
from graphtools.analysis.shapes import ShapeInfo, TensorType, TypeLike, infer_model_shapes
from graphtools.errors import InvalidNetError, UnsupportedOpError
from graphtools.ir import Model, Net, Op
from graphtools.nested import names_in_nested_nets

__all__ = [
    "RecurrentUnroll",
    "StateHint",
    "UnrollPlan",
    "plan_recurrent_unrolls",
    "recurrent_scope",
    "unroll_recurrent_network",
]

_STEP_WORKSPACES = "/step_workspaces"
_DTYPE_CODES = {
    np.dtype(np.float32): 1,
    np.dtype(np.float64): 13,
    np.dtype(np.float16): 12,
}


@dataclass(frozen=True)
class RecurrentUnroll:
    """The flat ops replacing a RecurrentNetwork op (``forward_index``) and, when given, its
    gradient op (``gradient_index``), for sequence length ``seq_len``."""

    forward_index: int
    forward_ops: tuple[Op, ...]
    gradient_index: int | None
    gradient_ops: tuple[Op, ...]
    seq_len: int


@dataclass(frozen=True)
class StateHint:
    """What the caller knows of an op input: its rank, first dim and dtype (``None``: not)."""

    rank: int | None = None
    dim0: int | None = None
    batch: int | None = None
    dtype: np.dtype[Any] | None = None


def recurrent_scope(net: Net, index: int) -> str:
    """The prefix of the flat blobs of op ``index``: its ``step_workspaces`` output without
    that suffix (``recurrent_net`` names it ``<scope>/step_workspaces``), else
    ``recurrent_<index>``."""
    last = net[index].outputs[-1] if net[index].outputs else ""
    if last.endswith(_STEP_WORKSPACES) and len(last) > len(_STEP_WORKSPACES):
        return last[: -len(_STEP_WORKSPACES)]
    return f"recurrent_{index}"


@dataclass
class _Buffer:
    """The rows of a state tensor or of a gradient tensor; ``None``: zero (never written)."""

    rows: list[str | None]
    dtype: np.dtype[Any] | None = None
    like: str | None = None  # a blob shaped like one row, for zero rows


@dataclass
class _Step:
    """What step ``t`` sees: links bound by apply-link ops, and the blobs it wrote."""

    t: int
    bound: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


class _Unroller:
    """Emits flat ops for one RecurrentNetwork op (and its gradient)."""

    def __init__(
        self,
        op: Op,
        index: int,
        scope: str,
        taken: set[str],
        hints: Mapping[str, StateHint],
        outer: Container[str] | None,
    ) -> None:
        self.op = op
        self.where = f"op #{index} ({op.type})"
        self.scope = scope
        self.taken = taken
        self.hints = hints
        self.outer: Container[str] = frozenset() if outer is None else outer
        self.implicit = outer is None
        self.lengths: dict[str, int] = {}
        self.ops: list[Op] = []
        self.buffers: dict[str, _Buffer] = {}
        self.timesteps: dict[int, str] = {}
        self.device = op.device_option

    # -- names and ops ----------------------------------------------------------------------

    def fresh(self, step: int | None, blob: str, *, scoped: bool = False) -> str:
        """A new name: ``<scope>/t<step>/<blob>``, ``<scope>/<blob>`` (no step), or ``blob``
        itself when it is already scoped (a state's rows); ``_v<k>`` added when taken."""
        if scoped:
            base = blob
        else:
            base = f"{self.scope}/t{step}/{blob}" if step is not None else f"{self.scope}/{blob}"
        name, version = base, 0
        while name in self.taken:
            version += 1
            name = f"{base}_v{version}"
        self.taken.add(name)
        return name

    def emit(self, op_type: str, inputs: list[str], outputs: list[str], **args: Any) -> None:
        self.ops.append(Op(op_type, inputs, outputs, args=args, device_option=self.device))

    def refuse(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"cannot unroll {self.where}: {what}")

    def dtype_code(self, dtype: np.dtype[Any] | None) -> int:
        return _DTYPE_CODES.get(np.dtype(np.float32) if dtype is None else dtype, 1)

    # -- rows -------------------------------------------------------------------------------

    def timestep(self, t: int) -> str:
        if t not in self.timesteps:
            name = self.fresh(t, "timestep")
            self.emit("ConstantFill", [], [name], shape=[1], value=t, dtype=2)
            self.timesteps[t] = name
        return self.timesteps[t]

    def sequence(self, name: str) -> _Buffer:
        """The rows of an outer blob read through links (split once, lazily)."""
        if name in self.buffers:
            return self.buffers[name]
        hint = self.hints.get(name, StateHint())
        length = self.lengths.get(name, hint.dim0)
        if length is None:
            raise self.refuse(f"the length of {name!r}, read through a link, is unknown")
        rows = [self.fresh(r, name) for r in range(length)]
        if length:
            self.emit("Split", [name], rows, axis=0, split=[1] * length)
        buffer = _Buffer(list(rows), hint.dtype, rows[0] if rows else None)
        self.buffers[name] = buffer
        return buffer

    def buffer(self, name: str) -> _Buffer:
        buffer = self.buffers.get(name)
        if buffer is not None:
            return buffer
        if name in self.outer or name in self.lengths or self.implicit:
            return self.sequence(name)
        raise self.refuse(f"a link reads {name!r}, which is neither a state nor a blob of the net")

    def row(self, buffer_name: str, r: int) -> str:
        """Row ``r`` of a buffer as a blob (a zero fill made once for a row never written)."""
        buffer = self.buffers[buffer_name]
        name = buffer.rows[r]
        if name is None:
            like = buffer.like or next((row for row in buffer.rows if row is not None), None)
            if like is None:
                raise self.refuse(f"row {r} of {buffer_name!r} is read but no row is known")
            name = self.fresh(None, f"{buffer_name}/zero{r}", scoped=True)
            self.emit(
                "ConstantFill", [like], [name], value=0.0, dtype=self.dtype_code(buffer.dtype)
            )
            buffer.rows[r] = name
        return name

    def read_link(self, step: _Step, internal: str) -> str:
        external, start, window = step.bound[internal]
        if window == 1:
            return self.row(external, start)
        rows = [self.row(external, r) for r in range(start, start + window)]
        name = self.fresh(step.t, internal)
        self.emit("Concat", rows, [name, self.fresh(step.t, internal + "_split_info")], axis=0)
        return name

    def bind(self, step: _Step, link_op: Op) -> None:
        internal, external = link_op.outputs[0], link_op.inputs[1]
        offset, window = int(link_op.arg("offset", 0)), int(link_op.arg("window", 1))
        buffer = self.buffer(external)
        start = step.t + offset
        if start + window > len(buffer.rows):
            raise self.refuse(
                f"link {internal!r} reads rows {start}..{start + window - 1} of {external!r}, "
                f"which has {len(buffer.rows)} rows"
            )
        step.bound[internal] = (external, start, window)

    def write_link(self, step: _Step, internal: str) -> str:
        external, start, window = step.bound[internal]
        if window != 1:
            raise self.refuse(f"the step writes {internal!r}, a link window of {window} rows")
        name = self.fresh(step.t, internal)
        self.buffers[external].rows[start] = name
        return name

    # -- forward ----------------------------------------------------------------------------

    def initial_rows(self, program: ForwardProgram, seq_len: int) -> None:
        for state in program.states:
            hint = self.hints.get(state.input, StateHint())
            if hint.rank == 2:
                row = self.fresh(None, f"{state.state}/row0", scoped=True)
                self.emit("ExpandDims", [state.input], [row], dims=[0])
                rows = [row]
            elif hint.rank == 3 and hint.dim0 == 1:
                rows = [state.input]
            elif hint.rank == 3 and hint.dim0 is not None:
                rows = [
                    self.fresh(None, f"{state.state}/row{r}", scoped=True) for r in range(hint.dim0)
                ]
                self.emit("Split", [state.input], rows, axis=0, split=[1] * hint.dim0)
            elif hint.rank == 1 and hint.batch is not None:
                ones = self.fresh(None, f"{state.state}/batch_ones", scoped=True)
                code = self.dtype_code(hint.dtype)
                self.emit(
                    "ConstantFill", [], [ones], shape=[1, hint.batch, 1], value=1.0, dtype=code
                )
                row = self.fresh(None, f"{state.state}/row0", scoped=True)
                self.emit("Mul", [ones, state.input], [row])
                rows = [row]
            else:
                rows = [self.broadcast_row(state.state, state.input, hint, seq_len)]
            self.buffers[state.state] = _Buffer([*rows, *([None] * seq_len)], hint.dtype, rows[0])

    def broadcast_row(self, state: str, initial: str, hint: StateHint, seq_len: int) -> str:
        """Row 0 of ``state`` from an initial value whose shape is not known here: the value
        times ones of shape ``1 x N x 1`` made from the sequence's first row, which broadcasts
        a ``D``, an ``N x D`` and a ``1 x N x D`` value alike to the ``1 x N x D`` row, as the
        kernel fills it."""
        if seq_len == 0:
            raise self.refuse(
                f"the shape of the initial state {initial!r} is not known, and an empty "
                "sequence gives no batch size to shape it with (give input_shapes)"
            )
        first = self.sequence(self.op.inputs[0]).rows[0]
        if first is None:  # never: a sequence's rows are all named
            raise self.refuse(f"the sequence {self.op.inputs[0]!r} has no first row")
        flat = self.fresh(None, f"{state}/batch_flat", scoped=True)
        self.emit(
            "Reshape", [first], [flat, self.fresh(None, f"{flat}_old_shape")], shape=[1, 0, -1]
        )
        ones = self.fresh(None, f"{state}/batch_ones_wide", scoped=True)
        self.emit("ConstantFill", [flat], [ones], value=1.0, dtype=self.dtype_code(hint.dtype))
        column = self.fresh(None, f"{state}/batch_ones_column", scoped=True)
        self.emit("ReduceBackMean", [ones], [column])
        unit = self.fresh(None, f"{state}/batch_ones", scoped=True)
        self.emit("ExpandDims", [column], [unit], dims=[2])
        row = self.fresh(None, f"{state}/row0", scoped=True)
        self.emit("Mul", [unit, initial], [row])
        return row

    def check_flat(self, step_op: Op) -> None:
        if step_op.has_nested_nets():
            raise self.refuse(f"step op {step_op.type} holds nested nets")

    def outer_read(self, name: str) -> str:
        """``name`` read from the enclosing net (refused for a state or gradient tensor, or a
        blob the enclosing net does not hold)."""
        if name in self.buffers and name not in self.lengths:
            raise self.refuse(f"the step reads {name!r} itself (only links into it unroll)")
        if not self.implicit and name not in self.outer:
            raise self.refuse(
                f"the step reads {name!r}, which neither the step wrote before nor the "
                "enclosing net holds (a reused step workspace's stale blob?)"
            )
        return name

    def forward(self, program: ForwardProgram, seq_len: int) -> list[dict[str, str]]:
        """Emit the forward steps and aliases; returns each step's blobs (for the gradient)."""
        self.lengths[self.op.inputs[0]] = seq_len
        self.initial_rows(program, seq_len)
        recompute = set(program.recompute_blobs)
        envs = []
        for t in range(seq_len):
            step = _Step(t)
            for step_op in program.step_net:
                if step_op.type == APPLY_LINK:
                    self.bind(step, step_op)
                    continue
                self.check_flat(step_op)
                inputs = [self.forward_read(step, name, program) for name in step_op.inputs]
                outputs = [self.forward_write(step, name, program) for name in step_op.outputs]
                self.ops.append(step_op.replace(inputs=inputs, outputs=outputs, control_inputs=()))
            envs.append({k: v for k, v in step.env.items() if k not in recompute})
        for alias in program.aliases:
            self.alias(alias.src, alias.dst, alias.offset)
        return envs

    def forward_read(self, step: _Step, name: str, program: ForwardProgram) -> str:
        if name in step.bound:
            return self.read_link(step, name)
        if name == program.timestep:
            return self.timestep(step.t)
        if name in step.env:
            return step.env[name]
        return self.outer_read(name)

    def forward_write(self, step: _Step, name: str, program: ForwardProgram) -> str:
        if name in step.bound:
            return self.write_link(step, name)
        if name == program.timestep or name in self.outer or name in self.buffers:
            raise self.refuse(f"a step op writes {name!r}, a blob of the enclosing net")
        new = self.fresh(step.t, name)
        step.env[name] = new
        return new

    def alias(self, src: str, dst: str, offset: int) -> None:
        buffer = self.buffers.get(src)
        if buffer is None:
            raise self.refuse(f"alias {dst!r} reads {src!r}, which is not a recurrent state")
        start = offset if offset >= 0 else len(buffer.rows) + offset
        if not 0 <= start <= len(buffer.rows):
            raise self.refuse(f"alias {dst!r}: offset {offset} is out of range")
        rows = [self.row(src, r) for r in range(start, len(buffer.rows))]
        if len(rows) == 1:
            self.emit("Copy", rows, [dst])
        elif rows:
            self.emit("Concat", rows, [dst, self.fresh(None, f"{dst}_split_info")], axis=0)
        else:
            self.emit("Slice", [self.row(src, 0)], [dst], starts=[1], ends=[1])

    # -- backward ---------------------------------------------------------------------------

    def backward(
        self,
        grad_op: Op,
        program: BackwardProgram,
        forward: ForwardProgram,
        envs: list[dict[str, str]],
        seq_len: int,
        outer: Container[str] | None,
    ) -> None:
        """Emit the backward steps (``t = T - 1 .. 0``) and the gradient op's outputs."""
        self.where = f"the gradient of {self.where}"
        self.outer = frozenset() if outer is None else outer
        self.implicit = outer is None
        self.device = grad_op.device_option
        first = len(program.grad_inputs)
        sequence = grad_op.inputs[first]
        self.buffers[program.input_grad] = _Buffer(
            [None] * seq_len,
            self.hints.get(sequence, StateHint()).dtype,
            self.sequence(sequence).like if seq_len else None,
        )
        for rg in program.state_grads:
            state = self.buffers[rg.state]
            rows: list[str | None] = [None] * len(state.rows)
            if rg.last_external_grad is not None:
                rows[-1] = rg.last_external_grad
            self.buffers[rg.grad] = _Buffer(rows, state.dtype, state.like)
            if rg.external_grad is not None:
                self.lengths[rg.external_grad] = seq_len
        sums = {p.grad: p.cell_gradient for p in program.params}
        if len(sums) != len(program.params):
            raise self.refuse("two parameters share one gradient blob")
        totals: dict[str, tuple[str, int | None]] = {}
        shared = self.shared_names(program, envs)
        carried: dict[str, str] = {}
        for t in range(seq_len - 1, -1, -1):
            step = _Step(t)
            for step_op in program.step_net:
                if step_op.type == APPLY_LINK:
                    self.bind(step, step_op)
                elif step_op.type == ACCUMULATE_INPUT_GRADIENT:
                    self.accumulate(step, step_op)
                elif (
                    step_op.type == "Sum"
                    and step_op.outputs[:1] == step_op.inputs[:1]
                    and (step_op.outputs[0] in sums)
                ):
                    grad = step_op.outputs[0]
                    part = self.backward_read(step, sums[grad], program, envs[t], carried, shared)
                    self.add_to_total(totals, grad, part, t)
                else:
                    self.check_flat(step_op)
                    inputs = [
                        self.backward_read(step, name, program, envs[t], carried, shared)
                        for name in step_op.inputs
                    ]
                    outputs = [self.backward_write(step, name, sums) for name in step_op.outputs]
                    self.ops.append(
                        step_op.replace(inputs=inputs, outputs=outputs, control_inputs=())
                    )
            carried.update((k, v) for k, v in step.env.items() if k in shared)
        self.gradient_outputs(grad_op, program, forward, totals, seq_len)

    def shared_names(self, program: BackwardProgram, envs: list[dict[str, str]]) -> set[str]:
        """Outputs of backward step ops that step 0's workspace does not hold: Caffe2 keeps
        them in the shared workspace, so a step reads the value the previous step left."""
        local = {*envs[0], program.timestep} if envs else set()
        return {
            name
            for step_op in program.step_net
            for name in step_op.outputs
            if name not in local and name not in self.outer
        }

    def accumulate(self, step: _Step, acc_op: Op) -> None:
        """``rnn_internal_accumulate_gradient_input``: row ``t`` of the ``_all`` output's
        gradient is added to row ``t + offset`` of the state gradient."""
        og, target = acc_op.inputs[1], acc_op.outputs[0]
        buffer = self.buffers.get(target)
        if buffer is None:
            raise self.refuse(f"{acc_op.type} accumulates into {target!r}, not a state gradient")
        r = step.t + int(acc_op.arg("offset", 1))
        self.sequence(og)
        incoming = self.row(og, step.t)
        current = buffer.rows[r]
        if current is None:
            buffer.rows[r] = incoming
        else:
            total = self.fresh(step.t, f"{target}/row{r}")
            self.emit("Sum", [current, incoming], [total])
            buffer.rows[r] = total

    def add_to_total(
        self, totals: dict[str, tuple[str, int | None]], grad: str, part: str, t: int
    ) -> None:
        """``Sum(grad, cell) -> grad`` of step ``t``: the running sum of a parameter gradient
        (remembering which op made it, so the last one can write the output itself)."""
        if grad not in totals:
            totals[grad] = (part, None)
            return
        total = self.fresh(t, f"{grad}/sum")
        self.emit("Sum", [totals[grad][0], part], [total])
        totals[grad] = (total, len(self.ops) - 1)

    def backward_read(
        self,
        step: _Step,
        name: str,
        program: BackwardProgram,
        forward_env: dict[str, str],
        carried: dict[str, str],
        shared: set[str],
    ) -> str:
        if name in step.bound:
            return self.read_link(step, name)
        if name == program.timestep:
            return self.timestep(step.t)
        if name in step.env:
            return step.env[name]
        if name in shared:
            if name in carried:
                return carried[name]
            raise self.refuse(f"the backward step reads {name!r} before any step writes it")
        if name in forward_env:
            return forward_env[name]
        return self.outer_read(name)

    def backward_write(self, step: _Step, name: str, sums: Mapping[str, str]) -> str:
        if name in step.bound:
            return self.write_link(step, name)
        if name in sums or name in self.outer or name in self.buffers:
            raise self.refuse(f"a backward step op writes {name!r}, a blob of the enclosing net")
        new = self.fresh(step.t, name)
        step.env[name] = new
        return new

    def gradient_outputs(
        self,
        grad_op: Op,
        program: BackwardProgram,
        forward: ForwardProgram,
        totals: dict[str, tuple[str, int | None]],
        seq_len: int,
    ) -> None:
        first = len(program.grad_inputs)
        output = grad_op.outputs[0]
        if seq_len:
            self.join([self.row(program.input_grad, r) for r in range(seq_len)], output)
        else:
            code = self.dtype_code(self.buffers[program.input_grad].dtype)
            self.emit("ConstantFill", [grad_op.inputs[first]], [output], value=0.0, dtype=code)
        for i, param in enumerate(program.params):
            output = grad_op.outputs[1 + i]
            if param.grad not in totals:
                code = self.dtype_code(self.hints.get(param.param, StateHint()).dtype)
                self.emit("ConstantFill", [param.param], [output], value=0.0, dtype=code)
                continue
            total, position = totals[param.grad]
            if position is None:
                self.emit("Copy", [total], [output])
            else:
                self.ops[position] = self.ops[position].replace(outputs=[output])
        outputs = grad_op.outputs[1 + len(program.params) :]
        for rg, state, output in zip(program.state_grads, forward.states, outputs, strict=True):
            self.initial_state_gradient(rg.grad, state.input, output)

    def join(self, rows: list[str], output: str) -> None:
        """``output`` = the rows stacked on axis 0 (a Copy of a single row)."""
        if len(rows) == 1:
            self.emit("Copy", rows, [output])
        else:
            info = self.fresh(None, f"{output}_split_info")
            self.emit("Concat", rows, [output, info], axis=0)

    def initial_state_gradient(self, grad: str, init: str, output: str) -> None:
        """The first rows of a state gradient, shaped like the initial state (summed over the
        batch for a 1-D initial state)."""
        hint = self.hints.get(init, StateHint())
        if hint.rank == 1:
            self.emit("ReduceSum", [self.row(grad, 0)], [output], axes=[0, 1], keepdims=0)
        elif hint.rank == 2:
            self.emit("Squeeze", [self.row(grad, 0)], [output], dims=[0])
        elif hint.rank == 3:
            self.join([self.row(grad, r) for r in range(hint.dim0 or 1)], output)
        else:
            raise self.refuse(
                f"the gradient of the initial state {init!r} takes its shape, which is not "
                "known (give its type in input_shapes)"
            )


def unroll_recurrent_network(
    net: Net,
    index: int,
    seq_len: int,
    *,
    hints: Mapping[str, StateHint],
    taken: set[str],
    outer: Container[str] | None,
    gradient_index: int | None = None,
    gradient_outer: Container[str] | None = None,
) -> RecurrentUnroll:
    """The flat ops replacing RecurrentNetwork op ``index`` of ``net`` (and its gradient op).

    Args:
        net: the net.
        index: the RecurrentNetwork op.
        seq_len: the sequence length ``T`` (the first dim of the op's first input).
        hints: rank, first dim, batch size and dtype of the ops' inputs, as far as known.
        taken: every blob name in use (the new names are added to it).
        outer: the blobs of the enclosing net visible to the op (the net's inputs, what
            earlier ops wrote, the init_net's outputs): a step may read them, never write
            them. ``None``: the net declares its inputs implicitly (reads are not checked).
        gradient_index: the op's ``RecurrentNetworkGradient`` (the op reading its step
            workspaces), unrolled too.
        gradient_outer: as ``outer``, for the gradient op.

    Raises:
        UnsupportedOpError: something the unrolling does not express (see the module doc).
        InvalidNetError: the op's arguments are malformed.
    """
    op = net[index]
    if seq_len < 0:
        raise UnsupportedOpError(f"op #{index} ({op.type}): negative sequence length {seq_len}")
    program = forward_program(op)
    unroller = _Unroller(op, index, recurrent_scope(net, index), taken, hints, outer)
    envs = unroller.forward(program, seq_len)
    forward_ops = tuple(unroller.ops)
    gradient_ops: tuple[Op, ...] = ()
    if gradient_index is not None:
        grad_op = net[gradient_index]
        backward = backward_program(grad_op)
        first = len(backward.grad_inputs)
        if tuple(grad_op.inputs[first : first + len(op.inputs)]) != op.inputs:
            raise UnsupportedOpError(
                f"op #{gradient_index} ({grad_op.type}) does not read the inputs of op #{index}"
            )
        if not program.has_backward:
            raise UnsupportedOpError(
                f"op #{index} ({op.type}) has no backward step net, but op #{gradient_index} "
                "differentiates it"
            )
        unroller.ops = []
        unroller.backward(grad_op, backward, program, envs, seq_len, gradient_outer)
        gradient_ops = tuple(unroller.ops)
    return RecurrentUnroll(index, forward_ops, gradient_index, gradient_ops, seq_len)


@dataclass(frozen=True)
class UnrollPlan:
    """What ``plan_recurrent_unrolls`` found: the ops to unroll, and the RecurrentNetwork ops
    left as they are with the reason (``{op index: why}``)."""

    unrolls: tuple[RecurrentUnroll, ...]
    kept: dict[int, str]


class _VisibleBefore(Container[str]):
    """The blobs op ``index`` sees in the enclosing net: its inputs, the net's inputs, the
    init_net's outputs, what earlier ops wrote (one dict for every op, not a set per op)."""

    def __init__(
        self, index: int, inputs: Sequence[str], known: Set[str], first_writes: Mapping[str, int]
    ) -> None:
        self.index = index
        self.inputs = set(inputs)
        self.known = known
        self.first_writes = first_writes

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        first = self.first_writes.get(name)
        return (
            name in self.inputs or name in self.known or (first is not None and first < self.index)
        )


def _hint(t: TensorType, batch: int | None) -> StateHint:
    shape = t.shape
    dim0 = shape[0] if shape and isinstance(shape[0], int) else None
    return StateHint(None if shape is None else len(shape), dim0, batch, t.dtype)


def _all_names(model: Model) -> set[str]:
    names: set[str] = set()
    for net in model.nets():
        names.update(net.external_inputs, net.external_outputs)
        for op in net:
            names.update(op.inputs, op.outputs)
        names.update(names_in_nested_nets(net))
    return names


def plan_recurrent_unrolls(
    model: Model, *, seq_len: int | None = None, inputs: Mapping[str, TypeLike] | None = None
) -> UnrollPlan:
    """Unroll every RecurrentNetwork op of the predict_net whose sequence length is known, with
    its gradient op when the net has one.

    Args:
        model: the model (the init_net's fills give the params' shapes).
        seq_len: the sequence length of every op; ``None``: the first dim of each op's first
            input, from the shape analysis.
        inputs: types (or float32 shapes) of the predict_net's inputs, for the shape analysis.

    Returns:
        The unrolls (indices refer to the predict_net as it is) and the ops kept: an unknown
        sequence length, or step workspaces or state tensors that other ops read.

    Raises:
        UnsupportedOpError / InvalidNetError: as ``unroll_recurrent_network``.
    """
    net = model.predict_net
    indices = [i for i, op in enumerate(net) if op.type == "RecurrentNetwork"]
    if not indices:
        return UnrollPlan((), {})
    given = dict(inputs or {})
    info = _shape_info(model, given)
    stand_ins = {} if seq_len is not None else _stand_ins(model, indices, given)
    blanked = {**given, **dict.fromkeys(stand_ins, TensorType())}
    unfilled = _shape_info(model, blanked) if stand_ins else info
    scratches = {net[i].outputs[-1]: i for i in indices if net[i].outputs}
    gradients: dict[int, int] = {}
    init_names = set() if model.init_net is None else set(model.init_net.written_names())
    implicit = not net.external_inputs
    first_writes: dict[str, int] = {}
    counts: dict[str, int] = {}
    types: dict[int, list[TensorType]] = {}
    counts_before: dict[int, int] = {}  # versions of an op's first input written before it
    readers: dict[str, list[int]] = {}
    wanted = set(indices)
    for index, op in enumerate(net):
        for name in op.inputs:
            readers.setdefault(name, []).append(index)
        forward = scratches.get(op.inputs[-1]) if op.inputs else None
        gradient_of = forward if op.type == "RecurrentNetworkGradient" else None
        if gradient_of is not None and gradient_of < index and gradient_of not in gradients:
            gradients[gradient_of] = index
            wanted.add(index)
        if index in wanted:
            types[index] = [info.types.get((n, counts.get(n, 0)), TensorType()) for n in op.inputs]
            counts_before[index] = counts.get(op.inputs[0], 0) if op.inputs else 0
        for name in op.outputs:
            counts[name] = counts.get(name, 0) + 1
            first_writes.setdefault(name, index)
    known = frozenset(net.external_inputs) | init_names

    def outer(index: int | None) -> _VisibleBefore | None:
        if implicit or index is None:
            return None
        return _VisibleBefore(index, net[index].inputs, known, first_writes)

    taken = _all_names(model)
    unrolls = []
    kept: dict[int, str] = {}
    for index in indices:
        op = net[index]
        gradient = gradients.get(index)
        sequence = types[index][0].shape
        length = seq_len
        if length is None and sequence and isinstance(sequence[0], int):
            length = sequence[0]
        if length is None:
            kept[index] = f"the sequence length of {op.inputs[0]!r} is unknown"
            continue
        if seq_len is None and stand_ins and _length(unfilled, op, counts_before[index]) is None:
            fills = ", ".join(f"{name!r} ({fill})" for name, fill in stand_ins.items())
            kept[index] = (
                f"the sequence length of {op.inputs[0]!r} ({length}) comes from the init_net's "
                f"placeholder of {fills}, which the data fed replaces: give the input's shape "
                "(input_shapes) or seq_len"
            )
            continue
        why = _kept_because(net, index, gradient, readers)
        if why is not None:
            kept[index] = why
            continue
        batch = sequence[1] if sequence and len(sequence) > 1 else None
        batch = batch if isinstance(batch, int) else None
        hints: dict[str, StateHint] = {}
        for position in (*([gradient] if gradient is not None else []), index):
            for name, t in zip(net[position].inputs, types[position], strict=True):
                hints[name] = _hint(t, batch)
        unrolls.append(
            unroll_recurrent_network(
                net,
                index,
                length,
                hints=hints,
                taken=taken,
                outer=outer(index),
                gradient_index=gradient,
                gradient_outer=outer(gradient),
            )
        )
    return UnrollPlan(tuple(unrolls), kept)


def _shape_info(model: Model, inputs: Mapping[str, TypeLike]) -> ShapeInfo:
    """The shape analysis of ``model`` with ``inputs``; empty when it refuses the net (shapes
    are a help: without them only ``seq_len`` gives lengths)."""
    try:
        return infer_model_shapes(model, inputs)
    except InvalidNetError:
        return ShapeInfo()


def _stand_ins(
    model: Model, indices: Sequence[int], given: Mapping[str, TypeLike]
) -> dict[str, str]:
    """The predict_net's data inputs that the init_net fills with a placeholder (and
    ``given`` does not type): a feed replaces them, so a length read from one is the
    placeholder's, not the data's. ``{name: the fill, described}``: the inputs
    ``placeholder_inputs`` finds, and a RecurrentNetwork's sequence read straight from a
    declared input the init_net fills."""
    found = {name: fill for name, (_, fill) in placeholder_inputs(model).items()}
    init = model.init_net
    if init is not None:
        declared = frozenset(model.predict_net.external_inputs)
        sequences = {model.predict_net[i].inputs[0] for i in indices if model.predict_net[i].inputs}
        for op in init:
            for name in op.outputs:
                if name in sequences and name in declared:
                    found.setdefault(name, fill_shape(op)[1])
    return {name: fill for name, fill in found.items() if name not in given}


def _length(info: ShapeInfo, op: Op, version: int) -> int | None:
    """The first dim of op's first input (at ``version``) in ``info``, when known."""
    found = info.types.get((op.inputs[0], version)) if op.inputs else None
    shape = None if found is None else found.shape
    return shape[0] if shape and isinstance(shape[0], int) else None


def _kept_because(
    net: Net, index: int, gradient: int | None, readers: Mapping[str, list[int]]
) -> str | None:
    """Why op ``index`` must stay: another op reads its step workspaces or its states."""
    op = net[index]
    scratch = op.outputs[-1]
    others = [j for j in readers.get(scratch, []) if j != gradient]
    if others:
        return f"op #{others[0]} ({net[others[0]].type}) reads its step workspaces {scratch!r}"
    for state in forward_program(op).states:
        for name in (state.state, state.state + "_grad"):
            if readers.get(name):
                j = readers[name][0]
                return f"op #{j} ({net[j].type}) reads its state tensor {name!r}"
    return None

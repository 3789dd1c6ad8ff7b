"""Recurrent-net kernels: ``RecurrentNetwork``, ``RecurrentNetworkGradient``, the internal
``rnn_internal_apply_link`` / ``rnn_internal_accumulate_gradient_input`` ops their step nets
run, and ``RecurrentNetworkBlobFetcher``.

``RecurrentNetwork`` runs its step net once per timestep (``graphtools.analysis.recurrent``
builds the step net Caffe2 runs): the states ``(T + L) x N x D`` are created in the op's
workspace from the initial inputs, each step runs in its own workspace (one reused workspace
when the op has no backward step net), links are views at ``t + offset`` with ``window`` rows,
and the aliases expose rows of the states as outputs. ``RecurrentNetworkGradient`` runs the
backward step net from ``T - 1`` down to ``0`` in the forward's step workspaces, accumulating
parameter gradients over the steps. A sequence of length 0 runs no step: ``_all`` outputs are
``0 x N x D`` and ``_last`` the initial state. Workspaces: ``graphtools.executor.step_workspaces``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.analysis.recurrent import (
    Alias,
    RecurrentState,
    backward_program,
    forward_program,
)
from graphtools.errors import GraphToolsError, InvalidNetError
from graphtools.executor.interpreter import run_net
from graphtools.executor.registry import OpContext, kernel
from graphtools.executor.step_workspaces import (
    ScratchWorkspaces,
    SharedBlobsWorkspace,
    StepWorkspace,
    scratch_of,
)
from graphtools.executor.workspace import Workspace
from graphtools.ir import Net, Op


def _timestep(value: Any) -> int:
    return int(np.asarray(value).reshape(-1)[0])


def _int_arg(op: Op, name: str) -> int:
    value = op.arg(name)
    if value is None or int(value) < 0:
        raise InvalidNetError(f"{op.type} needs a non-negative '{name}' argument ({name} not set)")
    return int(value)


@kernel("rnn_internal_apply_link", context=True)
def _apply_link(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """``(timestep, external) -> (internal, external)``: internal = rows ``t + offset`` to
    ``t + offset + window - 1`` of external, as a view (written through in a step workspace)."""
    offset, window = _int_arg(op, "offset"), _int_arg(op, "window")
    external = inputs[1]
    if not isinstance(external, np.ndarray) or external.size == 0 or external.ndim == 0:
        raise ValueError(f"the linked blob {op.inputs[1]!r} is empty")
    start = _timestep(inputs[0]) + offset
    if start + window > external.shape[0]:
        raise ValueError(
            f"rows {start}..{start + window - 1} of {op.inputs[1]!r} "
            f"{list(external.shape)} are out of range"
        )
    view = external[start : start + window]
    if isinstance(ctx.workspace, StepWorkspace):
        ctx.workspace.bind_link(op.outputs[0], view)
    return [view, external]


@kernel("rnn_internal_accumulate_gradient_input")
def _accumulate_gradient_input(op: Op, inputs: list[Any]) -> list[Any]:
    """``(timestep, og, g) -> g``: adds row ``t`` of ``og`` into row ``t + offset`` of ``g``, in
    place (the op is in-place by contract: its third input is its output)."""
    offset = _int_arg(op, "offset")
    t = _timestep(inputs[0])
    og, g = np.asarray(inputs[1]), inputs[2]
    if not isinstance(g, np.ndarray) or g.ndim == 0 or g.shape[0] == 0:
        raise ValueError(f"the gradient blob {op.inputs[2]!r} is empty")
    row = g.size // g.shape[0]
    if (t + offset + 1) * row > g.size:
        raise ValueError("Accumulation destination address over bounds")
    if (t + 1) * row > og.size:
        raise ValueError("Accumulation source address out of bounds")
    flat_g = g.reshape(-1)
    target = flat_g[(t + offset) * row : (t + offset + 1) * row]
    target += og.reshape(-1)[t * row : (t + 1) * row]
    return [g]


# -- forward ------------------------------------------------------------------------------------


def state_tensor(state: RecurrentState, init: Any, seq_len: int, batch: int) -> np.ndarray:
    """The ``(T + L) x N x D`` state, its first ``L`` rows from the initial value (1-D: one
    row repeated over the batch; 2-D: ``N x D``; 3-D: ``L x N x D``)."""
    init = np.asarray(init)
    if not 1 <= init.ndim <= 3:
        raise ValueError(
            f"the initial value {state.input!r} of state {state.state!r} has {init.ndim} dims; "
            "it needs 1 to 3"
        )
    dtype = init.dtype if np.issubdtype(init.dtype, np.floating) else np.dtype(np.float32)
    length = init.shape[0] if init.ndim == 3 else 1
    tensor = np.zeros((seq_len + length, batch, init.shape[-1]), dtype=dtype)
    if init.ndim >= 2:
        if init.shape[-2] != batch:
            raise ValueError(
                f"the initial value {state.input!r} {list(init.shape)} of state {state.state!r} "
                f"does not have the batch size {batch}"
            )
        tensor[:length] = init.reshape(length, batch, init.shape[-1])
    else:
        tensor[0] = init
    return tensor


def _alias_value(alias: Alias, src: Any) -> np.ndarray:
    """Rows ``offset..`` of ``src`` (``dim0 + offset..`` when the offset is negative), a view."""
    if not isinstance(src, np.ndarray) or src.ndim == 0:
        raise ValueError(f"alias source {alias.src!r} is not a tensor")
    start = alias.offset if alias.offset >= 0 else src.shape[0] + alias.offset
    if not 0 <= start <= src.shape[0]:
        raise ValueError(
            f"alias {alias.dst!r}: offset {alias.offset} is out of range for {alias.src!r} "
            f"{list(src.shape)} (Invalid number of timesteps)"
        )
    return src[start:]


def _run_steps(net: Net, workspaces: list[StepWorkspace], steps: range, total: int) -> None:
    for t in steps:
        try:
            run_net(net, workspaces[t % len(workspaces)])
        except GraphToolsError as exc:
            exc.add_note(f"in step {t} of {total} of the step net {net.name or ''}".rstrip())
            raise


@kernel("RecurrentNetwork", context=True)
def _recurrent_network(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    program = forward_program(op)
    sequence = np.asarray(inputs[0])
    if sequence.ndim < 2:
        raise ValueError(
            f"the sequence input {op.inputs[0]!r} must be T x N x ..., got {list(sequence.shape)}"
        )
    seq_len, batch = sequence.shape[0], sequence.shape[1]
    ws = ctx.workspace
    for state in program.states:
        ws.feed(state.state, state_tensor(state, inputs[state.input_index], seq_len, batch))
    shared = SharedBlobsWorkspace(ws)
    for name in program.recompute_blobs:
        shared.declare(name)
    count = seq_len if program.has_backward else min(seq_len, 1)
    steps = [StepWorkspace(shared) for _ in range(count)]
    scratch = ScratchWorkspaces(shared, steps, program.has_backward)
    for t in range(seq_len):
        steps[t % len(steps)].feed(program.timestep, np.array([t], dtype=np.int32))
        _run_steps(program.step_net, steps, range(t, t + 1), seq_len)
    for alias in program.aliases:
        ws.feed(alias.dst, _alias_value(alias, ws.fetch(alias.src)))
    missing = [name for name in op.outputs[:-1] if not ws.has(name)]
    if missing:
        raise InvalidNetError(f"RecurrentNetwork outputs {missing} are not alias destinations")
    return [*(ws.fetch(name) for name in op.outputs[:-1]), np.asarray(scratch, dtype=object)]


# -- backward -----------------------------------------------------------------------------------


def _initial_state_gradient(init: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The gradient of an initial state: the first rows of the state gradient (2-D and 3-D
    initial values), or row 0 summed over the batch (1-D)."""
    if init.ndim >= 2:
        return grad.reshape(-1)[: init.size].reshape(init.shape)
    return grad[0].sum(axis=0)


def _declare_shared_outputs(
    net: Net, step0: Workspace | None, shared: SharedBlobsWorkspace
) -> None:
    """Caffe2's ``CreateSharedBlobs``: outputs of the backward step ops that step 0's workspace
    does not see are shared by all steps."""
    if step0 is None:
        return
    for step_op in net:
        for name in step_op.outputs:
            if not step0.has(name):
                shared.declare(name)


@kernel("RecurrentNetworkGradient", context=True)
def _recurrent_network_gradient(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    program = backward_program(op)
    first = len(program.grad_inputs)
    sequence = np.asarray(inputs[first])
    seq_len = sequence.shape[0]
    scratch = scratch_of(inputs[-1], op.inputs[-1])
    if not scratch.has_backward or len(scratch.steps) < seq_len:
        raise InvalidNetError(
            f"the forward RecurrentNetwork kept {len(scratch.steps)} step workspaces for "
            f"{seq_len} steps: it ran forward-only (no backward_step_net) and cannot be "
            "differentiated"
        )
    if len(program.state_grads) != len(program.recurrent_input_ids):
        raise InvalidNetError(
            f"{len(program.state_grads)} recurrent_states but "
            f"{len(program.recurrent_input_ids)} initial_recurrent_state_ids"
        )
    expected = 1 + len(program.params) + len(program.recurrent_input_ids)
    if len(op.outputs) != expected:
        raise InvalidNetError(
            f"RecurrentNetworkGradient names {len(op.outputs)} outputs; its arguments call for "
            f"{expected} (the input, {len(program.params)} params, "
            f"{len(program.recurrent_input_ids)} initial states)"
        )
    ws = ctx.workspace
    for param in program.params:
        ws.feed(param.grad, np.zeros_like(np.asarray(ws.fetch(param.param))))
    for rg in program.state_grads:
        state = np.asarray(ws.fetch(rg.state))
        if state.ndim != 3:
            raise ValueError(f"state {rg.state!r} {list(state.shape)} is not 3-D")
        grad = np.zeros_like(state)
        if rg.last_external_grad is not None:
            last = np.asarray(ws.fetch(rg.last_external_grad))
            if last.size != grad[-1].size:
                raise ValueError(
                    f"the gradient {rg.last_external_grad!r} {list(last.shape)} does not fit "
                    f"the last row of {rg.state!r} {list(state.shape)}"
                )
            grad[-1] += last.reshape(grad[-1].shape)
        ws.feed(rg.grad, grad)
    ws.feed(program.input_grad, np.zeros_like(sequence))
    _declare_shared_outputs(
        program.step_net, scratch.steps[0] if scratch.steps else None, scratch.shared
    )
    _run_steps(program.step_net, scratch.steps, range(seq_len - 1, -1, -1), seq_len)
    results = [ws.fetch(name) for name in op.outputs[: 1 + len(program.params)]]
    for rg, index in zip(program.state_grads, program.recurrent_input_ids, strict=True):
        init = np.asarray(inputs[index + first])
        results.append(_initial_state_gradient(init, np.asarray(ws.fetch(rg.grad))))
    return results


# -- step blobs ---------------------------------------------------------------------------------


@kernel("RecurrentNetworkBlobFetcher", context=True)
def _blob_fetcher(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """Copies every local blob ``b`` of step workspace ``i`` into the op's workspace as
    ``<prefix>_<b><i>`` and outputs those names (a 1-D string tensor)."""
    scratch = scratch_of(inputs[0], op.inputs[0])
    prefix = op.arg("prefix", b"rnn")
    prefix = prefix.decode() if isinstance(prefix, bytes) else str(prefix)
    names = []
    for i, step in enumerate(scratch.steps):
        for blob in step.local_blobs():
            name = f"{prefix}_{blob}{i}"
            ctx.workspace.feed(name, np.array(step.fetch(blob), copy=True))
            names.append(name)
    return [np.array(names, dtype=object)]

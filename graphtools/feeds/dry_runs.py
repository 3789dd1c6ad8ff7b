"""Throwaway runs of nested nets, so that what they read from outside gets made before the op
holding them runs.

An ``If`` branch or a loop body is walked in a child workspace, making its parameters; a
failure stops the dry run (the real run reports it). A ``RecurrentNetwork``'s step net gets one
dry step set up as the kernel sets it up (states from their initial values, one time slice of
the sequence), so its references fit the linked inputs; when a made-up FC outside the loop gives
a linked input a feature count the step op does not take, the dry step returns the ``Retry``
with the count it needs. Made-up data too big to hold is never a failure to leave to the real
run: it is raised.
"""

from __future__ import annotations

import numpy as np

from graphtools.analysis.recurrent import APPLY_LINK, ForwardProgram, forward_program
from graphtools.errors import GraphToolsError, MadeUpDataTooLargeError
from graphtools.executor import Workspace, run_op
from graphtools.executor.kernels_recurrent import state_tensor
from graphtools.feeds.counts import FEATURES_LAST, demanded, feeding_ops, last_dim, producer_layer
from graphtools.feeds.make import make_missing
from graphtools.feeds.state import Retry, WalkState
from graphtools.feeds.values import as_array
from graphtools.ir import Net, Op

__all__ = ["dry_run", "prepare_recurrent"]


def dry_run(state: WalkState, net: Net) -> None:
    """Walk a nested net in a throwaway child workspace so its parameters get made; a
    failure stops the dry run (the real run reports it)."""
    child = Workspace(state.ws)
    try:
        for index, op in enumerate(net):
            make_missing(state, index, op, net, child)
            run_op(op, child, index=index, net=net)
    except MadeUpDataTooLargeError:
        raise
    except GraphToolsError:
        return


def prepare_recurrent(state: WalkState, index: int, op: Op, net: Net) -> Retry | None:
    """Make what the ``RecurrentNetwork`` op #``index`` reads: its sequence and initial
    states first, then what its step net reads from outside (its references: parameters,
    sequence lengths) inside one dry step, where the linked inputs have the shapes the
    real steps give them; whatever the dry step did not make, as for any op. A ``Retry``
    when the dry step needs another output count of a made-up layer."""
    try:
        program = forward_program(op)
    except GraphToolsError:
        program = None  # the real run reports it
    if program is not None:
        initial = {link.input_index for link in program.states}
        references = set(range(1, len(op.inputs))) - initial
        make_missing(state, index, op, net, state.ws, skip=references)
        state.programs[id(program.step_net)] = program
        retry = _dry_step(state, index, net, program)
        if retry is not None:
            return retry
    make_missing(state, index, op, net, state.ws)
    return None


def _dry_step(state: WalkState, outer: int, net: Net, program: ForwardProgram) -> Retry | None:
    """Run step 0 of op #``outer``'s step net in a throwaway workspace set up as the
    kernel sets it up (states from the initial values, the timestep), making the
    parameters its ops read. A linked input whose made-up producer layer in ``net`` gives
    it a feature count the step op does not take returns the ``Retry`` with the count it
    needs; any other failure stops the dry run (the real run reports it)."""
    child = Workspace(state.ws)
    step = program.step_net
    try:
        sequence = np.shape(as_array(state.ws.fetch(net[outer].inputs[0])))
        if len(sequence) < 2:
            return None
        for link in program.states:
            init = state.ws.fetch(link.input)
            child.feed(link.state, state_tensor(link, init, max(sequence[0], 1), sequence[1]))
        child.feed(program.timestep, np.zeros(1, np.int32))
        for index, step_op in enumerate(step):
            make_missing(state, index, step_op, step, child)
            retry = _check_linked(state, outer, net, step, index, child)
            if retry is not None:
                return retry
            run_op(step_op, child, index=index, net=step)
    except MadeUpDataTooLargeError:
        raise
    except (GraphToolsError, ValueError, IndexError):
        return None
    return None


def _check_linked(
    state: WalkState, outer: int, net: Net, step: Net, index: int, ws: Workspace
) -> Retry | None:
    """A ``Retry`` when step op #``index`` needs another last dim of an input that a made-up
    layer of ``net`` gives it through a link of op #``outer``."""
    step_op = step[index]
    linked = {
        position: _linked_layer(state, outer, net, step, index, position)
        for position in range(len(step_op.inputs))
    }
    free = {position for position, layer in linked.items() if layer is not None}
    dims = [last_dim(ws, name) for name in step_op.inputs]
    for position, count in demanded(step_op, dims, free).items():
        layer = linked[position]
        if layer is not None and count not in (dims[position], state.overrides.get(layer)):
            return Retry(layer, count)
    return None


def _linked_layer(
    state: WalkState, outer: int, net: Net, step: Net, index: int, position: int
) -> int | None:
    """The made-up FC layer of ``net`` whose output reaches input ``position`` of step op
    #``index`` through a link of op #``outer`` (features on the last axis), or ``None``."""
    for feeder in feeding_ops(step, step.ssa().ssa[index][0][position]):
        if step[feeder].type != APPLY_LINK:
            continue
        external = step[feeder].inputs[1]
        for outer_position, name in enumerate(net[outer].inputs):
            if name != external:
                continue
            layer = producer_layer(net, outer, outer_position)
            if layer is None or net[layer].type not in FEATURES_LAST:
                continue
            if len(net[layer].inputs) > 1 and net[layer].inputs[1] in state.result.params:
                return layer
    return None

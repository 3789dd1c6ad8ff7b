"""Shape rules of the recurrent-net kernels (``graphtools.executor.kernels_recurrent``).

A ``RecurrentNetwork`` output aliasing rows ``k..`` of a state is ``(T + L - k) x N x D`` (for a
negative ``k``: ``-k x N x D``), where ``T x N`` leads the sequence input and the state's initial
value is ``N x D``, ``D`` (``L = 1``) or ``L x N x D``; its dtype is the initial value's. The
step workspaces are one object. Each output of ``RecurrentNetworkGradient`` is shaped like the
forward input it is the gradient of.
"""

from __future__ import annotations

import numpy as np

from graphtools.analysis.shape_types import UNKNOWN, Dim, TensorType, shape_rule
from graphtools.ir import Op

_OBJECT = np.dtype(object)
_F32 = np.dtype(np.float32)


def _rows(seq_len: Dim, length: int | None, offset: int) -> Dim:
    """How many rows of a ``T + L``-row state an alias at ``offset`` exposes."""
    if offset < 0:
        return -offset
    if length is None:
        return None
    extra = length - offset
    if extra == 0:
        return seq_len
    return seq_len + extra if isinstance(seq_len, int) else None


def _state_dtype(init: TensorType) -> np.dtype | None:
    if init.dtype is None:
        return None
    return init.dtype if np.issubdtype(init.dtype, np.floating) else _F32


@shape_rule("RecurrentNetwork")
def _recurrent_network(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    sequence = inputs[0].shape
    seq_len: Dim = sequence[0] if sequence else None
    batch: Dim = sequence[1] if sequence is not None and len(sequence) > 1 else None
    if sequence is not None and len(sequence) < 2:
        raise ValueError(f"the sequence input must be T x N x ..., got {inputs[0]}")
    from graphtools.analysis.recurrent import recurrent_aliases, recurrent_states

    states = {s.state: inputs[s.input_index] for s in recurrent_states(op)}
    aliases = {a.dst: a for a in recurrent_aliases(op)}
    outputs = []
    for name in op.outputs[:-1]:
        alias = aliases.get(name)
        init = states.get(alias.src) if alias is not None else None
        if alias is None or init is None or init.shape is None:
            outputs.append(UNKNOWN)
            continue
        if not 1 <= len(init.shape) <= 3:
            raise ValueError(f"initial state of {alias.src!r} has rank {len(init.shape)}")
        length = init.shape[0] if len(init.shape) == 3 else 1
        rows = _rows(seq_len, length if isinstance(length, int) else None, alias.offset)
        outputs.append(TensorType(_state_dtype(init), (rows, batch, init.shape[-1])))
    return [*outputs, TensorType(_OBJECT, ())]


def _ints(op: Op, name: str) -> list[int]:
    value = op.arg(name)
    return [] if value is None else [int(v) for v in value]


@shape_rule("RecurrentNetworkGradient")
def _recurrent_network_gradient(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    first = len(_ints(op, "outputs_with_grads"))
    outputs = [inputs[first]]
    outputs += [inputs[first + i] for i in _ints(op, "param")]
    for i in _ints(op, "initial_recurrent_state_ids"):
        init = inputs[first + i]
        outputs.append(TensorType(_state_dtype(init), init.shape))
    return outputs


@shape_rule("rnn_internal_apply_link")
def _apply_link(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    external = inputs[1]
    window = op.arg("window")
    if external.shape is None or window is None:
        return [TensorType(external.dtype, None), external]
    if not external.shape:
        raise ValueError("the linked blob is a scalar")
    return [TensorType(external.dtype, (int(window), *external.shape[1:])), external]


@shape_rule("rnn_internal_accumulate_gradient_input")
def _accumulate_gradient_input(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return [inputs[2]]

"""One walk of the model, the way a Caffe2 predictor runs it: the init_net op by op (ops that
cannot run here are skipped and said so), the data inputs fed, then the predict_net op by op,
each op's missing inputs made just before it runs.

``run_predict`` returns a ``Retry`` when what was made does not fit an op further on and another
choice might (a Reshape's fixed target, a guessed image size the net refuses); ``synthesize``
then starts a new walk. An op that still fails after init_net parameters that do not fit it
were replaced by made-up ones raises, as the executor does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphtools.analysis.input_shapes import (
    DENSE_READERS,
    IMAGE_READERS,
    IMAGE_SIZES,
    first_readers,
    guess_input_shapes,
    placeholder_hints,
    placeholder_inputs,
)
from graphtools.analysis.op_args import order
from graphtools.errors import GraphToolsError
from graphtools.executor import run_op
from graphtools.feeds.counts import reshape_count
from graphtools.feeds.dry_runs import dry_run, prepare_recurrent
from graphtools.feeds.make import make_missing, replace_params
from graphtools.feeds.report import SkippedOp
from graphtools.feeds.roles import PLACEHOLDER_ROLES, ROLES
from graphtools.feeds.state import Retry, WalkState
from graphtools.feeds.values import as_array, check_size, quantized
from graphtools.ir import Op

__all__ = ["EXTERNAL_IO", "collect_outputs", "feed_data", "run_init", "run_predict"]

#: Op types that read their first input quantized (an ``Int8Tensor``).
_QUANTIZED_READERS = frozenset(
    {"Int8Conv", "Int8ConvRelu", "Int8ConvTranspose", "Int8FC", "Int8SumRelu", "Int8Sum"}
)
#: Op types that read files or databases, which may not be beside the model.
EXTERNAL_IO = frozenset({"Load"})


def run_init(state: WalkState) -> None:
    """Run the init_net op by op; an op that cannot run here is skipped and recorded (unless
    random parameters are refused), and what the init_net left is kept."""
    init = state.model.init_net
    if init is None:
        return
    for index, op in enumerate(init):
        try:
            run_op(op, state.ws, index=index, net=init)
        except GraphToolsError as exc:
            if state.random_params is False:
                exc.add_note("the init_net cannot run here; random parameters were refused")
                raise
            reason = str(exc).splitlines()[0]
            state.result.skipped_ops.append(
                SkippedOp("init_net", index, op.type, tuple(op.outputs), reason)
            )
    for op in init:
        for name in op.outputs:
            if state.ws.has(name):
                state.result.init_values[name] = state.ws.fetch(name)


def _fed_up_front(state: WalkState, name: str, op: Op, position: int) -> bool:
    """Whether a data input is fed before the walk: given a shape, a placeholder, or read
    as an image or FC data (whose guessed shape the analysis checks against the whole net)."""
    if name in state.shapes or name in state.placeholders:
        return True
    return position == 0 and (op.type in IMAGE_READERS or op.type in DENSE_READERS)


def _weights_float_type(state: WalkState, op: Op, name: str) -> Any:
    """The float type of the parameters ``op`` reads beside ``name`` (the init_net filled
    them) when they all have one: a float16 Conv takes float16 data (a half-precision model
    imported from ONNX); float32 when they mix types (glow's FbFCPacked: float16 weights, a
    float32 bias, float32 data) or have none."""
    params = [as_array(state.ws.fetch(p)) for p in op.inputs if p != name and state.ws.has(p)]
    found = {param.dtype for param in params if param.dtype.kind == "f"}
    return found.pop() if len(found) == 1 else np.float32


def feed_data(state: WalkState) -> None:
    """Feed the inputs whose shape is given or must be checked against the whole net
    (images, FC data); the others are made when an op first reads them."""
    net = state.model.predict_net
    readers = first_readers(net)
    placeholders = placeholder_inputs(state.model)
    state.placeholders = set(placeholders)
    declared = set(net.external_inputs)
    data: list[str] = []
    for name, (_, op, position) in readers.items():
        role = ROLES.get((op.type, position))
        if state.ws.has(name) and (op.type, position) in PLACEHOLDER_ROLES and name in declared:
            state.remake.add(name)  # an init_net placeholder of a per-image input
            state.result.placeholders[name] = "an init_net fill"
        if state.ws.has(name) and name not in placeholders:
            continue
        if name in state.values or (role is None and _fed_up_front(state, name, op, position)):
            data.append(name)
    data += [n for n in (*state.shapes, *state.values) if n not in data and n not in readers]
    hints = placeholder_hints(placeholders)
    guessing = [n for n in data if n not in state.shapes and n not in state.values]
    guesses = guess_input_shapes(state.model, guessing, state.shapes, hints, state.image_skip)
    state.image_guesses = {
        name: guess.size_index for name, guess in guesses.items() if guess.size_index is not None
    }
    rng = np.random.default_rng(state.seed)
    for name in data:
        if name in state.values:
            value = state.values[name]
            origin, reason = "given", "fed values"
        else:
            if name in state.shapes:
                shape, origin, reason = state.shapes[name], "given", "--shapes"
            else:
                guess = guesses[name]
                shape, origin, reason = guess.shape, "guessed", guess.reason
            check_size(name, shape, f"an input, {origin}: {reason}")
            reader = readers.get(name)
            dtype = np.float32 if reader is None else _weights_float_type(state, reader[1], name)
            value = rng.standard_normal(shape).astype(dtype)
            if reader is not None and reader[1].type in _QUANTIZED_READERS:
                value = quantized(value)
        if name in placeholders:
            state.result.placeholders[name] = placeholders[name][1]
        state.remember(name, value, origin, reason)
        state.ws.feed(name, value)
        reader = readers.get(name)
        array = as_array(value)
        if reader is not None and reader[1].type in IMAGE_READERS and array.ndim == 4:
            nhwc = order(reader[1]) == "NHWC"
            state.image = state.image or (
                (array.shape[1], array.shape[2]) if nhwc else (array.shape[2], array.shape[3])
            )


def run_predict(state: WalkState) -> Retry | None:
    """Run the predict_net op by op, making each op's missing inputs first; a ``Retry`` when
    the walk must start again with another choice.

    Raises:
        GraphToolsError: an op fails and no other choice is left (as ``run_op``).
    """
    net = state.model.predict_net
    for index, op in enumerate(net):
        if op.type == "RecurrentNetwork":
            retry = prepare_recurrent(state, index, op, net)
            if retry is not None:
                return retry
        else:
            make_missing(state, index, op, net, state.ws)
            for _, nested in op.nested_nets():
                dry_run(state, nested)
        try:
            run_op(op, state.ws, index=index, net=net)
        except GraphToolsError as exc:
            if op.type == "Reshape" and state.result.params:
                fix = reshape_count(net, index, state.ws)
                if fix is not None and state.overrides.get(fix[0]) != fix[1]:
                    return Retry(*fix)
            if op.type in EXTERNAL_IO and state.params_allowed:
                reason = str(exc).splitlines()[0]
                skipped = SkippedOp("predict_net", index, op.type, tuple(op.outputs), reason)
                state.result.skipped_ops.append(skipped)
                continue
            retry = _next_image_size(state)
            if retry is not None:
                return retry
            if not replace_params(state, index, op, net, str(exc).splitlines()[0]):
                raise
            run_op(op, state.ws, index=index, net=net)
    return None


def _next_image_size(state: WalkState) -> Retry | None:
    """Another size for a guessed image the run refused, while untried sizes remain."""
    for name, index in state.image_guesses.items():
        if index + 1 < len(IMAGE_SIZES):
            return Retry(image=(name, index + 1))
    return None


def collect_outputs(state: WalkState, names: Sequence[str]) -> None:
    """Put the values of ``names`` (or their absence) into the report."""
    for name in names:
        if state.ws.has(name):
            state.result.outputs[name] = state.ws.fetch(name)
        else:
            state.result.missing_outputs.append(name)

"""Making one missing input of one op: a role's value, a made-up parameter, or data shaped
like what the op already has.

An input an op reads that nothing provided is made when the walk reaches the op: by its role
(``feeds.roles``) when it has one, as a parameter (a weight, a bias, a BN scale read at input
position 1 or later) when ``param_spec`` knows its shape and parameters may be made up, else
as data shaped like another input of the op (or a generic shape). Parameter shapes come from
the channel plan of the net's float view, with the counts ``feeds.counts`` fixes.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any

import numpy as np

from graphtools.analysis.channels import param_spec, plan_channels
from graphtools.analysis.input_shapes import GENERIC_SHAPES, first_readers, guess_generic
from graphtools.errors import GraphToolsError, InvalidNetError
from graphtools.executor import Int8Tensor, Workspace
from graphtools.feeds.counts import fixed_counts, step_counts
from graphtools.feeds.params import ParamMaker, float_view
from graphtools.feeds.roles import ROLES, SHAPED_ROLES, RoleContext
from graphtools.feeds.state import WalkState
from graphtools.feeds.values import as_array, check_size, quantized
from graphtools.ir import Net, Op

_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div"})
"""Element-wise arithmetic whose made-up operand takes the type of an integer first operand."""

__all__ = ["PARAM_CHANNELS", "make_missing", "replace_params"]

PARAM_CHANNELS = 8
"""Least output channel count of a made-up Conv/FC weight (small keeps big nets fast)."""


def make_missing(
    state: WalkState, index: int, op: Op, net: Net, ws: Workspace, skip: Set[int] = frozenset()
) -> None:
    """Make every input of op #``index`` of ``net`` that ``ws`` lacks (but those at ``skip``),
    feeding each into ``ws`` (and into the walk's own workspace when ``ws`` is a nested one)."""
    made: dict[int, Any] = {}

    def need(position: int) -> Any:
        name = op.inputs[position]
        if ws.has(name) and name not in state.remake:
            return ws.fetch(name)
        if position not in made:
            made[position] = _make(state, index, op, position, net, ws, need)
            state.remake.discard(name)
            ws.feed(name, made[position])
            if ws is not state.ws:  # made inside a nested net: the real run needs it too
                state.ws.feed(name, made[position])
        return made[position]

    for position in range(len(op.inputs)):
        if position not in skip:
            need(position)


def _maker(state: WalkState, net: Net, ws: Workspace) -> tuple[Net, ParamMaker]:
    """The float view of ``net`` and the parameter maker planned for it, once per net."""
    found = state.makers.get(id(net))
    if found is not None:
        return found
    view = float_view(net)
    shapes: dict[str, tuple[int, ...]] = {}
    forced: dict[str, tuple[int, ...]] = {}
    for name in first_readers(net):
        if ws.has(name):
            shape = tuple(np.shape(as_array(ws.fetch(name))))
            made = name in state.result.feeds and name not in state.result.params
            if made and len(shape) >= 2:
                shapes[name] = shape
            else:
                forced[name] = shape
    try:
        counts = plan_channels(view, shapes, PARAM_CHANNELS, forced)
    except GraphToolsError:
        counts = {}
    fixed_counts(view, counts)
    program = state.programs.get(id(net))
    if program is not None:
        step_counts(view, program, counts, ws)
    if net is state.model.predict_net:
        counts.update(state.overrides)
    found = (view, ParamMaker(state.param_rng, counts, PARAM_CHANNELS))
    state.makers[id(net)] = found
    return found


def replace_params(state: WalkState, index: int, op: Op, net: Net, reason: str) -> bool:
    """Replace the init_net parameters op #``index`` reads that do not fit it by made-up
    ones (not when the user gave the data, unless ``random_params`` is on); whether any
    was replaced."""
    if state.random_params is False or state.model.init_net is None:
        return False
    if state.random_params is None and (state.shapes or state.values):
        return False  # the user's own data do not fit the init_net: that is their error
    view = float_view(net)
    try:
        counts = plan_channels(view, {}, PARAM_CHANNELS, {})
    except GraphToolsError:
        counts = {}
    maker = ParamMaker(state.param_rng, counts, PARAM_CHANNELS)
    replaced = False
    for position in range(1, len(op.inputs)):
        name = op.inputs[position]
        if name in state.result.feeds:
            continue
        value = _param(
            f"op #{index} ({op.type})",
            index,
            view[index],
            op,
            position,
            lambda p: state.ws.fetch(op.inputs[p]),
            maker,
        )
        if value is not None:
            old = np.shape(as_array(state.ws.fetch(name)))
            state.ws.feed(name, value)
            state.result.feeds[name] = value
            state.result.params[name] = tuple(np.shape(as_array(value)))
            state.result.replaced[name] = f"{'x'.join(map(str, old))} from the init_net: {reason}"
            replaced = True
    return replaced


def _make(
    state: WalkState,
    index: int,
    op: Op,
    position: int,
    net: Net,
    ws: Workspace,
    need: Callable[[int], Any],
) -> Any:
    name = op.inputs[position]
    role = ROLES.get((op.type, position))
    if role is not None:
        shapeable = (op.type, position) in SHAPED_ROLES
        given = state.shapes.get(name) if shapeable else None
        value = role[0](RoleContext(op, name, ws, state.rng, need, state.image, given))
        shaped = ", the shape given" if given is not None else ""
        # A shape --shapes could have given and did not is a guess, said as one (an error
        # then names the option).
        origin = "guessed" if shapeable and given is None else "role"
        state.remember(name, value, origin, f"{role[1]} of op #{index} ({op.type}){shaped}")
        return value
    where = f"op #{index} ({op.type})" + (f" in net {net.name!r}" if net.name else "")
    if position >= 1:
        view, maker = _maker(state, net, ws)
        value = _param(where, index, view[index], op, position, need, maker)
        if value is not None:
            if not state.params_allowed:
                raise InvalidNetError(
                    f"{where} reads parameter {name!r}, which neither the init_net makes "
                    "nor a feed gives; pass --random-params to make up missing parameters"
                )
            state.result.params[name] = tuple(np.shape(as_array(value)))
            state.result.feeds[name] = value
            return value
    value, reason = _like(state, op, position, ws)
    state.remember(name, value, "guessed", f"{where} reads it; {reason}")
    return value


def _param(
    where: str,
    index: int,
    float_op: Op,
    op: Op,
    position: int,
    need: Callable[[int], Any],
    maker: ParamMaker,
) -> Any:
    """A made-up parameter for input ``position`` of the op ``where`` names (quantized for
    Int8 ops), or ``None`` when no rule gives its shape."""
    first = need(0)
    try:
        spec = param_spec(
            float_op,
            index,
            position,
            tuple(np.shape(as_array(first))),
            maker.counts,
            maker.channels,
        )
    except (GraphToolsError, KeyError, ValueError, IndexError, TypeError):
        spec = None
    if spec is None:
        return None
    check_size(op.inputs[position], spec.shape, f"a parameter of {where}")
    value = maker.value(spec)
    if op.type in _ARITHMETIC and np.issubdtype(np.asarray(as_array(first)).dtype, np.integer):
        # an operand of integer arithmetic is an integer too (Caffe2 does not promote):
        # small, and non-zero where it divides or scales
        low = 1 if spec.init == "positive" else -2
        return maker.rng.integers(low, 5, spec.shape).astype(np.asarray(as_array(first)).dtype)
    if not op.type.startswith("Int8"):
        return value
    if position == 1 or not isinstance(first, Int8Tensor):
        return quantized(value)
    weight = need(1)
    scale = first.scale * (weight.scale if isinstance(weight, Int8Tensor) else 1.0)
    return Int8Tensor(np.round(value / scale).astype(np.int32), scale, 0)


def _like(state: WalkState, op: Op, position: int, ws: Workspace) -> tuple[Any, str]:
    """A data input nothing says the shape of: square matrices for a MatMul, the shape
    of another input the op already has, else ``GENERIC_SHAPE``."""
    rng = state.rng
    if op.type in ("MatMul", "BatchMatMul") and position == 0:
        shape: tuple[int, ...] = (4, 4) if op.type == "MatMul" else (2, 4, 4)
        if len(op.inputs) > 1 and ws.has(op.inputs[1]):
            b = np.shape(as_array(ws.fetch(op.inputs[1])))
            inner = b[-1] if op.arg("trans_b", 0) else b[-2] if len(b) >= 2 else b[0]
            pair = (inner, 4) if op.arg("trans_a", 0) else (4, inner)
            shape = (*b[:-2], *pair) if op.type == "BatchMatMul" else pair
            check_size(op.inputs[position], shape, f"an input of {op.type}")
            return rng.standard_normal(shape).astype(np.float32), "to fit the other"
        return rng.standard_normal(shape).astype(np.float32), "square matrices"
    for other in op.inputs:
        if ws.has(other):
            value = ws.fetch(other)
            if isinstance(value, Int8Tensor):
                q = rng.integers(0, 256, value.values.shape).astype(np.uint8)
                return Int8Tensor(q, value.scale, value.zero_point), f"like {other!r}"
            array = np.asarray(value)
            if np.issubdtype(array.dtype, np.number):
                check_size(op.inputs[position], array.shape, f"an input shaped like {other!r}")
                made = rng.standard_normal(array.shape).astype(array.dtype)
                return made, f"shaped like {other!r}"
    name = op.inputs[position]
    if name in state.generic:
        shape = GENERIC_SHAPES[state.generic[name]]
        reason = "nothing says its rank; the shapes tried before failed"
    else:
        known = {
            other: tuple(np.shape(as_array(value)))
            for other, value in state.result.feeds.items()
            if other not in state.result.params
        }
        guess = guess_generic(state.model, name, known)
        shape, reason = guess.shape, guess.reason
    if shape in GENERIC_SHAPES:
        state.generic_made[name] = GENERIC_SHAPES.index(shape)
    check_size(name, shape, f"an input: {reason}")
    return rng.standard_normal(shape).astype(np.float32), reason

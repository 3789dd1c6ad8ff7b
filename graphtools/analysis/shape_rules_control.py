"""Shape rules of the control-flow ops (the executor's ``kernels_control``): ``If``, ``While``
and ``Do`` infer their nested nets in the types of the enclosing net; ``CreateScope`` and
``HasScope`` hold workspace stacks.

What a user exporting to ONNX needs from them: an ``If`` whose branches agree on a blob gives
that type; where they disagree, what the two share (dtype, rank, equal dims), the rest unknown
with a reason naming both types. A ``While`` gives, for each blob its nets write, the join of
the types the blob takes over any number of iterations (the nets' inference is repeated to a
fixed point), so a counter stays ``int64[1]`` while a blob that grows each iteration gets an
unknown dim and a reason. A ``Do`` binds inner names to outer blobs as its kernel does; a name
its net reads that is bound to nothing is a local of the Do's workspace (left by an earlier
run for ``reuse_workspace`` or a gradient ``Do``): unknown.

If and While run their nets in the enclosing workspace, so the nets may write blobs that are
not outputs of the op (Mask R-CNN2Go's If has no outputs at all: its branch writes the masks
and rescales the boxes in place): such writes are reported with ``NestedScope.also_writes``.
"""

from __future__ import annotations

import numpy as np

from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    UNKNOWN,
    NestedScope,
    TensorType,
    count,
    explained,
    join,
    plain,
    reason_of,
    shape_rule,
)
from graphtools.errors import InvalidNetError
from graphtools.ir import Net, Op
from graphtools.nested import do_bindings

_BOOL, _OBJECT = np.dtype(np.bool_), np.dtype(object)
#: Rounds of a While's nets before the types of the blobs they write are given up as unknown
#: (each round that does not settle loses a dtype, a rank or a dim of some blob, so real loops
#: settle in one or two).
_MAX_ROUNDS = 8

_State = dict[str, TensorType | None]


def _optional_net(op: Op, name: str) -> Net | None:
    net = op.arg(name)
    if net is not None and not isinstance(net, Net):
        raise ValueError(f"{op.type} argument '{name}' must hold a net")
    return net


def _required_net(op: Op, name: str) -> Net:
    net = _optional_net(op, name)
    if net is None:
        raise ValueError(f"{op.type} needs a '{name}' argument holding a net")
    return net


def _check_condition(t: TensorType | None, name: str) -> None:
    if t is None:
        return
    if (t.dtype is not None and t.dtype != _BOOL) or count(t.shape) not in (None, 1):
        raise ValueError(f"condition blob {name!r} must hold one bool value, got {t}")


def _stack(op: Op, t: TensorType) -> None:
    if t.dtype is not None and t.dtype != _OBJECT:
        raise ValueError(f"{op.inputs[-1]!r} holds no workspace stack ({t}): use CreateScope")


def _either(a: TensorType | None, b: TensorType | None, where: str, what: str) -> TensorType | None:
    """The type of a blob that holds ``a`` or ``b`` (``None``: no value), with a reason for
    what the join loses."""
    if a is None or b is None:
        return b if a is None else a
    t = join(a, b)
    if t.complete:
        return t
    why = next((reason_of(x) for x in (a, b) if not x.complete and reason_of(x)), None)
    if why is None and plain(a) != plain(b):
        why = f"{where}: {what} give {plain(a)} and {plain(b)}"
    return explained(t, why) if why is not None else t


def _no_value(where: str, name: str, writer: str) -> TensorType:
    return explained(UNKNOWN, f"{where}: {writer} does not write {name!r} and it holds no value")


def _run_into(scope: NestedScope, net: Net, state: _State) -> None:
    """Infer ``net`` reading ``state`` before the enclosing net; its writes go into ``state``."""

    def lookup(name: str) -> TensorType | None:
        return state[name] if name in state else scope.current(name)

    state.update(scope.run(net, lookup))


def _finish(op: Op, scope: NestedScope, after: _State, writer: str) -> list[TensorType]:
    """The op's output types from the blobs' types ``after`` it; the other blobs its nets
    write are reported to the scope."""
    outputs = []
    for name in op.outputs:
        t = after[name] if name in after else scope.current(name)
        outputs.append(_no_value(scope.where, name, writer) if t is None else t)
    for name, t in after.items():
        if name not in op.outputs and t is not None:
            scope.also_writes(name, t)
    return outputs


@shape_rule("If", nested=True)
def _if(op: Op, inputs: list[TensorType], scope: NestedScope) -> list[TensorType]:
    """Runs ``then_net`` or ``else_net`` (none when absent) in the enclosing workspace."""
    need(op, inputs, 1)
    _check_condition(inputs[0], op.inputs[0])
    branches: list[_State] = []
    for net in (_required_net(op, "then_net"), _optional_net(op, "else_net")):
        state: _State = {}
        if net is not None:
            _run_into(scope, net, state)
        branches.append(state)
    after: _State = {}
    for name in dict.fromkeys([*branches[0], *branches[1]]):
        before = scope.current(name)
        then, other = (branch.get(name, before) for branch in branches)
        after[name] = _either(then, other, scope.where, "the branches")
    return _finish(op, scope, after, "neither branch")


@shape_rule("While", nested=True)
def _while(op: Op, inputs: list[TensorType], scope: NestedScope) -> list[TensorType]:
    """Runs ``cond_net`` (when given), then ``loop_net`` while the condition input holds true,
    in the enclosing workspace."""
    need(op, inputs, 1)
    loop_net = _required_net(op, "loop_net")
    cond_net = _optional_net(op, "cond_net")
    state: _State = {}
    if cond_net is not None:
        _run_into(scope, cond_net, state)
    condition = op.inputs[0]
    _check_condition(state[condition] if condition in state else inputs[0], condition)
    for _ in range(_MAX_ROUNDS):
        after = dict(state)
        for net in (loop_net, cond_net):
            if net is not None:
                _run_into(scope, net, after)
        joined = {
            name: _either(
                state[name] if name in state else scope.current(name),
                t,
                scope.where,
                "the loop's iterations",
            )
            for name, t in after.items()
        }
        if all(name in state and _same(state[name], t) for name, t in joined.items()):
            break
        state = joined
    else:
        why = f"{scope.where}: the types its nets write did not settle in {_MAX_ROUNDS} rounds"
        state = {name: explained(UNKNOWN, why) for name in state}
    return _finish(op, scope, state, "no net of the loop")


def _same(a: TensorType | None, b: TensorType | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and plain(a) == plain(b))


@shape_rule("Do", nested=True)
def _do(op: Op, inputs: list[TensorType], scope: NestedScope) -> list[TensorType]:
    """Runs ``net`` in a workspace of its own where each inner name of ``inner_blobs`` stands
    for the outer blob ``outer_blobs_idx`` picks; the last input and output is the scope."""
    net = _required_net(op, "net")
    try:
        bindings = do_bindings(op)
    except InvalidNetError as exc:
        raise ValueError(str(exc)) from exc
    reuse = bool(op.arg("reuse_workspace", 0))
    gradient = bool(op.is_gradient_op)
    if reuse and op.arg("copy_external_blobs", 0):
        raise ValueError("Do cannot both reuse_workspace and copy_external_blobs")
    if gradient and reuse:
        raise ValueError("a gradient Do cannot reuse_workspace")
    _stack(op, inputs[-1])
    local = (
        "a local of an earlier run of its workspace" if reuse or gradient else "bound to nothing"
    )

    def lookup(inner: str) -> TensorType | None:
        outer = bindings.get(inner)
        if outer is not None:
            return scope.current(outer)
        return explained(UNKNOWN, f"{scope.where}: its net reads {inner!r}, {local}")

    written = scope.run(net, lookup)
    after: _State = {outer: written[inner] for inner, outer in bindings.items() if inner in written}
    return _finish(op, scope, after, "its net")


@shape_rule("CreateScope")
def _create_scope(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """A new workspace stack (an object blob of shape ())."""
    return [TensorType(_OBJECT, ())]


@shape_rule("HasScope")
def _has_scope(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Whether the stack holds a forward workspace: bool ``[1]``."""
    need(op, inputs, 1)
    _stack(op, inputs[0])
    return [TensorType(_BOOL, (1,))]

"""Control-flow kernels: ``CreateScope``, ``HasScope``, ``Do``, ``If`` and ``While``.

``If`` and ``While`` run their nested nets (``then_net``/``else_net``, ``cond_net``/
``loop_net``) in the workspace they run in. ``Do`` runs its ``net`` in a child workspace that
sees only the blobs bound by ``inner_blobs``/``outer_blobs_idx`` (see
``graphtools.executor.scopes``), pushed on the stack held by its last input; a gradient ``Do``
(``is_gradient_op``) pops that workspace instead and so sees the forward run's locals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.errors import InvalidNetError
from graphtools.executor.interpreter import run_net
from graphtools.executor.registry import OpContext, kernel
from graphtools.executor.scopes import WorkspaceStack, stack_of
from graphtools.ir import Net, Op
from graphtools.nested import do_bindings


@kernel("CreateScope")
def _create_scope(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.asarray(WorkspaceStack(), dtype=object)]


@kernel("HasScope")
def _has_scope(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.asarray([not stack_of(inputs[0], op.inputs[0]).empty()])]


def _optional_net(op: Op, name: str) -> Net | None:
    net = op.arg(name)
    if net is not None and not isinstance(net, Net):
        raise InvalidNetError(f"{op.type} argument '{name}' must hold a net")
    return net


def _required_net(op: Op, name: str) -> Net:
    net = _optional_net(op, name)
    if net is None:
        raise InvalidNetError(f"{op.type} needs a '{name}' argument holding a net")
    return net


def _condition(value: Any, name: str) -> bool:
    cond = np.asarray(value)
    if cond.dtype != np.bool_ or cond.size != 1:
        raise InvalidNetError(
            f"condition blob {name!r} must hold one bool value, got {cond.dtype}{list(cond.shape)}"
        )
    return bool(cond.reshape(-1)[0])


def _outputs(op: Op, ctx: OpContext) -> list[Any]:
    missing = [name for name in op.outputs if not ctx.workspace.has(name)]
    if missing:
        raise InvalidNetError(f"{op.type} declares outputs {missing} that its nets did not write")
    return [ctx.workspace.fetch(name) for name in op.outputs]


@kernel("If", context=True)
def _if(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    if not op.inputs:
        raise InvalidNetError("If needs the condition blob as its first input")
    then_net = _required_net(op, "then_net")
    else_net = _optional_net(op, "else_net")
    branch = then_net if _condition(inputs[0], op.inputs[0]) else else_net
    if branch is not None:
        run_net(branch, ctx.workspace)
    return _outputs(op, ctx)


@kernel("While", context=True)
def _while(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    if not op.inputs:
        raise InvalidNetError("While needs the condition blob as its first input")
    loop_net = _required_net(op, "loop_net")
    cond_net = _optional_net(op, "cond_net")
    while True:
        if cond_net is not None:
            run_net(cond_net, ctx.workspace)
        if not _condition(ctx.workspace.fetch(op.inputs[0]), op.inputs[0]):
            break
        run_net(loop_net, ctx.workspace)
    return _outputs(op, ctx)


@kernel("Do", context=True)
def _do(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    net = _required_net(op, "net")
    bindings = do_bindings(op)
    reuse = bool(op.arg("reuse_workspace", 0))
    copy_external = bool(op.arg("copy_external_blobs", 0))
    gradient = bool(op.is_gradient_op)
    if reuse and copy_external:
        raise InvalidNetError("Do cannot both reuse_workspace and copy_external_blobs")
    if gradient and reuse:
        raise InvalidNetError("a gradient Do cannot reuse_workspace")
    stack = stack_of(inputs[-1], op.inputs[-1])
    if gradient:
        child = stack.pop_gradient(ctx.workspace, bindings)
    elif reuse and not stack.empty():
        child = stack.reuse_last_forward(ctx.workspace, bindings)
    else:
        child = stack.push_forward(ctx.workspace, bindings)
    if not gradient:  # the Do gradient reads a bound blob the subnet overwrote from here
        child.save_start_values(bindings)
    run_net(net, child)
    if copy_external and not gradient:
        child.copy_forwarded(bindings)
    return _outputs(op, ctx)

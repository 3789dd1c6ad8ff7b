"""``add_gradient_operators``: append a net's backward pass to it (``Net.AddGradientOperators``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from graphtools.gradients._proto import NetDef, op_from_proto
from graphtools.gradients.registry import GradientRegistry
from graphtools.ir import Net

__all__ = ["add_gradient_operators"]


def add_gradient_operators(
    net: Net | NetDef, ys: Mapping[str, str | None] | Sequence[str], skip: int = 0
) -> dict[str, str]:
    """Append the gradient ops of ``net.op[skip:]`` for ``ys`` to ``net``, in place.

    Args:
        net: an IR net or a NetDef message (both edited in place).
        ys: blob names (gradients of ones are generated) or ``{blob: gradient blob or None}``.
        skip: how many leading ops to leave out of the backward pass (Caffe2's ``skip``).

    Returns:
        ``{blob: gradient blob}`` for every blob that got a gradient, the ys included.

    Raises:
        The errors of ``GradientRegistry.GetBackwardPass``; the net is unchanged then.
    """
    if isinstance(net, NetDef):
        ops, grad_map = GradientRegistry.GetBackwardPass(list(net.op[skip:]), ys)
        net.op.extend(ops)
        return grad_map
    if not isinstance(net, Net):
        raise TypeError(f"expected a graphtools Net or a NetDef, got {type(net).__name__}")
    ops, grad_map = GradientRegistry.GetBackwardPass(list(net.ops[skip:]), ys)
    with net.edit() as edit:
        edit.insert(len(net), [op_from_proto(op) for op in ops])
        # The backward pass may rewrite blobs the net declares as outputs (control flow's
        # workspace scopes, which upstream's builders list): the outputs stay as declared.
        edit.set_external_outputs(net.external_outputs)
    return grad_map

"""Renaming one output of a gradient ``If`` op, inside its branch nets too."""

from __future__ import annotations

from graphtools.gradients._proto import OperatorDef


def disambiguate_grad_if_op_output(grad_op: OperatorDef, idx: int, new_grad_output: str) -> None:
    """Rename output ``idx`` of the gradient If ``grad_op`` to ``new_grad_output``, in place.

    The branches write the gradient under the old name, so every op output with that name in
    ``then_net`` and ``else_net`` is renamed as well (Caffe2's function of the same name, used
    when a gradient is accumulated with ``_<grad>_autosplit_<k>`` temporaries).
    """
    old = grad_op.output[idx]
    for arg in grad_op.arg:
        if arg.name in ("then_net", "else_net") and arg.HasField("n"):
            for op in arg.n.op:
                for position, output in enumerate(op.output):
                    if output == old:
                        op.output[position] = new_grad_output
    grad_op.output[idx] = new_grad_output

"""Backward passes for Caffe2 nets, with Caffe2's names: ``GradientRegistry`` and friends.

``GradientRegistry.GetBackwardPass(ops, ys)`` builds the gradient ops of a list of ops the way
Caffe2's gradient IR does; ``add_gradient_operators(net, ys)`` appends them to a net. Built-in
makers cover the common ops (``makers``) and ``RecurrentNetwork`` (``recurrent_grad``); ``Do``,
``If`` and ``While`` are differentiated by ``gen_do_gradient``, ``gen_if_gradient`` and
``gen_while_gradient``; ``add_if_op`` and ``add_while_op`` build those control-flow ops. See
``docs/gradients.md``.
"""

from __future__ import annotations

from graphtools.gradients import (  # noqa: F401  (importing registers the built-in makers)
    makers,
    recurrent_grad,
)
from graphtools.gradients.api import add_gradient_operators
from graphtools.gradients.control_builders import add_if_op, add_while_op, get_external_blob_names
from graphtools.gradients.control_grad import (
    dedupe_g_output,
    disambiguate_grad_if_op_output,
    gen_do_gradient,
    gen_if_gradient,
)
from graphtools.gradients.registry import GradientRegistry, NoGradient
from graphtools.gradients.while_grad import gen_while_gradient

AddGradientOperators = add_gradient_operators
get_backward_pass = GradientRegistry.GetBackwardPass
GetBackwardPass = GradientRegistry.GetBackwardPass

__all__ = [
    "AddGradientOperators",
    "GetBackwardPass",
    "GradientRegistry",
    "NoGradient",
    "add_gradient_operators",
    "add_if_op",
    "add_while_op",
    "dedupe_g_output",
    "disambiguate_grad_if_op_output",
    "gen_do_gradient",
    "gen_if_gradient",
    "gen_while_gradient",
    "get_backward_pass",
    "get_external_blob_names",
]

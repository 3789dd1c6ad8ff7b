"""The gradient maker of ``RecurrentNetwork`` (Caffe2's C++ ``GetRecurrentNetworkGradient``).

One ``RecurrentNetworkGradient`` op reads the gradients of the outputs listed in
``outputs_with_grads``, then every forward input and every forward output (the step workspaces
last), and writes the gradients of the sequence input, of the ``param`` inputs and of the
initial states. As with every built-in maker, the forward op's arguments (step nets and links
included), device option and engine are copied onto it.
"""

from __future__ import annotations

from graphtools.errors import GradientMakerError
from graphtools.gradients._proto import OperatorDef
from graphtools.gradients.registry import MakerContext, builtin_gradient

__all__: list[str] = []


def _ints(ctx: MakerContext, name: str) -> list[int]:
    value = ctx.arg(name)
    return [] if value is None else [int(v) for v in value]


@builtin_gradient("RecurrentNetwork", inputs=(1, None), outputs=(2, None))
def _recurrent_network(ctx: MakerContext) -> list[OperatorDef]:
    with_grads = _ints(ctx, "outputs_with_grads")
    if not with_grads:
        raise GradientMakerError("RecurrentNetwork needs a non-empty outputs_with_grads")
    op = ctx.op
    inputs = [ctx.GO(i) for i in with_grads]
    inputs += [ctx.I(i) for i in range(len(op.input))]
    inputs += [ctx.O(i) for i in range(len(op.output))]
    outputs = [ctx.GI(0)]
    outputs += [ctx.GI(i) for i in _ints(ctx, "param")]
    outputs += [ctx.GI(i) for i in _ints(ctx, "initial_recurrent_state_ids")]
    return [ctx.make("RecurrentNetworkGradient", inputs, outputs)]

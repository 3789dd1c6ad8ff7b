"""Channel counts and parameter shapes for a net shipped without its weights.

Output channel counts are not in a Caffe2 net's arguments, so ``plan_channels`` derives them
from the net's own constraints (``_ChannelPlan``); ``param_spec`` then gives the shape (and
the kind of initial values) of each parameter an op reads, from its first input's shape, and
``infer_param_shapes`` runs both over the whole net with the shape analysis, without running
anything. ``graphtools.testing.random_params`` draws values for these shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import gcd, lcm, prod

import numpy as np

from graphtools.analysis.op_args import channel_axis, order, window_args
from graphtools.analysis.shapes import TensorType, infer_shapes
from graphtools.errors import InvalidNetError
from graphtools.ir import Net, Op
from graphtools.printer import describe_net

__all__ = ["ParamSpec", "infer_param_shapes", "param_spec", "plan_channels"]

_CONVS = frozenset({"Conv", "ConvTranspose"})
_DENSE = frozenset({"FC", "FCTransposed"})
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Sum"})
_CONCATS = frozenset({"Concat", "DepthConcat"})
# Ops whose first output has their first input's shape, so its channel count.
_SAME_CHANNELS = frozenset(
    {
        *("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Softplus", "Elu", "PRelu", "Softmax"),
        *("Abs", "Neg", "Exp", "Log", "Sqr", "Sqrt", "Scale", "Clip", "StopGradient"),
        *("Dropout", "SpatialBN", "InstanceNorm", "LRN", "ChannelShuffle", "PadImage"),
        *("MaxPool", "AveragePool", "MaxPool2D", "AveragePool2D", "ResizeNearest"),
        *("Copy", "CopyCPUToGPU", "CopyGPUToCPU", "Alias", "EnsureCPUOutput"),
    }
)
# Ops with one parameter value per channel of their first input (a forced shape fixes it).
_PER_CHANNEL = frozenset({"SpatialBN", "InstanceNorm"})


class _Lin:
    """A channel count ``const + sum(coef * v)`` over free channel variables ``v`` (ints)."""

    __slots__ = ("const", "terms")

    def __init__(self, const: int = 0, terms: Mapping[int, int] | None = None) -> None:
        self.const = const
        self.terms = {v: c for v, c in (terms or {}).items() if c}

    def plus(self, other: _Lin, scale: int = 1) -> _Lin:
        terms = dict(self.terms)
        for v, c in other.terms.items():
            terms[v] = terms.get(v, 0) + scale * c
        return _Lin(self.const + scale * other.const, terms)

    def __str__(self) -> str:
        parts = [f"{c}*c{v}" if c != 1 else f"c{v}" for v, c in sorted(self.terms.items())]
        return " + ".join([*parts, str(self.const)] if self.const or not parts else parts)


class _ChannelPlan:
    """Output channel counts of a net's Conv, ConvTranspose and FC ops, from the net itself.

    One walk over the ops gives every blob's channel count as a ``_Lin`` expression: inputs
    are constants, each Conv/ConvTranspose/FC output a new variable (a constant when
    ``param_shapes`` fixes its weight or bias), shape-keeping ops pass it on, a channel Concat
    adds its operands. Constraints are collected on the way: Sum operands are equal, and so
    are Add/Sub/Mul/Div ones where that can hold (else numpy broadcasting is left to decide);
    the newest variable, preferably one alone on its side, is solved for and substituted. A
    grouped conv's input and output and a ChannelShuffle's input are divisible by the group, a
    forced conv weight or SpatialBN scale fixes a count. Then each free variable takes the
    smallest multiple of what its divisibility constraints need that is at least ``channels``.

    Blobs from other ops are unknown and constrain nothing; a divisibility constraint on a sum
    is met by making every term divisible (sufficient, not necessary). Cost: one pass over the
    ops, times the size of the expressions (the variables a Concat chain adds up).
    """

    def __init__(self, net: Net, channels: int, forced: Mapping[str, tuple[int, ...]]) -> None:
        self.net = net
        self.channels = channels
        self.forced = forced
        self.variables = 0
        self.bound: dict[int, _Lin] = {}
        self.divisible: list[tuple[_Lin, int, int]] = []
        self.outputs: dict[int, _Lin] = {}

    def _where(self, index: int) -> str:
        return f"op #{index} ({self.net[index].type}) in {describe_net(self.net)}"

    def resolve(self, lin: _Lin) -> _Lin:
        """``lin`` over free variables only (bound ones substituted, with path compression)."""
        out = _Lin(lin.const)
        for v, c in lin.terms.items():
            if v in self.bound:
                self.bound[v] = self.resolve(self.bound[v])
                out = out.plus(self.bound[v], c)
            else:
                out = out.plus(_Lin(0, {v: c}))
        return out

    def equate(self, a: _Lin, b: _Lin, index: int, strict: bool = True) -> None:
        """Record ``a == b`` by solving for one variable with a unit coefficient.

        When that is impossible, raise if ``strict``, else leave it to numpy broadcasting.
        """
        diff = self.resolve(a).plus(self.resolve(b), -1)
        if not diff.terms and not diff.const:
            return
        signs = [c > 0 for c in diff.terms.values()]
        units = [(signs.count(c > 0) == 1, v, c) for v, c in diff.terms.items() if c in (1, -1)]
        if not units and not strict:
            return
        if not units:
            raise InvalidNetError(
                f"{self._where(index)}: operand channel counts {self.resolve(a)} and "
                f"{self.resolve(b)} cannot be made equal; give the weights in param_shapes"
            )
        _, v, c = max(units)  # diff = c*v + rest = 0, so v = -c * rest
        self.bound[v] = _Lin(-c * diff.const, {w: -c * k for w, k in diff.terms.items() if w != v})

    def _new(self) -> _Lin:
        self.variables += 1
        return _Lin(0, {self.variables - 1: 1})

    def _conv(self, index: int, op: Op, x: _Lin | None) -> _Lin:
        group = int(op.arg("group", 1))
        nhwc = order(op) == "NHWC"
        w = self.forced.get(op.inputs[1]) if len(op.inputs) > 1 else None
        b = self.forced.get(op.inputs[2]) if len(op.inputs) > 2 else None
        out = in_count = None
        if w is not None and op.type == "Conv":  # (M, C/group, *kernel), NHWC (M, *kernel, C/g)
            out, in_count = _Lin(w[0]), w[-1 if nhwc else 1] * group
        elif w is not None:  # (C, M/group, *kernel), NHWC (C, *kernel, M/group)
            out, in_count = _Lin(w[-1 if nhwc else 1] * group), w[0]
        if b is not None:
            if out is not None:
                self.equate(out, _Lin(b[0]), index)
            out = _Lin(b[0])
        if x is not None:
            self.divisible.append((x, group, index))
            if in_count is not None:
                self.equate(x, _Lin(in_count), index)
        out = out if out is not None else self._new()
        if group > 1:
            self.divisible.append((out, group, index))
        return out

    def _dense(self, index: int, op: Op) -> _Lin | None:
        if int(op.arg("axis", 1)) != 1:
            return None
        w = self.forced.get(op.inputs[1]) if len(op.inputs) > 1 else None
        b = self.forced.get(op.inputs[2]) if len(op.inputs) > 2 else None
        if b is not None:
            return _Lin(b[0])
        if w is None:
            return self._new()
        axis_w = int(op.arg("axis_w", 1))
        return _Lin(prod(w[:axis_w]) if op.type == "FC" else prod(w[axis_w:]))

    def _on_channels(self, op: Op) -> bool:
        if op.arg("add_axis", 0):
            return False
        axis = op.arg("axis")
        if axis is None:
            return True
        return int(axis) in ((3, -1) if order(op) == "NHWC" else (1,))

    def step(self, index: int, op: Op, operands: list[_Lin | None]) -> _Lin | None:
        """Record ``op``'s constraints; the channel count of its first output (or ``None``)."""
        kind, x = op.type, operands[0] if operands else None
        if kind in _CONVS:
            self.outputs[index] = self._conv(index, op, x)
            return self.outputs[index]
        if kind in _DENSE:
            out = self._dense(index, op)
            if out is not None:
                self.outputs[index] = out
            return out
        if kind in _SAME_CHANNELS:
            if x is not None and kind == "ChannelShuffle":
                self.divisible.append((x, int(op.arg("group", 1)), index))
            if x is not None and kind in _PER_CHANNEL:
                for name in op.inputs[1:]:
                    if name in self.forced:
                        self.equate(x, _Lin(self.forced[name][0]), index)
            return x
        if kind in _ELEMENTWISE:
            known = [lin for lin in operands if lin is not None]
            if op.arg("broadcast", 0) or not known:
                return x
            for other in known[1:]:
                self.equate(known[0], other, index, strict=kind == "Sum")
            return self.resolve(known[0])
        known = [lin for lin in operands if lin is not None]
        if kind in _CONCATS and self._on_channels(op) and len(known) == len(operands):
            total = _Lin()
            for lin in known:
                total = total.plus(lin)
            return self.resolve(total)
        return None

    def solve(self) -> dict[int, int]:
        """Output channel count by op index, meeting every recorded constraint."""
        need: dict[int, int] = {}
        resolved = [(self.resolve(lin), g, index) for lin, g, index in self.divisible]
        for lin, g, _ in resolved:
            for v, c in lin.terms.items():
                need[v] = lcm(need.get(v, 1), g // gcd(g, c))
        values = {}
        for v in range(self.variables):
            if v not in self.bound:
                step = need.get(v, 1)
                values[v] = step * max(1, -(-self.channels // step))

        def value(lin: _Lin) -> int:
            lin = self.resolve(lin)
            return lin.const + sum(c * values[v] for v, c in lin.terms.items())

        for lin, g, index in resolved:
            if value(lin) % g:
                raise InvalidNetError(
                    f"{self._where(index)}: group {g} does not divide the {value(lin)} "
                    "channels the net gives it; give the weights in param_shapes"
                )
        counts = {index: value(lin) for index, lin in self.outputs.items()}
        for index, count in counts.items():
            if count <= 0:
                raise InvalidNetError(
                    f"{self._where(index)}: the net's constraints leave it {count} output "
                    "channels; give the weights in param_shapes"
                )
        return counts


def plan_channels(
    net: Net,
    input_shapes: Mapping[str, Sequence[int]],
    channels: int,
    forced: Mapping[str, tuple[int, ...]],
) -> dict[int, int]:
    """Output channel count of each Conv/ConvTranspose/FC of ``net`` (see ``_ChannelPlan``).

    ``forced`` gives the shapes of parameters that are known (they fix counts); ``channels``
    is the least count of a free one.

    Raises:
        InvalidNetError: the net's constraints cannot be met.

    Inputs' channels are on axis 1, or on the last axis when the first op with an ``order``
    argument says NHWC.
    """
    plan = _ChannelPlan(net, channels, forced)
    nhwc = next((order(op) == "NHWC" for op in net if op.has_arg("order")), False)
    blobs: dict[str, _Lin | None] = {
        name: _Lin(int(shape[-1] if nhwc else shape[1]))
        for name, shape in input_shapes.items()
        if len(shape) >= 2
    }
    for index, op in enumerate(net):
        out = plan.step(index, op, [blobs.get(name) for name in op.inputs])
        for name in op.outputs:
            blobs[name] = None
        if op.outputs and out is not None:
            blobs[op.outputs[0]] = out
    return plan.solve()


@dataclass(frozen=True)
class ParamSpec:
    """The shape of a parameter and how to initialise it.

    Attributes:
        shape: the parameter's shape.
        init: ``"weight"`` (normal, std ``1/sqrt(fan_in)``), ``"small"`` (normal, std 0.1),
            ``"positive"`` (uniform in [0.5, 1.5): scales, variances, divisors) or ``"slope"``
            (uniform in [0, 0.3): PRelu slopes).
        fan_in: the inputs each output sums over (for ``"weight"``).
    """

    shape: tuple[int, ...]
    init: str
    fan_in: int = 1


def param_spec(
    op: Op,
    index: int,
    position: int,
    x_shape: tuple[int, ...],
    counts: Mapping[int, int],
    channels: int,
) -> ParamSpec | None:
    """The parameter read at input ``position`` of op #``index`` whose first input has shape
    ``x_shape``, given the planned output channel ``counts``; ``None`` when no rule applies.

    * Conv / ConvTranspose: weights for the planned output count, following the op's
      ``order``; biases match.
    * FC / FCTransposed / MatMul: the planned outputs (``channels`` for MatMul) over the
      flattened input features.
    * SpatialBN / InstanceNorm / PRelu: one value per input channel.
    * Add / Sub / Mul / Div / Sum: the first input's shape, or with ``broadcast=1`` one value
      per dim at ``axis``.

    Raises:
        InvalidNetError: a conv without a kernel argument, whose input has no spatial dim or
            whose group does not divide its input channels; a broadcast axis outside the input.
    """
    kind = op.type
    if kind in _CONVS:
        return _conv_spec(op, index, position, x_shape, counts[index])
    if kind in ("FC", "FCTransposed", "MatMul"):
        k = prod(x_shape[int(op.arg("axis", op.arg("axis_a", 1))) :])
        n = counts.get(index, channels)
        if position == 2:
            return ParamSpec((n,), "small")
        lead = (1,) * (int(op.arg("axis_w", 1)) - 1)  # legacy Caffe weights: (1, 1, N, K)
        shape = (*lead, k, n) if kind != "FC" else (*lead, n, k)
        return ParamSpec(shape, "weight", k)
    ndim = len(x_shape)
    c = x_shape[channel_axis(op, ndim)] if ndim >= 2 else prod(x_shape)
    if kind == "SpatialBN":
        return ParamSpec((c,), "positive" if position in (1, 4) else "small")
    if kind == "InstanceNorm":
        return ParamSpec((c,), "positive" if position == 1 else "small")
    if kind == "PRelu":
        return ParamSpec((c,), "slope")
    if kind in _ELEMENTWISE and position >= 1:
        shape = x_shape
        if op.arg("broadcast", 0):
            axis = -1 if op.arg("axis") is None else int(op.arg("axis"))
            if not -len(x_shape) <= axis < len(x_shape):
                raise InvalidNetError(
                    f"op #{index} ({op.type}): broadcast axis {axis} is outside its "
                    f"{len(x_shape)}-D input"
                )
            shape = (x_shape[axis],)
        return ParamSpec(shape, "positive" if kind in ("Div", "Mul") else "small")
    return None


def _conv_spec(op: Op, index: int, position: int, x_shape: tuple[int, ...], m: int) -> ParamSpec:
    layout = order(op)
    nd = len(x_shape) - 2
    if nd < 1:
        raise InvalidNetError(
            f"op #{index} ({op.type}) reads a {len(x_shape)}-D input {list(x_shape)}; a "
            "convolution needs batch, channel and at least one spatial dim"
        )
    c = x_shape[channel_axis(op, len(x_shape))]
    group = int(op.arg("group", 1))
    if position == 2:
        return ParamSpec((m,), "small")
    kernel, _, _, _ = window_args(op, nd)
    if kernel is None:
        raise InvalidNetError(f"{op.type} has no kernel argument; pass its weight shape")
    if c % group:
        raise InvalidNetError(
            f"op #{index} ({op.type}): group {group} does not divide {c} input channels"
        )
    per = (m, c // group) if op.type == "Conv" else (c, m // group)
    shape = (per[0], *kernel, per[1]) if layout == "NHWC" else (*per, *kernel)
    return ParamSpec(shape, "weight", c // group * prod(kernel))


def infer_param_shapes(
    net: Net,
    input_shapes: Mapping[str, Sequence[int]],
    *,
    channels: int = 16,
    param_shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, tuple[int, ...]]:
    """The shape of every parameter ``net`` reads, without running it.

    One shape-analysis walk over the net: whenever an op reads a blob that is neither an
    input, a ``param_shapes`` entry, nor written before, its shape comes from ``param_spec``
    on the op's first input's inferred shape and the planned channel counts.

    Returns:
        Shapes by parameter name (the ``param_shapes`` entries the net reads included).

    Raises:
        InvalidNetError: a parameter's shape cannot be derived (an op without a rule, or a
            first input whose shape is not static), or the net's constraints cannot be met.
    """
    forced = {name: tuple(int(d) for d in shape) for name, shape in (param_shapes or {}).items()}
    counts = plan_channels(net, input_shapes, channels, forced)
    made: dict[str, tuple[int, ...]] = {}

    def missing(index: int, op: Op, position: int, types: list[TensorType]) -> TensorType:
        x = types[0].shape if position >= 1 else None
        spec = None
        if x is not None and all(isinstance(d, int) for d in x):
            spec = param_spec(
                op, index, position, tuple(int(d) for d in x if d is not None), counts, channels
            )
        if spec is None:
            name = op.inputs[position]
            raise InvalidNetError(
                f"op #{index} ({op.type}) in {describe_net(net)}: cannot derive the shape of "
                f"parameter {name!r}; give it in param_shapes"
            )
        made[op.inputs[position]] = spec.shape
        return TensorType(np.dtype(np.float32), spec.shape)

    inputs = {name: tuple(shape) for name, shape in input_shapes.items()}
    info = infer_shapes(net, inputs, params=forced, missing=missing)
    read = {name: shape for name, shape in forced.items() if name in info.versions}
    return {**read, **made}

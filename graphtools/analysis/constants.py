"""Which ops of a net compute constants: the sub-graph a constant folder may evaluate.

An op is constant when the net's op table says it may be folded (known, deterministic, no side
effects) and every value it reads is constant: a value the net holds (an initializer), a value
known by other means (a ``Shape`` of a statically shaped value, which the caller evaluates), or
an output of a constant op. Only a single-assignment net (ONNX) is asked: a value has one
writer, so a name is a value.

The result says which ops to evaluate, in order, and which of their outputs the rest of the net
needs (read by an op that stays, by a nested net, or a graph output): those become constants;
the others disappear with the ops that computed them.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass

from graphtools.ir import Net, Op
from graphtools.nested import nested_accesses

__all__ = ["ConstantOps", "constant_ops", "needed_outputs"]


@dataclass(frozen=True)
class ConstantOps:
    """What ``constant_ops`` found.

    Attributes:
        ops: indices of the constant ops, in net order.
        inputs: the values they read that they do not compute (constants the net holds or
            that the caller knows).
    """

    ops: tuple[int, ...]
    inputs: frozenset[str]


def constant_ops(net: Net, foldable: Callable[[Op], bool], known: Set[str]) -> ConstantOps:
    """The constant ops of ``net`` given the values ``known`` to be constant (see the module
    docstring); one pass over the ops."""
    constant = set(known)
    ops: list[int] = []
    inputs: set[str] = set()
    for index, op in enumerate(net):
        reads = [name for name in op.inputs if name]
        if not all(name in constant for name in reads) or not op.outputs or not foldable(op):
            continue
        ops.append(index)
        inputs.update(name for name in reads if name in known)
        constant.update(name for name in op.outputs if name)
    return ConstantOps(tuple(ops), frozenset(inputs))


def needed_outputs(net: Net, ops: Set[int]) -> list[str]:
    """The outputs of ``ops`` that the rest of ``net`` reads: ops not in ``ops``, nested nets,
    the graph's outputs (in net order, each once)."""
    produced = {name for index in ops for name in net[index].outputs if name}
    needed: dict[str, None] = {}
    for index, op in enumerate(net):
        if index not in ops:
            for name in op.inputs:
                if name in produced:
                    needed[name] = None
    for access in nested_accesses(net).values():
        for name in access.reads:
            if name in produced:
                needed[name] = None
    for name in net.external_outputs:
        if name in produced:
            needed[name] = None
    return list(needed)

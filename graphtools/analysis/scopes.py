"""The nets of a lexically scoped model (ONNX): the main graph and the control-flow bodies nested
in it, with what each body sees from outside, and fresh names that clash with none of them.

An ONNX body reads the values of the graphs enclosing it (an ``If`` branch reads the weights
of the main graph), and a value has one name in the whole model, bodies included. A pass that
rewrites every net of a model asks ``scopes`` for them, innermost first, so that each body is
rewritten (by an edit of its own) before the net holding it is looked at; and ``NameSource``
for the names of the values it makes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from graphtools.ir import Net, Op
from graphtools.values import Tensor

__all__ = ["NameSource", "Scope", "model_names", "scopes"]


class OpTableLike(Protocol):
    """What ``scopes`` asks the model's op table (``graphtools.dialects.OpTable``)."""

    def branch_nets(self, op: Op) -> list[tuple[str, Net]]: ...

    def constants(self, net: Net) -> Mapping[str, Tensor]: ...


@dataclass(frozen=True)
class Scope:
    """One net of the model.

    Attributes:
        net: the net.
        depth: 0 for the main graph, 1 for a body of one of its ops, and so on.
        constants: the net's initializers that are constants (the op table's ``constants``:
            not one a user may feed instead).
        outer_constants: the constants of the enclosing nets (innermost wins), which the
            net may read.
        outer_names: every value name the enclosing nets define before the op holding this
            net (inputs, initializers, outputs of earlier ops), which the net may read.
    """

    net: Net
    constants: Mapping[str, Tensor]
    depth: int = 0
    outer_constants: Mapping[str, Tensor] = field(default_factory=dict)
    outer_names: frozenset[str] = frozenset()


def scopes(net: Net, table: OpTableLike) -> list[Scope]:
    """``net`` and every control-flow body nested in it (``table.branch_nets``), innermost
    first (each body before the net holding it); linear in the size of the model."""
    found: list[Scope] = []
    _visit(Scope(net, table.constants(net)), table, found)
    return found


def _visit(scope: Scope, table: OpTableLike, found: list[Scope]) -> None:
    net = scope.net
    nested = net.nested_op_indices()
    if nested:
        constants = {**scope.outer_constants, **scope.constants}
        defined = set(scope.outer_names) | set(net.external_inputs) | set(net.initializers)
        for index, op in enumerate(net):
            if index in nested:
                for _, body in table.branch_nets(op):
                    inner = Scope(
                        body, table.constants(body), scope.depth + 1, constants, frozenset(defined)
                    )
                    _visit(inner, table, found)
            defined.update(op.outputs)
    found.append(scope)


def model_names(net: Net) -> set[str]:
    """Every name ``net`` and the nets nested in it use: inputs, outputs, initializers and the
    names ops read and write."""
    names: set[str] = set()
    _collect(net, names)
    names.discard("")
    return names


def _collect(net: Net, names: set[str]) -> None:
    names.update(net.external_inputs)
    names.update(net.external_outputs)
    names.update(net.initializers)
    for op in net:
        names.update(op.inputs)
        names.update(op.outputs)
    for index in net.nested_op_indices():
        for _, nested in net[index].nested_nets():
            _collect(nested, names)


class NameSource:
    """Fresh value names: ``fresh("w_fused")`` gives ``w_fused``, or ``w_fused_1``, ``w_fused_2``
    ... the first that no net of the model uses and that was not given before."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken = set(taken)
        self._next: dict[str, int] = {}  # a hint asked for again goes on from its last suffix

    def reserve(self, names: Iterable[str]) -> None:
        """Mark ``names`` as used."""
        self._taken.update(names)

    def fresh(self, hint: str) -> str:
        """A new name built from ``hint``."""
        name, number = hint, self._next.get(hint, 0)
        if number:
            name = f"{hint}_{number}"
        while name in self._taken:
            number += 1
            name = f"{hint}_{number}"
        self._next[hint] = number + 1
        self._taken.add(name)
        return name

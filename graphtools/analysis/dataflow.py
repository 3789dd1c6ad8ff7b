"""Who writes and who reads each value of a single-assignment net (an ONNX graph), for passes
that match patterns of ops: the op computing a value, the ops reading it, and whether a value
may disappear when the op computing it is fused into its reader.

Answers come from the net's cached SSA view (``net.ssa()``), so asking costs no walk over the
net. A value *escapes* when something other than the net's ops reads it: it is a graph output,
or a nested graph (an ``If`` branch, a ``Loop`` body) reads it.
"""

from __future__ import annotations

from graphtools.analysis.scopes import Scope
from graphtools.nested import nested_accesses
from graphtools.values import Tensor

__all__ = ["DataFlow"]


class DataFlow:
    """Producers and readers of the values of ``scope.net`` (single-assignment), and the
    constants it sees: its own (``scope.constants``), then those of the enclosing graphs."""

    def __init__(self, scope: Scope) -> None:
        self.net = net = scope.net
        self.view = net.ssa()
        self.constants = scope.constants
        self.outer = scope.outer_constants
        self.inputs = net.external_input_set()
        escaping = set(net.external_outputs)
        for access in nested_accesses(net).values():
            escaping.update(access.reads)
        self.escaping = frozenset(escaping)

    def _key(self, name: str) -> int | None:
        view = self.view
        key = view.key((name, 1))
        return view.key((name, 0)) if key is None else key

    def producer(self, name: str) -> int | None:
        """Index of the op writing ``name``; ``None`` for an input or a constant."""
        key = self.view.key((name, 1)) if name else None
        return None if key is None else self.view.producer_of(key)

    def readers(self, name: str) -> list[tuple[int, int]]:
        """``(op index, input position)`` of every read of ``name`` by an op of the net."""
        key = self._key(name) if name else None
        return [] if key is None else self.view.readers(key)

    def only_reader(self, name: str) -> int | None:
        """The one op reading ``name`` (once), when nothing else reads it and it does not
        escape; ``None`` otherwise."""
        if name in self.escaping:
            return None
        readers = self.readers(name)
        return readers[0][0] if len(readers) == 1 else None

    def constant(self, name: str) -> Tensor | None:
        """The constant named ``name`` (of the net or of an enclosing graph, when the net
        itself neither computes nor takes as input that name), else ``None``."""
        if not name:
            return None
        tensor = self.constants.get(name)
        if tensor is not None:
            return tensor
        if self.producer(name) is not None or name in self.inputs:
            return None
        return self.outer.get(name)

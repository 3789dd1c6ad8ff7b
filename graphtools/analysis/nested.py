"""What ops holding nested nets (``If``, ``Do``, ``While``, ``RecurrentNetwork``) read and
write in the enclosing workspace.

Nested nets read and write blobs *by name* at run time (``If`` and ``While`` run in the
enclosing workspace; ``Do`` and ``RecurrentNetwork`` bind names to it), and their ops are not
top-level ops of the net: the versioned view does not see them. Everything that must respect
them (the rewriter's value checks, liveness, verify's scoping, the passes) asks this module,
and treats a holder op as reading ``reads`` and writing ``writes`` where it stands.

The sets are conservative: a name an inner op reads counts as read from outside even when an
earlier inner op wrote it, and every name an inner op writes or a nested net declares as an
output counts as written outside.

``do_bindings`` reads which inner name of a ``Do`` stands for which outer blob, checked the way
Caffe2 checks them (the executor and the shape analysis both need it).

This is the one analysis the core itself needs, so it sits beside the IR (layer 2) and reads
ops only through their fields; it imports nothing from graphtools but the error types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphtools.errors import InvalidNetError

if TYPE_CHECKING:
    from graphtools.ir import Net, Op

__all__ = [
    "NestedAccess",
    "do_bindings",
    "names_in_nested_nets",
    "nested_access",
    "nested_accesses",
]


@dataclass(frozen=True)
class NestedAccess:
    """Blob names an op's nested nets read and write in the enclosing workspace."""

    reads: frozenset[str]
    writes: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        """Every name involved."""
        return self.reads | self.writes


def nested_access(op: Op) -> NestedAccess:
    """The names ``op``'s nested nets read and write (empty sets when it holds none)."""
    if not op.has_nested_nets():
        return NestedAccess(frozenset(), frozenset())
    reads: set[str] = set()
    writes: set[str] = set()
    for _, net in op.nested_nets():
        _collect(net, reads, writes)
    return NestedAccess(frozenset(reads), frozenset(writes))


def _collect(net: Net, reads: set[str], writes: set[str]) -> None:
    reads.update(net.external_inputs)
    writes.update(net.external_outputs)
    for inner in net:
        reads.update(inner.inputs)
        writes.update(inner.outputs)
        if inner.has_control_inputs():
            reads.update(inner.control_inputs)
        if inner.has_nested_nets():
            for _, nested in inner.nested_nets():
                _collect(nested, reads, writes)


def nested_accesses(net: Net) -> dict[int, NestedAccess]:
    """``{op index: access}`` for every top-level op of ``net`` holding nested nets, computed
    once per revision of the net (linear in the size of the nested nets)."""
    return net.cached("nested_accesses", _compute)


def _compute(net: Net) -> dict[int, NestedAccess]:
    return {index: nested_access(net[index]) for index in sorted(net.nested_op_indices())}


def names_in_nested_nets(net: Net) -> set[str]:
    """Every blob name used inside the nets held by ``net``'s ops, recursively."""
    return set(_names(access.names for access in nested_accesses(net).values()))


def _names(groups: Iterable[frozenset[str]]) -> Iterator[str]:
    for group in groups:
        yield from group


def do_bindings(op: Op) -> dict[str, str]:
    """``{inner name: outer name}`` of a Do op, checked the way Caffe2's ``DoOp`` checks them.

    Raises:
        InvalidNetError: the scope blob is not both last input and last output, inputs or
            outputs repeat, a binding is out of range or repeats a name, or an outer name is
            left unbound.
    """
    if not op.inputs or not op.outputs or op.inputs[-1] != op.outputs[-1]:
        raise InvalidNetError("Do needs its workspace blob as both last input and last output")
    inputs, outputs = op.inputs[:-1], op.outputs[:-1]
    if len(set(inputs)) != len(inputs) or len(set(outputs)) != len(outputs):
        raise InvalidNetError(f"Do inputs {list(inputs)} or outputs {list(outputs)} repeat a name")
    outer_names = [*inputs, *outputs]
    inner = [s.decode() if isinstance(s, bytes) else str(s) for s in op.arg("inner_blobs", ())]
    indices = [int(i) for i in op.arg("outer_blobs_idx", ())]
    if len(inner) != len(indices):
        raise InvalidNetError("Do needs as many inner_blobs as outer_blobs_idx")
    bindings: dict[str, str] = {}
    used: set[str] = set()
    for name, index in zip(inner, indices, strict=True):
        if name in bindings:
            raise InvalidNetError(f"Invalid blob bindings: redefinition of inner blob {name}")
        if not 0 <= index < len(outer_names):
            raise InvalidNetError(f"Invalid blob bindings: outer blob index {index} out of range")
        outer = outer_names[index]
        if outer in used:
            raise InvalidNetError(f"Reusage of outer blob name: {outer}")
        used.add(outer)
        bindings[name] = outer
    if used != set(outer_names):
        raise InvalidNetError(
            f"Not all outer blob names are used in blob bindings: {sorted(set(outer_names) - used)}"
        )
    return bindings

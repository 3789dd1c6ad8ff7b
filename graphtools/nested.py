"""What ops holding nested nets (Caffe2's ``If``, ``Do``, ``While``, ``RecurrentNetwork``; ONNX's
``If``, ``Loop``, ``Scan``) read and write in the enclosing net.

Nested nets read and write blobs *by name* at run time (``If`` and ``While`` run in the
enclosing workspace; ``Do`` and ``RecurrentNetwork`` bind names to it), and their ops are not
top-level ops of the net: the versioned view does not see them. Everything that must respect
them (the rewriter's value checks, liveness, verify's scoping, the passes) asks this module,
and treats a holder op as reading ``reads`` and writing ``writes`` where it stands.

The sets are conservative: a name an inner op reads counts as read from outside even when an
earlier inner op wrote it, and every name an inner op writes or a nested net declares as an
output counts as written outside. Except for ``RecurrentNetwork`` and
``RecurrentNetworkGradient``: their step nets run in step workspaces of their own, so what they
write stays there (Caffe2 writes a name outside only when the enclosing workspace already holds
it, which nets built by ``recurrent_net`` never do); the op's outputs are its only writes.

ONNX scopes names lexically instead: a sub-graph reads the outer values it names without
defining them (its formal inputs, its initializers and its nodes' outputs are its own), and
writes nothing outside (its outputs are bound to the holder's outputs, which the holder lists).
A nested net's dialect (``net.dialect``) says which rule applies.

``do_bindings`` reads which inner name of a ``Do`` stands for which outer blob, checked the way
Caffe2 checks them (the executor and the shape analysis both need it).

This is the one analysis the core itself needs, so it sits beside the IR (layer 2) and reads
ops only through their fields; it imports nothing from graphtools but the error types.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from graphtools._core import ONNX, NetLike, OpLike
from graphtools.errors import InvalidNetError
from graphtools.ssa import NO_VALUE

__all__ = [
    "NestedAccess",
    "do_bindings",
    "names_in_nested_nets",
    "names_in_net_text",
    "nested_access",
    "nested_accesses",
]

#: Ops whose nested nets run in workspaces of their own (their writes stay there).
_STEP_WORKSPACE_OPS = frozenset({"RecurrentNetwork", "RecurrentNetworkGradient"})


@dataclass(frozen=True)
class NestedAccess:
    """Blob names an op's nested nets read and write in the enclosing workspace."""

    reads: frozenset[str]
    writes: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        """Every name involved."""
        return self.reads | self.writes


def nested_access(op: OpLike) -> NestedAccess:
    """The names ``op``'s nested nets read and write (empty sets when it holds none)."""
    if not op.has_nested_nets():
        return NestedAccess(frozenset(), frozenset())
    reads: set[str] = set()
    writes: set[str] = set()
    for _, net in op.nested_nets():
        if net.dialect == ONNX:
            reads.update(free_names(net))
        else:
            _collect(net, reads, writes)
    for text in op.text_step_nets():
        reads.update(names_in_net_text(text))
    if op.type in _STEP_WORKSPACE_OPS:
        writes.clear()
    return NestedAccess(frozenset(reads), frozenset(writes))


_NAME_FIELDS = re.compile(
    rb"\b(?:input|output|external_input|external_output|control_input)\s*:\s*"
    rb"(?:\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)')"
)
"""A blob name in NetDef text: a name field and its quoted value."""


def names_in_net_text(text: bytes) -> set[str]:
    """Every blob name a NetDef given as text (a step net) names, its nested nets' included:
    a conservative superset (each counts as read), found without parsing the text, which is
    the serde layer's job and is checked when the net is loaded."""
    names = set()
    for double, single in _NAME_FIELDS.findall(text):
        raw = codecs.escape_decode(double or single)[0]
        names.add(raw.decode("utf-8", "replace"))
    return names


def _collect(net: NetLike, reads: set[str], writes: set[str]) -> None:
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
            for text in inner.text_step_nets():
                reads.update(names_in_net_text(text))


def free_names(net: NetLike) -> set[str]:
    """The outer names a lexically scoped net (an ONNX sub-graph) reads, recursively: every
    name read inside that the net does not define before the read."""
    defined = set(net.external_inputs) | net.defined_names()
    free: set[str] = set()
    for inner in net:
        free.update(name for name in inner.inputs if name not in defined)
        if inner.has_nested_nets():
            for _, nested in inner.nested_nets():
                free.update(name for name in free_names(nested) if name not in defined)
        defined.update(inner.outputs)
    free.discard(NO_VALUE)
    return free


def nested_accesses(net: NetLike) -> dict[int, NestedAccess]:
    """``{op index: access}`` for every top-level op of ``net`` holding nested nets, computed
    once per revision of the net (linear in the size of the nested nets)."""
    return net.cached("nested_accesses", _compute)


def _compute(net: NetLike) -> dict[int, NestedAccess]:
    return {index: nested_access(net[index]) for index in sorted(net.nested_op_indices())}


def names_in_nested_nets(net: NetLike) -> set[str]:
    """Every blob name used inside the nets held by ``net``'s ops, recursively."""
    return set(_names(access.names for access in nested_accesses(net).values()))


def _names(groups: Iterable[frozenset[str]]) -> Iterator[str]:
    for group in groups:
        yield from group


def do_bindings(op: OpLike) -> dict[str, str]:
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

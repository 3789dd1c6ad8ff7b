"""The Reshape sub-graphs PyTorch exports before ``FC`` that can go (``remove-reshape-for-fc``).

``x.view(x.size(0), -1)`` before a ``Linear`` exports as ``Shape -> Gather -> ExpandDims/
Unsqueeze -> Concat -> Reshape -> FC``. Caffe2's ``FC`` flattens its input itself, so the whole
sub-graph can go and the ``FC`` read the Reshape's data input directly. With ``FC``'s default
``axis=1`` this is exact: both nets give the same result whenever the original runs, and a net
whose Reshape was not a flatten fails loudly in ``FC``'s size check instead.

A Reshape ``(data, shape) -> (out, old_shape)`` is removed when:

* its shape input comes from a *shape chain*: the ops found by walking producers backward from
  the shape input, stopping at the data blob (same version) and at params (blobs no op
  produces, which must be known params); or it is a param itself; or the Reshape has a single
  input and a ``shape`` argument (ONNX exporters write ``x.view(-1, 800)`` so; detectron2
  asserts two inputs);
* every op reading ``out`` is an ``FC`` reading it as its data input with ``axis`` unset or 1,
  and there is at least one (detectron2 also removes a Reshape nothing reads);
* ``out`` is not an external output (detectron2 removes it and renames the net's output),
  ``old_shape`` is unused, and neither is named inside a nested net;
* ``data`` is not at version 0 (nothing shows it is not a param; detectron2 skips it too), and
  no op overwrites ``data`` before the last ``FC`` (the FC must read the same value);
* every chain op's outputs are read only by the chain or as the Reshape's shape, and are not
  external outputs; a chain shared with another Reshape's is skipped (ops are never kept
  half-used: the candidate is skipped instead).

The params only removed ops read are dropped from ``external_input``, from ``params`` (the
function) or from the init_net (the pass: its fill ops and external outputs). Which blobs are
params: the keys of ``params`` for the function (detectron2 takes every version-0 blob and
raises ``KeyError`` on the others; here such a chain is skipped), the init_net's outputs for the
pass (with no init_net no blob is a param).

Differences from detectron2 (semantics.md 6.6-6.8) besides the above: the caller's net is not
mutated, and chains are found by walking the SSA producers, not in a window of 15 ops around
the Reshape (which wraps to negative indices in longer nets and then misses the chain). Linear:
each op is walked by at most one Reshape's chain.

Example::

    before (external_output: y)                     after
      %0 Relu(x@0) -> r@1                             %0 Relu(x@0) -> r@1
      %1 Shape(r@1) -> s@1                            %1 FC(r@1, w@0, b@0) -> y@1
      %2 Gather(s@1, idx@0) -> n@1
      %3 Concat(n@1, minus_one@0) -> shape@1, split@1
      %4 Reshape(r@1, shape@1) -> flat@1, old@1
      %5 FC(flat@1, w@0, b@0) -> y@1
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Container
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from graphtools.ir import Net
from graphtools.nested import names_in_nested_nets
from graphtools.ssa import VersionedBlob
from graphtools.ssa_view import SSAView

__all__ = [
    "ReshapeRemoval",
    "find_reshape_removal",
    "init_ops_only_filling",
    "reshape_sub_graphs",
    "written_by",
]

_TYPE = operator.attrgetter("type")
_INPUTS = operator.attrgetter("inputs")
_OUTPUTS = operator.attrgetter("outputs")


@dataclass(frozen=True)
class _Chain:
    """The shape chain of one Reshape, as walked; ``leaves`` are SSA view keys."""

    reshape: int
    ops: list[int]
    leaves: list[int]
    shared: bool


def _shape_chains(net: Net, view: SSAView) -> list[_Chain]:
    """The shape chain of every Reshape with one or two inputs, in op order.

    An op reached by an earlier Reshape's walk (or a Reshape itself) is not walked again: the
    later chain is marked ``shared``. So every op is walked once and the whole is linear.
    """
    claimed: set[int] = set()
    chains: list[_Chain] = []
    for index in itertools.compress(itertools.count(), map("Reshape".__eq__, map(_TYPE, net))):
        if len(net[index].inputs) not in (1, 2):
            continue
        claimed.add(index)
        ops: list[int] = []
        leaves: list[int] = []
        shared = False
        if len(net[index].inputs) == 2:
            data, shape = view.input_keys(index)
            pending = [shape]
            seen = {shape}
            mine: set[int] = set()
            while pending:
                key = pending.pop()
                if key == data:
                    continue
                producer = view.producer_of(key)
                if producer is None:
                    leaves.append(key)
                    continue
                if producer in claimed:
                    shared = shared or producer not in mine
                    continue
                claimed.add(producer)
                mine.add(producer)
                ops.append(producer)
                for item in view.input_keys(producer):
                    if item not in seen:
                        seen.add(item)
                        pending.append(item)
        chains.append(_Chain(index, sorted(ops), leaves, shared))
    return chains


def reshape_sub_graphs(net: Net) -> list[list[int]]:
    """``[*shape chain ops, reshape]`` for every Reshape of ``net``, in op order: detectron2's
    ``identify_reshape_sub_graph`` on the IR (see ``graphtools.compat.reshape``)."""
    return [[*chain.ops, chain.reshape] for chain in _shape_chains(net, net.ssa())]


@dataclass(frozen=True)
class ReshapeRemoval:
    """What ``find_reshape_removal`` found.

    Attributes:
        reshapes: indices of the removed Reshape ops.
        removed: every op to drop (Reshapes and their chains).
        rewires: ``(reshaped, data)`` pairs: the FC ops reading a removed Reshape's output read
            its data input instead.
        params: params no remaining op reads, to drop (first-seen order).
    """

    reshapes: list[int]
    removed: frozenset[int]
    rewires: list[tuple[VersionedBlob, VersionedBlob]]
    params: list[str]


def _fc_readers(net: Net, readers: list[tuple[int, int]]) -> bool:
    """Whether every reader is an FC reading the blob as its data input, with axis 1."""
    return bool(readers) and all(
        position == 0 and net[index].type == "FC" and net[index].arg("axis", 1) == 1
        for index, position in readers
    )


def find_reshape_removal(
    net: Net, params_among: Callable[[set[str]], AbstractSet[str]]
) -> ReshapeRemoval:
    """Find the Reshape sub-graphs of ``net`` to remove (rules in the module docstring).

    Args:
        net: the predict_net.
        params_among: which of some blob names that no op produces are params (filled by the
            init_net); asked once, of the leaves of every chain that passes the other rules.
    """
    view = net.ssa()
    external = {key for key in map(view.key, view.external_outputs) if key is not None}
    nested = names_in_nested_nets(net)
    candidates: list[tuple[int, list[str], set[int], int, int]] = []
    for chain in _shape_chains(net, view):
        index = chain.reshape
        op = net[index]
        data = view.input_keys(index)[0]
        outs = view.output_keys(index)
        if chain.shared or not view.version_of(data) or len(outs) not in (1, 2):
            continue
        if len(op.inputs) == 1 and not op.has_arg("shape"):
            continue
        output = outs[0]
        readers = view.readers(output)
        if not _fc_readers(net, readers) or any(
            key in external or view.name_of(key) in nested or view.readers(key) for key in outs[1:]
        ):
            continue
        if output in external or view.name_of(output) in nested:
            continue
        overwritten_at = view.next_write(data)
        if overwritten_at is not None and any(reader > overwritten_at for reader, _ in readers):
            continue
        if any(view.version_of(leaf) for leaf in chain.leaves):
            continue
        inside = set(chain.ops)
        if not _chain_is_private(net, chain, inside, index, view, external, nested):
            continue
        leaves = [view.name_of(leaf) for leaf in chain.leaves]
        candidates.append((index, leaves, inside, output, data))
    known = params_among({name for _, leaves, _, _, _ in candidates for name in leaves})
    reshapes: list[int] = []
    removed: set[int] = set()
    rewires: list[tuple[VersionedBlob, VersionedBlob]] = []
    params: dict[str, None] = {}
    for index, leaves, inside, output, data in candidates:
        if not all(name in known for name in leaves):
            continue
        reshapes.append(index)
        removed.update(inside)
        removed.add(index)
        rewires.append((view.blob(output), view.blob(data)))
        params.update(dict.fromkeys(leaves))
    outputs = set(net.external_outputs)
    unused = [
        name
        for name in params
        if name not in outputs
        and name not in nested
        and all(reader in removed for reader, _ in _readers_of(view, (name, 0)))
    ]
    return ReshapeRemoval(reshapes, frozenset(removed), rewires, unused)


def _readers_of(view: SSAView, blob: VersionedBlob) -> list[tuple[int, int]]:
    key = view.key(blob)
    return [] if key is None else view.readers(key)


def _chain_is_private(
    net: Net,
    chain: _Chain,
    inside: set[int],
    reshape: int,
    view: SSAView,
    external: Container[int],
    nested: Container[str],
) -> bool:
    """Whether the chain's outputs feed only the chain and the Reshape's shape input."""
    for index in chain.ops:
        if net[index].has_nested_nets():
            return False
        for key in view.output_keys(index):
            if key in external or view.name_of(key) in nested:
                return False
            for reader, position in view.readers(key):
                if reader not in inside and (reader != reshape or position != 1):
                    return False
    return True


def written_by(init: Net | None) -> Callable[[set[str]], AbstractSet[str]]:
    """Which of some names ``init`` writes (``Net.written_among``: one scan of its outputs,
    no set of them all built); none without an init_net."""
    if init is None:
        return lambda names: set()
    return init.written_among


def init_ops_only_filling(init: Net, names: set[str]) -> set[int]:
    """Indices of the init_net ops that only fill ``names`` (and that no kept op reads).

    One backward sweep by blob name (no SSA view: init nets are flat lists of fills, and a
    name-level rule is the conservative one when a param is written twice).
    """
    ops = list(init)
    outputs = list(map(_OUTPUTS, ops))
    if names.isdisjoint(itertools.chain.from_iterable(map(_INPUTS, ops))):
        # No init op reads a dropped name (fill-only nets): no sweep needed.
        filling = itertools.compress(itertools.count(), map(names.issuperset, outputs))
        dropped = {index for index in filling if outputs[index]}
    else:
        read_by_kept: set[str] = set()
        dropped = set()
        for index in range(len(ops) - 1, -1, -1):
            outs = outputs[index]
            if outs and names.issuperset(outs) and read_by_kept.isdisjoint(outs):
                dropped.add(index)
            else:
                read_by_kept.update(ops[index].inputs)
    return dropped

"""Graph views of a net: sub-graph boundaries and a networkx graph of ops and versioned blobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import networkx as nx

from graphtools._gc import paused_gc
from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net
from graphtools.ssa import OpSSA, VersionedBlob

__all__ = [
    "get_sub_graph_external_input_output",
    "names_in_nested_nets",
    "next_write_index",
    "next_writes",
    "to_networkx",
]


def get_sub_graph_external_input_output(
    net: Net | caffe2_pb2.NetDef, op_indices: Iterable[int]
) -> tuple[list[VersionedBlob], list[VersionedBlob]]:
    """detectron2's helper: the versioned blobs entering and leaving a set of ops.

    External inputs are the sub-graph's versioned inputs that no sub-graph op produces
    (deduplicated, first-seen order). External outputs are the sub-graph's versioned outputs read
    by an op outside it or declared as the net's external outputs (order of the outputs). Linear
    in the size of the sub-graph plus its consumers, unlike detectron2's quadratic scan.
    """
    view = as_net(net).ssa()
    chosen = list(dict.fromkeys(op_indices))
    inside = set(chosen)
    produced = {blob for index in chosen for blob in view.ssa[index][1]}
    ext_inputs = list(
        dict.fromkeys(
            blob for index in chosen for blob in view.ssa[index][0] if blob not in produced
        )
    )
    net_outputs = set(view.external_outputs)
    consumers = view.consumers
    ext_outputs = []
    for index in chosen:
        for blob in view.ssa[index][1]:
            read_outside = any(reader not in inside for reader, _ in consumers.get(blob, ()))
            if read_outside or blob in net_outputs:
                ext_outputs.append(blob)
    return ext_inputs, list(dict.fromkeys(ext_outputs))


def to_networkx(net: Net | caffe2_pb2.NetDef) -> nx.MultiDiGraph:
    """A networkx graph with a node per op (``int`` index) and per versioned blob (tuple).

    Op nodes carry ``type``; blob nodes carry ``name`` and ``version``. Edges run blob -> op for
    reads (``position`` = input slot) and op -> blob for writes (``position`` = output slot), so
    an op reading one blob twice has two parallel edges.
    """
    view = as_net(net).ssa()
    graph: nx.MultiDiGraph = nx.MultiDiGraph()
    for index, op in enumerate(view.net):
        graph.add_node(index, kind="op", type=op.type)
        ins, outs = view.ssa[index]
        for position, blob in enumerate(ins):
            if blob not in graph:
                graph.add_node(blob, kind="blob", name=blob[0], version=blob[1])
            graph.add_edge(blob, index, position=position)
        for position, blob in enumerate(outs):
            if blob not in graph:
                graph.add_node(blob, kind="blob", name=blob[0], version=blob[1])
            graph.add_edge(index, blob, position=position)
    return graph


def names_in_nested_nets(net: Net) -> set[str]:
    """Every blob name used inside the nets held by ``net``'s ops, recursively.

    Nested nets (``If``'s ``then_net``, ``RecurrentNetwork``'s ``step_net``) read and write the
    enclosing workspace by name, invisibly to the versioned view: rewrites leave those names be.
    """
    names: set[str] = set()
    for index in sorted(net.nested_op_indices()):
        names.update(_nested_names(net[index]))
    return names


def _nested_names(op: Op) -> Iterator[str]:
    for _, nested in op.nested_nets():
        yield from nested.external_inputs
        yield from nested.external_outputs
        for inner in nested:
            yield from inner.inputs
            yield from inner.outputs
            yield from inner.control_inputs
            if inner.has_nested_nets():
                yield from _nested_names(inner)


def next_write_index(ssa: Sequence[OpSSA]) -> dict[VersionedBlob, int]:
    """``{versioned blob: index of the next op writing the same name}`` for an unseeded SSA.

    A blob missing from the map is never overwritten. An op reading ``(a, v)`` sees the same
    value as at the blob's first reader iff its index is at most ``next_write[(a, v)]`` (an op
    reads before it writes). Versions start at 0, as in ``net.ssa()``: an op writing ``(a, v)``
    once overwrites ``(a, v - 1)``; one listing ``a`` k times overwrites ``(a, v - k)``.
    """
    following: dict[VersionedBlob, int] = {}
    with paused_gc():
        for index, (_, outs) in enumerate(ssa):
            if len(outs) == 1:
                name, version = outs[0]
                following[(name, version - 1)] = index
                continue
            counts = Counter(name for name, _ in outs)
            for name, version in dict(outs).items():
                following[(name, version - counts[name])] = index
    return following


def next_writes(net: Net) -> dict[VersionedBlob, int]:
    """``next_write_index`` of ``net``'s SSA view, computed once per revision of the net."""
    return net.cached("next_write_index", lambda current: next_write_index(current.ssa().ssa))

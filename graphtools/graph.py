"""Graph views of a net: sub-graph boundaries and a networkx graph of ops and versioned blobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from graphtools._gc import paused_gc
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2
from graphtools.ssa import OpSSA, VersionedBlob, get_consumer_map, get_ssa

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "get_sub_graph_external_input_output",
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
    in the size of the sub-graph plus its consumers, unlike detectron2's quadratic scan. ``net``
    is an IR net (its cached SSA view) or a ``NetDef`` (read as ``get_ssa`` reads it).
    """
    if isinstance(net, Net):
        view = net.ssa()
        ssa: Sequence[OpSSA] = view.ssa
        net_outputs = set(view.external_outputs)
        consumers: Mapping[VersionedBlob, list[tuple[int, int]]] = view.consumers
    else:
        ssa, versions = get_ssa(net)
        net_outputs = {(name, versions.get(name, 0)) for name in net.external_output}
        consumers = get_consumer_map(ssa)
    chosen = list(dict.fromkeys(op_indices))
    inside = set(chosen)
    produced = {blob for index in chosen for blob in ssa[index][1]}
    ext_inputs = list(
        dict.fromkeys(blob for index in chosen for blob in ssa[index][0] if blob not in produced)
    )
    ext_outputs = []
    for index in chosen:
        for blob in ssa[index][1]:
            read_outside = any(reader not in inside for reader, _ in consumers.get(blob, ()))
            if read_outside or blob in net_outputs:
                ext_outputs.append(blob)
    return ext_inputs, list(dict.fromkeys(ext_outputs))


def to_networkx(net: Net) -> nx.MultiDiGraph:
    """A networkx graph with a node per op (``int`` index) and per versioned blob (tuple).

    Op nodes carry ``type``; blob nodes carry ``name`` and ``version``. Edges run blob -> op for
    reads (``position`` = input slot) and op -> blob for writes (``position`` = output slot), so
    an op reading one blob twice has two parallel edges.
    """
    import networkx  # here, not at the top: importing it costs a third of a CLI start

    view = net.ssa()
    graph: nx.MultiDiGraph = networkx.MultiDiGraph()
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

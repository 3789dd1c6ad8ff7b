"""Graph views: detectron2's sub-graph boundaries and the networkx graph of a net."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

# The drop-in forms, which take NetDefs as well as IR nets.
from graphtools.compat import get_sub_graph_external_input_output, to_networkx
from graphtools.ir import Net, Op
from graphtools.serde.codec import net_to_netdef
from graphtools.ssa import VersionedBlob, get_op_ids_in_path, get_ssa


def _diamond() -> Net:
    return Net(
        [
            Op("Relu", ["x"], ["a"]),  # 0
            Op("Relu", ["a"], ["b"]),  # 1
            Op("Relu", ["a"], ["c"]),  # 2
            Op("Add", ["b", "c"], ["d"]),  # 3
            Op("Relu", ["d"], ["d"]),  # 4
            Op("Relu", ["x"], ["unused"]),  # 5
        ],
        ["x"],
        ["d"],
    )


def _reference(net: Net, indices: Sequence[int]) -> tuple[list[VersionedBlob], list[VersionedBlob]]:
    """semantics.md 6.5 written out the slow way."""
    ssa, versions = get_ssa(net)
    all_inputs = [blob for i in indices for blob in ssa[i][0]]
    all_outputs = [blob for i in indices for blob in ssa[i][1]]
    ext_inputs = list(dict.fromkeys(b for b in all_inputs if b not in all_outputs))
    other_inputs = [blob for i in range(len(ssa)) if i not in indices for blob in ssa[i][0]]
    other_inputs += [(name, versions.get(name, 0)) for name in net.external_outputs]
    ext_outputs = list(dict.fromkeys(b for b in all_outputs if b in other_inputs))
    return ext_inputs, ext_outputs


def test_sub_graph_boundaries() -> None:
    net = _diamond()
    assert get_sub_graph_external_input_output(net, [1, 2, 3]) == ([("a", 1)], [("d", 1)])
    assert get_sub_graph_external_input_output(net, [3, 4]) == (
        [("b", 1), ("c", 1)],
        [("d", 2)],
    )
    assert get_sub_graph_external_input_output(net, [0]) == ([("x", 0)], [("a", 1)])
    assert get_sub_graph_external_input_output(net, [4]) == ([("d", 1)], [("d", 2)])
    assert get_sub_graph_external_input_output(net, [5]) == ([("x", 0)], [])
    assert get_sub_graph_external_input_output(net, []) == ([], [])
    everything = range(len(net))
    assert get_sub_graph_external_input_output(net, everything) == ([("x", 0)], [("d", 2)])


def test_sub_graph_orders_and_netdef_input() -> None:
    net = _diamond()
    # inputs in first-seen order over the given op order, duplicates dropped
    assert get_sub_graph_external_input_output(net, [2, 1]) == (
        [("a", 1)],
        [("c", 1), ("b", 1)],
    )
    assert get_sub_graph_external_input_output(net_to_netdef(net), [3, 4]) == (
        [("b", 1), ("c", 1)],
        [("d", 2)],
    )


def test_sub_graph_reading_a_blob_twice() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Mul", ["y", "y"], ["z"])], ["x"], ["z"])
    assert get_sub_graph_external_input_output(net, [1]) == ([("y", 1)], [("z", 1)])


@st.composite
def random_nets(draw: st.DrawFn) -> Net:
    names = st.sampled_from(["a", "b", "c", "d"])
    ops = [
        Op("Op", draw(st.lists(names, max_size=3)), draw(st.lists(names, min_size=1, max_size=2)))
        for _ in range(draw(st.integers(0, 8)))
    ]
    return Net(ops, draw(st.lists(names, max_size=2)), draw(st.lists(names, max_size=2)))


@settings(max_examples=60, deadline=None)
@given(random_nets(), st.data())
def test_sub_graph_matches_reference(net: Net, data: st.DataObject) -> None:
    indices = data.draw(st.lists(st.integers(0, max(len(net) - 1, 0)), max_size=len(net)))
    chosen = list(dict.fromkeys(indices))
    assert get_sub_graph_external_input_output(net, chosen) == _reference(net, chosen)


def test_to_networkx_nodes_and_edges() -> None:
    net = Net(
        [Op("Relu", ["x"], ["y"]), Op("Mul", ["y", "y"], ["y"]), Op("Split", ["y"], ["p", "q"])],
        ["x"],
        ["p"],
    )
    graph = to_networkx(net)
    assert isinstance(graph, nx.MultiDiGraph)
    assert set(graph.nodes) == {0, 1, 2, ("x", 0), ("y", 1), ("y", 2), ("p", 1), ("q", 1)}
    assert graph.nodes[1] == {"kind": "op", "type": "Mul"}
    assert graph.nodes[("y", 2)] == {"kind": "blob", "name": "y", "version": 2}
    assert graph.number_of_edges(("y", 1), 1) == 2  # read twice: parallel edges
    reads = graph.out_edges(("y", 1), data="position")
    assert sorted(position for _, target, position in reads if target == 1) == [0, 1]
    assert graph.number_of_edges() == 1 + 1 + 2 + 1 + 1 + 2
    assert list(graph.successors(2)) == [("p", 1), ("q", 1)]
    assert graph.edges[2, ("q", 1), 0]["position"] == 1
    assert nx.is_directed_acyclic_graph(graph)
    assert to_networkx(net_to_netdef(net)).edges == graph.edges


@settings(max_examples=60, deadline=None)
@given(random_nets())
def test_networkx_ancestors_match_op_ids_in_path(net: Net) -> None:
    ssa, versions = get_ssa(net)
    graph = to_networkx(net)
    assert nx.is_directed_acyclic_graph(graph)
    for name in {name for op in net for name in op.outputs}:
        blob = (name, versions[name])
        ancestors = sorted(n for n in nx.ancestors(graph, blob) if isinstance(n, int))
        assert get_op_ids_in_path(ssa, versions, [], [name]) == ancestors


def test_next_write_index_with_repeated_outputs() -> None:
    from graphtools.graph import next_write_index, next_writes

    net = Net(
        [Op("Split", ["x"], ["y", "y"]), Op("Relu", ["y"], ["y"]), Op("Relu", ["x"], ["z"])],
        ["x"],
        ["y", "z"],
    )
    # Op 0 writes y twice (y@0 -> y@2); op 1 overwrites y@2; nothing overwrites x or z.
    assert next_write_index(net.ssa().ssa) == {("y", 0): 0, ("y", 2): 1, ("z", 0): 2}
    assert next_writes(net) is next_writes(net)  # cached per revision

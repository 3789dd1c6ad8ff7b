"""Versioned-blob SSA: Caffe2's ``get_ssa`` and helpers, detectron2's maps, the cached view."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_to_netdef
from graphtools.ssa import (
    get_consumer_map,
    get_op_ids_in_path,
    get_output_producers,
    get_producer_map,
    get_ssa,
    get_undefined_blobs,
)


def _net(
    ops: list[tuple[str, list[str], list[str]]],
    ext_in: Sequence[str] = (),
    ext_out: Sequence[str] = (),
) -> Net:
    return Net([Op(t, i, o) for t, i, o in ops], ext_in, ext_out)


# -- get_ssa on the cases of semantics.md section 1 -----------------------------------------


def test_in_place_ops_read_k_write_k_plus_1() -> None:
    net = _net([("Relu", ["x"], ["x"]), ("Relu", ["x"], ["x"]), ("Sum", ["x", "x"], ["y"])], ["x"])
    ssa, versions = get_ssa(net)
    assert ssa == [
        ([("x", 0)], [("x", 1)]),
        ([("x", 1)], [("x", 2)]),
        ([("x", 2), ("x", 2)], [("y", 1)]),
    ]
    assert versions == {"x": 2, "y": 1}


def test_first_write_is_version_1() -> None:
    ssa, versions = get_ssa(_net([("ConstantFill", [], ["c"])]))
    assert ssa == [([], [("c", 1)])]
    assert versions == {"c": 1}


def test_undeclared_input_with_external_inputs_is_not_inserted() -> None:
    ssa, versions = get_ssa(_net([("Add", ["a", "u"], ["b"])], ["a"]))
    assert ssa == [([("a", 0), ("u", 0)], [("b", 1)])]
    assert versions == {"a": 0, "b": 1}


def test_undeclared_input_without_external_inputs_is_inserted() -> None:
    ssa, versions = get_ssa(_net([("Add", ["a", "u"], ["b"]), ("Relu", ["b"], ["u"])]))
    assert ssa == [([("a", 0), ("u", 0)], [("b", 1)]), ([("b", 1)], [("u", 1)])]
    assert versions == {"a": 0, "u": 1, "b": 1}
    assert list(versions) == ["a", "u", "b"]


def test_repeated_outputs_share_the_final_version() -> None:
    ssa, versions = get_ssa(_net([("Split", ["x"], ["y", "y"]), ("Relu", ["y"], ["z"])], ["x"]))
    assert ssa[0] == ([("x", 0)], [("y", 2), ("y", 2)])
    assert ssa[1] == ([("y", 2)], [("z", 1)])
    assert versions["y"] == 2


def test_versions_seeded_from_init_net() -> None:
    init = _net([("GivenTensorFill", [], ["w"]), ("GivenTensorFill", [], ["b"])])
    _, init_versions = get_ssa(init)
    predict = _net([("FC", ["data", "w", "b"], ["y"]), ("Relu", ["w"], ["w"])], ["data", "w", "b"])
    seed = dict(init_versions)
    ssa, versions = get_ssa(predict, seed)
    assert versions is seed  # mutated in place and returned, as Caffe2 does
    assert ssa == [
        ([("data", 0), ("w", 1), ("b", 1)], [("y", 1)]),
        ([("w", 1)], [("w", 2)]),
    ]
    assert versions == {"w": 2, "b": 1, "data": 0, "y": 1}
    assert get_undefined_blobs(ssa) == {"data"}


def test_get_ssa_accepts_netdef_net_and_proto_holders() -> None:
    net = _net(
        [("Relu", ["x"], ["x"]), ("Split", ["x"], ["y", "y"]), ("Add", ["y", "q"], ["x"])], ["x"]
    )
    netdef = net_to_netdef(net)

    class CoreNetLike:
        def Proto(self) -> caffe2_pb2.NetDef:  # caffe2's core.Net spelling
            return netdef

    expected = get_ssa(net)
    assert get_ssa(netdef) == expected
    assert get_ssa(CoreNetLike()) == expected  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="NetDef"):
        get_ssa([netdef])  # type: ignore[arg-type]


# -- helpers --------------------------------------------------------------------------------


def _diamond() -> Net:
    return _net(
        [
            ("Relu", ["x"], ["a"]),  # 0
            ("Relu", ["a"], ["b"]),  # 1
            ("Relu", ["a"], ["c"]),  # 2
            ("Add", ["b", "c"], ["d"]),  # 3
            ("Relu", ["d"], ["d"]),  # 4
            ("Relu", ["x"], ["unused"]),  # 5
        ],
        ["x"],
        ["d"],
    )


def test_get_undefined_blobs_names_read_at_version_0() -> None:
    ssa, _ = get_ssa(_net([("Add", ["a", "b"], ["b"]), ("Relu", ["b"], ["c"])], ["a"]))
    assert get_undefined_blobs(ssa) == {"a", "b"}
    assert get_undefined_blobs([]) == set()


def test_get_output_producers() -> None:
    ssa, _ = get_ssa(_net([("Split", ["x"], ["y", "y"]), ("Relu", ["y"], ["y"])], ["x"]))
    assert get_output_producers(ssa) == {("y", 2): 0, ("y", 3): 1}


def test_get_op_ids_in_path() -> None:
    ssa, versions = get_ssa(_diamond())
    assert get_op_ids_in_path(ssa, versions, [], ["d"]) == [0, 1, 2, 3, 4]
    assert get_op_ids_in_path(ssa, versions, ["a"], ["d"]) == [1, 2, 3, 4]
    assert get_op_ids_in_path(ssa, versions, ["b", "c"], ["d"]) == [3, 4]
    assert get_op_ids_in_path(ssa, versions, ["x"], ["unused", "b"]) == [0, 1, 5]
    assert get_op_ids_in_path(ssa, versions, ["d"], ["d"]) == []
    assert get_op_ids_in_path(ssa, versions, [], ["x"]) == []
    with pytest.raises(KeyError):
        get_op_ids_in_path(ssa, versions, [], ["nowhere"])
    with pytest.raises(KeyError):
        get_op_ids_in_path(ssa, versions, ["nowhere"], ["d"])


def test_get_op_ids_in_path_uses_latest_versions() -> None:
    # 'x' is overwritten in place: the latest x (version 1) stops the walk, x@0 does not.
    ssa, versions = get_ssa(_net([("Relu", ["x"], ["x"]), ("Relu", ["x"], ["y"])], ["x"]))
    assert get_op_ids_in_path(ssa, versions, ["x"], ["y"]) == [1]
    assert get_op_ids_in_path(ssa, {"x": 0, "y": 1}, ["x"], ["y"]) == [0, 1]


def test_get_producer_map_keeps_last_position() -> None:
    ssa, _ = get_ssa(_net([("Split", ["x"], ["y", "z", "y"]), ("Relu", ["y"], ["w"])], ["x"]))
    assert get_producer_map(ssa) == {("y", 2): (0, 2), ("z", 1): (0, 1), ("w", 1): (1, 0)}


def test_get_consumer_map_is_a_defaultdict() -> None:
    ssa, _ = get_ssa(_net([("Add", ["x", "x"], ["y"]), ("Relu", ["x"], ["z"])], ["x"]))
    consumers = get_consumer_map(ssa)
    assert isinstance(consumers, defaultdict)
    assert consumers[("x", 0)] == [(0, 0), (0, 1), (1, 0)]
    assert consumers[("y", 1)] == []
    assert ("y", 1) in consumers  # looking up inserts, as upstream


# -- the cached view ------------------------------------------------------------------------


def test_ssa_view_lookups() -> None:
    net = _diamond()
    view = net.ssa()
    ssa, versions = get_ssa(net)
    assert view.ssa == ssa
    assert view.versions == versions
    assert view.external_inputs == [("x", 0)]
    assert view.external_outputs == [("d", 2)]
    assert view.producer(("d", 2)) == 4
    assert view.producer(("x", 0)) is None
    assert view.consumer_ops(("a", 1)) == [1, 2]
    assert view.consumer_ops(("nothing", 0)) == []
    assert view.inputs_of(3) == [("b", 1), ("c", 1)]
    assert view.outputs_of(4) == [("d", 2)]
    assert view.latest("d") == ("d", 2)
    assert view.latest("never") == ("never", 0)
    assert type(view.consumers) is dict


def test_consumer_ops_lists_each_op_once() -> None:
    view = _net([("Add", ["x", "x"], ["y"]), ("Relu", ["x"], ["z"])], ["x"]).ssa()
    assert view.consumer_ops(("x", 0)) == [0, 1]
    assert view.consumers[("x", 0)] == [(0, 0), (0, 1), (1, 0)]


# -- properties on random nets --------------------------------------------------------------

NAMES = ["a", "b", "c", "d", "e"]


@st.composite
def random_nets(draw: st.DrawFn) -> Net:
    ops = []
    for _ in range(draw(st.integers(0, 10))):
        inputs = draw(st.lists(st.sampled_from(NAMES), max_size=3))
        if inputs and draw(st.booleans()):
            outputs = [inputs[0]]  # in place
        else:
            outputs = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3))
        ops.append(Op("Op", inputs, outputs))
    external = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    return Net(ops, external, draw(st.lists(st.sampled_from(NAMES), max_size=2)))


@settings(max_examples=120, deadline=None)
@given(random_nets(), st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3), max_size=2))
def test_ssa_invariants(net: Net, seed: dict[str, int]) -> None:
    start = dict(seed)
    ssa, versions = get_ssa(net, dict(seed))
    assert len(ssa) == len(net)
    current = {name: start.get(name, 0) for name in NAMES}
    producers: dict[tuple[str, int], int] = {}
    for index, (op, (ins, outs)) in enumerate(zip(net, ssa, strict=True)):
        assert [name for name, _ in ins] == list(op.inputs)
        assert [name for name, _ in outs] == list(op.outputs)
        for blob in ins:
            # read before this op's writes: the value left by an earlier op, or the start value
            assert blob == (blob[0], current[blob[0]])
            assert blob[1] == start.get(blob[0], 0) or producers[blob] < index
        for name, count in Counter(op.outputs).items():
            current[name] += count  # consecutive: each write bumps by one
        for blob in outs:
            assert blob == (blob[0], current[blob[0]])
            assert producers.setdefault(blob, index) == index  # produced by one op only
    written = {name for op in net for name in op.outputs}
    for name in NAMES:
        if name in written:
            assert versions[name] == current[name]
    implicit = {name for op in net for name in op.inputs} if not net.external_inputs else set()
    assert set(versions) == set(seed) | set(net.external_inputs) | written | implicit
    assert get_output_producers(ssa) == producers
    assert get_undefined_blobs(ssa) == {n for ins, _ in ssa for n, v in ins if v == 0}


@settings(max_examples=60, deadline=None)
@given(random_nets())
def test_view_agrees_with_maps(net: Net) -> None:
    view = net.ssa()
    ssa, versions = get_ssa(net_to_netdef(net))
    assert view.ssa == ssa
    assert view.versions == versions
    assert view.producers == get_producer_map(ssa)
    assert view.consumers == dict(get_consumer_map(ssa))
    for blob, (index, _) in view.producers.items():
        assert view.producer(blob) == index
    for blob, uses in view.consumers.items():
        assert view.consumer_ops(blob) == list(dict.fromkeys(i for i, _ in uses))
    assert view.external_outputs == [(n, versions.get(n, 0)) for n in net.external_outputs]

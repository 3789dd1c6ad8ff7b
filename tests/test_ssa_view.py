"""SSAView: its integer-key API agrees with Caffe2's SSA, and views derived from an edit agree
with views built from scratch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.graph import next_write_index
from graphtools.ir import Net, Op
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.ssa import get_consumer_map, get_producer_map, get_ssa
from graphtools.ssa_view import SSAView

MonkeyPatch = pytest.MonkeyPatch

NAMES = ["a", "b", "c", "d", "e"]


@st.composite
def random_nets(draw: st.DrawFn) -> Net:
    ops = []
    for _ in range(draw(st.integers(0, 10))):
        inputs = draw(st.lists(st.sampled_from(NAMES), max_size=3))
        if inputs and draw(st.booleans()):
            outputs = [inputs[0]]  # in place
        else:
            outputs = draw(st.lists(st.sampled_from(NAMES), max_size=3))
        ops.append(Op("Op", inputs, outputs))
    external = draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    return Net(ops, external, draw(st.lists(st.sampled_from(NAMES), max_size=2)))


def assert_view_is_caffe2s(view: SSAView, net: Net) -> None:
    """Every part of ``view`` says what ``get_ssa`` and the detectron2 maps say of ``net``."""
    ssa, versions = get_ssa(net_to_netdef(net))
    assert view.ssa == ssa
    assert view.versions == versions
    assert list(view.versions) == list(versions)  # Caffe2's insertion order, for export_pair
    assert view.external_outputs == [(n, versions.get(n, 0)) for n in net.external_outputs]
    assert view.external_inputs == [(n, 0) for n in net.external_inputs]
    assert view.producers == get_producer_map(ssa)
    assert view.consumers == dict(get_consumer_map(ssa))
    following = next_write_index(ssa)
    blobs = {blob for ins, outs in ssa for blob in (*ins, *outs)}
    keys = {view.key(blob) for blob in blobs}
    assert len(keys) == len(blobs) and all(0 <= key < view.num_keys for key in keys)  # type: ignore[operator]
    for index, (ins, outs) in enumerate(ssa):
        assert [view.blob(key) for key in view.input_keys(index)] == ins
        assert [view.blob(key) for key in view.output_keys(index)] == outs
        assert view.inputs_of(index) == ins and view.outputs_of(index) == outs
    producers, positions = view.read_sources()
    producer_map = get_producer_map(ssa)
    reads = [blob for ins, _ in ssa for blob in ins]
    assert list(producers) == [producer_map.get(blob, (-1,))[0] for blob in reads]
    assert list(positions) == [  # the first output position writing it
        ssa[producer_map[blob][0]][1].index(blob) if blob in producer_map else -1 for blob in reads
    ]
    for blob in blobs:
        key = view.key(blob)
        assert key is not None and view.blob(key) == blob
        assert view.name_of(key) == blob[0] and view.version_of(key) == blob[1]
        assert view.readers(key) == view.consumers.get(blob, [])
        producer = view.producers.get(blob)
        assert view.producer_of(key) == (None if producer is None else producer[0])
        assert view.next_write(key) == following.get(blob)
    assert view.key(("never-used", 0)) is None
    for name in NAMES:
        assert view.latest(name) == (name, versions.get(name, 0))


@settings(max_examples=150, deadline=None)
@given(random_nets())
def test_built_view_is_caffe2s_ssa(net: Net) -> None:
    assert_view_is_caffe2s(net.ssa(), net)


@settings(max_examples=200, deadline=None)
@given(random_nets(), st.data())
def test_view_derived_from_an_edit_is_the_rebuilt_view(net: Net, data: st.DataObject) -> None:
    before = net.ssa()
    indices = range(len(net))
    removed = data.draw(st.sets(st.sampled_from(indices)) if len(net) else st.just(set()))
    rewired = data.draw(
        st.dictionaries(
            st.sampled_from(indices),
            st.lists(st.sampled_from([*NAMES, "fresh"]), max_size=3),
            max_size=3,
        )
        if len(net)
        else st.just({})
    )
    net.edit_ops(removed, rewired)
    derived = net.ssa()
    assert derived is not before or (not removed and not rewired)
    assert_view_is_caffe2s(derived, net)
    # The old view is a snapshot: the edit did not change it.
    assert before.revision < net.revision or (not removed and not rewired)


@settings(max_examples=100, deadline=None)
@given(random_nets(), st.data())
def test_views_derived_through_removals_and_interface_edits(net: Net, data: st.DataObject) -> None:
    net.ssa()
    if len(net):
        net.remove_ops(data.draw(st.sets(st.sampled_from(range(len(net))), max_size=3)))
    net.ssa()
    net.set_external_inputs(data.draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)))
    net.ssa()
    net.set_external_outputs(data.draw(st.lists(st.sampled_from([*NAMES, "new"]), max_size=2)))
    assert_view_is_caffe2s(net.ssa(), net)


LONG_NAMES = ["param_w", "param_b", "data_x", "feat_y", "out_z"]


def _new_object(name: str) -> str:
    """An equal string that is a different object (views match inputs by identity first)."""
    copy = "".join(list(name))
    assert copy == name and copy is not name
    return copy


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_external_input_ids_follow_derived_views(data: st.DataObject) -> None:
    # Derived views find their external inputs' ids from the previous view's, by identity of
    # the strings; every way of changing the inputs must give what a fresh view gives.
    ops = [
        Op(
            "Op",
            data.draw(st.lists(st.sampled_from(LONG_NAMES), max_size=2)),
            data.draw(st.lists(st.sampled_from(LONG_NAMES), max_size=2)),
        )
        for _ in range(data.draw(st.integers(0, 6)))
    ]
    declared = st.lists(
        st.sampled_from([*LONG_NAMES, "never_used", "unused_too"]), unique=True, max_size=4
    )
    net = Net(ops, data.draw(declared), [])
    net.ssa().undefined_reads(())  # the first view has its ids for the next to start from
    for _ in range(3):
        current = list(net.external_inputs)
        how = data.draw(
            st.sampled_from(["keep some", "new objects", "add", "remove ops", "rewire"])
        )
        if how == "keep some":
            net.set_external_inputs([n for n in current if data.draw(st.booleans())])
        elif how == "new objects":
            net.set_external_inputs([_new_object(n) for n in current])
        elif how == "add":
            extra = data.draw(st.sampled_from([*LONG_NAMES, "added_q"]))
            net.set_external_inputs([*current, *([] if extra in current else [extra])])
        elif how == "rewire" and len(net):
            # A read rewired to a declared name no op used yet: the name joins the shared table
            # after the previous view found its external inputs' ids.
            index = data.draw(st.sampled_from(range(len(net))))
            name = data.draw(st.sampled_from([*current, "fresh_r"]))
            net.edit_ops((), {index: [name]})
        elif len(net):
            net.remove_ops(data.draw(st.sets(st.sampled_from(range(len(net))), max_size=2)))
        derived = net.ssa()
        rebuilt = net_from_netdef(net_to_netdef(net)).ssa()
        assert derived.undefined_reads(()) == rebuilt.undefined_reads(())
        inputs = net.external_inputs
        assert [derived.blob(k) for k in derived.last_write_keys(inputs)] == [
            rebuilt.blob(k) for k in rebuilt.last_write_keys(inputs)
        ]


def test_an_edit_derives_the_next_view_instead_of_rebuilding(monkeypatch: MonkeyPatch) -> None:
    net = Net(
        [Op("Relu", ["x"], ["y"]), Op("Sigmoid", ["y"], ["dead"]), Op("Tanh", ["y"], ["z"])],
        ["x"],
        ["z"],
    )
    old = net.ssa()
    monkeypatch.setattr(SSAView, "build", classmethod(lambda cls, *args: pytest_fail()))
    net.remove_ops([1])
    net.ssa()
    net.edit_ops((), {1: ["x"]})
    view = net.ssa()
    assert view is not old
    assert view.ssa == [([("x", 0)], [("y", 1)]), ([("x", 0)], [("z", 1)])]
    assert old.ssa[1] == ([("y", 1)], [("dead", 1)])  # the old view is a snapshot


def pytest_fail() -> SSAView:
    raise AssertionError("the view was rebuilt from scratch")


def test_a_view_is_built_again_after_an_unhooked_edit_or_two_edits() -> None:
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    net.ssa()
    net.append_op(Op("Relu", ["y"], ["y"]))
    assert net.ssa().ssa == [([("x", 0)], [("y", 1)]), ([("y", 1)], [("y", 2)])]
    # Two edits in a row: only the first has a current view to derive from.
    net.remove_ops([0])
    net.edit_ops((), {0: ["x"]})
    assert net.ssa().ssa == [([("x", 0)], [("y", 1)])]


def test_a_derived_view_knows_no_key_for_a_name_only_removed_ops_used() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Sigmoid", ["y"], ["dead"])], ["x"], ["y"])
    assert net.ssa().key(("dead", 1)) is not None
    net.remove_ops([1])
    view = net.ssa()
    assert view.key(("dead", 0)) is None and view.key(("dead", 1)) is None
    assert view.key(("y", 1)) is not None


def test_bulk_lookups_match_by_address_and_see_names_added_since() -> None:
    """A big lookup is remembered and later ones match its very strings by address: the ids
    must still be the table's, for copies of the strings, unknown names, and a name the table
    numbered after a lookup found it missing."""
    from graphtools.ssa_view import _BULK_LOOKUP, _NameTable

    size = _BULK_LOOKUP + 10
    names = [f"blob_{i}" for i in range(size)]
    table, _, _ = _NameTable.interning(names)
    asked = [*names, "later"]
    assert table.lookup(asked).tolist() == [*range(size), -1]
    added = table.id_of("later")
    copies = ["".join(["blob_", str(i)]) for i in range(size)]  # equal, other objects
    mixed = [*reversed(asked), *copies[:3], "unknown"]
    expected = [added, *reversed(range(size)), 0, 1, 2, -1]
    assert table.lookup(mixed).tolist() == expected
    assert table.lookup(asked).tolist() == [*range(size), added]


def test_names_numbered_with_the_ops_answer_as_names_looked_up_later() -> None:
    """A view numbers the external inputs and the held values (initializers) in the pass over
    the ops' names; what it answers about them must be what a lookup in a finished table
    gives, the empty name declaring nothing."""
    from graphtools.ssa_view import _BULK_LOOKUP

    held = [f"w{i}" for i in range(_BULK_LOOKUP + 5)] + ["never_read"]
    ops = [Op("Fill", [], [""]), Op("Read", ["", "x"], ["x"])]
    ops += [Op("Mul", ["x", held[i]], ["x"]) for i in range(0, _BULK_LOOKUP, 7)]
    ops.append(Op("Write", ["x"], [held[3]]))  # a held value overwritten
    net = Net(ops, ["", "x", "unused_input"], ["x"])
    seeded = SSAView.build(net, held)
    plain = SSAView.build(net)  # held values are looked up when asked for
    expected_read = [name in {held[i] for i in range(0, _BULK_LOOKUP, 7)} for name in held]
    for view in (seeded, plain):
        assert view.initially_read(list(held)).tolist() == expected_read
        assert view.initially_read(["never_read", "x", ""]).tolist() == [False, True, False]
        assert view.undefined_reads((), list(held)) == []
        assert view.rewritten_names(list(held)) >= {held[3]}
        last = [view.blob(key) for key in view.last_write_keys(net.external_inputs)]
        assert last == [("x", len(ops) - 2)]  # not the write of "", which declares nothing


def test_dead_end_writes_are_the_outputs_of_ops_nothing_reads_from() -> None:
    """An op none of whose outputs is read is a dead end (both its names); an op with one
    output read is not, even if its other output is not."""
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("SpatialBN", ["a", "s"], ["b", "saved_mean"]),
            Op("Sigmoid", ["b"], ["y"]),
            Op("Split", ["a"], ["head1", "head2"]),
            Op("Tanh", ["a"], ["a"]),  # writes a again: its reads keep version 1's readers
        ],
        ["x", "s"],
        ["y"],
    )
    assert net.ssa().dead_end_writes() == ["y", "head1", "head2"]

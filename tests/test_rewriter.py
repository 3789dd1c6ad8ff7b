"""The rewriter: use-def queries, ``net.edit()`` transactions, their checks, and the SSA they
leave behind (derived, not rebuilt, and equal to a fresh build)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools import rewriter
from graphtools.errors import IllegalRewriteError, InvalidArgumentError
from graphtools.ir import Net, Op
from graphtools.serde.codec import serialize_net
from graphtools.ssa import Use, get_ssa
from graphtools.ssa_view import SSAView
from graphtools.usedef import Overlay


def _net() -> Net:
    return Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Dropout", ["a"], ["b", "mask"], args={"is_test": 1}),
            Op("Sigmoid", ["b"], ["c"]),
            Op("Add", ["c", "b"], ["y"]),
        ],
        ["x"],
        ["y"],
    )


def _shape(net: Net) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(op.type, op.inputs, op.outputs) for op in net]


# -- use-def -------------------------------------------------------------------------------------


def test_producer_and_uses_follow_caffe2_versions() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["x"]),
            Op("Relu", ["x"], ["x"]),
            Op("Add", ["x", "x"], ["y"]),
            Op("Twice", ["y"], ["z", "z"]),
        ],
        ["x"],
        ["z"],
    )
    assert net.producer(("x", 0)) is None
    assert net.producer(("x", 2)) == 1
    assert net.uses(("x", 0)) == [Use(0, 0)]
    assert net.uses(("x", 2)) == [Use(2, 0), Use(2, 1)]
    assert net.uses(("x", 3)) == [] and net.producer(("x", 3)) is None
    # An op listing an output twice makes two versions; only the last has a producer.
    assert net.producer(("z", 1)) is None and net.producer(("z", 2)) == 3


# -- edits ---------------------------------------------------------------------------------------


def test_remove_with_replace_all_uses_with_drops_an_identity() -> None:
    net = _net()
    with net.edit() as e:
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.remove(1)
    assert e.changed
    assert _shape(net) == [
        ("Relu", ("x",), ("a",)),
        ("Sigmoid", ("a",), ("c",)),
        ("Add", ("c", "a"), ("y",)),
    ]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_rewires_compose_so_a_chain_of_identities_goes_in_one_edit(order: tuple[int, int]) -> None:
    """The README's way (for each identity: rewire its output to its input, remove it) on two
    identities in a row, in either order: the reads of the last one's output read the first
    one's input (issue: 'would see the value of no op')."""
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Identity", ["a"], ["b"]),
            Op("Identity", ["b"], ["c"]),
            Op("Sigmoid", ["c"], ["y"]),
        ],
        ["x"],
        ["y"],
    )
    identities = [1, 2]
    with net.edit() as e:
        for index in (identities[i] for i in order):
            e.replace_all_uses_with(net.ssa().outputs_of(index)[0], net.ssa().inputs_of(index)[0])
            e.remove(index)
    assert _shape(net) == [("Relu", ("x",), ("a",)), ("Sigmoid", ("a",), ("y",))]


def test_rewires_in_a_circle_are_refused() -> None:
    net = _net()
    with pytest.raises(IllegalRewriteError, match="circle"), net.edit() as e:
        e.replace_all_uses_with(("b", 1), ("c", 1))
        e.replace_all_uses_with(("c", 1), ("b", 1))
    assert _shape(net)[1][0] == "Dropout"


def test_insert_set_op_and_external_lists() -> None:
    net = _net()
    with net.edit() as e:
        e.insert(0, [Op("Exp", ["x"], ["e"])])
        e.insert(4, [Op("Tanh", ["y"], ["t"])])
        e.set_op(2, net[2].replace(type="Tanh"))
        e.set_external_outputs(["y", "t"])
    assert _shape(net) == [
        ("Exp", ("x",), ("e",)),
        ("Relu", ("x",), ("a",)),
        ("Dropout", ("a",), ("b", "mask")),
        ("Tanh", ("b",), ("c",)),
        ("Add", ("c", "b"), ("y",)),
        ("Tanh", ("y",), ("t",)),
    ]
    assert list(net.external_outputs) == ["y", "t"]


def test_several_inserts_at_one_index_keep_their_order_before_a_replacement() -> None:
    net = _net()
    with net.edit() as e:
        e.insert(2, [Op("A", ["x"], ["p"])])
        e.set_op(2, net[2].replace(type="Tanh"))
        e.insert(2, [Op("B", ["p"], ["q"])])
    assert [op.type for op in net] == ["Relu", "Dropout", "A", "B", "Tanh", "Add"]


def test_an_edit_that_changes_nothing_keeps_the_revision() -> None:
    net = _net()
    revision = net.revision
    with net.edit() as e:
        e.set_external_outputs(["y"])
    assert not e.changed and net.revision == revision


def test_an_exception_inside_the_block_discards_the_edit() -> None:
    net = _net()
    before = serialize_net(net)
    with pytest.raises(RuntimeError), net.edit() as e:
        e.remove(3)
        raise RuntimeError("changed my mind")
    assert serialize_net(net) == before and not e.changed


def test_indices_refer_to_the_net_as_the_edit_opened() -> None:
    net = _net()
    with net.edit() as e:
        e.insert(0, [Op("Exp", ["x"], ["e"])])
        e.set_op(0, net[0].replace(type="Tanh"))  # the Relu, not the Exp
        e.insert(1, [Op("Log", ["e"], ["f"])])
    assert [op.type for op in net] == ["Exp", "Tanh", "Log", "Dropout", "Sigmoid", "Add"]


def test_replace_all_uses_with_renames_an_external_output_at_its_final_version() -> None:
    net = Net([Op("Relu", ["x"], ["a"]), Op("Copy", ["a"], ["y"])], ["x"], ["y"])
    with net.edit() as e:
        e.replace_all_uses_with(("y", 1), ("a", 1))
        e.remove(1)
    assert list(net.external_outputs) == ["a"]
    assert _shape(net) == [("Relu", ("x",), ("a",))]


# -- refusals ------------------------------------------------------------------------------------


def _refused(net: Net, edit: Any, *words: str) -> None:
    before, revision = serialize_net(net), net.revision
    with pytest.raises(IllegalRewriteError) as info, net.edit() as e:
        edit(e)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert serialize_net(net) == before and net.revision == revision


def test_removing_a_value_still_read_is_refused() -> None:
    _refused(_net(), lambda e: e.remove(0), "op #1 (Dropout)", "'a'", "op #0 (Relu)", "removes")


def test_removing_the_producer_of_an_external_output_is_refused() -> None:
    _refused(_net(), lambda e: e.remove(3), "external output 'y'")


def test_inserting_a_write_over_a_value_still_read_is_refused() -> None:
    def edit(e: Any) -> None:
        e.insert(1, [Op("Tanh", ["x"], ["a"])])

    _refused(_net(), edit, "op #1 (Dropout)", "inserted op Tanh", "op #0 (Relu)")


def test_rewires_merging_two_outputs_that_end_differently_are_refused() -> None:
    # Dropping the identity d = b@0 renames the output d to b; removing op #3 too makes the
    # final b the initial one, which d needs but the output b (op #3's write) does not.
    net = Net([Op("Identity", ["b"], ["d"]), Op("F", [], ["b"])], [], ["d", "b"])
    view = net.ssa()
    saved = serialize_net(net)

    def edit(e: Any) -> None:
        e.replace_all_uses_with(view.outputs_of(0)[0], view.inputs_of(0)[0])
        e.remove(0)
        e.remove(1)

    _refused(net, edit, "'d' and 'b' would both read 'b'", "op #1 (F)")
    assert serialize_net(net) == saved
    # Both ending with the same write is fine: the outputs merge into one name.
    net = Net([Op("F", [], ["b"]), Op("Identity", ["b"], ["d"])], [], ["d", "b"])
    view = net.ssa()
    with net.edit() as e:
        e.replace_all_uses_with(view.outputs_of(1)[0], view.inputs_of(1)[0])
        e.remove(1)
    assert net.external_outputs == ("b", "b") and [op.type for op in net] == ["F"]


def test_rewiring_to_a_version_the_reader_cannot_see_is_refused() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Sigmoid", ["x"], ["b"]),
            Op("Tanh", ["x"], ["a"]),  # overwrites a before b's reader
            Op("Exp", ["b"], ["y"]),
        ],
        ["x"],
        ["y"],
    )

    def edit(e: Any) -> None:
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.remove(1)

    _refused(net, edit, "op #3 (Exp)", "op #2 (Tanh)", "op #0 (Relu)")


@pytest.mark.parametrize(
    "target", [("q", 3), ("a", 5), ("", 1)], ids=["no-blob", "no-version", "empty"]
)
@pytest.mark.parametrize("count", [1, 100], ids=["one", "bulk"])
def test_rewiring_to_a_value_the_net_does_not_have_is_refused(
    target: tuple[str, int], count: int
) -> None:
    # count 100: past the rewriter's bulk threshold, its reads are found in the view's arrays.
    ops = [Op("Relu", ["x"], ["a"])]
    for i in range(count):
        ops += [Op("Copy", ["a"], [f"d{i}"]), Op("Sigmoid", [f"d{i}"], [f"s{i}"])]
    net = Net(ops, ["x"], [f"s{i}" for i in range(count)])

    def edit(e: Any) -> None:
        for i in range(count):
            e.replace_all_uses_with((f"d{i}", 1), target)

    words = ["empty name"] if not target[0] else [f"{target[0]}@{target[1]}", "no op"]
    _refused(net, edit, *words)


def test_renaming_a_value_to_the_empty_name_is_refused() -> None:
    _refused(_net(), lambda e: e.rename(("a", 1), ""), "('a', 1)", "empty name")


def test_conflicting_changes_are_refused() -> None:
    def remove_and_replace(e: Any) -> None:
        e.remove(2)
        e.set_op(2, Op("Tanh", ["b"], ["c"]))

    def rewire_and_replace(e: Any) -> None:
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.set_op(2, Op("Tanh", ["b"], ["c"]))

    def rewire_twice(e: Any) -> None:
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.replace_all_uses_with(("b", 1), ("x", 0))

    _refused(_net(), remove_and_replace, "both removed and replaced")
    _refused(_net(), rewire_and_replace, "replaced by set_op")
    _refused(_net(), rewire_twice, "rewired twice")


def test_blobs_touched_by_nested_nets_are_refused() -> None:
    then_net = Net([Op("Relu", ["b"], ["z"])], ["b"], ["z"])
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Copy", ["a"], ["b"]),
            Op("If", ["cond"], [], args={"then_net": then_net}),
            Op("Sigmoid", ["z"], ["y"]),
        ],
        ["x", "cond"],
        ["y"],
    )

    def rewire_read_inside(e: Any) -> None:
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.remove(1)

    _refused(net, rewire_read_inside, "nested net of op #2 (If)")
    _refused(net, lambda e: e.insert(3, [Op("Exp", ["x"], ["z"])]), "'z'", "nested net")


def test_a_net_changed_while_an_edit_was_open_refuses_the_edit() -> None:
    net = _net()
    e = net.edit()
    e.remove(2)
    net.set_name("other")
    with pytest.raises(IllegalRewriteError, match="changed while an edit was open"):
        e.commit()


def test_bad_indices_raise_index_error_at_once() -> None:
    net = _net()
    with net.edit() as e:
        with pytest.raises(IndexError, match="out of range"):
            e.remove(4)
        with pytest.raises(IndexError):
            e.set_op(-1, Op("Relu", [], []))
        e.insert(4, [])  # len(net) appends
    assert not e.changed


# -- incremental SSA -----------------------------------------------------------------------------


def test_queries_after_an_edit_do_not_rebuild_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    net = _net()
    net.ssa()
    with net.edit() as e:
        e.insert(2, [Op("Exp", ["a"], ["n"])])
        e.replace_all_uses_with(("b", 1), ("a", 1))
        e.remove(1)

    def no_build(cls: type, net: Net) -> SSAView:
        raise AssertionError("the view was rebuilt")

    monkeypatch.setattr(SSAView, "build", classmethod(no_build))
    assert isinstance(net._current_usedef(), Overlay)
    assert net.uses(("a", 1)) == [Use(1, 0), Use(2, 0), Use(3, 1)]
    assert net.producer(("n", 1)) == 1
    assert net.ssa().ssa == get_ssa(net)[0]  # derived from the overlay, equal to Caffe2's


NAMES = ["a", "b", "c", "d"]


@st.composite
def _nets(draw: st.DrawFn) -> Net:
    size = draw(st.integers(1, 12))
    ops = []
    for index in range(size):
        inputs = draw(st.lists(st.sampled_from(NAMES), max_size=3))
        outputs = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2))
        ops.append(Op(draw(st.sampled_from(["Identity", "F", "G"])), inputs, outputs))
        ops[-1] = ops[-1].replace(name=f"op{index}")
    inputs = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    outputs = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    return Net(ops, inputs, outputs)


@st.composite
def _raw_edits(draw: st.DrawFn, net: Net) -> tuple[set[int], dict[int, Op], dict[int, list[Op]]]:
    positions = st.integers(0, len(net) - 1)
    names = st.sampled_from(NAMES)
    removed = set(draw(st.lists(positions, max_size=3)))
    replaced = {}
    for p in draw(st.lists(positions, max_size=3)):
        if p in removed:
            continue
        inputs = draw(st.lists(names, max_size=2))
        # Half the replacements write what the op wrote (its versions stay), half do not.
        same = draw(st.booleans())
        replaced[p] = (
            net[p].replace(type="R", inputs=inputs) if same else Op("R", inputs, [draw(names)])
        )
    inserted = {
        p: [Op("N", [draw(names)], [draw(names)])]
        for p in draw(st.lists(st.integers(0, len(net)), max_size=3))
    }
    return removed, replaced, inserted


def _assert_same_usedef(net: Net) -> None:
    fresh = SSAView.build(net)
    current = net._current_usedef()
    assert current is not None, "the edit left no use-def to query"
    for name in NAMES:
        final = fresh.final_version(name)
        assert current.final_version(name) == final
        for version in range(final + 2):
            blob = (name, version)
            assert current.producer(blob) == fresh.producer(blob), blob
            assert current.uses(blob) == fresh.uses(blob), blob
    assert net.ssa().ssa == get_ssa(net)[0]
    assert net.ssa().versions == get_ssa(net)[1]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_overlays_and_derived_views_equal_a_fresh_build(data: st.DataObject) -> None:
    net = data.draw(_nets())
    net.ssa()
    for _ in range(data.draw(st.integers(1, 3))):  # overlays of overlays
        removed, replaced, inserted = data.draw(_raw_edits(net))
        if not (removed or replaced or inserted) or len(removed) == len(net):
            continue
        net._apply(removed, replaced, inserted)
        _assert_same_usedef(net)


def _symbolic(net: Net) -> tuple[list[Any], dict[str, list[Any]]]:
    """Run ``net`` on symbols: each op's output is a term of its inputs and of the name it
    writes (an Identity passes its input through); a replacement keeps the op's name, so
    its write of a name is the same value, as the edit check sees it (the op, not the
    slot). Returns the final values and what each named op read."""
    values: dict[str, Any] = {}
    reads: dict[str, list[Any]] = {}
    for op in net:
        args = [values.get(name, ("in", name)) for name in op.inputs]
        reads[op.name or ""] = args
        for name in op.outputs:
            values[name] = args[0] if op.type == "Identity" and args else (op.name, name, *args)
    return [values.get(name, ("in", name)) for name in net.external_outputs], reads


@pytest.mark.parametrize("vectorise_from", [1, 10**9], ids=["vectorised", "by-name"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_accepted_edits_keep_every_untouched_read(data: st.DataObject, vectorise_from: int) -> None:
    # Both ways of checking removals and rewires: the numpy tests of bulk edits (from one
    # name on, whatever the net's size), and name by name.
    saved = rewriter._VECTORISE_FROM, rewriter._OPS_PER_NAME
    rewriter._VECTORISE_FROM, rewriter._OPS_PER_NAME = vectorise_from, 10**9
    try:
        _accepted_edits_keep_every_untouched_read(data)
    finally:
        rewriter._VECTORISE_FROM, rewriter._OPS_PER_NAME = saved


def _identity_removals(
    data: st.DataObject, net: Net, most: int = 2
) -> tuple[set[int], list[tuple[Any, Any]]]:
    """Ops to remove and rewires of identities' outputs to their inputs, drawn for ``net``
    (some illegal: a removed op still read, one read rewired twice)."""
    identities = [i for i, op in enumerate(net) if op.type == "Identity" and op.inputs]
    removed = set(data.draw(st.lists(st.integers(0, len(net) - 1), max_size=2)))
    rewires = []
    for index in (
        data.draw(st.lists(st.sampled_from(identities), max_size=most)) if identities else ()
    ):
        view = net.ssa()
        rewires.append((view.outputs_of(index)[0], view.inputs_of(index)[0]))
        removed.add(index)
    return removed, rewires


def _edited(
    net: Net,
    removed: set[int],
    rewires: list[tuple[Any, Any]],
    others: dict[str, tuple[int, Op]] | None = None,
) -> str | None:
    """Apply the removals and rewires in one edit, with ``others``' insertion or
    replacement (``"insert"``/``"set_op"`` -> (index, op)): ``None``, or why it was refused."""
    others = others or {}
    try:
        with net.edit() as e:
            for old, new in rewires:
                e.replace_all_uses_with(old, new)
            for index in removed:
                e.remove(index)
            if "insert" in others:
                at, op = others["insert"]
                e.insert(at, [op])
            if "set_op" in others:
                e.set_op(*others["set_op"])
    except IllegalRewriteError as refused:
        return str(refused)
    return None


def _other_changes(data: st.DataObject, net: Net, removed: set[int]) -> dict[str, tuple[int, Op]]:
    """Maybe an inserted op, maybe an op replaced by one writing something else: changes
    beside the removals that the check must not take for removals."""
    names = st.sampled_from(NAMES)
    others: dict[str, tuple[int, Op]] = {}
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(net)))
        others["insert"] = (at, Op("N", [data.draw(names)], [data.draw(names)], name="inserted"))
    # Not an identity: its replacement computes what it did (same name, same inputs), so
    # only the names it writes change.
    kept = [i for i in range(len(net)) if i not in removed and net[i].type != "Identity"]
    if kept and data.draw(st.booleans()):
        index = data.draw(st.sampled_from(kept))
        replacement = Op("R", net[index].inputs, [data.draw(names)], name=net[index].name)
        others["set_op"] = (index, replacement)
    return others


def _accepted_edits_keep_every_untouched_read(data: st.DataObject) -> None:
    net = data.draw(_nets())
    outputs_before, reads_before = _symbolic(net)
    saved = serialize_net(net)
    removed, rewires = _identity_removals(data, net)
    others = _other_changes(data, net, removed)
    if _edited(net, removed, rewires, others) is not None:
        assert serialize_net(net) == saved
        return
    outputs_after, reads_after = _symbolic(net)
    assert outputs_after == outputs_before
    for op in net:
        if op.name != "inserted":  # the new op's reads are its author's
            assert reads_after[op.name or ""] == reads_before[op.name or ""]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_rewires_found_in_bulk_agree_with_the_one_by_one_loop(data: st.DataObject) -> None:
    """Many rewires in one edit are resolved from the view's arrays at once: the same edit is
    accepted with the same result, or refused with the same reason, as rewire by rewire."""
    net = data.draw(_nets())
    removed, rewires = _identity_removals(data, net, most=4)
    outcomes = []
    for bulk_from in (1, 10**9):
        copy = net.copy()
        copy.ssa()
        rewriter._BULK_REWIRES = bulk_from
        try:
            refused = _edited(copy, removed, rewires)
        finally:
            rewriter._BULK_REWIRES = 64
        outcomes.append((refused, serialize_net(copy), list(copy.external_outputs)))
    assert outcomes[0] == outcomes[1]


def test_many_rewires_of_unread_blobs_in_a_net_without_ops() -> None:
    names = [f"p{i}" for i in range(70)]
    net = Net([], ["a", *names], ["a"])
    net.ssa()
    with net.edit() as edit:  # from 64 rewires they are resolved in bulk: none reads anything
        for name in names:
            edit.replace_all_uses_with((name, 0), ("a", 0))
    assert not edit.changed


def test_prefetched_reads_equal_the_per_key_index() -> None:
    names = [f"n{i}" for i in range(40)]
    ops = [
        Op("F", [names[i % 40], names[(i * 7) % 40], names[i % 40]], [names[(i + 1) % 40]])
        for i in range(80)
    ]
    net = Net(ops, names[:3], names[-2:])
    batched, indexed = SSAView.build(net), SSAView.build(net)
    batched.prefetch_reads(names)
    assert all(batched.reads(name) == indexed.reads(name) for name in names)
    assert batched.reads("n5") == [(5, 0), (5, 2), (35, 1), (45, 0), (45, 2), (75, 1)]


def test_appending_an_op_whose_nested_net_writes_new_blobs_is_accepted() -> None:
    net = _net()
    branch = Net([Op("Relu", ["y"], ["g"])], ["y"], ["g"])
    with net.edit() as e:
        e.insert(4, [Op("If", ["x"], [], args={"then_net": branch})])
    assert e.changed and net[4].type == "If"


def test_inserting_an_op_whose_nested_net_overwrites_a_read_value_is_refused() -> None:
    branch = Net([Op("Relu", ["x"], ["b"])], ["x"], ["b"])
    _refused(
        _net(),
        lambda e: e.insert(2, [Op("If", ["x"], [], args={"then_net": branch})]),
        "op #2 (Sigmoid)",
        "inserted op If",
    )


def test_rename_gives_a_value_a_new_name_everywhere() -> None:
    net = _net()
    with net.edit() as e:
        e.rename(("b", 1), "dropped")
    assert _shape(net) == [
        ("Relu", ("x",), ("a",)),
        ("Dropout", ("a",), ("dropped", "mask")),
        ("Sigmoid", ("dropped",), ("c",)),
        ("Add", ("c", "dropped"), ("y",)),
    ]


def test_rename_and_replace_all_uses_with_drop_an_identity_before_an_external_output() -> None:
    # The identity's input takes the output's name: the interface stays.
    net = Net([Op("Relu", ["x"], ["a"]), Op("Identity", ["a"], ["y"])], ["x"], ["y"])
    with net.edit() as e:
        e.rename(("a", 1), "y")
        e.replace_all_uses_with(("y", 1), ("a", 1))
        e.remove(1)
    assert _shape(net) == [("Relu", ("x",), ("y",))]
    assert list(net.external_outputs) == ["y"]


def test_a_rename_colliding_with_a_value_still_read_is_refused() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Tanh", ["x"], ["t"]),
            Op("Add", ["a", "t"], ["y"]),
        ],
        ["x"],
        ["y"],
    )
    _refused(net, lambda e: e.rename(("a", 1), "t"), "op #2 (Add)", "'t'", "op #1 (Tanh)")


def _net_with_a_branch_writing_z() -> Net:
    branch = Net([Op("Relu", ["x"], ["z"])], ["x"], ["z"])
    return Net(
        [
            Op("If", ["c"], [], args={"then_net": branch}),
            Op("Sigmoid", ["z"], ["y"]),
        ],
        ["x", "c", "z"],
        ["y"],
    )


def test_appending_a_write_of_a_blob_a_kept_branch_writes_is_accepted_after_its_reads() -> None:
    net = _net_with_a_branch_writing_z()
    with net.edit() as e:
        e.insert(2, [Op("Tanh", ["y"], ["z"])])  # after every read of z
    assert [op.type for op in net] == ["If", "Sigmoid", "Tanh"]


def test_a_write_of_a_blob_a_kept_branch_writes_before_its_reads_is_refused() -> None:
    _refused(
        _net_with_a_branch_writing_z(),
        lambda e: e.insert(1, [Op("Tanh", ["x"], ["z"])]),
        "'z' is written inside the nested net of op #0 (If)",
    )


def test_a_blob_that_is_no_pair_or_no_value_is_refused_by_name() -> None:
    """A plain name where a (name, version) pair belongs failed as an IndexError deep
    inside; a rewire of a value the net does not have was silently nothing."""
    net = _net()
    before = serialize_net(net)
    for change in (
        lambda e: e.replace_all_uses_with("b", ("a", 1)),
        lambda e: e.replace_all_uses_with(("b", 1), ("a", -1)),
        lambda e: e.rename(["b"], "q"),
    ):
        refused = pytest.raises(InvalidArgumentError, match=r"not a versioned blob: give \(name")
        with refused, net.edit() as edit:
            change(edit)
    missing = pytest.raises(IllegalRewriteError, match=r"cannot rewire the reads of zz@1: no op")
    with missing, net.edit() as edit:
        edit.replace_all_uses_with(("zz", 1), ("a", 1))
    assert serialize_net(net) == before
    with net.edit() as edit:  # a numpy integer is a version (SSA arrays hand them out)
        edit.replace_all_uses_with(("c", np.int64(1)), ("b", np.int64(1)))
    assert net[3].inputs == ("b", "b")


def test_use_def_queries_refuse_a_plain_name() -> None:
    """net.producer('conv1') answered None and net.uses('conv1') [] (a silently wrong
    answer), the view's consumer_ops('ab') an IndexError: each names the slip now."""
    net = _net()
    view = net.ssa()
    for query in (net.producer, net.uses, view.producer, view.uses, view.consumer_ops):
        with pytest.raises(InvalidArgumentError, match=r"blob='a' is not a versioned blob"):
            query("a")  # type: ignore[arg-type]
    assert net.producer(("a", 1)) == 0 and net.uses(("a", 1)) == [Use(1, 0)]


def test_edit_slips_are_refused_when_made() -> None:
    """What used to fail later, deep inside or when the net was written: an op index given as
    a string, a value type that is not a ValueType, an op naming a blob None; a numpy array is
    a constant as an ArrayTensor of it; renaming a value to its own name changes nothing."""
    from graphtools.values import ArrayTensor

    net = _net()
    with (
        pytest.raises(InvalidArgumentError, match="an op index is an int, not '0'"),
        net.edit() as e,
    ):
        e.remove("0")  # type: ignore[arg-type]
    with (
        pytest.raises(TypeError, match=r"must be a graphtools\.values\.ValueType"),
        net.edit() as e,
    ):
        e.set_type("a", "float[2,4]")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"inputs must be blob names \(strings\): item 0 is None"):
        Op("Relu", [None], ["y"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"outputs must be blob names .*item 1 is 1"):
        Op("Relu", ["x"], ["y", 1])  # type: ignore[list-item]
    with (
        pytest.raises(TypeError, match=r"a numpy array or a graphtools\.values\.Tensor"),
        net.edit() as e,
    ):
        e.set_initializer("w", [1.0, 2.0])  # type: ignore[arg-type]
    revision = net.revision
    with net.edit() as edit:
        edit.rename(("a", 1), "a")
    assert not edit.changed and net.revision == revision
    with net.edit() as edit:
        edit.set_initializer("w", np.ones(2, np.float32))
    assert isinstance(net.initializers["w"], ArrayTensor)
    np.testing.assert_array_equal(net.initializers["w"].numpy(), np.ones(2, np.float32))


def test_a_second_edit_of_a_net_is_refused_while_one_is_open() -> None:
    """The inner edit committed, then the outer one failed (the net had changed): the inner
    change stood, half of what the code meant. The inner one is refused when opened; after
    the outer one commits (or fails), a new edit opens."""
    net = _net()
    before = serialize_net(net)
    refused = pytest.raises(IllegalRewriteError, match="an edit of this net is open already")
    with refused, net.edit() as outer:
        outer.remove(3)
        with net.edit():
            pass
    assert serialize_net(net) == before
    with net.edit() as edit:
        edit.replace_all_uses_with(("c", 1), ("b", 1))
    assert edit.changed and net[3].inputs == ("b", "b")


@pytest.mark.parametrize("bulk", [False, True], ids=["few", "bulk"])
def test_a_rewire_of_a_value_the_net_does_not_have_is_refused_in_bulk_too(bulk: bool) -> None:
    """Among 64 or more rewires (found in the view's arrays at once) a rewire of nothing was
    silently dropped, where fewer rewires were refused."""
    count = rewriter._BULK_REWIRES if bulk else 2
    ops = [Op("Relu", [f"x{i}"], [f"a{i}"]) for i in range(count)]
    ops += [Op("Sigmoid", [f"a{i}"], [f"b{i}"]) for i in range(count)]
    net = Net(ops, [f"x{i}" for i in range(count)], [f"b{i}" for i in range(count)])
    before = serialize_net(net)
    net.ssa()  # the view the bulk path reads
    missing = pytest.raises(IllegalRewriteError, match=r"cannot rewire the reads of zz@1: no op")
    with missing, net.edit() as edit:
        for i in range(count - 1):
            edit.replace_all_uses_with((f"a{i}", 1), (f"x{i}", 0))
        edit.replace_all_uses_with(("zz", 1), ("x0", 0))
    assert serialize_net(net) == before
    with net.edit() as edit:  # the declared inputs and what ops write are values
        for i in range(count - 1):
            edit.replace_all_uses_with((f"a{i}", 1), (f"x{i}", 0))
        edit.replace_all_uses_with((f"x{count - 1}", 0), (f"x{count - 2}", 0))
    assert net[2 * count - 2].inputs == (f"x{count - 2}",)

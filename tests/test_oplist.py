"""``OpList``, the chunked op list: every edit gives what the same edit of a plain list gives,
across chunk boundaries, and shares the chunks it did not touch; and an edited net keeps
nothing of its old revisions alive (what keeps an edit's cost and memory to what it touches)."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.ir import Net, Op
from graphtools.oplist import CHUNK, OpList


def _list_edit(
    items: list[int], removed: set[int], replaced: dict[int, int], inserted: dict[int, list[int]]
) -> list[int]:
    """The reference: the same edit on a plain list."""
    out: list[int] = []
    for position in range(len(items) + 1):
        out.extend(inserted.get(position, ()))
        if position < len(items) and position not in removed:
            out.append(replaced.get(position, items[position]))
    return out


@st.composite
def _edits(draw: st.DrawFn) -> tuple[list[int], set[int], dict[int, int], dict[int, list[int]]]:
    size = draw(st.sampled_from([0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 7, 5 * CHUNK]))
    items = list(range(size))
    positions = st.integers(0, max(size - 1, 0))
    removed = set(draw(st.lists(positions, max_size=8))) if size else set()
    replaced = (
        {p: -p - 1 for p in draw(st.lists(positions, max_size=8)) if p not in removed}
        if size
        else {}
    )
    # Big groups make a chunk outgrow 2 * CHUNK and split.
    group = st.lists(st.integers(10**6, 2 * 10**6), max_size=2 * CHUNK + 3)
    inserted = draw(st.dictionaries(st.integers(0, size), group, max_size=4))
    return items, removed, replaced, inserted


@settings(max_examples=60, deadline=None)
@given(_edits())
def test_a_splice_is_the_same_edit_of_a_list(
    edit: tuple[list[int], set[int], dict[int, int], dict[int, list[int]]],
) -> None:
    items, removed, replaced, inserted = edit
    before = OpList(items)
    after = before.spliced(removed, replaced, inserted)
    expected = _list_edit(items, removed, replaced, inserted)
    assert list(after) == expected
    assert len(after) == len(expected)
    assert [after[i] for i in range(len(after))] == expected
    assert [after[-i] for i in range(1, len(after) + 1)] == expected[::-1][: len(after)]
    assert after[2:9] == expected[2:9]
    assert list(before) == items  # immutable: the old list is unchanged


def test_an_edit_shares_the_chunks_it_does_not_touch() -> None:
    before = OpList(range(10 * CHUNK))
    after = before.spliced({5}, {}, {9 * CHUNK + 1: [-1]})
    shared = {id(chunk) for chunk in before._chunks} & {id(chunk) for chunk in after._chunks}
    assert len(shared) == 8  # only the first and the last chunk were rebuilt


def test_out_of_range_indices_raise_index_error() -> None:
    ops = OpList(range(3 * CHUNK))
    with pytest.raises(IndexError, match="out of range"):
        ops[3 * CHUNK]
    with pytest.raises(IndexError, match="out of range"):
        ops[-3 * CHUNK - 1]


def test_net_single_op_edits_behave_like_list_edits() -> None:
    """``insert_op``/``replace_op``/``append_op`` keep list semantics on a net of several
    chunks (negative and past-the-end insertion indices included)."""
    ops = [Op("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(3 * CHUNK)]
    net = Net(ops, ["x0"], [f"x{3 * CHUNK}"])
    reference = list(ops)
    extra = [Op("Sigmoid", ["x0"], [f"s{i}"]) for i in range(5)]
    for index, op in zip([0, -1, 2 * CHUNK + 3, 10**9, -(10**9)], extra, strict=True):
        net.insert_op(index, op)
        reference.insert(index, op)
    net.replace_op(-2, extra[0])
    reference[-2] = extra[0]
    net.append_op(extra[1])
    reference.append(extra[1])
    assert list(net) == reference
    with pytest.raises(IndexError):
        net.replace_op(len(reference), extra[0])


def test_a_net_edit_rebuilds_only_the_chunks_it_touches() -> None:
    """What keeps an edit O(k + touched): ``Net.edit`` splices the op list instead of copying
    it, and the SSA view and snapshots share it instead of copying it."""
    ops = [Op("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(10 * CHUNK)]
    net = Net(ops, ["x0"], [f"x{10 * CHUNK}"])
    before = net.ops
    assert net.ssa()._ops is before
    state = net.snapshot()
    with net.edit() as edit:
        edit.insert(3, [Op("Sigmoid", ["x3"], ["s"])])
    chunks_before = {id(chunk) for chunk in before._chunks}  # type: ignore[attr-defined]
    chunks_after = {id(chunk) for chunk in net.ops._chunks}  # type: ignore[attr-defined]
    assert len(chunks_before & chunks_after) == 9
    net.restore(state)
    assert net.ops is before


def test_an_edit_lets_the_previous_revisions_view_go() -> None:
    """A net keeps no analysis of an old revision: after an edit and ``ssa()``, the previous
    view (hundreds of MB on a big net) is garbage, not held by a stale cache entry."""
    ops = [Op("Relu", [f"x{i}"], [f"x{i + 1}"]) for i in range(3 * CHUNK)]
    net = Net([*ops, Op("Sigmoid", ["x0"], ["dead"])], ["x0"], [f"x{3 * CHUNK}"])
    first = net.ssa()
    with net.edit() as edit:
        edit.remove(len(ops))
    with net.edit() as edit:
        edit.insert(0, [Op("Sigmoid", ["x0"], ["dead"])])
    second = net.ssa()
    assert sys.getrefcount(first) == 2  # this test's name for it, and getrefcount's argument
    assert second.producer(("dead", 1)) == 0

"""``graphtools.usedef``: layouts of edited nets, and the check of bulk removals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.errors import IllegalRewriteError
from graphtools.ir import Net, Op
from graphtools.layout import Layout

# A slot of the naive model: ("base", index) for an untouched base op, ("new", base index or
# None) for a new op (the base op it replaced, if any).
_Slot = tuple[str, int | None]


def _naive_edit(
    slots: list[_Slot], removed: set[int], replaced: set[int], inserted: dict[int, int]
) -> list[_Slot]:
    """The edit applied to a list, one position at a time."""
    result: list[_Slot] = []
    for position in range(len(slots) + 1):
        result.extend([("new", None)] * inserted.get(position, 0))
        if position == len(slots) or position in removed:
            continue
        kind, base = slots[position]
        result.append(("new", base) if position in replaced else (kind, base))
    return result


def _slots_of(layout: Layout) -> list[_Slot]:
    slots: list[_Slot] = []
    for position in range(layout.size):
        base = layout.base_index(position)
        slots.append(("base", base) if base is not None else ("new", layout.replaced.get(position)))
    return slots


@st.composite
def _edits(draw: st.DrawFn, size: int) -> tuple[set[int], set[int], dict[int, int]]:
    positions = draw(st.lists(st.integers(0, size - 1), unique=True, max_size=size)) if size else []
    cut = draw(st.integers(0, len(positions)))
    removed = set(positions[:cut])
    replaced = (
        set(draw(st.lists(st.sampled_from(positions[cut:]), max_size=4)))
        if positions[cut:]
        else set()
    )
    inserted = draw(st.dictionaries(st.integers(0, size), st.integers(1, 3), max_size=4))
    return removed, replaced, inserted


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_edited_layouts_place_every_op_as_a_list_edit_does(data: st.DataObject) -> None:
    size = data.draw(st.integers(0, 25))
    layout, slots = Layout.identity(size), [("base", i) for i in range(size)]
    for _ in range(data.draw(st.integers(1, 4))):
        removed, replaced, inserted = data.draw(_edits(layout.size))
        layout = layout.edited(set(removed), replaced, inserted)
        slots = _naive_edit(slots, removed, replaced, inserted)
        assert _slots_of(layout) == slots
        assert all(hi > lo for lo, hi in zip(layout.lo, layout.hi, strict=True))
        for position, (kind, base) in enumerate(slots):
            if kind == "base" and base is not None:
                assert layout.position(base) == position


def _init_net(params: int) -> Net:
    fills = [Op("ConstantFill", [], [f"p{i}"]) for i in range(params)]
    return Net(fills, [], [f"p{i}" for i in range(params)])


@pytest.mark.parametrize("params", [8, 200], ids=["by-name", "vectorised"])
def test_bulk_removals_that_set_the_outputs_are_accepted(params: int) -> None:
    net = _init_net(params)
    with net.edit() as e:
        for index in range(0, params, 2):
            e.remove(index)
        e.set_external_outputs(f"p{i}" for i in range(1, params, 2))
    assert [op.outputs[0] for op in net] == [f"p{i}" for i in range(1, params, 2)]


@pytest.mark.parametrize("params", [8, 200], ids=["by-name", "vectorised"])
def test_bulk_removals_keeping_the_outputs_are_refused(params: int) -> None:
    net = _init_net(params)
    with pytest.raises(IllegalRewriteError, match=r"external output 'p\d+'"), net.edit() as e:
        for index in range(0, params, 2):
            e.remove(index)
    assert len(net) == params


@pytest.mark.parametrize("params", [8, 200], ids=["by-name", "vectorised"])
def test_bulk_removals_of_a_value_a_kept_op_reads_are_refused(params: int) -> None:
    net = _init_net(params)
    net.append_op(Op("Relu", [f"p{params - 2}"], ["r"]))
    with pytest.raises(IllegalRewriteError, match=f"reading 'p{params - 2}'"), net.edit() as e:
        for index in range(0, params, 2):
            e.remove(index)
        e.set_external_outputs(["r"])
    assert len(net) == params + 1

"""The shared int objects (``graphtools._ints``): consecutive numbers, one object each."""

from __future__ import annotations

from itertools import islice

from graphtools import _ints
from graphtools.ir import Net, Op
from graphtools.serde.codec import net_from_bytes, serialize_net


def test_numbering_counts_on_past_the_shared_list_and_shares_below_it() -> None:
    known = len(_ints.shared_ints(0))
    numbers = list(islice(iter(_ints.numbering(), None), known + 3))
    assert numbers == list(range(known + 3))
    shared = _ints.shared_ints(known)
    assert all(a is b for a, b in zip(numbers[:known], shared, strict=True))


def test_the_list_grows_on_demand_and_numbering_made_before_does_not_repeat() -> None:
    next_number = _ints.numbering()
    known = len(_ints.shared_ints(0))
    grown = _ints.shared_ints(known + 10)  # grown after the numbering was made
    assert grown[known + 9] == known + 9
    assert [next_number() for _ in range(known + 2)] == list(range(known + 2))


def test_loaded_ops_of_two_nets_share_their_index_objects() -> None:
    first, second = (Net([Op("Relu", [f"x{i}"], [f"y{i}"]) for i in range(300)]) for _ in "ab")
    one, two = (net_from_bytes(serialize_net(net)) for net in (first, second))
    assert all(a.source()[1] is b.source()[1] for a, b in zip(one, two, strict=True))

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


def test_a_stream_of_numbers_is_the_shared_objects_and_reads_nothing_ahead() -> None:
    known = len(_ints.shared_ints(0))
    stream = _ints.shared_from(known - 2)
    assert [next(stream) for _ in range(5)] == list(range(known - 2, known + 3))
    shared = _ints.shared_ints(0)
    assert next(_ints.shared_from(7)) is shared[7]


def test_loading_a_stream_of_records_does_not_hold_them_all() -> None:
    """The ONNX codec hands its nodes over as a generator, a chunk at a time: wrap_loaded
    took a list of it first (every record alive at once, 50% more memory loading ONNX)."""
    alive = [0, 0]  # now, most at once

    class _Record:
        def __init__(self, number: int) -> None:
            self.type, self.input, self.output = "Relu", [f"x{number}"], [f"y{number}"]
            alive[0] += 1
            alive[1] = max(alive)

        def __del__(self) -> None:
            alive[0] -= 1

    records = (_Record(number) for number in range(5000))
    ops = Op.wrap_loaded(records, None, object(), nested=False, control=False)  # type: ignore[arg-type]
    assert [op.source()[1] for op in ops] == list(range(5000))
    assert alive[1] <= 2

"""paused_gc: the collector is off inside, restored after, and bulk results skip the young
generations."""

from __future__ import annotations

import gc

from graphtools._gc import BULK_ALLOCATIONS, paused_gc


class Node:
    """A tracked object, like the IR's ops."""


def test_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # re-entrant
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_bulk_build_lands_in_the_oldest_generation() -> None:
    with paused_gc():
        built = [Node() for _ in range(BULK_ALLOCATIONS + 1000)]
    oldest = {id(obj) for obj in gc.get_objects(generation=2)}
    assert all(id(node) in oldest for node in built[:: len(built) // 50])
    assert gc.get_count()[0] < 1000  # no pending young-generation work left behind


def test_a_small_block_leaves_the_generations_alone() -> None:
    with paused_gc():
        few = [Node() for _ in range(10)]
    youngest = {id(obj) for obj in gc.get_objects(generation=0)}
    assert all(id(node) in youngest for node in few)


def test_objects_the_application_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            _ = [Node() for _ in range(BULK_ALLOCATIONS + 1000)]
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.unfreeze()

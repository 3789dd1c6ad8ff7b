"""``Edit.expand``: one op replaced by several, each of its outputs taken over by the last new op
writing that name (what a lowering such as ``lower-recurrent-networks`` needs)."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import IllegalRewriteError
from graphtools.executor import Workspace, run_net
from graphtools.ir import Net, Op


def _net() -> Net:
    return Net(
        [
            Op("Relu", ["x"], ["r"]),
            Op("Split", ["r"], ["a", "b"], args={"axis": 0}),
            Op("Add", ["a", "b"], ["y"]),
        ],
        ["x"],
        ["y", "b"],
    )


def _run(net: Net) -> dict[str, np.ndarray]:
    ws = Workspace()
    ws.feed("x", np.arange(-2.0, 6.0).reshape(4, 2))
    run_net(net, ws)
    return {name: ws.fetch(name) for name in net.external_outputs}


def test_each_output_is_taken_over_by_the_last_new_op_writing_it() -> None:
    net = _net()
    expected = _run(net)
    lowered = [
        Op("Slice", ["r"], ["a"], args={"starts": [0], "ends": [2]}),
        Op("Slice", ["r"], ["b_tmp"], args={"starts": [2], "ends": [4]}),
        Op("Copy", ["b_tmp"], ["b"]),
    ]
    with net.edit() as edit:
        edit.expand(1, lowered)
    assert edit.changed
    assert [op.type for op in net] == ["Relu", "Slice", "Slice", "Copy", "Add"]
    for name, value in _run(net).items():
        np.testing.assert_array_equal(value, expected[name])


def test_an_output_still_read_must_be_written_by_the_new_ops() -> None:
    net = _net()
    with pytest.raises(IllegalRewriteError, match="reading 'b'"), net.edit() as edit:
        edit.expand(1, [Op("Slice", ["r"], ["a"], args={"starts": [0], "ends": [2]})])
    assert [op.type for op in net] == ["Relu", "Split", "Add"]


def test_an_op_is_expanded_once_per_edit() -> None:
    net = _net()
    with pytest.raises(IllegalRewriteError, match="expanded twice"), net.edit() as edit:
        edit.expand(1, [])
        edit.expand(1, [])

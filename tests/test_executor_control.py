"""Control-flow kernels: Do bindings and reused workspaces, nested If with branch-local blobs,
While with a condition net (the cases of Caffe2's do_op_test and net_builder_test)."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import ExecutionError
from graphtools.executor import Workspace, run_net
from graphtools.gradients import add_if_op, add_while_op
from graphtools.ir import Net, Op


def const(name, value, dtype=None):
    args = {"shape": [1], "value": value}
    if dtype is not None:
        args["dtype"] = dtype
    return Op("ConstantFill", [], [name], args=args)


def run(net, feeds=None):
    ws = Workspace()
    for k, v in (feeds or {}).items():
        ws.feed(k, np.asarray(v))
    run_net(net, ws)
    return ws


def test_do_binds_inner_names_to_outer_blobs():
    subnet = Net([Op("Add", ["X", "Y"], ["Z"])], name="subnet")
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op(
                "Do",
                ["outer_X", "outer_Y", "W"],
                ["outer_Z", "W"],
                args={"net": subnet, "inner_blobs": ["X", "Y", "Z"], "outer_blobs_idx": [0, 1, 2]},
            ),
        ]
    )
    ws = run(net, {"outer_X": [1, 2], "outer_Y": [3, 4]})
    assert ws.fetch("outer_Z").tolist() == [4, 6]
    assert not ws.has("Z") and not ws.has("X")


def test_do_reuse_workspace_sees_earlier_locals():
    init = Net([const("X", 1), const("Y", 2)], name="param_init_subnet")
    subnet = Net([Op("Add", ["X", "Y"], ["Z"])], name="subnet")
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op("Do", ["W"], ["W"], args={"net": init, "inner_blobs": [], "outer_blobs_idx": []}),
            Op(
                "Do",
                ["W"],
                ["outer_Z", "W"],
                args={
                    "net": subnet,
                    "inner_blobs": ["Z"],
                    "outer_blobs_idx": [0],
                    "reuse_workspace": 1,
                },
            ),
        ]
    )
    ws = run(net)
    assert ws.fetch("outer_Z").tolist() == [3]
    assert not ws.has("X")


def test_do_without_reuse_does_not_see_other_workspaces():
    init = Net([const("X", 1)], name="init")
    subnet = Net([Op("Copy", ["X"], ["Z"])], name="subnet")
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op("Do", ["W"], ["W"], args={"net": init, "inner_blobs": [], "outer_blobs_idx": []}),
            Op(
                "Do",
                ["W"],
                ["outer_Z", "W"],
                args={"net": subnet, "inner_blobs": ["Z"], "outer_blobs_idx": [0]},
            ),
        ]
    )
    with pytest.raises(ExecutionError, match="'X'"):
        run(net)


@pytest.mark.parametrize(
    "args, message",
    [
        ({"inner_blobs": ["a", "b"], "outer_blobs_idx": [0, 0]}, "Reusage of outer blob name"),
        ({"inner_blobs": ["a"], "outer_blobs_idx": [0]}, "Not all outer blob names"),
        ({"inner_blobs": ["a", "a"], "outer_blobs_idx": [0, 1]}, "redefinition of inner blob"),
    ],
)
def test_do_binding_errors(args, message):
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op("Do", ["x", "W"], ["y", "W"], args={"net": Net([Op("Copy", ["a"], ["b"])]), **args}),
        ]
    )
    with pytest.raises(ExecutionError, match=message):
        run(net, {"x": [1.0]})


def test_nested_if_with_branch_local_blobs():
    scope = {"x0", "x1", "x2", "y0", "y1", "y2", "first_res", "second_res", "t", "f"}
    net = Net(
        [
            const(n, v)
            for n, v in [
                ("x0", 0),
                ("x1", 1),
                ("x2", 2),
                ("y0", 0),
                ("y1", 1),
                ("y2", 2),
                ("first_res", 0),
                ("second_res", 0),
            ]
        ],
        name="if_net",
    )
    net.append_op(const("t", True, dtype=5))
    net.append_op(const("f", False, dtype=5))
    add_if_op(net, "t", scope, Net([const("first_res", 1)]), Net([const("first_res", 2)]))
    add_if_op(net, "f", scope, Net([const("second_res", 1)]), Net([const("second_res", 2)]))
    # then branch of the outer If: locals local_blob, gt, c100, eq, c901
    inner_scope = scope | {"local_blob", "gt"}
    then = Net(
        [
            const("local_blob", 900),
            const("c100", 100),
            Op("Add", ["c100", "local_blob"], ["y0"]),
            Op("GT", ["x1", "x2"], ["gt"]),
        ],
        name="then",
    )
    add_if_op(
        then,
        "gt",
        inner_scope,
        Net([], name="empty"),
        Net(
            [
                Op("Add", ["y1", "local_blob"], ["local_blob"]),
                const("c100b", 100),
                Op("Add", ["c100b", "y1"], ["y1"]),
            ]
        ),
    )
    then.append_op(const("c901", 901))
    then.append_op(Op("EQ", ["local_blob", "c901"], ["eq"]))
    add_if_op(
        then, "eq", inner_scope | {"eq"}, Net([const("y2", 7), Op("Add", ["y1", "y2"], ["y2"])])
    )
    net.append_op(Op("LT", ["x0", "x1"], ["lt"]))
    add_if_op(net, "lt", scope | {"lt"}, then, Net([], name="empty_else"))
    ws = run(net)
    values = {n: ws.fetch(n).item() for n in ("first_res", "second_res", "y0", "y1", "y2")}
    assert values == {"first_res": 1, "second_res": 2, "y0": 1000, "y1": 101, "y2": 108}
    assert not ws.has("local_blob") and not ws.has("c100")


def test_while_with_condition_net():
    net = Net([const("x", 0), const("y", 0), const("one", 1), const("seven", 7)], name="while_net")
    scope = {"x", "y", "one", "seven"}
    cond = Net([Op("Add", ["x", "one"], ["x"]), Op("LT", ["x", "seven"], ["cond"])], name="cond")
    add_while_op(net, "cond", scope, Net([Op("Add", ["x", "y"], ["y"])], name="body"), cond)
    assert [op.type for op in net][-4:] == ["ConstantFill", "CreateScope", "CreateScope", "While"]
    ws = run(net)
    assert ws.fetch("x").item() == 7 and ws.fetch("y").item() == 21


def test_while_without_condition_net_and_zero_iterations():
    body = Net([Op("Add", ["i", "one"], ["i"]), Op("LT", ["i", "n"], ["go"])], name="body")
    net = Net([const("i", 0), const("one", 1)], name="w")
    add_while_op(net, "go", {"i", "one", "n", "go"}, body)
    ws = run(net, {"n": [4], "go": [True]})
    assert ws.fetch("i").item() == 4
    ws = run(net, {"n": [4], "go": [False]})
    assert ws.fetch("i").item() == 0


def test_if_condition_must_be_one_bool():
    net = Net([Op("If", ["c"], [], args={"then_net": Net([])})])
    with pytest.raises(ExecutionError, match="one bool value"):
        run(net, {"c": [1.0]})


def test_has_scope_and_gradient_do_pop():
    subnet = Net([Op("Relu", ["a"], ["b"])], name="s")
    do = {"net": subnet, "inner_blobs": ["a", "b"], "outer_blobs_idx": [0, 1]}
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op("HasScope", ["W"], ["before"]),
            Op("Do", ["x", "W"], ["y", "W"], args=do),
            Op("HasScope", ["W"], ["after"]),
        ]
    )
    ws = run(net, {"x": [-1.0, 2.0]})
    assert ws.fetch("before").tolist() == [False] and ws.fetch("after").tolist() == [True]
    pop = Net(
        [
            Op(
                "Do",
                ["W"],
                ["W"],
                args={
                    "net": Net([Op("Copy", ["b"], ["z"])]),
                    "inner_blobs": [],
                    "outer_blobs_idx": [],
                },
                is_gradient_op=True,
            ),
            Op("HasScope", ["W"], ["popped"]),
        ]
    )
    run_net(pop, ws)
    assert ws.fetch("popped").tolist() == [False]
    with pytest.raises(ExecutionError, match="no forward workspace"):
        run_net(pop, ws)


def test_logic_and_training_kernels():
    net = Net(
        [
            Op("LE", ["a", "b"], ["le"]),
            Op("NE", ["a", "b"], ["ne"]),
            Op("And", ["le", "ne"], ["lt"]),
            Op("Not", ["lt"], ["ge"]),
            Op("Or", ["lt", "ge"], ["all"]),
            Op("Xor", ["lt", "ge"], ["one"]),
            Op("WeightedSum", ["a", "wa", "b", "wb"], ["ws"]),
            Op(
                "LearningRate",
                ["it"],
                ["lr"],
                args={"base_lr": -0.5, "policy": "step", "stepsize": 10, "gamma": 0.1},
            ),
        ]
    )
    ws = run(
        net,
        {
            "a": [1.0, 2.0, 3.0],
            "b": [2.0, 2.0, 2.0],
            "wa": [2.0],
            "wb": [-1.0],
            "it": np.array([25], dtype=np.int64),
        },
    )
    assert ws.fetch("lt").tolist() == [True, False, False]
    assert ws.fetch("ge").tolist() == [False, True, True]
    assert ws.fetch("all").all() and ws.fetch("one").all()
    assert ws.fetch("ws").tolist() == [0.0, 2.0, 4.0]
    assert np.isclose(ws.fetch("lr").item(), -0.5 * 0.01)

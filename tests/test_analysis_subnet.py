"""``find_sub_net``: the ops a cut keeps, its parameters, and each refusal by name."""

from __future__ import annotations

import pytest

from graphtools.analysis.subnet import find_sub_net
from graphtools.errors import SubNetError
from graphtools.ir import Net, Op


def _net() -> Net:
    return Net(
        [
            Op("Conv", ["data", "w", "b"], ["c"]),  # 0
            Op("Relu", ["c"], ["c"]),  # 1: in place
            Op("FC", ["c", "w2", "b2"], ["f"]),  # 2
            Op("Sigmoid", ["f"], ["y"]),  # 3
            Op("Tanh", ["data"], ["side"]),  # 4: not needed for y
            Op("Add", ["y", "side"], ["z"]),  # 5
            Op("Add", ["c", "y"], ["w"]),  # 6
        ],
        ["data", "w", "b", "w2", "b2"],
        ["y", "z"],
        name="n",
    )


PARAMS = frozenset({"w", "b", "w2", "b2"})


def test_a_cut_keeps_what_the_outputs_need_and_their_parameters() -> None:
    plan = find_sub_net(_net(), ["c"], ["y"], PARAMS)
    assert (plan.ops, plan.params, plan.input_versions) == ((2, 3), ("w2", "b2"), {"c": 2})
    plan = find_sub_net(_net(), ["data"], ["y", "z"], PARAMS)
    assert plan.ops == (0, 1, 2, 3, 4, 5) and plan.params == ("w", "b", "w2", "b2")
    assert find_sub_net(_net(), ["c", "data"], ["y"], PARAMS).unused_inputs == ("data",)


@pytest.mark.parametrize(
    ("inputs", "outputs", "words"),
    [
        (["c"], ["z"], ["output 'z'", "needs 'data'", "add 'data' to the inputs"]),
        (["nope"], ["y"], ["input 'nope' is not a blob of net n"]),
        (["c"], ["y", "y"], ["output 'y' is named twice"]),
        (["c"], [], ["at least one output"]),
        (["y", "data"], ["w"], ["would run op #0 (Conv) twice", "input 'y'"]),
    ],
)
def test_refusals_name_what_is_wrong(
    inputs: list[str], outputs: list[str], words: list[str]
) -> None:
    with pytest.raises(SubNetError) as caught:
        find_sub_net(_net(), inputs, outputs, PARAMS)
    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_an_input_read_at_two_versions_is_refused() -> None:
    net = Net(
        [
            Op("Sigmoid", ["t"], ["x"]),
            Op("Mul", ["x", "t"], ["m"]),  # reads x@1
            Op("Relu", ["x"], ["x"]),
            Op("Add", ["x", "m"], ["y"]),  # reads x@2
        ],
        ["t"],
        ["y"],
        name="n",
    )
    assert find_sub_net(net, ["x", "t"], ["m"]).input_versions == {"x": 1, "t": 0}
    with pytest.raises(SubNetError, match=r"input 'x' would stand for two values: op #1 \(Mul\)"):
        find_sub_net(net, ["x", "t"], ["y"])


def test_an_if_needs_what_its_branches_read_before_writing() -> None:
    then = Net([Op("Relu", ["a"], ["m"]), Op("Add", ["m", "k"], ["out"])], name="then")
    net = Net(
        [
            Op("Sigmoid", ["x"], ["a"]),
            Op("Tanh", ["x"], ["k"]),
            Op("If", ["cond"], [], args={"then_net": then}),
            Op("Copy", ["out"], ["y"]),
        ],
        ["x", "cond"],
        ["y"],
        name="n",
    )
    plan = find_sub_net(net, ["a", "k", "cond"], ["y"])
    assert plan.ops == (2, 3)  # 'm' is written in the branch before it is read there
    with pytest.raises(SubNetError, match="needs 'x'"):  # k's producer reads x
        find_sub_net(net, ["a", "cond"], ["y"])


def _fill_then(op: Op) -> Net:
    """y filled, then ``op`` (holding nested nets) that may write y again."""
    return Net(
        [Op("ConstantFill", [], ["y"], args={"shape": [2], "value": 7.0}), op],
        ["cond", "x"],
        ["y"],
        name="n",
    )


def _writes_y(name: str) -> Net:
    return Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"], name=name)


@pytest.mark.parametrize(
    ("op", "kept"),
    [
        # One branch writes y: on the other the If leaves the fill's value, so the fill stays.
        (Op("If", ["cond"], [], args={"else_net": _writes_y("else")}), (0, 1)),
        (
            Op(
                "If", ["cond"], [], args={"then_net": Net([], name="t"), "else_net": _writes_y("e")}
            ),
            (0, 1),
        ),
        # Both branches write y: the fill's value never reaches y.
        (
            Op("If", ["cond"], [], args={"then_net": _writes_y("t"), "else_net": _writes_y("e")}),
            (1,),
        ),
        # A loop net may not run: its writes keep the value from before the While.
        (Op("While", ["cond"], [], args={"loop_net": _writes_y("loop")}), (0, 1)),
    ],
)
def test_a_value_a_nested_net_may_leave_unwritten_keeps_its_writer(op: Op, kept: tuple) -> None:
    plan = find_sub_net(_fill_then(op), ["cond", "x"], ["y"])
    assert plan.ops == kept


def test_a_scratch_name_two_ifs_both_write_does_not_chain_them() -> None:
    """Only the maybe-unwritten name's own value comes along, not every input of the If:
    the second If's 'b' needs nothing of the first If, though both write a scratch 't'."""

    def branch(source: str, target: str, name: str) -> Net:
        ops = [Op("Relu", [source], ["t"]), Op("Sigmoid", ["t"], [target])]
        return Net(ops, [source], [target], name=name)

    first = Op("If", ["c1"], [], args={"then_net": branch("x1", "a", "t1")})
    second = Op("If", ["c2"], [], args={"then_net": branch("x2", "b", "t2")})
    net = Net([first, second], ["c1", "x1", "c2", "x2"], ["a", "b"], name="n")
    assert find_sub_net(net, ["c2", "x2"], ["b"]).ops == (1,)


def test_a_value_an_if_may_leave_from_the_init_net_is_a_parameter_of_the_cut() -> None:
    then = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"], name="t")
    net = Net(
        [Op("If", ["cond"], [], args={"then_net": then})], ["cond", "x", "y"], ["y"], name="n"
    )
    plan = find_sub_net(net, ["cond", "x"], ["y"], frozenset({"y"}))
    assert (plan.ops, plan.params) == ((0,), ("y",))


def test_a_branch_reading_what_an_inner_if_may_not_write_needs_the_outer_value() -> None:
    inner = Op("If", ["c2"], [], args={"then_net": Net([Op("Relu", ["x"], ["y"])], name="it")})
    then = Net([inner, Op("Sigmoid", ["y"], ["z"]), Op("Relu", ["x"], ["y"])], name="ot")
    other = Net([Op("Relu", ["x"], ["y"]), Op("Tanh", ["y"], ["z"])], name="oe")
    fill = Op("ConstantFill", [], ["y"], args={"shape": [2], "value": 7.0})
    outer = Op("If", ["c1"], [], args={"then_net": then, "else_net": other})
    net = Net([fill, outer], ["c1", "c2", "x"], ["z"], name="n")
    assert find_sub_net(net, ["c1", "c2", "x"], ["z"]).ops == (0, 1)

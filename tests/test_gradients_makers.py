"""Every built-in gradient maker, run on the executor, equals central differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.gradients import GradientRegistry
from graphtools.gradients._proto import op_from_proto
from graphtools.ir import Net, Op
from graphtools.testing import check_gradients


def rand(*shape, seed=0, positive=False):
    rng = np.random.default_rng(seed + 17 * len(shape) + sum(shape))
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.5 if positive else x


CASES = {
    "FC": (
        [Op("FC", ["x", "w", "b"], ["y"])],
        {"x": rand(3, 4), "w": rand(2, 4), "b": rand(2)},
        ["y"],
    ),
    "FC-axis2": (
        [Op("FC", ["x", "w", "b"], ["y"], args={"axis": 2})],
        {"x": rand(2, 3, 4), "w": rand(5, 4), "b": rand(5)},
        ["y"],
    ),
    "Relu": ([Op("Relu", ["x"], ["y"])], {"x": rand(3, 4)}, ["y"]),
    "Sigmoid": ([Op("Sigmoid", ["x"], ["y"])], {"x": rand(3, 4)}, ["y"]),
    "Tanh": ([Op("Tanh", ["x"], ["y"])], {"x": rand(3, 4)}, ["y"]),
    "Softmax": ([Op("Softmax", ["x"], ["y"])], {"x": rand(3, 4)}, ["y"]),
    "Sum": (
        [Op("Sum", ["a", "b", "c"], ["y"])],
        {"a": rand(2, 3), "b": rand(2, 3, seed=1), "c": rand(2, 3, seed=2)},
        ["y"],
    ),
    "Add-numpy-broadcast": (
        [Op("Add", ["a", "b"], ["y"])],
        {"a": rand(2, 3, 4), "b": rand(3, 1)},
        ["y"],
    ),
    "Add-legacy-broadcast": (
        [Op("Add", ["a", "b"], ["y"], args={"broadcast": 1, "axis": 1})],
        {"a": rand(2, 3, 4), "b": rand(3)},
        ["y"],
    ),
    "Sub": ([Op("Sub", ["a", "b"], ["y"])], {"a": rand(2, 3), "b": rand(1, 3)}, ["y"]),
    "Mul": ([Op("Mul", ["a", "b"], ["y"])], {"a": rand(4, 3), "b": rand(3)}, ["y"]),
    "Div": (
        [Op("Div", ["a", "b"], ["y"])],
        {"a": rand(2, 3), "b": rand(2, 1, positive=True)},
        ["y"],
    ),
    "MatMul": ([Op("MatMul", ["a", "b"], ["y"])], {"a": rand(3, 4), "b": rand(4, 2)}, ["y"]),
    "MatMul-trans_a": (
        [Op("MatMul", ["a", "b"], ["y"], args={"trans_a": 1})],
        {"a": rand(4, 3), "b": rand(4, 2)},
        ["y"],
    ),
    "MatMul-trans_b": (
        [Op("MatMul", ["a", "b"], ["y"], args={"trans_b": 1})],
        {"a": rand(3, 4), "b": rand(2, 4)},
        ["y"],
    ),
    "MatMul-trans_both": (
        [Op("MatMul", ["a", "b"], ["y"], args={"trans_a": 1, "trans_b": 1})],
        {"a": rand(4, 3), "b": rand(2, 4)},
        ["y"],
    ),
    "Copy": ([Op("Copy", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"]),
    "CopyGPUToCPU": ([Op("CopyGPUToCPU", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"]),
    "CopyCPUToGPU": ([Op("CopyCPUToGPU", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"]),
    "Conv": (
        [Op("Conv", ["x", "w", "b"], ["y"], args={"kernel": 3})],
        {"x": rand(2, 3, 5, 5), "w": rand(4, 3, 3, 3), "b": rand(4)},
        ["y"],
    ),
    "Conv-no-bias-strided-padded-dilated": (
        [Op("Conv", ["x", "w"], ["y"], args={"kernel": 2, "stride": 2, "pad": 1, "dilation": 2})],
        {"x": rand(1, 2, 6, 7), "w": rand(3, 2, 2, 2)},
        ["y"],
    ),
    "Conv-grouped-NHWC": (
        [Op("Conv", ["x", "w", "b"], ["y"], args={"kernel": 2, "group": 2, "order": "NHWC"})],
        {"x": rand(2, 4, 4, 4), "w": rand(6, 2, 2, 2), "b": rand(6)},
        ["y"],
    ),
    "Conv-1d-pads": (
        [Op("Conv", ["x", "w", "b"], ["y"], args={"kernels": [3], "pads": [2, 1]})],
        {"x": rand(2, 2, 6), "w": rand(3, 2, 3), "b": rand(3)},
        ["y"],
    ),
    "MaxPool": (
        [Op("MaxPool", ["x"], ["y"], args={"kernel": 2, "stride": 2})],
        {"x": rand(2, 3, 4, 6)},
        ["y"],
    ),
    "MaxPool-overlapping-padded-NHWC": (
        [Op("MaxPool", ["x"], ["y"], args={"kernel": 3, "stride": 1, "pad": 1, "order": "NHWC"})],
        {"x": rand(1, 5, 4, 2)},
        ["y"],
    ),
    "AveragePool-padded": (
        [Op("AveragePool", ["x"], ["y"], args={"kernel": 3, "stride": 2, "pad": 1})],
        {"x": rand(2, 2, 5, 5)},
        ["y"],
    ),
    "AveragePool-count-include-pad": (
        [
            Op(
                "AveragePool",
                ["x"],
                ["y"],
                args={"kernel": 3, "stride": 2, "pad": 1, "count_include_pad": 1},
            )
        ],
        {"x": rand(2, 2, 5, 5)},
        ["y"],
    ),
    "AveragePool-global": (
        [Op("AveragePool", ["x"], ["y"], args={"global_pooling": 1})],
        {"x": rand(2, 3, 4, 5)},
        ["y"],
    ),
    "Concat": (
        [Op("Concat", ["a", "b"], ["y", "dims"], args={"axis": 1})],
        {"a": rand(2, 3), "b": rand(2, 1)},
        ["y"],
    ),
    "Split": (
        [Op("Split", ["x"], ["p", "q"], args={"axis": 1, "split": [1, 3]})],
        {"x": rand(2, 4)},
        ["p", "q"],
    ),
    "Split-one-output-with-gradient": (
        [Op("Split", ["x"], ["p", "q"], args={"axis": 1, "split": [1, 3]})],
        {"x": rand(2, 4)},
        ["q"],
    ),
    "Reshape": (
        [Op("Reshape", ["x"], ["y", "old"], args={"shape": [3, -1]})],
        {"x": rand(2, 3, 2)},
        ["y"],
    ),
    "Transpose": (
        [Op("Transpose", ["x"], ["y"], args={"axes": [1, 2, 0]})],
        {"x": rand(2, 3, 4)},
        ["y"],
    ),
    "AveragedLoss": ([Op("AveragedLoss", ["x"], ["y"])], {"x": rand(3, 4)}, ["y"]),
    "SquaredL2Distance": (
        [Op("SquaredL2Distance", ["a", "b"], ["y"])],
        {"a": rand(3, 4), "b": rand(3, 4, seed=5)},
        ["y"],
    ),
    "DotProduct": (
        [Op("DotProduct", ["a", "b"], ["y"])],
        {"a": rand(3, 4), "b": rand(3, 4, seed=5)},
        ["y"],
    ),
    "SoftmaxWithLoss": (
        [Op("SoftmaxWithLoss", ["x", "label"], ["p", "loss"])],
        {"x": rand(4, 3), "label": np.array([0, 2, 1, 1], dtype=np.int32)},
        ["loss"],
    ),
    "SoftmaxWithLoss-weighted-scaled": (
        [Op("SoftmaxWithLoss", ["x", "label", "weight"], ["p", "loss"], args={"scale": 0.5})],
        {
            "x": rand(4, 3),
            "label": np.array([0, 2, 1, 1], dtype=np.int32),
            "weight": np.array([1.0, 2.0, 0.5, 1.5]),
        },
        ["loss"],
    ),
    "SoftmaxWithLoss-label-prob": (
        [Op("SoftmaxWithLoss", ["x", "t"], ["p", "loss"], args={"label_prob": 1})],
        {"x": rand(2, 3), "t": np.array([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0]])},
        ["loss"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_maker_matches_finite_differences(case):
    ops, inputs, ys = CASES[case]
    wrt = [n for n, v in inputs.items() if v.dtype == np.float64 and n not in ("t", "weight")]
    results = check_gradients(Net(ops), inputs, ys, wrt=wrt, all_elements=True)
    assert results and all(r.ok for r in results)


@pytest.mark.parametrize("drop_states", [0, 1])
def test_lstm_unit_matches_finite_differences(drop_states):
    n, d = 3, 2
    inputs = {
        "h": rand(1, n, d),
        "c": rand(1, n, d, seed=1),
        "g": rand(1, n, 4 * d, seed=2),
        "lengths": np.array([3, 1, 2], dtype=np.int32),
        "t": np.array([1], dtype=np.int32),
    }
    net = Net(
        [
            Op(
                "LSTMUnit",
                ["h", "c", "g", "lengths", "t"],
                ["ht", "ct"],
                args={"forget_bias": 0.5, "drop_states": drop_states},
            )
        ]
    )
    results = check_gradients(net, inputs, ["ht", "ct"], wrt=["h", "c", "g"], all_elements=True)
    assert all(r.ok for r in results)


def test_lstm_unit_forward_against_formula():
    from graphtools.executor import Workspace, run_net

    h, c, g = rand(1, 1, 1), rand(1, 1, 1, seed=1), rand(1, 1, 4, seed=2)
    ws = Workspace()
    for k, v in {"h": h, "c": c, "g": g, "t": np.array([0], dtype=np.int32)}.items():
        ws.feed(k, v)
    run_net(
        Net([Op("LSTMUnit", ["h", "c", "g", "t"], ["ht", "ct"], args={"sequence_lengths": 0})]), ws
    )
    i, f, o, gg = g.reshape(-1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    cell = c.item() * sig(f) + sig(i) * np.tanh(gg)
    assert np.isclose(ws.fetch("ct").item(), cell)
    assert np.isclose(ws.fetch("ht").item(), sig(o) * np.tanh(cell))


def test_constant_fill_and_stop_gradient_give_no_gradient():
    grads, grad_map = GradientRegistry.GetBackwardPass(
        [
            Op("ConstantFill", ["x"], ["c"], args={"value": 2.0}),
            Op("StopGradient", ["x"], ["s"]),
            Op("Sum", ["c", "s"], ["y"]),
        ],
        {"y": "y_grad"},
    )
    assert grads == [] and "x" not in grad_map and grad_map["c"] == "y_grad"


def test_mlp_with_softmax_with_loss():
    inputs = {
        "x": rand(4, 3),
        "w1": rand(5, 3, seed=1),
        "b1": rand(5, seed=2),
        "w2": rand(3, 5, seed=3),
        "b2": rand(3, seed=4),
        "label": np.array([0, 2, 1, 2], dtype=np.int32),
    }
    net = Net(
        [
            Op("FC", ["x", "w1", "b1"], ["h"]),
            Op("Relu", ["h"], ["h"]),
            Op("Tanh", ["h"], ["t"]),
            Op("FC", ["t", "w2", "b2"], ["logits"]),
            Op("SoftmaxWithLoss", ["logits", "label"], ["p", "loss"]),
        ]
    )
    assert all(r.ok for r in check_gradients(net, inputs, ["loss"], all_elements=True))


def test_in_place_ops_with_fan_out():
    net = Net(
        [
            Op("Mul", ["x", "w"], ["h"]),
            Op("Sigmoid", ["h"], ["h"]),  # in place
            Op("Mul", ["h", "h"], ["sq"]),  # one blob read twice by one op
            Op("Add", ["h", "x"], ["a"]),  # fan-out of h and of x
            Op("Tanh", ["a"], ["a"]),
            Op("Sum", ["a", "sq", "h"], ["y"]),
        ]
    )
    inputs = {"x": rand(2, 3), "w": rand(2, 3, seed=1)}
    assert all(r.ok for r in check_gradients(net, inputs, ["y"], all_elements=True))


def test_stop_gradient_branch_equals_differences_with_the_branch_held():
    """The gradient through a net with a StopGradient branch equals the finite differences of
    the same net where the stopped blob is an input held at its value."""
    from graphtools.executor import Workspace, run_net

    inputs = {"x": rand(2, 3), "w": rand(2, 3, seed=1)}
    branch = [Op("Tanh", ["x"], ["t"]), Op("StopGradient", ["t"], ["t"])]
    rest = [Op("Mul", ["x", "w"], ["m"]), Op("Mul", ["m", "t"], ["y"])]
    ws = Workspace()
    for k, v in inputs.items():
        ws.feed(k, v)
    run_net(Net(branch), ws)
    held = {**inputs, "t": np.asarray(ws.fetch("t"))}
    grads, grad_map = GradientRegistry.GetBackwardPass(branch + rest, {"y": "y_grad"})
    net = Net(branch + rest)
    run_net(net, ws)
    ws.feed("y_grad", ws.fetch("y"))
    run_net(Net([op_from_proto(g) for g in grads]), ws)
    expected = {
        r.index: r.numeric
        for r in check_gradients(Net(rest), held, ["y"], wrt=["x"], all_elements=True)
    }
    analytic = np.asarray(ws.fetch(grad_map["x"]))
    for index, numeric in expected.items():
        assert np.isclose(analytic[index], numeric, rtol=1e-4, atol=1e-6)

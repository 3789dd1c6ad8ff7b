"""graphtools.analysis.channels: parameter shapes of a weightless net, derived without running
it, agree with the ones ``random_params`` makes by running it."""

from __future__ import annotations

import pytest

from graphtools.analysis.channels import infer_param_shapes, param_spec, plan_channels
from graphtools.errors import InvalidNetError
from graphtools.ir import Net, Op
from graphtools.testing import random_params


def _net() -> Net:
    return Net(
        [
            Op("Conv", ["data", "c1_w", "c1_b"], ["c1"], args={"kernel": 3, "pad": 1}),
            Op("SpatialBN", ["c1", "s", "b", "m", "v"], ["bn"], args={"is_test": 1}),
            Op("PRelu", ["bn", "slope"], ["bn"]),
            Op("Conv", ["bn", "dw_w"], ["dw"], args={"kernel": 3, "group": 6}),
            Op("Mul", ["dw", "mul_b"], ["mul"], args={"broadcast": 1, "axis": 1}),
            Op("FC", ["mul", "fc_w", "fc_b"], ["fc"]),
            Op("Softmax", ["fc"], ["prob"]),
        ],
        ["data"],
        ["prob"],
        name="tiny",
    )


def test_derived_shapes_are_the_ones_random_params_makes() -> None:
    shapes = infer_param_shapes(_net(), {"data": (2, 3, 8, 8)}, channels=6)
    params = random_params(_net(), {"data": (2, 3, 8, 8)}, channels=6)
    assert shapes == {name: value.shape for name, value in params.items()}
    assert shapes["dw_w"] == (6, 1, 3, 3) and shapes["fc_w"] == (6, 6 * 6 * 6)
    forced = infer_param_shapes(
        _net(), {"data": (2, 3, 8, 8)}, channels=6, param_shapes={"c1_w": (12, 3, 3, 3)}
    )
    assert (
        forced["c1_w"] == (12, 3, 3, 3) and forced["s"] == (12,) and forced["dw_w"] == (6, 2, 3, 3)
    )


def test_param_spec_follows_the_op_order_and_kind() -> None:
    conv = Op("Conv", ["x", "w", "b"], ["y"], args={"kernel": 3, "order": "NHWC", "group": 2})
    spec = param_spec(conv, 0, 1, (1, 5, 5, 4), {0: 8}, 16)
    assert spec is not None and spec.shape == (8, 3, 3, 2) and spec.fan_in == 18
    bn = Op("SpatialBN", ["x", "s", "b", "m", "v"], ["y"])
    assert param_spec(bn, 0, 4, (1, 7, 2, 2), {}, 16).init == "positive"  # type: ignore[union-attr]
    assert param_spec(Op("Relu", ["x", "p"], ["y"]), 0, 1, (1, 2), {}, 16) is None
    assert plan_channels(_net(), {"data": (1, 3, 4, 4)}, 8, {}) == {0: 12, 3: 12, 5: 8}


def test_param_spec_refuses_inputs_the_op_cannot_read() -> None:
    """Found by the fuzz campaign: these raised IndexError from inside the guesser."""
    conv = Op("Conv", ["x", "w", "b"], ["y"], args={"kernel": 3})
    with pytest.raises(InvalidNetError, match=r"op #4 \(Conv\) reads a 2-D input"):
        param_spec(conv, 4, 1, (1, 5), {4: 8}, 16)
    add = Op("Add", ["x", "p"], ["y"], args={"broadcast": 1, "axis": 3})
    with pytest.raises(InvalidNetError, match=r"op #0 \(Add\): broadcast axis 3"):
        param_spec(add, 0, 1, (1, 5), {}, 16)
    assert param_spec(add, 0, 1, (1, 5, 2, 7), {}, 16).shape == (7,)  # type: ignore[union-attr]


def test_a_parameter_after_an_op_without_a_rule_cannot_be_derived() -> None:
    net = Net([Op("Mystery", ["data"], ["m"]), Op("FC", ["m", "w", "b"], ["y"])], name="odd")
    with pytest.raises(InvalidNetError, match=r"op #1 \(FC\) in net 'odd'.*'w'.*param_shapes"):
        infer_param_shapes(net, {"data": (1, 4)})
    assert infer_param_shapes(net, {"data": (1, 4)}, param_shapes={"w": (3, 4), "b": (3,)}) == {
        "w": (3, 4),
        "b": (3,),
    }

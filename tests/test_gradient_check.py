"""check_gradients: Caffe2's gradient-checker rule, and that it catches a wrong gradient."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import InvalidArgumentError
from graphtools.gradients import GradientRegistry
from graphtools.gradients._proto import create_operator
from graphtools.ir import Net, Op
from graphtools.testing import check_gradients


def _wrong_scale_gradient(op, g_output):
    # d(s x)/dx is s; this maker "forgets" half of it
    return create_operator("Scale", [g_output[0]], [op.input[0] + "_grad"], scale=1.0), [
        op.input[0] + "_grad"
    ]


@pytest.fixture
def wrong_scale_gradient():
    GradientRegistry.RegisterGradient("Scale")(_wrong_scale_gradient)
    yield
    del GradientRegistry.gradient_registry_["Scale"]


def test_wrong_gradient_is_caught(wrong_scale_gradient):
    net = Net([Op("Scale", ["x"], ["y"], args={"scale": 2.0})])
    with pytest.raises(AssertionError, match=r"x\[0, 0\]: analytic .*numeric"):
        check_gradients(net, {"x": np.ones((2, 2))}, ["y"])


def test_checks_first_and_last_elements_by_default():
    net = Net([Op("Tanh", ["x"], ["y"])])
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    assert [r.index for r in check_gradients(net, {"x": x}, ["y"])] == [(0, 0), (2, 3)]
    assert len(check_gradients(net, {"x": x}, ["y"], all_elements=True)) == 12


def test_loss_is_half_sum_of_squares():
    # y = 3 x: loss = 1/2 (3x)^2, dloss/dx = 9 x
    net = Net([Op("Mul", ["x", "three"], ["y"])])
    results = check_gradients(
        net, {"x": np.array([2.0]), "three": np.array([3.0])}, ["y"], wrt=["x"]
    )
    assert np.isclose(results[0].analytic, 18.0) and np.isclose(results[0].numeric, 18.0)


def test_bad_arguments():
    net = Net([Op("Tanh", ["x"], ["y"])])
    with pytest.raises(InvalidArgumentError):
        check_gradients(net, {"x": np.ones(2)}, [])
    with pytest.raises(InvalidArgumentError, match="z"):
        check_gradients(net, {"x": np.ones(2)}, ["y"], wrt=["z"])

"""The interpreter, the registry, the workspace and the errors users see."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graphtools.errors import GraphToolsError, InvalidNetError, UnsupportedOpError
from graphtools.executor import (
    KERNELS,
    ExecutionError,
    Workspace,
    kernel,
    run_model,
    run_net,
)
from graphtools.ir import DeviceOption, Model, Net, Op


def _fc_model() -> Model:
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"], args={"shape": (2, 3), "values": [1.0] * 6}),
            Op("ConstantFill", [], ["b"], args={"shape": (2,), "value": 0.5}),
        ]
    )
    predict = Net(
        [Op("FC", ["x", "w", "b"], ["h"]), Op("Relu", ["h"], ["h"])],
        external_inputs=["x", "w", "b"],
        external_outputs=["h"],
        name="fc_net",
    )
    return Model(predict, init)


def test_run_model_runs_init_then_predict_in_one_workspace() -> None:
    x = np.asarray([[1.0, 2.0, 3.0], [-4.0, -5.0, -6.0]], np.float32)
    out = run_model(_fc_model(), {"x": x})
    assert list(out) == ["h"]
    np.testing.assert_allclose(out["h"], [[6.5, 6.5], [0.0, 0.0]])
    assert out["h"].dtype == np.float32


def test_feeds_override_init_net_blobs() -> None:
    x = np.ones((1, 3), np.float32)
    out = run_model(_fc_model(), {"x": x, "b": np.asarray([10.0, 20.0], np.float32)})
    np.testing.assert_allclose(out["h"], [[13.0, 23.0]])


def test_in_place_ops_overwrite_by_name() -> None:
    net = Net([Op("Relu", ["x"], ["x"]), Op("Scale", ["x"], ["x"], args={"scale": 2.0})])
    ws = Workspace()
    ws.feed("x", np.asarray([-1.0, 3.0], np.float32))
    run_net(net, ws)
    np.testing.assert_allclose(ws.fetch("x"), [0.0, 6.0])


def test_missing_feed_is_an_invalid_net_error_naming_it() -> None:
    with pytest.raises(InvalidNetError, match=r"\['x'\] read by net 'fc_net' are neither fed"):
        run_model(_fc_model(), {})


def test_unexpected_feed_is_rejected() -> None:
    with pytest.raises(InvalidNetError, match="'typo'"):
        run_model(_fc_model(), {"x": np.ones((1, 3), np.float32), "typo": np.zeros(1)})


def test_unwritten_external_output_is_reported() -> None:
    model = _fc_model()
    model.predict_net.set_external_outputs(["h", "never"])
    with pytest.raises(InvalidNetError, match=r"'never' .* never written"):
        run_model(model, {"x": np.ones((1, 3), np.float32)})


def test_op_without_kernel_names_type_index_and_net() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("NoSuchOp", ["y"], ["z"])], name="my_net")
    ws = Workspace()
    ws.feed("x", np.zeros(2, np.float32))
    with pytest.raises(UnsupportedOpError, match=r"op #1 \(NoSuchOp\) in net 'my_net'"):
        run_net(net, ws)


def test_bad_shapes_raise_execution_error_with_shapes_not_numpy_errors() -> None:
    net = Net([Op("FC", ["x", "w", "b"], ["y"])], name="n")
    ws = Workspace()
    ws.feed("x", np.zeros((2, 3), np.float32))
    ws.feed("w", np.zeros((4, 5), np.float32))
    ws.feed("b", np.zeros(4, np.float32))
    with pytest.raises(ExecutionError) as info:
        run_net(net, ws)
    error = info.value
    assert isinstance(error, GraphToolsError)
    assert (error.op_index, error.op_type, error.net_name) == (0, "FC", "n")
    assert error.input_shapes == {"x": (2, 3), "w": (4, 5), "b": (4,)}
    assert "x: float32[2, 3], w: float32[4, 5]" in str(error)


def test_numpy_failures_inside_kernels_are_wrapped() -> None:
    net = Net([Op("Reshape", ["x"], ["y", "old"], args={"shape": (5, -1)})])
    ws = Workspace()
    ws.feed("x", np.zeros((2, 3), np.float32))
    with pytest.raises(ExecutionError, match=r"op #0 \(Reshape\) failed: cannot reshape"):
        run_net(net, ws)


def test_missing_input_blob_names_the_blob() -> None:
    with pytest.raises(ExecutionError, match=r"op #0 \(Relu\) reads blob 'nope'"):
        run_net(Net([Op("Relu", ["nope"], ["y"])]), Workspace())


def test_unsupported_arguments_raise_unsupported_op_error_with_location() -> None:
    op = Op("SpatialBN", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])
    ws = Workspace()
    for name in op.inputs:
        ws.feed(name, np.ones((1, 2, 2, 2) if name == "x" else 2, np.float32))
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(SpatialBN\).*training mode"):
        run_net(Net([op]), ws)


def test_kernel_decorator_registers_several_names() -> None:
    @kernel("TestOnlyDouble", "TestOnlyTwice")
    def _double(op: Op, inputs: list[Any]) -> list[Any]:
        return [inputs[0] * 2]

    try:
        for op_type in ("TestOnlyDouble", "TestOnlyTwice"):
            ws = Workspace()
            ws.feed("x", np.asarray([1.5]))
            run_net(Net([Op(op_type, ["x"], ["y"])]), ws)
            np.testing.assert_allclose(ws.fetch("y"), [3.0])
        with pytest.raises(ValueError, match="already registered"):
            kernel("TestOnlyDouble")(_double)
    finally:
        KERNELS.pop("TestOnlyDouble")
        KERNELS.pop("TestOnlyTwice")


def test_nested_workspace_reads_parent_writes_locally() -> None:
    parent = Workspace()
    parent.feed("x", np.asarray([1.0, -1.0], np.float32))
    child = Workspace(parent)
    run_net(Net([Op("Relu", ["x"], ["y"]), Op("Relu", ["x"], ["x"])]), child)
    assert child.has("y") and not parent.has("y")
    np.testing.assert_allclose(parent.fetch("x"), [1.0, -1.0])
    np.testing.assert_allclose(child.fetch("x"), [1.0, 0.0])
    assert child.local_blobs() == ["y", "x"]
    with pytest.raises(InvalidNetError, match="'zzz'"):
        child.fetch("zzz")


def _random_net(seed: int | None = None) -> Net:
    device = None if seed is None else DeviceOption(random_seed=seed)
    return Net(
        [
            Op("XavierFill", [], ["a"], args={"shape": (4, 5)}, device_option=device),
            Op("GaussianFill", [], ["b"], args={"shape": (3,), "std": 2.0}, device_option=device),
            Op("UniformFill", [], ["c"], args={"shape": (6,), "min": -1.0, "max": 1.0}),
            Op("MSRAFill", [], ["d"], args={"shape": (2, 8)}, device_option=device),
        ]
    )


def _fill(net: Net, seed: int) -> dict[str, np.ndarray]:
    ws = Workspace(seed=seed)
    run_net(net, ws)
    return {name: ws.fetch(name) for name in "abcd"}


def test_random_fills_are_deterministic_given_the_seed() -> None:
    first, again = _fill(_random_net(), 7), _fill(_random_net(), 7)
    for name in "abcd":
        np.testing.assert_array_equal(first[name], again[name])
    other = _fill(_random_net(), 8)
    assert not np.array_equal(first["a"], other["a"])


def test_op_random_seed_wins_over_workspace_seed() -> None:
    with_op_seed_1 = _fill(_random_net(seed=3), 1)
    with_op_seed_2 = _fill(_random_net(seed=3), 2)
    np.testing.assert_array_equal(with_op_seed_1["a"], with_op_seed_2["a"])
    assert not np.array_equal(with_op_seed_1["c"], with_op_seed_2["c"])  # no seed of its own


def test_net_device_option_seed_applies_to_ops_without_their_own() -> None:
    def filled(workspace_seed: int) -> np.ndarray:
        net = Net([Op("GaussianFill", [], ["g"], args={"shape": (5,)})])
        net.set_device_option(DeviceOption(random_seed=11))
        ws = Workspace(seed=workspace_seed)
        run_net(net, ws)
        return ws.fetch("g")

    np.testing.assert_array_equal(filled(1), filled(2))


def test_a_failing_op_without_inputs_lists_none() -> None:
    """A fill failing said "... (inputs: )" with nothing after it."""
    fill = Op("GivenTensorFill", [], ["x"], args={"shape": [2], "values": [1.0, 2.0, 3.0]})
    with pytest.raises(ExecutionError) as caught:
        run_model(Model(Net([fill], [], ["x"]), None), {})
    assert str(caught.value) == "op #0 (GivenTensorFill) failed: 3 values do not fill shape [2]"


def test_an_op_missing_an_input_its_kernel_reads_says_so() -> None:
    """A Conv without its weights failed with a bare "list index out of range"."""
    model = Model(Net([Op("Conv", ["x"], ["y"], args={"kernel": 1})], ["x"], ["y"]))
    with pytest.raises(ExecutionError, match=r"op #0 \(Conv\) failed") as caught:
        run_model(model, {"x": np.zeros((1, 1, 2, 2), np.float32)})
    assert "the op lists 1 input(s) and 1 output(s): does Conv take more?" in str(caught.value)


def test_an_axis_out_of_range_is_not_blamed_on_a_missing_input() -> None:
    """numpy's AxisError is an IndexError: a Transpose with a bad axis was asked whether it
    takes more inputs."""
    model = Model(Net([Op("Transpose", ["x"], ["y"], args={"axes": [0, 5]})], ["x"], ["y"]))
    with pytest.raises(ExecutionError, match=r"op #0 \(Transpose\) failed") as caught:
        run_model(model, {"x": np.zeros((2, 3), np.float32)})
    assert "take more" not in str(caught.value)

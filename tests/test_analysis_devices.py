"""Status inference, device inference and get_external_blob_names."""

from __future__ import annotations

from typing import Any

import pytest

from graphtools.analysis.devices import plan_device_options

# The drop-in forms take NetDefs as well as IR nets, as upstream's did.
from graphtools.compat import get_external_blob_names, infer_device_type, infer_status
from graphtools.errors import (
    InvalidArgumentError,
    InvalidNetError,
)
from graphtools.ir import DeviceOption, Net, Op
from graphtools.serde.codec import net_to_netdef

GPU0 = DeviceOption(device_type=1, device_id=0)


def same_status(op: Op, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
    """Every blob of an op shares one status (what infer_device_type does for plain ops)."""
    known = next((s for s in (*ins, *outs) if s is not None), None)
    return [known] * len(ins), [known] * len(outs)


def copy_net() -> Net:
    """x (host) -> CopyCPUToGPU -> Relu on GPU -> CopyGPUToCPU -> y."""
    return Net(
        [
            Op("CopyCPUToGPU", ["x"], ["x_gpu"]),
            Op("Relu", ["x_gpu"], ["y_gpu"]),
            Op("CopyGPUToCPU", ["y_gpu"], ["y"]),
        ],
        ["x"],
        ["y"],
    )


def test_infer_status_propagates_forward_and_backward() -> None:
    net = Net([Op("Relu", ["a"], ["b"]), Op("Relu", ["b"], ["c"])], ["a"], ["c"])
    result = infer_status(net, same_status, {("c", 1): "s"})
    assert result == {("a", 0): "s", ("b", 1): "s", ("c", 1): "s"}


def test_infer_status_converges_where_one_sweep_pair_does_not() -> None:
    # b's status follows from x, which is only learnt in the backward sweep (from c through
    # op 2 then op 0), after op 1 was visited: upstream's single forward+backward round
    # leaves b unknown and raises.
    net = Net(
        [Op("Relu", ["x"], ["a"]), Op("Relu", ["x"], ["b"]), Op("Relu", ["a"], ["c"])],
        ["x"],
        ["b", "c"],
    )
    calls: list[str] = []
    learnt_b_at: list[int] = []

    def updater(op: Op, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
        calls.append(op.outputs[0])
        if op.outputs == ("b",) and ins[0] is not None and outs[0] is None:
            learnt_b_at.append(len(calls))
        return same_status(op, ins, outs)

    result = infer_status(net, updater, {("c", 1): "gpu"})
    assert result[("b", 1)] == "gpu"
    assert learnt_b_at and learnt_b_at[0] > 2 * len(net)  # not within the first round


def test_infer_status_accepts_a_netdef() -> None:
    result = infer_status(net_to_netdef(copy_net()), same_status, {("x", 0): "s"})
    assert result[("y", 1)] == "s"


def test_conflict_names_blob_op_and_both_statuses() -> None:
    with pytest.raises(InvalidNetError) as info:
        infer_device_type(copy_net(), {("x", 0): "cpu", ("x_gpu", 1): "cpu"})
    message = str(info.value)
    assert "('x_gpu', 1)" in message
    assert "op 0 (CopyCPUToGPU)" in message
    assert "'cpu'" in message and "'gpu'" in message


def test_known_key_must_be_a_blob_of_the_net() -> None:
    with pytest.raises(InvalidNetError, match=r"\('x', 3\)"):
        infer_status(copy_net(), same_status, {("x", 3): "cpu"})
    with pytest.raises(InvalidNetError, match="'nowhere'"):
        infer_status(copy_net(), same_status, {("nowhere", 0): "cpu"})


def test_external_output_and_unread_input_are_allowed_keys() -> None:
    net = Net([Op("Relu", ["a"], ["b"])], ["a", "unused"], ["b"])
    result = infer_status(net, same_status, {("unused", 0): "s", ("b", 1): "s"})
    assert result[("unused", 0)] == "s" and result[("a", 0)] == "s"


def test_none_known_status_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"\('x', 0\)"):
        infer_status(copy_net(), same_status, {("x", 0): None})


def test_unknown_blobs_are_listed_or_left_out() -> None:
    net = Net([Op("Relu", ["a"], ["b"]), Op("Relu", ["u"], ["v"])], ["a", "u"], ["b", "v"])
    with pytest.raises(InvalidNetError) as info:
        infer_status(net, same_status, {("a", 0): "s"})
    assert "('u', 0)" in str(info.value) and "('v', 1)" in str(info.value)
    assert "('b', 1)" not in str(info.value)
    result = infer_status(net, same_status, {("a", 0): "s"}, allow_unknown=True)
    assert result == {("a", 0): "s", ("b", 1): "s"}


def test_updater_returning_wrong_lengths_is_refused() -> None:
    def bad(op: Op, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
        return [], outs

    with pytest.raises(InvalidArgumentError, match=r"op 0 \(CopyCPUToGPU\)"):
        infer_status(copy_net(), bad, {("x", 0): "s"})


@pytest.mark.parametrize(("style", "gpu"), [("caffe2", "gpu"), ("pytorch", "cuda")])
def test_device_inference_through_copy_pair(style: str, gpu: str) -> None:
    result = infer_device_type(copy_net(), {("x", 0): "cpu"}, device_name_style=style)
    assert result == {("x", 0): "cpu", ("x_gpu", 1): gpu, ("y_gpu", 1): gpu, ("y", 1): "cpu"}
    # inferred backwards from the output just as well
    assert infer_device_type(copy_net(), {("y", 1): "cpu"}, style) == result


def test_device_inference_in_place_ops_and_versions() -> None:
    net = Net(
        [
            Op("CopyCPUToGPU", ["x"], ["x"]),
            Op("Relu", ["x"], ["x"]),
            Op("CopyGPUToCPU", ["x"], ["x"]),
        ],
        ["x"],
        ["x"],
    )
    result = infer_device_type(net, {("x", 0): "cpu"})
    assert result == {("x", 0): "cpu", ("x", 1): "gpu", ("x", 2): "gpu", ("x", 3): "cpu"}


def test_op_mixing_devices_is_named() -> None:
    net = Net([Op("Add", ["a", "b"], ["c"])], ["a", "b"], ["c"])
    with pytest.raises(InvalidNetError, match=r"op 0 \(Add\).*mixes devices"):
        infer_device_type(net, {("a", 0): "cpu", ("b", 0): "gpu"})


def test_bad_device_style_and_names() -> None:
    with pytest.raises(InvalidArgumentError, match="'tpu'") as info:
        infer_device_type(copy_net(), {("x", 0): "cpu"}, device_name_style="tpu")
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidArgumentError, match="'cuda'"):
        infer_device_type(copy_net(), {("x", 0): "cuda"})


def test_plan_places_predict_and_init_ops() -> None:
    predict = Net(
        [
            Op("CopyCPUToGPU", ["data"], ["data_gpu"]),
            Op("FC", ["data_gpu", "w", "b"], ["y_gpu"]),
            Op("CopyGPUToCPU", ["y_gpu"], ["y"]),
            Op("Relu", ["y"], ["z"]),
        ],
        ["data", "w", "b"],
        ["z"],
    )
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"]),
            Op("GivenTensorFill", [], ["b"]),
            Op("GivenTensorFill", [], ["unused"]),
        ],
        external_outputs=["w", "b", "unused"],
    )
    predict_plan, init_plan = plan_device_options(predict, init, {"data": "cpu"})
    assert predict_plan == {0: GPU0, 1: GPU0, 2: GPU0}  # Relu on CPU is already there
    assert init_plan == {0: GPU0, 1: GPU0}  # "unused" is not read: left alone


def test_plan_is_empty_when_ops_are_already_placed() -> None:
    net = copy_net()
    net.set_ops(op.replace(device_option=GPU0) for op in net.ops)
    assert plan_device_options(net, None, {"x": "cpu"}) == ({}, {})


def test_plan_moves_cpu_ops_out_of_a_cuda_net() -> None:
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    net.set_device_option(GPU0)
    predict_plan, _ = plan_device_options(net, None, {"x": "cpu"})
    assert predict_plan == {0: DeviceOption(device_type=0)}


def test_plan_refuses_unknown_device_names() -> None:
    with pytest.raises(InvalidArgumentError, match="'x'"):
        plan_device_options(copy_net(), None, {"x": "npu"})


def test_get_external_blob_names() -> None:
    net = Net(
        [Op("Add", ["a", "b"], ["c"]), Op("Relu", ["c"], ["d"]), Op("Relu", ["a"], ["a"])],
        ["a", "b"],
    )
    inputs, outputs = get_external_blob_names(net, {"a", "b", "c"})
    assert inputs == {"a", "b"}
    assert outputs == {"a", "c"}
    with pytest.raises(InvalidNetError, match="'b'"):
        get_external_blob_names(net_to_netdef(net), {"a"})

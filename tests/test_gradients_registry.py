"""Caffe2's gradient IR test cases (core_gradients_test): op lists, naming, errors."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import GradientError, GradientMakerError, InvalidArgumentError
from graphtools.executor import Workspace, run_net
from graphtools.gradients import GradientRegistry, NoGradient, add_gradient_operators
from graphtools.gradients._proto import create_operator as op
from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2


def _gis(fwd):
    return [name + "_grad" for name in fwd.input]


def _need_all(fwd, g_output):
    for name, g in zip(fwd.output, g_output, strict=True):
        if g is None:
            raise RuntimeError(f'Need gradient for "{name}" but it is not provided.')
    return list(g_output)


def _with_device(grad, fwd):
    if fwd.HasField("device_option"):
        grad.device_option.CopyFrom(fwd.device_option)
    return grad


@GradientRegistry.RegisterGradient("Direct")
def _direct(fwd, g_output):
    return _with_device(op("DirectGradient", _need_all(fwd, g_output), _gis(fwd)), fwd), _gis(fwd)


@GradientRegistry.RegisterGradient("UseOutput")
def _use_output(fwd, g_output):
    inputs = list(fwd.output) + _need_all(fwd, g_output)
    return _with_device(op("UseOutputGradient", inputs, _gis(fwd)), fwd), _gis(fwd)


@GradientRegistry.RegisterGradient("UseInput")
def _use_input(fwd, g_output):
    inputs = list(fwd.input) + _need_all(fwd, g_output)
    return _with_device(op("UseInputGradient", inputs, _gis(fwd)), fwd), _gis(fwd)


NoGradient("Nogradient")


def _strip(ops):
    """Caffe2's assertOperatorListEqual: extra_info ignored (an empty device option too)."""
    out = []
    for o in ops:
        copy = caffe2_pb2.OperatorDef()
        copy.CopyFrom(o)
        del copy.device_option.extra_info[:]
        if copy.device_option == caffe2_pb2.DeviceOption():
            copy.ClearField("device_option")
        out.append(copy)
    return out


def _assert_ops(got, want):
    assert _strip(got) == _strip(want), "\n".join(str(o) for o in got)


GPU1 = caffe2_pb2.DeviceOption(device_type=1, device_id=1)


@pytest.mark.parametrize("device", [None, GPU1])
def test_direct(device):
    ops = [op("Direct", "in", "hidden"), op("Direct", "hidden", "out")]
    want = [
        op("DirectGradient", "out_grad", "hidden_grad"),
        op("DirectGradient", "hidden_grad", "in_grad"),
    ]
    for o in ops + want if device else []:
        o.device_option.CopyFrom(device)
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(grads, want)


def test_implicit_gradient_source():
    ops = [op("Direct", "in", "hidden"), op("Direct", "hidden", "out")]
    grads, _ = GradientRegistry.GetBackwardPass(ops, ["out"])
    _assert_ops(
        grads,
        [
            op("ConstantFill", "out", "out_autogen_grad", value=1.0),
            op("DirectGradient", "out_autogen_grad", "hidden_grad"),
            op("DirectGradient", "hidden_grad", "in_grad"),
        ],
    )


def test_no_unnecessary_gradients_and_no_source():
    ops = [op("Direct", "in", "hidden"), op("Direct", "hidden", "out")]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"hidden": "hidden_grad"})
    _assert_ops(grads, [op("DirectGradient", "hidden_grad", "in_grad")])
    assert GradientRegistry.GetBackwardPass(ops, {})[0] == []


def test_in_place_versions():
    ops = [op("Direct", "in", "in"), op("Direct", "in", "out")]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(
        grads,
        [op("DirectGradient", "out_grad", "in_grad"), op("DirectGradient", "in_grad", "in_grad")],
    )
    ops = [op("UseOutput", "in", "in"), op("UseOutput", "in", "out"), op("Direct", "out", "sink")]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"sink": "sink_grad"})
    _assert_ops(
        grads,
        [
            op("DirectGradient", "sink_grad", "out_grad"),
            op("UseOutputGradient", ["out", "out_grad"], "in_grad"),
            op("UseOutputGradient", ["in", "in_grad"], "in_grad"),
        ],
    )


def test_version_mismatch_names_blob_and_versions():
    ops = [op("Direct", "x", "x"), op("Direct", "y", "x"), op("Direct", "x", "y")]
    with pytest.raises(
        RuntimeError,
        match=r'"x_grad" is expected to correspond to version 1 of "x", but currently we have '
        r"version 2",
    ):
        GradientRegistry.GetBackwardPass(ops, {"y": "y_grad"})


@pytest.mark.parametrize(
    "ops, ys",
    [
        (
            [
                op("UseOutput", "in", "hidden"),
                op("Direct", "hidden", "hidden"),
                op("UseOutput", "hidden", "out"),
                op("Direct", "out", "sink"),
            ],
            {"sink": "sink_grad"},
        ),
        ([op("UseInput", "in", "out"), op("Direct", "in", "in")], {"out": "out_grad"}),
    ],
)
def test_overwritten_blob_needed_by_gradient(ops, ys):
    with pytest.raises(GradientError, match=r"needs (output|input)"):
        GradientRegistry.GetBackwardPass(ops, ys)


def test_use_input():
    ops = [
        op("Direct", "in", "hidden"),
        op("UseInput", "hidden", "out"),
        op("Direct", "out", "sink"),
    ]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"sink": "sink_grad"})
    _assert_ops(
        grads,
        [
            op("DirectGradient", "sink_grad", "out_grad"),
            op("UseInputGradient", ["hidden", "out_grad"], "hidden_grad"),
            op("DirectGradient", "hidden_grad", "in_grad"),
        ],
    )


@pytest.mark.parametrize("device", [None, GPU1])
def test_multi_use_input_sums_with_autosplit(device):
    ops = [
        op("Direct", "in", "hidden1"),
        op("Direct", "in", "hidden2"),
        op("Direct", ["hidden1", "hidden2"], "out"),
    ]
    want = [
        op("DirectGradient", "out_grad", ["hidden1_grad", "hidden2_grad"]),
        op("DirectGradient", "hidden2_grad", "in_grad"),
        op("DirectGradient", "hidden1_grad", "_in_grad_autosplit_0"),
        op("Sum", ["in_grad", "_in_grad_autosplit_0"], "in_grad"),
    ]
    for o in ops + want if device else []:
        o.device_option.CopyFrom(device)
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(grads, want)
    assert list(grads[-1].device_option.extra_info) == ["is_auto_gen_sum_ops:1"]


def test_multi_use_with_no_gradient_branch():
    ops = [
        op("Direct", "in", "hidden1"),
        op("Nogradient", "in", "hidden2"),
        op("Direct", ["hidden1", "hidden2"], "out"),
    ]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(
        grads,
        [
            op("DirectGradient", "out_grad", ["hidden1_grad", "hidden2_grad"]),
            op("DirectGradient", "hidden1_grad", "in_grad"),
        ],
    )


def test_multi_use_multiple_versions_big_counter_restarts_per_sum():
    ops = [
        op("Direct", "in", "in"),
        op("Direct", "in", "hidden1"),
        op("Direct", "in", "hidden2"),
        op("Direct", ["hidden1", "hidden2"], "in"),
        op("Direct", "in", "hidden3"),
        op("Direct", "in", "hidden4"),
        op("Direct", "in", "hidden5"),
        op("Direct", ["hidden3", "hidden4", "hidden5"], "out"),
    ]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(
        grads,
        [
            op("DirectGradient", "out_grad", ["hidden3_grad", "hidden4_grad", "hidden5_grad"]),
            op("DirectGradient", "hidden5_grad", "in_grad"),
            op("DirectGradient", "hidden4_grad", "_in_grad_autosplit_0"),
            op("DirectGradient", "hidden3_grad", "_in_grad_autosplit_1"),
            op("Sum", ["in_grad", "_in_grad_autosplit_0", "_in_grad_autosplit_1"], "in_grad"),
            op("DirectGradient", "in_grad", ["hidden1_grad", "hidden2_grad"]),
            op("DirectGradient", "hidden2_grad", "in_grad"),
            op("DirectGradient", "hidden1_grad", "_in_grad_autosplit_0"),
            op("Sum", ["in_grad", "_in_grad_autosplit_0"], "in_grad"),
            op("DirectGradient", "in_grad", "in_grad"),
        ],
    )


def test_auto_gen_sum_extra_info_rule():
    tag = "parallelize:shard_by_1"
    clear = caffe2_pb2.DeviceOption(extra_info=[tag, "only_keep_is_auto_gen_sum_ops_tag:1"])
    keep = caffe2_pb2.DeviceOption(extra_info=[tag])
    for device, kept in ((clear, False), (keep, True)):
        ops = [
            op("Direct", "in", "hidden1", device_option=device),
            op("Direct", "in", "hidden2", device_option=device),
            op("Direct", ["hidden1", "hidden2"], "out"),
        ]
        grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
        assert grads[-1].type == "Sum"
        info = list(grads[-1].device_option.extra_info)
        assert (tag in info) is kept
        assert "is_auto_gen_sum_ops:1" in info


def test_mixed_device_options_refused():
    ops = [
        op("Direct", "in", "hidden1", device_option=GPU1),
        op("Direct", "in", "hidden2"),
        op("Direct", ["hidden1", "hidden2"], "out"),
    ]
    with pytest.raises(RuntimeError, match="same device option"):
        GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})


def test_print_is_skipped_and_builtin_ops_marked():
    ops = [
        op("FC", ["in", "w", "b"], "fc"),
        op("Print", "fc", []),
        op("AveragedLoss", "fc", "loss"),
    ]
    want = [
        op("AveragedLossGradient", ["fc", "loss_grad"], "fc_grad"),
        op("FCGradient", ["in", "w", "fc_grad"], ["w_grad", "b_grad", "in_grad"]),
    ]
    for o in want:
        o.is_gradient_op = True
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"loss": "loss_grad"})
    _assert_ops(grads, want)


def test_builtin_copies_device_engine_and_args():
    fc = op("FC", ["x", "w", "b"], "y", device_option=GPU1, axis=1)
    fc.engine = "NNPACK"
    grads, _ = GradientRegistry.GetBackwardPass([fc], {"y": "y_grad"})
    assert grads[0].device_option == GPU1 and grads[0].engine == "NNPACK"
    assert [a.name for a in grads[0].arg] == ["axis"] and grads[0].is_gradient_op


def test_stop_gradient_cases():
    ops = [
        op("Direct", "in", "hidden"),
        op("StopGradient", "hidden", "hidden2"),
        op("Direct", "hidden2", "out"),
    ]
    grads, _ = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(grads, [op("DirectGradient", "out_grad", "hidden2_grad")])
    ops = [
        op("Direct", "in", "hidden"),
        op("StopGradient", "hidden", "hidden"),
        op("Direct", "hidden", "out"),
    ]
    grads, grad_map = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    _assert_ops(grads, [op("DirectGradient", "out_grad", "hidden_grad")])
    assert grad_map == {"out": "out_grad"}
    ops = [
        op("Direct", "in", "hidden"),
        op("Direct", "hidden", "hidden2"),
        op("StopGradient", "hidden", "hidden3"),
        op("Direct", ["hidden2", "hidden3"], "out"),
    ]
    grads, grad_map = GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    assert grad_map == {
        "out": "out_grad",
        "hidden2": "hidden2_grad",
        "hidden3": "hidden3_grad",
        "hidden": "hidden_grad",
        "in": "in_grad",
    }


def test_orphan_stop_gradient():
    ops = [
        op("Direct", "in", "hidden"),
        op("StopGradient", "hidden", "auto_blobx"),
        op("Direct", "hidden", "out"),
    ]
    with pytest.raises(ValueError, match="orphan") as info:
        GradientRegistry.GetBackwardPass(ops, {"out": "out_grad"})
    assert isinstance(info.value, InvalidArgumentError)


def test_schema_error():
    net = caffe2_pb2.NetDef()
    net.op.extend([op("Mul", ["a"], ["b"]), op("Sub", ["b", "one"], ["c"])])
    with pytest.raises(Exception, match="schema") as info:
        add_gradient_operators(net, ["c"])
    assert isinstance(info.value, GradientMakerError)
    assert len(net.op) == 2


def test_no_maker_raises_caffe2_message():
    with pytest.raises(GradientMakerError, match=r"Exception when creating gradient for \[Frob\]"):
        GradientRegistry.GetBackwardPass([op("Frob", "x", "y")], ["y"])


def test_ys_type_error():
    with pytest.raises(TypeError):
        GradientRegistry.GetBackwardPass([op("Direct", "x", "y")], "y")


def test_zero_gradient_lets_lstm_unit_differentiate():
    net = Net([Op("LSTMUnit", ["h", "c", "g", "s", "t"], ["hidden_t", "cell_t"])])
    with pytest.raises(GradientMakerError, match="cell_t is not provided"):
        add_gradient_operators(net.copy(), ["hidden_t"])
    net.append_op(Op("ZeroGradient", ["cell_t"], []))
    grad_map = add_gradient_operators(net, ["hidden_t"])
    assert net[-2].type == "ConstantFill" and list(net[-2].inputs) == ["cell_t"]
    assert net[-2].arg("value") == 0.0 and grad_map["g"] == "g_grad"


def _run(net, feeds):
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed(k, np.asarray(v, dtype=np.float32))
    run_net(net, ws)
    return ws


def test_two_grads_runs():
    net = Net([Op("Mul", ["input", "two"], ["mul_1"]), Op("Mul", ["mul_1", "three"], ["mul_2"])])
    grad_map = add_gradient_operators(net, ["mul_2", "mul_1"])
    ws = _run(net, {"input": [1], "two": [2], "three": [3]})
    assert ws.fetch(grad_map["input"]).tolist() == [8.0]


def test_accumulation_runs():
    net = Net(
        [
            Op("Mul", ["input", "two"], ["mul_1"]),
            Op("Mul", ["input", "three"], ["mul_2"]),
            Op("Sub", ["mul_1", "one"], ["sub"]),
        ]
    )
    grad_map = add_gradient_operators(net, ["mul_2", "sub"])
    ws = _run(net, {"input": [1], "one": [1], "two": [2], "three": [3]})
    assert ws.fetch(grad_map["input"]).tolist() == [5.0]


def test_pass_through_accumulation_names():
    # x1 -> Relu -> x2 -> Softmax -> x3; Add(x2, x3) -> x4: Sum(x2_grad, _x2_grad_autosplit_0)
    net = Net(
        [Op("Relu", ["x1"], ["x2"]), Op("Softmax", ["x2"], ["x3"]), Op("Add", ["x2", "x3"], ["x4"])]
    )
    grad_map = add_gradient_operators(net, {"x4": "x4_grad"})
    sum_op = net[-2]
    assert sum_op.type == "Sum" and list(sum_op.inputs) == ["x2_grad", "_x2_grad_autosplit_0"]
    assert list(sum_op.outputs) == ["x2_grad"] and grad_map["x1"] == "x1_grad"


def test_constant_fill_branch_needs_no_sum():
    net = Net(
        [
            Op("FC", ["x1", "x1_w", "x1_b"], ["x2"]),
            Op("Relu", ["x2"], ["x2"]),
            Op("ConstantFill", ["x2"], ["x3"]),
            Op("Add", ["x2", "x3"], ["x4"]),
            Op("FC", ["x4", "x4_w", "x4_b"], ["x5"]),
            Op("SoftmaxWithLoss", ["x5", "labels"], ["softmax", "loss"]),
        ]
    )
    grad_map = add_gradient_operators(net, ["loss"])
    assert "Sum" not in [o.type for o in net] and grad_map["x1"] == "x1_grad"


def test_given_gradient_of_a_read_blob_is_summed():
    """Caffe2 drops a given gradient of a y other ops read; graphtools sums it in."""
    net = Net([Op("Mul", ["x", "w"], ["y"]), Op("Mul", ["y", "w"], ["z"])])
    grad_map = add_gradient_operators(net, {"y": "gy", "z": "gz"})
    ws = Workspace()
    for k, v in {"x": 2.0, "w": 3.0, "gy": 1.0, "gz": 1.0}.items():
        ws.feed(k, np.array([v]))
    run_net(net, ws)
    # L = y + z = x w + x w^2: dL/dx = w + w^2 = 12
    assert ws.fetch(grad_map["x"]).tolist() == [12.0]


def test_ir_ops_accepted_and_unchanged():
    fwd = [Op("Relu", ["x"], ["y"])]
    grads, grad_map = GradientRegistry.get_backward_pass(fwd, ["y"])
    assert [g.type for g in grads] == ["ConstantFill", "ReluGradient"]
    assert grad_map == {"y": "y_autogen_grad", "x": "x_grad"}


def test_given_gradient_on_gpu_net_sums_on_the_ops_device():
    ops = [op("Direct", "x", "y", device_option=GPU1), op("Direct", "y", "z", device_option=GPU1)]
    grads, grad_map = GradientRegistry.GetBackwardPass(ops, {"y": "gy", "z": "gz"})
    assert grads[-2].type == "Sum" and grads[-2].device_option.device_type == 1
    assert list(grads[-2].input) == ["y_grad", "gy"] and grad_map["x"] == "x_grad"

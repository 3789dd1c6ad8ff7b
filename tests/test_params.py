"""get_params_from_init_net, construct_init_net_from_params and export_pair."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphtools.executor
import graphtools.passes
from graphtools.compat.params import (
    Int8Tensor,
    construct_init_net_from_params,
    export_pair,
    get_params_from_init_net,
)
from graphtools.errors import (
    ExecutionError,
    InvalidArgumentError,
    InvalidNetError,
    UnsupportedOpError,
)
from graphtools.ir import DeviceOption, Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_net
from graphtools.serde.codec import device_option_to_proto, net_to_netdef

GPU0 = DeviceOption(device_type=1, device_id=0)


def fill(op_type: str, output: str, inputs: tuple[str, ...] = (), **args: Any) -> Op:
    return Op(op_type, inputs, [output], args=args)


def params_of(*ops: Op, seed: int | None = None) -> dict[str, Any]:
    return get_params_from_init_net(Net(ops), seed=seed)[0]


def assert_params_equal(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert list(left) == list(right)
    for name, value in left.items():
        other = right[name]
        if isinstance(value, Int8Tensor):
            assert isinstance(other, Int8Tensor)
            assert (value.scale, value.zero_point) == (other.scale, other.zero_point)
            value, other = value.values, other.values
        assert value.dtype == other.dtype, name
        np.testing.assert_array_equal(value, other)


@pytest.mark.parametrize(
    ("op_type", "values", "dtype"),
    [
        ("GivenTensorFill", [0.5, 1.5, 2.5, 3.5], np.float32),
        ("GivenTensorDoubleFill", [0.5, 1.5, 2.5, 3.5], np.float64),
        ("GivenTensorFp16Fill", [0.5, 1.5, 2.5, 3.5], np.float16),
        ("GivenTensorIntFill", [1, -2, 3, 4], np.int32),
        ("GivenTensorInt16Fill", [1, -2, 3, 4], np.int16),
        ("GivenTensorInt64Fill", [1, -2, 3, 2**40], np.int64),
        ("GivenTensorBoolFill", [1, 0, 0, 1], np.bool_),
        ("GivenTensorStringFill", [b"a", b"b", b"c", b"d"], object),
    ],
)
def test_given_tensor_fills(op_type: str, values: list[Any], dtype: Any) -> None:
    params = params_of(fill(op_type, "t", shape=[2, 2], values=values))
    expected = np.array(values, dtype=dtype).reshape(2, 2)
    assert params["t"].dtype == expected.dtype
    np.testing.assert_array_equal(params["t"], expected)


def test_given_tensor_fill_without_shape_is_one_dimensional_and_honours_dtype() -> None:
    params = params_of(
        fill("GivenTensorFill", "a", values=[1.0, 2.0]),
        fill("GivenTensorFill", "b", values=[1, 2], dtype=caffe2_pb2.TensorProto.INT64),
    )
    assert params["a"].shape == (2,)
    assert params["b"].dtype == np.int64


def test_byte_string_fill() -> None:
    params = params_of(
        fill("GivenTensorByteStringToUInt8Fill", "u", shape=[2, 2], values=[b"\x80\x81\x82\x83"])
    )
    np.testing.assert_array_equal(params["u"], np.array([[128, 129], [130, 131]], np.uint8))


def test_value_count_must_match_shape() -> None:
    with pytest.raises(InvalidNetError, match=r"op #0 \(GivenTensorFill\).*3 values") as info:
        params_of(fill("GivenTensorFill", "t", shape=[2, 2], values=[1.0, 2.0, 3.0]))
    assert isinstance(info.value, ExecutionError)  # the executor's error, an InvalidNetError
    assert (info.value.op_index, info.value.op_type) == (0, "GivenTensorFill")


def test_constant_fill_dtypes() -> None:
    params = params_of(
        fill("ConstantFill", "f", shape=[2], value=1.5),
        fill("ConstantFill", "i", shape=[3], value=7),  # Caffe2 infers INT64 from an int value
        fill("ConstantFill", "b", shape=[1], value=1, dtype=caffe2_pb2.TensorProto.BOOL),
        fill("ConstantFill", "z", shape=[2, 1]),
    )
    np.testing.assert_array_equal(params["f"], np.full(2, 1.5, np.float32))
    assert params["i"].dtype == np.int64 and params["i"].tolist() == [7, 7, 7]
    assert params["b"].dtype == np.bool_ and params["b"].tolist() == [True]
    assert params["z"].dtype == np.float32 and params["z"].shape == (2, 1)


def test_constant_fill_shape_from_input() -> None:
    params = params_of(
        fill("GivenTensorInt64Fill", "shape", shape=[2], values=[2, 3]),
        fill("ConstantFill", "as_shape", ("shape",), value=2.0, input_as_shape=1),
        fill("ConstantFill", "like", ("as_shape",), value=0.0, extra_shape=[4]),
    )
    assert params["as_shape"].shape == (2, 3)
    assert params["like"].shape == (2, 3, 4)


def test_int8_fills_keep_scale_and_zero_point() -> None:
    params = params_of(
        fill(
            "Int8GivenTensorFill",
            "q",
            shape=[2, 2],
            values=b"\x01\x02\x03\xff",
            Y_scale=0.5,
            Y_zero_point=128,
        ),
        fill("Int8GivenIntTensorFill", "bias", shape=[2], values=[-5, 9], Y_scale=0.25),
    )
    q, bias = params["q"], params["bias"]
    assert isinstance(q, Int8Tensor) and isinstance(bias, Int8Tensor)
    assert q.values.dtype == np.uint8 and q.values.tolist() == [[1, 2], [3, 255]]
    assert (q.scale, q.zero_point) == (0.5, 128)
    assert bias.data.dtype == np.int32 and bias.data.tolist() == [-5, 9]
    assert (bias.scale, bias.zero_point) == (0.25, 0)


def test_random_fill_needs_a_seed() -> None:
    ops = (fill("GivenTensorFill", "a", values=[1.0]), fill("XavierFill", "w", shape=[4, 3]))
    with pytest.raises(UnsupportedOpError, match=r"op 1 \(XavierFill\) writing \['w'\].*seed"):
        params_of(*ops)


def test_random_fills_are_deterministic_with_a_seed() -> None:
    ops = (
        fill("XavierFill", "w", shape=[4, 3]),
        fill("MSRAFill", "m", shape=[2, 8]),
        fill("GaussianFill", "g", shape=[100], mean=5.0, std=0.1),
        fill("UniformFill", "u", shape=[50], min=-2.0, max=-1.0),
        fill("UniformIntFill", "i", shape=[50], min=3, max=5),
    )
    first, second = params_of(*ops, seed=7), params_of(*ops, seed=7)
    assert_params_equal(first, second)
    assert not np.array_equal(first["w"], params_of(*ops, seed=8)["w"])
    bound = math.sqrt(3 / 3)  # fan_in = numel / shape[0]
    assert first["w"].dtype == np.float32 and np.all(np.abs(first["w"]) <= bound)
    assert abs(float(first["g"].mean()) - 5.0) < 0.1
    assert np.all((first["u"] >= -2.0) & (first["u"] <= -1.0))
    assert first["i"].dtype == np.int32 and set(first["i"].tolist()) <= {3, 4, 5}


def test_random_fill_values_do_not_depend_on_other_ops() -> None:
    xavier = fill("XavierFill", "w", shape=[4, 3])
    alone = params_of(xavier, seed=7)["w"]
    after_another = params_of(fill("GaussianFill", "g", shape=[9]), xavier, seed=7)["w"]
    np.testing.assert_array_equal(alone, after_another)


def test_op_types_are_checked_before_any_op_runs() -> None:
    bad_fill = fill("GivenTensorFill", "t", shape=[2, 2], values=[1.0])
    with pytest.raises(UnsupportedOpError, match=r"op 1 \(UniformFill\)"):
        params_of(bad_fill, fill("UniformFill", "u", shape=[2]))


def test_range_fill_and_unknown_fill_dtype() -> None:
    params = params_of(fill("RangeFill", "r", shape=[2, 2]))
    assert params["r"].dtype == np.float32 and params["r"].tolist() == [[0, 1], [2, 3]]
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(ConstantFill\).*data type 99"):
        params_of(fill("ConstantFill", "c", shape=[1], dtype=99))


def test_int8_tensor_is_the_executors() -> None:
    assert Int8Tensor is graphtools.executor.Int8Tensor is graphtools.passes.Int8Tensor


def test_unsupported_op_is_named() -> None:
    net = Net([fill("GivenTensorFill", "a", values=[1.0]), Op("Cast", ["a"], ["b"])])
    with pytest.raises(UnsupportedOpError, match=r"op 1 \(Cast\)"):
        get_params_from_init_net(net)


def test_reading_an_unwritten_blob_is_named() -> None:
    with pytest.raises(InvalidNetError, match="'ghost'"):
        get_params_from_init_net(Net([Op("Copy", ["ghost"], ["b"])]))


def test_params_are_external_outputs_else_every_written_blob() -> None:
    ops = [fill("GivenTensorFill", "a", values=[1.0]), fill("GivenTensorFill", "b", values=[2.0])]
    assert list(get_params_from_init_net(Net(ops, external_outputs=["b"]))[0]) == ["b"]
    assert list(get_params_from_init_net(Net(ops))[0]) == ["a", "b"]
    with pytest.raises(InvalidNetError, match="'c'"):
        get_params_from_init_net(Net(ops, external_outputs=["c"]))


def test_device_options_come_from_the_final_producer() -> None:
    ops = [
        fill("GivenTensorFill", "a", values=[1.0]).replace(device_option=GPU0),
        fill("GivenTensorFill", "b", values=[1.0]).replace(device_option=GPU0),
        Op("CopyGPUToCPU", ["b"], ["b"], device_option=GPU0),
        fill("GivenTensorFill", "c", values=[3.0]),
    ]
    params, devices = get_params_from_init_net(net_to_netdef(Net(ops)))
    # Messages, as upstream: scripts copy them into ops' device options.
    assert all(isinstance(d, caffe2_pb2.DeviceOption) for d in devices.values())
    assert devices == {
        "a": device_option_to_proto(GPU0),
        "b": device_option_to_proto(DeviceOption()),
        "c": device_option_to_proto(DeviceOption()),
    }
    op = caffe2_pb2.OperatorDef()
    op.device_option.CopyFrom(devices["a"])
    assert op.device_option.device_type == 1
    assert params["b"].tolist() == [1.0]


def test_construct_uses_detectron2_fill_table() -> None:
    params = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i": np.array([1, 2], np.int32),
        "l": np.array([3], np.int64),
        "u": np.array([1, 2, 3], np.uint8),
        "q": Int8Tensor(np.array([[1, 2]], np.uint8), 0.5, 3),
    }
    net = construct_init_net_from_params(params, {"f": device_option_to_proto(GPU0)})
    assert [op.type for op in net.op] == [
        "GivenTensorFill",
        "GivenTensorIntFill",
        "GivenTensorInt64Fill",
        "GivenTensorStringFill",
        "Int8GivenTensorFill",
    ]
    assert list(net.external_output) == list(params)
    assert net.op[0].device_option.device_type == 1
    assert not net.op[1].HasField("device_option")
    # uint8 arrays become one string of their bytes, as upstream
    back, _ = get_params_from_init_net(net)
    assert back["u"].tolist() == [b"\x01\x02\x03"]


def test_construct_skips_strings_and_refuses_what_it_cannot_write() -> None:
    with pytest.warns(UserWarning, match="'s'"):
        net = construct_init_net_from_params({"s": "text", "a": np.zeros(1, np.float32)})
    assert list(net.external_output) == ["a"]
    with pytest.raises(InvalidArgumentError, match=r"'c'.*complex64"):
        construct_init_net_from_params({"c": np.zeros(1, np.complex64)})
    with pytest.raises(InvalidArgumentError, match=r"'q'.*CPU"):
        construct_init_net_from_params(
            {"q": Int8Tensor(np.zeros(1, np.uint8), 1.0, 0)}, {"q": GPU0}
        )


def test_round_trip_of_every_supported_dtype() -> None:
    params: dict[str, Any] = {
        "f32": np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2),
        "f64": np.array([0.125, 2.5]),  # exact in float32: 'values' floats are 32-bit
        "f16": np.array([0.5, 65504], np.float16),
        "i16": np.array([-3, 7], np.int16),
        "i32": np.array([[-(2**31), 2**31 - 1]], np.int32),
        "i64": np.array([2**62], np.int64),
        "bool": np.array([True, False]),
        "str": np.array([b"x", b"yz"], dtype=object),
        "scalar": np.array(3.0, np.float32),
        "q8": Int8Tensor(np.array([0, 255], np.uint8), 0.5, 7),
        "q32": Int8Tensor(np.array([-7, 8], np.int32), 0.0078125, 0),
    }
    devices = {name: DeviceOption() for name in params}
    back, back_devices = get_params_from_init_net(construct_init_net_from_params(params, devices))
    assert_params_equal(params, back)
    assert {k: DeviceOption.from_proto(v) for k, v in back_devices.items()} == devices


def real_init_nets(root: Path) -> list[Path]:
    return [
        root / "caffe2-models/mask_rcnn_2go/2018-12/int8/model_init.pb",
        root / "caffe2-models/style_transfer/crayon/init_net.pb",
        root / "hmc-neural_nets_research/super_resolution/init_net.pb",
        root / "glow/caffe2Models/fill_test_init_net.pbtxt",
    ]


def test_real_init_nets_round_trip(real_fixtures: Path) -> None:
    for path in real_init_nets(real_fixtures):
        init = load_net(path)
        params, devices = get_params_from_init_net(init)
        assert len(params) == len({o for op in init.op for o in op.output}), path
        rebuilt = construct_init_net_from_params(
            {
                k: v
                for k, v in params.items()
                if not (isinstance(v, np.ndarray) and v.dtype == np.uint8)
            },
            devices,
        )
        back, _ = get_params_from_init_net(rebuilt)
        assert_params_equal({k: v for k, v in params.items() if k in back}, back)


def test_real_int8_init_net(real_fixtures: Path) -> None:
    path = real_fixtures / "caffe2-models/mask_rcnn_2go/2018-12/int8/model_init.pb"
    params, _ = get_params_from_init_net(load_net(path))
    int8 = [v for v in params.values() if isinstance(v, Int8Tensor)]
    assert len(params) == 164 and len(int8) == 162
    assert {v.values.dtype for v in int8} == {np.dtype(np.uint8), np.dtype(np.int32)}
    assert all(v.scale > 0 for v in int8)


def test_real_crayon_init_net_values(real_fixtures: Path) -> None:
    init = load_net(real_fixtures / "caffe2-models/style_transfer/crayon/init_net.pb")
    params, _ = get_params_from_init_net(init)
    op = next(op for op in init.op if op.type == "GivenTensorFill")
    shape = next(a.ints for a in op.arg if a.name == "shape")
    values = next(a.floats for a in op.arg if a.name == "values")
    value = params[op.output[0]]
    assert value.shape == tuple(shape)
    np.testing.assert_array_equal(value.reshape(-1), np.array(values, np.float32))


def test_export_pair_follows_predictor_exporter() -> None:
    net = Net(
        [
            Op("FC", ["data", "w", "b"], ["fc"]),
            Op("Relu", ["fc"], ["fc"]),
            Op("Softmax", ["fc"], ["prob"]),
            Op("Copy", ["prob"], ["aux"]),
        ],
        ["data", "w", "b"],
        ["prob"],
    )
    params = {"w": np.ones((2, 2), np.float32), "b": np.array([1, 2], np.int32)}
    init, predict = export_pair(net_to_netdef(net), params)
    assert isinstance(init, caffe2_pb2.NetDef) and isinstance(predict, caffe2_pb2.NetDef)
    # inputs: version-0 blobs that are not params; outputs: written, never read
    assert list(predict.external_input) == ["data", "w", "b"]
    assert list(predict.external_output) == ["aux"]  # "prob" is read by Copy, so upstream drops it
    assert [(op.type, op.output[0]) for op in init.op] == [
        ("GivenTensorFill", "w"),
        ("GivenTensorIntFill", "b"),
        ("GivenTensorFill", "data"),
    ]
    assert [a.name for a in init.op[0].arg] == ["shape", "values"]
    placeholder = {a.name: a for a in init.op[2].arg}
    assert list(placeholder["shape"].ints) == [1, 1] and list(placeholder["values"].floats) == [0]
    back, _ = get_params_from_init_net(init)
    assert_params_equal({**params, "data": np.zeros((1, 1), np.float32)}, back)
    assert [op.type for op in predict.op] == [op.type for op in net.ops]


def test_export_pair_with_implicit_inputs_returns_ir_nets() -> None:
    net = Net([Op("Add", ["x", "p"], ["y"]), Op("Relu", ["y"], ["y"])])
    init, predict = export_pair(net, {"p": np.zeros(1, np.float32)})
    assert isinstance(init, Net) and isinstance(predict, Net)
    assert list(predict.external_inputs) == ["x"]
    assert list(predict.external_outputs) == []  # y is read by the in-place Relu
    assert list(net.external_inputs) == []  # the input net is not changed

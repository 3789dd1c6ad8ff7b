"""Int8 kernels checked against onnxruntime's quantized operators (QLinearConv, MatMulInteger,
QuantizeLinear, DequantizeLinear) or against float ONNX graphs between quantize/dequantize.

Requantization rounding may differ by one unit on exact ties, so results must agree within one
quantization step everywhere and exactly on almost every element.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from graphtools.executor import ExecutionError, Int8Tensor, Workspace, run_op
from graphtools.ir import Op

helper = onnx.helper
_TO_NCHW, _TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def run_onnx(
    nodes: list[Any], feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray]
) -> np.ndarray:
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    inits = [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()]
    graph = helper.make_graph(nodes, "q", inputs, [onnx.ValueInfoProto(name="y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(["y"], feeds)[0]


def run_c2(op: Op, feeds: dict[str, Any]) -> Any:
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed(name, value)
    run_op(op, ws)
    return ws.fetch(op.outputs[0])


def assert_close_quantized(ours: Int8Tensor, theirs: np.ndarray, scale: float, zp: int) -> None:
    assert isinstance(ours, Int8Tensor)
    assert (ours.scale, ours.zero_point) == pytest.approx((scale, zp))
    assert ours.values.dtype == np.uint8 and ours.values.shape == theirs.shape
    diff = np.abs(ours.values.astype(np.int32) - theirs.astype(np.int32))
    assert diff.max() <= 1, f"max difference {diff.max()} quantization steps"
    assert (diff == 0).mean() >= 0.98


def uint8(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def test_quantize_dequantize_match_onnx() -> None:
    x = np.random.default_rng(0).standard_normal((2, 5, 5, 3)).astype(np.float32) * 3
    op = Op("Int8Quantize", ["x"], ["q"], args={"Y_scale": 0.05, "Y_zero_point": 100})
    q = run_c2(op, {"x": x})
    consts = {"s": np.float32(0.05), "z": np.uint8(100)}
    expected = run_onnx(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, consts
    )
    assert_close_quantized(q, expected, 0.05, 100)
    deq = run_c2(Op("Int8Dequantize", ["q"], ["d"]), {"q": q})
    expected = run_onnx(
        [helper.make_node("DequantizeLinear", ["v", "s", "z"], ["y"])], {"v": q.values}, consts
    )
    np.testing.assert_allclose(deq, expected, rtol=1e-6)
    assert deq.dtype == np.float32


CONV_CASES = {
    "k3_pad1": ({"kernel": 3, "pad": 1}, {"pads": [1, 1, 1, 1]}, 1),
    "k3_stride2": (
        {"kernel": 3, "pad": 1, "stride": 2},
        {"pads": [1, 1, 1, 1], "strides": [2, 2]},
        1,
    ),
    "k1": ({"kernel": 1}, {}, 1),
    "depthwise": ({"kernel": 3, "pad": 1, "group": 8}, {"pads": [1, 1, 1, 1], "group": 8}, 8),
}


@pytest.mark.parametrize("relu", [False, True], ids=["Int8Conv", "Int8ConvRelu"])
@pytest.mark.parametrize("variant", sorted(CONV_CASES))
def test_int8_conv_matches_onnx_qlinearconv(variant: str, relu: bool) -> None:
    args, attrs, group = CONV_CASES[variant]
    c, m = 8, 8
    k = args["kernel"]
    x = Int8Tensor(uint8((2, 7, 6, c), 1), 0.02, 120)
    w = Int8Tensor(uint8((m, k, k, c // group), 2), 0.01, 130)
    bias_values = np.random.default_rng(3).integers(-2000, 2000, m).astype(np.int32)
    b = Int8Tensor(bias_values, 0.02 * 0.01, 0)
    y_scale, y_zp = 0.15, 110
    op = Op(
        "Int8ConvRelu" if relu else "Int8Conv",
        ["x", "w", "b"],
        ["y"],
        args={**args, "order": "NHWC", "Y_scale": y_scale, "Y_zero_point": y_zp},
    )
    ours = run_c2(op, {"x": x, "w": w, "b": b})
    consts = {
        "xs": np.float32(x.scale),
        "xz": np.uint8(x.zero_point),
        "ws": np.float32(w.scale),
        "wz": np.uint8(w.zero_point),
        "ys": np.float32(y_scale),
        "yz": np.uint8(y_zp),
        "b": bias_values,
    }
    nodes = [
        helper.make_node("Transpose", ["xv"], ["xn"], perm=_TO_NCHW),
        helper.make_node("Transpose", ["wv"], ["wn"], perm=_TO_NCHW),
        helper.make_node(
            "QLinearConv", ["xn", "xs", "xz", "wn", "ws", "wz", "ys", "yz", "b"], ["yn"], **attrs
        ),
        helper.make_node("Transpose", ["yn"], ["y"], perm=_TO_NHWC),
    ]
    expected = run_onnx(nodes, {"xv": x.values, "wv": w.values}, consts)
    if relu:
        expected = np.maximum(expected, np.uint8(y_zp))
    assert_close_quantized(ours, expected, y_scale, y_zp)


def test_int8_fc_matches_onnx_matmulinteger() -> None:
    x = Int8Tensor(uint8((4, 1, 1, 24), 4), 0.05, 7)
    w = Int8Tensor(uint8((10, 24), 5), 0.003, 140)
    bias = np.random.default_rng(6).integers(-500, 500, 10).astype(np.int32)
    op = Op("Int8FC", ["x", "w", "b"], ["y"], args={"Y_scale": 0.2, "Y_zero_point": 90})
    ours = run_c2(op, {"x": x, "w": w, "b": Int8Tensor(bias, 0.05 * 0.003, 0)})
    consts = {
        "xz": np.uint8(7),
        "wz": np.uint8(140),
        "b": bias,
        "shape": np.asarray([4, 24]),
        "real": np.float32(0.05 * 0.003),
        "ys": np.float32(0.2),
        "yz": np.uint8(90),
    }
    nodes = [
        helper.make_node("Reshape", ["xv", "shape"], ["x2"]),
        helper.make_node("Transpose", ["wv"], ["wt"]),
        helper.make_node("MatMulInteger", ["x2", "wt", "xz", "wz"], ["acc"]),
        helper.make_node("Add", ["acc", "b"], ["accb"]),
        helper.make_node("Cast", ["accb"], ["f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "real"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"]),
    ]
    expected = run_onnx(nodes, {"xv": x.values, "wv": w.values}, consts)
    assert_close_quantized(ours, expected, 0.2, 90)


def _dq_q(
    inner: list[Any], x: Int8Tensor, extra: dict[str, np.ndarray], y_scale: float, y_zp: int
) -> np.ndarray:
    """ONNX: dequantize x, run ``inner`` from "xf" to "yf", quantize with (y_scale, y_zp)."""
    consts = {
        "xs": np.float32(x.scale),
        "xz": np.uint8(x.zero_point),
        "ys": np.float32(y_scale),
        "yz": np.uint8(y_zp),
        **extra,
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["xv", "xs", "xz"], ["xf"]),
        *inner,
        helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"]),
    ]
    return run_onnx(nodes, {"xv": x.values}, consts)


def _nhwc(op_type: str, **attrs: Any) -> list[Any]:
    return [
        helper.make_node("Transpose", ["xf"], ["xn"], perm=_TO_NCHW),
        helper.make_node(op_type, ["xn"], ["yn"], **attrs),
        helper.make_node("Transpose", ["yn"], ["yf"], perm=_TO_NHWC),
    ]


def test_int8_sum_and_sum_relu_match_dequantized_onnx() -> None:
    a, b = (
        Int8Tensor(uint8((2, 3, 3, 4), 7), 0.03, 128),
        Int8Tensor(uint8((2, 3, 3, 4), 8), 0.02, 100),
    )
    for op_type in ("Int8Sum", "Int8SumRelu"):
        op = Op(op_type, ["a", "b"], ["y"], args={"Y_scale": 0.037, "Y_zero_point": 120})
        ours = run_c2(op, {"a": a, "b": b})
        expected = np.clip(
            np.rint((a.dequantize() + b.dequantize()) / np.float32(0.037)) + 120,
            120 if op_type.endswith("Relu") else 0,
            255,
        ).astype(np.uint8)
        assert_close_quantized(ours, expected, 0.037, 120)
    bf = b.dequantize()
    inner = [helper.make_node("Add", ["xf", "bf"], ["yf"])]
    ours = run_c2(
        Op("Int8Sum", ["a", "b"], ["y"], args={"Y_scale": 0.037, "Y_zero_point": 120}),
        {"a": a, "b": b},
    )
    assert_close_quantized(ours, _dq_q(inner, a, {"bf": bf}, 0.037, 120), 0.037, 120)


def test_int8_pools_softmax_relu_match_dequantized_onnx() -> None:
    x = Int8Tensor(uint8((2, 5, 5, 6), 9), 0.05, 128)
    args = {"kernel": 3, "stride": 2, "order": "NHWC", "Y_scale": 0.05, "Y_zero_point": 128}
    avg = run_c2(Op("Int8AveragePool", ["x"], ["y"], args=args), {"x": x})
    expected = _dq_q(_nhwc("AveragePool", kernel_shape=[3, 3], strides=[2, 2]), x, {}, 0.05, 128)
    assert_close_quantized(avg, expected, 0.05, 128)
    mx = run_c2(Op("Int8MaxPool", ["x"], ["y"], args=args), {"x": x})
    expected = _dq_q(_nhwc("MaxPool", kernel_shape=[3, 3], strides=[2, 2]), x, {}, 0.05, 128)
    assert_close_quantized(mx, expected, 0.05, 128)
    flat = Int8Tensor(x.values.reshape(2, -1), x.scale, x.zero_point)
    sm_args = {"Y_scale": 1 / 256, "Y_zero_point": 0}
    sm = run_c2(Op("Int8Softmax", ["x"], ["y"], args=sm_args), {"x": flat})
    expected = _dq_q([helper.make_node("Softmax", ["xf"], ["yf"], axis=1)], flat, {}, 1 / 256, 0)
    assert_close_quantized(sm, expected, 1 / 256, 0)
    relu = run_c2(
        Op("Int8Relu", ["x"], ["y"], args={"Y_scale": 0.05, "Y_zero_point": 128}), {"x": x}
    )
    expected = _dq_q([helper.make_node("Relu", ["xf"], ["yf"])], x, {}, 0.05, 128)
    assert_close_quantized(relu, expected, 0.05, 128)


@pytest.mark.parametrize(("kernel", "stride", "pad"), [(2, 2, 0), (4, 2, 1)])
def test_int8_conv_transpose_matches_dequantized_onnx(kernel: int, stride: int, pad: int) -> None:
    """Filter layout (C_in, kH, kW, C_out), as in the Mask R-CNN2Go int8 init net."""
    x = Int8Tensor(uint8((1, 4, 3, 6), 10), 0.02, 128)
    w = Int8Tensor(uint8((6, kernel, kernel, 5), 11), 0.004, 120)
    bias = np.random.default_rng(12).integers(-3000, 3000, 5).astype(np.int32)
    args = {
        "kernel": kernel,
        "stride": stride,
        "pad": pad,
        "order": "NHWC",
        "Y_scale": 0.03,
        "Y_zero_point": 125,
    }
    ours = run_c2(
        Op("Int8ConvTranspose", ["x", "w", "b"], ["y"], args=args),
        {"x": x, "w": w, "b": Int8Tensor(bias, 0.02 * 0.004, 0)},
    )
    extra = {
        "wf": np.moveaxis(w.dequantize(), -1, 1).copy(),
        "bf": (bias * np.float32(0.02 * 0.004)).astype(np.float32),
    }
    inner = [
        helper.make_node("Transpose", ["xf"], ["xn"], perm=_TO_NCHW),
        helper.make_node(
            "ConvTranspose", ["xn", "wf", "bf"], ["yn"], strides=[stride] * 2, pads=[pad] * 4
        ),
        helper.make_node("Transpose", ["yn"], ["yf"], perm=_TO_NHWC),
    ]
    assert_close_quantized(ours, _dq_q(inner, x, extra, 0.03, 125), 0.03, 125)


def test_int8_reshape_and_flatten_keep_quantization() -> None:
    x = Int8Tensor(uint8((2, 3, 4), 13), 0.1, 3)
    y = run_c2(Op("Int8Reshape", ["x"], ["y", "old"], args={"shape": (0, -1)}), {"x": x})
    assert y.shape == (2, 12) and (y.scale, y.zero_point) == (0.1, 3)
    f = run_c2(Op("Int8Flatten", ["x"], ["y"]), {"x": x})
    np.testing.assert_array_equal(f.values, x.values.reshape(2, 12))


def test_int8_op_on_float_blob_is_an_execution_error() -> None:
    op = Op("Int8Dequantize", ["x"], ["y"])
    with pytest.raises(ExecutionError, match="must be an Int8 blob"):
        run_c2(op, {"x": np.zeros(3, np.float32)})

"""Int8 ops in ONNX (``export_int8``): each exported over uint8 tensors, checked, run by
onnxruntime against the int8 executor (exactly, but Int8Softmax and Int8AveragePool within one
quantization step), and imported back to the same Int8 ops; scales making rounding ties included
(Caffe2 holds scales as float32: these are exact in float32)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.executor import Int8Tensor, run_model
from graphtools.ir import Op
from graphtools.onnx import export_onnx, import_onnx

RNG = np.random.default_rng(0)


def _int8(shape: tuple[int, ...], scale: float, zero_point: int) -> Int8Tensor:
    return Int8Tensor(RNG.integers(0, 256, shape).astype(np.uint8), scale, zero_point)


def _bias(count: int, scale: float) -> Int8Tensor:
    return Int8Tensor(RNG.integers(-3000, 3000, count).astype(np.int32), scale, 0)


X_NHWC = _int8((2, 6, 6, 4), 0.5, 128)  # scales with exact ties: acc * 0.5 * 1 / 2
W_NHWC = _int8((6, 3, 3, 4), 1.0, 120)
W_GROUP = _int8((4, 3, 3, 1), 0.25, 131)
OUT = {"Y_scale": 2.0, "Y_zero_point": 10}
NHWC = {"order": "NHWC"}

CASES = {
    "Int8Conv-NHWC": (
        Op("Int8Conv", ["x", "w", "b"], ["y"], args={"kernel": 3, "pad": 1, **NHWC, **OUT}),
        {"x": X_NHWC},
        {"w": W_NHWC, "b": _bias(6, 0.5)},
    ),
    "Int8ConvRelu-depthwise": (
        Op(
            "Int8ConvRelu",
            ["x", "w", "b"],
            ["y"],
            args={
                "kernel": 3,
                "stride": 2,
                "group": 4,
                **NHWC,
                "Y_scale": 0.0625,
                "Y_zero_point": 100,
            },
        ),
        {"x": X_NHWC},
        {"w": W_GROUP, "b": _bias(4, 0.125)},
    ),
    "Int8Conv-NCHW-nobias": (
        Op("Int8Conv", ["x", "w"], ["y"], args={"kernel": 2, **OUT}),
        {"x": _int8((1, 4, 5, 5), 0.125, 7)},
        {"w": _int8((3, 4, 2, 2), 0.015625, 128)},
    ),
    "Int8ConvTranspose": (
        Op(
            "Int8ConvTranspose",
            ["x", "w", "b"],
            ["y"],
            args={"kernel": 4, "stride": 2, "pad": 1, **NHWC, **OUT},
        ),
        {"x": X_NHWC},
        {"w": _int8((4, 4, 4, 5), 0.25, 128), "b": _bias(5, 0.125)},
    ),
    "Int8FC": (
        Op("Int8FC", ["x", "w", "b"], ["y"], args=OUT),
        {"x": X_NHWC},
        {"w": _int8((7, 144), 0.5, 128), "b": _bias(7, 0.25)},
    ),
    "Int8Quantize": (
        Op("Int8Quantize", ["x"], ["y"], args={"Y_scale": 0.25, "Y_zero_point": 128}),
        {"x": (RNG.integers(-600, 600, (3, 50)) / 16).astype(np.float32)},  # ties at 0.125
        {},
    ),
    "Int8Dequantize": (Op("Int8Dequantize", ["x"], ["y"]), {"x": X_NHWC}, {}),
    "Int8SumRelu": (
        Op("Int8SumRelu", ["x", "z"], ["y"], args=OUT),
        {"x": X_NHWC, "z": _int8((2, 6, 6, 4), 1.5, 3)},
        {},
    ),
    "Int8Add-param": (
        Op("Int8Add", ["x", "z"], ["y"], args=OUT),
        {"x": X_NHWC},
        {"z": _int8((2, 6, 6, 4), 0.75, 200)},
    ),
    "Int8Relu": (Op("Int8Relu", ["x"], ["y"], args=NHWC), {"x": X_NHWC}, {}),
    "Int8MaxPool": (
        Op("Int8MaxPool", ["x"], ["y"], args={"kernel": 3, "stride": 2, "pad": 1, **NHWC}),
        {"x": X_NHWC},
        {},
    ),
    "Int8AveragePool": (
        Op("Int8AveragePool", ["x"], ["y"], args={"kernel": 3, "stride": 1, **NHWC, **OUT}),
        {"x": X_NHWC},
        {},
    ),
    "Int8ResizeNearest": (
        Op(
            "Int8ResizeNearest",
            ["x"],
            ["y"],
            args={"height_scale": 2.0, "width_scale": 1.5, "Y_scale": 0.5, "Y_zero_point": 128},
        ),
        {"x": X_NHWC},
        {},
    ),
    "Int8Softmax": (
        Op("Int8Softmax", ["x"], ["y"], args={"Y_scale": 1 / 256, "Y_zero_point": 0}),
        {"x": _int8((5, 10), 0.125, 128)},
        {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_op_round_trips(case: str) -> None:
    op, feeds, params = CASES[case]
    steps = 1 if op.type in ("Int8Softmax", "Int8AveragePool") else 0
    exported = round_trip(pair([op], list(feeds), ["y"], params), feeds, int8_steps=steps)
    calls = [n.op_type.split("__")[0] for n in exported.graph.node if n.domain == "caffe2"]
    assert calls == [op.type]
    (back,) = import_onnx(exported).predict_net
    assert back.type == op.type and back.arg("Y_scale") == op.arg("Y_scale")


def test_quantization_is_annotated_and_params_import_as_int8_fills() -> None:
    op, feeds, params = CASES["Int8Conv-NHWC"]
    exported = round_trip(pair([op], ["x"], ["y"], params), feeds)
    annotated = {a.tensor_name for a in exported.graph.quantization_annotation}
    assert annotated == {"x", "w", "b", "y"}
    back = import_onnx(exported)
    fills = {op.outputs[0]: op.type for op in back.init_net}
    assert fills == {"w": "Int8GivenTensorFill", "b": "Int8GivenIntTensorFill"}
    out = run_model(back, feeds)["y"]
    assert isinstance(out, Int8Tensor) and (out.scale, out.zero_point) == (2.0, 10)


def test_an_int8_input_without_its_quantization_is_refused() -> None:
    op, _, params = CASES["Int8Relu"]
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Int8Relu\).*'x' is not an Int8 blob"):
        export_onnx(pair([op], ["x"], ["y"], params), value_info={"x": (2, [2, 6, 6, 4])})

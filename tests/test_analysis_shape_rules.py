"""Every shape rule against its executor kernel: each case runs the op on random inputs with
``run_op`` and checks that the inferred output types (shape, dtype, Int8-ness) are the real
ones, over the argument variants (orders, paddings, broadcasting, axes, optional outputs).
Blobs whose values a case needs (shape, sizes, bounds) come from an int64 fill op in the same
net, so the value rules are checked too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from graphtools.analysis.shapes import DATA_DEPENDENT, RULES, TensorType, infer_shapes
from graphtools.executor import KERNELS, Int8Tensor, Workspace, run_net
from graphtools.executor.scopes import WorkspaceStack
from graphtools.gradients import GradientRegistry
from graphtools.ir import Net, Op
from graphtools.recurrent import recurrent_net
from graphtools.serde.codec import op_from_proto

RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(np.float32)


def arr(dtype: Any, *shape: int) -> np.ndarray:
    return RNG.integers(1, 5, shape).astype(dtype)


def flags(*shape: int) -> np.ndarray:
    return RNG.integers(0, 2, shape).astype(np.bool_)


def ints(*values: int, dtype: Any = np.int32) -> np.ndarray:
    return np.array(values, dtype=dtype)


def stack() -> np.ndarray:
    """A workspace stack blob, as ``CreateScope`` writes it."""
    return np.asarray(WorkspaceStack(), dtype=object)


def q8(*shape: int) -> Int8Tensor:
    return Int8Tensor(RNG.integers(0, 256, shape).astype(np.uint8), 0.05, 128)


def q32(*shape: int) -> Int8Tensor:
    return Int8Tensor(RNG.integers(-50, 50, shape).astype(np.int32), 0.0025, 0)


@dataclass
class Case:
    """One op, its fed inputs, and int64 blobs made by a fill op before it (known values);
    ``setup`` ops run between the fills and the op (a gradient op's forward op)."""

    op: Op
    feeds: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, list[int]] = field(default_factory=dict)
    setup: list[Op] = field(default_factory=list)


def case(
    op_type: str,
    inputs: dict[str, Any],
    outputs: int | list[str] = 1,
    consts: dict[str, list[int]] | None = None,
    **args: Any,
) -> Case:
    names = [f"y{i}" for i in range(outputs)] if isinstance(outputs, int) else outputs
    consts = consts or {}
    feeds = {k: v for k, v in inputs.items() if k not in consts}
    return Case(Op(op_type, list(inputs), names, args=args), feeds, consts)


def _conv_cases() -> list[Case]:
    x = f32(2, 4, 9, 9)
    return [
        case("Conv", {"x": x, "w": f32(6, 4, 3, 3), "b": f32(6)}, kernel=3, pad=1, stride=2),
        case("Conv", {"x": f32(1, 4, 10, 10), "w": f32(6, 2, 3, 3)}, group=2, dilation=2),
        case("Conv", {"x": f32(1, 7, 7, 3), "w": f32(5, 3, 3, 3), "b": f32(5)}, order="NHWC"),
        case(
            "Conv", {"x": f32(1, 3, 8, 7), "w": f32(4, 3, 3, 3)}, kernel=3, legacy_pad=2, stride=2
        ),
        case("Conv", {"x": f32(1, 3, 8, 7), "w": f32(4, 3, 3, 3)}, kernel=3, legacy_pad=1, pad=0),
        case(
            "Conv",
            {"x": f32(1, 3, 8, 7), "w": f32(4, 3, 3, 2)},
            kernel_h=3,
            kernel_w=2,
            pad_t=1,
            pad_l=2,
            pad_b=0,
            pad_r=1,
            stride_h=2,
        ),
        case("Conv1D", {"x": f32(2, 3, 10), "w": f32(4, 3, 3)}, kernels=[3], strides=[2]),
        case(
            "Conv2D",
            {"x": f32(1, 2, 6, 6), "w": f32(3, 2, 2, 2)},
            kernels=[2, 2],
            pads=[1, 0, 0, 1],
        ),
        case("Conv3D", {"x": f32(1, 2, 4, 5, 6), "w": f32(3, 2, 2, 2, 2)}, kernel=2),
        case(
            "ConvTranspose",
            {"x": f32(1, 4, 5, 5), "w": f32(4, 3, 3, 3), "b": f32(3)},
            stride=2,
            pad=1,
            adj=1,
        ),
        case("ConvTranspose", {"x": f32(1, 5, 5, 4), "w": f32(4, 3, 3, 3)}, order="NHWC", stride=2),
        case("ConvTranspose", {"x": f32(1, 4, 3, 3), "w": f32(4, 2, 2, 2)}, group=2, legacy_pad=1),
    ]


def _pool_cases() -> list[Case]:
    x = f32(1, 2, 10, 10)
    return [
        case("MaxPool", {"x": x}, kernel=3, stride=2, pad=1),
        case("MaxPool", {"x": x}, kernel=3, stride=2, legacy_pad=3),
        case("MaxPool", {"x": x}, global_pooling=1),
        case("MaxPool", {"x": f32(1, 7, 7, 3)}, kernel=2, stride=2, order="NHWC"),
        case("MaxPool1D", {"x": f32(1, 2, 9)}, kernel=2),
        case("MaxPool2D", {"x": x}, kernel=2, legacy_pad=2, stride=3),
        case("MaxPool3D", {"x": f32(1, 2, 4, 4, 4)}, kernel=2, stride=2),
        case("AveragePool", {"x": x}, kernel=3, pad=1, count_include_pad=1),
        case("AveragePool", {"x": f32(2, 5, 5, 3)}, global_pooling=1, order="NHWC"),
        case("AveragePool1D", {"x": f32(1, 2, 9)}, kernel=3, stride=2),
        case("AveragePool2D", {"x": x}, kernel=5),
        case("AveragePool3D", {"x": f32(1, 2, 4, 4, 4)}, kernel=2, strides=[1, 2, 2]),
    ]


def _nn_cases() -> list[Case]:
    x = f32(2, 3, 5, 4)
    nhwc = f32(2, 5, 4, 3)
    bn = {"s": pos(3), "b": f32(3), "m": f32(3), "v": pos(3)}
    return [
        case("SpatialBN", {"x": x, **bn}, is_test=1),
        case("SpatialBN", {"x": nhwc, **bn}, is_test=1, order="NHWC"),
        case("InstanceNorm", {"x": x, "s": pos(3), "b": f32(3)}, outputs=3),
        case("InstanceNorm", {"x": nhwc, "s": pos(3), "b": f32(3)}, outputs=3, order="NHWC"),
        case("LRN", {"x": x}, outputs=2, size=3, alpha=0.1, beta=0.75),
        case("Relu", {"x": x}),
        case("Relu", {"x": arr(np.float64, 2, 3)}),  # Caffe2 runs Relu on floats only
        case("LeakyRelu", {"x": x}, alpha=0.2),
        case("PRelu", {"x": x, "slope": pos(3)}),
        case("PRelu", {"x": nhwc, "slope": pos(1)}, order="NHWC"),
        case("Sigmoid", {"x": x}),
        case("Tanh", {"x": x}),
        case("Tanh", {"x": arr(np.float64, 3)}),  # Caffe2 runs Tanh on floats only
        case("Softplus", {"x": x}),
        case("Softmax", {"x": x}, axis=2),
        case("Dropout", {"x": x}, outputs=2, is_test=1),
        case("Dropout", {"x": x}, outputs=2, ratio=0.3),
        case("ChannelShuffle", {"x": f32(1, 4, 3, 3)}, group=2),
        case("ChannelShuffle", {"x": f32(1, 3, 3, 6)}, group=3, order="NHWC"),
        case("PadImage", {"x": x}, pad=1),
        case("PadImage", {"x": x}, pads=[1, 0, 2, 1], mode="reflect"),
        case("PadImage", {"x": nhwc}, pad_t=2, pad_r=1, order="NHWC", mode="edge"),
        case("ResizeNearest", {"x": x}, height_scale=2.0, width_scale=1.5),
        case("ResizeNearest", {"x": nhwc}, height_scale=0.5, width_scale=0.5, order="NHWC"),
    ]


def _math_cases() -> list[Case]:
    x = f32(2, 3, 4)
    return [
        case("FC", {"x": x, "w": f32(5, 12), "b": f32(5)}),
        case("FC", {"x": x, "w": f32(5, 4)}, axis=2),
        case("FC", {"x": x, "w": f32(1, 5, 12)}, axis_w=2),
        case("FCTransposed", {"x": f32(2, 6), "w": f32(6, 4), "b": f32(4)}),
        case("MatMul", {"a": f32(3, 4), "b": f32(4, 5)}),
        case("MatMul", {"a": f32(4, 3), "b": f32(5, 4)}, trans_a=1, trans_b=1),
        case("MatMul", {"a": x, "b": f32(4, 2)}, axis_a=2),
        case("MatMul", {"a": arr(np.int32, 2, 3), "b": arr(np.int64, 3, 2)}),
        case("BatchMatMul", {"a": x, "b": f32(2, 4, 5)}),
        case("BatchMatMul", {"a": f32(2, 4, 3), "b": f32(2, 5, 4)}, trans_a=1, trans_b=1),
        case("BatchMatMul", {"a": x, "b": f32(4, 5)}, broadcast=1),
        case("BatchMatMul", {"a": f32(3, 4), "b": f32(4)}),
        case("Add", {"a": x, "b": f32(4)}),
        case("Sub", {"a": x, "b": f32(3, 1)}),
        case("Mul", {"a": x, "b": f32(3)}, broadcast=1, axis=1),
        case("Div", {"a": f32(2, 3, 4, 5), "b": pos(3, 1)}, broadcast=1, axis_str="C"),
        case("Add", {"a": x, "b": f32(3, 4)}, broadcast=1),
        case("Div", {"a": arr(np.int32, 2, 3), "b": arr(np.int32, 3)}),
        case("Add", {"a": x, "b": arr(np.int64, 4)}),
        case("Mul", {"a": f32(1, 3), "b": np.ones((4, 1), np.float64)}),
        case("Sum", {"a": x, "b": f32(2, 3, 4), "c": f32(2, 3, 4)}),
        case("Sum", {"a": arr(np.int32, 3), "b": f32(3)}),
        case("Scale", {"x": x}, scale=2.0),
        case("Scale", {"x": arr(np.int32, 3)}, scale=2.0),
        case("Clip", {"x": x}, min=-0.5, max=0.5),
        case("Exp", {"x": x}),
        case("Exp", {"x": arr(np.float64, 3)}),  # Caffe2 runs Exp on floats only
        case("Log", {"x": pos(3, 2)}),
        case("Sqrt", {"x": pos(3)}),
        case("Abs", {"x": x}),
        case("Neg", {"x": arr(np.int64, 2)}),
        case("Sqr", {"x": x}),
        case("ReduceMean", {"x": x}, axes=[1], keepdims=0),
        case("ReduceSum", {"x": x}),
        case("ReduceMax", {"x": x}, axes=[-1]),
        case("ReduceMin", {"x": arr(np.int32, 2, 3, 4)}, axes=[0, 2], keepdims=1),
        case("ArgMax", {"x": x}),
        case("ArgMin", {"x": x}, axis=0, keepdims=0),
    ]


def _tensor_cases() -> list[Case]:
    x = f32(2, 3, 4)
    return [
        case("Concat", {"a": x, "b": f32(2, 5, 4), "c": f32(2, 1, 4)}, outputs=2),
        case("Concat", {"a": f32(1, 2, 2, 3), "b": f32(1, 2, 2, 5)}, outputs=2, order="NHWC"),
        case("Concat", {"a": x, "b": x}, outputs=2, add_axis=1, axis=0),
        case("Concat", {"a": x, "b": arr(np.int64, 2, 3, 2)}, axis=-1),
        case("DepthConcat", {"a": x, "b": x}, outputs=2),
        case("Split", {"x": f32(2, 6, 4)}, outputs=3),
        case("Split", {"x": x}, outputs=2, axis=2, split=[1, 3]),
        case("Split", {"x": x}, outputs=3, axis=1, add_axis=1),
        case("Split", {"x": x, "s": [2, 2]}, outputs=2, consts={"s": [2, 2]}, axis=-1),
        case("DepthSplit", {"x": f32(1, 2, 2, 4)}, outputs=2, order="NHWC"),
        case("Slice", {"x": x}, starts=[0, 1], ends=[-1, 3]),
        case("Slice", {"x": x}, starts=[1, 0, 1], ends=[2, -2, -1]),
        case("Slice", {"x": x, "s": [0, 1], "e": [1, -1]}, consts={"s": [0, 1], "e": [1, -1]}),
        case("Reshape", {"x": x}, outputs=2, shape=[0, -1]),
        case("Reshape", {"x": x}, outputs=2, shape=[-1, 2, 3]),
        case("Reshape", {"x": x, "s": [4, 0, -1]}, outputs=2, consts={"s": [4, 0, -1]}),
        case("Flatten", {"x": x}),
        case("Flatten", {"x": x}, axis=2),
        case("Flatten", {"x": x}, axis=0),
        case("FlattenToVec", {"x": x}),
        case("Transpose", {"x": x}),
        case("Transpose", {"x": x}, axes=[0, 2, 1]),
        case("NCHW2NHWC", {"x": f32(1, 2, 3, 4)}),
        case("NHWC2NCHW", {"x": f32(1, 2, 3, 4)}),
        *(
            case(t, {"x": v})
            for t in (
                *("Copy", "CopyCPUToGPU", "CopyGPUToCPU", "CopyFromCPUInput"),
                *("CopyOnDeviceLike", "EnsureCPUOutput", "Alias", "AliasWithName"),
                *("Identity", "StopGradient"),
            )
            for v in (x, q8(2, 2))
        ),
        case("Shape", {"x": x}),
        case("Shape", {"x": x}, axes=[0, -1]),
        case("Gather", {"x": x, "i": np.array([[0, 1, 1], [1, 0, 0]], np.int64)}),
        case("Gather", {"x": x, "i": np.array([2, 0], np.int32)}, axis=1),
        case("ExpandDims", {"x": x}, dims=[0, 3]),
        case("ExpandDims", {"x": x}, dims=[-1]),
        case("Squeeze", {"x": f32(2, 1, 3, 1)}, dims=[1]),
        case("Squeeze", {"x": f32(2, 1, 3, 1)}),
        case("Cast", {"x": x}, to=10),
        case("Cast", {"x": arr(np.int32, 3)}, to=1),
        case("Cast", {"x": x}, to=b"DOUBLE"),
    ]


def _fill_cases() -> list[Case]:
    x = f32(2, 3)
    return [
        case("GivenTensorFill", {}, shape=[2, 3], values=[1.0] * 6),
        case("GivenTensorFill", {}, values=[1.0, 2.0]),
        case("GivenTensorFill", {}, shape=[3], values=[1, 2, 3], dtype=10),
        case("GivenTensorDoubleFill", {}, shape=[2], values=[1.0, 2.0]),
        case("GivenTensorFp16Fill", {}, shape=[1, 2], values=[1.0, 2.0]),
        case("GivenTensorIntFill", {}, shape=[2], values=[1, 2]),
        case("GivenTensorInt64Fill", {}, values=[1, 2, 3]),
        case("GivenTensorInt16Fill", {}, shape=[1], values=[7]),
        case("GivenTensorBoolFill", {}, shape=[2, 1], values=[1, 0]),
        case("GivenTensorStringFill", {}, shape=[2], values=[b"a", b"bc"]),
        case("GivenTensorByteStringToUInt8Fill", {}, shape=[2, 3], values=b"abcdef"),
        case("Int8GivenTensorFill", {}, shape=[2, 2], values=b"\x01\x02\x03\x04", Y_scale=0.5),
        case("Int8GivenIntTensorFill", {}, shape=[3], values=[1, 2, 3]),
        case("ConstantFill", {}, shape=[2, 3], value=1.0),
        case("ConstantFill", {}, shape=[4], value=3),
        case("ConstantFill", {}, shape=[2], value=1.0, dtype=2),
        case("ConstantFill", {"x": x}, extra_shape=[4]),
        case("ConstantFill", {"s": [3, 2]}, consts={"s": [3, 2]}, input_as_shape=1),
        case("RangeFill", {}, shape=[2, 3]),
        case("XavierFill", {}, shape=[4, 3]),
        case("MSRAFill", {}, shape=[4, 3, 2, 2]),
        case("GaussianFill", {"x": x}, mean=1.0, std=2.0),
        case("UniformFill", {}, shape=[5], min=-1.0, max=1.0),
        case("UniformIntFill", {}, shape=[2, 2], min=0, max=9),
        case("UniformFill", {"x": x, "lo": np.float32(0.0), "hi": np.float32(2.0)}),
    ]


def _int8_cases() -> list[Case]:
    nhwc = {"order": "NHWC"}
    return [
        case("Int8Quantize", {"x": f32(1, 3, 4, 4)}, Y_scale=0.1, Y_zero_point=128),
        case("Int8Dequantize", {"x": q8(1, 3, 4, 4)}),
        case("Int8Conv", {"x": q8(1, 5, 5, 3), "w": q8(4, 3, 3, 3), "b": q32(4)}, kernel=3, **nhwc),
        case("Int8ConvRelu", {"x": q8(1, 5, 5, 4), "w": q8(4, 1, 1, 2)}, group=2, pad=1, **nhwc),
        case("Int8ConvTranspose", {"x": q8(1, 3, 3, 4), "w": q8(4, 2, 2, 3)}, stride=2, **nhwc),
        case("Int8FC", {"x": q8(2, 6), "w": q8(3, 6), "b": q32(3)}),
        case("Int8FC", {"x": q8(2, 2, 3), "w": q8(3, 6)}),
        *(
            case(t, {"a": q8(2, 3), "b": q8(2, 3)}, Y_scale=0.2)
            for t in ("Int8Sum", "Int8SumRelu", "Int8Add", "Int8AddRelu")
        ),
        case("Int8Relu", {"x": q8(2, 3)}),
        case("Int8MaxPool", {"x": q8(1, 4, 4, 2)}, kernel=2, stride=2, **nhwc),
        case("Int8AveragePool", {"x": q8(1, 2, 5, 5)}, kernel=3, pad=1),
        case("Int8Softmax", {"x": q8(2, 5)}, Y_scale=1 / 256),
        case("Int8Reshape", {"x": q8(2, 3, 4)}, outputs=2, shape=[2, -1]),
        case("Int8Flatten", {"x": q8(2, 3, 4)}, axis=2),
    ]


def _misc_cases() -> list[Case]:
    x = f32(2, 3, 4)
    yolo = {
        "anchors": [10, 13, 16, 30, 33, 23, 30, 61],
        "anchor_mask": [1, 3],
        "numclass": 2,
        "numanchors": 4,
        "stride": 8,
    }
    return [
        case("Negative", {"x": arr(np.int32, 3)}),
        case("Sign", {"x": x}),
        case("Log1p", {"x": pos(3)}),
        case("HalfToFloat", {"x": x.astype(np.float16)}),
        case("Swish", {"x": x}),
        case("Gelu", {"x": x}, fast_gelu=1),
        case("Logit", {"x": pos(2, 2) / 4}),
        case("ReplaceNaN", {"x": x}, value=1.0),
        case("BatchBoxCox", {"x": pos(2, 3), "l1": pos(3), "l2": pos(3)}),
        case("Mod", {"x": arr(np.int64, 4)}, divisor=3),
        case("Mean", {"a": x, "b": f32(2, 3, 4)}),
        case("ElementwiseLinear", {"x": x, "w": f32(12), "b": f32(12)}),
        case("ElementwiseLinear", {"x": x, "w": f32(4), "b": f32(4)}, axis=2),
        case("FbFCPacked", {"x": x, "w": f32(5, 12), "b": f32(5)}),
        case("ConvRelu", {"x": f32(1, 2, 5, 5), "w": f32(3, 2, 3, 3)}, kernel=3, pad=1),
        case("LayerNorm", {"x": x}, outputs=3),
        case(
            "LayerNorm",
            {"x": x, "g": f32(4), "b": f32(4)},
            outputs=3,
            axis=-1,
            elementwise_affine=1,
        ),
        case("RMSNorm", {"x": x, "g": f32(12), "b": f32(12)}, outputs=2),
        case("LpNorm", {"x": x}, p=1),
        case("ReduceBackSum", {"x": x}),
        case(
            "ReduceBackMean",
            {"x": x, "lengths": np.array([1, 2, 3, 4, 1, 2], np.int32)},
            num_reduce_dim=1,
        ),
        case("ReduceBackSum", {"x": x}, num_reduce_dim=2),
        case("TopK", {"x": x}, outputs=3, k=2),
        case("TopK", {"x": x, "k": [2]}, outputs=3, consts={"k": [2]}, axis=1),
        case("IsEmpty", {"x": x}),
        case("Bucketize", {"x": x}, boundaries=[-1.0, 0.0, 0.5]),
        case(
            "ScatterAssign",
            {"d": x, "i": np.array([1, 0], np.int64), "s": f32(2, 3, 4)},
        ),
        case("Upsample", {"x": f32(1, 2, 3, 4)}, scale=3),
        case(
            "Int8ResizeNearest",
            {"x": Int8Tensor(arr(np.uint8, 1, 3, 4, 2), 1.0, 0)},
            height_scale=2.0,
            width_scale=0.5,
        ),
        case("Yolo", {"x": f32(1, 15, 3, 4)}, outputs=8, **yolo),
        case(
            "PackedInt8BGRANHWCToNCHWCStylizerPreprocess",
            {"x": arr(np.uint8, 1, 3, 4, 4), "m": f32(3)},
        ),
        case("BRGNCHWCToPackedInt8BGRAStylizerDeprocess", {"x": f32(1, 3, 4, 5), "m": f32(3)}),
    ]


def _logic_cases() -> list[Case]:
    x = f32(2, 3, 4)
    return [
        case("LT", {"a": x, "b": f32(4)}),
        case("LE", {"a": arr(np.int32, 2, 3), "b": arr(np.int64, 2, 3)}),
        case("GT", {"a": x, "b": f32(3)}, broadcast=1, axis=1),
        case("GE", {"a": x, "b": f32(2, 1, 4)}),
        case("EQ", {"a": arr(np.int64, 3), "b": arr(np.int64, 1)}),
        case("NE", {"a": x, "b": f32(3, 4)}, broadcast=1),
        case("And", {"a": flags(2, 3), "b": flags(3)}),
        case("Or", {"a": flags(2, 3), "b": flags(2)}, broadcast=1, axis=0),
        case("Xor", {"a": flags(4), "b": flags(4)}),
        case("Not", {"a": flags(2, 3)}),
    ]


def _aten_cases() -> list[Case]:
    x = f32(2, 3, 4)
    grid = RNG.uniform(-1.2, 1.2, (2, 4, 7, 2)).astype(np.float32)
    return [
        case("ATen", {"x": x}, operator="max"),
        case("ATen", {"x": x, "o": arr(np.int32, 4)}, operator="max"),
        case("ATen", {"x": x}, outputs=2, operator="max", dim=1, keepdim=1),
        case("ATen", {"x": arr(np.int64, 3, 2)}, outputs=2, operator=b"max", dim=-1),
        case("ATen", {"x": x}, operator="unsqueeze", dim=-1),
        case("ATen", {"x": x}, operator="unsqueeze"),
        case("ATen", {"x": f32(2, 3, 5, 6), "g": grid}, operator="grid_sampler", padding_mode=1),
        case("ATen", {"x": f32(2, 3, 5, 6), "g": grid}, operator="grid_sampler", align_corners=0),
    ]


def _rois(batch: int, count: int, columns: int = 5) -> np.ndarray:
    corner = RNG.uniform(0, 6, (count, 2))
    boxes = np.concatenate([corner, corner + RNG.uniform(1, 8, (count, 2))], axis=1)
    index = RNG.integers(0, batch, (count, 1))
    return np.concatenate([index, boxes], axis=1)[:, -columns:].astype(np.float32)


def _detection_cases() -> list[Case]:
    return [
        case(
            "RoIAlign",
            {"x": f32(1, 4, 8, 8), "r": _rois(1, 3)},
            pooled_h=2,
            pooled_w=3,
            spatial_scale=0.5,
            sampling_ratio=2,
        ),
        case("RoIAlign", {"x": f32(2, 8, 8, 4), "r": _rois(2, 2)}, order="NHWC", aligned=1),
        case("RoIAlign", {"x": f32(1, 3, 6, 6), "r": _rois(1, 2, columns=4)}, pooled_h=4),
        case("RoIAlign", {"x": f32(1, 3, 6, 6), "r": np.zeros((0, 5), np.float32)}),
        case(
            "BBoxTransform",
            {
                "r": _rois(2, 3),
                "d": f32(3, 8) / 10,
                "i": np.array([[20, 30, 1.0], [25, 25, 0.5]], np.float32),
            },
            outputs=2,
        ),
        case(
            "BBoxTransform",
            {"r": _rois(1, 3, columns=4), "d": f32(3, 4) / 10, "i": np.array([[20, 30, 2.0]])},
            weights=[10.0, 10.0, 5.0, 5.0],
            apply_scale=0,
        ),
    ]


def _fused(rows: int, columns: int, scale_dtype: Any) -> np.ndarray:
    """Quantized rows with their scale and bias (``scale_dtype``) in the trailing bytes."""
    values = RNG.integers(0, 256, (rows, columns)).astype(np.uint8)
    params = RNG.uniform(0.5, 1.5, (rows, 2)).astype(scale_dtype).view(np.uint8)
    return np.concatenate([values, params], axis=1)


def _sparse_cases() -> list[Case]:
    indices, lengths = ints(0, 5, 2, 2, 1, dtype=np.int64), ints(2, 3)
    q = RNG.integers(0, 256, (6, 4)).astype(np.uint8)
    weights = f32(5)
    return [
        case("LengthsSum", {"d": f32(5, 3), "l": ints(2, 0, 3)}),
        case("LengthsSum", {"d": arr(np.int64, 4), "l": ints(1, 3, dtype=np.int64)}),
        case("SparseLengthsSum8BitsRowwise", {"d": q, "i": indices, "l": lengths, "s": pos(6, 2)}),
        case(
            "SparseLengthsWeightedSum8BitsRowwise",
            {"d": q, "w": weights, "i": indices, "l": lengths, "s": pos(6, 2)},
        ),
        case(
            "SparseLengthsSumFused8BitRowwise",
            {"d": _fused(6, 3, np.float32), "i": indices, "l": lengths},
        ),
        case(
            "SparseLengthsWeightedSumFused8BitRowwise",
            {"d": _fused(6, 3, np.float32), "w": weights, "i": indices, "l": lengths},
        ),
        case(
            "SparseLengthsSumFused4BitRowwise",
            {"d": _fused(6, 3, np.float16), "i": indices, "l": lengths},
        ),
        case("LengthsToRanges", {"l": ints(2, 0, 3)}),
        case(
            "SparseToDenseMask",
            {"i": ints(5, 1, 9, 1, dtype=np.int64), "v": f32(4, 2), "d": f32(2)},
            outputs=2,
            mask=[1, 5, 7],
        ),
        case(
            "SparseToDenseMask",
            {"i": ints(5, 1, 9, 1), "v": arr(np.int64, 4), "d": np.int64(0), "l": ints(3, 1)},
            outputs=2,
            mask=[9, 1],
        ),
        case(
            "BatchSparseToDense",
            {"l": ints(2, 1), "i": ints(0, 3, 2, dtype=np.int64), "v": f32(3)},
            dense_last_dim=5,
        ),
        case(
            "BatchSparseToDense",
            {"l": ints(2, 1), "i": ints(0, 3, 2), "v": arr(np.int32, 3, 1), "like": f32(2, 6)},
        ),
        case("FillExamplesWithIndicator", {"d": f32(2, 3), "f": np.array([1, 0, 1, 0], bool)}),
    ]


def _softmax_rows(*shape: int) -> np.ndarray:
    e = np.exp(f32(*shape))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def _train_cases() -> list[Case]:
    lstm = {"h": f32(1, 2, 3), "c": f32(1, 2, 3), "g": f32(1, 2, 12)}
    return [
        case("AveragedLoss", {"x": f32(2, 3)}),
        case("AveragedLoss", {"x": arr(np.int32, 4)}),
        case("SquaredL2Distance", {"x": f32(3, 4), "y": f32(3, 4)}),
        case("SquaredL2Distance", {"x": f32(5), "y": f32(5)}),
        case("DotProduct", {"x": f32(3, 2, 2), "y": f32(3, 2, 2)}),
        case("DotProduct", {"x": arr(np.int32, 3, 2), "y": arr(np.int32, 3, 2)}),
        case("SoftmaxWithLoss", {"x": f32(4, 5), "l": ints(0, 4, 2, 2)}, outputs=2),
        case(
            "SoftmaxWithLoss",
            {"x": f32(4, 5), "l": ints(1, 0, 3, 2), "w": pos(4)},
            outputs=2,
            scale=0.5,
        ),
        case(
            "SoftmaxWithLoss", {"x": f32(4, 5), "l": _softmax_rows(4, 5)}, outputs=2, label_prob=1
        ),
        case(
            "SoftmaxWithLoss", {"x": f32(2, 3, 5), "l": ints(0, 1, 2, 3, 4, 0)}, outputs=2, axis=2
        ),
        case("LSTMUnit", {**lstm, "t": ints(0)}, outputs=2),
        case("LSTMUnit", {**lstm, "n": ints(1, 0), "t": ints(0)}, outputs=2, drop_states=1),
        case("ZeroGradient", {"x": f32(2)}, outputs=0),
        case("WeightedSum", {"x0": f32(2, 3), "w0": f32(1), "x1": f32(2, 3), "w1": f32(1)}),
        case("LearningRate", {"it": ints(5, dtype=np.int64)}, policy="step", stepsize=2, gamma=0.5),
        case("LearningRate", {"it": ints(5, dtype=np.int64)}, policy=b"inv", gamma=0.1, power=0.75),
    ]


def _grad_cases() -> list[Case]:
    x = f32(2, 3, 4)
    lstm = {"h": f32(1, 2, 3), "c": f32(1, 2, 3), "g": f32(1, 2, 12)}
    states = {"H": f32(1, 2, 3), "C": f32(1, 2, 3), "dH": f32(1, 2, 3), "dC": f32(1, 2, 3)}
    return [
        case("AddGradient", {"g": x, "a": x, "b": f32(4)}, outputs=2),
        case("SubGradient", {"g": x, "a": x, "b": f32(3)}, outputs=2, broadcast=1, axis=1),
        case("MulGradient", {"g": f32(2, 3), "a": f32(2, 1), "b": f32(3)}, outputs=2),
        case("MulGradient", {"g": f32(2, 3), "a": arr(np.int32, 2, 3), "b": f32(2, 3)}, outputs=2),
        case("DivGradient", {"g": x, "a": x, "b": pos(4), "c": f32(2, 3, 4)}, outputs=2),
        case("FCGradient", {"x": f32(2, 6), "w": f32(4, 6), "dy": f32(2, 4)}, outputs=3),
        case("FCGradient", {"x": x, "w": f32(5, 4), "dy": f32(2, 3, 5)}, outputs=3, axis=2),
        case("ReluGradient", {"y": f32(2, 3), "dy": f32(2, 3)}),
        case(
            "ConvGradient",
            {"x": f32(2, 3, 5, 5), "w": f32(4, 3, 3, 3), "dy": f32(2, 4, 3, 3)},
            outputs=3,
            kernel=3,
        ),
        case(
            "ConvGradient",
            {"x": f32(1, 5, 5, 2), "w": f32(4, 2, 2, 2), "dy": f32(1, 4, 4, 4)},
            outputs=1,
            kernel=2,
            no_bias=1,
            order="NHWC",
        ),
        case(
            "MaxPoolGradient",
            {"x": f32(2, 3, 4, 4), "y": f32(2, 3, 2, 2), "dy": f32(2, 3, 2, 2)},
            kernel=2,
            stride=2,
        ),
        case(
            "AveragePoolGradient",
            {"x": f32(2, 3, 5, 5), "y": f32(2, 3, 3, 3), "dy": f32(2, 3, 3, 3)},
            kernel=3,
            stride=2,
            pad=1,
        ),
        case("SigmoidGradient", {"y": f32(2, 3), "dy": np.ones((2, 3))}),
        case("TanhGradient", {"y": f32(3), "dy": f32(2, 3)}),
        case("SoftmaxGradient", {"y": x, "dy": f32(2, 3, 4)}, axis=2),
        case("AveragedLossGradient", {"x": f32(2, 3), "d": np.float32(1.0)}),
        case("SquaredL2DistanceGradient", {"x": f32(3, 4), "y": f32(3, 4), "d": f32(3)}, outputs=2),
        case("DotProductGradient", {"x": f32(3, 4), "y": f32(3, 4), "d": f32(3)}, outputs=2),
        case(
            "SoftmaxWithLossGradient",
            {"x": f32(4, 5), "l": ints(0, 4, 2, 2), "p": _softmax_rows(4, 5), "d": f32()},
        ),
        case(
            "SoftmaxWithLossGradient",
            {
                "x": f32(4, 5),
                "l": ints(0, 4, 2, 2),
                "w": pos(4),
                "p": _softmax_rows(4, 5),
                "d": f32(),
            },
        ),
        case("LSTMUnitGradient", {**lstm, "t": ints(0), **states}, outputs=3),
        case("LSTMUnitGradient", {**lstm, "n": ints(1, 0), "t": ints(0), **states}, outputs=3),
    ]


def _control_cases() -> list[Case]:
    x = f32(2, 3)
    relu, sigmoid = Net([Op("Relu", ["x"], ["y"])]), Net([Op("Sigmoid", ["x"], ["y"])])
    count_up = Net([Op("Add", ["i", "one"], ["i"])])
    below = Net([Op("LT", ["i", "n"], ["go"])])
    counter = {"i": ints(0, dtype=np.int64), "n": ints(3, dtype=np.int64)}
    return [
        case("CreateScope", {}),
        case("HasScope", {"w": stack()}),
        case("If", {"c": np.array([True]), "x": x}, ["y"], then_net=relu, else_net=sigmoid),
        case("If", {"c": np.array(False), "x": x}, ["y"], then_net=relu, else_net=sigmoid),
        case(
            "If", {"c": np.array([False]), "y": x}, ["y"], then_net=Net([Op("Relu", ["y"], ["y"])])
        ),
        case(
            "While",
            {"go": np.array([True]), **counter, "one": ints(1, dtype=np.int64)},
            ["i", "go"],
            loop_net=count_up,
            cond_net=below,
        ),
        case(
            "While",
            {"go": np.array([True]), **counter, "one": ints(1, dtype=np.int64)},
            ["i"],
            loop_net=Net([Op("Add", ["i", "one"], ["i"]), Op("LT", ["i", "n"], ["go"])]),
        ),
        case(
            "Do",
            {"x": x, "w": stack()},
            ["y", "w"],
            net=Net([Op("Relu", ["a"], ["b"])]),
            inner_blobs=["a", "b"],
            outer_blobs_idx=[0, 1],
        ),
    ]


def _recurrent_cases() -> list[Case]:
    cell = Net(
        [Op("Sum", ["x_t", "h_prev"], ["s"]), Op("Mul", ["x_t", "s"], ["h"])],
        ["x_t", "h_prev"],
        ["h"],
        name="step",
    )
    outer = Net([], ["x", "h0"])
    recurrent_net(outer, cell, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, scope="r")
    forward = outer[0]
    x, h0 = f32(3, 2, 4), f32(2, 4)
    gradient = GradientRegistry.GetGradientForOp(forward, ["g_all", None, None])[0][0]
    stateful = forward.replace(inputs=["x", "h1"])
    return [
        Case(forward, {"x": x, "h0": h0}),
        Case(stateful, {"x": f32(0, 2, 4), "h1": f32(1, 2, 4)}),
        Case(op_from_proto(gradient), {"x": x, "h0": h0, "g_all": f32(3, 2, 4)}, {}, [forward]),
        case(
            "rnn_internal_apply_link",
            {"t": np.array([1], np.int32), "e": f32(5, 2, 3)},
            outputs=["i", "e"],
            offset=1,
            window=2,
        ),
        case(
            "rnn_internal_accumulate_gradient_input",
            {"t": np.array([1], np.int32), "og": f32(3, 2, 3), "g": f32(4, 2, 3)},
            outputs=["g"],
            offset=1,
        ),
    ]


CASES = [
    *_conv_cases(),
    *_pool_cases(),
    *_nn_cases(),
    *_math_cases(),
    *_tensor_cases(),
    *_fill_cases(),
    *_int8_cases(),
    *_misc_cases(),
    *_logic_cases(),
    *_aten_cases(),
    *_detection_cases(),
    *_sparse_cases(),
    *_train_cases(),
    *_grad_cases(),
    *_control_cases(),
    *_recurrent_cases(),
]


def type_of(value: Any) -> TensorType:
    """The true type of an executor value."""
    if isinstance(value, Int8Tensor):
        return TensorType(value.values.dtype, value.values.shape, quantized=True)
    array = np.asarray(value)
    return TensorType(array.dtype, array.shape)


def _net(c: Case) -> Net:
    fills = [
        Op("GivenTensorInt64Fill", [], [name], args={"values": values, "shape": [len(values)]})
        for name, values in c.consts.items()
    ]
    return Net([*fills, *c.setup, c.op], list(c.feeds))


def _ids() -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for c in CASES:
        seen[c.op.type] = seen.get(c.op.type, 0) + 1
        ids.append(f"{c.op.type}-{seen[c.op.type]}")
    return ids


@pytest.mark.parametrize("c", CASES, ids=_ids())
def test_rule_gives_the_kernel_output_types(c: Case) -> None:
    net = _net(c)
    ws = Workspace(seed=0)
    for name, value in c.feeds.items():
        ws.feed(name, value)
    run_net(net, ws)
    info = infer_shapes(net, {name: type_of(v) for name, v in c.feeds.items()})
    for name in c.op.outputs:
        expected, inferred = type_of(ws.fetch(name)), info.final(name)
        assert inferred == expected, (name, str(inferred), str(expected), info.why(name))
        assert name not in {b[0] for b in info.unknown}


def test_every_kernel_op_type_has_a_rule_or_is_listed_as_data_dependent() -> None:
    """Adding an executor kernel means adding its shape rule (or a DATA_DEPENDENT entry)."""
    missing = sorted(set(KERNELS) - set(RULES) - set(DATA_DEPENDENT))
    assert not missing, f"no shape rule for executor op types {missing}"
    assert not set(RULES) & set(DATA_DEPENDENT)
    assert set(KERNELS) >= set(DATA_DEPENDENT)
    assert all(reason for reason in DATA_DEPENDENT.values())


def test_every_rule_is_checked_against_its_kernel_here() -> None:
    checked = {c.op.type for c in CASES}
    assert sorted(set(RULES) - checked) == []

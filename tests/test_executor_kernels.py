"""Executor kernels checked against onnxruntime on random data.

Each case builds one Caffe2 op and the same computation as an ONNX graph (NHWC variants wrap
the ONNX op in transposes, legacy broadcasts reshape B explicitly), runs both on the same random
inputs and compares. onnxruntime is an engine independent of our kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from graphtools.errors import ExecutionError
from graphtools.executor import Workspace, run_op
from graphtools.ir import Op

helper = onnx.helper

_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]


def run_onnx(
    nodes: list[Any],
    feeds: dict[str, np.ndarray],
    outputs: list[str],
    consts: dict[str, np.ndarray] | None = None,
    opset: int = 13,
) -> list[np.ndarray]:
    """Run ``nodes`` with onnxruntime on the CPU provider."""
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    initializers = [onnx.numpy_helper.from_array(v, n) for n, v in (consts or {}).items()]
    graph = helper.make_graph(
        nodes, "case", inputs, [onnx.ValueInfoProto(name=n) for n in outputs], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(outputs, feeds)


def run_caffe2(op: Op, feeds: dict[str, np.ndarray]) -> list[Any]:
    workspace = Workspace()
    for name, value in feeds.items():
        workspace.feed(name, value)
    run_op(op, workspace)
    return [workspace.fetch(name) for name in op.outputs]


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@dataclass
class Case:
    """One comparison: a Caffe2 op, its feeds, and the ONNX nodes computing the same outputs."""

    op: Op
    feeds: dict[str, np.ndarray]
    nodes: list[Any]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: list[str] | None = None  # ONNX names for op.outputs[:len(outputs)]
    opset: int = 13
    rtol: float = 1e-5
    atol: float = 1e-5


def check(case: Case) -> None:
    out_names = case.outputs or list(case.op.outputs[:1])
    expected = run_onnx(case.nodes, case.feeds, out_names, case.consts, case.opset)
    got = run_caffe2(case.op, case.feeds)
    for name, ours, theirs in zip(out_names, got, expected, strict=False):
        ours = np.asarray(ours)
        assert ours.shape == theirs.shape, f"{name}: {ours.shape} != {theirs.shape}"
        assert ours.dtype == theirs.dtype, f"{name}: {ours.dtype} != {theirs.dtype}"
        np.testing.assert_allclose(ours, theirs, rtol=case.rtol, atol=case.atol, err_msg=name)


def node(op_type: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Any:
    return helper.make_node(op_type, inputs, outputs, **attrs)


def nhwc_wrap(op_type: str, inputs: list[str], weight_to_nchw: bool, **attrs: Any) -> list[Any]:
    """ONNX nodes applying ``op_type`` to NHWC data: transpose in, op, transpose out."""
    nodes = [node("Transpose", [inputs[0]], ["x_nchw"], perm=_TO_NCHW)]
    onnx_inputs = ["x_nchw", *inputs[1:]]
    if weight_to_nchw:
        nodes.append(node("Transpose", [inputs[1]], ["w_nchw"], perm=_TO_NCHW))
        onnx_inputs[1] = "w_nchw"
    nodes.append(node(op_type, onnx_inputs, ["y_nchw"], **attrs))
    nodes.append(node("Transpose", ["y_nchw"], ["y"], perm=_TO_NHWC))
    return nodes


# -- convolutions ----------------------------------------------------------------------------

CONV_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (caffe2 args, onnx attrs), 3x3 kernel unless the args say otherwise
    "pad1": ({"kernel": 3, "pad": 1}, {"pads": [1, 1, 1, 1]}),
    "asym_pads": ({"kernel": 3, "pads": (0, 1, 2, 1)}, {"pads": [0, 1, 2, 1]}),
    "pad_tlbr": (
        {"kernel": 3, "pad_t": 2, "pad_l": 0, "pad_b": 1, "pad_r": 1},
        {"pads": [2, 0, 1, 1]},
    ),
    "stride2": ({"kernel": 3, "stride": 2, "pad": 1}, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "stride_hw": ({"kernel": 3, "stride_h": 1, "stride_w": 2}, {"strides": [1, 2]}),
    "strides_list": ({"kernels": (3, 3), "strides": (2, 1)}, {"strides": [2, 1]}),
    "dilation2": ({"kernel": 3, "dilation": 2, "pad": 2}, {"dilations": [2, 2], "pads": [2] * 4}),
    "dilations_list": ({"kernel": 3, "dilations": (1, 2)}, {"dilations": [1, 2]}),
    "legacy_valid": ({"kernel": 3, "stride": 2, "legacy_pad": 1}, {"strides": [2, 2]}),
    "legacy_same": (
        {"kernel": 3, "stride": 2, "legacy_pad": 2},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    ),
    "no_kernel_arg": ({"pad": 1}, {"pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("group", [1, 2, 4], ids=["g1", "g2", "depthwise"])
@pytest.mark.parametrize("variant", sorted(CONV_CASES))
def test_conv_matches_onnx(variant: str, group: int, layout: str) -> None:
    args, attrs = CONV_CASES[variant]
    n, c, h, w, m = 2, 4, 9, 8, 8
    x = randn(n, c, h, w, seed=1)
    weight = randn(m, c // group, 3, 3, seed=2)
    bias = randn(m, seed=3)
    attrs = {**attrs, "group": group}
    if layout == "NHWC":
        feeds = {"x": x.transpose(_TO_NHWC), "w": weight.transpose(_TO_NHWC), "b": bias}
        nodes = nhwc_wrap("Conv", ["x", "w", "b"], True, **attrs)
    else:
        feeds = {"x": x, "w": weight, "b": bias}
        nodes = [node("Conv", ["x", "w", "b"], ["y"], **attrs)]
    op = Op("Conv", ["x", "w", "b"], ["y"], args={**args, "group": group, "order": layout})
    check(Case(op, feeds, nodes, atol=1e-4))


@pytest.mark.parametrize("nd", [1, 3])
def test_conv_1d_3d_without_bias(nd: int) -> None:
    spatial = (7,) * nd
    x = randn(1, 3, *spatial, seed=4)
    weight = randn(5, 3, *(3,) * nd, seed=5)
    op = Op("Conv", ["x", "w"], ["y"], args={"kernels": (3,) * nd, "pads": (1,) * (2 * nd)})
    onnx_node = node("Conv", ["x", "w"], ["y"], pads=[1] * (2 * nd))
    check(Case(op, {"x": x, "w": weight}, [onnx_node], atol=1e-4))


CONV_T_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "stride2": ({"kernel": 3, "stride": 2}, {"strides": [2, 2]}),
    "pads": ({"kernel": 4, "stride": 2, "pad": 1}, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "asym_pads_adj": (
        {"kernel": 3, "stride": 2, "pads": (1, 0, 0, 1), "adj": 1},
        {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]},
    ),
    "adj_hw": (
        {"kernel_h": 2, "kernel_w": 3, "stride_h": 2, "stride_w": 3, "adj_h": 1},
        {"strides": [2, 3], "output_padding": [1, 0]},
    ),
    "legacy_valid": ({"kernel": 2, "stride": 2, "legacy_pad": 1}, {"strides": [2, 2]}),
}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("variant", sorted(CONV_T_CASES))
def test_conv_transpose_matches_onnx(variant: str, group: int, layout: str) -> None:
    args, attrs = CONV_T_CASES[variant]
    kh = args.get("kernel", args.get("kernel_h"))
    kw = args.get("kernel", args.get("kernel_w"))
    x = randn(2, 4, 5, 6, seed=6)
    weight = randn(4, 6 // group, kh, kw, seed=7)
    bias = randn(6, seed=8)
    attrs = {**attrs, "group": group}
    if layout == "NHWC":
        feeds = {"x": x.transpose(_TO_NHWC), "w": weight.transpose(_TO_NHWC), "b": bias}
        nodes = nhwc_wrap("ConvTranspose", ["x", "w", "b"], True, **attrs)
    else:
        feeds = {"x": x, "w": weight, "b": bias}
        nodes = [node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)]
    op = Op("ConvTranspose", ["x", "w", "b"], ["y"], args={**args, "group": group, "order": layout})
    check(Case(op, feeds, nodes, atol=1e-4))


# -- pooling ---------------------------------------------------------------------------------

POOL_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "k2s2": ({"kernel": 2, "stride": 2}, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "k3s2p1": (
        {"kernel": 3, "stride": 2, "pad": 1},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    ),
    "asym_pads": (
        {"kernel_h": 3, "kernel_w": 2, "pads": (1, 0, 2, 1)},
        {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1]},
    ),
    "legacy_caffe_pooling": (
        {"kernel": 3, "stride": 2, "pad": 1, "legacy_pad": 3},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    ),
    "legacy_caffe_pooling_nopad": (
        {"kernel": 3, "stride": 2, "legacy_pad": 3},
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    ),
}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("variant", sorted(POOL_CASES))
def test_pool_matches_onnx(variant: str, op_type: str, layout: str) -> None:
    """AveragePool excludes padding from the divisor (ONNX ``count_include_pad=0``)."""
    args, attrs = POOL_CASES[variant]
    x = randn(2, 3, 10, 9, seed=9)
    op = Op(op_type, ["x"], ["y"], args={**args, "order": layout})
    if layout == "NHWC":
        nodes = nhwc_wrap(op_type, ["x"], False, **attrs)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node(op_type, ["x"], ["y"], **attrs)]
    check(Case(op, {"x": x}, nodes))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_global_pooling_matches_onnx(op_type: str, layout: str) -> None:
    x = randn(2, 3, 7, 5, seed=10)
    op = Op(op_type, ["x"], ["y"], args={"global_pooling": 1, "order": layout})
    if layout == "NHWC":
        nodes = nhwc_wrap(f"Global{op_type}", ["x"], False)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node(f"Global{op_type}", ["x"], ["y"])]
    check(Case(op, {"x": x}, nodes))


# -- normalisation and activations -------------------------------------------------------------


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_spatial_bn_matches_onnx(layout: str) -> None:
    x = randn(2, 4, 5, 5, seed=11)
    scale, bias, mean = randn(4, seed=12), randn(4, seed=13), randn(4, seed=14)
    var = np.abs(randn(4, seed=15)) + 0.5
    params = {"s": scale, "b": bias, "m": mean, "v": var}
    op = Op(
        "SpatialBN",
        ["x", "s", "b", "m", "v"],
        ["y"],
        args={"is_test": 1, "epsilon": 1e-3, "order": layout},
    )
    if layout == "NHWC":
        nodes = nhwc_wrap("BatchNormalization", ["x", "s", "b", "m", "v"], False, epsilon=1e-3)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)]
    check(Case(op, {"x": x, **params}, nodes))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_matches_onnx(size: int, layout: str) -> None:
    x = randn(2, 7, 4, 3, seed=16)
    attrs = {"size": size, "alpha": 1e-3, "beta": 0.75, "bias": 2.0}
    op = Op("LRN", ["x"], ["y", "scale"], args={**attrs, "order": layout})
    if layout == "NHWC":
        nodes = nhwc_wrap("LRN", ["x"], False, **attrs)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("LRN", ["x"], ["y"], **attrs)]
    check(Case(op, {"x": x}, nodes))


UNARY_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # caffe2 type: (onnx type, caffe2 args, onnx attrs)
    "Relu": ("Relu", {}, {}),
    "Sigmoid": ("Sigmoid", {}, {}),
    "Tanh": ("Tanh", {}, {}),
    "Softplus": ("Softplus", {}, {}),
    "Exp": ("Exp", {}, {}),
    "Log": ("Log", {}, {}),
    "Sqrt": ("Sqrt", {}, {}),
    "Abs": ("Abs", {}, {}),
    "Neg": ("Neg", {}, {}),
    "LeakyRelu": ("LeakyRelu", {"alpha": 0.2}, {"alpha": 0.2}),
    "Dropout": ("Identity", {"is_test": 1, "ratio": 0.3}, {}),
    "Copy": ("Identity", {}, {}),
    "CopyGPUToCPU": ("Identity", {}, {}),
    "Alias": ("Identity", {}, {}),
    "NCHW2NHWC": ("Transpose", {}, {"perm": _TO_NHWC}),
    "NHWC2NCHW": ("Transpose", {}, {"perm": _TO_NCHW}),
    "FlattenToVec": ("Flatten", {}, {"axis": 0}),
}


@pytest.mark.parametrize("op_type", sorted(UNARY_CASES))
def test_unary_matches_onnx(op_type: str) -> None:
    onnx_type, args, attrs = UNARY_CASES[op_type]
    x = randn(2, 3, 4, 5, seed=17)
    if op_type in ("Log", "Sqrt"):
        x = np.abs(x) + 0.1
    nodes = [node(onnx_type, ["x"], ["y"], **attrs)]
    if op_type == "FlattenToVec":
        nodes.append(node("Squeeze", ["y"], ["z"], axes=[0]))
        check(Case(Op(op_type, ["x"], ["y"], args=args), {"x": x}, nodes, opset=11, outputs=["z"]))
        return
    check(Case(Op(op_type, ["x"], ["y"], args=args), {"x": x}, nodes))


def test_dropout_test_mode_mask_is_all_true() -> None:
    x = randn(3, 4)
    y, mask = run_caffe2(Op("Dropout", ["x"], ["y", "mask"], args={"is_test": 1}), {"x": x})
    assert y is x or np.array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all() and mask.shape == x.shape


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared_slope", "per_channel"])
def test_prelu_matches_onnx(shared: bool, layout: str) -> None:
    x = randn(2, 3, 4, 5, seed=18)
    slope = randn(1, seed=19) if shared else randn(3, seed=19)
    op = Op("PRelu", ["x", "slope"], ["y"], args={"order": layout})
    consts = {"shape": np.asarray([1] if shared else [3, 1, 1], np.int64)}
    if layout == "NHWC":
        nodes = [node("Reshape", ["slope", "shape"], ["s4"])]
        nodes += nhwc_wrap("PRelu", ["x", "s4"], False)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("Reshape", ["slope", "shape"], ["s4"]), node("PRelu", ["x", "s4"], ["y"])]
    check(Case(op, {"x": x, "slope": slope}, nodes, consts))


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_softmax_coerces_to_2d_like_onnx_opset11(axis: int) -> None:
    """Caffe2's Softmax normalises over all dims from ``axis`` on (ONNX Softmax before 13)."""
    x = randn(2, 3, 4, 5, seed=20)
    op = Op("Softmax", ["x"], ["y"], args={"axis": axis})
    check(Case(op, {"x": x}, [node("Softmax", ["x"], ["y"], axis=axis)], opset=11))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_instance_norm_matches_onnx(layout: str) -> None:
    x = randn(2, 3, 5, 4, seed=21)
    scale, bias = randn(3, seed=22), randn(3, seed=23)
    op = Op("InstanceNorm", ["x", "s", "b"], ["y"], args={"epsilon": 1e-4, "order": layout})
    if layout == "NHWC":
        nodes = nhwc_wrap("InstanceNormalization", ["x", "s", "b"], False, epsilon=1e-4)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)]
    check(Case(op, {"x": x, "s": scale, "b": bias}, nodes, atol=1e-4))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("scales", [(2.0, 2.0), (1.5, 3.0), (0.5, 1.0)])
def test_resize_nearest_matches_onnx(scales: tuple[float, float], layout: str) -> None:
    """Caffe2 picks ``min(int(y / scale), H - 1)``: ONNX ``asymmetric`` + ``floor``."""
    h_scale, w_scale = scales
    x = randn(1, 2, 6, 4, seed=24)
    op = Op(
        "ResizeNearest",
        ["x"],
        ["y"],
        args={"height_scale": h_scale, "width_scale": w_scale, "order": layout},
    )
    attrs = {
        "mode": "nearest",
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
    }
    consts = {"roi": np.zeros(0, np.float32), "sc": np.asarray([1, 1, *scales], np.float32)}
    if layout == "NHWC":
        nodes = nhwc_wrap("Resize", ["x", "roi", "sc"], False, **attrs)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("Resize", ["x", "roi", "sc"], ["y"], **attrs)]
    check(Case(op, {"x": x}, nodes, consts))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("group", [2, 3])
def test_channel_shuffle_matches_onnx_reshape_transpose(group: int, layout: str) -> None:
    x = randn(2, 6, 3, 2, seed=25)
    op = Op("ChannelShuffle", ["x"], ["y"], args={"group": group, "order": layout})
    consts = {
        "split": np.asarray([2, group, 6 // group, 3, 2], np.int64),
        "back": np.asarray([2, 6, 3, 2], np.int64),
    }
    inner = [
        node("Reshape", ["x_nchw", "split"], ["r"]),
        node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
        node("Reshape", ["t", "back"], ["y_nchw" if layout == "NHWC" else "y"]),
    ]
    if layout == "NHWC":
        nodes = [node("Transpose", ["x"], ["x_nchw"], perm=_TO_NCHW), *inner]
        nodes.append(node("Transpose", ["y_nchw"], ["y"], perm=_TO_NHWC))
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("Identity", ["x"], ["x_nchw"]), *inner]
    check(Case(op, {"x": x}, nodes, consts))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_image_matches_onnx(mode: str, layout: str) -> None:
    x = randn(1, 2, 5, 6, seed=26)
    args = {"pad_t": 1, "pad_l": 2, "pad_b": 3, "pad_r": 0, "mode": mode, "value": 0.5}
    op = Op("PadImage", ["x"], ["y"], args={**args, "order": layout})
    consts = {"pads": np.asarray([0, 0, 1, 2, 0, 0, 3, 0], np.int64)}
    pad_inputs = ["x", "pads"]
    if mode == "constant":
        consts["value"] = np.asarray(0.5, np.float32)
        pad_inputs.append("value")
    if layout == "NHWC":
        nodes = nhwc_wrap("Pad", pad_inputs, False, mode=mode)
        x = x.transpose(_TO_NHWC).copy()
    else:
        nodes = [node("Pad", pad_inputs, ["y"], mode=mode)]
    check(Case(op, {"x": x}, nodes, consts))


def test_pad_image_reflect_past_the_edge_reflects_again_as_caffe2_and_no_further() -> None:
    """Caffe2 reflects at the near edge, then at the far one (``min(h, 2 * H - h - 2)``):
    a pad of 3 on 3 rows reads rows 1, 2, 1; a pad past ``2 * (H - 1)`` reads outside the
    image there, and is refused, by the shape rule too. (ONNX's Pad reflects once: the
    export refuses a pad of the dim or more.)"""
    from graphtools.analysis.shapes import infer_shapes
    from graphtools.errors import InvalidNetError
    from graphtools.ir import Net

    x = randn(1, 1, 3, 5)
    op = Op(
        "PadImage",
        ["x"],
        ["y"],
        args={"pad_t": 3, "pad_b": 0, "pad_l": 0, "pad_r": 0, "mode": "reflect"},
    )
    y = np.asarray(run_caffe2(op, {"x": x})[0])
    np.testing.assert_array_equal(y[:, :, :3], x[:, :, [1, 2, 1]])
    np.testing.assert_array_equal(y[:, :, 3:], x)
    far = op.replace(args={"pad_t": 5, "pad_b": 0, "pad_l": 0, "pad_r": 0, "mode": "reflect"})
    with pytest.raises(ExecutionError, match="reflect pads of 5 need an input dim of at least 4"):
        run_caffe2(far, {"x": x})
    with pytest.raises(InvalidNetError, match="reflect pads of 5 need a spatial dim of at least 4"):
        infer_shapes(Net([far], ["x"], ["y"]), {"x": (1, 1, 3, 5)})


# -- math --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "args"),
    [
        ((4, 6), (5, 6), {}),
        ((2, 3, 4), (5, 12), {}),
        ((2, 3, 4), (5, 4), {"axis": 2}),
        ((3, 6), (5, 2, 3), {"axis_w": 1}),
        ((3, 6), (5, 2, 3), {"axis_w": 1, "axis": -1}),
    ],
)
@pytest.mark.parametrize("transposed", [False, True], ids=["FC", "FCTransposed"])
def test_fc_matches_onnx_gemm(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], args: dict[str, int], transposed: bool
) -> None:
    x = randn(*x_shape, seed=27)
    w = randn(*w_shape, seed=28)
    n = w_shape[0]
    axis = args.get("axis", 1) % len(x_shape)
    w2 = w.reshape(n, -1)
    if transposed:
        w = np.ascontiguousarray(w2.T)
        args = {k: v for k, v in args.items() if k != "axis_w"}
    b = randn(n, seed=29)
    op = Op("FCTransposed" if transposed else "FC", ["x", "w", "b"], ["y"], args=args)
    out_shape = np.asarray([*x_shape[:axis], n], np.int64)
    nodes = [
        node("Flatten", ["x"], ["x2"], axis=axis),
        node("Flatten", ["w"], ["w2"], axis=1),
        node("Gemm", ["x2", "w2", "b"], ["y2"], transB=0 if transposed else 1),
        node("Reshape", ["y2", "shape"], ["y"]),
    ]
    check(Case(op, {"x": x, "w": w, "b": b}, nodes, {"shape": out_shape}, atol=1e-4))


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
def test_matmul_matches_onnx_gemm(trans_a: int, trans_b: int) -> None:
    a = randn(*((4, 3) if trans_a else (3, 4)), seed=30)
    b = randn(*((5, 4) if trans_b else (4, 5)), seed=31)
    op = Op("MatMul", ["a", "b"], ["y"], args={"trans_a": trans_a, "trans_b": trans_b})
    nodes = [node("Gemm", ["a", "b"], ["y"], transA=trans_a, transB=trans_b)]
    check(Case(op, {"a": a, "b": b}, nodes))


def test_matmul_axis_a_axis_b_flatten() -> None:
    a, b = randn(2, 3, 4, seed=32), randn(12, 5, seed=33)
    op = Op("MatMul", ["a", "b"], ["y"], args={"axis_a": 1})
    nodes = [node("Flatten", ["a"], ["a2"], axis=1), node("MatMul", ["a2", "b"], ["y"])]
    check(Case(op, {"a": a, "b": b}, nodes, atol=1e-4))


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "args"),
    [
        ((2, 3, 4), (2, 4, 5), {}),
        ((2, 4, 3), (2, 4, 5), {"trans_a": 1}),
        ((2, 3, 4), (2, 5, 4), {"trans_b": 1}),
        ((2, 1, 3, 4), (5, 4, 2), {"broadcast": 1}),
    ],
)
def test_batch_matmul_matches_onnx(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], args: dict[str, int]
) -> None:
    a, b = randn(*a_shape, seed=34), randn(*b_shape, seed=35)
    nodes, names = [], ["a", "b"]
    for i, flag in enumerate(("trans_a", "trans_b")):
        if args.get(flag):
            rank = len((a_shape, b_shape)[i])
            perm = [*range(rank - 2), rank - 1, rank - 2]
            nodes.append(node("Transpose", [names[i]], [names[i] + "t"], perm=perm))
            names[i] += "t"
    nodes.append(node("MatMul", names, ["y"]))
    check(Case(Op("BatchMatMul", ["a", "b"], ["y"], args=args), {"a": a, "b": b}, nodes))


BROADCAST_CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any], list[int]]] = {
    # name: (A shape, B shape, caffe2 args, shape B takes in ONNX)
    "same_shape": ((2, 3, 4), (2, 3, 4), {}, [2, 3, 4]),
    "numpy_style": ((2, 3, 4), (3, 1), {}, [3, 1]),
    "numpy_style_both": ((2, 1, 4), (3, 1), {}, [3, 1]),
    "legacy_suffix": ((2, 3, 4, 5), (4, 5), {"broadcast": 1}, [1, 1, 4, 5]),
    "legacy_axis1": ((2, 3, 4, 5), (3,), {"broadcast": 1, "axis": 1}, [1, 3, 1, 1]),
    "legacy_axis1_2d": ((2, 3, 4, 5), (3, 4), {"broadcast": 1, "axis": 1}, [1, 3, 4, 1]),
    "legacy_axis0": ((2, 3, 4), (2,), {"broadcast": 1, "axis": 0}, [2, 1, 1]),
    "legacy_ones_in_b": ((2, 3, 4, 5), (1, 4, 1), {"broadcast": 1, "axis": 1}, [1, 1, 4, 1]),
    "legacy_scalar": ((2, 3), (1,), {"broadcast": 1}, [1, 1]),
    "legacy_axis_str": ((2, 3, 4, 5), (3,), {"broadcast": 1, "axis_str": "C"}, [1, 3, 1, 1]),
}


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("variant", sorted(BROADCAST_CASES))
def test_binary_broadcast_matches_onnx(variant: str, op_type: str) -> None:
    a_shape, b_shape, args, onnx_b_shape = BROADCAST_CASES[variant]
    a = randn(*a_shape, seed=36)
    b = randn(*b_shape, seed=37) + (3.0 if op_type == "Div" else 0.0)
    nodes = [node("Reshape", ["b", "bshape"], ["b2"]), node(op_type, ["a", "b2"], ["y"])]
    consts = {"bshape": np.asarray(onnx_b_shape, np.int64)}
    check(Case(Op(op_type, ["a", "b"], ["y"], args=args), {"a": a, "b": b}, nodes, consts))


def test_legacy_broadcast_rejects_mismatch() -> None:
    from graphtools.executor import ExecutionError

    op = Op("Add", ["a", "b"], ["y"], args={"broadcast": 1, "axis": 1})
    with pytest.raises(ExecutionError, match=r"op #0 \(Add\).*a: float32\[2, 3, 4\]"):
        run_caffe2(op, {"a": randn(2, 3, 4), "b": randn(4)})


def test_sum_scale_clip_match_onnx() -> None:
    xs = {f"x{i}": randn(2, 3, seed=40 + i) for i in range(3)}
    check(Case(Op("Sum", list(xs), ["y"]), xs, [node("Sum", list(xs), ["y"])]))
    x = randn(3, 4, seed=44)
    consts = {"s": np.asarray(0.25, np.float32)}
    check(
        Case(
            Op("Scale", ["x"], ["y"], args={"scale": 0.25}),
            {"x": x},
            [node("Mul", ["x", "s"], ["y"])],
            consts,
        )
    )
    consts = {"lo": np.asarray(-0.5, np.float32), "hi": np.asarray(0.7, np.float32)}
    check(
        Case(
            Op("Clip", ["x"], ["y"], args={"min": -0.5, "max": 0.7}),
            {"x": x},
            [node("Clip", ["x", "lo", "hi"], ["y"])],
            consts,
        )
    )


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [(1,), (0, 2), (-1,)])
@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceSum"])
def test_reduce_matches_onnx(op_type: str, axes: tuple[int, ...], keepdims: int) -> None:
    x = randn(2, 3, 4, seed=45)
    op = Op(op_type, ["x"], ["y"], args={"axes": axes, "keepdims": keepdims})
    onnx_node = node(op_type, ["x"], ["y"], axes=list(axes), keepdims=keepdims)
    check(Case(op, {"x": x}, [onnx_node], opset=11))


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_argmax_matches_onnx(axis: int, keepdims: int) -> None:
    x = randn(3, 4, 5, seed=46)
    op = Op("ArgMax", ["x"], ["y"], args={"axis": axis, "keepdims": keepdims})
    check(Case(op, {"x": x}, [node("ArgMax", ["x"], ["y"], axis=axis, keepdims=keepdims)]))


# -- tensor ops --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [{"axis": 1}, {"axis": 0}, {"axis": -1}, {"order": "NHWC"}, {}],
    ids=["axis1", "axis0", "axis-1", "order_nhwc", "default"],
)
def test_concat_matches_onnx_and_reports_split_info(args: dict[str, Any]) -> None:
    axis = args.get("axis", 3 if args.get("order") == "NHWC" else 1)
    shapes = [[2, 3, 4, 5] for _ in range(3)]
    for i, shape in enumerate(shapes):
        shape[axis] = i + 1
    xs = {f"x{i}": randn(*s, seed=50 + i) for i, s in enumerate(shapes)}
    op = Op("Concat", list(xs), ["y", "info"], args=args)
    check(Case(op, xs, [node("Concat", list(xs), ["y"], axis=axis)]))
    _, info = run_caffe2(op, xs)
    assert info.dtype == np.int32 and info.tolist() == [1, 2, 3]


def test_concat_add_axis_matches_onnx_unsqueeze_concat() -> None:
    xs = {f"x{i}": randn(2, 3, seed=53 + i) for i in range(3)}
    nodes = [node("Unsqueeze", [n], [n + "u"], axes=[1]) for n in xs]
    nodes.append(node("Concat", [n + "u" for n in xs], ["y"], axis=1))
    op = Op("Concat", list(xs), ["y", "info"], args={"axis": 1, "add_axis": 1})
    check(Case(op, xs, nodes, opset=11))


@pytest.mark.parametrize(
    ("args", "sizes"),
    [
        ({"axis": 1, "split": (1, 3, 2)}, [1, 3, 2]),
        ({"axis": 1}, [2, 2, 2]),
        ({"order": "NHWC", "split": (4, 2, 0)}, [4, 2, 0]),
    ],
)
def test_split_matches_onnx(args: dict[str, Any], sizes: list[int]) -> None:
    axis = 3 if args.get("order") == "NHWC" else 1
    x = randn(2, 6, 3, 6, seed=56)
    op = Op("Split", ["x"], ["a", "b", "c"], args=args)
    consts = {"split": np.asarray(sizes, np.int64)}
    nodes = [node("Split", ["x", "split"], ["a", "b", "c"], axis=axis)]
    check(Case(op, {"x": x}, nodes, consts, outputs=["a", "b", "c"]))


def test_split_sizes_from_input() -> None:
    x = randn(5, 2)
    a, b = run_caffe2(
        Op("Split", ["x", "s"], ["a", "b"], args={"axis": 0}),
        {"x": x, "s": np.asarray([2, 3], np.int32)},
    )
    np.testing.assert_array_equal(a, x[:2])
    np.testing.assert_array_equal(b, x[2:])


def test_a_split_that_does_not_fit_names_the_axis_and_its_size() -> None:
    """'do not cover dim 1 in 5 parts' read a size as an axis."""
    op = Op("Split", ["x"], list("abcde"), args={"axis": 0, "split": [1] * 5})
    with pytest.raises(ExecutionError, match=r"do not cut axis 0 \(size 1\) into 5 parts"):
        run_caffe2(op, {"x": randn(1, 4)})


@pytest.mark.parametrize(
    ("starts", "ends"),
    [((0, 1), (-1, 3)), ((1, 0, 2), (2, -1, -1)), ((0, -3), (-1, -2)), ((2,), (-1,))],
)
@pytest.mark.parametrize("as_inputs", [False, True], ids=["args", "inputs"])
def test_slice_minus_one_end_rule_matches_onnx(
    starts: tuple[int, ...], ends: tuple[int, ...], as_inputs: bool
) -> None:
    """Caffe2 maps a negative bound ``e`` to ``dim + 1 + e``: -1 is the end of the dim."""
    x = randn(4, 5, 6, seed=57)
    dims = x.shape[: len(starts)]
    onnx_starts = [s + d + 1 if s < 0 else s for s, d in zip(starts, dims, strict=True)]
    onnx_ends = [e + d + 1 if e < 0 else e for e, d in zip(ends, dims, strict=True)]
    consts = {
        "st": np.asarray(onnx_starts, np.int64),
        "en": np.asarray(onnx_ends, np.int64),
        "ax": np.arange(len(starts), dtype=np.int64),
    }
    nodes = [node("Slice", ["x", "st", "en", "ax"], ["y"])]
    feeds = {"x": x}
    if as_inputs:
        feeds |= {"s": np.asarray(starts, np.int32), "e": np.asarray(ends, np.int32)}
        op = Op("Slice", ["x", "s", "e"], ["y"])
        nodes = [node("Identity", ["s"], ["s_"]), node("Identity", ["e"], ["e_"]), *nodes]
        check(Case(op, feeds, nodes, consts))
    else:
        check(
            Case(
                Op("Slice", ["x"], ["y"], args={"starts": starts, "ends": ends}),
                feeds,
                nodes,
                consts,
            )
        )


@pytest.mark.parametrize("shape", [(0, -1), (-1, 4), (2, 0, 2, -1), (24,)])
@pytest.mark.parametrize("as_input", [False, True], ids=["arg", "input"])
def test_reshape_matches_onnx_and_returns_old_shape(shape: tuple[int, ...], as_input: bool) -> None:
    x = randn(2, 3, 4, seed=58)
    consts = {"shape": np.asarray(shape, np.int64)}
    nodes = [node("Reshape", ["x", "shape"], ["y"])]
    if as_input:
        op = Op("Reshape", ["x", "new"], ["y", "old"])
        feeds = {"x": x, "new": np.asarray(shape, np.int64)}
        nodes.insert(0, node("Identity", ["new"], ["unused"]))
    else:
        op = Op("Reshape", ["x"], ["y", "old"], args={"shape": shape})
        feeds = {"x": x}
    check(Case(op, feeds, nodes, consts))
    old = run_caffe2(op, feeds)[1]
    assert old.dtype == np.int64 and old.tolist() == [2, 3, 4]


TENSOR_CASES: dict[str, tuple[Op, Any, dict[str, np.ndarray]]] = {
    "Flatten": (Op("Flatten", ["x"], ["y"]), node("Flatten", ["x"], ["y"]), {}),
    "Flatten_axis2": (
        Op("Flatten", ["x"], ["y"], args={"axis": 2}),
        node("Flatten", ["x"], ["y"], axis=2),
        {},
    ),
    "Transpose_default": (Op("Transpose", ["x"], ["y"]), node("Transpose", ["x"], ["y"]), {}),
    "Transpose_axes": (
        Op("Transpose", ["x"], ["y"], args={"axes": (1, 0, 3, 2)}),
        node("Transpose", ["x"], ["y"], perm=[1, 0, 3, 2]),
        {},
    ),
    "Shape": (Op("Shape", ["x"], ["y"]), node("Shape", ["x"], ["y"]), {}),
    "ExpandDims": (
        Op("ExpandDims", ["x"], ["y"], args={"dims": (0, 5)}),
        node("Unsqueeze", ["x", "axes"], ["y"]),
        {"axes": np.asarray([0, 5], np.int64)},
    ),
    "Cast_int32": (
        Op("Cast", ["x"], ["y"], args={"to": 2}),
        node("Cast", ["x"], ["y"], to=onnx.TensorProto.INT32),
        {},
    ),
    "Cast_double": (
        Op("Cast", ["x"], ["y"], args={"to": 13}),
        node("Cast", ["x"], ["y"], to=onnx.TensorProto.DOUBLE),
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(TENSOR_CASES))
def test_tensor_ops_match_onnx(name: str) -> None:
    op, onnx_node, consts = TENSOR_CASES[name]
    x = randn(2, 3, 4, 5, seed=59) * 3
    check(Case(op, {"x": x}, [onnx_node], consts))


def test_squeeze_matches_onnx() -> None:
    x = randn(2, 1, 3, 1, seed=60)
    op = Op("Squeeze", ["x"], ["y"], args={"dims": (1, 3)})
    nodes = [node("Squeeze", ["x", "axes"], ["y"])]
    check(Case(op, {"x": x}, nodes, {"axes": np.asarray([1, 3], np.int64)}))


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_matches_onnx(axis: int) -> None:
    data = randn(5, 4, 3, seed=61)
    indices = np.asarray([[0, 3], [-1, 2]], np.int64)
    op = Op("Gather", ["d", "i"], ["y"], args={"axis": axis})
    check(Case(op, {"d": data, "i": indices}, [node("Gather", ["d", "i"], ["y"], axis=axis)]))


@pytest.mark.parametrize("op_type", ["Relu", "Sigmoid", "Tanh", "Softmax", "Exp", "Log", "Sqrt"])
def test_float_only_ops_refuse_integer_input(op_type: str) -> None:
    """Caffe2 registers these ops for float tensors only; numpy would compute something else
    on integers (a Softmax of int64 rounds to zeros) and hand it on as if it were right."""
    op = Op(op_type, ["x"], ["y"])
    workspace = Workspace()
    workspace.feed("x", np.array([[1, 2, 3]], dtype=np.int64))
    with pytest.raises(ExecutionError, match=f"Caffe2 runs {op_type} on float tensors only"):
        run_op(op, workspace)
    workspace.feed("x", np.array([[1, 2, 3]], dtype=np.float32))
    run_op(op, workspace)
    assert workspace.fetch("y").dtype == np.float32

"""Whole real nets through the executor: the super-resolution pair against onnxruntime on the
ONNX model it was converted from, the Mask R-CNN2Go int8 pair up to its detection ops, the
crayon style-transfer pair between its mobile pre/deprocess ops, and predict nets shipped
without weights (zoo nets, ShuffleNet, the Faster R-CNN and Mask R-CNN2Go fp32 backbones) with
random parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SHARED_REAL

from graphtools.executor import Int8Tensor, Workspace, run_model, run_net
from graphtools.ir import Model, Net
from graphtools.serde import load_model
from graphtools.testing import random_params

REAL = SHARED_REAL
SUPER_RES = REAL / "hmc-neural_nets_research" / "super_resolution"
INT8 = REAL / "caffe2-models" / "mask_rcnn_2go" / "2018-12" / "int8"
ZOO = REAL / "caffe2-models"

needs_real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real fixtures not found at {REAL}")


def _onnx_opset13_from_legacy(path: Path) -> Any:
    """The opset-2 super-resolution ONNX graph rewritten node by node into opset 13.

    Legacy ``Add(broadcast=1, axis=1)`` becomes a reshape of B to (C, 1, 1); ``Reshape``'s
    ``shape`` attribute becomes an input. Weights come from the ONNX file's initializers, not
    from the Caffe2 init_net, so the check covers the init_net too.
    """
    import onnx

    helper = onnx.helper
    legacy = onnx.load(str(path))
    nodes, consts = [], {}
    for i, n in enumerate(legacy.graph.node):
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Add":
            consts[f"bshape{i}"] = np.asarray([-1, 1, 1], np.int64)
            nodes.append(helper.make_node("Reshape", [n.input[1], f"bshape{i}"], [f"b{i}"]))
            nodes.append(helper.make_node("Add", [n.input[0], f"b{i}"], list(n.output)))
        elif n.op_type == "Reshape":
            consts[f"shape{i}"] = np.asarray(attrs["shape"], np.int64)
            nodes.append(helper.make_node("Reshape", [n.input[0], f"shape{i}"], list(n.output)))
        else:
            nodes.append(helper.make_node(n.op_type, list(n.input), list(n.output), **attrs))
    initializers = list(legacy.graph.initializer)
    initializers += [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    graph = helper.make_graph(
        nodes,
        "super_resolution",
        [legacy.graph.input[0]],
        [onnx.ValueInfoProto(name=legacy.graph.output[0].name)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@needs_real
def test_super_resolution_pair_matches_onnxruntime_on_its_onnx_source() -> None:
    import onnxruntime as ort

    model = load_model(SUPER_RES / "predict_net.pb", SUPER_RES / "init_net.pb")
    x = np.random.default_rng(0).random((1, 1, 224, 224), dtype=np.float32)
    ours = run_model(model, {"1": x})
    assert set(ours) == {"27", "OC2_DUMMY_0", "OC2_DUMMY_1"}
    onnx_model = _onnx_opset13_from_legacy(SUPER_RES / "super_resolution.onnx")
    session = ort.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(["27"], {"1": x})
    assert ours["27"].shape == (1, 1, 672, 672) and ours["27"].dtype == np.float32
    np.testing.assert_allclose(ours["27"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(ours["OC2_DUMMY_0"], [1, 9, 224, 224])
    np.testing.assert_array_equal(ours["OC2_DUMMY_1"], [1, 1, 224, 3, 224, 3])


def _int8_model() -> Model:
    return load_model(INT8 / "model.pb", INT8 / "model_init.pb")


def _run_range(model: Model, start: int, stop: int, feeds: dict[str, Any]) -> Workspace:
    ws = Workspace()
    run_net(model.init_net, ws)
    for name, value in feeds.items():
        ws.feed(name, value)
    ops = model.predict_net.ops[start:stop]
    run_net(Net(ops, name=model.predict_net.name), ws)
    return ws


@needs_real
def test_mask_rcnn_int8_backbone_and_rpn_run_up_to_generate_proposals() -> None:
    model = _int8_model()
    types = [op.type for op in model.predict_net]
    first_detection = types.index("GenerateProposals")
    image = np.random.default_rng(1).uniform(-100, 100, (1, 3, 96, 128)).astype(np.float32)
    runs = [_run_range(model, 0, first_detection, {"data": image}) for _ in range(2)]
    for name, shape in (("rpn_cls_probs", (1, 15, 6, 8)), ("rpn_bbox_pred", (1, 60, 6, 8))):
        first, second = runs[0].fetch(name), runs[1].fetch(name)
        assert first.shape == shape and first.dtype == np.float32
        assert np.isfinite(first).all()
        np.testing.assert_array_equal(first, second)
    probs = runs[0].fetch("rpn_cls_probs")
    assert ((probs > 0) & (probs < 1)).all() and probs.std() > 0
    features = runs[0].fetch("xif3_6_int8")
    assert isinstance(features, Int8Tensor) and features.values.std() > 0


@needs_real
@pytest.mark.parametrize(
    ("feed", "start_type", "outputs"),
    [
        ("roi_features", "Int8Quantize", ("bbox_pred", "cls_prob_int8")),
        ("_[mask]_pool5", "Int8Quantize", ("mask_fcn_probs",)),
    ],
    ids=["bbox_head", "mask_head"],
)
def test_mask_rcnn_int8_heads_run_on_fed_roi_features(
    feed: str, start_type: str, outputs: tuple[str, ...]
) -> None:
    """The heads after RoIAlign, fed with random RoI features: Int8AveragePool, Int8FC,
    Int8Softmax, Int8ConvTranspose and Int8Relu on the real weights."""
    model = _int8_model()
    ops = model.predict_net.ops
    start = next(i for i, op in enumerate(ops) if op.inputs[:1] == (feed,))
    assert ops[start].type == start_type
    stop = start
    while stop < len(ops) and ops[stop].type not in ("BBoxTransform", "RoIAlign"):
        stop += 1
    rois = np.random.default_rng(2).uniform(0, 1, (3, 6, 6, 128)).astype(np.float32)
    ws = _run_range(model, start, stop, {feed: rois})
    for name in outputs:
        value = ws.fetch(name)
        array = value.dequantize() if isinstance(value, Int8Tensor) else value
        assert array.shape[0] == 3 and np.isfinite(array).all()
    if "cls_prob_int8" in outputs:
        probs = ws.fetch("cls_prob_int8").dequantize()
        assert probs.shape == (3, 81)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=0.2)
    if "mask_fcn_probs" in outputs:
        assert ws.fetch("mask_fcn_probs").shape == (3, 81, 24, 24)


@needs_real
@pytest.mark.parametrize(
    ("name", "size"),
    [("squeezenet", 96), ("bvlc_alexnet", 227), ("vgg16", 96), ("inception_v1", 224)],
)
def test_zoo_nets_run_deterministically_with_random_params(name: str, size: int) -> None:
    model = load_model(next((ZOO / name).glob("predict_net.*")))
    data = model.predict_net[0].inputs[0]
    shape = (1, 3, size, size)
    params = random_params(model.predict_net, {data: shape}, seed=0, channels=8)
    assert params == {} or all(v.dtype == np.float32 for v in params.values())
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    out1 = run_model(model, {data: x, **params})
    out2 = run_model(model, {data: x, **params})
    for key, value in out1.items():
        assert np.isfinite(value).all()
        np.testing.assert_array_equal(value, out2[key])


# The detection tail needs real anchors and im_info (and If its nested nets): runs stop before.
DETECTION = frozenset({"GenerateProposals", "RoIAlign", "BBoxTransform", "BoxWithNMSLimit", "If"})


@needs_real
@pytest.mark.parametrize(
    ("relative", "size", "outputs"),
    [
        pytest.param(
            "caffe2-models/detectron/e2e_faster_rcnn_R-50-C4_1x/predict_net.pbtxt",
            64,
            {
                "rpn_cls_probs": (1, 8, 4, 4),
                "rpn_bbox_pred": (1, 8, 4, 4),
                "res4_5_sum": (1, 8, 4, 4),
            },
            id="faster_rcnn_r50_c4",
        ),
        pytest.param(
            "caffe2-models/mask_rcnn_2go/2018-12/fp32/model.pb",
            64,
            {"rpn_cls_probs": (1, 8, 4, 4), "rpn_bbox_pred": (1, 8, 4, 4), "xif3_6": (1, 8, 4, 4)},
            id="mask_rcnn_2go_fp32",
        ),
        pytest.param(
            "caffe2-models/bvlc_googlenet/predict_net.pb", 224, {"prob": (1, 8)}, id="googlenet"
        ),
        pytest.param(
            "caffe2-models/shufflenet/predict_net.pbtxt",
            224,
            {"gpu_0/softmax": (1, 8)},
            id="shufflenet",
        ),
        pytest.param(
            "facebookarchive-caffe2/arm-compute/squeezenet_predict.pb",
            64,
            {"softmaxout": (1, 8, 1, 1)},
            id="arm_squeezenet",
        ),
    ],
)
def test_nets_without_weights_run_up_to_their_first_detection_op(
    relative: str, size: int, outputs: dict[str, tuple[int, ...]]
) -> None:
    """With ``random_params`` weights (8 channels at least), the ops before the first detection
    op run twice to the same finite, non-constant values (softmax rows sum to 1, sigmoids lie
    in (0, 1))."""
    net = load_model(REAL / relative).predict_net
    ops = net.ops
    stop = next((i for i, op in enumerate(ops) if op.type in DETECTION), len(ops))
    prefix = Net(ops[:stop], net.external_inputs, name=net.name)
    data = ops[0].inputs[0]
    shape = (1, 3, size, size)
    params = random_params(prefix, {data: shape}, seed=0, channels=8)
    image = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    runs = []
    for _ in range(2):
        ws = Workspace()
        for name, value in {data: image, **params}.items():
            ws.feed(name, value)
        run_net(prefix, ws)
        runs.append(ws)
    producer = {op.outputs[0]: op.type for op in prefix}
    for name, expected in outputs.items():
        first, second = runs[0].fetch(name), runs[1].fetch(name)
        assert first.shape == expected, (name, first.shape)
        assert first.dtype == np.float32 and np.isfinite(first).all() and first.std() > 0
        np.testing.assert_array_equal(first, second)
        if producer[name] == "Softmax":
            np.testing.assert_allclose(first.sum(axis=1), 1.0, rtol=1e-5)
        elif producer[name] == "Sigmoid":
            assert ((first > 0) & (first < 1)).all()


@needs_real
def test_crayon_style_transfer_runs_between_its_mobile_pre_and_deprocess_ops() -> None:
    """The real crayon weights on a fed preprocessed image (NCHW float, 3 channels): the body
    returns a 3-channel image of the fed size, finite and the same on a second run."""
    folder = ZOO / "style_transfer" / "crayon"
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    ops = model.predict_net.ops
    assert ops[0].type == "PackedInt8BGRANHWCToNCHWCStylizerPreprocess"
    assert ops[-1].type == "BRGNCHWCToPackedInt8BGRAStylizerDeprocess"
    fed, result = ops[0].outputs[0], ops[-1].inputs[0]
    image = np.random.default_rng(5).uniform(-100, 100, (1, 3, 48, 48)).astype(np.float32)
    runs = [_run_range(model, 1, len(ops) - 1, {fed: image}) for _ in range(2)]
    styled = runs[0].fetch(result)
    assert styled.shape == (1, 3, 48, 48) and styled.dtype == np.float32
    assert np.isfinite(styled).all() and styled.std() > 0
    np.testing.assert_array_equal(styled, runs[1].fetch(result))

"""graphtools.analysis.shapes: the walk over a net (versions, unknowns and their reasons,
symbolic dims, value propagation, contradictions), infer_model_shapes, and real nets: every
real classification net is inferred; a few also run, and their final outputs match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphtools.analysis.channels import infer_param_shapes
from graphtools.analysis.shapes import TensorType, infer_model_shapes, infer_shapes
from graphtools.errors import ExecutionError, InvalidNetError
from graphtools.executor import Workspace, run_net
from graphtools.ir import Model, Net, Op
from graphtools.serde import load_model
from graphtools.testing import random_params

F32 = np.dtype(np.float32)


def t(*shape: int | str | None, dtype: type = np.float32) -> TensorType:
    return TensorType(np.dtype(dtype), shape)


def _classifier(order: str = "NCHW") -> Net:
    return Net(
        [
            Op("Conv", ["x", "w", "b"], ["c"], args={"kernel": 3, "pad": 1, "order": order}),
            Op("Relu", ["c"], ["c"]),
            Op("MaxPool", ["c"], ["p"], args={"kernel": 2, "stride": 2, "order": order}),
            Op("FC", ["p", "fw", "fb"], ["fc"]),
            Op("Softmax", ["fc"], ["prob"]),
        ],
        ["x", "w", "b", "fw", "fb"],
        ["prob"],
        name="tiny",
    )


PARAMS = {"w": (16, 3, 3, 3), "b": (16,), "fw": (10, 16 * 4 * 4), "fb": (10,)}


def test_a_symbolic_batch_goes_through_conv_pool_and_fc() -> None:
    info = infer_shapes(_classifier(), {"x": t("batch", 3, 8, 8)}, params=PARAMS)
    assert info.final("c") == t("batch", 16, 8, 8)
    assert info.final("p") == t("batch", 16, 4, 4)
    assert info.final("prob") == t("batch", 10)
    assert info.unknown == {}
    nhwc = {**PARAMS, "w": (16, 3, 3, 3)}
    info = infer_shapes(_classifier("NHWC"), {"x": t("n", 8, 8, 3)}, params=nhwc)
    assert info.final("p") == t("n", 4, 4, 16)


def test_symbolic_spatial_dims_survive_only_windows_that_keep_sizes() -> None:
    ops = [
        Op("Conv", ["x", "w1"], ["same"], args={"kernel": 3, "pad": 1}),
        Op("Conv", ["x", "w1"], ["legacy_same"], args={"kernel": 3, "legacy_pad": 2}),
        Op("Conv", ["x", "w1"], ["strided"], args={"kernel": 3, "pad": 1, "stride": 2}),
        Op("AveragePool", ["x"], ["global"], args={"global_pooling": 1}),
        Op("PadImage", ["x"], ["padded"], args={"pad": 1}),
        Op("ConvTranspose", ["x", "wt"], ["up"], args={"kernel": 3, "pad": 1}),
    ]
    info = infer_shapes(
        Net(ops), {"x": t("n", 3, "h", "w")}, params={"w1": (4, 3, 3, 3), "wt": (3, 5, 3, 3)}
    )
    assert info.final("same") == t("n", 4, "h", "w")
    assert info.final("legacy_same") == t("n", 4, "h", "w")
    assert info.final("strided") == t("n", 4, None, None)
    assert "no int or lone symbol" in (info.why("strided") or "")
    assert info.final("global") == t("n", 3, 1, 1)
    assert info.final("padded") == t("n", 3, None, None)
    assert info.final("up") == t("n", 5, "h", "w")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ((0, -1), ("batch", 512)),
        ((-1, 512), ("batch", 512)),
        ((-1,), (None,)),
        ((2, -1), (2, None)),
        ((0, 0, -1), ("batch", 512, 1)),
    ],
)
def test_reshape_minus_one_against_a_symbolic_dim(
    target: tuple[int, ...], expected: tuple[int | str | None, ...]
) -> None:
    net = Net([Op("Reshape", ["x"], ["y", "old"], args={"shape": target})])
    info = infer_shapes(net, {"x": t("batch", 512, 1, 1)})
    assert info.final("y") == TensorType(F32, expected)
    assert info.final("old") == t(4, dtype=np.int64)


def test_a_shape_computed_in_the_net_keeps_the_batch_symbol() -> None:
    """ONNX's ``x.view(x.size(0), -1)``: Shape -> Gather -> ExpandDims -> Concat -> Reshape."""
    ops = [
        Op("GivenTensorInt64Fill", [], ["zero"], args={"shape": (), "values": [0]}),
        Op("GivenTensorInt64Fill", [], ["rest"], args={"shape": (1,), "values": [-1]}),
        Op("Shape", ["x"], ["shape"]),
        Op("Gather", ["shape", "zero"], ["n"], args={"axis": 0}),
        Op("ExpandDims", ["n"], ["n1"], args={"dims": [0]}),
        Op("Concat", ["n1", "rest"], ["target", "info"], args={"axis": 0}),
        Op("Reshape", ["x", "target"], ["y", "old"]),
    ]
    info = infer_shapes(Net(ops), {"x": t("batch", 8, 2, 2)})
    assert info.values[("target", 1)] == ("batch", -1)
    assert info.final("y") == t("batch", 32)
    feeds = {"x": t("batch", 8, 2, 2), "zero": t(dtype=np.int64)}
    fed = infer_shapes(Net(ops[1:]), feeds)
    assert fed.final("y") == TensorType(F32, (None, None))
    assert "data-dependent" in (fed.why("y") or "")


def test_unknown_types_propagate_with_the_reason() -> None:
    ops = [
        Op("Relu", ["x"], ["a"]),
        Op("MysteryOp", ["a"], ["b"]),
        Op("Relu", ["b"], ["c"]),
        Op("Add", ["c", "never_given"], ["d"]),
    ]
    info = infer_shapes(Net(ops, ["x"]), {"x": (2, 3)})
    assert info.final("a") == t(2, 3)
    assert info.final("b") == TensorType()
    assert info.why("b") == "op #1 (MysteryOp): no shape rule for the op type"
    assert info.final("c") == TensorType()
    assert info.why("c") == "op #2 (Relu) reads b@1, whose type is unknown"
    assert "'never_given' is read before any op writes it" in info.unknown[("never_given", 0)]
    assert info.why("a") is None
    with pytest.raises(KeyError, match="neither read nor written"):
        info.final("nowhere")


@pytest.mark.parametrize(
    ("op", "inputs", "words"),
    [
        (Op("ATen", ["x"], ["y"], args={"operator": "flip"}), {"x": (2,)}, "'flip'"),
        (
            Op("ATen", ["x", "g"], ["y"], args={"operator": "grid_sampler", "padding_mode": 2}),
            {"x": (1, 1, 2, 2), "g": (1, 3, 3, 2)},
            "padding_mode 2",
        ),
        (
            Op("LearningRate", ["it"], ["y"], args={"policy": "poly"}),
            {"it": TensorType(np.int64, (1,))},
            "policy 'poly'",
        ),
        (
            Op("SoftmaxWithLoss", ["x", "l"], ["p", "y"], args={"spatial": 1}),
            {"x": (1, 3, 2, 2), "l": TensorType(np.int32, (1, 2, 2))},
            "spatial=1",
        ),
        (
            Op("BBoxTransform", ["r", "d", "i"], ["y"], args={"rotated": 1}),
            {"r": (2, 6), "d": (2, 5), "i": (1, 3)},
            "rotated boxes",
        ),
    ],
)
def test_variants_the_executor_refuses_are_unknown_with_its_reason(
    op: Op, inputs: dict[str, Any], words: str
) -> None:
    info = infer_shapes(Net([op]), inputs)
    assert info.final("y") == TensorType()
    assert words in str(info.why("y")) and "op #0" in str(info.why("y"))


_RNG = np.random.default_rng(3)


def _values(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    return _RNG.integers(0, 3, shape).astype(dtype)


@pytest.mark.parametrize(
    ("op", "feeds"),
    [
        (Op("And", ["a", "b"], ["y"]), {"a": _values((2,), bool), "b": _values((2,))}),
        (Op("LT", ["a", "b"], ["y"]), {"a": _values((2, 3)), "b": _values((4,))}),
        (Op("RoIAlign", ["x", "r"], ["y"]), {"x": _values((1, 2, 4, 4)), "r": _values((2, 7))}),
        (
            Op("BBoxTransform", ["r", "d", "i"], ["y"]),
            {"r": _values((2, 5)), "d": _values((3, 4)), "i": _values((1, 3))},
        ),
        (
            Op("LengthsSum", ["d", "l"], ["y"]),
            {"d": _values((3, 2)), "l": _values((2,))},
        ),
        (
            Op("SparseLengthsSumFused8BitRowwise", ["d", "i", "l"], ["y"]),
            {"d": _values((4, 6), np.uint8), "i": _values((2,), np.int64), "l": _values((1,))},
        ),
        (
            Op("SparseToDenseMask", ["i", "v", "d"], ["y"], args={"mask": [1, 2]}),
            {"i": _values((3,), np.int64), "v": _values((3, 2)), "d": _values((3,))},
        ),
        (
            Op("SquaredL2Distance", ["x", "z"], ["y"]),
            {"x": _values((2, 3)), "z": _values((3, 2))},
        ),
        (
            Op("WeightedSum", ["x", "w", "z"], ["y"]),
            {"x": _values((2,)), "w": _values((1,)), "z": _values((2,))},
        ),
        (
            Op("FCGradient", ["x", "w", "dy"], ["dw", "db", "y"]),
            {"x": _values((2, 3)), "w": _values((4, 5)), "dy": _values((2, 4))},
        ),
        (
            Op("LSTMUnit", ["h", "c", "g", "t"], ["y", "c2"]),
            {
                "h": _values((1, 2, 3)),
                "c": _values((1, 2, 3)),
                "g": _values((1, 2, 8)),
                "t": _values((1,), np.int32),
            },
        ),
        (Op("HasScope", ["w"], ["y"]), {"w": _values((1,))}),
        (
            Op("Reshape", ["x", "s"], ["y", "old"]),
            {"x": _values((2, 3)), "s": np.array([[2, 3]], np.int64)},
        ),
        (
            Op("If", ["c", "x"], ["y"], args={"then_net": Net([Op("Relu", ["x"], ["y"])])}),
            {"c": _values((2,), bool), "x": _values((2,))},
        ),
    ],
)
def test_new_rules_raise_where_their_kernels_fail(op: Op, feeds: dict[str, Any]) -> None:
    """A contradiction the rule reports is one the kernel fails on too."""
    net = Net([op], list(feeds))
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed(name, value)
    with pytest.raises(ExecutionError):
        run_net(net, ws)
    with pytest.raises(InvalidNetError, match=rf"op #0 \({op.type}\)"):
        infer_shapes(net, {n: TensorType(v.dtype, v.shape) for n, v in feeds.items()})


def test_versions_follow_the_ssa_view_and_inputs_win_over_params() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["x"]),
            Op("Reshape", ["x"], ["x", "old"], args={"shape": [-1]}),
            Op("Sum", ["x", "x"], ["x"]),
        ],
        ["x"],
        ["x"],
    )
    info = infer_shapes(net, {"x": (2, 3)}, params={"x": (7,)})
    ssa = net.ssa()
    expected = {b for i in range(len(net)) for b in (*ssa.inputs_of(i), *ssa.outputs_of(i))}
    assert set(info.types) == expected
    assert info.types[("x", 1)] == t(2, 3) and info.types[("x", 2)] == t(6)
    assert info.final("x") == t(6) and info.versions["x"] == 3


def test_contradictions_name_the_op_and_the_blobs() -> None:
    fc = Net([Op("Relu", ["x"], ["r"]), Op("FC", ["r", "w", "b"], ["y"])], name="head")
    with pytest.raises(InvalidNetError, match=r"op #1 \(FC\) in net 'head'.*6 features") as info:
        infer_shapes(fc, {"x": ("batch", 2, 3)}, params={"w": (4, 5), "b": (4,)})
    assert "r@1: float32[batch, 2, 3]" in str(info.value) and "w@0: float32[4, 5]" in str(
        info.value
    )
    concat = Net([Op("Concat", ["a", "b"], ["y", "split"], args={"axis": 1})])
    with pytest.raises(InvalidNetError, match=r"op #0 \(Concat\): non-axis dim 2"):
        infer_shapes(concat, {"a": (1, 2, 3), "b": (1, 4, 5)})
    conv = Net([Op("Conv", ["x", "w"], ["y"], args={"kernel": 3})])
    with pytest.raises(InvalidNetError, match="4 input channels per group"):
        infer_shapes(conv, {"x": (1, 3, 8, 8)}, params={"w": (2, 4, 3, 3)})
    with pytest.raises(InvalidNetError, match="larger than the padded input"):
        infer_shapes(conv, {"x": (1, 3, 2, 2)}, params={"w": (2, 3, 3, 3)})
    summed = Net([Op("Sum", ["a", "b"], ["y"])])
    with pytest.raises(InvalidNetError, match=r"op #0 \(Sum\)"):
        infer_shapes(summed, {"a": ("n", 3), "b": ("n", 4)})
    bias = Net([Op("Add", ["a", "b"], ["y"], args={"broadcast": 1, "axis": 1})])
    with pytest.raises(InvalidNetError, match=r"B \[4\] against A"):
        infer_shapes(bias, {"a": (1, 3, 4, 4), "b": (4,)})
    int8 = Net([Op("Int8Relu", ["x"], ["y"])])
    with pytest.raises(InvalidNetError, match="must be an Int8 blob"):
        infer_shapes(int8, {"x": (2, 2)})


def test_symbols_and_unknowns_never_raise_where_values_could_agree() -> None:
    net = Net([Op("Sum", ["a", "b"], ["y"]), Op("Add", ["y", "c"], ["z"])])
    info = infer_shapes(net, {"a": ("n", 3), "b": (5, None), "c": ("m", 3)})
    assert info.final("y") == t(5, 3)
    assert info.final("z") == t(5, 3)


def test_model_params_come_from_the_init_net_and_given_inputs_win() -> None:
    init = Net(
        [
            Op("ConstantFill", [], ["data"], args={"shape": [1], "value": 0.0}),
            Op("GivenTensorFill", [], ["w"], args={"shape": [4, 6], "values": [0.5] * 24}),
            Op("XavierFill", [], ["b"], args={"shape": [4]}),
            Op("GivenTensorIntFill", [], ["table"], args={"values": [1, 2, 3]}),
        ]
    )
    predict = Net([Op("FC", ["data", "w", "b"], ["y"])], ["data", "w", "b"], ["y"])
    info = infer_model_shapes(Model(predict, init), {"data": ("batch", 6)})
    assert info.final("y") == t("batch", 4)
    assert infer_model_shapes(Model(predict), {"data": (2, 6)}).final("y") == TensorType(
        F32, (2, None)
    )
    broken = Net([Op("GivenTensorFill", [], ["w"], args={"shape": [4, 6], "values": [0.5]})])
    with pytest.raises(InvalidNetError, match="1 values do not fill shape") as error:
        infer_model_shapes(Model(predict, broken), {"data": (2, 6)})
    assert "in the init_net" in error.value.__notes__


# -- real nets -------------------------------------------------------------------------------

# Classification nets shipped with their init_net: (folder, predict, init, input (C, H, W)).
PAIRS = [
    ("Miyuan2018-TrafficLight-Test", "predict_net.pb", "init_net.pb", (3, 64, 64)),
    ("arakhmat-perception", "predict_net.pb", "init_net.pb", (9, 124, 124)),
    ("BIGBALLON-Caffe2-Tutorial", "predict_net.pb", "init_net.pb", (3, 32, 32)),
    ("HungMingWu-pytorch_caffe2_cpp_binding", "predict_net.pb", "init_net.pb", (1, 28, 28)),
    ("i-lovelife-facial-detection", "predict_net.pb", "init_net.pb", (3, 12, 12)),
    *(
        (f"jolibrain-deepdetect/{name}", "predict_net.pbtxt", "init_net.pbtxt", size)
        for name, size in [
            ("alexnet", (3, 227, 227)),
            ("googlenet", (3, 224, 224)),
            ("inception_bn", (3, 224, 224)),
            ("lenet", (1, 28, 28)),
            ("resnet_18", (3, 224, 224)),
            ("resnet_50", (3, 224, 224)),
            ("vgg_16", (3, 224, 224)),
            ("vgg_19", (3, 224, 224)),
            ("wrn_50", (3, 224, 224)),
            ("xception", (3, 299, 299)),
        ]
    ),
]
# The pairs small enough to run in a test.
RUN_PAIRS = {
    "Miyuan2018-TrafficLight-Test",
    "arakhmat-perception",
    "BIGBALLON-Caffe2-Tutorial",
    "HungMingWu-pytorch_caffe2_cpp_binding",
    "i-lovelife-facial-detection",
    "jolibrain-deepdetect/lenet",
}
# Classification predict nets without weights: (path, classes fixed by a hard-coded Reshape,
# which also fixes the batch to 1 in the torch-jit exports).
WEIGHTLESS = [
    *(
        (f"caffe2-models/{path}", None)
        for path in (
            "squeezenet/predict_net.pb",
            "bvlc_googlenet/predict_net.pb",
            "bvlc_alexnet/predict_net.pbtxt",
            "densenet121/predict_net.pbtxt",
            "inception_v1/predict_net.pbtxt",
            "inception_v2/predict_net.pbtxt",
            "resnet50/predict_net.pbtxt",
            "vgg19/predict_net.pbtxt",
            "zfnet512/predict_net.pbtxt",
            "shufflenet/predict_net.pbtxt",
            "vgg16/predict_net.pbtxt",
        )
    ),
    ("facebookarchive-caffe2/arm-compute/squeezenet_predict.pb", None),
    ("facebookarchive-AICamera/squeeze_predict_net.pb", 1000),
    ("facebookarchive-AICamera/history/squeeze_predict_net_5301.pb", 1000),
    ("facebookarchive-AICamera/history/squeeze_predict_net_6185.pb", None),
    ("facebookarchive-AICamera/history/shufflenet_predict.pb", None),
    ("Richardych-Android_caffe2_classification/squeeze_predict_net.pb", None),
    ("hmc-neural_nets_research/squeeze_predict_net.pb", 1000),
    ("tokisamu-PytorchAICamera/squeeze_predict_net.pb", 6),
    ("KleinYuan-Caffe2-iOS/tinyPredict.pb", None),
    ("Jokeren-caffe2-tvm-example/mobilenet_pred_net.pb", None),
    ("Jokeren-caffe2-tvm-example/mobilenetv1_pred_net.pb", None),
    ("Jokeren-caffe2-tvm-example/resnet18v1_pred_net.pb", None),
]
RUN_WEIGHTLESS = {
    "KleinYuan-Caffe2-iOS/tinyPredict.pb",
    "tokisamu-PytorchAICamera/squeeze_predict_net.pb",
}


def _final_output(net: Net) -> str:
    return net.external_outputs[0] if net.external_outputs else net[-1].outputs[0]


def _run(net: Net, init: Net | None, feeds: dict[str, np.ndarray], output: str) -> np.ndarray:
    ws = Workspace()
    if init is not None:
        run_net(init, ws)
    for name, value in feeds.items():
        ws.feed(name, value)
    run_net(net, ws)
    return np.asarray(ws.fetch(output))


@pytest.mark.parametrize(("folder", "predict", "init", "size"), PAIRS, ids=[p[0] for p in PAIRS])
def test_real_pairs_infer_their_final_output(
    real_fixtures: Path, folder: str, predict: str, init: str, size: tuple[int, ...]
) -> None:
    """Every pair infers with a symbolic batch; the small ones also run, on batch 2."""
    model = load_model(real_fixtures / folder / predict, real_fixtures / folder / init)
    net = model.predict_net
    data, output = net[0].inputs[0], _final_output(net)
    symbolic = infer_model_shapes(model, {data: ("batch", *size)}).final(output)
    assert symbolic.complete and symbolic.shape is not None and symbolic.shape[0] == "batch"
    if folder not in RUN_PAIRS:
        return
    x = np.random.default_rng(0).standard_normal((2, *size)).astype(np.float32)
    value = _run(net, model.init_net, {data: x}, output)
    concrete = infer_model_shapes(model, {data: (2, *size)}).final(output)
    assert concrete == TensorType(value.dtype, value.shape)
    assert symbolic.shape[1:] == value.shape[1:]


@pytest.mark.parametrize(("path", "classes"), WEIGHTLESS, ids=[w[0] for w in WEIGHTLESS])
def test_real_weightless_nets_infer_with_derived_param_shapes(
    real_fixtures: Path, path: str, classes: int | None
) -> None:
    """Parameter shapes come from ``infer_param_shapes`` (a hard-coded Reshape to the real
    class count gets the classifier conv's weight); the small nets also run on
    ``random_params`` weights, whose shapes must be the derived ones."""
    net = load_model(real_fixtures / path).predict_net
    data, output = net[0].inputs[0], _final_output(net)
    size = (1, 3, 64, 64) if path in RUN_WEIGHTLESS else (1, 3, 224, 224)
    forced = {}
    if classes is not None:
        classifier = [op for op in net if op.type == "Conv"][-1]
        forced = {classifier.inputs[1]: (classes, 64, 1, 1)}
    shapes = infer_param_shapes(net, {data: size}, channels=8, param_shapes=forced)
    info = infer_shapes(net, {data: ("batch", *size[1:])}, params=shapes)
    final = info.final(output)
    assert final.complete and final.shape is not None
    if classes is not None:
        assert final.shape[1] == classes
    fixed_batch = classes is not None and "tokisamu" not in path
    assert final.shape[0] == (1 if fixed_batch else "batch")
    if path not in RUN_WEIGHTLESS:
        return
    params = random_params(net, {data: size}, seed=0, channels=8, param_shapes=forced)
    assert {name: value.shape for name, value in params.items()} == shapes
    x = np.random.default_rng(1).standard_normal(size).astype(np.float32)
    value = _run(net, None, {data: x, **params}, output)
    assert infer_shapes(net, {data: size}, params=shapes).final(output) == TensorType(
        value.dtype, value.shape
    )

"""The ops of single real exports in ONNX (``export_aten``, ``export_image``, and Slice/Concat
forms of ``export_tensor``): each exported, checked, run by onnxruntime against our executor
blob by blob and imported back; the variants without an ONNX form refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx import export_onnx

RNG = np.random.default_rng(0)


def _aten(inputs: list[str], outputs: list[str], **args: Any) -> Op:
    return Op("ATen", inputs, outputs, args=args)


@pytest.mark.parametrize(
    ("op", "feeds"),
    [
        (_aten(["x"], ["y"], operator="unsqueeze", dim=1), {"x": RNG.random((2, 3))}),
        (
            _aten(["x"], ["v", "i"], operator="max", dim=1, keepdim=0),
            {"x": np.float32([[1, 3, 3], [2, 0, 2]])},  # ties: the first maximum
        ),
        (_aten(["x"], ["v", "i"], operator="max", dim=0, keepdim=1), {"x": RNG.random((3, 4))}),
        (
            _aten(["x", "g"], ["y"], operator="grid_sampler", padding_mode=0),
            {"x": RNG.random((1, 2, 5, 6)), "g": RNG.uniform(-1.2, 1.2, (1, 3, 4, 2))},
        ),
        (
            _aten(
                ["x", "g"],
                ["y"],
                operator="grid_sampler",
                interpolation_mode=0,
                padding_mode=1,
                align_corners=0,
            ),
            {"x": RNG.random((2, 1, 4, 4)), "g": RNG.uniform(-1.2, 1.2, (2, 2, 3, 2))},
        ),
    ],
    ids=["unsqueeze", "max-ties", "max-keepdim", "grid-zeros", "grid-border"],
)
def test_aten_functions(op: Op, feeds: dict[str, np.ndarray]) -> None:
    feeds = {k: np.asarray(v, np.float32) for k, v in feeds.items()}
    round_trip(pair([op], list(feeds), list(op.outputs), {}), feeds, opset=17)


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (_aten(["x"], ["y"], operator="flip"), "ATen operator 'flip'"),
        (_aten(["x"], ["v", "i"], operator="max"), "ATen max without 'dim'"),
        (
            _aten(["x", "g"], ["y"], operator="grid_sampler", interpolation_mode=1),
            "other than bilinear",
        ),
    ],
)
def test_aten_variants_without_a_form_are_refused(op: Op, message: str) -> None:
    model = pair([op], list(op.inputs), list(op.outputs), {})
    value_info = {name: (1, [1, 2, 3, 2]) for name in op.inputs}
    with pytest.raises(UnsupportedOpError, match=rf"op #0 \(ATen\).*{message}"):
        export_onnx(model, value_info=value_info)


def test_yolo_head() -> None:
    """Caffe2-yolo-v3's head (its real arguments) on a 4x4 map: every output of the op."""
    outputs = ["y", "tx", "ty", "tw", "th", "conf", "prob", "scratch"]
    args = {
        "numclass": 3,
        "anchors": [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119, 116, 90, 156, 198, 373, 326],
        "conf_thresh": 1.0,
        "anchor_mask": [3, 4, 5],
        "stride": 16,
        "numanchors": 9,
    }
    op = Op("Yolo", ["x"], outputs, args=args)
    x = RNG.standard_normal((1, 3 * (5 + 3), 4, 4)).astype(np.float32)
    round_trip(pair([op], ["x"], outputs, {}), {"x": x})


def test_yolo_training_is_refused() -> None:
    op = Op("Yolo", ["x"], [f"o{i}" for i in range(8)], args={"is_train": 1})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Yolo\).*is_train=1"):
        export_onnx(pair([op], ["x"], ["o0"], {}), value_info={"x": (1, [1, 255, 4, 4])})


def test_stylizer_pre_and_deprocess() -> None:
    """The uint8 BGRA image to floats with the executor's noise, and back (truncated pixels
    within one unit: ``graphtools.onnx.compare``)."""
    ops = [
        Op(
            "PackedInt8BGRANHWCToNCHWCStylizerPreprocess",
            ["image", "mean"],
            ["x"],
            args={"noise_size": 37, "noise_std": 5.0},
        ),
        Op("Scale", ["x"], ["scaled"], args={"scale": 1.5}),
        Op("BRGNCHWCToPackedInt8BGRAStylizerDeprocess", ["scaled", "mean"], ["out"]),
    ]
    image = RNG.integers(0, 256, (1, 6, 5, 4)).astype(np.uint8)
    mean = np.float32([100.0, 110.0, 120.0])
    round_trip(pair(ops, ["image"], ["x", "out"], {"mean": mean}), {"image": image})


def test_slice_with_bound_inputs() -> None:
    """Starts and ends as tensors (negative ends counted from past the last element)."""
    op = Op("Slice", ["x", "starts", "ends"], ["y"])
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    for starts, ends in (([0, 1, 2], [-1, -2, 5]), ([1, 0], [3, -1])):
        feeds = {"x": x, "starts": np.int32(starts), "ends": np.int64(ends)}
        round_trip(pair([op], list(feeds), ["y"], {}), feeds)


@pytest.mark.parametrize("args", [{"axis": 1}, {"axis": -1}, {"axis": 1, "add_axis": 1}])
def test_concat_split_info(args: dict[str, Any]) -> None:
    op = Op("Concat", ["a", "b"], ["y", "split"], args=args)
    feeds = {
        "a": RNG.standard_normal((2, 3, 4)).astype(np.float32),
        "b": RNG.standard_normal((2, 3 if args.get("add_axis") else 5, 4)).astype(np.float32),
    }
    if args["axis"] == -1:
        feeds["b"] = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    round_trip(pair([op], list(feeds), ["y", "split"], {}), feeds)


def test_pad_image_reflect_exports_while_onnx_reflects_once() -> None:
    """Caffe2 reflects again at the far edge, ONNX's Pad only once: a reflect pad of the dim
    or more was exported into a model onnxruntime refused to run; it is refused, and one
    below the dim exports and computes the same."""
    op = Op(
        "PadImage",
        ["x"],
        ["y"],
        args={"pad_t": 2, "pad_l": 1, "pad_b": 0, "pad_r": 3, "mode": "reflect"},
    )
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 5)).astype(np.float32)
    round_trip(pair([op], ["x"], ["y"], {}), {"x": x})
    with pytest.raises(UnsupportedOpError, match=r"reflect pads of 3 on a spatial dim of 3"):
        export_onnx(pair([op], ["x"], ["y"], {}), value_info={"x": (1, [1, 2, 3, 3])})


def test_the_stylizers_noise_survives_the_exports_renaming(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crayon style transfer writes its stylizer's output in place, so the export's SSA
    names rename it: the noise, seeded by that name, was drawn anew (pixels off by up to 99
    of 255 from the pair run as it is). Caffe2 draws it once per workspace, whatever op
    does: seeded by its cache blob, the pair, its renamed copy and the export agree."""
    from conftest import run_cli

    from graphtools.executor import run_model
    from graphtools.onnx import run_onnxruntime
    from graphtools.serde import load_model

    folder = real_fixtures / "caffe2-models/style_transfer/crayon"
    out = tmp_path / "crayon.onnx"
    shapes = "data_int8_bgra=1x64x64x4"
    code, _, err = run_cli(capsys, "export-onnx", str(folder), "--shapes", shapes, "-o", str(out))
    assert code == 0, err
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    image = np.random.default_rng(4).integers(0, 256, (1, 64, 64, 4), dtype=np.uint8)
    (output,) = model.predict_net.external_outputs
    expected = run_model(model, {"data_int8_bgra": image})[output]
    (actual,) = run_onnxruntime(onnx.load(str(out)), {"data_int8_bgra": image}).values()
    assert actual.dtype == np.uint8 and actual.shape == expected.shape
    # uint8 pixels truncated from float sums that differ in the last bits: at most one step
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1

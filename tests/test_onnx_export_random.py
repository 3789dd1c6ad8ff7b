"""Random fills in ONNX: onnxruntime's draws and the executor's compared by distribution (and
a wrong distribution caught), imported back to the same fills; training-mode ops refused by
name unless exported with ``test_mode``."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.executor import run_model
from graphtools.ir import Op
from graphtools.onnx import compare_with_onnxruntime, export_onnx, import_onnx

X = np.zeros((30, 40, 5), np.float32)

CASES = {
    "GaussianFill-shape": (
        Op("GaussianFill", [], ["y"], args={"shape": [40, 50], "mean": 1.0, "std": 2.0}),
        {},
        "RandomNormal",
    ),
    "UniformFill-shape": (
        Op("UniformFill", [], ["y"], args={"shape": [40, 50], "min": -3.0, "max": 5.0}),
        {},
        "RandomUniform",
    ),
    "GaussianFill-like": (
        Op("GaussianFill", ["x"], ["y"], args={"mean": 1.0, "std": 2.0}),
        {"x": X},
        "RandomNormalLike",
    ),
    "UniformFill-like": (
        Op("UniformFill", ["x"], ["y"], args={"min": 1.0, "max": 2.0}),
        {"x": X},
        "RandomUniformLike",
    ),
    "GaussianFill-input-as-shape": (
        Op("GaussianFill", ["x"], ["y"], args={"input_as_shape": 1}),
        {"x": np.int64([30, 40, 7])},
        "GaussianFill",
    ),
    "UniformFill-extra-shape": (
        Op("UniformFill", ["x"], ["y"], args={"extra_shape": [2, 3], "max": 10.0}),
        {"x": X},
        "UniformFill",
    ),
    "XavierFill": (Op("XavierFill", [], ["y"], args={"shape": [64, 3, 3, 3]}), {}, "XavierFill"),
    "MSRAFill": (Op("MSRAFill", [], ["y"], args={"shape": [64, 32, 3, 3]}), {}, "MSRAFill"),
    "UniformIntFill": (
        Op("UniformIntFill", [], ["y"], args={"shape": [64, 32], "min": 2, "max": 9}),
        {},
        "UniformIntFill",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_random_fill_round_trips_by_distribution(case: str) -> None:
    op, feeds, onnx_type = CASES[case]
    model = pair([op], list(feeds), ["y"], {})
    exported = round_trip(model, feeds)  # imported back: the same fill, the same seeded draws
    assert [n.op_type for n in exported.graph.node] == [onnx_type]
    (diff,) = compare_with_onnxruntime(exported, model, feeds)
    assert diff.ok and diff.reason.startswith(f"random ({op.type}"), diff
    (back,) = import_onnx(exported).predict_net
    assert back.type == op.type


def test_a_draw_from_another_distribution_differs() -> None:
    model = pair(
        [Op("GaussianFill", [], ["y"], args={"shape": [50, 40], "std": 2.0})], [], ["y"], {}
    )
    other = pair(
        [Op("GaussianFill", [], ["y"], args={"shape": [50, 40], "std": 3.0})], [], ["y"], {}
    )
    (diff,) = compare_with_onnxruntime(export_onnx(other), model, {})
    assert not diff.ok and "std" in diff.reason


def test_training_dropout_is_refused_by_name_unless_test_mode() -> None:
    model = pair([Op("Dropout", ["x"], ["y", "mask"], args={"ratio": 0.3})], ["x"], ["y"], {})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Dropout\).*training mode.*--test-mode"):
        export_onnx(model, value_info={"x": (1, [2, 3])})
    exported = export_onnx(model, value_info={"x": (1, [2, 3])}, test_mode=True)
    assert [n.op_type for n in exported.graph.node] == ["Dropout"]
    assert model.predict_net[0].arg("is_test") is None  # the caller's pair is not changed
    x = np.ones((2, 3), np.float32)
    inference = pair([Op("Dropout", ["x"], ["y"], args={"is_test": 1})], ["x"], ["y"], {})
    assert compare_with_onnxruntime(exported, inference, {"x": x})[0].ok
    assert np.array_equal(run_model(import_onnx(exported), {"x": x})["y"], x)


def test_training_spatial_bn_is_refused_by_name() -> None:
    op = Op("SpatialBN", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])
    model = pair([op], ["x", "s", "b", "m", "v"], ["y"], {})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(SpatialBN\).*test_mode=True"):
        export_onnx(model, value_info={n: (1, [2, 3, 4, 4] if n == "x" else [3]) for n in "xsbmv"})

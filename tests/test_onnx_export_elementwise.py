"""Element-wise Caffe2 ops in ONNX: direct maps and ``caffe2``-domain functions, each exported,
checked, run by onnxruntime against our executor and imported back (``onnx_round_trip``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx import export_onnx, import_onnx

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
INTS = RNG.integers(-10, 10, (3, 4))

CASES = {
    "Swish": (Op("Swish", ["x"], ["y"]), {"x": X}),
    "Gelu": (Op("Gelu", ["x"], ["y"]), {"x": X}),
    "Gelu-fast": (Op("Gelu", ["x"], ["y"], args={"fast_gelu": 1}), {"x": X}),
    "Logit": (Op("Logit", ["x"], ["y"], args={"eps": 1e-3}), {"x": 1 / (1 + np.exp(-X))}),
    "Log1p-small": (Op("Log1p", ["x"], ["y"]), {"x": X * 1e-4}),
    "Log1p": (Op("Log1p", ["x"], ["y"]), {"x": np.abs(X)}),
    "ReplaceNaN": (
        Op("ReplaceNaN", ["x"], ["y"], args={"value": 2.5}),
        {"x": np.where(X > 1, np.nan, X).astype(np.float32)},
    ),
    "Bucketize": (Op("Bucketize", ["x"], ["y"], args={"boundaries": [-1.0, 0.0, 0.5]}), {"x": X}),
    "IsEmpty": (Op("IsEmpty", ["x"], ["y"]), {"x": X}),
    "IsEmpty-empty": (Op("IsEmpty", ["x"], ["y"]), {"x": X[:0]}),
    "Sign": (Op("Sign", ["x"], ["y"]), {"x": X}),
    "Mod": (Op("Mod", ["x"], ["y"], args={"divisor": 3}), {"x": INTS.astype(np.int64)}),
    "Mod-divisor-sign": (
        Op("Mod", ["x"], ["y"], args={"divisor": -3, "sign_follow_divisor": 1}),
        {"x": INTS.astype(np.int32)},
    ),
    "Mean": (Op("Mean", ["x", "z", "w"], ["y"]), {"x": X, "z": X * 2, "w": -X}),
    "PRelu": (Op("PRelu", ["x", "s"], ["y"]), {"x": X, "s": np.float32([0.1, 0.2, 0.3])}),
    "PRelu-NHWC": (
        Op("PRelu", ["x", "s"], ["y"], args={"order": "NHWC"}),
        {"x": X, "s": np.float32([0.1, 0.2, 0.3, 0.4, 0.5])},
    ),
    "PRelu-shared": (Op("PRelu", ["x", "s"], ["y"]), {"x": X, "s": np.float32([0.25])}),
    "HalfToFloat": (Op("HalfToFloat", ["x"], ["y"]), {"x": X.astype(np.float16)}),
    "BatchBoxCox": (
        Op("BatchBoxCox", ["x", "l1", "l2"], ["y"]),
        {
            "x": np.abs(X[:, :, 0, 0]),
            "l1": np.float32([0, 0.5, 1.5]),
            "l2": np.float32([0.1, 0, 0.2]),
        },
    ),
}


@pytest.mark.parametrize("opset", [15, 17, 20])
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_round_trips(case: str, opset: int) -> None:
    op, feeds = CASES[case]
    round_trip(pair([op], list(feeds), ["y"], {}), feeds, opset=opset)


def test_a_function_is_defined_once_and_called_once_per_op() -> None:
    ops = [Op("Swish", ["x"], ["a"]), Op("Swish", ["a"], ["b"]), Op("Logit", ["b"], ["y"])]
    exported = round_trip(pair(ops, ["x"], ["y"], {}), {"x": X})
    assert [(n.domain, n.op_type) for n in exported.graph.node] == [
        ("caffe2", "Swish"),
        ("caffe2", "Swish"),
        ("caffe2", "Logit"),
    ]
    assert sorted(f.name for f in exported.functions) == ["Logit", "Swish"]
    assert {(o.domain, o.version) for o in exported.opset_import} == {("", 17), ("caffe2", 1)}
    back = import_onnx(exported)
    assert [op.type for op in back.predict_net] == ["Swish", "Swish", "Logit"]
    assert back.predict_net[2].arg("eps") == pytest.approx(1e-6)


def test_derived_attributes_are_dropped_on_import() -> None:
    exported = export_onnx(
        pair([Op("Gelu", ["x"], ["y"])], ["x"], ["y"], {}), value_info={"x": (1, [2, 3])}
    )
    (node,) = exported.graph.node
    assert {a.name for a in node.attribute} == {"fast_gelu", "_approximate"}
    (op,) = import_onnx(exported).predict_net
    assert [a.name for a in op.args] == ["fast_gelu"]


def test_functions_need_opset_15() -> None:
    model = pair([Op("Swish", ["x"], ["y"])], ["x"], ["y"], {})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Swish\).*function Swish.*opset 15"):
        export_onnx(model, opset=13, value_info={"x": (1, [2, 3])})


def test_mod_without_a_divisor_is_refused() -> None:
    model = pair([Op("Mod", ["x"], ["y"])], ["x"], ["y"], {})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Mod\).*'divisor'"):
        export_onnx(model, value_info={"x": (7, [3])})

"""Normalisations, row reductions and selections in ONNX (``export_normalize``), each exported,
checked, run by onnxruntime against our executor and imported back."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx import export_onnx

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
G, B = RNG.standard_normal(20).astype(np.float32), RNG.standard_normal(20).astype(np.float32)
W, BIAS = RNG.standard_normal((7, 60)).astype(np.float32), RNG.standard_normal(7).astype(np.float32)

AFFINE = {"elementwise_affine": 1}

CASES = {
    "LayerNorm": (Op("LayerNorm", ["x"], ["y", "m", "s"]), {}),
    "LayerNorm-negative-axis": (Op("LayerNorm", ["x"], ["y", "m", "s"], args={"axis": -2}), {}),
    "LayerNorm-affine": (
        Op("LayerNorm", ["x", "g", "b"], ["y", "m", "s"], args={"axis": 2, **AFFINE}),
        {"g": G, "b": B},
    ),
    "LayerNorm-ignored-affine": (
        Op("LayerNorm", ["x", "g", "b"], ["y", "m", "s"], args={"axis": 2, "epsilon": 1e-3}),
        {"g": G, "b": B},
    ),
    "RMSNorm": (
        Op("RMSNorm", ["x", "g", "b"], ["y", "r"], args={"axis": 2, "eps": 1e-3}),
        {"g": G, "b": B},
    ),
    "LpNorm-1": (Op("LpNorm", ["x"], ["y"], args={"p": 1}), {}),
    "LpNorm-2-average": (Op("LpNorm", ["x"], ["y"], args={"p": 2, "average": 1}), {}),
    "ElementwiseLinear": (
        Op("ElementwiseLinear", ["x", "g", "b"], ["y"], args={"axis": 2}),
        {"g": G, "b": B},
    ),
    "ReduceBackSum": (Op("ReduceBackSum", ["x"], ["y"]), {}),
    "ReduceBackMean-2": (Op("ReduceBackMean", ["x"], ["y"], args={"num_reduce_dim": 2}), {}),
    "ReduceBackMean-0": (Op("ReduceBackMean", ["x"], ["y"], args={"num_reduce_dim": 0}), {}),
    "DotProduct": (Op("DotProduct", ["x", "x"], ["y"]), {}),
    "TopK": (Op("TopK", ["x"], ["y", "i"], args={"k": 2}), {}),
    "TopK-flat": (Op("TopK", ["x"], ["y", "i", "f"], args={"k": 3}), {}),
    "TopK-axis": (Op("TopK", ["x"], ["y", "i"], args={"k": 2, "axis": 1}), {}),
    "FbFCPacked": (Op("FbFCPacked", ["x", "w", "bias"], ["y"]), {"w": W, "bias": BIAS}),
    "ChannelShuffle": (Op("ChannelShuffle", ["x"], ["y"], args={"group": 3}), {}),
}


@pytest.mark.parametrize("opset", [15, 17, 20])
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_round_trips(case: str, opset: int) -> None:
    op, params = CASES[case]
    model = pair([op], ["x"], list(op.outputs), params)
    round_trip(model, {"x": X}, opset=opset, dynamic_batch=opset == 17)


def test_channel_shuffle_nhwc_is_the_nchw_function_between_transposes() -> None:
    op = Op("ChannelShuffle", ["x"], ["y"], args={"group": 2, "order": "NHWC"})
    x = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    exported = round_trip(pair([op], ["x"], ["y"], {}), {"x": x})
    assert [n.op_type for n in exported.graph.node] == ["Transpose", "ChannelShuffle", "Transpose"]


def test_flattened_indices_of_an_inner_axis_are_refused() -> None:
    op = Op("TopK", ["x"], ["y", "i", "f"], args={"k": 2, "axis": 1})
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(TopK\).*last axis"):
        export_onnx(pair([op], ["x"], ["y", "i", "f"], {}), value_info={"x": (1, [2, 3, 4])})

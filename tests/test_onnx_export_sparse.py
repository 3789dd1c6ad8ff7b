"""Sparse and segment ops in ONNX (``export_sparse``): each exported, checked, run by
onnxruntime against our executor (empty segments, duplicate writes, decoded fused scales
included) and imported back; one export run on several input sizes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx import compare_with_onnxruntime, export_onnx

RNG = np.random.default_rng(0)
LENGTHS = np.int32([2, 0, 3, 1, 0])
INDICES = np.int64([4, 0, 4, 2, 1, 3])


def _fused_8bit(rows: int, width: int) -> np.ndarray:
    values = RNG.integers(0, 256, (rows, width)).astype(np.uint8)
    params = np.float32([[0.5, -1.25], [1e-40, 3.0], [-2.0, 0.0], [7.5e-3, -0.1], [1.0, 1e5]])
    return np.concatenate([values, params[:rows].view(np.uint8)], axis=1)


def _fused_4bit(rows: int, width: int) -> np.ndarray:
    values = RNG.integers(0, 256, (rows, width)).astype(np.uint8)
    params = np.float16([[0.5, -1.25], [3e-6, 3.0], [-2.0, 0.0], [7.5e-3, -0.1], [1.0, 100]])
    return np.concatenate([values, params[:rows].view(np.uint8)], axis=1)


DATA_8BIT = RNG.integers(0, 256, (5, 3)).astype(np.uint8)
SCALE_BIAS = RNG.standard_normal((5, 2)).astype(np.float32)
WEIGHTS = RNG.standard_normal(6).astype(np.float32)

CASES = {
    "LengthsSum": (
        Op("LengthsSum", ["d", "l"], ["y"]),
        {"d": RNG.standard_normal((6, 2, 3)).astype(np.float32), "l": LENGTHS},
    ),
    "SparseLengthsSum8BitsRowwise": (
        Op("SparseLengthsSum8BitsRowwise", ["d", "i", "l", "sb"], ["y"]),
        {"d": DATA_8BIT, "i": INDICES, "l": LENGTHS, "sb": SCALE_BIAS},
    ),
    "SparseLengthsWeightedSum8BitsRowwise": (
        Op("SparseLengthsWeightedSum8BitsRowwise", ["d", "w", "i", "l", "sb"], ["y"]),
        {"d": DATA_8BIT, "w": WEIGHTS, "i": INDICES, "l": LENGTHS, "sb": SCALE_BIAS},
    ),
    "SparseLengthsSumFused8BitRowwise": (
        Op("SparseLengthsSumFused8BitRowwise", ["d", "i", "l"], ["y"]),
        {"d": _fused_8bit(5, 4), "i": INDICES, "l": LENGTHS},
    ),
    "SparseLengthsWeightedSumFused8BitRowwise": (
        Op("SparseLengthsWeightedSumFused8BitRowwise", ["d", "w", "i", "l"], ["y"]),
        {"d": _fused_8bit(5, 4), "w": WEIGHTS, "i": INDICES, "l": LENGTHS},
    ),
    "SparseLengthsSumFused4BitRowwise": (
        Op("SparseLengthsSumFused4BitRowwise", ["d", "i", "l"], ["y"]),
        {"d": _fused_4bit(5, 3), "i": INDICES, "l": LENGTHS},
    ),
    "LengthsRangeFill": (Op("LengthsRangeFill", ["l"], ["y"]), {"l": LENGTHS}),
    "LengthsToRanges": (Op("LengthsToRanges", ["l"], ["y"]), {"l": LENGTHS}),
    "GatherRanges": (
        Op("GatherRanges", ["d", "r"], ["y", "n"]),
        {
            "d": np.arange(10, dtype=np.float32),
            "r": np.int32([[[0, 2], [5, 0]], [[3, 4], [9, 1]], [[1, 0], [0, 0]]]),
        },
    ),
    "SparseToDense": (
        Op("SparseToDense", ["i", "v"], ["y"]),
        {"i": np.int32([3, 1, 3, 0]), "v": RNG.standard_normal((4, 2)).astype(np.float32)},
    ),
    "SparseToDense-infer": (
        Op("SparseToDense", ["i", "v", "like"], ["y"]),
        {
            "i": np.int64([3, 1, 3]),
            "v": RNG.standard_normal(3).astype(np.float32),
            "like": np.zeros((6, 2), np.float32),
        },
    ),
    "SparseToDenseMask": (
        Op("SparseToDenseMask", ["i", "v", "dv", "l"], ["y", "p"], args={"mask": [7, 2, 9]}),
        {
            "i": np.int64([2, 7, 5, 2, -1, 9, 9, 7]),
            "v": np.arange(8, dtype=np.float32),
            "dv": np.float32(-1),
            "l": np.int32([4, 0, 4]),
        },
    ),
    "SparseToDenseMask-single": (
        Op("SparseToDenseMask", ["i", "v", "dv"], ["y", "p"], args={"mask": [3, 1]}),
        {
            "i": np.int32([1, 4, 1]),
            "v": np.float32([[1, 2], [3, 4], [5, 6]]),
            "dv": np.zeros(2, np.float32),
        },
    ),
    "BatchSparseToDense": (
        Op(
            "BatchSparseToDense",
            ["l", "i", "v"],
            ["y"],
            args={"dense_last_dim": 4, "default_value": 0.5},
        ),
        {
            "l": np.int64([2, 0, 3]),
            "i": np.int64([1, 1, 0, 3, 0]),
            "v": np.float32([1, 2, 3, 4, 5]),
        },
    ),
    "BatchSparseToDense-like": (
        Op("BatchSparseToDense", ["l", "i", "v", "like"], ["y"]),
        {
            "l": np.int32([1, 2]),
            "i": np.int64([2, 0, 2]),
            "v": np.float32([1, 2, 3]),
            "like": np.zeros((2, 3), np.float32),
        },
    ),
    "FillExamplesWithIndicator": (
        Op("FillExamplesWithIndicator", ["d", "ind"], ["y"]),
        {"d": RNG.standard_normal((2, 3)).astype(np.float32), "ind": np.bool_([0, 1, 0, 1, 0])},
    ),
    "SparseLabelSplit": (
        Op("SparseLabelSplit", ["l", "lab", "v"], ["v0", "v1", "v2", "e0", "e1", "e2", "off"]),
        {
            "l": np.int32([2, 1, 3]),
            "lab": np.int64([0, 2, 2, 0, 1, 0]),
            "v": np.arange(6, dtype=np.float32),
        },
    ),
    "ScatterAssign": (
        Op("ScatterAssign", ["d", "i", "s"], ["y"]),
        {
            "d": np.zeros((5, 2), np.float32),
            "i": np.int64([3, 0, 3]),
            "s": np.float32([[1, 2], [3, 4], [5, 6]]),
        },
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_round_trips(case: str) -> None:
    op, feeds = CASES[case]
    round_trip(pair([op], list(feeds), list(op.outputs), {}), feeds)


def test_a_sparse_lengths_model_runs_on_several_input_sizes() -> None:
    """One export (dynamic first dims), fed bags of other sizes: equal to the executor each time."""
    data = _fused_8bit(5, 6)
    ops = [
        Op("SparseLengthsWeightedSumFused8BitRowwise", ["d", "w", "i", "l"], ["bag"]),
        Op("Relu", ["bag"], ["y"]),
    ]
    model = pair(ops, ["w", "i", "l"], ["y"], {"d": data})
    exported = round_trip(model, {"w": WEIGHTS, "i": INDICES, "l": LENGTHS}, dynamic_batch=True)
    for size, segments in ((1, 1), (20, 7), (0, 3), (50, 50)):
        lengths = np.zeros(segments, np.int32)
        np.add.at(lengths, RNG.integers(0, segments, size), 1)
        feeds = {
            "w": RNG.standard_normal(size).astype(np.float32),
            "i": RNG.integers(0, 5, size).astype(np.int64),
            "l": lengths,
        }
        (diff,) = compare_with_onnxruntime(exported, model, feeds)
        assert diff.ok and diff.shape_before == (segments, 6), (size, diff)


def test_sparse_ops_need_opset_16() -> None:
    op, feeds = CASES["LengthsSum"]
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(LengthsSum\).*opset 16"):
        export_onnx(
            pair([op], list(feeds), ["y"], {}),
            opset=15,
            value_info={"d": (1, [6, 2, 3]), "l": (6, [5])},
        )

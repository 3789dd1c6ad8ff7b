"""kernels_sparse against per-entry Python loops (and onnxruntime's OneHot), with the typed
errors on out-of-range indices and inconsistent lengths."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graphtools.errors import ExecutionError
from graphtools.executor import Workspace, run_op
from graphtools.ir import Op


def run(op: Op, *values: Any) -> list[Any]:
    ws = Workspace()
    for name, value in zip(op.inputs, values, strict=True):
        ws.feed(name, value)
    run_op(op, ws)
    return [ws.fetch(name) for name in op.outputs]


RNG = np.random.default_rng(0)
LENGTHS = np.array([2, 0, 3, 1], np.int32)
INDICES = np.array([4, 0, 2, 2, 5, 1], np.int64)
WEIGHTS = RNG.standard_normal(6).astype(np.float32)


def segments(lengths: np.ndarray) -> list[list[int]]:
    out, at = [], 0
    for n in lengths:
        out.append(list(range(at, at + int(n))))
        at += int(n)
    return out


def bag_reference(row_of: Any, weighted: bool) -> np.ndarray:
    result = []
    for seg in segments(LENGTHS):
        acc = 0.0
        for pos in seg:
            w = float(WEIGHTS[pos]) if weighted else 1.0
            acc = acc + w * row_of(int(INDICES[pos]))
        result.append(acc if seg else np.zeros_like(row_of(0)))
    return np.array(result, dtype=np.float64)


@pytest.mark.parametrize("weighted", [False, True])
def test_rowwise_8bits_bags(weighted: bool) -> None:
    data = RNG.integers(0, 256, (6, 5)).astype(np.uint8)
    scale_bias = RNG.uniform(-1, 1, (6, 2)).astype(np.float32)

    def row(i: int) -> np.ndarray:
        return np.array([float(q) * scale_bias[i, 0] + scale_bias[i, 1] for q in data[i]])

    if weighted:
        op = Op("SparseLengthsWeightedSum8BitsRowwise", ["d", "w", "i", "l", "sb"], ["y"])
        (ours,) = run(op, data, WEIGHTS, INDICES, LENGTHS, scale_bias)
    else:
        op = Op("SparseLengthsSum8BitsRowwise", ["d", "i", "l", "sb"], ["y"])
        (ours,) = run(op, data, INDICES, LENGTHS, scale_bias)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, bag_reference(row, weighted), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_fused_8bit_bags(weighted: bool) -> None:
    q = RNG.integers(0, 256, (6, 4)).astype(np.uint8)
    params = RNG.uniform(-1, 1, (6, 2)).astype(np.float32)
    data = np.concatenate([q, params.view(np.uint8).reshape(6, 8)], axis=1)

    def row(i: int) -> np.ndarray:
        return np.array([float(v) * params[i, 0] + params[i, 1] for v in q[i]])

    if weighted:
        op = Op("SparseLengthsWeightedSumFused8BitRowwise", ["d", "w", "i", "l"], ["y"])
        (ours,) = run(op, data, WEIGHTS, INDICES, LENGTHS)
    else:
        op = Op("SparseLengthsSumFused8BitRowwise", ["d", "i", "l"], ["y"])
        (ours,) = run(op, data, INDICES, LENGTHS)
    np.testing.assert_allclose(ours, bag_reference(row, weighted), rtol=1e-5, atol=1e-5)


def test_fused_4bit_bag() -> None:
    nibbles = RNG.integers(0, 16, (6, 6)).astype(np.uint8)
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    params = RNG.uniform(-1, 1, (6, 2)).astype(np.float16)
    data = np.concatenate([packed, params.view(np.uint8).reshape(6, 4)], axis=1)

    def row(i: int) -> np.ndarray:
        return np.array([float(v) * float(params[i, 0]) + float(params[i, 1]) for v in nibbles[i]])

    (ours,) = run(
        Op("SparseLengthsSumFused4BitRowwise", ["d", "i", "l"], ["y"]), data, INDICES, LENGTHS
    )
    np.testing.assert_allclose(ours, bag_reference(row, False), rtol=1e-5, atol=1e-5)


def test_bags_reject_bad_indices_and_lengths() -> None:
    data = np.zeros((3, 12), np.uint8)
    op = Op("SparseLengthsSumFused8BitRowwise", ["d", "i", "l"], ["y"])
    with pytest.raises(ExecutionError, match="indices must be in"):
        run(op, data, np.array([0, 3]), np.array([2], np.int32))
    with pytest.raises(ExecutionError, match="lengths sum"):
        run(op, data, np.array([0, 1]), np.array([3], np.int32))


def test_lengths_ops_against_loops() -> None:
    data = RNG.standard_normal((6, 2)).astype(np.float32)
    (sums,) = run(Op("LengthsSum", ["d", "l"], ["y"]), data, LENGTHS)
    for k, seg in enumerate(segments(LENGTHS)):
        np.testing.assert_allclose(sums[k], sum((data[p] for p in seg), np.zeros(2)), rtol=1e-6)
    (filled,) = run(Op("LengthsRangeFill", ["l"], ["y"]), LENGTHS)
    assert filled.tolist() == [0, 1, 0, 1, 2, 0] and filled.dtype == np.int32
    (ranges,) = run(Op("LengthsToRanges", ["l"], ["y"]), LENGTHS)
    assert ranges.tolist() == [[0, 2], [2, 0], [2, 3], [5, 1]]


def test_gather_ranges_against_loops() -> None:
    data = np.arange(10, dtype=np.float32) * 1.5
    ranges = np.array([[[0, 2], [5, 1]], [[3, 0], [7, 3]]], np.int32)
    output, lengths = run(Op("GatherRanges", ["d", "r"], ["o", "l"]), data, ranges)
    expected = [data[s : s + n] for ex in ranges for s, n in ex]
    np.testing.assert_array_equal(output, np.concatenate(expected))
    assert lengths.tolist() == [3, 3] and lengths.dtype == np.int32
    with pytest.raises(ExecutionError, match="outside DATA"):
        run(Op("GatherRanges", ["d", "r"], ["o", "l"]), data, np.array([[[8, 5]]], np.int32))


def test_sparse_to_dense_accumulates() -> None:
    indices = np.array([3, 1, 3], np.int32)
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    (inferred,) = run(Op("SparseToDense", ["i", "v"], ["y"]), indices, values)
    assert inferred.tolist() == [[0, 0], [3, 4], [0, 0], [6, 8]]
    (sized,) = run(Op("SparseToDense", ["i", "v", "s"], ["y"]), indices, values, np.zeros(6))
    assert sized.shape == (6, 2) and sized[3].tolist() == [6, 8]
    with pytest.raises(ExecutionError, match="indices must be in"):
        run(Op("SparseToDense", ["i", "v", "s"], ["y"]), indices, values, np.zeros(2))


def test_sparse_to_dense_mask_with_and_without_lengths() -> None:
    mask = (42, 100, 300, 1, 0, 312)
    indices = np.array([300, 7, 0, 300, 42, -1], np.int64)
    values = np.arange(6, dtype=np.float32)
    default = np.array(-1.0, np.float32)
    op = Op(
        "SparseToDenseMask",
        ["i", "v", "d"],
        ["y", "p"],
        args={"mask": mask, "return_presence_mask": 1},
    )
    out, present = run(op, indices, values, default)
    assert out.tolist() == [4, -1, 3, -1, 2, -1]
    assert present.tolist() == [True, False, True, False, True, False]
    op4 = Op("SparseToDenseMask", ["i", "v", "d", "l"], ["y"], args={"mask": mask})
    (rows,) = run(op4, indices, values, default, np.array([2, 4], np.int32))
    assert rows.tolist() == [[-1, -1, 0, -1, -1, -1], [4, -1, 3, -1, 2, -1]]
    strict = Op(
        "SparseToDenseMask", ["i", "v", "d"], ["y"], args={"mask": mask, "max_skipped_indices": 1}
    )
    with pytest.raises(ExecutionError, match="negative sparse indices"):
        run(strict, indices, values, default)


def test_batch_sparse_to_dense_and_fill_examples() -> None:
    op = Op(
        "BatchSparseToDense",
        ["l", "i", "v"],
        ["y"],
        args={"dense_last_dim": 4, "default_value": 0.5},
    )
    (dense,) = run(
        op,
        np.array([2, 0, 1], np.int32),
        np.array([3, 0, 2]),
        np.array([1.0, 2.0, 3.0], np.float32),
    )
    assert dense.tolist() == [[2, 0.5, 0.5, 1], [0.5] * 4, [0.5, 0.5, 3, 0.5]]
    data = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    (filled,) = run(
        Op("FillExamplesWithIndicator", ["d", "i"], ["y"]), data, np.array([0, 1, 0, 1], np.bool_)
    )
    assert filled.tolist() == [[0, 0], [1, 2], [0, 0], [3, 4]]
    with pytest.raises(ExecutionError, match="indicator marks"):
        run(Op("FillExamplesWithIndicator", ["d", "i"], ["y"]), data, np.array([1, 0], np.bool_))


def test_one_hot_matches_onnxruntime_and_scatter_assign() -> None:
    import onnx
    import onnxruntime as ort

    indices = np.array([3, 0, 5, 3], np.int64)
    (ours,) = run(Op("OneHot", ["i", "n"], ["y"]), indices, np.array([6], np.int64))
    helper = onnx.helper
    node = helper.make_node("OneHot", ["i", "n", "v"], ["y"])
    graph = helper.make_graph(
        [node],
        "oh",
        [helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [4])],
        [onnx.ValueInfoProto(name="y")],
        [
            onnx.numpy_helper.from_array(np.array(6, np.int64), "n"),
            onnx.numpy_helper.from_array(np.array([0, 1], np.float32), "v"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(ours, session.run(["y"], {"i": indices})[0])
    with pytest.raises(ExecutionError, match="indices must be in"):
        run(Op("OneHot", ["i", "n"], ["y"]), indices, np.array([4], np.int64))
    data = np.zeros((4, 2), np.float32)
    slices = np.array([[1, 1], [2, 2]], np.float32)
    (scattered,) = run(Op("ScatterAssign", ["d", "i", "s"], ["d"]), data, np.array([2, 0]), slices)
    assert scattered.tolist() == [[2, 2], [0, 0], [1, 1], [0, 0]] and data.sum() == 0
    with pytest.raises(ExecutionError, match="SLICES must be"):
        run(Op("ScatterAssign", ["d", "i", "s"], ["d"]), data, np.array([2]), slices)


def test_bucketize_and_sparse_label_split() -> None:
    x = np.array([-1.0, 0.1, 0.2, 2.5, 3.0], np.float32)
    (buckets,) = run(Op("Bucketize", ["x"], ["y"], args={"boundaries": (0.1, 2.5)}), x)
    assert buckets.tolist() == [
        sum(1 for b in (np.float32(0.1), np.float32(2.5)) if b < v) for v in x
    ]
    lengths = np.array([2, 1, 3], np.int32)
    labels = np.array([1, 0, 1, 2, 0, 1], np.int64)
    values = np.array([10, 20, 30, 40, 50, 60], np.float32)
    outputs = [f"v{k}" for k in range(3)] + [f"e{k}" for k in range(3)] + ["offsets"]
    op = Op("SparseLabelSplit", ["l", "i", "v"], outputs, args={"num_labels": 3})
    got = run(op, lengths, labels, values)
    assert [g.tolist() for g in got[:3]] == [[20, 50], [10, 30, 60], [40]]
    assert [g.tolist() for g in got[3:6]] == [[0, 2], [0, 1, 2], [2]]
    assert got[6].tolist() == [0, 0, 1, 0, 1, 2]
    with pytest.raises(ExecutionError, match="label indices"):
        run(op, lengths, labels + 1, values)

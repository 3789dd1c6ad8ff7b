"""Sparse and segment kernels (recommendation-model ops): lengths-based reductions, the
quantized embedding bags (``SparseLengths*8Bit*``/``*4Bit*``), range gathers, sparse-to-dense
scatters, ``OneHot``, ``ScatterAssign``, ``Bucketize`` and ``SparseLabelSplit``.

A segment op reads ``LENGTHS`` as consecutive runs of its ``INDICES``/``DATA`` rows: segment
``i`` covers ``lengths[i]`` rows after the ``sum(lengths[:i])`` before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.executor.registry import kernel
from graphtools.ir import Op


def _ints(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{what} must be integers, got {array.dtype}")
    return array.astype(np.int64).reshape(-1)


def _lengths(value: Any, total: int) -> np.ndarray:
    lengths = _ints(value, "lengths")
    if lengths.size and lengths.min() < 0:
        raise ValueError("lengths must not be negative")
    if int(lengths.sum()) != total:
        raise ValueError(f"lengths sum to {int(lengths.sum())}, there are {total} entries")
    return lengths


def _segment_ids(lengths: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(lengths.size), lengths)


def _checked_indices(value: Any, rows: int) -> np.ndarray:
    indices = _ints(value, "indices")
    if indices.size and (indices.min() < 0 or indices.max() >= rows):
        raise ValueError(f"indices must be in [0, {rows}), got [{indices.min()}, {indices.max()}]")
    return indices


def _segment_sum(rows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    out = np.zeros((lengths.size, *rows.shape[1:]), dtype=np.float64)
    np.add.at(out, _segment_ids(lengths), rows)
    return out


@kernel("LengthsSum")
def _lengths_sum(op: Op, inputs: list[Any]) -> list[Any]:
    data = np.asarray(inputs[0])
    lengths = _lengths(inputs[1], data.shape[0])
    return [_segment_sum(data.astype(np.float64), lengths).astype(data.dtype)]


def _bag(inputs: list[Any], weighted: bool, dequantize: Any) -> list[Any]:
    """A quantized embedding bag: dequantize the indexed rows, weight them, sum per segment."""
    data = np.asarray(inputs[0])
    if data.dtype != np.uint8 or data.ndim != 2:
        raise TypeError(f"data must be a 2-D uint8 tensor, got {data.dtype}{list(data.shape)}")
    offset = 1 if weighted else 0
    indices = _checked_indices(inputs[1 + offset], data.shape[0])
    lengths = _lengths(inputs[2 + offset], indices.size)
    rows = dequantize(data, indices, inputs)
    if weighted:
        weights = np.asarray(inputs[1], dtype=np.float64).reshape(-1)
        if weights.size != indices.size:
            raise ValueError(f"{weights.size} weights for {indices.size} indices")
        rows = rows * weights[:, None]
    return [_segment_sum(rows, lengths).astype(np.float32)]


def _rowwise_8bit(data: np.ndarray, indices: np.ndarray, inputs: list[Any]) -> np.ndarray:
    scale_bias = np.asarray(inputs[-1], dtype=np.float32)
    if scale_bias.shape != (data.shape[0], 2):
        raise ValueError(f"scale_bias must be ({data.shape[0]}, 2), got {list(scale_bias.shape)}")
    chosen = scale_bias[indices].astype(np.float64)
    return data[indices].astype(np.float64) * chosen[:, :1] + chosen[:, 1:]


def _fused_8bit(data: np.ndarray, indices: np.ndarray, inputs: list[Any]) -> np.ndarray:
    if data.shape[1] < 8:
        raise ValueError(f"fused 8-bit rows need 8 trailing bytes, got {data.shape[1]} bytes")
    params = np.ascontiguousarray(data[:, -8:]).view(np.float32).astype(np.float64)[indices]
    return data[indices, :-8].astype(np.float64) * params[:, :1] + params[:, 1:]


def _fused_4bit(data: np.ndarray, indices: np.ndarray, inputs: list[Any]) -> np.ndarray:
    if data.shape[1] < 4:
        raise ValueError(f"fused 4-bit rows need 4 trailing bytes, got {data.shape[1]} bytes")
    params = np.ascontiguousarray(data[:, -4:]).view(np.float16).astype(np.float64)[indices]
    packed = data[indices, :-4]
    nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1)
    values = nibbles.reshape(packed.shape[0], 2 * packed.shape[1])
    return values.astype(np.float64) * params[:, :1] + params[:, 1:]


@kernel("SparseLengthsSum8BitsRowwise", "SparseLengthsWeightedSum8BitsRowwise")
def _sls_8bits_rowwise(op: Op, inputs: list[Any]) -> list[Any]:
    """Rows dequantized as ``q * scale + bias`` with a separate (N, 2) ``scale_bias`` input."""
    return _bag(inputs, "Weighted" in op.type, _rowwise_8bit)


@kernel("SparseLengthsSumFused8BitRowwise", "SparseLengthsWeightedSumFused8BitRowwise")
def _sls_fused_8bit(op: Op, inputs: list[Any]) -> list[Any]:
    """Rows carry their float32 scale and bias in their last 8 bytes."""
    return _bag(inputs, "Weighted" in op.type, _fused_8bit)


@kernel("SparseLengthsSumFused4BitRowwise")
def _sls_fused_4bit(op: Op, inputs: list[Any]) -> list[Any]:
    """Two 4-bit values per byte (low nibble first), float16 scale and bias in the last 4 bytes."""
    return _bag(inputs, False, _fused_4bit)


@kernel("LengthsRangeFill")
def _lengths_range_fill(op: Op, inputs: list[Any]) -> list[Any]:
    lengths = _ints(inputs[0], "lengths")
    if lengths.size and lengths.min() < 0:
        raise ValueError("lengths must not be negative")
    parts = [np.arange(n, dtype=np.int32) for n in lengths]
    return [np.concatenate(parts) if parts else np.zeros(0, np.int32)]


@kernel("LengthsToRanges")
def _lengths_to_ranges(op: Op, inputs: list[Any]) -> list[Any]:
    lengths = _ints(inputs[0], "lengths")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if lengths.size else lengths
    return [np.stack([starts, lengths], axis=1).astype(np.int32).reshape(-1, 2)]


@kernel("GatherRanges")
def _gather_ranges(op: Op, inputs: list[Any]) -> list[Any]:
    """``RANGES`` (N, M, 2) of ``[start, length]`` into 1-D ``DATA``: the concatenated pieces
    and the total length per example (int32)."""
    data = np.asarray(inputs[0])
    ranges = np.asarray(inputs[1])
    if data.ndim != 1:
        raise ValueError(f"DATA must be 1-D, got {data.ndim}-D")
    if ranges.ndim != 3 or ranges.shape[2] != 2:
        raise ValueError(f"RANGES must be (N, M, 2), got {list(ranges.shape)}")
    pieces, lengths = [], []
    for example in ranges.astype(np.int64):
        total = 0
        for start, length in example:
            if start < 0 or length < 0 or start + length > data.size:
                raise ValueError(f"range [{start}, {start + length}) is outside DATA")
            pieces.append(data[start : start + length])
            total += int(length)
        lengths.append(total)
    output = np.concatenate(pieces) if pieces else data[:0]
    return [output, np.asarray(lengths, dtype=np.int32)]


@kernel("SparseToDense")
def _sparse_to_dense(op: Op, inputs: list[Any]) -> list[Any]:
    """``out[indices[i]] += values[i]``; the first dim is ``DATA_TO_INFER_DIM``'s, else
    ``max(indices) + 1``."""
    values = np.asarray(inputs[1])
    indices = _ints(inputs[0], "indices")
    if values.ndim < 1 or values.shape[0] != indices.size:
        raise ValueError(f"{indices.size} indices for values of shape {list(values.shape)}")
    if len(inputs) > 2:
        first = int(np.shape(inputs[2])[0])
    else:
        first = int(indices.max()) + 1 if indices.size else 0
    indices = _checked_indices(indices, first)
    out = np.zeros((first, *values.shape[1:]), dtype=values.dtype)
    np.add.at(out, indices, values)
    return [out]


@kernel("SparseToDenseMask")
def _sparse_to_dense_mask(op: Op, inputs: list[Any]) -> list[Any]:
    """Values of the ids listed in ``mask`` land in their mask position (later ones win),
    other ids are dropped; with ``LENGTHS`` one row per segment. Negative ids are skipped,
    at most ``max_skipped_indices - 1`` (default 5) of them."""
    indices = _ints(inputs[0], "indices")
    values = np.asarray(inputs[1])
    default = np.asarray(inputs[2])
    mask = [int(v) for v in op.arg("mask", ())]
    if not mask:
        raise ValueError("SparseToDenseMask needs a non-empty 'mask'")
    if min(mask) < 0 or len(set(mask)) != len(mask):
        raise ValueError(f"mask ids must be distinct and non-negative, got {mask}")
    if values.ndim != default.ndim + 1 or values.shape[1:] != default.shape:
        raise ValueError(f"values {list(values.shape)} do not match default {list(default.shape)}")
    if values.shape[0] != indices.size:
        raise ValueError(f"{indices.size} indices for {values.shape[0]} values")
    position = {feature: i for i, feature in enumerate(mask)}
    with_lengths = len(inputs) > 3
    lengths = _lengths(inputs[3], indices.size) if with_lengths else np.array([indices.size])
    out = np.empty((lengths.size, len(mask), *default.shape), dtype=values.dtype)
    out[...] = default
    present = np.zeros((lengths.size, len(mask)), dtype=np.bool_)
    limit = int(op.arg("max_skipped_indices", 5))
    skipped = 0
    for entry, row in enumerate(_segment_ids(lengths)):
        feature = int(indices[entry])
        if feature < 0:
            skipped += 1
            if skipped >= limit:
                raise ValueError("too many negative sparse indices skipped")
            continue
        column = position.get(feature)
        if column is not None:
            out[row, column] = values[entry]
            present[row, column] = True
    if not with_lengths:
        out, present = out[0], present[0]
    return [out, present]


@kernel("BatchSparseToDense")
def _batch_sparse_to_dense(op: Op, inputs: list[Any]) -> list[Any]:
    """(batch, dense_last_dim) filled with ``default_value``; segment ``i`` writes its values
    at its indices. ``dense_last_dim`` comes from the argument or a fourth input's last dim."""
    values = np.asarray(inputs[2])
    indices = _ints(inputs[1], "indices")
    lengths = _lengths(inputs[0], indices.size)
    if values.reshape(-1).size != indices.size:
        raise ValueError(f"{indices.size} indices for {values.size} values")
    if len(inputs) > 3:
        width = int(np.shape(inputs[3])[-1])
    else:
        width = int(op.arg("dense_last_dim", -1))
        if width <= 0:
            raise ValueError("BatchSparseToDense needs 'dense_last_dim' or a fourth input")
    indices = _checked_indices(indices, width)
    out = np.full((lengths.size, width), op.arg("default_value", 0.0), dtype=values.dtype)
    out[_segment_ids(lengths), indices] = values.reshape(-1)
    return [out]


@kernel("FillExamplesWithIndicator")
def _fill_examples_with_indicator(op: Op, inputs: list[Any]) -> list[Any]:
    """Rows of ``data`` placed, in order, where ``indicator`` is true; zeros elsewhere."""
    data = np.asarray(inputs[0])
    indicator = np.asarray(inputs[1]).reshape(-1).astype(np.bool_)
    if data.ndim < 1 or int(indicator.sum()) != data.shape[0]:
        raise ValueError(
            f"indicator marks {int(indicator.sum())} examples, data has "
            f"{data.shape[0] if data.ndim else 0} rows"
        )
    out = np.zeros((indicator.size, *data.shape[1:]), dtype=data.dtype)
    out[indicator] = data
    return [out]


@kernel("OneHot")
def _one_hot(op: Op, inputs: list[Any]) -> list[Any]:
    """(N,) int64 indices and a scalar index size -> (N, size) float32 one-hot rows."""
    indices = _ints(inputs[0], "indices")
    size = int(_ints(inputs[1], "index_size_tensor")[0])
    indices = _checked_indices(indices, size)
    out = np.zeros((indices.size, size), dtype=np.float32)
    out[np.arange(indices.size), indices] = 1.0
    return [out]


@kernel("ScatterAssign")
def _scatter_assign(op: Op, inputs: list[Any]) -> list[Any]:
    """``DATA[INDICES[i]] = SLICES[i]`` along the first dim (a copy; the last write wins)."""
    data = np.asarray(inputs[0])
    slices = np.asarray(inputs[2])
    if data.ndim < 1:
        raise ValueError("DATA must have rank >= 1")
    indices = _checked_indices(inputs[1], data.shape[0])
    if slices.shape != (indices.size, *data.shape[1:]):
        raise ValueError(
            f"SLICES must be {[indices.size, *data.shape[1:]]}, got {list(slices.shape)}"
        )
    if slices.dtype != data.dtype:
        raise TypeError(f"SLICES dtype {slices.dtype} differs from DATA's {data.dtype}")
    out = data.copy()
    out[indices] = slices
    return [out]


@kernel("Bucketize")
def _bucketize(op: Op, inputs: list[Any]) -> list[Any]:
    """int32 bucket of each value: the number of ``boundaries`` strictly below it."""
    x = np.asarray(inputs[0])
    boundaries = np.asarray(op.arg("boundaries", ()), dtype=np.float32)
    if boundaries.size and np.any(np.diff(boundaries) <= 0):
        raise ValueError(f"boundaries must increase strictly, got {boundaries.tolist()}")
    return [np.searchsorted(boundaries, x, side="left").astype(np.int32)]


@kernel("SparseLabelSplit")
def _sparse_label_split(op: Op, inputs: list[Any]) -> list[Any]:
    """Split (label index, value) pairs by label: values per label, their example ids, and
    (with an odd output count) each pair's position within its label."""
    lengths = _ints(inputs[0], "lengths")
    labels = _ints(inputs[1], "label_index")
    values = np.asarray(inputs[2])
    count = int(op.arg("num_labels", -1))
    outputs = len(op.outputs)
    if count == -1:
        count = outputs // 2
    if outputs not in (2 * count, 2 * count + 1):
        raise ValueError(f"{outputs} outputs do not fit num_labels={count}")
    if values.shape[:1] != labels.shape:
        raise ValueError(f"{labels.size} label indices for {values.shape[0]} values")
    _lengths(lengths, labels.size)
    if labels.size and (labels.min() < 0 or labels.max() >= count):
        raise ValueError(f"label indices must be in [0, {count})")
    examples = _segment_ids(lengths).astype(np.int32)
    offsets = np.zeros(labels.size, dtype=np.int32)
    seen = np.zeros(count, dtype=np.int64)
    for i, label in enumerate(labels):
        offsets[i] = seen[label]
        seen[label] += 1
    split_values = [values[labels == k] for k in range(count)]
    split_examples = [examples[labels == k] for k in range(count)]
    return [*split_values, *split_examples, offsets]

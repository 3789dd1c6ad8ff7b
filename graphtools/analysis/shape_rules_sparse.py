"""Shape rules of the sparse and segment ops whose output sizes follow from their inputs'
shapes (the executor's ``kernels_sparse``): lengths-based sums, the quantized embedding bags,
``LengthsToRanges``, the dense scatters with a known width and ``FillExamplesWithIndicator``.
A segment op makes one row per entry of ``LENGTHS``; the ops whose sizes are input *values*
(``LengthsRangeFill``, ``GatherRanges``, ``SparseToDense``, ...) are in
``shapes.DATA_DEPENDENT``."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    Dim,
    TensorType,
    dim_product,
    same_dim,
    same_shape,
    shape_rule,
)
from graphtools.ir import Op

_F32, _I32, _BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)


def _ints(t: TensorType, what: str) -> Dim:
    """The number of entries of an integer input (read flat, as the kernels do)."""
    if t.dtype is not None and not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"{what} must be integers, got {t}")
    return _size(t)


def _size(t: TensorType) -> Dim:
    return None if t.shape is None else dim_product(t.shape)


def _rows(t: TensorType, what: str) -> tuple[Dim, ...] | None:
    if t.shape is not None and not t.shape:
        raise ValueError(f"{what} must have rank >= 1, got {t}")
    return t.shape


@shape_rule("LengthsSum")
def _lengths_sum(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """One sum of consecutive DATA rows per length: (len(LENGTHS), *DATA.shape[1:])."""
    need(op, inputs, 2)
    data = inputs[0]
    segments = _ints(inputs[1], "lengths")
    shape = _rows(data, "DATA")
    return [TensorType(data.dtype, None if shape is None else (segments, *shape[1:]))]


# The columns of a quantized row that are not values, and the values a byte holds.
_BAGS = {
    "SparseLengthsSum8BitsRowwise": (0, 1),
    "SparseLengthsWeightedSum8BitsRowwise": (0, 1),
    "SparseLengthsSumFused8BitRowwise": (8, 1),
    "SparseLengthsWeightedSumFused8BitRowwise": (8, 1),
    "SparseLengthsSumFused4BitRowwise": (4, 2),
}


@shape_rule(*_BAGS)
def _embedding_bag(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(DATA, [WEIGHTS,] INDICES, LENGTHS[, SCALE_BIAS])``: float32 (len(LENGTHS),
    D) with D the values of a 2-D uint8 DATA row (a separate (N, 2) scale/bias for the
    ``8BitsRowwise`` ops; a float32 scale and bias in the last 8 bytes, or float16 ones in the
    last 4 bytes of two 4-bit values each, for the fused ones)."""
    weighted = "Weighted" in op.type
    separate = op.type.endswith("8BitsRowwise")
    need(op, inputs, 3 + weighted + separate)
    data = inputs[0]
    if (data.dtype is not None and data.dtype != np.uint8) or data.rank not in (None, 2):
        raise TypeError(f"data must be a 2-D uint8 tensor, got {data}")
    indices = _ints(inputs[1 + weighted], "indices")
    segments = _ints(inputs[2 + weighted], "lengths")
    if weighted:
        same_dim(_size(inputs[1]), indices, f"{inputs[1]} weights for {indices} indices")
    rows, width = (None, None) if data.shape is None else data.shape
    reserved, per_byte = _BAGS[op.type]
    if separate:
        scale_bias = inputs[3 + weighted]
        if scale_bias.shape is not None:
            same_shape(scale_bias.shape, (rows, 2), "scale_bias against (DATA rows, 2)")
    if isinstance(width, int):
        if width < reserved:
            raise ValueError(f"fused rows need {reserved} trailing bytes, got {width} bytes")
        width = (width - reserved) * per_byte
    elif reserved:
        width = None
    return [TensorType(_F32, (segments, width))]


@shape_rule("LengthsToRanges")
def _lengths_to_ranges(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """An int32 ``[start, length]`` pair per length."""
    need(op, inputs, 1)
    return [TensorType(_I32, (_ints(inputs[0], "lengths"), 2))]


@shape_rule("SparseToDenseMask")
def _sparse_to_dense_mask(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(INDICES, VALUES, DEFAULT[, LENGTHS])``: VALUES' dtype (len(mask),
    *DEFAULT.shape), with LENGTHS one such row per length; the bool presence map alike."""
    need(op, inputs, 3)
    mask = [int(v) for v in op.arg("mask", ())]
    if not mask:
        raise ValueError("SparseToDenseMask needs a non-empty 'mask'")
    if min(mask) < 0 or len(set(mask)) != len(mask):
        raise ValueError(f"mask ids must be distinct and non-negative, got {mask}")
    indices = _ints(inputs[0], "indices")
    values, default = inputs[1], inputs[2]
    if values.shape is not None and default.shape is not None:
        if len(values.shape) != len(default.shape) + 1:
            raise ValueError(f"values {values} do not match default {default}")
        same_shape(values.shape[1:], default.shape, f"values {values} against default")
    if values.shape is not None:
        same_dim(indices, values.shape[0], f"{indices} indices for values {values}")
    lead: tuple[Dim, ...] = (len(mask),)
    if len(inputs) > 3:
        lead = (_ints(inputs[3], "lengths"), len(mask))
    shape = None if default.shape is None else (*lead, *default.shape)
    return [TensorType(values.dtype, shape), TensorType(_BOOL, lead)]


@shape_rule("BatchSparseToDense")
def _batch_sparse_to_dense(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs ``(LENGTHS, INDICES, VALUES[, LIKE])``: VALUES' dtype (len(LENGTHS), width),
    the width being ``dense_last_dim`` or LIKE's last dim."""
    need(op, inputs, 3)
    segments = _ints(inputs[0], "lengths")
    indices = _ints(inputs[1], "indices")
    values = inputs[2]
    same_dim(_size(values), indices, f"{indices} indices for values {values}")
    width: Dim
    if len(inputs) > 3:
        like = _rows(inputs[3], "the shape-giving input")
        width = None if like is None else like[-1]
    else:
        width = int(op.arg("dense_last_dim", -1))
        if width <= 0:
            raise ValueError("BatchSparseToDense needs 'dense_last_dim' or a fourth input")
    return [TensorType(values.dtype, (segments, width))]


@shape_rule("FillExamplesWithIndicator")
def _fill_examples_with_indicator(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """DATA's rows spread over the INDICATOR's entries: (len(INDICATOR), *DATA.shape[1:])."""
    need(op, inputs, 2)
    data = inputs[0]
    shape = _rows(data, "data")
    return [TensorType(data.dtype, None if shape is None else (_size(inputs[1]), *shape[1:]))]

"""Exporters for Caffe2's sparse and segment ops (recommendation models), all ``caffe2``-domain
functions of opset 16 or later (``ScatterElements``/``ScatterND`` with ``reduction="add"``).

Segments: ``LENGTHS`` splits the rows in runs. The segment of each row is found in linear time:
``ScatterElements`` adds a 1 at each segment's start (empty segments stacking theirs), and a
``CumSum`` of those marks minus one is the segment id. A segment reduction is then a
``ScatterND`` with ``reduction="add"`` of the rows into one row per segment.

* ``LengthsSum``: the rows summed per segment;
* ``SparseLengths[Weighted]Sum{8BitsRowwise,Fused8BitRowwise,Fused4BitRowwise}``: the rows at
  ``INDICES`` (``Gather``) dequantized, weighted, summed per segment, in float64 as the
  executor computes, then float32. Fused rows carry their float32 (8-bit) or float16 (4-bit)
  scale and bias in their last bytes: ONNX has no bitcast, so those bytes are decoded by
  arithmetic (sign, exponent and mantissa fields; subnormals included; an exponent of all ones
  gives an infinity); 4-bit values are the low then the high nibble of each byte;
* ``LengthsRangeFill``, ``LengthsToRanges``, ``GatherRanges`` from the same segment ids;
* writes whose last one wins (``SparseToDenseMask``, ``BatchSparseToDense``, ``ScatterAssign``):
  ONNX leaves duplicate ``ScatterND`` indices undefined, so the winning entry of each target is
  found first (a stable descending ``TopK`` of ``target * n + position``, the first of each
  target kept) and the scatter writes distinct targets; ``SparseToDense`` adds duplicates;
* ``FillExamplesWithIndicator``: the rows scattered to the ``NonZero`` positions;
* ``SparseLabelSplit``: per label, ``Compress`` of the values and example ids; each pair's
  position within its label from an exclusive ``CumSum`` of the one-hot labels.

The executor raises on malformed inputs (lengths not summing to the rows, out-of-range indices,
too many negative ids for ``SparseToDenseMask``); ONNX has no errors: onnxruntime's ``Gather``
refuses an out-of-range index, the other checks are not made.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter
from graphtools.onnx.export_helpers import int64s, reduce, unsqueeze

__all__: list[str] = []

_SINCE = 16
"""``ScatterElements``/``ScatterND`` reductions start at opset 16."""
INT64, INT32, DOUBLE, FLOAT = (
    TensorProto.INT64,
    TensorProto.INT32,
    TensorProto.DOUBLE,
    TensorProto.FLOAT,
)


def _fresh(fx: ExportContext, *hints: str) -> list[str]:
    return [fx.fresh(hint) for hint in hints]


def _int64(fx: ExportContext, value: str) -> str:
    out = fx.fresh(f"{value}_int64")
    fx.node("Cast", [value], [out], to=INT64)
    return out


def _scalar(fx: ExportContext, value: int, hint: str) -> str:
    return fx.const(np.int64(value), hint)


def _vector(fx: ExportContext, value: str) -> str:
    """A 0-d int64 as a 1-element vector."""
    return unsqueeze(fx, value, [0])


def _starts(fx: ExportContext, lengths: str) -> str:
    """Each segment's first row: the exclusive running sum of the (int64) lengths."""
    starts = fx.fresh("starts")
    fx.node("CumSum", [lengths, _scalar(fx, 0, "axis")], [starts], exclusive=1)
    return starts


def _segment_ids(fx: ExportContext, lengths: str, total: str) -> str:
    """The segment of each of the ``total`` (0-d int64) rows that ``lengths`` (int64) splits."""
    slots, zeros, ones, marks, running, ids, one = _fresh(
        fx, "slots", "zeros", "ones", "marks", "running", "segment_ids", "one"
    )
    fx.node("Add", [total, _scalar(fx, 1, "one")], [slots])
    fx.node("ConstantOfShape", [_vector(fx, slots)], [zeros], value=_filler(np.int64(0)))
    fx.node("ConstantOfShape", [_shape_of(fx, lengths)], [ones], value=_filler(np.int64(1)))
    fx.node("ScatterElements", [zeros, _starts(fx, lengths), ones], [marks], reduction="add")
    fx.node("CumSum", [marks, _scalar(fx, 0, "axis")], [running])
    fx.node("Sub", [running, _scalar(fx, 1, "one")], [one])
    fx.node("Slice", [one, int64s(fx, [0], "zero"), _vector(fx, total)], [ids])
    return ids


def _filler(value: np.generic) -> onnx.TensorProto:
    """A ``ConstantOfShape`` value."""
    return numpy_helper.from_array(np.asarray([value]))


def _shape_of(fx: ExportContext, value: str) -> str:
    out = fx.fresh(f"{value}_shape")
    fx.node("Shape", [value], [out])
    return out


def _rows(fx: ExportContext, value: str) -> str:
    """The number of rows (dim 0) of ``value``, 0-d int64."""
    dims, rows = _fresh(fx, "dims", "rows")
    fx.node("Shape", [value], [dims], end=1)
    fx.node("Squeeze", [dims, int64s(fx, [0], "axes")], [rows])
    return rows


def _segment_sum(fx: ExportContext, rows: str, ids: str, count: str, out: str) -> None:
    """``rows`` added per segment ``ids`` into ``count`` rows (``rows``' type)."""
    trailing, shape, zeros, typed, where = _fresh(fx, "trailing", "shape", "zeros", "typed", "at")
    fx.node("Shape", [rows], [trailing], start=1)
    fx.node("Concat", [_vector(fx, count), trailing], [shape], axis=0)
    fx.node("ConstantOfShape", [shape], [zeros])
    fx.node("CastLike", [zeros, rows], [typed])
    unsqueeze(fx, ids, [1], out=where)
    fx.node("ScatterND", [typed, where, rows], [out], reduction="add")


# -- LengthsSum -----------------------------------------------------------------------------


def _lengths_sum_body(fx: ExportContext) -> None:
    lengths = _int64(fx, "LENGTHS")
    ids = _segment_ids(fx, lengths, _rows(fx, "DATA"))
    _segment_sum(fx, "DATA", ids, _rows(fx, lengths), "OUTPUT")


_LENGTHS_SUM = Function(
    "LengthsSum", ("DATA", "LENGTHS"), ("OUTPUT",), {}, _lengths_sum_body, _SINCE
)


@exporter("LengthsSum")
def _lengths_sum(cx: ExportContext, op: Op) -> None:
    cx.call(_LENGTHS_SUM, op.inputs[:2], op.outputs[:1])


# -- quantized embedding bags ---------------------------------------------------------------


def _bits(fx: ExportContext, data: str, first: int, count: int) -> str:
    """The little-endian unsigned integer in bytes ``first:first+count`` (negative: from the
    end) of each row of ``data`` (uint8), as int64 ``(rows,)``."""
    total = None
    for k in range(count):
        column, value = _fresh(fx, "byte", "byte_value")
        fx.node("Gather", [data, _scalar(fx, first + k, "column")], [column], axis=1)
        fx.node("Cast", [column], [value], to=INT64)
        if k:
            shifted = fx.fresh("shifted")
            fx.node("Mul", [value, _scalar(fx, 256**k, "place")], [shifted])
            value = shifted
        if total is None:
            total = value
        else:
            summed = fx.fresh("bits")
            fx.node("Add", [total, value], [summed])
            total = summed
    assert total is not None
    return total


def _decoded(fx: ExportContext, bits: str, exponent_bits: int, mantissa_bits: int) -> str:
    """The IEEE float (float64 values) whose bit pattern is ``bits`` (int64)."""
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2 ** (exponent_bits + mantissa_bits)
    high, sign_bit, field, exponent, mantissa = _fresh(
        fx, "high", "sign_bit", "field", "exponent", "mantissa"
    )
    fx.node("Div", [bits, _scalar(fx, top, "sign_place")], [sign_bit])
    fx.node("Div", [bits, _scalar(fx, 2**mantissa_bits, "exponent_place")], [high])
    fx.node("Mod", [high, _scalar(fx, 2**exponent_bits, "exponent_span")], [field])
    fx.node("Mod", [bits, _scalar(fx, 2**mantissa_bits, "mantissa_span")], [mantissa])
    names = ("field_f", "mantissa_f", "normal", "fraction", "implicit", "power", "sign", "value")
    field_f, mantissa_f, normal, fraction, implicit, power, sign, value = _fresh(fx, *names)
    fx.node("Cast", [field], [field_f], to=DOUBLE)
    fx.node("Cast", [mantissa], [mantissa_f], to=DOUBLE)
    zero, one, two = (fx.const(np.float64(v), n) for v, n in ((0, "zero"), (1, "one"), (2, "two")))
    fx.node("Greater", [field_f, zero], [normal])
    fx.node("Div", [mantissa_f, fx.const(np.float64(2**mantissa_bits), "scale")], [fraction])
    lead, exponent_value, adjusted = _fresh(fx, "lead", "exponent_value", "adjusted")
    fx.node("Where", [normal, one, zero], [lead])
    fx.node("Add", [lead, fraction], [implicit])
    # subnormals use the exponent 1 - bias, like the smallest normal one
    fx.node("Max", [field_f, one], [exponent])
    fx.node("Sub", [exponent, fx.const(np.float64(bias), "bias")], [exponent_value])
    fx.node("Pow", [two, exponent_value], [power])
    fx.node("Mul", [implicit, power], [adjusted])
    negative, factor = _fresh(fx, "negative", "factor")
    fx.node("Cast", [sign_bit], [negative], to=TensorProto.BOOL)
    fx.node("Where", [negative, fx.const(np.float64(-1), "minus"), one], [factor])
    fx.node("Mul", [adjusted, factor], [sign])
    fx.node("Identity", [sign], [value])
    return value


def _column(fx: ExportContext, value: str) -> str:
    return unsqueeze(fx, value, [1])


def _bag_body(kind: str, weighted: bool, fx: ExportContext) -> None:
    """Gather, dequantize (float64), weight, sum per segment, float32."""
    indices = _int64(fx, "INDICES")
    rows = fx.fresh("rows")
    fx.node("Gather", ["DATA", indices], [rows], axis=0)
    if kind == "rowwise":
        chosen, values, scale, bias = _fresh(fx, "scale_bias", "values", "scale", "bias")
        fx.node("Gather", ["SCALE_BIAS", indices], [chosen], axis=0)
        fx.node("Cast", [rows], [values], to=DOUBLE)
        pair = fx.fresh("pair")
        fx.node("Cast", [chosen], [pair], to=DOUBLE)
        fx.node(
            "Slice",
            [pair, int64s(fx, [0], "s0"), int64s(fx, [1], "e0"), int64s(fx, [1], "axis")],
            [scale],
        )
        fx.node(
            "Slice",
            [pair, int64s(fx, [1], "s1"), int64s(fx, [2], "e1"), int64s(fx, [1], "axis")],
            [bias],
        )
    elif kind == "fused8":
        quantized, values = _fresh(fx, "quantized", "values")
        fx.node(
            "Slice",
            [rows, int64s(fx, [0], "s"), int64s(fx, [-8], "e"), int64s(fx, [1], "axis")],
            [quantized],
        )
        fx.node("Cast", [quantized], [values], to=DOUBLE)
        scale = _column(fx, _decoded(fx, _bits(fx, rows, -8, 4), 8, 23))
        bias = _column(fx, _decoded(fx, _bits(fx, rows, -4, 4), 8, 23))
    else:
        packed, wide, low, high, pairs, values, flat = _fresh(
            fx, "packed", "wide", "low", "high", "pairs", "values", "flat"
        )
        fx.node(
            "Slice",
            [rows, int64s(fx, [0], "s"), int64s(fx, [-4], "e"), int64s(fx, [1], "axis")],
            [packed],
        )
        fx.node("Cast", [packed], [wide], to=INT32)
        sixteen = fx.const(np.int32(16), "sixteen")
        fx.node("Mod", [wide, sixteen], [low])
        fx.node("Div", [wide, sixteen], [high])
        lows, highs = unsqueeze(fx, low, [2]), unsqueeze(fx, high, [2])
        fx.node("Concat", [lows, highs], [pairs], axis=2)
        fx.node("Flatten", [pairs], [flat], axis=1)  # Reshape [0, -1] fails on no rows
        fx.node("Cast", [flat], [values], to=DOUBLE)
        scale = _column(fx, _decoded(fx, _bits(fx, rows, -4, 2), 5, 10))
        bias = _column(fx, _decoded(fx, _bits(fx, rows, -2, 2), 5, 10))
    scaled, dequantized = _fresh(fx, "scaled", "dequantized")
    fx.node("Mul", [values, scale], [scaled])
    fx.node("Add", [scaled, bias], [dequantized])
    if weighted:
        weights, weight_column, product = _fresh(fx, "weights", "weight_column", "product")
        fx.node("Cast", ["WEIGHTS"], [weights], to=DOUBLE)
        unsqueeze(fx, weights, [1], out=weight_column)
        fx.node("Mul", [dequantized, weight_column], [product])
        dequantized = product
    lengths = _int64(fx, "LENGTHS")
    ids = _segment_ids(fx, lengths, _rows(fx, indices))
    summed = fx.fresh("summed")
    _segment_sum(fx, dequantized, ids, _rows(fx, lengths), summed)
    fx.node("Cast", [summed], ["OUTPUT"], to=FLOAT)


def _bag(op_type: str, kind: str, weighted: bool) -> Function:
    inputs = (
        ["DATA", "WEIGHTS", "INDICES", "LENGTHS"] if weighted else ["DATA", "INDICES", "LENGTHS"]
    )
    if kind == "rowwise":
        inputs.append("SCALE_BIAS")
    body = partial(_bag_body, kind, weighted)
    return Function(op_type, tuple(inputs), ("OUTPUT",), {}, body, _SINCE)


_BAGS = {
    "SparseLengthsSum8BitsRowwise": _bag("SparseLengthsSum8BitsRowwise", "rowwise", False),
    "SparseLengthsWeightedSum8BitsRowwise": _bag(
        "SparseLengthsWeightedSum8BitsRowwise", "rowwise", True
    ),
    "SparseLengthsSumFused8BitRowwise": _bag("SparseLengthsSumFused8BitRowwise", "fused8", False),
    "SparseLengthsWeightedSumFused8BitRowwise": _bag(
        "SparseLengthsWeightedSumFused8BitRowwise", "fused8", True
    ),
    "SparseLengthsSumFused4BitRowwise": _bag("SparseLengthsSumFused4BitRowwise", "fused4", False),
}


@exporter(*_BAGS)
def _sparse_lengths_bag(cx: ExportContext, op: Op) -> None:
    fn = _BAGS[op.type]
    if len(op.inputs) != len(fn.inputs):
        raise cx.refuse(f"{op.type} with {len(op.inputs)} inputs ({len(fn.inputs)} expected)")
    cx.call(fn, op.inputs, op.outputs[:1])


# -- ranges -------------------------------------------------------------------------------


def _lengths_range_fill_body(fx: ExportContext) -> None:
    lengths = _int64(fx, "LENGTHS")
    total, positions, offsets, within = _fresh(fx, "total", "positions", "offsets", "within")
    fx.node("ReduceSum", [lengths], [total], keepdims=0)
    ids = _segment_ids(fx, lengths, total)
    fx.node("Range", [_scalar(fx, 0, "zero"), total, _scalar(fx, 1, "step")], [positions])
    fx.node("Gather", [_starts(fx, lengths), ids], [offsets], axis=0)
    fx.node("Sub", [positions, offsets], [within])
    fx.node("Cast", [within], ["OUTPUT"], to=INT32)


_LENGTHS_RANGE_FILL = Function(
    "LengthsRangeFill", ("LENGTHS",), ("OUTPUT",), {}, _lengths_range_fill_body, _SINCE
)


@exporter("LengthsRangeFill")
def _lengths_range_fill(cx: ExportContext, op: Op) -> None:
    cx.call(_LENGTHS_RANGE_FILL, op.inputs[:1], op.outputs[:1])


def _lengths_to_ranges_body(fx: ExportContext) -> None:
    lengths = _int64(fx, "LENGTHS")
    pairs = fx.fresh("pairs")
    starts = _column(fx, _starts(fx, lengths))
    fx.node("Concat", [starts, _column(fx, lengths)], [pairs], axis=1)
    fx.node("Cast", [pairs], ["RANGES"], to=INT32)


_LENGTHS_TO_RANGES = Function(
    "LengthsToRanges", ("LENGTHS",), ("RANGES",), {}, _lengths_to_ranges_body, _SINCE
)


@exporter("LengthsToRanges")
def _lengths_to_ranges(cx: ExportContext, op: Op) -> None:
    cx.call(_LENGTHS_TO_RANGES, op.inputs[:1], op.outputs[:1])


def _gather_ranges_body(fx: ExportContext) -> None:
    ranges = _int64(fx, "RANGES")
    flat, starts, lengths, total, positions = _fresh(
        fx, "flat", "range_starts", "range_lengths", "total", "positions"
    )
    fx.node("Reshape", [ranges, int64s(fx, [-1, 2], "pairs")], [flat])
    fx.node("Gather", [flat, _scalar(fx, 0, "start")], [starts], axis=1)
    fx.node("Gather", [flat, _scalar(fx, 1, "length")], [lengths], axis=1)
    fx.node("ReduceSum", [lengths], [total], keepdims=0)
    ids = _segment_ids(fx, lengths, total)
    offsets, first, within, source = _fresh(fx, "offsets", "first", "within", "source")
    fx.node("Range", [_scalar(fx, 0, "zero"), total, _scalar(fx, 1, "step")], [positions])
    fx.node("Gather", [_starts(fx, lengths), ids], [offsets], axis=0)
    fx.node("Gather", [starts, ids], [first], axis=0)
    fx.node("Sub", [positions, offsets], [within])
    fx.node("Add", [first, within], [source])
    fx.node("Gather", ["DATA", source], ["OUTPUT"], axis=0)
    per_example, sums = _fresh(fx, "per_example", "sums")
    shape = fx.fresh("examples_shape")
    fx.node("Shape", ["RANGES"], [shape], end=2)
    fx.node("Reshape", [lengths, shape], [per_example])
    reduce(fx, "ReduceSum", per_example, [1], keepdims=False, out=sums)
    fx.node("Cast", [sums], ["LENGTHS"], to=INT32)


_GATHER_RANGES = Function(
    "GatherRanges", ("DATA", "RANGES"), ("OUTPUT", "LENGTHS"), {}, _gather_ranges_body, _SINCE
)


@exporter("GatherRanges")
def _gather_ranges(cx: ExportContext, op: Op) -> None:
    cx.call(_GATHER_RANGES, op.inputs[:2], op.outputs[:2])


# -- scatters -------------------------------------------------------------------------------


def _last_writes(fx: ExportContext, targets: str) -> str:
    """Positions of the entries that win their target (the last entry writing it), as int64
    ``(winners,)``: ``targets`` (int64 ``(n,)``) sorted by ``target * n + position``
    descending (a stable ``TopK``), the first of each target kept."""
    keys_scaled, positions, keys, order, sorted_keys, previous, first = _fresh(
        fx, "scaled", "positions", "keys", "order", "sorted", "previous", "first"
    )
    count = _rows(fx, targets)
    fx.node("Mul", [targets, count], [keys_scaled])
    fx.node("Range", [_scalar(fx, 0, "zero"), count, _scalar(fx, 1, "step")], [positions])
    fx.node("Add", [keys_scaled, positions], [keys])
    values = fx.fresh("values")
    fx.node("TopK", [keys, _vector(fx, count)], [values, order], axis=0, largest=1, sorted=1)
    fx.node("Gather", [targets, order], [sorted_keys], axis=0)
    shifted, differs = _fresh(fx, "shifted", "differs")
    fx.node("Concat", [int64s(fx, [-1], "none"), sorted_keys], [shifted], axis=0)
    fx.node("Slice", [shifted, int64s(fx, [0], "s"), _vector(fx, count)], [previous])
    fx.node("Equal", [sorted_keys, previous], [differs])
    fx.node("Not", [differs], [first])
    winners = fx.fresh("winners")
    fx.node("Compress", [order, first], [winners], axis=0)
    return winners


def _scatter_assign_body(fx: ExportContext) -> None:
    indices = _int64(fx, "INDICES")
    targets, slices, where = _fresh(fx, "targets", "slices", "where")
    winners = _last_writes(fx, indices)
    fx.node("Gather", [indices, winners], [targets], axis=0)
    fx.node("Gather", ["SLICES", winners], [slices], axis=0)
    unsqueeze(fx, targets, [1], out=where)
    fx.node("ScatterND", ["DATA", where, slices], ["OUTPUT"])


_SCATTER_ASSIGN = Function(
    "ScatterAssign",
    ("DATA", "INDICES", "SLICES"),
    ("OUTPUT",),
    {},
    _scatter_assign_body,
    _SINCE,
)


@exporter("ScatterAssign")
def _scatter_assign(cx: ExportContext, op: Op) -> None:
    cx.call(_SCATTER_ASSIGN, op.inputs[:3], op.outputs[:1])


def _sparse_to_dense_body(infer: bool, fx: ExportContext) -> None:
    indices = _int64(fx, "INDICES")
    if infer:
        count = _rows(fx, "DATA_TO_INFER_DIM")
    else:
        count = fx.fresh("count")
        with_floor, largest = _fresh(fx, "with_floor", "largest")
        fx.node("Concat", [int64s(fx, [-1], "floor"), indices], [with_floor], axis=0)
        fx.node("ReduceMax", [with_floor], [largest], keepdims=0)
        fx.node("Add", [largest, _scalar(fx, 1, "one")], [count])
    _segment_sum(fx, "VALUES", indices, count, "OUTPUT")


_SPARSE_TO_DENSE = {
    infer: Function(
        "SparseToDense",
        ("INDICES", "VALUES", "DATA_TO_INFER_DIM") if infer else ("INDICES", "VALUES"),
        ("OUTPUT",),
        {},
        partial(_sparse_to_dense_body, infer),
        _SINCE,
        variant="" if infer else "max",
    )
    for infer in (True, False)
}


@exporter("SparseToDense")
def _sparse_to_dense(cx: ExportContext, op: Op) -> None:
    fn = _SPARSE_TO_DENSE[len(op.inputs) > 2]
    cx.call(fn, op.inputs[:3], op.outputs[:1])


def _sparse_to_dense_mask_body(with_lengths: bool, fx: ExportContext) -> None:
    indices = _int64(fx, "INDICES")
    names = ("mask", "column", "hits", "found", "kept", "rows", "target")
    mask, column, hits, found, kept, rows, target = _fresh(fx, *names)
    fx.node("Constant", [], [mask], value_ints=AttrRef("mask"))
    fx.node("Equal", [_column(fx, indices), mask], [hits])
    hits_int = fx.fresh("hits_int")
    fx.node("Cast", [hits], [hits_int], to=INT32)
    fx.node("ArgMax", [hits_int], [column], axis=1, keepdims=0)
    reduce(fx, "ReduceMax", hits_int, [1], keepdims=False, out=found)
    fx.node("Cast", [found], [kept], to=TensorProto.BOOL)
    width = fx.fresh("width")
    fx.node("Size", [mask], [width])
    if with_lengths:
        lengths = _int64(fx, "LENGTHS")
        fx.node("Identity", [_segment_ids(fx, lengths, _rows(fx, indices))], [rows])
        count = _rows(fx, lengths)
    else:
        fx.node("Mul", [indices, _scalar(fx, 0, "zero")], [rows])
        count = fx.const(np.int64(1), "one_row")
    slot = fx.fresh("slot")
    fx.node("Mul", [rows, width], [slot])
    fx.node("Add", [slot, column], [target])
    valid_positions, valid_targets = _fresh(fx, "valid_positions", "valid_targets")
    every = fx.fresh("every")
    fx.node("Range", [_scalar(fx, 0, "zero"), _rows(fx, indices), _scalar(fx, 1, "step")], [every])
    fx.node("Compress", [every, kept], [valid_positions], axis=0)
    fx.node("Compress", [target, kept], [valid_targets], axis=0)
    chosen = _last_writes(fx, valid_targets)
    winners, places, values, where = _fresh(fx, "winners", "places", "values", "where")
    fx.node("Gather", [valid_positions, chosen], [winners], axis=0)
    fx.node("Gather", [target, winners], [places], axis=0)
    fx.node("Gather", ["VALUES", winners], [values], axis=0)
    unsqueeze(fx, places, [1], out=where)
    cells, trailing, shape, expanded, filled = _fresh(
        fx, "cells", "trailing", "shape", "expanded", "filled"
    )
    fx.node("Mul", [count, width], [cells])
    fx.node("Shape", ["DEFAULT"], [trailing])
    fx.node("Concat", [_vector(fx, cells), trailing], [shape], axis=0)
    fx.node("Expand", ["DEFAULT", shape], [expanded])
    fx.node("ScatterND", [expanded, where, values], [filled])
    present_flat, zeros, trues = _fresh(fx, "present_flat", "zeros", "trues")
    fx.node("ConstantOfShape", [_vector(fx, cells)], [zeros], value=_filler(np.bool_(False)))
    fx.node("ConstantOfShape", [_shape_of(fx, places)], [trues], value=_filler(np.bool_(True)))
    fx.node("ScatterND", [zeros, where, trues], [present_flat])
    if with_lengths:
        grid = fx.fresh("grid")
        fx.node("Concat", [_vector(fx, count), _vector(fx, width)], [grid], axis=0)
    else:
        grid = _vector(fx, width)
    out_shape = fx.fresh("out_shape")
    fx.node("Concat", [grid, trailing], [out_shape], axis=0)
    fx.node("Reshape", [filled, out_shape], ["OUTPUT"])
    fx.node("Reshape", [present_flat, grid], ["PRESENCE_MASK"])


_SPARSE_TO_DENSE_MASK = {
    lengths: Function(
        "SparseToDenseMask",
        ("INDICES", "VALUES", "DEFAULT", "LENGTHS")
        if lengths
        else ("INDICES", "VALUES", "DEFAULT"),
        ("OUTPUT", "PRESENCE_MASK"),
        {"mask": "ints"},
        partial(_sparse_to_dense_mask_body, lengths),
        _SINCE,
        variant="" if lengths else "single",
    )
    for lengths in (True, False)
}


@exporter("SparseToDenseMask")
def _sparse_to_dense_mask(cx: ExportContext, op: Op) -> None:
    mask = [int(v) for v in op.arg("mask", ())]
    if not mask or min(mask) < 0 or len(set(mask)) != len(mask):
        raise cx.refuse(f"mask ids must be distinct, non-negative and given, got {mask}")
    fn = _SPARSE_TO_DENSE_MASK[len(op.inputs) > 3]
    cx.call(fn, op.inputs[:4], op.outputs[:2], mask=mask)


def _batch_sparse_to_dense_body(width_input: bool, fx: ExportContext) -> None:
    lengths, indices = _int64(fx, "LENGTHS"), _int64(fx, "INDICES")
    ids = _segment_ids(fx, lengths, _rows(fx, indices))
    count = _rows(fx, lengths)
    width = fx.fresh("width")
    if width_input:
        last = fx.fresh("last")
        fx.node("Shape", ["DENSE_LAST_DIM"], [last], start=-1)
        fx.node("Squeeze", [last, int64s(fx, [0], "axes")], [width])
    else:
        fx.node("Identity", [fx.attr("dense_last_dim")], [width])
    names = ("slot", "target", "places", "flat_values", "values", "where", "cells", "filled")
    slot, target, places, flat_values, values, where, cells, filled = _fresh(fx, *names)
    fx.node("Mul", [ids, width], [slot])
    fx.node("Add", [slot, indices], [target])
    winners = _last_writes(fx, target)
    fx.node("Gather", [target, winners], [places], axis=0)
    fx.node("Reshape", ["VALUES", int64s(fx, [-1], "all")], [flat_values])
    fx.node("Gather", [flat_values, winners], [values], axis=0)
    unsqueeze(fx, places, [1], out=where)
    fx.node("Mul", [count, width], [cells])
    default, base = _fresh(fx, "default", "base")
    fx.node("CastLike", [fx.attr("default_value"), "VALUES"], [default])
    fx.node("Expand", [default, _vector(fx, cells)], [base])
    fx.node("ScatterND", [base, where, values], [filled])
    shape = fx.fresh("shape")
    fx.node("Concat", [_vector(fx, count), _vector(fx, width)], [shape], axis=0)
    fx.node("Reshape", [filled, shape], ["DENSE"])


_BATCH_SPARSE_TO_DENSE = {
    width_input: Function(
        "BatchSparseToDense",
        ("LENGTHS", "INDICES", "VALUES", *(("DENSE_LAST_DIM",) if width_input else ())),
        ("DENSE",),
        {"default_value": "float", **({} if width_input else {"dense_last_dim": "int"})},
        partial(_batch_sparse_to_dense_body, width_input),
        _SINCE,
        variant="like" if width_input else "",
    )
    for width_input in (True, False)
}


@exporter("BatchSparseToDense")
def _batch_sparse_to_dense(cx: ExportContext, op: Op) -> None:
    default = float(op.arg("default_value", 0.0))
    if len(op.inputs) > 3:
        cx.call(_BATCH_SPARSE_TO_DENSE[True], op.inputs[:4], op.outputs[:1], default_value=default)
        return
    width = int(op.arg("dense_last_dim", -1))
    if width <= 0:
        raise cx.refuse("BatchSparseToDense needs 'dense_last_dim' or a fourth input")
    cx.call(
        _BATCH_SPARSE_TO_DENSE[False],
        op.inputs[:3],
        op.outputs[:1],
        default_value=default,
        dense_last_dim=width,
    )


def _fill_examples_body(fx: ExportContext) -> None:
    names = ("flat", "flags", "positions", "where", "trailing", "shape", "zeros", "typed")
    flat, flags, positions, where, trailing, shape, zeros, typed = _fresh(fx, *names)
    fx.node("Reshape", ["INDICATOR", int64s(fx, [-1], "all")], [flat])
    fx.node("Cast", [flat], [flags], to=TensorProto.BOOL)
    fx.node("NonZero", [flags], [positions])
    fx.node("Transpose", [positions], [where], perm=[1, 0])
    fx.node("Shape", ["DATA"], [trailing], start=1)
    fx.node("Concat", [_shape_of(fx, flags), trailing], [shape], axis=0)
    fx.node("ConstantOfShape", [shape], [zeros])
    fx.node("CastLike", [zeros, "DATA"], [typed])
    fx.node("ScatterND", [typed, where, "DATA"], ["OUTPUT"])


_FILL_EXAMPLES = Function(
    "FillExamplesWithIndicator",
    ("DATA", "INDICATOR"),
    ("OUTPUT",),
    {},
    _fill_examples_body,
    _SINCE,
)


@exporter("FillExamplesWithIndicator")
def _fill_examples_with_indicator(cx: ExportContext, op: Op) -> None:
    cx.call(_FILL_EXAMPLES, op.inputs[:2], op.outputs[:1])


def _sparse_label_split_body(count: int, offsets: bool, fx: ExportContext) -> None:
    lengths, labels = _int64(fx, "LENGTHS"), _int64(fx, "LABEL_INDEX")
    total = _rows(fx, labels)
    examples = fx.fresh("examples")
    fx.node("Cast", [_segment_ids(fx, lengths, total)], [examples], to=INT32)
    for k in range(count):
        chosen = fx.fresh(f"label_{k}")
        fx.node("Equal", [labels, _scalar(fx, k, f"label_{k}_id")], [chosen])
        fx.node("Compress", ["VALUES", chosen], [f"VALUE_{k}"], axis=0)
        fx.node("Compress", [examples, chosen], [f"EXAMPLE_ID_{k}"], axis=0)
    if not offsets:
        return
    names = ("all_labels", "one_hot", "counts", "seen", "column", "position")
    all_labels, one_hot, counts, seen, column, position = _fresh(fx, *names)
    fx.node(
        "Range",
        [_scalar(fx, 0, "zero"), _scalar(fx, count, "labels"), _scalar(fx, 1, "step")],
        [all_labels],
    )
    fx.node("Equal", [_column(fx, labels), all_labels], [one_hot])
    fx.node("Cast", [one_hot], [counts], to=INT64)
    fx.node("CumSum", [counts, _scalar(fx, 0, "axis")], [seen], exclusive=1)
    unsqueeze(fx, labels, [1], out=column)
    fx.node("GatherElements", [seen, column], [position], axis=1)
    flat = fx.fresh("flat")
    fx.node("Reshape", [position, int64s(fx, [-1], "all")], [flat])
    fx.node("Cast", [flat], ["OFFSET_MAP"], to=INT32)


def _label_split(count: int, offsets: bool) -> Function:
    outputs = (
        *(f"VALUE_{k}" for k in range(count)),
        *(f"EXAMPLE_ID_{k}" for k in range(count)),
        *(("OFFSET_MAP",) if offsets else ()),
    )
    return Function(
        "SparseLabelSplit",
        ("LENGTHS", "LABEL_INDEX", "VALUES"),
        outputs,
        {"num_labels": "int"},
        partial(_sparse_label_split_body, count, offsets),
        _SINCE,
        variant=f"{count}{'_offsets' if offsets else ''}",
    )


@exporter("SparseLabelSplit")
def _sparse_label_split(cx: ExportContext, op: Op) -> None:
    outputs = len(op.outputs)
    count = int(op.arg("num_labels", -1))
    if count == -1:
        count = outputs // 2
    if outputs not in (2 * count, 2 * count + 1) or count < 1:
        raise cx.refuse(f"{outputs} outputs do not fit num_labels={count}")
    fn = _label_split(count, outputs % 2 == 1)
    cx.call(fn, op.inputs[:3], op.outputs, num_labels=count)

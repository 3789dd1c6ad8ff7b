"""Shape and data-movement kernels: concat/split/slice, reshapes, transposes, copies, casts."""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.copies import VALUE_COPIES
from graphtools.analysis.dtypes import dtype_of
from graphtools.analysis.op_args import canonical_axis, order
from graphtools.executor.registry import kernel
from graphtools.ir import Op


def _axis_from_order(op: Op) -> int:
    """``axis`` when given, else the channel axis of ``order`` (Caffe2's Concat/Split rule)."""
    if op.has_arg("axis"):
        return int(op.arg("axis"))
    return 3 if order(op) == "NHWC" else 1


@kernel("Concat", "DepthConcat")
def _concat(op: Op, inputs: list[Any]) -> list[Any]:
    arrays = [np.asarray(v) for v in inputs]
    ndim = arrays[0].ndim
    if op.arg("add_axis", 0):
        axis = canonical_axis(_axis_from_order(op), ndim + 1)
        y = np.stack(arrays, axis=axis)
        sizes = [1] * len(arrays)
    else:
        axis = canonical_axis(_axis_from_order(op), ndim)
        y = np.concatenate(arrays, axis=axis)
        sizes = [a.shape[axis] for a in arrays]
    return [y, np.asarray(sizes, dtype=np.int32)]


@kernel("Split", "DepthSplit")
def _split(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    add_axis = bool(op.arg("add_axis", 0))
    axis = canonical_axis(_axis_from_order(op), x.ndim)
    count = len(op.outputs)
    if len(inputs) > 1:
        sizes = [int(v) for v in np.asarray(inputs[1]).reshape(-1)]
    elif op.arg("split") is not None:
        sizes = [int(v) for v in op.arg("split")]
    else:
        if x.shape[axis] % count:
            raise ValueError(
                f"axis {axis} (size {x.shape[axis]}) does not split into {count} equal parts"
            )
        sizes = [x.shape[axis] // count] * count
    if len(sizes) != count or sum(sizes) != x.shape[axis]:
        raise ValueError(
            f"split sizes {sizes} ({len(sizes)} parts summing to {sum(sizes)}) do not cut axis "
            f"{axis} (size {x.shape[axis]}) into {count} parts"
        )
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    if add_axis:
        parts = [np.squeeze(p, axis=axis) for p in parts]
    return parts


def _bounds(values: Any, fallback: Any) -> list[int]:
    if values is None:
        values = fallback
    return [int(v) for v in np.asarray(values).reshape(-1)]


@kernel("Slice")
def _slice(op: Op, inputs: list[Any]) -> list[Any]:
    """Caffe2 Slice: a negative start or end ``e`` means ``dim + 1 + e`` (so -1 is the end)."""
    x = np.asarray(inputs[0])
    if len(inputs) == 3:
        starts, ends = _bounds(inputs[1], None), _bounds(inputs[2], None)
    else:
        starts = _bounds(op.arg("starts"), ())
        ends = _bounds(op.arg("ends"), ())
    if len(starts) != len(ends) or len(starts) > x.ndim:
        raise ValueError(f"starts {starts} and ends {ends} do not fit a {x.ndim}-D input")
    index = []
    for dim, (start, end) in enumerate(zip(starts, ends, strict=True)):
        size = x.shape[dim]
        start = size + 1 + start if start < 0 else start
        end = size + 1 + end if end < 0 else end
        start, end = min(start, size), min(end, size)
        if start < 0 or end < start:
            raise ValueError(f"bad slice [{start}, {end}) on dim {dim} of size {size}")
        index.append(slice(start, end))
    return [np.ascontiguousarray(x[tuple(index)])]


def reshape_target(shape: list[int], old: tuple[int, ...]) -> list[int]:
    """Caffe2 Reshape's new shape: 0 copies the input dim at that index, one -1 is inferred."""
    new = [old[i] if size == 0 and i < len(old) else size for i, size in enumerate(shape)]
    if new.count(-1) > 1:
        raise ValueError(f"shape {shape} has more than one -1")
    total = prod(old)
    if -1 in new:
        known = prod(s for s in new if s != -1)
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {list(old)} into {shape}")
        new[new.index(-1)] = total // known
    if prod(new) != total:
        raise ValueError(f"cannot reshape {list(old)} ({total} values) into {shape}")
    return new


@kernel("Reshape")
def _reshape(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    if len(inputs) > 1:
        if op.has_arg("shape"):
            raise ValueError("Reshape got the new shape both as argument and as input")
        shape_input = np.asarray(inputs[1])
        if shape_input.ndim != 1:
            raise ValueError(f"Reshape's new shape must be 1-D, got {list(shape_input.shape)}")
        shape = [int(v) for v in shape_input]
    else:
        shape_arg = op.arg("shape")
        if shape_arg is None:
            raise ValueError("Reshape needs a 'shape' argument or a second input")
        shape = [int(v) for v in shape_arg]
    new = reshape_target(shape, x.shape)
    return [x.reshape(new), np.asarray(x.shape, dtype=np.int64)]


@kernel("Flatten")
def _flatten(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    axis = int(op.arg("axis", 1))
    axis = canonical_axis(axis, x.ndim) if axis != x.ndim else axis
    return [x.reshape(prod(x.shape[:axis]), prod(x.shape[axis:]))]


@kernel("FlattenToVec")
def _flatten_to_vec(op: Op, inputs: list[Any]) -> list[Any]:
    return [np.asarray(inputs[0]).reshape(-1)]


@kernel("Transpose")
def _transpose(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    axes = op.arg("axes")
    if axes is None:
        return [np.ascontiguousarray(x.T)]
    return [np.ascontiguousarray(x.transpose([int(a) for a in axes]))]


@kernel("NCHW2NHWC")
def _nchw2nhwc(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    if x.ndim < 3:
        raise ValueError(f"NCHW2NHWC needs at least 3 dims, got {x.ndim}")
    return [np.ascontiguousarray(np.moveaxis(x, 1, -1))]


@kernel("NHWC2NCHW")
def _nhwc2nchw(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    if x.ndim < 3:
        raise ValueError(f"NHWC2NCHW needs at least 3 dims, got {x.ndim}")
    return [np.ascontiguousarray(np.moveaxis(x, -1, 1))]


@kernel(*VALUE_COPIES)
def _identity(op: Op, inputs: list[Any]) -> list[Any]:
    """Device copies and aliases are identities on the host (``AliasWithName`` is detectron2's
    named placeholder, ``Identity`` what ONNX importers leave); the value is shared, kernels
    never mutate."""
    return [inputs[0]]


@kernel("Shape")
def _shape(op: Op, inputs: list[Any]) -> list[Any]:
    shape = np.asarray(np.shape(inputs[0]), dtype=np.int64)
    axes = op.arg("axes")
    if axes is not None:
        shape = shape[[canonical_axis(int(a), len(shape)) for a in axes]]
    return [shape]


@kernel("Gather")
def _gather(op: Op, inputs: list[Any]) -> list[Any]:
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = canonical_axis(int(op.arg("axis", 0)), data.ndim)
    size = data.shape[axis]
    if indices.size and (indices.max() >= size or indices.min() < -size):
        raise ValueError(f"Gather index out of range for dim {axis} of size {size}")
    return [np.take(data, indices, axis=axis)]


@kernel("ExpandDims")
def _expand_dims(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    dims = sorted(int(d) for d in op.arg("dims", ()))
    if not dims or len(set(dims)) != len(dims):
        raise ValueError(f"ExpandDims needs distinct dims, got {dims}")
    for d in dims:
        x = np.expand_dims(x, d)
    return [x]


@kernel("Squeeze")
def _squeeze(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    dims = op.arg("dims")
    if dims is None:
        return [np.squeeze(x)]
    dims = tuple(canonical_axis(int(d), x.ndim) for d in dims)
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"cannot squeeze dim {d} of size {x.shape[d]}")
    return [np.squeeze(x, axis=dims)]


@kernel("Cast")
def _cast(op: Op, inputs: list[Any]) -> list[Any]:
    to = op.arg("to")
    if to is None:
        raise ValueError("Cast needs a 'to' argument")
    return [np.asarray(inputs[0]).astype(dtype_of(to))]

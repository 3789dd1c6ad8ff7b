"""Shape rules of the data-movement ops (the executor's ``kernels_tensor``): concat, split,
slice, reshapes, transposes, copies, casts, ``Shape`` and ``Gather``.

Shapes computed inside a net (``Shape`` -> ``Gather`` -> ``ExpandDims`` -> ``Concat`` ->
``Reshape``, as ONNX exports write ``x.view(x.size(0), -1)``) are followed through the value
rules here: the contents of small integer blobs are tracked, so a ``Reshape`` whose shape is
such a blob still gets a static (possibly symbolic) shape.
"""

from __future__ import annotations

import numpy as np

from graphtools.analysis.copies import VALUE_COPIES
from graphtools.analysis.dtypes import dtype_of
from graphtools.analysis.op_args import canonical_axis, order
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    Dim,
    Product,
    TensorType,
    Values,
    count,
    dim_product,
    explained,
    format_shape,
    promoted,
    same_dim,
    same_shape,
    shape_rule,
    value_rule,
    with_shape,
)
from graphtools.ir import Op

_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)


def _axis_from_order(op: Op) -> int:
    """``axis`` when given, else the channel axis of ``order`` (Caffe2's Concat/Split rule)."""
    if op.has_arg("axis"):
        return int(op.arg("axis"))
    return 3 if order(op) == "NHWC" else 1


def _data_dependent(t: TensorType, what: str) -> TensorType:
    return explained(t, f"data-dependent: {what} read from an input whose values are not known")


@shape_rule("Concat", "DepthConcat")
def _concat(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Inputs joined along ``axis`` (or stacked on a new one with ``add_axis``); the second
    output, ``split_info``, holds each input's size along it (int32)."""
    need(op, inputs, 1)
    dtype = promoted(*(t.dtype for t in inputs))
    split_info = TensorType(_INT32, (len(inputs),))
    known = [t.shape for t in inputs if t.shape is not None]
    if not known:
        return [TensorType(dtype, None), split_info]
    ndim = len(known[0])
    for shape in known[1:]:
        if len(shape) != ndim:
            raise ValueError(f"inputs of ranks {len(known[0])} and {len(shape)} cannot be joined")
    if op.arg("add_axis", 0):
        axis = canonical_axis(_axis_from_order(op), ndim + 1)
        base = known[0]
        for shape in known[1:]:
            base = same_shape(base, shape, "stacked inputs need equal shapes")
        return [TensorType(dtype, (*base[:axis], len(inputs), *base[axis:])), split_info]
    axis = canonical_axis(_axis_from_order(op), ndim)
    out: list[Dim] = list(known[0])
    for shape in known[1:]:
        for i in range(ndim):
            if i != axis:
                what = f"non-axis dim {i} of {format_shape(known[0])} and {format_shape(shape)}"
                out[i] = same_dim(out[i], shape[i], what)
    sizes = [None if t.shape is None else t.shape[axis] for t in inputs]
    if len(sizes) == 1:
        out[axis] = sizes[0]
    elif all(isinstance(s, int) for s in sizes):
        out[axis] = sum(s for s in sizes if isinstance(s, int))
    else:
        out[axis] = None
    return [TensorType(dtype, tuple(out)), split_info]


@value_rule("Concat", "DepthConcat")
def _concat_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    pairs = zip(inputs, values, strict=True)
    if op.arg("add_axis", 0) or any(v is None or t.rank != 1 for t, v in pairs):
        return [None]
    if canonical_axis(_axis_from_order(op), 1) != 0:
        return [None]
    return [tuple(d for v in values if v is not None for d in v)]


@shape_rule("Split", "DepthSplit", values=True)
def _split(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    """Equal parts along ``axis``, or the sizes of ``split`` or of a second input."""
    need(op, inputs, 1)
    x, parts = inputs[0], len(op.outputs)
    if x.shape is None:
        return [with_shape(x, None)] * parts
    axis = canonical_axis(_axis_from_order(op), len(x.shape))
    size = x.shape[axis]
    sizes: list[Dim]
    dependent = False
    if len(inputs) > 1:
        given = values[1]
        dependent = given is None
        sizes = [None] * parts if given is None else list(given)
    elif op.arg("split") is not None:
        sizes = [int(v) for v in op.arg("split")]
    elif isinstance(size, int):
        if size % parts:
            raise ValueError(f"axis {axis} (size {size}) does not split into {parts} equal parts")
        sizes = [size // parts] * parts
    else:
        sizes = [size if parts == 1 else None] * parts
    if len(sizes) != parts:
        raise ValueError(f"split sizes {sizes} do not make {parts} parts")
    ints = [s for s in sizes if isinstance(s, int)]
    if isinstance(size, int) and len(ints) == len(sizes) and sum(ints) != size:
        raise ValueError(f"split sizes {sizes} do not sum to the size of axis {axis}, {size}")
    outs = []
    for part in sizes:
        shape = list(x.shape)
        shape[axis] = part
        if op.arg("add_axis", 0):
            if isinstance(part, int) and part != 1:
                raise ValueError(f"add_axis needs parts of size 1, got {part}")
            del shape[axis]
        out = with_shape(x, tuple(shape))
        outs.append(_data_dependent(out, "split sizes") if dependent else out)
    return outs


def _bound(index: int, size: Dim) -> Dim:
    """Caffe2 Slice's bound: a negative ``e`` means ``size + 1 + e``; clipped to ``size``."""
    if isinstance(size, int):
        return min(size + 1 + index if index < 0 else index, size)
    return size if index == -1 else (index if index >= 0 else None)


def slice_shape(
    shape: tuple[Dim, ...], starts: list[Dim], ends: list[Dim]
) -> tuple[tuple[Dim, ...], list[tuple[Dim, Dim]]]:
    """Caffe2 Slice's output shape and each sliced dim's ``(start, end)`` (``None`` unknown)."""
    if len(starts) != len(ends) or len(starts) > len(shape):
        raise ValueError(f"starts {starts} and ends {ends} do not fit {format_shape(shape)}")
    out = list(shape)
    spans: list[tuple[Dim, Dim]] = []
    for dim, (start, end) in enumerate(zip(starts, ends, strict=True)):
        size = shape[dim]
        if not isinstance(start, int) or not isinstance(end, int):
            out[dim] = None
            spans.append((None, None))
            continue
        lo, hi = _bound(start, size), _bound(end, size)
        if isinstance(lo, int) and isinstance(hi, int):
            if lo < 0 or hi < lo:
                raise ValueError(f"bad slice [{lo}, {hi}) on dim {dim} of size {size}")
            out[dim] = hi - lo
        elif lo == 0 and hi == size:
            out[dim] = size
        else:
            out[dim] = None
        spans.append((lo, hi))
    return tuple(out), spans


@shape_rule("Slice", values=True)
def _slice(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if len(inputs) == 3:
        starts, ends = values[1], values[2]
        if starts is None or ends is None:
            return [
                _data_dependent(
                    with_shape(x, None if x.shape is None else (None,) * len(x.shape)),
                    "slice bounds",
                )
            ]
    else:
        starts = tuple(int(v) for v in op.arg("starts", ()))
        ends = tuple(int(v) for v in op.arg("ends", ()))
    if x.shape is None:
        return [x]
    return [with_shape(x, slice_shape(x.shape, list(starts), list(ends))[0])]


@value_rule("Slice")
def _slice_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    x = values[0]
    if x is None or inputs[0].rank != 1:
        return [None]
    if len(inputs) == 3:
        if values[1] is None or values[2] is None:
            return [None]
        starts, ends = list(values[1]), list(values[2])
    else:
        starts = [int(v) for v in op.arg("starts", ())]
        ends = [int(v) for v in op.arg("ends", ())]
    if not starts:
        return [x]
    _, spans = slice_shape((len(x),), starts, ends)
    lo, hi = spans[0]
    if not isinstance(lo, int) or not isinstance(hi, int):
        return [None]
    return [x[lo:hi]]


def reshape_target(shape: Values, old: tuple[Dim, ...] | None) -> tuple[Dim, ...]:
    """Caffe2 Reshape's new shape over possibly symbolic dims: 0 copies the input dim at that
    index, one -1 takes what is left (a symbol when the symbols cancel, else ``None``).

    Raises:
        ValueError: more than one -1, or known sizes that cannot match.
    """
    new: list[Dim] = []
    for i, size in enumerate(shape):
        if size == 0:
            new.append(None if old is None else old[i] if i < len(old) else 0)
        else:
            new.append(size)
    if new.count(-1) > 1:
        raise ValueError(f"shape {list(shape)} has more than one -1")
    whole = None if old is None else Product.of(old)
    if -1 in new:
        rest = Product.of(d for d in new if d != -1)
        if rest is not None and not rest.symbols and rest.coefficient == 0:
            raise ValueError(f"cannot reshape {format_shape(old)} into {list(shape)}")
        left = None if whole is None or rest is None else whole.divided_by(rest)
        static = whole is not None and rest is not None and not (whole.symbols or rest.symbols)
        if left is None and static:
            raise ValueError(f"cannot reshape {format_shape(old)} into {list(shape)}")
        new[new.index(-1)] = None if left is None else left.as_dim()
    elif whole is not None:
        after = Product.of(new)
        if after is not None and after != whole and not (whole.symbols or after.symbols):
            raise ValueError(
                f"cannot reshape {format_shape(old)} ({whole.coefficient} values) into "
                f"{list(shape)}"
            )
    return tuple(new)


#: numpy's limit on the number of dimensions of an array.
_MAX_RANK = 64


@shape_rule("Reshape", values=True)
def _reshape(op: Op, inputs: list[TensorType], values: list[Values | None]) -> list[TensorType]:
    """The reshaped input, and as second output the old shape (int64)."""
    need(op, inputs, 1)
    x = inputs[0]
    old_shape = TensorType(_INT64, (None if x.shape is None else len(x.shape),))
    if len(inputs) > 1:
        if op.has_arg("shape"):
            raise ValueError("Reshape got the new shape both as argument and as input")
        shape_input = inputs[1].shape
        if shape_input is not None and len(shape_input) != 1:
            raise ValueError(f"Reshape's new shape must be a 1-D tensor, got shape {shape_input}")
        length = count(shape_input)
        if length is not None and length > _MAX_RANK:
            raise ValueError(f"Reshape's new shape has {length} dims; numpy allows {_MAX_RANK}")
        target = values[1]
        if target is None:
            shape = None if length is None else (None,) * length
            return [_data_dependent(with_shape(x, shape), "the new shape"), old_shape]
    else:
        shape_arg = op.arg("shape")
        if shape_arg is None:
            raise ValueError("Reshape needs a 'shape' argument or a second input")
        target = tuple(int(v) for v in shape_arg)
    return [with_shape(x, reshape_target(target, x.shape)), old_shape]


@shape_rule("Flatten")
def _flatten(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.shape is None:
        return [with_shape(x, (None, None))]
    axis = int(op.arg("axis", 1))
    axis = canonical_axis(axis, len(x.shape)) if axis != len(x.shape) else axis
    return [with_shape(x, (dim_product(x.shape[:axis]), dim_product(x.shape[axis:])))]


@shape_rule("FlattenToVec")
def _flatten_to_vec(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    return [with_shape(x, (None if x.shape is None else dim_product(x.shape),))]


@value_rule("Reshape", "Flatten", "FlattenToVec", "ExpandDims", "Squeeze", "Cast")
def _same_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    return [values[0]]


@shape_rule("Transpose")
def _transpose(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    axes = op.arg("axes")
    if x.shape is None:
        return [x if axes is None else with_shape(x, (None,) * len(axes))]
    if axes is None:
        return [with_shape(x, tuple(reversed(x.shape)))]
    perm = [canonical_axis(int(a), len(x.shape)) for a in axes]
    if sorted(perm) != list(range(len(x.shape))):
        raise ValueError(f"axes {list(axes)} are not a permutation of {len(x.shape)} dims")
    return [with_shape(x, tuple(x.shape[a] for a in perm))]


def _layout_move(op: Op, inputs: list[TensorType], to_last: bool) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    if x.shape is None:
        return [x]
    if len(x.shape) < 3:
        raise ValueError(f"{op.type} needs at least 3 dims, got {x}")
    s = x.shape
    moved = (s[0], *s[2:], s[1]) if to_last else (s[0], s[-1], *s[1:-1])
    return [with_shape(x, moved)]


@shape_rule("NCHW2NHWC")
def _nchw2nhwc(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return _layout_move(op, inputs, True)


@shape_rule("NHWC2NCHW")
def _nhwc2nchw(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    return _layout_move(op, inputs, False)


@shape_rule(*VALUE_COPIES)
def _identity(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Device copies and aliases: the value itself (an Int8 blob stays one)."""
    need(op, inputs, 1)
    return [inputs[0]]


@value_rule(*VALUE_COPIES)
def _identity_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    return [values[0]]


def _shape_axes(op: Op, rank: int) -> list[int] | None:
    axes = op.arg("axes")
    return None if axes is None else [canonical_axis(int(a), rank) for a in axes]


@shape_rule("Shape")
def _shape(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    axes = op.arg("axes")
    if x.shape is None:
        return [TensorType(_INT64, (None if axes is None else len(axes),))]
    picked = _shape_axes(op, len(x.shape))
    return [TensorType(_INT64, (len(x.shape) if picked is None else len(picked),))]


@value_rule("Shape")
def _shape_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    shape = inputs[0].shape
    if shape is None:
        return [None]
    picked = _shape_axes(op, len(shape))
    return [shape if picked is None else tuple(shape[a] for a in picked)]


@shape_rule("Gather")
def _gather(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """``np.take(data, indices, axis)``: data's dims around ``axis``, indices' dims at it."""
    need(op, inputs, 2)
    data, indices = inputs[0], inputs[1]
    if indices.dtype is not None and not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(f"Gather indices must be integers, got {indices}")
    if data.shape is None or indices.shape is None:
        return [with_shape(data, None)]
    axis = canonical_axis(int(op.arg("axis", 0)), len(data.shape))
    shape = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :])
    return [with_shape(data, shape)]


@value_rule("Gather")
def _gather_values(
    op: Op, inputs: list[TensorType], values: list[Values | None]
) -> list[Values | None]:
    data, indices = values
    if data is None or indices is None or inputs[0].rank != 1:
        return [None]
    size = len(data)
    picked = []
    for i in indices:
        if not isinstance(i, int) or not -size <= i < size:
            return [None]
        picked.append(data[i])
    return [tuple(picked)]


@shape_rule("ExpandDims")
def _expand_dims(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    dims = sorted(int(d) for d in op.arg("dims", ()))
    if not dims or len(set(dims)) != len(dims):
        raise ValueError(f"ExpandDims needs distinct dims, got {dims}")
    if x.shape is None:
        return [x]
    shape = list(x.shape)
    for d in dims:
        position = canonical_axis(d, len(shape) + 1)
        shape.insert(position, 1)
    return [with_shape(x, tuple(shape))]


@shape_rule("Squeeze")
def _squeeze(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    x = inputs[0]
    dims = op.arg("dims")
    if x.shape is None:
        return [x]
    if dims is None:
        if all(isinstance(d, int) for d in x.shape):
            return [with_shape(x, tuple(d for d in x.shape if d != 1))]
        return [explained(with_shape(x, None), "Squeeze without dims of a non-static shape")]
    picked = {canonical_axis(int(d), len(x.shape)) for d in dims}
    for d in picked:
        if isinstance(x.shape[d], int) and x.shape[d] != 1:
            raise ValueError(f"cannot squeeze dim {d} of size {x.shape[d]}")
    return [with_shape(x, tuple(s for i, s in enumerate(x.shape) if i not in picked))]


@shape_rule("Cast")
def _cast(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    need(op, inputs, 1)
    to = op.arg("to")
    if to is None:
        raise ValueError("Cast needs a 'to' argument")
    return [TensorType(np.dtype(dtype_of(to)), inputs[0].shape)]

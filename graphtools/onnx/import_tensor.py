"""Importers for shape and data-movement ops: reshapes, gathers, concat/split/slice, casts, pads,
nearest-neighbour resizing, identities and constant fills.

ONNX inputs that Caffe2 takes as arguments (Unsqueeze/Squeeze axes from opset 13, Split sizes
from 13, Slice bounds from 10, Pad pads from 11, Resize scales) must be constants; a computed
one is refused. Caffe2's Reshape and Concat always have a second output (the old shape, the
split sizes): a fresh name is given to it.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from graphtools.onnx.context import NodeContext, int_list
from graphtools.onnx.dtypes import caffe2_dtype
from graphtools.onnx.registry import converter

__all__: list[str] = []

_INT_MAX = 2**31 - 1


@converter("Reshape", since=(5, 13, 14, 19, 21, 23, 24, 25), attributes=("allowzero",))
def _reshape(ctx: NodeContext) -> None:
    """Caffe2 copies the input dim where the shape says 0 (ONNX ``allowzero=0``)."""
    if int(ctx.attr("allowzero", 0)):
        shape = ctx.const(1)
        if shape is None:
            raise ctx.refuse(
                "with a shape computed at run time: Caffe2's Reshape copies the input dim "
                "where the shape is 0",
                "allowzero",
            )
        if (shape == 0).any():
            raise ctx.refuse("with a 0 in the shape (an empty dim) has no Caffe2 form", "allowzero")
    y = ctx.outputs[0]
    ctx.emit("Reshape", ctx.inputs[:2], [y, ctx.fresh(f"{y}_old_shape")])


@converter("Flatten", since=(1, 9, 11, 13, 21, 23, 24, 25), attributes=("axis",))
def _flatten(ctx: NodeContext) -> None:
    axis = int(ctx.attr("axis", 1))
    if axis < 0:
        axis += ctx.need_rank(ctx.inputs[0], "negative Flatten axis")
    ctx.emit("Flatten", ctx.inputs, ctx.outputs, axis=axis)


@converter("Shape", since=(1, 13, 15, 19, 21, 23, 24, 25), attributes=("start", "end"))
def _shape(ctx: NodeContext) -> None:
    start, end = ctx.attr("start", 0), ctx.attr("end")
    if start == 0 and end is None:
        ctx.emit("Shape", ctx.inputs, ctx.outputs)
        return
    rank = ctx.need_rank(ctx.inputs[0], "Shape with start/end")
    axes = list(range(rank))[slice(start, end)]
    if not axes:
        raise ctx.refuse(
            "selects no dimension (an empty shape) which Caffe2's Shape cannot give", "start"
        )
    ctx.emit("Shape", ctx.inputs, ctx.outputs, axes=axes)


@converter("Gather", since=(1, 11, 13), attributes=("axis",))
def _gather(ctx: NodeContext) -> None:
    ctx.emit("Gather", ctx.inputs, ctx.outputs, axis=int(ctx.attr("axis", 0)))


def _axes(ctx: NodeContext, since_input: int) -> list[int] | None:
    if ctx.since >= since_input:
        return None if ctx.input(1) is None else int_list(ctx.need_const(1, "axes"))
    axes = ctx.attr("axes")
    return None if axes is None else list(axes)


@converter("Unsqueeze", since=(1, 11, 13, 21, 23, 24, 25), attributes=("axes",))
def _unsqueeze(ctx: NodeContext) -> None:
    axes = _axes(ctx, 13)
    if not axes:
        raise ctx.refuse("needs axes")
    if any(a < 0 for a in axes):
        rank = ctx.need_rank(ctx.inputs[0], "negative Unsqueeze axes") + len(axes)
        axes = [a % rank for a in axes]
    ctx.emit("ExpandDims", [ctx.inputs[0]], ctx.outputs, dims=sorted(axes))


@converter("Squeeze", since=(1, 11, 13, 21, 23, 24, 25), attributes=("axes",))
def _squeeze(ctx: NodeContext) -> None:
    """Caffe2's Squeeze needs explicit non-negative dims; implicit ones come from the shape."""
    x = ctx.inputs[0]
    axes = _axes(ctx, 13)
    if not axes:
        shape = ctx.shape(x)
        if shape is None or None in shape:
            raise ctx.refuse(f"without axes needs the static shape of {x!r}")
        axes = [i for i, d in enumerate(shape) if d == 1]
    if any(a < 0 for a in axes):
        rank = ctx.need_rank(x, "negative Squeeze axes")
        axes = [a % rank for a in axes]
    if not axes:
        ctx.emit("Copy", [x], ctx.outputs)
        return
    ctx.emit("Squeeze", [x], ctx.outputs, dims=sorted(axes))


@converter("Concat", since=(4, 11, 13), attributes=("axis",))
def _concat(ctx: NodeContext) -> None:
    y = ctx.outputs[0]
    ctx.emit("Concat", ctx.inputs, [y, ctx.fresh(f"{y}_split_info")], axis=int(ctx.attr("axis")))


@converter("Split", since=(2, 11, 13, 18), attributes=("axis", "split", "num_outputs"))
def _split(ctx: NodeContext) -> None:
    x = ctx.inputs[0]
    axis = int(ctx.attr("axis", 0))
    if ctx.since >= 13:
        split = None if ctx.input(1) is None else int_list(ctx.need_const(1, "split"))
    else:
        split = None if ctx.attr("split") is None else list(ctx.attr("split"))
    count = len(ctx.node.output)
    if split is None and ctx.since >= 18:
        shape = ctx.shape(x)
        size = None if shape is None else shape[axis]
        if size is not None and size % count:
            chunk = -(-size // count)
            split = [chunk] * (count - 1) + [size - chunk * (count - 1)]
    outputs = [name or ctx.fresh(f"{x}_split_unused") for name in ctx.node.output]
    ctx.emit("Split", [x], outputs, axis=axis, split=split)


@converter("Slice", since=(1, 10, 11, 13), attributes=("starts", "ends", "axes"))
def _slice(ctx: NodeContext) -> None:
    """Caffe2's Slice covers dims ``0..k`` with inclusive-from-the-end negative ends; bounds
    are resolved against static dims when known, else shifted by one where negative."""
    x = ctx.inputs[0]
    if ctx.since >= 10 and (ctx.const(1) is None or ctx.const(2) is None):
        _slice_at_run_time(ctx)
        return
    if ctx.since < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = None if ctx.attr("axes") is None else list(ctx.attr("axes"))
    else:
        starts = int_list(ctx.need_const(1, "starts"))
        ends = int_list(ctx.need_const(2, "ends"))
        axes = None if ctx.input(3) is None else int_list(ctx.need_const(3, "axes"))
        if ctx.input(4) is not None and any(s != 1 for s in int_list(ctx.need_const(4, "steps"))):
            raise ctx.refuse("steps other than 1 have no Caffe2 Slice form")
    if axes is None:
        axes = list(range(len(starts)))
    if any(a < 0 for a in axes):
        rank = ctx.need_rank(x, "negative Slice axes")
        axes = [a % rank for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.refuse(f"repeats an axis ({axes})")
    shape = ctx.shape(x)
    count = max(axes) + 1
    c_starts, c_ends = [0] * count, [-1] * count
    for axis, start, end in zip(axes, starts, ends, strict=True):
        dim = shape[axis] if shape is not None and axis < len(shape) else None
        if dim is not None:
            start = min(max(start + dim if start < 0 else start, 0), dim)
            end = min(max(end + dim if end < 0 else end, 0), dim)
            end = max(end, start)
            c_starts[axis], c_ends[axis] = start, -1 if end == dim else end
        else:
            c_starts[axis] = start - 1 if start < 0 else min(start, _INT_MAX)
            c_ends[axis] = -1 if end >= _INT_MAX else (end - 1 if end < 0 else end)
    ctx.emit("Slice", [x], ctx.outputs, starts=c_starts, ends=c_ends)


def _slice_at_run_time(ctx: NodeContext) -> None:
    """Bounds computed at run time: Caffe2's Slice with bound inputs, each negative bound
    moved down by one (ONNX counts ``-1`` as the last element, Caffe2 as the end). The axes
    must be constant and ``0..k-1`` in order (Caffe2 slices the leading dims), steps 1."""
    starts, ends = ctx.inputs[1], ctx.inputs[2]
    axes = None if ctx.input(3) is None else int_list(ctx.need_const(3, "axes"))
    if ctx.input(4) is not None and any(s != 1 for s in int_list(ctx.need_const(4, "steps"))):
        raise ctx.refuse("steps other than 1 have no Caffe2 Slice form")
    if axes is not None and axes != list(range(len(axes))):
        raise ctx.refuse(
            f"run-time bounds on axes {axes}: Caffe2's Slice takes bound inputs for the "
            "leading dims 0..k-1 only"
        )
    zero = ctx.fresh("slice_zero")
    ctx.emit("ConstantFill", [], [zero], shape=[], dtype=10, value=0)
    moved = []
    for bound in (starts, ends):
        wide, negative, shift, value = (
            ctx.fresh(f"{bound}_{k}") for k in ("int64", "negative", "shift", "caffe2")
        )
        ctx.emit("Cast", [bound], [wide], to=10)
        ctx.emit("LT", [wide, zero], [negative])
        ctx.emit("Cast", [negative], [shift], to=10)
        ctx.emit("Sub", [wide, shift], [value])
        moved.append(value)
    ctx.emit("Slice", [ctx.inputs[0], *moved], ctx.outputs)


@converter("Transpose", since=(1, 13, 21, 23, 24, 25), attributes=("perm",))
def _transpose(ctx: NodeContext) -> None:
    perm = ctx.attr("perm")
    ctx.emit("Transpose", ctx.inputs, ctx.outputs, axes=None if perm is None else list(perm))


@converter(
    "Cast", since=(6, 9, 13, 19, 21, 23, 24, 25, 28), attributes=("to", "saturate", "round_mode")
)
def _cast(ctx: NodeContext) -> None:
    """``saturate`` and ``round_mode`` only act on float8/float4 targets, which are refused."""
    to = int(ctx.attr("to"))
    if to == TensorProto.STRING:
        raise ctx.refuse("(to STRING) has no Caffe2 Cast form", "to")
    ctx.emit("Cast", ctx.inputs, ctx.outputs, to=caffe2_dtype(to, ctx.where))


@converter("Pad", since=(2, 11, 13, 18, 19, 21, 23, 24, 25), attributes=("mode", "pads", "value"))
def _pad(ctx: NodeContext) -> None:
    """Caffe2's PadImage pads the two spatial dims of a 4-D NCHW tensor."""
    x = ctx.inputs[0]
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise ctx.refuse("has no Caffe2 PadImage mode", "mode")
    if ctx.since < 11:
        pads, value = list(ctx.attr("pads")), float(ctx.attr("value", 0.0))
    else:
        pads = int_list(ctx.need_const(1, "pads"))
        value = 0.0
        if ctx.input(2) is not None:
            value = float(ctx.need_const(2, "constant_value").reshape(-1)[0])
        if ctx.input(3) is not None:
            axes = int_list(ctx.need_const(3, "axes"))
            rank = ctx.need_rank(x, "Pad with axes")
            full = [0] * (2 * rank)
            for i, axis in enumerate(axes):
                full[axis % rank] = pads[i]
                full[rank + axis % rank] = pads[len(axes) + i]
            pads = full
    if len(pads) != 8:
        raise ctx.refuse(f"pads a {len(pads) // 2}-D tensor; Caffe2's PadImage pads 4-D ones")
    if any(pads[i] for i in (0, 1, 4, 5)):
        raise ctx.refuse(f"pads {pads} pad the batch or channel dim; PadImage pads H and W only")
    if any(p < 0 for p in pads):
        raise ctx.refuse(f"negative pads {pads} (cropping) are not supported")
    ctx.emit(
        "PadImage",
        [x],
        ctx.outputs,
        pads=[pads[2], pads[3], pads[6], pads[7]],
        mode=mode,
        value=value if mode == "constant" else None,
    )


def _rounds_to_floor(scale: int, coordinates: str, nearest: str) -> bool:
    """Whether ONNX nearest resizing by an integer ``scale`` picks ``floor(i / scale)``.

    Source coordinates are ``k + g(r)`` for output ``i = k*scale + r`` and every rounding
    mode commutes with adding an integer, so checking ``r < scale`` (where ``k = 0``) suffices.
    """
    for r in range(scale):
        if coordinates == "asymmetric":
            x = r / scale
        elif coordinates in ("half_pixel", "pytorch_half_pixel"):
            x = (r + 0.5) / scale - 0.5
        else:
            return False
        if nearest == "floor":
            picked = np.floor(x)
        elif nearest == "ceil":
            picked = np.ceil(x)
        elif nearest == "round_prefer_floor":
            picked = np.ceil(x - 0.5)
        elif nearest == "round_prefer_ceil":
            picked = np.floor(x + 0.5)
        else:
            return False
        if picked != 0:
            return False
    return True


def _resize_nearest(ctx: NodeContext, scales: list[float], coordinates: str, nearest: str) -> None:
    if len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        raise ctx.refuse(f"scales {scales}: Caffe2's ResizeNearest scales H and W of NCHW only")
    for scale in scales[2:]:
        if scale <= 0:
            raise ctx.refuse(f"scales {scales}: a scale must be positive")
        if coordinates == "asymmetric" and nearest == "floor":
            continue  # Caffe2's min(floor(i / scale), size - 1) at any scale
        if scale != int(scale) or scale < 1:
            raise ctx.refuse(
                f"scales {scales} with coordinate_transformation_mode {coordinates!r}: only "
                "integer upscaling is supported (any scale with 'asymmetric' and 'floor')"
            )
        if not _rounds_to_floor(int(scale), coordinates, nearest):
            raise ctx.refuse(
                f"coordinate_transformation_mode {coordinates!r} with nearest_mode {nearest!r} "
                f"does not pick the same pixels as Caffe2's ResizeNearest at scale {scale}",
                "coordinate_transformation_mode",
            )
    ctx.emit(
        "ResizeNearest",
        [ctx.inputs[0]],
        ctx.outputs,
        height_scale=float(scales[2]),
        width_scale=float(scales[3]),
    )


@converter("Upsample", since=(7, 9, 10), attributes=("mode", "scales"))
def _upsample(ctx: NodeContext) -> None:
    if ctx.attr("mode", "nearest") != "nearest":
        raise ctx.refuse("only nearest upsampling has a Caffe2 form", "mode")
    if ctx.since < 9:
        scales = [float(s) for s in ctx.attr("scales")]
    else:
        scales = [float(s) for s in ctx.need_const(1, "scales").reshape(-1)]
    _resize_nearest(ctx, scales, "asymmetric", "floor")


@converter(
    "Resize",
    since=(10, 11, 13, 18, 19),
    attributes=(
        "mode",
        "coordinate_transformation_mode",
        "nearest_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "antialias",
        "axes",
        "keep_aspect_ratio_policy",
    ),
)
def _resize(ctx: NodeContext) -> None:
    """Nearest mode only; ``cubic_coeff_a``, ``exclude_outside``, ``antialias`` and
    ``extrapolation_value`` do not act in nearest mode outside ``tf_crop_and_resize``."""
    if ctx.attr("mode", "nearest") != "nearest":
        raise ctx.refuse("only nearest resizing has a Caffe2 form", "mode")
    x = ctx.inputs[0]
    if ctx.since == 10:
        coordinates, nearest = "asymmetric", "floor"
        scales = [float(s) for s in ctx.need_const(1, "scales").reshape(-1)]
    else:
        coordinates = ctx.attr("coordinate_transformation_mode", "half_pixel")
        nearest = ctx.attr("nearest_mode", "round_prefer_floor")
        scale_input = ctx.input(2)
        scale_values = None if scale_input is None else ctx.need_const(2, "scales")
        if scale_values is not None and scale_values.size:
            scales = [float(s) for s in scale_values.reshape(-1)]
        elif ctx.input(3) is not None:
            if ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
                raise ctx.refuse("is not supported", "keep_aspect_ratio_policy")
            sizes = int_list(ctx.need_const(3, "sizes"))
            shape = ctx.shape(x)
            axes = list(ctx.attr("axes", range(len(sizes))))
            if shape is None or any(shape[a] is None for a in axes):
                raise ctx.refuse(f"with sizes needs the static shape of {x!r}")
            scales = [1.0] * len(shape)
            for axis, size in zip(axes, sizes, strict=True):
                scales[axis] = size / int(shape[axis] or 1)
        else:
            raise ctx.refuse("needs scales or sizes")
        axes = ctx.attr("axes")
        if axes is not None and len(scales) != 4:
            full = [1.0] * 4
            for axis, scale in zip(axes, scales, strict=True):
                full[axis % 4] = scale
            scales = full
    _resize_nearest(ctx, scales, coordinates, nearest)


@converter("Identity", since=(1, 13, 14, 16, 19, 21, 23, 24, 25))
def _identity(ctx: NodeContext) -> None:
    ctx.emit("Copy", ctx.inputs, ctx.outputs)


@converter("ConstantOfShape", since=(9, 20, 21, 23, 24, 25), attributes=("value",))
def _constant_of_shape(ctx: NodeContext) -> None:
    tensor = ctx.attr("value")
    if tensor is None:
        value, elem_type = 0.0, TensorProto.FLOAT
    else:
        array = numpy_helper.to_array(tensor).reshape(-1)
        if array.size != 1:
            raise ctx.refuse("must hold one value", "value")
        elem_type = tensor.data_type
        scalar = array[0].item()
        value = scalar if isinstance(scalar, int | float) else float(scalar)
    dtype = caffe2_dtype(elem_type, ctx.where)
    if elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16):
        value = float(value)
    else:
        value = int(value)
    ctx.emit("ConstantFill", ctx.inputs, ctx.outputs, input_as_shape=1, dtype=dtype, value=value)

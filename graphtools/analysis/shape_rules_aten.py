"""Shape rules of ``ATen`` (the executor's ``kernels_aten``): the PyTorch-export fallback op,
for the ATen functions the executor runs (``max``, ``unsqueeze``, ``grid_sampler``); any other
``operator`` is unsupported there too, so its outputs are unknown with that reason."""

from __future__ import annotations

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.analysis.shape_rules_math import reduced
from graphtools.analysis.shape_rules_nn import need
from graphtools.analysis.shape_types import (
    TensorType,
    broadcast_shapes,
    result_dtype,
    same_dim,
    shape_rule,
    with_shape,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op

_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)


def _max(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """``max(self)`` (a 0-d value), ``max(self, other)`` (element-wise) or ``max(self, dim,
    keepdim)`` (values and int64 indices)."""
    x = inputs[0]
    if not op.has_arg("dim"):
        if len(inputs) > 1:
            other = inputs[1]
            dtype = result_dtype(np.maximum, x.dtype, other.dtype)
            if x.shape is None or other.shape is None:
                return [TensorType(dtype, None)]
            return [TensorType(dtype, broadcast_shapes(x.shape, other.shape))]
        return [with_shape(x, ())]
    if x.shape is None:
        return [x, TensorType(_I64, None)]
    shape = reduced(x.shape, [int(op.arg("dim"))], bool(op.arg("keepdim", 0)))
    return [with_shape(x, shape), TensorType(_I64, shape)]


def _unsqueeze(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    x = inputs[0]
    if x.shape is None:
        return [x]
    axis = canonical_axis(int(op.arg("dim", 0)), len(x.shape) + 1)
    return [with_shape(x, (*x.shape[:axis], 1, *x.shape[axis:]))]


def _grid_sampler(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    """Bilinear sampling of an (N, C, H, W) input at an (N, Ho, Wo, 2) grid: float32
    (N, C, Ho, Wo)."""
    need(op, inputs, 2)
    if int(op.arg("interpolation_mode", 0)) != 0:
        raise UnsupportedOpError("ATen grid_sampler supports bilinear interpolation only")
    padding = int(op.arg("padding_mode", 0))
    if padding not in (0, 1):
        raise UnsupportedOpError(f"ATen grid_sampler padding_mode {padding} is not supported")
    x, grid = inputs[0], inputs[1]
    for t, what in ((x, "input (N, C, H, W)"), (grid, "grid (N, Ho, Wo, 2)")):
        if t.shape is not None and len(t.shape) != 4:
            raise ValueError(f"grid_sampler needs a 4-D {what}, got {t}")
    n, c = (None, None) if x.shape is None else x.shape[:2]
    if grid.shape is None:
        return [TensorType(_F32, (n, c, None, None))]
    same_dim(grid.shape[3], 2, f"the last dim of the grid {grid}")
    n = same_dim(n, grid.shape[0], f"the batch of the grid {grid} against the input {x}")
    return [TensorType(_F32, (n, c, grid.shape[1], grid.shape[2]))]


_OPERATORS = {"max": _max, "unsqueeze": _unsqueeze, "grid_sampler": _grid_sampler}


@shape_rule("ATen")
def _aten(op: Op, inputs: list[TensorType]) -> list[TensorType]:
    name = op.arg("operator")
    if name is None:
        raise ValueError("ATen needs an 'operator' argument")
    name = name.decode() if isinstance(name, bytes) else str(name)
    function = _OPERATORS.get(name)
    if function is None:
        raise UnsupportedOpError(f"ATen operator {name!r} has no executor kernel")
    need(op, inputs, 1)
    return function(op, inputs)

"""``ATen``: the PyTorch-export fallback op that names an ATen function in ``operator``.

Only the functions real exports use are implemented (``max``, ``unsqueeze``,
``grid_sampler``); any other ``operator`` is refused with ``UnsupportedOpError`` naming it.
Arguments are the ATen function's keyword arguments, as the exporter wrote them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphtools.analysis.op_args import canonical_axis
from graphtools.errors import UnsupportedOpError
from graphtools.executor.registry import kernel
from graphtools.ir import Op


def _max(op: Op, inputs: list[Any]) -> list[Any]:
    """``max(self)`` (one 0-d value) or ``max(self, dim, keepdim=False)`` (values, int64
    indices of the first maximum)."""
    x = np.asarray(inputs[0])
    if not op.has_arg("dim"):
        if len(inputs) > 1:
            return [np.maximum(x, np.asarray(inputs[1]))]
        return [np.asarray(x.max())]
    axis = canonical_axis(int(op.arg("dim")), x.ndim)
    keepdim = bool(op.arg("keepdim", 0))
    indices = np.argmax(x, axis=axis, keepdims=keepdim).astype(np.int64)
    return [np.max(x, axis=axis, keepdims=keepdim), indices]


def _unsqueeze(op: Op, inputs: list[Any]) -> list[Any]:
    x = np.asarray(inputs[0])
    axis = canonical_axis(int(op.arg("dim", 0)), x.ndim + 1)
    return [np.expand_dims(x, axis)]


def _grid_sampler(op: Op, inputs: list[Any]) -> list[Any]:
    """Bilinear ``grid_sampler(input, grid, [interpolation_mode,] padding_mode)`` on 4-D NCHW.

    ``padding_mode`` 0 is zeros, 1 border; ``align_corners`` defaults to true, the only
    behaviour of the PyTorch versions (< 1.3) whose exporter omitted the argument.
    """
    x = np.asarray(inputs[0], dtype=np.float32)
    grid = np.asarray(inputs[1], dtype=np.float32)
    if int(op.arg("interpolation_mode", 0)) != 0:
        raise UnsupportedOpError("ATen grid_sampler supports bilinear interpolation only")
    padding = int(op.arg("padding_mode", 0))
    if padding not in (0, 1):
        raise UnsupportedOpError(f"ATen grid_sampler padding_mode {padding} is not supported")
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[3] != 2 or grid.shape[0] != x.shape[0]:
        raise ValueError(
            f"grid_sampler needs input (N, C, H, W) and grid (N, Ho, Wo, 2), got "
            f"{list(x.shape)} and {list(grid.shape)}"
        )
    n, c, h, w = x.shape
    align = bool(op.arg("align_corners", 1))
    gx, gy = grid[..., 0].astype(np.float64), grid[..., 1].astype(np.float64)
    if align:
        ix, iy = (gx + 1) / 2 * (w - 1), (gy + 1) / 2 * (h - 1)
    else:
        ix, iy = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
    if padding == 1:
        ix, iy = np.clip(ix, 0, w - 1), np.clip(iy, 0, h - 1)
    x0, y0 = np.floor(ix).astype(np.int64), np.floor(iy).astype(np.int64)
    out = np.zeros((n, c, *grid.shape[1:3]), dtype=np.float64)
    batch = np.arange(n)[:, None, None]
    for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
        cx, cy = x0 + dx, y0 + dy
        weight = (1 - np.abs(ix - cx)) * (1 - np.abs(iy - cy))
        inside = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
        values = x[batch, :, np.clip(cy, 0, h - 1), np.clip(cx, 0, w - 1)]  # (N, Ho, Wo, C)
        out += np.moveaxis(values * (weight * inside)[..., None], -1, 1)
    return [out.astype(np.float32)]


_OPERATORS: dict[str, Callable[[Op, list[Any]], list[Any]]] = {
    "max": _max,
    "unsqueeze": _unsqueeze,
    "grid_sampler": _grid_sampler,
}


@kernel("ATen")
def _aten(op: Op, inputs: list[Any]) -> list[Any]:
    name = op.arg("operator")
    if name is None:
        raise ValueError("ATen needs an 'operator' argument")
    name = name.decode() if isinstance(name, bytes) else str(name)
    function = _OPERATORS.get(name)
    if function is None:
        raise UnsupportedOpError(
            f"ATen operator {name!r} has no executor kernel (supported: {sorted(_OPERATORS)})"
        )
    return function(op, inputs)

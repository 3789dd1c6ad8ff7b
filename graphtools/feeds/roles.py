"""The registry of inputs with a structural role: values made to fit the op that reads them.

``ROLES`` maps ``(op type, input position)`` to a maker and what it makes: indices within the
rows they index, lengths summing to what they segment, ``im_info`` matching the image, anchors
matching the scores, a shape vector for ``input_as_shape`` fills, ... A maker sees the op, its
other inputs (made on demand), the workspace and the image size (``RoleContext``). Its shape
follows from the other inputs, except for the inputs of ``SHAPED_ROLES`` (indices, whose
number the reader leaves free, and an input image), which take the shape ``--shapes`` gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.input_shapes import GENERIC_SHAPE, PLACEHOLDER_ROLES
from graphtools.executor import Workspace
from graphtools.feeds.values import as_array, check_size
from graphtools.ir import Op

__all__ = ["PLACEHOLDER_ROLES", "ROLES", "SHAPED_ROLES", "RoleContext", "RoleMaker"]

_INDICES = 6
"""How many indices an index input gets when nothing else decides it."""
_SEGMENTS = 3
"""How many segments a lengths input gets when nothing else decides it."""


class RoleContext:
    """What a role maker sees: the op and the name of the input it makes, the op's inputs so
    far (made on demand), the workspace, the generator, the image size, and the shape
    ``--shapes`` gives the input (which only an input image's role uses)."""

    def __init__(
        self,
        op: Op,
        name: str,
        ws: Workspace,
        rng: np.random.Generator,
        need: Callable[[int], Any],
        image: tuple[int, int] | None,
        given: tuple[int, ...] | None = None,
    ) -> None:
        self.op = op
        self.name = name
        self.ws = ws
        self.rng = rng
        self.need = need
        self.image = image
        self.given = given

    def shape(self, position: int) -> tuple[int, ...]:
        return tuple(np.shape(as_array(self.need(position))))

    def rows(self, position: int) -> int:
        shape = self.shape(position)
        return int(shape[0]) if shape else 1

    def lengths(self, total: int, count: int = _SEGMENTS) -> np.ndarray:
        """``count`` non-negative int32 lengths summing to ``total``."""
        split = self.rng.multinomial(total, np.full(count, 1.0 / count)) if total else None
        return np.zeros(count, np.int32) if split is None else split.astype(np.int32)

    def floats(self, shape: tuple[int, ...]) -> np.ndarray:
        """Standard-normal float32 values of ``shape`` for the input being made."""
        check_size(self.name, shape, f"an input of {self.op.type}")
        return self.rng.standard_normal(shape).astype(np.float32)


RoleMaker = Callable[[RoleContext], np.ndarray]
#: ``(op type, input position) -> (maker, description)``: inputs made to fit their reader.
ROLES: dict[tuple[str, int], tuple[RoleMaker, str]] = {}


def _role(types: Sequence[str], position: int, what: str) -> Callable[[RoleMaker], RoleMaker]:
    def register(fn: RoleMaker) -> RoleMaker:
        for op_type in types:
            ROLES[(op_type, position)] = (fn, what)
        return fn

    return register


_SLS: tuple[str, ...] = (
    *("SparseLengthsSumFused8BitRowwise", "SparseLengthsSum8BitsRowwise"),
    *("SparseLengthsSumFused4BitRowwise", "SparseLengthsSum", "SparseLengthsMean"),
)
_SLWS: tuple[str, ...] = (
    *("SparseLengthsWeightedSumFused8BitRowwise", "SparseLengthsWeightedSum8BitsRowwise"),
    "SparseLengthsWeightedSum",
)


@_role(_SLS, 1, "indices of rows of the data")
@_role(("Gather",), 1, "indices of rows of the data")
def _indices_into_first(ctx: RoleContext) -> np.ndarray:
    shape = ctx.given if ctx.given is not None else (_INDICES,)
    return ctx.rng.integers(0, max(ctx.rows(0), 1), shape).astype(np.int64)


@_role(_SLWS, 2, "indices of rows of the data, one per weight")
def _weighted_indices(ctx: RoleContext) -> np.ndarray:
    weights = ctx.op.inputs[1]
    count = np.size(as_array(ctx.ws.fetch(weights))) if ctx.ws.has(weights) else _INDICES
    return ctx.rng.integers(0, max(ctx.rows(0), 1), count).astype(np.int64)


_FUSED_8BIT = ("SparseLengthsSumFused8BitRowwise", "SparseLengthsWeightedSumFused8BitRowwise")
_ROWWISE_8BIT = ("SparseLengthsSum8BitsRowwise", "SparseLengthsWeightedSum8BitsRowwise")


@_role(_FUSED_8BIT, 0, "uint8 rows with their float32 scale and bias")
def _fused_8bit_rows(ctx: RoleContext) -> np.ndarray:
    rows = ctx.rng.integers(0, 256, (5, 4)).astype(np.uint8)
    scale_bias = np.stack([ctx.rng.uniform(0.01, 0.1, 5), ctx.rng.normal(0, 1, 5)], axis=1)
    return np.concatenate([rows, scale_bias.astype(np.float32).view(np.uint8)], axis=1)


@_role(("SparseLengthsSumFused4BitRowwise",), 0, "packed 4-bit rows with float16 scale, bias")
def _fused_4bit_rows(ctx: RoleContext) -> np.ndarray:
    rows = ctx.rng.integers(0, 256, (5, 2)).astype(np.uint8)
    scale_bias = np.stack([ctx.rng.uniform(0.01, 0.1, 5), ctx.rng.normal(0, 1, 5)], axis=1)
    return np.concatenate([rows, scale_bias.astype(np.float16).view(np.uint8)], axis=1)


@_role(_ROWWISE_8BIT, 0, "uint8 rows")
def _rowwise_rows(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 256, (5, 4)).astype(np.uint8)


@_role(("SparseLengthsSum8BitsRowwise",), 3, "a scale and a bias per row")
@_role(("SparseLengthsWeightedSum8BitsRowwise",), 4, "a scale and a bias per row")
def _scale_bias(ctx: RoleContext) -> np.ndarray:
    rows = ctx.rows(0)
    return np.stack([ctx.rng.uniform(0.01, 0.1, rows), ctx.rng.normal(0, 1, rows)], 1).astype(
        np.float32
    )


@_role(_SLS, 2, "lengths summing to the number of indices")
def _lengths_of_indices(ctx: RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(1))


@_role(_SLWS, 3, "lengths summing to the number of indices")
def _weighted_lengths(ctx: RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(2))


@_role(_SLWS, 1, "one weight per index")
def _weights_per_index(ctx: RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(2),))


@_role(("LengthsSum", "LengthsMean", "LengthsMax"), 1, "lengths summing to the data's rows")
def _lengths_of_rows(ctx: RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(0))


@_role(("LengthsRangeFill", "LengthsToRanges"), 0, "lengths")
@_role(("SparseLabelSplit",), 0, "lengths")
def _free_lengths(ctx: RoleContext) -> np.ndarray:
    return ctx.lengths(_INDICES)


@_role(("BatchSparseToDense",), 0, "lengths of at most dense_last_dim")
def _dense_lengths(ctx: RoleContext) -> np.ndarray:
    width = int(ctx.op.arg("dense_last_dim", 4))
    return ctx.rng.integers(0, width + 1, _SEGMENTS).astype(np.int32)


@_role(("SparseLabelSplit",), 1, "label indices below num_labels")
def _label_indices(ctx: RoleContext) -> np.ndarray:
    labels = int(ctx.op.arg("num_labels", -1))
    if labels <= 0:
        labels = max(len(ctx.op.outputs) // 2, 1)
    total = int(np.sum(as_array(ctx.need(0))))
    return ctx.rng.integers(0, labels, total).astype(np.int64)


@_role(("BatchSparseToDense",), 1, "indices below dense_last_dim")
def _dense_indices(ctx: RoleContext) -> np.ndarray:
    width = int(ctx.op.arg("dense_last_dim", 4))
    lengths = as_array(ctx.need(0)).astype(np.int64)
    rows = [ctx.rng.permutation(width)[: int(n)] for n in lengths]  # distinct per segment
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)


@_role(("SparseLabelSplit", "BatchSparseToDense"), 2, "one value per index")
def _values_per_index(ctx: RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(1),))


@_role(("SparseToDense",), 0, "indices")
def _sparse_indices(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 4, _INDICES).astype(np.int32)


@_role(("SparseToDense",), 1, "one value row per index")
def _sparse_values(ctx: RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(0), 3))


@_role(("SparseToDense",), 2, "rows covering every index")
def _infer_dim(ctx: RoleContext) -> np.ndarray:
    indices = as_array(ctx.need(0))
    return ctx.floats((int(indices.max()) + 1 if indices.size else 1,))


@_role(("SparseToDenseMask",), 0, "feature ids from the mask")
def _mask_ids(ctx: RoleContext) -> np.ndarray:
    mask = [int(v) for v in ctx.op.arg("mask", ())] or [0]
    return ctx.rng.choice(np.asarray(mask, np.int64), _INDICES).astype(np.int64)


@_role(("SparseToDenseMask",), 1, "one value per id")
def _mask_values(ctx: RoleContext) -> np.ndarray:
    default = as_array(ctx.need(2)) if ctx.ws.has(ctx.op.inputs[2]) else np.zeros((), np.float32)
    return ctx.floats((ctx.rows(0), *default.shape))


@_role(("SparseToDenseMask",), 2, "the default value")
def _mask_default(ctx: RoleContext) -> np.ndarray:
    return np.zeros((), np.float32)


@_role(("SparseToDenseMask",), 3, "lengths summing to the number of ids")
def _mask_lengths(ctx: RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(0))


@_role(("GatherRanges",), 1, "[start, length] ranges inside the data")
def _ranges(ctx: RoleContext) -> np.ndarray:
    size = int(np.size(as_array(ctx.need(0))))
    starts = ctx.rng.integers(0, max(size, 1), (2, 2))
    lengths = np.minimum(ctx.rng.integers(0, 3, (2, 2)), size - starts)
    return np.stack([starts, np.maximum(lengths, 0)], axis=-1).astype(np.int32)


@_role(("GatherRanges",), 0, "1-D data")
def _ranges_data(ctx: RoleContext) -> np.ndarray:
    return ctx.floats((12,))


@_role(("FillExamplesWithIndicator",), 1, "an indicator marking one example per data row")
def _indicator(ctx: RoleContext) -> np.ndarray:
    rows = ctx.rows(0)
    marks = np.zeros(rows + 2, np.bool_)
    marks[ctx.rng.permutation(rows + 2)[:rows]] = True
    return marks


@_role(
    ("ConstantFill", "GaussianFill", "UniformFill", "XavierFill", "MSRAFill"),
    0,
    "the output's shape (its values with input_as_shape, else its own shape)",
)
def _fill_input(ctx: RoleContext) -> np.ndarray:
    if ctx.op.arg("input_as_shape", 0):
        return np.asarray([2, 3], np.int64)
    return ctx.floats(GENERIC_SHAPE)


@_role(("Mod",), 0, "integers")
def _integers(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.integers(-20, 20, GENERIC_SHAPE).astype(np.int64)


@_role(("HalfToFloat",), 0, "float16 values")
def _halves(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.standard_normal(GENERIC_SHAPE).astype(np.float16)


@_role(("GenerateProposals", "GenerateProposalsCPP"), 2, "im_info [height, width, scale]")
@_role(("BBoxTransform",), 2, "im_info [height, width, scale]")
def _im_info(ctx: RoleContext) -> np.ndarray:
    height, width = ctx.image or (224, 224)
    batch = ctx.rows(0) if ctx.op.type != "BBoxTransform" else 1
    return np.tile(np.asarray([[height, width, 1.0]], np.float32), (batch, 1))


@_role(("GenerateProposals", "GenerateProposalsCPP"), 3, "anchors, one box per score channel")
def _anchors(ctx: RoleContext) -> np.ndarray:
    count = ctx.shape(0)[1]
    sizes = 16.0 * 2.0 ** (np.arange(count) % 5)
    ratios = np.asarray([0.5, 1.0, 2.0])[np.arange(count) // 5 % 3]
    w, h = sizes * np.sqrt(ratios), sizes / np.sqrt(ratios)
    return np.stack([-w / 2, -h / 2, w / 2, h / 2], axis=1).astype(np.float32)


@_role(("MatMul",), 1, "a matrix whose rows match the first operand's columns")
def _matmul_rhs(ctx: RoleContext) -> np.ndarray:
    a = ctx.shape(0)
    axis = int(ctx.op.arg("axis_a", 1))
    rows, cols = prod(a[:axis]), prod(a[axis:])
    inner = rows if ctx.op.arg("trans_a", 0) else cols
    return ctx.floats((4, inner) if ctx.op.arg("trans_b", 0) else (inner, 4))


@_role(("BatchMatMul",), 1, "matrices whose rows match the first operand's columns")
def _batch_matmul_rhs(ctx: RoleContext) -> np.ndarray:
    a = ctx.shape(0)
    inner = a[-2] if ctx.op.arg("trans_a", 0) else a[-1]
    tail = (4, inner) if ctx.op.arg("trans_b", 0) else (inner, 4)
    return ctx.floats((*a[:-2], *tail))


@_role(("Reshape",), 1, "a shape keeping the first dim")
def _reshape_shape(ctx: RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    if len(shape) >= 2 and shape[-1] == 2:  # points: a (N, H, 1, 2) grid, as grid_sampler reads
        return np.asarray([shape[0], -1, 1, 2], np.int64)
    return np.asarray([shape[0] if shape else 1, -1], np.int64)


@_role(("LayerNorm",), 1, "one scale per normalised value")
@_role(("LayerNorm",), 2, "one bias per normalised value")
def _layer_norm_param(ctx: RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats(shape[axis:])


@_role(("RMSNorm",), 1, "one scale per normalised value")
@_role(("RMSNorm",), 2, "one bias per normalised value")
def _rms_norm_param(ctx: RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats((prod(shape[axis:]),))


@_role(("ElementwiseLinear",), 1, "one weight per feature")
@_role(("ElementwiseLinear",), 2, "one bias per feature")
def _elementwise_linear_param(ctx: RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats((prod(shape[axis:]),))


@_role(("BatchBoxCox",), 1, "one lambda per column")
@_role(("BatchBoxCox",), 2, "one lambda per column")
def _box_cox_lambda(ctx: RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    return ctx.rng.uniform(0.1, 1.0, (shape[-1] if shape else 1,)).astype(np.float32)


@_role(("BatchBoxCox",), 0, "positive values")
def _box_cox_data(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32)


@_role(("PackedInt8BGRANHWCToNCHWCStylizerPreprocess",), 0, "a uint8 BGRA image")
def _bgra_image(ctx: RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 256, ctx.given or (1, 32, 32, 4)).astype(np.uint8)


@_role(("PackedInt8BGRANHWCToNCHWCStylizerPreprocess",), 1, "the BGR mean")
def _bgr_mean(ctx: RoleContext) -> np.ndarray:
    return np.asarray([104.0, 117.0, 123.0], np.float32)


#: Roles whose input takes the shape ``--shapes`` (or ``shapes.txt``) gives it: an input
#: image, and indices (a ``Gather``'s of any rank, the lengths ops' as many as given).
SHAPED_ROLES = frozenset(
    {
        ("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", 0),
        ("Gather", 1),
        *((op_type, 1) for op_type in _SLS),
    }
)

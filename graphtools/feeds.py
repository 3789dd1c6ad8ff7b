"""Inputs and parameters for running a model nobody gave data for (``graphtools verify``).

``synthesize(model, shapes)`` runs the model once, op by op, the way a Caffe2 predictor does,
and makes up every blob an op reads that nothing provides:

* data inputs: ``shapes`` (``--shapes``) when given, else a shape guessed from the first
  reader (``graphtools.analysis.input_shapes``); standard-normal float32 values drawn in
  input order from ``seed``, as ``testing.make_feeds`` draws them;
* inputs with a structural role (``ROLES``): indices within the rows they index, lengths
  summing to what they segment, ``im_info`` matching the image, anchors matching the
  scores, a shape vector for ``input_as_shape`` fills, ... (whatever ``shapes`` says about
  them is ignored: their shape follows from the other inputs; but an input image made by
  its role, the stylizer's BGRA image, takes the shape ``shapes`` gives it);
* parameters (a weight, a bias, a BN scale read at input position 1 or later) when random
  parameters are allowed: by default for a predict_net shipped without an init_net, and for
  the blobs of init_net ops that could not run here (a ``Load`` from a database that is not
  beside the file); shapes from ``graphtools.analysis.channels`` (channel counts planned
  from the net's own constraints, detection heads' 4-per-anchor and 4-per-class deltas
  included), values as ``testing.random_params`` draws them (small integers, of the first
  operand's type, for an operand of integer arithmetic: Caffe2 does not promote types);
* what a ``RecurrentNetwork``'s step net reads from outside (its references: parameters,
  sequence lengths; every input but the sequence and the initial states): made while
  step 0 runs in a throwaway workspace set up as the kernel sets it up, so they fit the
  linked inputs (states from the initial values, one time slice of the sequence); a step
  layer feeding a value linked back into a state gets the state's size, one feeding
  ``LSTMUnit`` gates 4 per cell value, and a made-up FC outside the loop whose output the
  step net needs wider (its slice summed with a step layer's output, or read as gates)
  makes the walk start again with that count.

An init_net placeholder for a data input (``analysis.input_shapes.placeholder_inputs``) is
replaced by a feed, and said so. Everything made is reported in the ``Synthesis`` so the
user can tell a verdict on made-up data from one on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from math import gcd, prod, sqrt
from typing import Any

import numpy as np

from graphtools.analysis.channels import ParamSpec, param_spec, plan_channels
from graphtools.analysis.input_shapes import (
    DENSE_READERS,
    GENERIC_SHAPE,
    GENERIC_SHAPES,
    IMAGE_READERS,
    IMAGE_SIZES,
    first_readers,
    guess_generic,
    guess_input_shapes,
    placeholder_inputs,
)
from graphtools.analysis.op_args import order
from graphtools.analysis.recurrent import APPLY_LINK, ForwardProgram, forward_program
from graphtools.errors import GraphToolsError, InvalidNetError
from graphtools.executor import Int8Tensor, Workspace, run_op
from graphtools.executor.kernels_recurrent import state_tensor
from graphtools.ir import Model, Net, Op

__all__ = [
    "FLOAT_TYPES",
    "ROLES",
    "MadeInput",
    "ParamMaker",
    "SkippedOp",
    "Synthesis",
    "float_view",
    "synthesize",
    "without_init_ops",
]

_INDICES = 6
"""How many indices an index input gets when nothing else decides it."""
_SEGMENTS = 3
"""How many segments a lengths input gets when nothing else decides it."""
_PARAM_CHANNELS = 8
"""Least output channel count of a made-up Conv/FC weight (small keeps big nets fast)."""


@dataclass(frozen=True)
class MadeInput:
    """One data input fed to the model and where it came from.

    Attributes:
        name: the blob, as the net spells it.
        shape: its shape.
        dtype: its dtype name.
        origin: ``given`` (``--shapes`` or fed values), ``guessed`` or ``role`` (made to fit
            the op that reads it).
        reason: why this shape and these values, for the report.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    origin: str
    reason: str


@dataclass(frozen=True)
class SkippedOp:
    """An op that cannot run here (a ``Load`` from a database that is not beside the file);
    what reads its outputs gets made-up values instead.

    Attributes:
        net: ``init_net`` or ``predict_net``.
        index: the op's position in that net.
        type: the op's type.
        outputs: the blobs it would have written.
        reason: why it cannot run.
    """

    net: str
    index: int
    type: str
    outputs: tuple[str, ...]
    reason: str


@dataclass
class Synthesis:
    """What ``synthesize`` fed the model and what the model computed on it.

    Attributes:
        feeds: every blob to feed (data inputs and made-up parameters), by name.
        inputs: the data inputs, in the order they were made.
        params: the made-up parameters' shapes, by name.
        placeholders: init_net placeholders a feed replaced, with the fill they came from.
        skipped_ops: ops that could not run here (their outputs were made up).
        replaced: init_net blobs that did not fit the op reading them, replaced by made-up
            parameters, with the reason.
        outputs: the model's outputs on these feeds, by name.
        missing_outputs: outputs the model never writes.
        init_values: what the init_net left in the workspace, by blob (a rewrite that keeps
            the init_net's ops can reuse it instead of running the init_net again).
    """

    feeds: dict[str, Any] = field(default_factory=dict)
    inputs: list[MadeInput] = field(default_factory=list)
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)
    skipped_ops: list[SkippedOp] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    missing_outputs: list[str] = field(default_factory=list)
    init_values: dict[str, Any] = field(default_factory=dict)

    @property
    def param_values(self) -> int:
        """How many values the made-up parameters hold together."""
        return sum(prod(shape) for shape in self.params.values())


class ParamMaker:
    """Random values for the parameter shapes of ``analysis.channels.param_spec``."""

    def __init__(self, rng: np.random.Generator, counts: Mapping[int, int], channels: int) -> None:
        self.rng = rng
        self.counts = counts
        self.channels = channels

    def weight(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        """Normal values with std ``1/sqrt(fan_in)``."""
        std = 1.0 / sqrt(max(fan_in, 1))
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def value(self, spec: ParamSpec) -> np.ndarray:
        """Random values of the shape and kind ``spec`` says."""
        if spec.init == "weight":
            return self.weight(spec.shape, spec.fan_in)
        if spec.init == "positive":
            return self.rng.uniform(0.5, 1.5, spec.shape).astype(np.float32)
        if spec.init == "slope":
            return self.rng.uniform(0.0, 0.3, spec.shape).astype(np.float32)
        return (self.rng.standard_normal(spec.shape) * 0.1).astype(np.float32)

    def make(self, index: int, op: Op, position: int, x: np.ndarray) -> np.ndarray | None:
        """The value of input ``position`` of op #``index``, or ``None`` when no rule applies."""
        spec = param_spec(op, index, position, tuple(x.shape), self.counts, self.channels)
        return None if spec is None else self.value(spec)


# -- roles: inputs whose values must fit the op that reads them ---------------------------------


class _RoleContext:
    """What a role maker sees: the op, its inputs so far (made on demand), the workspace, and
    the shape ``--shapes`` gives the input (which only an input image's role uses)."""

    def __init__(
        self,
        op: Op,
        ws: Workspace,
        rng: np.random.Generator,
        need: Callable[[int], Any],
        image: tuple[int, int] | None,
        given: tuple[int, ...] | None = None,
    ) -> None:
        self.op = op
        self.ws = ws
        self.rng = rng
        self.need = need
        self.image = image
        self.given = given

    def shape(self, position: int) -> tuple[int, ...]:
        return tuple(np.shape(_array(self.need(position))))

    def rows(self, position: int) -> int:
        shape = self.shape(position)
        return int(shape[0]) if shape else 1

    def lengths(self, total: int, count: int = _SEGMENTS) -> np.ndarray:
        """``count`` non-negative int32 lengths summing to ``total``."""
        split = self.rng.multinomial(total, np.full(count, 1.0 / count)) if total else None
        return np.zeros(count, np.int32) if split is None else split.astype(np.int32)

    def floats(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.standard_normal(shape).astype(np.float32)


RoleMaker = Callable[[_RoleContext], np.ndarray]
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
def _indices_into_first(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, max(ctx.rows(0), 1), _INDICES).astype(np.int64)


@_role(_SLWS, 2, "indices of rows of the data, one per weight")
def _weighted_indices(ctx: _RoleContext) -> np.ndarray:
    weights = ctx.op.inputs[1]
    count = np.size(_array(ctx.ws.fetch(weights))) if ctx.ws.has(weights) else _INDICES
    return ctx.rng.integers(0, max(ctx.rows(0), 1), count).astype(np.int64)


_FUSED_8BIT = ("SparseLengthsSumFused8BitRowwise", "SparseLengthsWeightedSumFused8BitRowwise")
_ROWWISE_8BIT = ("SparseLengthsSum8BitsRowwise", "SparseLengthsWeightedSum8BitsRowwise")


@_role(_FUSED_8BIT, 0, "uint8 rows with their float32 scale and bias")
def _fused_8bit_rows(ctx: _RoleContext) -> np.ndarray:
    rows = ctx.rng.integers(0, 256, (5, 4)).astype(np.uint8)
    scale_bias = np.stack([ctx.rng.uniform(0.01, 0.1, 5), ctx.rng.normal(0, 1, 5)], axis=1)
    return np.concatenate([rows, scale_bias.astype(np.float32).view(np.uint8)], axis=1)


@_role(("SparseLengthsSumFused4BitRowwise",), 0, "packed 4-bit rows with float16 scale, bias")
def _fused_4bit_rows(ctx: _RoleContext) -> np.ndarray:
    rows = ctx.rng.integers(0, 256, (5, 2)).astype(np.uint8)
    scale_bias = np.stack([ctx.rng.uniform(0.01, 0.1, 5), ctx.rng.normal(0, 1, 5)], axis=1)
    return np.concatenate([rows, scale_bias.astype(np.float16).view(np.uint8)], axis=1)


@_role(_ROWWISE_8BIT, 0, "uint8 rows")
def _rowwise_rows(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 256, (5, 4)).astype(np.uint8)


@_role(("SparseLengthsSum8BitsRowwise",), 3, "a scale and a bias per row")
@_role(("SparseLengthsWeightedSum8BitsRowwise",), 4, "a scale and a bias per row")
def _scale_bias(ctx: _RoleContext) -> np.ndarray:
    rows = ctx.rows(0)
    return np.stack([ctx.rng.uniform(0.01, 0.1, rows), ctx.rng.normal(0, 1, rows)], 1).astype(
        np.float32
    )


@_role(_SLS, 2, "lengths summing to the number of indices")
def _lengths_of_indices(ctx: _RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(1))


@_role(_SLWS, 3, "lengths summing to the number of indices")
def _weighted_lengths(ctx: _RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(2))


@_role(_SLWS, 1, "one weight per index")
def _weights_per_index(ctx: _RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(2),))


@_role(("LengthsSum", "LengthsMean", "LengthsMax"), 1, "lengths summing to the data's rows")
def _lengths_of_rows(ctx: _RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(0))


@_role(("LengthsRangeFill", "LengthsToRanges"), 0, "lengths")
@_role(("SparseLabelSplit",), 0, "lengths")
def _free_lengths(ctx: _RoleContext) -> np.ndarray:
    return ctx.lengths(_INDICES)


@_role(("BatchSparseToDense",), 0, "lengths of at most dense_last_dim")
def _dense_lengths(ctx: _RoleContext) -> np.ndarray:
    width = int(ctx.op.arg("dense_last_dim", 4))
    return ctx.rng.integers(0, width + 1, _SEGMENTS).astype(np.int32)


@_role(("SparseLabelSplit",), 1, "label indices below num_labels")
def _label_indices(ctx: _RoleContext) -> np.ndarray:
    labels = int(ctx.op.arg("num_labels", -1))
    if labels <= 0:
        labels = max(len(ctx.op.outputs) // 2, 1)
    total = int(np.sum(_array(ctx.need(0))))
    return ctx.rng.integers(0, labels, total).astype(np.int64)


@_role(("BatchSparseToDense",), 1, "indices below dense_last_dim")
def _dense_indices(ctx: _RoleContext) -> np.ndarray:
    width = int(ctx.op.arg("dense_last_dim", 4))
    lengths = _array(ctx.need(0)).astype(np.int64)
    rows = [ctx.rng.permutation(width)[: int(n)] for n in lengths]  # distinct per segment
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)


@_role(("SparseLabelSplit", "BatchSparseToDense"), 2, "one value per index")
def _values_per_index(ctx: _RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(1),))


@_role(("SparseToDense",), 0, "indices")
def _sparse_indices(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 4, _INDICES).astype(np.int32)


@_role(("SparseToDense",), 1, "one value row per index")
def _sparse_values(ctx: _RoleContext) -> np.ndarray:
    return ctx.floats((ctx.rows(0), 3))


@_role(("SparseToDense",), 2, "rows covering every index")
def _infer_dim(ctx: _RoleContext) -> np.ndarray:
    indices = _array(ctx.need(0))
    return ctx.floats((int(indices.max()) + 1 if indices.size else 1,))


@_role(("SparseToDenseMask",), 0, "feature ids from the mask")
def _mask_ids(ctx: _RoleContext) -> np.ndarray:
    mask = [int(v) for v in ctx.op.arg("mask", ())] or [0]
    return ctx.rng.choice(np.asarray(mask, np.int64), _INDICES).astype(np.int64)


@_role(("SparseToDenseMask",), 1, "one value per id")
def _mask_values(ctx: _RoleContext) -> np.ndarray:
    default = _array(ctx.need(2)) if ctx.ws.has(ctx.op.inputs[2]) else np.zeros((), np.float32)
    return ctx.floats((ctx.rows(0), *default.shape))


@_role(("SparseToDenseMask",), 2, "the default value")
def _mask_default(ctx: _RoleContext) -> np.ndarray:
    return np.zeros((), np.float32)


@_role(("SparseToDenseMask",), 3, "lengths summing to the number of ids")
def _mask_lengths(ctx: _RoleContext) -> np.ndarray:
    return ctx.lengths(ctx.rows(0))


@_role(("GatherRanges",), 1, "[start, length] ranges inside the data")
def _ranges(ctx: _RoleContext) -> np.ndarray:
    size = int(np.size(_array(ctx.need(0))))
    starts = ctx.rng.integers(0, max(size, 1), (2, 2))
    lengths = np.minimum(ctx.rng.integers(0, 3, (2, 2)), size - starts)
    return np.stack([starts, np.maximum(lengths, 0)], axis=-1).astype(np.int32)


@_role(("GatherRanges",), 0, "1-D data")
def _ranges_data(ctx: _RoleContext) -> np.ndarray:
    return ctx.floats((12,))


@_role(("FillExamplesWithIndicator",), 1, "an indicator marking one example per data row")
def _indicator(ctx: _RoleContext) -> np.ndarray:
    rows = ctx.rows(0)
    marks = np.zeros(rows + 2, np.bool_)
    marks[ctx.rng.permutation(rows + 2)[:rows]] = True
    return marks


@_role(("ConstantFill", "GaussianFill", "UniformFill", "XavierFill", "MSRAFill"), 0, "")
def _fill_input(ctx: _RoleContext) -> np.ndarray:
    if ctx.op.arg("input_as_shape", 0):
        return np.asarray([2, 3], np.int64)
    return ctx.floats(GENERIC_SHAPE)


@_role(("Mod",), 0, "integers")
def _integers(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.integers(-20, 20, GENERIC_SHAPE).astype(np.int64)


@_role(("HalfToFloat",), 0, "float16 values")
def _halves(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.standard_normal(GENERIC_SHAPE).astype(np.float16)


@_role(("GenerateProposals", "GenerateProposalsCPP"), 2, "im_info [height, width, scale]")
@_role(("BBoxTransform",), 2, "im_info [height, width, scale]")
def _im_info(ctx: _RoleContext) -> np.ndarray:
    height, width = ctx.image or (224, 224)
    batch = ctx.rows(0) if ctx.op.type != "BBoxTransform" else 1
    return np.tile(np.asarray([[height, width, 1.0]], np.float32), (batch, 1))


@_role(("GenerateProposals", "GenerateProposalsCPP"), 3, "anchors, one box per score channel")
def _anchors(ctx: _RoleContext) -> np.ndarray:
    count = ctx.shape(0)[1]
    sizes = 16.0 * 2.0 ** (np.arange(count) % 5)
    ratios = np.asarray([0.5, 1.0, 2.0])[np.arange(count) // 5 % 3]
    w, h = sizes * np.sqrt(ratios), sizes / np.sqrt(ratios)
    return np.stack([-w / 2, -h / 2, w / 2, h / 2], axis=1).astype(np.float32)


@_role(("MatMul",), 1, "a matrix whose rows match the first operand's columns")
def _matmul_rhs(ctx: _RoleContext) -> np.ndarray:
    a = ctx.shape(0)
    axis = int(ctx.op.arg("axis_a", 1))
    rows, cols = prod(a[:axis]), prod(a[axis:])
    inner = rows if ctx.op.arg("trans_a", 0) else cols
    return ctx.floats((4, inner) if ctx.op.arg("trans_b", 0) else (inner, 4))


@_role(("BatchMatMul",), 1, "matrices whose rows match the first operand's columns")
def _batch_matmul_rhs(ctx: _RoleContext) -> np.ndarray:
    a = ctx.shape(0)
    inner = a[-2] if ctx.op.arg("trans_a", 0) else a[-1]
    tail = (4, inner) if ctx.op.arg("trans_b", 0) else (inner, 4)
    return ctx.floats((*a[:-2], *tail))


@_role(("Reshape",), 1, "a shape keeping the first dim")
def _reshape_shape(ctx: _RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    if len(shape) >= 2 and shape[-1] == 2:  # points: a (N, H, 1, 2) grid, as grid_sampler reads
        return np.asarray([shape[0], -1, 1, 2], np.int64)
    return np.asarray([shape[0] if shape else 1, -1], np.int64)


@_role(("LayerNorm",), 1, "one scale per normalised value")
@_role(("LayerNorm",), 2, "one bias per normalised value")
def _layer_norm_param(ctx: _RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats(shape[axis:])


@_role(("RMSNorm",), 1, "one scale per normalised value")
@_role(("RMSNorm",), 2, "one bias per normalised value")
def _rms_norm_param(ctx: _RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats((prod(shape[axis:]),))


@_role(("ElementwiseLinear",), 1, "one weight per feature")
@_role(("ElementwiseLinear",), 2, "one bias per feature")
def _elementwise_linear_param(ctx: _RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    axis = int(ctx.op.arg("axis", 1)) % max(len(shape), 1)
    return ctx.floats((prod(shape[axis:]),))


@_role(("BatchBoxCox",), 1, "one lambda per column")
@_role(("BatchBoxCox",), 2, "one lambda per column")
def _box_cox_lambda(ctx: _RoleContext) -> np.ndarray:
    shape = ctx.shape(0)
    return ctx.rng.uniform(0.1, 1.0, (shape[-1] if shape else 1,)).astype(np.float32)


@_role(("BatchBoxCox",), 0, "positive values")
def _box_cox_data(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32)


@_role(("PackedInt8BGRANHWCToNCHWCStylizerPreprocess",), 0, "a uint8 BGRA image")
def _bgra_image(ctx: _RoleContext) -> np.ndarray:
    return ctx.rng.integers(0, 256, ctx.given or (1, 32, 32, 4)).astype(np.uint8)


@_role(("PackedInt8BGRANHWCToNCHWCStylizerPreprocess",), 1, "the BGR mean")
def _bgr_mean(ctx: _RoleContext) -> np.ndarray:
    return np.asarray([104.0, 117.0, 123.0], np.float32)


def _array(value: Any) -> np.ndarray:
    return value.dequantize() if isinstance(value, Int8Tensor) else np.asarray(value)


#: Roles that make a model's input image: an init_net fill of such a declared input is a
#: placeholder the made-up image replaces.
PLACEHOLDER_ROLES = frozenset({("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", 0)})
#: Op types that read their first input quantized (an ``Int8Tensor``).
_QUANTIZED_READERS = frozenset(
    {"Int8Conv", "Int8ConvRelu", "Int8ConvTranspose", "Int8FC", "Int8SumRelu", "Int8Sum"}
)
#: Element-wise arithmetic whose made-up operand takes the type of an integer first operand.
_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div"})
#: Op types that read files or databases, which may not be beside the model.
EXTERNAL_IO = frozenset({"Load"})


def _quantized(value: np.ndarray) -> Int8Tensor:
    """``value`` quantized to uint8 around zero point 128, with a float32 scale (what Caffe2's
    Int8 tensors hold)."""
    scale = float(np.float32(float(np.abs(value).max()) / 127 or 1.0))
    return Int8Tensor(np.clip(np.round(value / scale) + 128, 0, 255).astype(np.uint8), scale, 128)


# -- channel counts the generic plan does not know ---------------------------------------------

_KEEPS_CHANNELS = frozenset(
    {
        *("Relu", "Sigmoid", "Tanh", "Softmax", "Copy", "Alias", "Dropout", "SpatialBN", "LRN"),
        *("MaxPool", "AveragePool", "Int8Relu", "Int8MaxPool", "Int8AveragePool"),
        *("NHWC2NCHW", "NCHW2NHWC", "Add", "Sub", "Mul", "Div"),
    }
)
_LAYERS = frozenset({"Conv", "FC", "ConvTranspose", "FCTransposed"})
#: Quantized and fused op types planned and given parameters as their float op.
FLOAT_TYPES: dict[str, str] = {
    "ConvRelu": "Conv",
    "Int8Conv": "Conv",
    "Int8ConvRelu": "Conv",
    "Int8ConvTranspose": "ConvTranspose",
    "Int8FC": "FC",
    "FbFCPacked": "FC",
    "Int8Sum": "Sum",
    "Int8SumRelu": "Sum",
    "Int8Add": "Add",
    "Int8Relu": "Relu",
    "Int8MaxPool": "MaxPool",
    "Int8AveragePool": "AveragePool",
    "Int8Softmax": "Softmax",
    "Int8ResizeNearest": "ResizeNearest",
    "Int8Quantize": "Copy",
    "Int8Dequantize": "Copy",
}


def float_view(net: Net) -> Net:
    """``net`` with its quantized and fused op types spelt as their float ops (for planning
    channel counts and parameter shapes); ``net`` itself when it has none."""
    if not any(op.type in FLOAT_TYPES for op in net):
        return net
    ops = [op.replace(type=FLOAT_TYPES[op.type]) if op.type in FLOAT_TYPES else op for op in net]
    return Net(ops, net.external_inputs, net.external_outputs, name=net.name)


def _producer_layer(net: Net, index: int, position: int) -> int | None:
    """The Conv/FC op whose output reaches input ``position`` of op #``index`` through ops
    that keep channels (Sigmoid, Softmax, pools, ...), or ``None``."""
    view = net.ssa()
    blob = view.ssa[index][0][position]
    while True:
        producer = view.producer(blob)
        if producer is None:
            return None
        op = net[producer]
        if op.type in _LAYERS:
            return producer
        if op.type not in _KEEPS_CHANNELS or not op.inputs:
            return None
        blob = view.ssa[producer][0][0]


def _set_count(counts: dict[int, int], layer: int | None, count: int) -> None:
    if layer is not None and layer in counts and count > 0:
        counts[layer] = count


def _fixed_counts(net: Net, counts: dict[int, int]) -> None:
    """Counts set by what reads a layer (in place): the RPN's deltas are 4 per anchor, the
    box head's 4 per class, a YOLO head reads (5 + classes) per masked anchor, the stylizer's
    deprocess 3 colours."""
    view = net.ssa()
    for index, op in enumerate(net):
        kind = op.type
        if kind in ("GenerateProposals", "GenerateProposalsCPP") and len(op.inputs) >= 2:
            scores = _producer_layer(net, index, 0)
            if scores in counts:
                _set_count(counts, _producer_layer(net, index, 1), 4 * counts[scores])
        elif kind == "BoxWithNMSLimit" and len(op.inputs) >= 2:
            scores = _producer_layer(net, index, 0)
            boxes = view.producer(view.ssa[index][0][1])
            if boxes is None or net[boxes].type != "BBoxTransform" or scores not in counts:
                continue
            classes = 1 if op.arg("cls_agnostic_bbox_reg", 0) else counts[scores]
            _set_count(counts, _producer_layer(net, boxes, 1), 4 * classes)
        elif kind == "Yolo":
            masked = len(op.arg("anchor_mask", ())) or int(op.arg("numanchors", 9))
            count = masked * (5 + int(op.arg("numclass", 80)))
            _set_count(counts, _producer_layer(net, index, 0), count)
        elif kind == "BRGNCHWCToPackedInt8BGRAStylizerDeprocess":
            _set_count(counts, _producer_layer(net, index, 0), 3)


def _reshape_count(net: Net, index: int, ws: Workspace) -> tuple[int, int] | None:
    """``(layer, count)``: the output count of the layer feeding the Reshape at ``index``
    that lets its element count fit the Reshape's fixed target, or ``None``."""
    op = net[index]
    layer = _producer_layer(net, index, 0)
    if layer is None or not ws.has(op.inputs[0]):
        return None
    shape = np.shape(_array(ws.fetch(op.inputs[0])))
    if len(shape) < 2:
        return None
    if len(op.inputs) > 1 and ws.has(op.inputs[1]):
        target = [int(d) for d in np.asarray(ws.fetch(op.inputs[1])).reshape(-1)]
    else:
        target = [int(d) for d in op.arg("shape", ())]
    rest = prod(shape) // shape[1]  # every dim but the channels
    fixed = prod(d if d else shape[i] for i, d in enumerate(target) if d != -1)
    if not target or rest == 0 or fixed == 0:
        return None
    if -1 not in target:
        return (layer, fixed // rest) if fixed % rest == 0 else None
    return layer, fixed // gcd(fixed, rest)


# -- recurrent step nets -------------------------------------------------------------------------

#: Step ops whose input ``gates`` holds ``k`` values per value of the last dim of input
#: ``state``: ``type -> (gates position, state position, k)`` (LSTMUnit: i, f, o, g blocks).
_GATE_READERS: dict[str, tuple[int, int, int]] = {"LSTMUnit": (2, 1, 4)}
_ELEMENTWISE = frozenset({"Sum", "Add", "Sub", "Mul", "Div"})
_FEATURES_LAST = frozenset({"FC", "FCTransposed"})


def _feeding_ops(net: Net, blob: tuple[str, int]) -> list[int]:
    """The layers (Conv/FC) and ``rnn_internal_apply_link`` ops whose output reaches the
    versioned ``blob`` through ops keeping the features (through every operand of an
    elementwise op without ``broadcast``), in net order."""
    view = net.ssa()
    todo, seen, found = [blob], set(), set()
    while todo:
        current = todo.pop()
        producer = view.producer(current)
        if current in seen or producer is None:
            continue
        seen.add(current)
        op = net[producer]
        if op.type in _LAYERS or op.type == APPLY_LINK:
            found.add(producer)
        elif op.type in _ELEMENTWISE and not op.arg("broadcast", 0):
            todo += view.ssa[producer][0]
        elif op.type in _KEEPS_CHANNELS and op.inputs:
            todo.append(view.ssa[producer][0][0])
    return sorted(found)


def _last_dim(ws: Workspace, name: str) -> int | None:
    if not ws.has(name):
        return None
    shape = np.shape(_array(ws.fetch(name)))
    return int(shape[-1]) if shape else None


def _step_counts(net: Net, program: ForwardProgram, counts: dict[int, int], ws: Workspace) -> None:
    """Output counts of the step net's layers (in place) that its links and gate readers fix,
    from the shapes in the step workspace ``ws``, each rule overriding the ones before: a
    layer summed (or multiplied, ...) with a value the workspace holds gets its last dim, one
    feeding a value linked back into a state gets that state's, and one feeding the gates of
    an ``LSTMUnit`` 4 per value of its cell state."""
    view = net.ssa()
    for index, op in enumerate(net):
        if op.type not in _ELEMENTWISE or op.arg("broadcast", 0):
            continue
        widths = {d for name in op.inputs if (d := _last_dim(ws, name)) is not None and d > 1}
        if len(widths) != 1:
            continue
        width = widths.pop()
        for position in range(len(op.inputs)):
            for layer in _feeding_ops(net, view.ssa[index][0][position]):
                if net[layer].type in _LAYERS:
                    counts[layer] = width
    for link in program.links:
        size = _last_dim(ws, link.external)
        for index, op in enumerate(net):
            if op.type == APPLY_LINK or link.internal not in op.outputs or size is None:
                continue
            blob = view.ssa[index][1][list(op.outputs).index(link.internal)]
            for layer in _feeding_ops(net, blob):
                if net[layer].type in _LAYERS:
                    counts[layer] = size
    for index, op in enumerate(net):
        gate = _GATE_READERS.get(op.type)
        if gate is None or len(op.inputs) <= max(gate[:2]):
            continue
        size = _last_dim(ws, op.inputs[gate[1]])
        for layer in _feeding_ops(net, view.ssa[index][0][gate[0]]):
            if net[layer].type in _LAYERS and size:
                counts[layer] = gate[2] * size


def _demanded(op: Op, dims: list[int | None], free: set[int]) -> dict[int, int]:
    """The last dims step op ``op`` needs of its inputs at positions ``free`` (those a made-up
    layer outside the step net could change), given every input's last dim ``dims``."""
    gate = _GATE_READERS.get(op.type)
    if gate is not None and gate[0] in free and len(dims) > gate[1]:
        size = dims[gate[1]]
        return {} if size is None else {gate[0]: gate[2] * size}
    if op.type not in _ELEMENTWISE or op.arg("broadcast", 0):
        return {}
    fixed = {d for p, d in enumerate(dims) if p not in free and d is not None and d > 1}
    if len(fixed) != 1:
        return {}
    size = fixed.pop()
    return {p: size for p in free}


# -- the walk ------------------------------------------------------------------------------------


def without_init_ops(model: Model, indices: Sequence[int]) -> Model:
    """A copy of ``model`` whose init_net lacks the ops at ``indices``."""
    copy = model.copy()
    if copy.init_net is not None and indices:
        copy.init_net.remove_ops(indices)
    return copy


def _fed_up_front(name: str, op: Op, position: int, walk: _Walk) -> bool:
    """Whether a data input is fed before the walk: given a shape, a placeholder, or read
    as an image or FC data (whose guessed shape the analysis checks against the whole net)."""
    if name in walk.shapes or name in walk.placeholders:
        return True
    return position == 0 and (op.type in IMAGE_READERS or op.type in DENSE_READERS)


class _Retry(Exception):
    """The walk starts again: a made-up layer needs another output count, or a guessed image
    another size (``image``: the input and how many sizes to skip)."""

    def __init__(self, layer: int, count: int, image: tuple[str, int] | None = None) -> None:
        super().__init__(f"layer {layer} needs {count} outputs" if image is None else "size")
        self.layer = layer
        self.count = count
        self.image = image


class _Walk:
    def __init__(
        self,
        model: Model,
        shapes: Mapping[str, Sequence[int]],
        values: Mapping[str, Any],
        seed: int,
        random_params: bool | None,
        overrides: Mapping[int, int],
        generic: Mapping[str, int],
        image_skip: Mapping[str, int],
    ) -> None:
        self.model = model
        self.shapes = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        self.values = dict(values)
        self.seed = seed
        self.random_params = random_params
        self.overrides = dict(overrides)
        self.generic = dict(generic)
        self.image_skip = dict(image_skip)
        self.image_guesses: dict[str, int] = {}
        self.generic_made: dict[str, int] = {}
        self.result = Synthesis()
        self.ws = Workspace(seed=seed)
        self.rng = np.random.default_rng([seed, 1])
        self.param_rng = np.random.default_rng([seed, 2])
        self.makers: dict[int, tuple[Net, ParamMaker]] = {}
        #: Forward programs of the RecurrentNetwork ops dry-run, by ``id`` of their step net.
        self.programs: dict[int, ForwardProgram] = {}
        self.image: tuple[int, int] | None = None
        self.remake: set[str] = set()
        self.placeholders: set[str] = set()

    # init_net ---------------------------------------------------------------------------------

    def run_init(self) -> None:
        init = self.model.init_net
        if init is None:
            return
        for index, op in enumerate(init):
            try:
                run_op(op, self.ws, index=index, net=init)
            except GraphToolsError as exc:
                if self.random_params is False:
                    exc.add_note("the init_net cannot run here; random parameters were refused")
                    raise
                reason = str(exc).splitlines()[0]
                self.result.skipped_ops.append(
                    SkippedOp("init_net", index, op.type, tuple(op.outputs), reason)
                )
        for op in init:
            for name in op.outputs:
                if self.ws.has(name):
                    self.result.init_values[name] = self.ws.fetch(name)

    @property
    def params_allowed(self) -> bool:
        if self.random_params is not None:
            return self.random_params
        return self.model.init_net is None or bool(self.result.skipped_ops)

    # data inputs ------------------------------------------------------------------------------

    def feed_data(self) -> None:
        """Feed the inputs whose shape is given or must be checked against the whole net
        (images, FC data); the others are made when an op first reads them."""
        net = self.model.predict_net
        readers = first_readers(net)
        placeholders = placeholder_inputs(self.model)
        self.placeholders = set(placeholders)
        declared = set(net.external_inputs)
        data: list[str] = []
        for name, (_, op, position) in readers.items():
            role = ROLES.get((op.type, position))
            if self.ws.has(name) and (op.type, position) in PLACEHOLDER_ROLES and name in declared:
                self.remake.add(name)  # an init_net placeholder of an input image
                self.result.placeholders[name] = "an init_net fill"
            if self.ws.has(name) and name not in placeholders:
                continue
            if name in self.values or (role is None and _fed_up_front(name, op, position, self)):
                data.append(name)
        data += [n for n in (*self.shapes, *self.values) if n not in data and n not in readers]
        hints = {
            name: (shape, f"the shape of the init_net's placeholder ({fill})")
            for name, (shape, fill) in placeholders.items()
            if shape is not None
        }
        guessing = [n for n in data if n not in self.shapes and n not in self.values]
        guesses = guess_input_shapes(self.model, guessing, self.shapes, hints, self.image_skip)
        self.image_guesses = {
            name: guess.size_index
            for name, guess in guesses.items()
            if guess.size_index is not None
        }
        rng = np.random.default_rng(self.seed)
        for name in data:
            if name in self.values:
                value = self.values[name]
                origin, reason = "given", "fed values"
            else:
                if name in self.shapes:
                    shape, origin, reason = self.shapes[name], "given", "--shapes"
                else:
                    guess = guesses[name]
                    shape, origin, reason = guess.shape, "guessed", guess.reason
                value = rng.standard_normal(shape).astype(np.float32)
                reader = readers.get(name)
                if reader is not None and reader[1].type in _QUANTIZED_READERS:
                    value = _quantized(value)
            if name in placeholders:
                self.result.placeholders[name] = placeholders[name][1]
            self._remember(name, value, origin, reason)
            self.ws.feed(name, value)
            reader = readers.get(name)
            array = _array(value)
            if reader is not None and reader[1].type in IMAGE_READERS and array.ndim == 4:
                nhwc = order(reader[1]) == "NHWC"
                self.image = self.image or (
                    (array.shape[1], array.shape[2]) if nhwc else (array.shape[2], array.shape[3])
                )

    # predict_net ------------------------------------------------------------------------------

    def _maker(self, net: Net, ws: Workspace) -> tuple[Net, ParamMaker]:
        """The float view of ``net`` and the parameter maker planned for it, once per net."""
        found = self.makers.get(id(net))
        if found is not None:
            return found
        view = float_view(net)
        shapes: dict[str, tuple[int, ...]] = {}
        forced: dict[str, tuple[int, ...]] = {}
        for name in first_readers(net):
            if ws.has(name):
                shape = tuple(np.shape(_array(ws.fetch(name))))
                made = name in self.result.feeds and name not in self.result.params
                if made and len(shape) >= 2:
                    shapes[name] = shape
                else:
                    forced[name] = shape
        try:
            counts = plan_channels(view, shapes, _PARAM_CHANNELS, forced)
        except GraphToolsError:
            counts = {}
        _fixed_counts(view, counts)
        program = self.programs.get(id(net))
        if program is not None:
            _step_counts(view, program, counts, ws)
        if net is self.model.predict_net:
            counts.update(self.overrides)
        found = (view, ParamMaker(self.param_rng, counts, _PARAM_CHANNELS))
        self.makers[id(net)] = found
        return found

    def run_predict(self) -> None:
        net = self.model.predict_net
        for index, op in enumerate(net):
            if op.type == "RecurrentNetwork":
                self._prepare_recurrent(index, op, net)
            else:
                self._make_missing(index, op, net, self.ws)
                for _, nested in op.nested_nets():
                    self._dry_run(nested)
            try:
                run_op(op, self.ws, index=index, net=net)
            except GraphToolsError as exc:
                if op.type == "Reshape" and self.result.params:
                    fix = _reshape_count(net, index, self.ws)
                    if fix is not None and self.overrides.get(fix[0]) != fix[1]:
                        raise _Retry(*fix) from None
                if op.type in EXTERNAL_IO and self.params_allowed:
                    reason = str(exc).splitlines()[0]
                    skipped = SkippedOp("predict_net", index, op.type, tuple(op.outputs), reason)
                    self.result.skipped_ops.append(skipped)
                    continue
                retry = self._next_image_size()
                if retry is not None:
                    raise retry from None
                if not self._replace_params(index, op, net, str(exc).splitlines()[0]):
                    raise
                run_op(op, self.ws, index=index, net=net)

    def _next_image_size(self) -> _Retry | None:
        """Another size for a guessed image the run refused, while untried sizes remain."""
        for name, index in self.image_guesses.items():
            if index + 1 < len(IMAGE_SIZES):
                return _Retry(-1, 0, image=(name, index + 1))
        return None

    def _replace_params(self, index: int, op: Op, net: Net, reason: str) -> bool:
        """Replace the init_net parameters op #``index`` reads that do not fit it by made-up
        ones (not when the user gave the data, unless ``random_params`` is on); whether any
        was replaced."""
        if self.random_params is False or self.model.init_net is None:
            return False
        if self.random_params is None and (self.shapes or self.values):
            return False  # the user's own data do not fit the init_net: that is their error
        view = float_view(net)
        try:
            counts = plan_channels(view, {}, _PARAM_CHANNELS, {})
        except GraphToolsError:
            counts = {}
        maker = ParamMaker(self.param_rng, counts, _PARAM_CHANNELS)
        replaced = False
        for position in range(1, len(op.inputs)):
            name = op.inputs[position]
            if name in self.result.feeds:
                continue
            value = self._param(
                index, view[index], op, position, lambda p: self.ws.fetch(op.inputs[p]), maker
            )
            if value is not None:
                old = np.shape(_array(self.ws.fetch(name)))
                self.ws.feed(name, value)
                self.result.feeds[name] = value
                self.result.params[name] = tuple(np.shape(_array(value)))
                self.result.replaced[name] = (
                    f"{'x'.join(map(str, old))} from the init_net: {reason}"
                )
                replaced = True
        return replaced

    def _prepare_recurrent(self, index: int, op: Op, net: Net) -> None:
        """Make what the ``RecurrentNetwork`` op #``index`` reads: its sequence and initial
        states first, then what its step net reads from outside (its references: parameters,
        sequence lengths) inside one dry step, where the linked inputs have the shapes the
        real steps give them; whatever the dry step did not make, as for any op."""
        try:
            program = forward_program(op)
        except GraphToolsError:
            program = None  # the real run reports it
        if program is not None:
            initial = {state.input_index for state in program.states}
            references = set(range(1, len(op.inputs))) - initial
            self._make_missing(index, op, net, self.ws, skip=references)
            self.programs[id(program.step_net)] = program
            self._dry_step(index, net, program)
        self._make_missing(index, op, net, self.ws)

    def _dry_step(self, outer: int, net: Net, program: ForwardProgram) -> None:
        """Run step 0 of op #``outer``'s step net in a throwaway workspace set up as the
        kernel sets it up (states from the initial values, the timestep), making the
        parameters its ops read. A linked input whose made-up producer layer in ``net`` gives
        it a feature count the step op does not take restarts the walk with the count it
        needs; any other failure stops the dry run (the real run reports it)."""
        child = Workspace(self.ws)
        step = program.step_net
        try:
            sequence = np.shape(_array(self.ws.fetch(net[outer].inputs[0])))
            if len(sequence) < 2:
                return
            for state in program.states:
                init = self.ws.fetch(state.input)
                child.feed(state.state, state_tensor(state, init, max(sequence[0], 1), sequence[1]))
            child.feed(program.timestep, np.zeros(1, np.int32))
            for index, step_op in enumerate(step):
                self._make_missing(index, step_op, step, child)
                self._check_linked(outer, net, step, index, child)
                run_op(step_op, child, index=index, net=step)
        except (GraphToolsError, ValueError, IndexError):
            return

    def _check_linked(self, outer: int, net: Net, step: Net, index: int, ws: Workspace) -> None:
        """Raise ``_Retry`` when step op #``index`` needs another last dim of an input that a
        made-up layer of ``net`` gives it through a link of op #``outer``."""
        step_op = step[index]
        linked = {
            position: self._linked_layer(outer, net, step, index, position)
            for position in range(len(step_op.inputs))
        }
        free = {position for position, layer in linked.items() if layer is not None}
        dims = [_last_dim(ws, name) for name in step_op.inputs]
        for position, count in _demanded(step_op, dims, free).items():
            layer = linked[position]
            if layer is not None and count not in (dims[position], self.overrides.get(layer)):
                raise _Retry(layer, count)

    def _linked_layer(
        self, outer: int, net: Net, step: Net, index: int, position: int
    ) -> int | None:
        """The made-up FC layer of ``net`` whose output reaches input ``position`` of step op
        #``index`` through a link of op #``outer`` (features on the last axis), or ``None``."""
        for feeder in _feeding_ops(step, step.ssa().ssa[index][0][position]):
            if step[feeder].type != APPLY_LINK:
                continue
            external = step[feeder].inputs[1]
            for outer_position, name in enumerate(net[outer].inputs):
                if name != external:
                    continue
                layer = _producer_layer(net, outer, outer_position)
                if layer is None or net[layer].type not in _FEATURES_LAST:
                    continue
                if len(net[layer].inputs) > 1 and net[layer].inputs[1] in self.result.params:
                    return layer
        return None

    def _dry_run(self, net: Net) -> None:
        """Walk a nested net in a throwaway child workspace so its parameters get made; a
        failure stops the dry run (the real run reports it)."""
        child = Workspace(self.ws)
        try:
            for index, op in enumerate(net):
                self._make_missing(index, op, net, child)
                run_op(op, child, index=index, net=net)
        except GraphToolsError:
            return

    def _make_missing(
        self, index: int, op: Op, net: Net, ws: Workspace, skip: Set[int] = frozenset()
    ) -> None:
        made: dict[int, Any] = {}

        def need(position: int) -> Any:
            name = op.inputs[position]
            if ws.has(name) and name not in self.remake:
                return ws.fetch(name)
            if position not in made:
                made[position] = self._make(index, op, position, net, ws, need)
                self.remake.discard(name)
                ws.feed(name, made[position])
                if ws is not self.ws:  # made inside a nested net: the real run needs it too
                    self.ws.feed(name, made[position])
            return made[position]

        for position in range(len(op.inputs)):
            if position not in skip:
                need(position)

    def _make(
        self,
        index: int,
        op: Op,
        position: int,
        net: Net,
        ws: Workspace,
        need: Callable[[int], Any],
    ) -> Any:
        name = op.inputs[position]
        role = ROLES.get((op.type, position))
        if role is not None:
            given = self.shapes.get(name) if (op.type, position) in PLACEHOLDER_ROLES else None
            context = _RoleContext(op, ws, self.rng, need, self.image, given)
            value = role[0](context)
            self._remember(name, value, "role", f"{role[1]} of op #{index} ({op.type})")
            return value
        where = f"op #{index} ({op.type})" + (f" in net {net.name!r}" if net.name else "")
        if position >= 1:
            view, maker = self._maker(net, ws)
            value = self._param(index, view[index], op, position, need, maker)
            if value is not None:
                if not self.params_allowed:
                    raise InvalidNetError(
                        f"{where} reads parameter {name!r}, which neither the init_net makes "
                        "nor a feed gives; pass --random-params to make up missing parameters"
                    )
                self.result.params[name] = tuple(np.shape(_array(value)))
                self.result.feeds[name] = value
                return value
        value, reason = self._like(op, position, ws)
        self._remember(name, value, "guessed", f"{where} reads it; {reason}")
        return value

    def _param(
        self,
        index: int,
        float_op: Op,
        op: Op,
        position: int,
        need: Callable[[int], Any],
        maker: ParamMaker,
    ) -> Any:
        """A made-up parameter for input ``position`` (quantized for Int8 ops), or ``None``
        when no rule gives its shape."""
        first = need(0)
        try:
            spec = param_spec(
                float_op,
                index,
                position,
                tuple(np.shape(_array(first))),
                maker.counts,
                maker.channels,
            )
        except (GraphToolsError, KeyError, ValueError, IndexError, TypeError):
            spec = None
        if spec is None:
            return None
        value = maker.value(spec)
        if op.type in _ARITHMETIC and np.issubdtype(np.asarray(first).dtype, np.integer):
            # an operand of integer arithmetic is an integer too (Caffe2 does not promote):
            # small, and non-zero where it divides or scales
            low = 1 if spec.init == "positive" else -2
            return self.rng.integers(low, 5, spec.shape).astype(np.asarray(first).dtype)
        if not op.type.startswith("Int8"):
            return value
        if position == 1 or not isinstance(first, Int8Tensor):
            return _quantized(value)
        weight = need(1)
        scale = first.scale * (weight.scale if isinstance(weight, Int8Tensor) else 1.0)
        return Int8Tensor(np.round(value / scale).astype(np.int32), scale, 0)

    def _like(self, op: Op, position: int, ws: Workspace) -> tuple[Any, str]:
        """A data input nothing says the shape of: square matrices for a MatMul, the shape
        of another input the op already has, else ``GENERIC_SHAPE``."""
        if op.type in ("MatMul", "BatchMatMul") and position == 0:
            shape: tuple[int, ...] = (4, 4) if op.type == "MatMul" else (2, 4, 4)
            if len(op.inputs) > 1 and ws.has(op.inputs[1]):
                b = np.shape(_array(ws.fetch(op.inputs[1])))
                inner = b[-1] if op.arg("trans_b", 0) else b[-2] if len(b) >= 2 else b[0]
                pair = (inner, 4) if op.arg("trans_a", 0) else (4, inner)
                shape = (*b[:-2], *pair) if op.type == "BatchMatMul" else pair
                return self.rng.standard_normal(shape).astype(np.float32), "to fit the other"
            return self.rng.standard_normal(shape).astype(np.float32), "square matrices"
        for other in op.inputs:
            if ws.has(other):
                value = ws.fetch(other)
                if isinstance(value, Int8Tensor):
                    q = self.rng.integers(0, 256, value.values.shape).astype(np.uint8)
                    return Int8Tensor(q, value.scale, value.zero_point), f"like {other!r}"
                array = np.asarray(value)
                if np.issubdtype(array.dtype, np.number):
                    made = self.rng.standard_normal(array.shape).astype(array.dtype)
                    return made, f"shaped like {other!r}"
        name = op.inputs[position]
        if name in self.generic:
            shape = GENERIC_SHAPES[self.generic[name]]
            reason = "nothing says its rank; the shapes tried before failed"
        else:
            known = {
                other: tuple(np.shape(_array(value)))
                for other, value in self.result.feeds.items()
                if other not in self.result.params
            }
            guess = guess_generic(self.model, name, known)
            shape, reason = guess.shape, guess.reason
        if shape in GENERIC_SHAPES:
            self.generic_made[name] = GENERIC_SHAPES.index(shape)
        return self.rng.standard_normal(shape).astype(np.float32), reason

    def _remember(self, name: str, value: Any, origin: str, reason: str) -> None:
        array = _array(value)
        self.result.inputs.append(
            MadeInput(name, tuple(array.shape), str(array.dtype), origin, reason)
        )
        self.result.feeds[name] = value

    def outputs(self, names: Sequence[str]) -> None:
        for name in names:
            if self.ws.has(name):
                self.result.outputs[name] = self.ws.fetch(name)
            else:
                self.result.missing_outputs.append(name)


_RETRIES = 6


def synthesize(
    model: Model,
    shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    values: Mapping[str, Any] | None = None,
    seed: int = 0,
    random_params: bool | None = None,
    outputs: Sequence[str] | None = None,
) -> Synthesis:
    """Feed ``model`` made-up data, run it once, and say what was made.

    Args:
        model: the pair (its init_net runs first, op by op).
        shapes: shapes of data inputs (``--shapes``); others are guessed.
        values: arrays to feed as they are (a saved input file).
        seed: seed of every random value.
        random_params: make up parameters nothing provides: ``None`` (default) for a
            predict_net without an init_net and for the outputs of init_net ops that cannot
            run, ``True`` always, ``False`` never (an init_net op that cannot run then raises).
        outputs: the outputs to return (default: the declared external outputs).

    Returns:
        A ``Synthesis``; run the model again on ``feeds`` (without ``skipped_init_ops``) to
        reproduce ``outputs``.

    Raises:
        InvalidNetError: a blob cannot be made (a parameter when ``random_params`` is off).
        UnsupportedOpError / ExecutionError: as ``run_op``; the note names guessed shapes.
    """
    overrides: dict[int, int] = {}
    generic: dict[str, int] = {}
    image_skip: dict[str, int] = {}
    first: GraphToolsError | None = None
    args = (model, shapes or {}, values or {}, seed, random_params, overrides, generic, image_skip)
    for _ in range(_RETRIES + len(IMAGE_SIZES)):
        walk = _Walk(*args)
        try:
            return _finish(walk, model, outputs)
        except _Retry as retry:
            if retry.image is not None:
                image_skip[retry.image[0]] = retry.image[1]
            else:
                overrides[retry.layer] = retry.count
        except GraphToolsError as exc:
            first = first or exc
            untried = [n for n, i in walk.generic_made.items() if i + 1 < len(GENERIC_SHAPES)]
            if not untried:
                raise first from None
            generic[untried[0]] = walk.generic_made[untried[0]] + 1
    try:
        return _finish(_Walk(*args), model, outputs)
    except GraphToolsError:
        if first is not None:
            raise first from None
        raise


def _finish(walk: _Walk, model: Model, outputs: Sequence[str] | None) -> Synthesis:
    walk.run_init()
    walk.feed_data()
    try:
        walk.run_predict()
    except GraphToolsError as exc:
        guessed = [made for made in walk.result.inputs if made.origin == "guessed"]
        if guessed:
            listed = ", ".join(f"{m.name}={'x'.join(map(str, m.shape))}" for m in guessed)
            exc.add_note(f"input shapes were guessed ({listed}); give them with --shapes")
        raise
    walk.outputs(list(model.predict_net.external_outputs) if outputs is None else outputs)
    return walk.result

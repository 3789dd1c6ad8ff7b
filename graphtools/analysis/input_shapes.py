"""Guess the shapes of a model's data inputs from how its predict_net reads them.

Caffe2 nets carry no input shapes. To run a model nobody gave shapes for (``graphtools verify``
without ``--shapes``), each data input gets a shape its first reader accepts, the way
Polygraphy gives dynamic dims a default and says so:

* read as the image of a Conv, pool, SpatialBN, ... (``IMAGE_READERS``): ``(1, C, S, S)``
  (``(1, S, S, C)`` for NHWC), ``C`` from the conv weight or BN scale the init_net fills
  (else 3), ``S`` the smallest of ``IMAGE_SIZES`` for which the shape analysis of the whole
  predict_net finds no contradiction (a classifier's FC weights or a fixed pooling window
  pin it);
* read as the data of an FC (``DENSE_READERS``): ``(1, K)``, ``K`` the weight's input
  features (else 16);
* otherwise ``GENERIC_SHAPE``.

Every guess carries the reason, which the CLI prints. Parameters the net reads that nothing
provides are made up by the shape analysis' ``missing`` hook (``channels.param_spec``) while
sizes are tried, the way ``graphtools.testing.random_params`` would make them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from graphtools.analysis.channels import param_spec, plan_channels
from graphtools.analysis.shape_types import Values
from graphtools.analysis.shapes import TensorType, fill_facts, infer_shapes
from graphtools.errors import GraphToolsError, InvalidNetError
from graphtools.ir import Model, Net, Op

__all__ = [
    "DENSE_READERS",
    "GENERIC_SHAPE",
    "GENERIC_SHAPES",
    "IMAGE_READERS",
    "IMAGE_SIZES",
    "InputGuess",
    "fill_shape",
    "first_readers",
    "guess_generic",
    "guess_input_shapes",
    "per_image_fills",
    "placeholder_hints",
    "placeholder_inputs",
]

#: Op types whose first input is an image (N, C, H, W) or (N, H, W, C).
IMAGE_READERS = frozenset(
    {
        *("Conv", "ConvRelu", "ConvTranspose", "Int8Conv", "Int8ConvRelu"),
        *("MaxPool", "AveragePool", "MaxPool2D", "AveragePool2D", "LRN"),
        *("SpatialBN", "InstanceNorm", "ChannelShuffle", "PadImage", "ResizeNearest"),
        *("NCHW2NHWC", "NHWC2NCHW", "Int8Quantize"),
    }
)
#: Op types whose first input is a batch of feature vectors, flattened from ``axis``.
DENSE_READERS = frozenset({"FC", "FCTransposed", "Int8FC", "FbFCPacked"})

#: Roles that make a per-image input of a model (the image; the ``im_info`` of a detector,
#: which detectron2's exports fill in the init_net for one image size): an init_net fill of
#: such a declared input is a placeholder the made-up input replaces (a graph input on export).
PLACEHOLDER_ROLES = frozenset(
    {
        ("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", 0),
        *((op_type, 2) for op_type in ("GenerateProposals", "GenerateProposalsCPP")),
        ("BBoxTransform", 2),
    }
)
#: Square image sizes tried in order: the usual ones from the smallest (28 is MNIST's, 224,
#: 227 and 299 the classifiers'), then the tiny ones a test net may need.
IMAGE_SIZES = (28, 32, 64, 96, 128, 160, 192, 224, 227, 256, 299, 320, 4, 6, 8, 12, 16, 20, 24)
#: The shape of a data input whose first reader says nothing about its rank.
GENERIC_SHAPE = (2, 3, 4, 5)
#: Shapes tried in order for such an input, when the net computes with its dims.
GENERIC_SHAPES = (GENERIC_SHAPE, (1, 1, 1, 1), (4, 3), (6,))
_DEFAULT_CHANNELS = 3
_DEFAULT_FEATURES = 16
_PARAM_CHANNELS = 8


@dataclass(frozen=True)
class InputGuess:
    """A guessed input shape and why it was chosen (said to the user); ``size_index`` is the
    position in ``IMAGE_SIZES`` of a guessed image's size."""

    shape: tuple[int, ...]
    reason: str
    size_index: int | None = None


def first_readers(net: Net) -> dict[str, tuple[int, Op, int]]:
    """For every blob ``net`` reads before writing it: ``(op index, op, input position)`` of
    its first read."""
    found: dict[str, tuple[int, Op, int]] = {}
    written: set[str] = set()
    for index, op in enumerate(net):
        for position, name in enumerate(op.inputs):
            if name not in written and name not in found:
                found[name] = (index, op, position)
        written.update(op.outputs)
    return found


def _order(op: Op) -> str:
    value = op.arg("order", b"NCHW")
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.upper()


def _channels(op: Op, params: Mapping[str, TensorType]) -> tuple[int, str]:
    """The input channel count an image reader's parameters say, and where it came from."""
    nhwc = _order(op) == "NHWC"
    if len(op.inputs) > 1:
        weight = params.get(op.inputs[1])
        shape = None if weight is None else weight.shape
        if shape is not None and all(isinstance(d, int) for d in shape):
            dims = [int(d) for d in shape if d is not None]
            group = int(op.arg("group", 1))
            if op.type in ("Conv", "ConvRelu", "Int8Conv", "Int8ConvRelu") and len(dims) == 4:
                per_group = dims[3] if nhwc else dims[1]
                return per_group * group, f"the {op.inputs[1]} weight"
            if op.type == "ConvTranspose" and len(dims) == 4:
                return dims[0], f"the {op.inputs[1]} weight"
            if op.type in ("SpatialBN", "InstanceNorm") and len(dims) == 1:
                return dims[0], f"the {op.inputs[1]} scale"
    return _DEFAULT_CHANNELS, "the usual 3 colour channels"


def _features(op: Op, params: Mapping[str, TensorType]) -> tuple[int, str]:
    if len(op.inputs) > 1:
        weight = params.get(op.inputs[1])
        shape = None if weight is None else weight.shape
        if shape is not None and len(shape) >= 2 and all(isinstance(d, int) for d in shape):
            dims = [int(d) for d in shape if d is not None]
            k = dims[0] if op.type == "FCTransposed" else prod(dims[1:])
            return k, f"the {op.inputs[1]} weight"
    return _DEFAULT_FEATURES, "no weight to read it from"


def _fits(
    net: Net,
    inputs: Mapping[str, Sequence[int]],
    params: Mapping[str, TensorType],
    values: Mapping[str, Values],
) -> bool:
    """Whether the shape analysis finds no contradiction with these inputs (the params'
    known contents followed through the ops computing shapes: a ``Reshape`` to the batch and
    ``-1`` before an FC pins the image size); parameters nothing provides get the shapes
    ``random_params`` would give them."""
    shaped = {name: tuple(int(d) for d in shape) for name, shape in inputs.items()}
    planned: list[dict[int, Any]] = []  # the channel plan, made when a param is first missing

    def missing(index: int, op: Op, position: int, types: list[TensorType]) -> TensorType | None:
        x = types[0].shape if position >= 1 and types else None
        if x is None or not all(isinstance(d, int) for d in x):
            return None
        if not planned:
            try:
                planned.append(plan_channels(net, shaped, _PARAM_CHANNELS, {}))
            except (GraphToolsError, ValueError):  # an odd argument: no plan, no made-up param
                planned.append({})
        counts = planned[0]
        if index not in counts:
            return None
        try:
            dims = tuple(int(d) for d in x if d is not None)
            spec = param_spec(op, index, position, dims, counts, _PARAM_CHANNELS)
        except (GraphToolsError, ValueError, KeyError):
            return None
        return None if spec is None else TensorType(np.dtype(np.float32), spec.shape)

    try:
        infer_shapes(net, shaped, params=params, missing=missing, param_values=values)
    except InvalidNetError:
        return False
    return True


def _params(model: Model) -> tuple[Mapping[str, TensorType], Mapping[str, Values]]:
    """The init_net's fills: their types, and the contents known of the small integer ones."""
    if model.init_net is None:
        return {}, {}
    try:
        return fill_facts(model.init_net)
    except GraphToolsError:
        return {}, {}


def guess_input_shapes(
    model: Model,
    names: Sequence[str],
    given: Mapping[str, Sequence[int]],
    hints: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
    skip: Mapping[str, int] | None = None,
) -> dict[str, InputGuess]:
    """A shape for each of ``names`` (data inputs of ``model`` with no shape in ``given``).

    ``hints`` offers a shape to try first for some names, with its reason (an init_net
    placeholder's shape); it is taken when the analysis accepts it. ``skip`` gives, for image
    inputs, how many of ``IMAGE_SIZES`` to skip (the sizes a run already refused). Image
    inputs are sized with ``given`` and the earlier guesses in place, so the analysis checks
    them together. See the module docstring for the rules.
    """
    net = model.predict_net
    readers = first_readers(net)
    params, values = _params(model)
    known: dict[str, tuple[int, ...]] = {n: tuple(int(d) for d in s) for n, s in given.items()}
    guesses: dict[str, InputGuess] = {}
    for name in names:
        found = readers.get(name)
        hint = (hints or {}).get(name)
        skipped = (skip or {}).get(name, 0)
        if (
            hint is not None
            and not skipped
            and _plausible(found, hint[0])
            and _fits(net, {**known, name: hint[0]}, params, values)
        ):
            guess = InputGuess(hint[0], hint[1])
        elif found is None:
            guess = InputGuess(GENERIC_SHAPE, "the net does not read it")
        else:
            index, op, position = found
            where = f"op #{index} ({op.type}) reads it"
            if position == 0 and op.type in IMAGE_READERS:
                guess = _guess_image(net, name, op, where, known, params, values, skipped)
            elif position == 0 and op.type in DENSE_READERS:
                k, source = _features(op, params)
                axis = int(op.arg("axis", 1))
                shape = (1,) * max(axis, 1) + (k,)
                guess = InputGuess(shape, f"{where} as FC data; {k} features from {source}")
            else:
                guess = InputGuess(GENERIC_SHAPE, f"{where}; nothing says its rank")
        guesses[name] = guess
        known[name] = guess.shape
    return guesses


def _plausible(found: tuple[int, Op, int] | None, shape: tuple[int, ...]) -> bool:
    """Whether ``shape`` has a rank the first reader accepts (4-D images, 2-D+ FC data)."""
    if found is None or found[2] != 0:
        return True
    kind = found[1].type
    if kind in IMAGE_READERS:
        return 3 <= len(shape) <= 5
    return kind not in DENSE_READERS or len(shape) >= 2


def guess_generic(model: Model, name: str, known: Mapping[str, Sequence[int]]) -> InputGuess:
    """A shape for a data input its reader says nothing about: the first of
    ``GENERIC_SHAPES`` the shape analysis accepts with the ``known`` inputs."""
    params, values = _params(model)
    for facts in _strict_then_loose(values):
        for shape in GENERIC_SHAPES:
            if _fits(model.predict_net, {**known, name: shape}, params, facts):
                return InputGuess(shape, "nothing says its rank; the analysis accepts this shape")
    return InputGuess(GENERIC_SHAPE, "nothing says its rank")


def _strict_then_loose(values: Mapping[str, Values]) -> list[Mapping[str, Values]]:
    """The params' known contents to check sizes with: first all of them, then none. A net
    whose shape constants fit no size at all (a synthetic one, a weight of the wrong size)
    still gets the size the types alone accept, as before they were followed."""
    return [values, {}] if values else [values]


def _guess_image(
    net: Net,
    name: str,
    op: Op,
    where: str,
    known: Mapping[str, tuple[int, ...]],
    params: Mapping[str, TensorType],
    values: Mapping[str, Values],
    skip: int = 0,
) -> InputGuess:
    channels, source = _channels(op, params)
    nhwc = _order(op) == "NHWC"
    for facts in _strict_then_loose(values):
        for index, size in enumerate(IMAGE_SIZES):
            shape = (1, size, size, channels) if nhwc else (1, channels, size, size)
            if index >= skip and _fits(net, {**known, name: shape}, params, facts):
                loose = "" if facts is values else " (its shape constants fit none)"
                return InputGuess(
                    shape,
                    f"{where} as an image; {channels} channels from {source}, {size}x{size} "
                    f"the first usual size the net accepts{loose}",
                    index,
                )
    shape = (1, 224, 224, channels) if nhwc else (1, channels, 224, 224)
    return InputGuess(
        shape, f"{where} as an image; no size fits the shape analysis, 224 tried", len(IMAGE_SIZES)
    )


def placeholder_hints(
    placeholders: Mapping[str, tuple[tuple[int, ...] | None, str]],
) -> dict[str, tuple[tuple[int, ...], str]]:
    """``guess_input_shapes``'s ``hints`` from ``placeholder_inputs``: each placeholder's fill
    shape, where it has one, to try first."""
    return {
        name: (shape, f"the shape of the init_net's placeholder ({fill})")
        for name, (shape, fill) in placeholders.items()
        if shape is not None
    }


def placeholder_inputs(model: Model) -> dict[str, tuple[tuple[int, ...] | None, str]]:
    """Declared predict_net inputs the init_net fills that the predict_net reads as data
    (the first input of an image or FC reader): placeholders exporters write so the blob
    exists, which a feed replaces. Returns ``{name: (the fill's shape or None, a description
    of the fill)}``."""
    if model.init_net is None:
        return {}
    filled: dict[str, Op] = {}
    for op in model.init_net:
        for name in op.outputs:
            filled[name] = op
    declared = set(model.predict_net.external_inputs)
    found: dict[str, tuple[tuple[int, ...] | None, str]] = {}
    for name, (_, op, position) in first_readers(model.predict_net).items():
        reads_data = op.type in IMAGE_READERS or op.type in DENSE_READERS
        if name in filled and name in declared and position == 0 and reads_data:
            found[name] = fill_shape(filled[name])
    return found


def per_image_fills(model: Model) -> dict[str, tuple[tuple[int, ...] | None, str, int, str]]:
    """Declared inputs the init_net fills that an op reads as per-image data (a detector's
    ``im_info``, ``PLACEHOLDER_ROLES``), filled for the image size the pair was exported at:
    ``{name: (the fill's shape or None, the fill described, reader's index, reader's type)}``.
    A feed replaces them as it does ``placeholder_inputs``."""
    if model.init_net is None:
        return {}
    filled = {name: op for op in model.init_net for name in op.outputs}
    declared = set(model.predict_net.external_inputs)
    return {
        name: (*fill_shape(filled[name]), index, op.type)
        for name, (index, op, position) in first_readers(model.predict_net).items()
        if name in filled and name in declared and (op.type, position) in PLACEHOLDER_ROLES
    }


def fill_shape(fill: Op) -> tuple[tuple[int, ...] | None, str]:
    """A fill's ``shape`` argument (``None`` without one) and the fill described."""
    raw = fill.arg("shape")
    shape = None if raw is None else tuple(int(d) for d in raw)
    dims = "?" if shape is None else "x".join(str(d) for d in shape) or "()"
    return shape, f"{fill.type} of shape {dims}"

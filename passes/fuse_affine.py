"""Fold a ``Mul`` or ``Add`` by a per-channel constant into the ``Conv``, ``ConvTranspose``,
``Gemm`` or ``BatchNormalization`` computing its other operand, in every graph of an ONNX model
(control-flow bodies included).

Exporters write an affine channel layer (Caffe2's ``AffineChannel``, a scale after a batch
norm) as ``Mul`` and ``Add`` by constants that vary along the channel axis only: ``[C]`` after a
``Gemm``, ``[1, C, 1, 1]`` (or a scalar) after a convolution. Multiplying by ``s`` scales the
producer's weights along its output channels and its bias (a ``BatchNormalization``'s scale and
bias); adding ``t`` adds to its bias (a missing bias counts as zero). The new weights are
computed by onnxruntime from ONNX arithmetic ops (``graphtools.dialects.onnx_fusion``).

A ``Mul`` by a constant varying along the channels alone of a ``Conv``'s input (or a scalar)
goes into the ``Conv`` reading it: its weights scaled along their input channels (per group),
the bias unchanged; the padded zeros stay zeros. The data must have the ``Conv``'s input
shape already (the ``Mul`` broadcasts nothing up), the constant must be finite (``0 * inf``),
and the scaled weights must stay in their type's normal range (``analysis.float_range``).

A fusion needs the producer's output read by the ``Mul``/``Add`` alone, its weights, bias and
the constant to be initializers of one float type, a ``ConvTranspose`` of one group, a ``Gemm``
without ``transA``, a ``BatchNormalization`` in inference mode (``fuse-batchnorm``'s rule),
and new weights that stay finite in their type (``onnx_fusion.overflows``: a float16 weight
of 100 times 1000 does not). The replaced weights stay until ``remove-unused-params`` drops
them.

Example (``w`` is ``C x C x 1 x 1``, ``s`` is ``[1, C, 1, 1]``)::

    before                                after (initializers w_scaled, b_scaled)
      #0 Conv(x@0, w@0, b@0) -> c@1         #0 Conv(x@0, w_scaled@0, b_scaled@0) -> y@1
      #1 Mul(c@1, s@0) -> y@1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.float_range import fits_float_type
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ArrayTensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FuseAffine"]

_FLOATS = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})


@dataclass(frozen=True)
class _Fusion:
    """One ``Mul``/``Add`` to fold: the ops, what the new producer reads, the arithmetic."""

    affine: int
    producer: int
    inputs: list[str]
    item: Any  # graphtools.dialects.onnx_fusion.ScaleShift (that module loads onnx)
    new_weight: str | None
    new_bias: str


def _standard(op: Op) -> bool:
    return op.domain in (None, "", "ai.onnx")


def _inference_norm(op: Op, opset: int) -> bool:
    if len(op.inputs) != 5 or any(op.outputs[1:]) or op.arg("training_mode", 0):
        return False
    return op.arg("spatial", 1) == 1 and (opset >= 7 or bool(op.arg("is_test", 0)))


def _channels(
    flow: DataFlow, producer: Op, opset: int, types: Callable[[], Mapping[str, ValueType]]
) -> tuple[int, int, int] | None:
    """``(channels, weight axis over them, rank of the output)`` of a producer whose weights
    a per-channel scale can go into."""
    weight = flow.constant(producer.inputs[1]) if len(producer.inputs) > 1 else None
    if weight is None:
        return None
    if producer.type == "Conv":
        return weight.shape[0], 0, len(weight.shape)
    if producer.type == "ConvTranspose" and producer.arg("group", 1) == 1:
        return weight.shape[1], 1, len(weight.shape)
    if producer.type == "Gemm" and len(weight.shape) == 2 and not producer.arg("transA", 0):
        axis = 0 if producer.arg("transB", 0) else 1
        return weight.shape[axis], axis, 2
    if producer.type == "BatchNormalization" and _inference_norm(producer, opset):
        output = types().get(producer.outputs[0])
        if output is None or output.shape is None or len(output.shape) < 2:
            return None
        return weight.shape[0], 0, len(output.shape)
    return None


def _per_channel(constant: np.ndarray, channels: int, rank: int) -> bool:
    """Whether ``constant`` varies along the channel axis alone of a rank-``rank`` output
    (axis 1: the columns of a ``Gemm``'s matrix, the channels of an image batch)."""
    shape = constant.shape
    if constant.size == 1:
        return len(shape) <= rank
    if len(shape) > rank:
        return False
    padded = (1,) * (rank - len(shape)) + shape
    return padded[1] == channels and all(d == 1 for i, d in enumerate(padded) if i != 1)


def _find(
    flow: DataFlow,
    opset: int,
    types: Callable[[], Mapping[str, ValueType]],
    names: NameSource,
) -> list[_Fusion]:
    net = flow.net
    found: list[_Fusion] = []
    claimed: set[int] = set()
    for index, op in enumerate(net):
        if op.type not in ("Mul", "Add") or not _standard(op) or len(op.inputs) != 2:
            continue
        for data, other in ((op.inputs[0], op.inputs[1]), (op.inputs[1], op.inputs[0])):
            producer_index = flow.producer(data)
            constant = flow.constant(other)
            if producer_index is None or constant is None or producer_index in claimed:
                continue
            producer = net[producer_index]
            if not _standard(producer) or flow.only_reader(data) != index:
                continue
            if len(producer.outputs) < 1 or any(producer.outputs[1:]):
                continue
            shape = _channels(flow, producer, opset, types)
            if shape is None or not _per_channel(constant.numpy(), shape[0], shape[2]):
                continue
            fusion = _fusion(
                flow, op, index, producer, producer_index, constant.numpy(), shape, names
            )
            if fusion is not None:
                found.append(fusion)
                claimed.add(producer_index)
                break
    return found


def _fusion(
    flow: DataFlow,
    op: Op,
    index: int,
    producer: Op,
    producer_index: int,
    constant: np.ndarray,
    shape: tuple[int, int, int],
    names: NameSource,
) -> _Fusion | None:
    channels, axis, _ = shape
    norm = producer.type == "BatchNormalization"
    weight = flow.constant(producer.inputs[1])
    bias_position = 2
    bias_name = producer.inputs[bias_position] if len(producer.inputs) > bias_position else ""
    bias = flow.constant(bias_name) if bias_name else None
    if weight is None or (bias_name and bias is None):
        return None
    dtype = weight.dtype
    if (
        dtype not in _FLOATS
        or constant.dtype != dtype
        or (bias is not None and bias.dtype != dtype)
    ):
        return None
    gemm = producer.type == "Gemm"
    if gemm and (producer.arg("alpha", 1.0) != 1.0 or producer.arg("beta", 1.0) != 1.0):
        return None
    from graphtools.dialects.onnx_fusion import ScaleShift

    vector = constant.reshape(-1)
    if vector.size == 1:
        vector = np.broadcast_to(vector, (channels,))
    ones, zeros = np.ones((channels,), dtype), np.zeros((channels,), dtype)
    base = bias.numpy() if bias is not None else zeros
    if base.size == 1:
        base = np.broadcast_to(base.reshape(-1), (channels,))
    scaling = op.type == "Mul"
    item = ScaleShift(
        weight.numpy(),
        axis,
        base,
        num=vector if scaling else ones,
        var=ones,
        eps=0.0,
        mean=zeros,
        shift=zeros if scaling else vector,
    )
    inputs = list(producer.inputs)
    while len(inputs) <= bias_position:
        inputs.append("")
    hint = op.outputs[0]
    new_weight = names.fresh(f"{hint}_weight") if scaling else None
    if new_weight is not None:
        inputs[1] = new_weight
    new_bias = names.fresh(f"{hint}_bias")
    if scaling and bias is None and not norm:
        del inputs[bias_position:]  # a missing bias scaled is still no bias
    else:
        inputs[bias_position] = new_bias
    return _Fusion(index, producer_index, inputs, item, new_weight, new_bias)


def _apply(
    net: Net,
    fusions: list[_Fusion],
    values: dict[int, tuple[np.ndarray, np.ndarray]],
    scales: list[_InputScale],
    scaled: dict[int, np.ndarray],
) -> bool:
    with net.edit() as edit:
        for scale in scales:
            edit.set_initializer(scale.new_weight, ArrayTensor(scaled[id(scale)]))
            conv = net[scale.conv]
            inputs = [scale.source, scale.new_weight, *conv.inputs[2:]]
            edit.set_op(scale.conv, conv.replace(inputs=inputs))
            edit.remove(scale.scale)
        for fusion in fusions:
            weight, bias = values[id(fusion)]
            if fusion.new_weight is not None:
                edit.set_initializer(fusion.new_weight, ArrayTensor(weight))
            if fusion.new_bias in fusion.inputs:
                edit.set_initializer(fusion.new_bias, ArrayTensor(bias))
            producer = net[fusion.producer]
            fused = producer.replace(inputs=fusion.inputs, outputs=[net[fusion.affine].outputs[0]])
            edit.expand(fusion.affine, [fused])
            edit.remove(fusion.producer)
    return edit.changed


@dataclass(frozen=True)
class _InputScale:
    """A ``Mul`` by a per-input-channel constant to fold into the ``Conv`` reading it."""

    scale: int
    conv: int
    source: str
    weight: np.ndarray
    factor: np.ndarray  # the constant laid out along the weight's dims
    new_weight: str


def _find_input_scales(
    flow: DataFlow,
    taken: set[int],
    names: NameSource,
    types: Callable[[], Mapping[str, ValueType]],
) -> list[_InputScale]:
    """The ``Mul`` -> ``Conv`` pairs of ``flow``'s net whose scale goes into the weights; ops of
    ``taken`` (in another fusion) stay out. The data must have the ``Conv``'s input shape
    already (a ``Mul`` broadcasting it up a rank or to more channels stays)."""
    net = flow.net
    found: list[_InputScale] = []
    for index, conv in enumerate(net):
        if conv.type != "Conv" or not _standard(conv) or len(conv.inputs) < 2 or index in taken:
            continue
        scale_index = flow.producer(conv.inputs[0])
        weight = flow.constant(conv.inputs[1])
        if scale_index is None or scale_index in taken or weight is None:
            continue
        scale = net[scale_index]
        if scale.type != "Mul" or not _standard(scale) or len(scale.inputs) != 2:
            continue
        if flow.only_reader(conv.inputs[0]) != index or conv.inputs[1] == conv.inputs[0]:
            continue
        for source, other in (
            (scale.inputs[0], scale.inputs[1]),
            (scale.inputs[1], scale.inputs[0]),
        ):
            factor = _input_factor(flow.constant(other), weight.numpy(), conv.arg("group", 1))
            if factor is None or flow.constant(source) is not None:
                continue
            value_type = types().get(source)
            shape = None if value_type is None else value_type.shape
            channels = weight.shape[1] * conv.arg("group", 1)
            if shape is not None and len(shape) == len(weight.shape) and shape[1] == channels:
                hint = f"{conv.outputs[0]}_weight" if conv.outputs else "weight"
                found.append(
                    _InputScale(
                        scale_index, index, source, weight.numpy(), factor, names.fresh(hint)
                    )
                )
                taken.update((index, scale_index))
                break
    return found


def _input_factor(constant: Any, weight: np.ndarray, group: int) -> np.ndarray | None:
    """``constant`` (a per-channel scale of a ``Conv``'s input) as a factor of the weight's
    shape ``[M, C / group, k...]`` to multiply it by; ``None`` when it is not one."""
    if constant is None or weight.dtype not in _FLOATS or weight.ndim < 3 or group < 1:
        return None
    values = constant.numpy()
    channels, outputs = weight.shape[1] * group, weight.shape[0]
    if values.dtype != weight.dtype or outputs % group or not np.all(np.isfinite(values)):
        return None
    if not _per_channel(values, channels, weight.ndim):
        return None
    per_channel = np.broadcast_to(values.reshape(-1), (channels,))
    # output channel m reads input channels of its group: (m // (M / group)) * (C / group) + j
    rows = per_channel.reshape(group, channels // group)[np.arange(outputs) // (outputs // group)]
    factor = np.ascontiguousarray(rows.reshape(rows.shape + (1,) * (weight.ndim - 2)))
    if not fits_float_type(weight.astype(np.float64) * factor.astype(np.float64), weight.dtype):
        return None  # the scaled weights would overflow or flush to zero in their type
    return factor


def _scaled_weights(table: OnnxOpTable, scales: list[_InputScale]) -> list[np.ndarray]:
    """Each scale's new weight, ``weight * factor``, computed by onnxruntime in one run."""
    ops = [Op("Mul", [f"w{n}", f"f{n}"], [f"out{n}"]) for n in range(len(scales))]
    feeds = {f"w{n}": s.weight for n, s in enumerate(scales)}
    feeds.update({f"f{n}": s.factor for n, s in enumerate(scales)})
    wanted = [f"out{n}" for n in range(len(scales))]
    values = table.evaluate_ops(ops, feeds, wanted)
    return [values[name] for name in wanted]


@register_pass
@dataclass(frozen=True)
class FuseAffine(Pass):
    """Fold Mul/Add by per-channel constants into the Conv, ConvTranspose, Gemm or
    BatchNormalization before them, and a per-channel Mul into the Conv after it (see the
    module docstring).

    Stats: ``fused``.
    """

    name: ClassVar[str] = "fuse-affine"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the fusions of each graph, compute their weights in one run, apply them in one
        edit per graph."""
        table = cast("OnnxOpTable", op_table(model))
        opset = table.opset() or 1
        all_scopes = scopes(model.predict_net, table)
        if not any({"Mul", "Add"}.intersection(op.type for op in s.net) for s in all_scopes):
            return PassResult(model, False, {"fused": 0})
        nested = len(all_scopes) > 1

        def types() -> Mapping[str, ValueType]:  # only a BatchNormalization's rank needs them
            return table.infer_types(model, nested=nested)

        names = NameSource(model_names(model.predict_net))
        plans: list[tuple[Net, list[_Fusion], list[_InputScale]]] = []
        for scope in all_scopes:
            flow = DataFlow(scope)
            fusions = _find(flow, opset, types, names)
            taken = {index for f in fusions for index in (f.affine, f.producer)}
            scales = _find_input_scales(flow, taken, names, types)
            if fusions or scales:
                plans.append((scope.net, fusions, scales))
        if not plans:
            return PassResult(model, False, {"fused": 0})
        from graphtools.dialects.onnx_fusion import overflows, scale_and_shift

        fusions = [fusion for _, found, _ in plans for fusion in found]
        results = scale_and_shift([fusion.item for fusion in fusions]) if fusions else []
        values = {
            id(f): result
            for f, result in zip(fusions, results, strict=True)
            if not overflows(f.item, result)
        }
        fusions = [fusion for fusion in fusions if id(fusion) in values]
        plans = [(net, [f for f in found if id(f) in values], s) for net, found, s in plans]
        scales = [scale for _, _, found in plans for scale in found]
        weights = _scaled_weights(table, scales) if scales else []
        scaled = {id(s): weight for s, weight in zip(scales, weights, strict=True)}
        changed = False
        for net, found, net_scales in plans:
            changed = _apply(net, found, values, net_scales, scaled) or changed
        return PassResult(model, changed, {"fused": len(fusions) + len(scales)})

"""Fold a ``Mul`` or ``Add`` by a per-channel constant into the ``Conv``, ``ConvTranspose``,
``Gemm`` or ``BatchNormalization`` computing its other operand, in every graph of an ONNX model
(control-flow bodies included).

Exporters write an affine channel layer (Caffe2's ``AffineChannel``, a scale after a batch
norm) as ``Mul`` and ``Add`` by constants that vary along the channel axis only: ``[C]`` after a
``Gemm``, ``[1, C, 1, 1]`` (or a scalar) after a convolution. Multiplying by ``s`` scales the
producer's weights along its output channels and its bias (a ``BatchNormalization``'s scale and
bias); adding ``t`` adds to its bias (a missing bias counts as zero). The new weights are
computed by onnxruntime from ONNX arithmetic ops, all the fusions of a model in one run.

A fusion needs the producer's output read by the ``Mul``/``Add`` alone, its weights, bias and
the constant to be initializers of one float type, a ``ConvTranspose`` of one group, a ``Gemm``
without ``transA``, and a ``BatchNormalization`` in inference mode (``fuse-batchnorm``'s rule).
The replaced weights stay until ``remove-unused-params`` drops them.

Example (``w`` is ``C x C x 1 x 1``, ``s`` is ``[1, C, 1, 1]``)::

    before                                after (initializers w_scaled, b_scaled)
      #0 Conv(x@0, w@0, b@0) -> c@1         #0 Conv(x@0, w_scaled@0, b_scaled@0) -> y@1
      #1 Mul(c@1, s@0) -> y@1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ArrayTensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FuseAffine"]

_FLOATS = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
_ARITHMETIC_OPSET = {"": 17}
"""The opset the new weights are computed in: their arithmetic means the same in every one."""


@dataclass(frozen=True)
class _Fusion:
    """One ``Mul``/``Add`` to fold: the ops, what the new producer reads, the arithmetic."""

    affine: int
    producer: int
    inputs: list[str]
    feeds: dict[str, np.ndarray]
    ops: list[Op]
    results: dict[str, str]  # new initializer name -> the arithmetic's output holding it


def _standard(op: Op) -> bool:
    return op.domain in (None, "", "ai.onnx")


def _inference_norm(op: Op, opset: int) -> bool:
    if len(op.inputs) != 5 or any(op.outputs[1:]) or op.arg("training_mode", 0):
        return False
    return op.arg("spatial", 1) == 1 and (opset >= 7 or bool(op.arg("is_test", 0)))


def _channels(
    flow: DataFlow, producer: Op, opset: int, types: Mapping[str, ValueType]
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
        output = types.get(producer.outputs[0])
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
    types: Mapping[str, ValueType],
    names: NameSource,
    number: list[int],
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
                flow, op, index, producer, producer_index, constant.numpy(), shape, names, number
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
    number: list[int],
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
    tag = f"affine{number[0]}_"
    number[0] += 1
    weight_shape = [1] * len(weight.shape)
    weight_shape[axis] = -1
    base = bias.numpy() if bias is not None else np.zeros((channels,), dtype)
    feeds = {
        f"{tag}c": constant,
        f"{tag}w": weight.numpy(),
        f"{tag}b": base,
        f"{tag}n": np.asarray([channels], np.int64),
        f"{tag}flat": np.asarray([-1], np.int64),
        f"{tag}wshape": np.asarray(weight_shape, np.int64),
    }
    ops = [
        Op("Reshape", [f"{tag}c", f"{tag}flat"], [f"{tag}cf"]),
        Op("Expand", [f"{tag}cf", f"{tag}n"], [f"{tag}v"]),
    ]
    results: dict[str, str] = {}
    inputs = list(producer.inputs)
    hint = op.outputs[0]
    if op.type == "Mul":
        ops += [
            Op("Reshape", [f"{tag}v", f"{tag}wshape"], [f"{tag}vw"]),
            Op("Mul", [f"{tag}w", f"{tag}vw"], [f"{tag}w_out"]),
            Op("Mul", [f"{tag}b", f"{tag}v"], [f"{tag}b_out"]),
        ]
        results[names.fresh(f"{hint}_weight")] = f"{tag}w_out"
        inputs[1] = list(results)[-1]
        if bias is not None or norm:
            results[names.fresh(f"{hint}_bias")] = f"{tag}b_out"
            inputs[bias_position] = list(results)[-1]
    else:
        ops.append(Op("Add", [f"{tag}b", f"{tag}v"], [f"{tag}b_out"]))
        results[names.fresh(f"{hint}_bias")] = f"{tag}b_out"
        while len(inputs) <= bias_position:
            inputs.append("")
        inputs[bias_position] = list(results)[-1]
    return _Fusion(index, producer_index, inputs, feeds, ops, results)


def _apply(net: Net, fusions: list[_Fusion], values: dict[str, np.ndarray]) -> bool:
    with net.edit() as edit:
        for fusion in fusions:
            for name, result in fusion.results.items():
                edit.set_initializer(name, ArrayTensor(values[result]))
            producer = net[fusion.producer]
            fused = producer.replace(inputs=fusion.inputs, outputs=[net[fusion.affine].outputs[0]])
            edit.expand(fusion.affine, [fused])
            edit.remove(fusion.producer)
    return edit.changed


@register_pass
@dataclass(frozen=True)
class FuseAffine(Pass):
    """Fold Mul/Add by per-channel constants into the Conv/ConvTranspose/Gemm/
    BatchNormalization before them (see the module docstring).

    Stats: ``fused``.
    """

    name: ClassVar[str] = "fuse-affine"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the fusions of each graph, compute their weights in one run, apply them in one
        edit per graph."""
        from graphtools.dialects.onnx import onnx_table

        table = cast("OnnxOpTable", op_table(model))
        opset = table.opset() or 1
        all_scopes = scopes(model.predict_net, table.branch_nets)
        if not any({"Mul", "Add"}.intersection(op.type for op in s.net) for s in all_scopes):
            return PassResult(model, False, {"fused": 0})
        types = table.infer_types(model, nested=len(all_scopes) > 1)
        names = NameSource(model_names(model.predict_net))
        number = [0]
        plans: list[tuple[Net, list[_Fusion]]] = []
        for scope in all_scopes:
            flow = DataFlow(scope.net, scope.outer_constants)
            fusions = _find(flow, opset, types, names, number)
            if fusions:
                plans.append((scope.net, fusions))
        if not plans:
            return PassResult(model, False, {"fused": 0})
        fusions = [fusion for _, found in plans for fusion in found]
        feeds = {name: value for fusion in fusions for name, value in fusion.feeds.items()}
        ops = [op for fusion in fusions for op in fusion.ops]
        wanted = [result for fusion in fusions for result in fusion.results.values()]
        values = onnx_table(_ARITHMETIC_OPSET).evaluate_ops(ops, feeds, wanted)
        changed = False
        for net, found in plans:
            changed = _apply(net, found, values) or changed
        return PassResult(model, changed, {"fused": len(fusions)})

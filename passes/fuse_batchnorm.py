"""Fold an inference-mode ``BatchNormalization`` into the ``Conv``, ``ConvTranspose`` or ``Gemm``
computing its input, in every graph of an ONNX model (control-flow bodies included).

``BN(Conv(x, W, b))`` with ``s = scale / sqrt(var + epsilon)`` per channel is
``Conv(x, W * s, (b - mean) * s + bias)``: the weights are scaled along the output channels
(axis 0 of a ``Conv`` weight, axis 1 of a ``ConvTranspose`` weight of one group, the output
columns of a ``Gemm``'s ``B``), and a missing bias counts as zero. The new weights are computed
by onnxruntime from ONNX arithmetic ops (``graphtools.dialects.onnx_fusion``: fusions of one
shape stacked, all in one run), never by a kernel of ours.

A fusion needs the producer's output to be read by the BatchNormalization alone (not by
another op, a nested graph or as a graph output), the weights, bias and the normalisation's
four parameters to be constants (initializers, of the graph or of an enclosing one) of one
float type with one entry per channel, and the normalisation to run in inference mode: one
output, ``training_mode`` unset, ``spatial`` unset or 1, and before opset 7 ``is_test`` set.
A training-mode normalisation uses the batch's statistics, which no weight can hold (onnxscript's
optimizer folds it anyway and changes the outputs). A fusion whose new weights leave their type's
range (``onnx_fusion.overflows``: float16 weights times a large scale) is not made. The replaced
weights stay as initializers until ``remove-unused-params`` drops them.

Example (``w``, ``s``, ``b``, ``m``, ``v`` initializers)::

    before                                          after (initializers w_fused, b_fused)
      #0 Conv(x@0, w@0) -> c@1                        #0 Conv(x@0, w_fused@0, b_fused@0) -> y@1
      #1 BatchNormalization(c@1, s@0, b@0, m@0, v@0) -> y@1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ArrayTensor

__all__ = ["FuseBatchNorm"]

_PRODUCERS = frozenset({"Conv", "ConvTranspose", "Gemm"})
_FLOATS = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})


@dataclass(frozen=True)
class _Fusion:
    """One normalisation to fold: the ops, the arithmetic, the new weights' names."""

    norm: int
    producer: int
    item: Any  # graphtools.dialects.onnx_fusion.ScaleShift (that module loads onnx)
    new_weight: str
    new_bias: str


def _inference_mode(op: Op, opset: int) -> bool:
    if len(op.inputs) != 5 or any(op.outputs[1:]) or op.arg("training_mode", 0):
        return False
    if op.arg("spatial", 1) != 1:
        return False
    return opset >= 7 or bool(op.arg("is_test", 0))


def _weight_axis(producer: Op, weight: np.ndarray) -> int | None:
    """The axis of the producer's weight that runs over its output channels."""
    if producer.type == "Conv":
        return 0
    if producer.type == "ConvTranspose":
        return 1 if producer.arg("group", 1) == 1 else None
    if weight.ndim != 2:
        return None
    return 0 if producer.arg("transB", 0) else 1


def _find(flow: DataFlow, opset: int, names: NameSource) -> list[_Fusion]:
    """The normalisations of ``flow``'s net that can be folded, with the computation of their
    new weights."""
    net = flow.net
    found: list[_Fusion] = []
    claimed: set[int] = set()
    for index, norm in enumerate(net):
        if norm.type != "BatchNormalization" or norm.domain not in (None, "", "ai.onnx"):
            continue
        if not _inference_mode(norm, opset):
            continue
        producer_index = flow.producer(norm.inputs[0])
        if producer_index is None or producer_index in claimed:
            continue
        producer = net[producer_index]
        if producer.type not in _PRODUCERS or producer.domain not in (None, "", "ai.onnx"):
            continue
        if flow.only_reader(norm.inputs[0]) != index or len(producer.outputs) != 1:
            continue
        fusion = _fusion(flow, norm, index, producer, producer_index, names)
        if fusion is not None:
            found.append(fusion)
            claimed.add(producer_index)
    return found


def _fusion(
    flow: DataFlow,
    norm: Op,
    index: int,
    producer: Op,
    producer_index: int,
    names: NameSource,
) -> _Fusion | None:
    gemm = producer.type == "Gemm"
    if len(producer.inputs) < 2 or (gemm and producer.arg("transA", 0) not in (0, None)):
        return None
    constants = [flow.constant(name) for name in (producer.inputs[1], *norm.inputs[1:])]
    if any(tensor is None for tensor in constants):
        return None
    weight, scale, bias, mean, var = (tensor.numpy() for tensor in constants)  # type: ignore[union-attr]
    dtype = weight.dtype
    if dtype not in _FLOATS or any(
        p.dtype != dtype or p.ndim != 1 for p in (scale, bias, mean, var)
    ):
        return None
    axis = _weight_axis(producer, weight)
    if axis is None or weight.ndim <= axis:
        return None
    channels = weight.shape[axis]
    if any(p.shape != (channels,) for p in (scale, bias, mean, var)):
        return None
    old_bias_name = producer.inputs[2] if len(producer.inputs) > 2 else ""
    if old_bias_name:
        old_bias = flow.constant(old_bias_name)
        if old_bias is None or old_bias.dtype != dtype:
            return None
        base = old_bias.numpy()
        if base.size == 1:
            base = np.broadcast_to(base.reshape(-1), (channels,))
    else:
        base = np.zeros((channels,), dtype)
    from graphtools.dialects.onnx_fusion import ScaleShift

    item = ScaleShift(
        weight,
        axis,
        base,
        num=scale,
        var=var,
        eps=float(norm.arg("epsilon", 1e-5)),
        mean=mean,
        shift=bias,
        alpha=float(producer.arg("alpha", 1.0)) if gemm else 1.0,
        beta=float(producer.arg("beta", 1.0)) if gemm else 1.0,
    )
    hint = norm.outputs[0]
    return _Fusion(
        index,
        producer_index,
        item,
        names.fresh(f"{hint}_weight"),
        names.fresh(f"{hint}_bias"),
    )


def _fused_op(producer: Op, norm: Op, fusion: _Fusion) -> Op:
    inputs = [producer.inputs[0], fusion.new_weight, fusion.new_bias]
    fused = producer.replace(inputs=inputs, outputs=[norm.outputs[0]])
    if producer.type == "Gemm":
        fused = fused.without_arg("alpha").without_arg("beta")
    return fused


def _apply(
    net: Net, fusions: list[_Fusion], values: Mapping[int, tuple[np.ndarray, np.ndarray]]
) -> bool:
    with net.edit() as edit:
        for fusion in fusions:
            weight, bias = values[id(fusion)]
            edit.set_initializer(fusion.new_weight, ArrayTensor(weight))
            edit.set_initializer(fusion.new_bias, ArrayTensor(bias))
            fused = _fused_op(net[fusion.producer], net[fusion.norm], fusion)
            edit.expand(fusion.norm, [fused])
            edit.remove(fusion.producer)
    return edit.changed


@register_pass
@dataclass(frozen=True)
class FuseBatchNorm(Pass):
    """Fold inference-mode BatchNormalization into the Conv/ConvTranspose/Gemm before it (see
    the module docstring).

    Stats: ``fused`` (normalisations folded).
    """

    name: ClassVar[str] = "fuse-batchnorm"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the fusions of each graph, compute their weights in one run, apply them in one
        edit per graph."""
        table = op_table(model)
        opset = int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1)))
        names = NameSource(model_names(model.predict_net))
        plans: list[tuple[Net, list[_Fusion]]] = []
        for scope in scopes(model.predict_net, table):
            fusions = _find(DataFlow(scope), opset, names)
            if fusions:
                plans.append((scope.net, fusions))
        if not plans:
            return PassResult(model, False, {"fused": 0})
        values = _evaluate([fusion for _, fusions in plans for fusion in fusions])
        plans = [(net, [f for f in fusions if id(f) in values]) for net, fusions in plans]
        changed = False
        for net, fusions in plans:
            changed = _apply(net, fusions, values) or changed
        return PassResult(model, changed, {"fused": sum(len(f) for _, f in plans)})


def _evaluate(fusions: list[_Fusion]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The new weights of every fusion (by ``id``), computed by onnxruntime; a fusion whose
    weights overflow their type (``onnx_fusion.overflows``) is left out."""
    from graphtools.dialects.onnx_fusion import overflows, scale_and_shift

    results = scale_and_shift([fusion.item for fusion in fusions])
    return {
        id(fusion): result
        for fusion, result in zip(fusions, results, strict=True)
        if not overflows(fusion.item, result)
    }

"""Fuse a layer normalisation written out in arithmetic into one ``LayerNormalization``, in
every graph of an ONNX model (control-flow bodies included; opset 17 on).

A hand-written ``LayerNorm`` module (and older exports of one) computes::

    m = ReduceMean(x, axes)          d = Sub(x, m)
    v = ReduceMean(Pow(d, 2), axes)  (or Mul(d, d))
    n = Div(d, Sqrt(Add(v, eps)))    [y = Mul(n, gamma)]  [z = Add(y, beta)]

which is ``LayerNormalization(x, gamma, beta, axis, epsilon=eps)`` when ``axes`` are the last
dims of ``x`` (``axis`` the first of them; both means keep their dims), ``eps`` is a constant
scalar, ``gamma`` and ``beta`` are constants of the normalised dims' shape (a missing
``gamma`` is ones), no constant has more dims than ``x`` (it would raise the result's rank),
``x`` is of a float type, and every value in between is read inside the pattern alone. Nine
ops become one; onnxruntime computes the mean and variance in another order, so the outputs
agree within float rounding, not bit for bit (onnxsim fuses the same).

Example (``x`` is ``N x S x 8``, ``gamma`` and ``beta`` are ``[8]``)::

    before                                  after
      #0 ReduceMean(x@0) -> m@1 {axes=[-1]}   #0 LayerNormalization(x@0, gamma@0, beta@0)
      #1 Sub(x@0, m@1) -> d@1                      -> z@1 {axis=2, epsilon=1e-05}
      #2 Pow(d@1, two@0) -> p@1
      #3 ReduceMean(p@1) -> v@1 {axes=[-1]}
      #4 Add(v@1, eps@0) -> e@1
      #5 Sqrt(e@1) -> s@1
      #6 Div(d@1, s@1) -> n@1
      #7 Mul(n@1, gamma@0) -> y@1
      #8 Add(y@1, beta@0) -> z@1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.layouts import normalize_axes
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ArrayTensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FuseLayerNorm"]

_ELEM_DTYPES = {1: np.float32, 10: np.float16, 11: np.float64}
"""ONNX float element types and their numpy types (bfloat16 has none: left alone)."""


@dataclass
class _Fusion:
    """The ops of one written-out layer norm and the op replacing them."""

    ops: list[int]
    fused: Op
    initializers: dict[str, np.ndarray] = field(default_factory=dict)


class _Matcher:
    """Finds the written-out layer norms of one graph."""

    def __init__(self, flow: DataFlow, types: Mapping[str, ValueType], names: NameSource) -> None:
        self.flow = flow
        self.net = flow.net
        self.types = types
        self.names = names
        self.used: set[int] = set()

    def op_of(self, name: str, kind: str, reader: int | None = None) -> tuple[int, Op] | None:
        """The standard op of type ``kind`` producing ``name``, when ``reader`` (if given) is
        the only op reading ``name``."""
        index = self.flow.producer(name)
        if index is None or index in self.used:
            return None
        op = self.net[index]
        if op.type != kind or op.domain not in (None, "", "ai.onnx") or len(op.outputs) != 1:
            return None
        if reader is not None and self.flow.only_reader(name) != reader:
            return None
        return index, op

    def scalar(self, name: str, rank: int) -> float | None:
        """The value of constant ``name`` when it holds one element and broadcasting it
        against a rank-``rank`` value keeps the rank."""
        tensor = self.flow.constant(name)
        if tensor is None or tensor.size != 1 or len(tensor.shape) > rank:
            return None
        return float(tensor.numpy().reshape(-1)[0])

    def mean_axes(self, op: Op, rank: int) -> list[int] | None:
        if op.arg("keepdims", 1) != 1 or op.arg("noop_with_empty_axes", 0):
            return None
        if len(op.inputs) > 1 and op.inputs[1]:
            tensor = self.flow.constant(op.inputs[1])
            axes = None if tensor is None else [int(v) for v in tensor.numpy().reshape(-1)]
        else:
            value = op.arg("axes")
            axes = None if value is None else [int(v) for v in value]
        return None if not axes else normalize_axes(axes, rank)

    def other_operand(self, op: Op, name: str) -> str | None:
        """The input of a binary ``op`` that is not ``name`` (``None`` unless one is)."""
        if len(op.inputs) != 2 or op.inputs.count(name) != 1:
            return None
        return op.inputs[1] if op.inputs[0] == name else op.inputs[0]

    def follower(self, index: int, kind: str) -> tuple[int, Op, str] | None:
        """The one reader of op ``index``'s output, of type ``kind`` with a constant other
        operand: ``(its index, it, the constant's name)``."""
        output = self.net[index].outputs[0]
        reader = self.flow.only_reader(output)
        if reader is None or reader in self.used:
            return None
        op = self.net[reader]
        if op.type != kind or op.domain not in (None, "", "ai.onnx"):
            return None
        other = self.other_operand(op, output)
        if other is None or self.flow.constant(other) is None:
            return None
        return reader, op, other

    def match(self, index: int, div: Op) -> _Fusion | None:
        """The layer norm ending at ``div`` (``Div(d, s)``), with its scale and shift."""
        if len(div.inputs) != 2 or len(div.outputs) != 1:
            return None
        centred, root = div.inputs
        found_sqrt = self.op_of(root, "Sqrt", index)
        found_sub = self.op_of(centred, "Sub")
        if found_sqrt is None or found_sub is None:
            return None
        (sqrt_index, sqrt), (sub_index, sub) = found_sqrt, found_sub
        source, mean_name = sub.inputs if len(sub.inputs) == 2 else ("", "")
        shape = self.shape(source) if source else None
        found_add = self.op_of(sqrt.inputs[0], "Add", sqrt_index)
        if found_add is None or shape is None:
            return None
        rank = len(shape)
        add_index, add = found_add
        variance_name = next((n for n in add.inputs if self.flow.constant(n) is None), "")
        eps_name = self.other_operand(add, variance_name) if variance_name else None
        epsilon = None if eps_name is None else self.scalar(eps_name, rank)
        found_var = (
            self.op_of(variance_name, "ReduceMean", add_index) if epsilon is not None else None
        )
        if found_var is None or epsilon is None:
            return None
        var_index, var = found_var
        square = self.square_of(var.inputs[0], var_index, centred, rank)
        found_mean = self.op_of(mean_name, "ReduceMean", sub_index) if mean_name else None
        if square is None or found_mean is None or found_mean[1].inputs[0] != source:
            return None
        mean_index, mean = found_mean
        readers = {reader for reader, _ in self.flow.readers(centred)}
        if readers != {square, index} or centred in self.flow.escaping:
            return None
        axes = self.mean_axes(mean, len(shape))
        if axes is None or axes != self.mean_axes(var, len(shape)):
            return None
        first = rank - len(axes)
        normalized = shape[first:]
        if sorted(axes) != list(range(first, rank)) or not all(
            isinstance(d, int) for d in normalized
        ):
            return None
        dtype = self.dtype(source)
        if dtype is None:
            return None
        ops = [mean_index, sub_index, square, var_index, add_index, sqrt_index, index]
        fusion = _Fusion(ops, div)
        inputs = [source, "", ""]
        last = index
        scale = self.follower(last, "Mul")
        if scale is not None and self.fits(scale[2], normalized, dtype, rank):
            last = scale[0]
            ops.append(last)
            inputs[1] = scale[2]
            shift = self.follower(last, "Add")
            if shift is not None and self.fits(shift[2], normalized, dtype, rank):
                last = shift[0]
                ops.append(last)
                inputs[2] = shift[2]
        if not inputs[1]:
            inputs[1] = self.names.fresh(f"{div.outputs[0]}_scale")
            fusion.initializers[inputs[1]] = np.ones(cast("tuple[int, ...]", normalized), dtype)
        if not inputs[2]:
            inputs.pop()
        output = self.net[last].outputs[0]
        fusion.fused = Op(
            "LayerNormalization",
            inputs,
            [output],
            args={"axis": first, "epsilon": epsilon},
        )
        return fusion

    def square_of(self, name: str, reader: int, centred: str, rank: int) -> int | None:
        """The index of the op squaring ``centred`` (of ``rank``) into ``name`` (``Pow(d, 2)``,
        ``Mul(d, d)``) read by ``reader`` alone."""
        for kind in ("Pow", "Mul"):
            found = self.op_of(name, kind, reader)
            if found is None:
                continue
            index, op = found
            if kind == "Mul" and list(op.inputs) == [centred, centred]:
                return index
            if kind == "Pow" and len(op.inputs) == 2 and op.inputs[0] == centred:
                return index if self.scalar(op.inputs[1], rank) == 2.0 else None
        return None

    def shape(self, name: str) -> tuple[int | str | None, ...] | None:
        value_type = self.types.get(name)
        if value_type is None or value_type.kind != "tensor" or value_type.shape is None:
            return None
        return value_type.shape

    def dtype(self, name: str) -> type | None:
        value_type = self.types.get(name)
        if value_type is None or value_type.kind != "tensor":
            return None
        return _ELEM_DTYPES.get(value_type.elem_type or 0)

    def fits(self, name: str, normalized: tuple[object, ...], dtype: type, rank: int) -> bool:
        """Whether constant ``name`` has the normalised dims' shape (leading 1s aside, no more
        dims than the data: broadcasting would raise its rank) and the data's type."""
        tensor = self.flow.constant(name)
        if tensor is None or np.dtype(tensor.dtype) != np.dtype(dtype):
            return False
        if len(tensor.shape) > rank:
            return False
        shape = list(tensor.shape)
        while len(shape) > len(normalized) and shape[0] == 1:
            shape.pop(0)
        return tuple(shape) == tuple(normalized)


def _apply(net: Net, fusions: list[_Fusion]) -> bool:
    with net.edit() as edit:
        for fusion in fusions:
            for name, value in fusion.initializers.items():
                edit.set_initializer(name, ArrayTensor(value))
            *others, last = sorted(fusion.ops)
            edit.expand(last, [fusion.fused])
            for index in others:
                edit.remove(index)
    return edit.changed


@register_pass
@dataclass(frozen=True)
class FuseLayerNorm(Pass):
    """Fuse a written-out layer normalisation into LayerNormalization (see the module
    docstring).

    Stats: ``fused``, ``ops_removed``.
    """

    name: ClassVar[str] = "fuse-layer-norm"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Match every graph's ``Div`` ops against the pattern, then one edit per graph."""
        table = cast("OnnxOpTable", op_table(model))
        stats = {"fused": 0, "ops_removed": 0}
        all_scopes = scopes(model.predict_net, table)
        if (table.opset() or 1) < 17 or not any(
            "ReduceMean" in map(_type, scope.net) for scope in all_scopes
        ):
            return PassResult(model, False, stats)
        types = table.infer_types(model, nested=len(all_scopes) > 1)
        names = NameSource(model_names(model.predict_net))
        changed = False
        for scope in all_scopes:
            matcher = _Matcher(DataFlow(scope), types, names)
            fusions = []
            for index, op in enumerate(scope.net):
                if op.type != "Div" or op.domain not in (None, "", "ai.onnx"):
                    continue
                fusion = matcher.match(index, op)
                if fusion is not None and matcher.used.isdisjoint(fusion.ops):
                    matcher.used.update(fusion.ops)
                    fusions.append(fusion)
            if fusions:
                changed = _apply(scope.net, fusions) or changed
                stats["fused"] += len(fusions)
                stats["ops_removed"] += sum(len(f.ops) - 1 for f in fusions)
        return PassResult(model, changed, stats)


def _type(op: Op) -> str:
    return op.type

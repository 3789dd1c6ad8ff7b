"""Fuse ``MatMul`` followed by ``Add`` into ``Gemm`` where ``Gemm`` computes the same thing, in
every graph of an ONNX model (control-flow bodies included).

``Add(MatMul(A, B), C)`` is ``Gemm(A, B, C)`` when ``A`` and ``B`` are matrices (rank 2, as
shape inference gives them), ``C`` broadcasts to the ``M x N`` product one way (``[N]``,
``[1, N]``, ``[M, 1]``, ``[M, N]`` or a scalar), the type is a float type, the model's opset
is 7 or newer (``Gemm``'s unidirectional broadcast), and the ``MatMul``'s output is read by the
``Add`` alone. Two ops become one; nothing else changes.

A ``MatMul`` on a rank-3 activation (a transformer's ``Linear`` on ``batch x seq x d``) is left
alone: as a ``Gemm`` it needs a ``Reshape`` before and after, three ops for two (onnxsim does
that, and grows a GPT block from 42 nodes to 58).

Example (``a`` is ``2 x 8``, ``w`` is ``8 x 4``, ``b`` is ``[4]``)::

    before                             after
      #0 MatMul(a@0, w@0) -> m@1         #0 Gemm(a@0, w@0, b@0) -> y@1
      #1 Add(m@1, b@0) -> y@1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FuseMatMulAdd"]

_FLOAT_TYPES = frozenset({1, 10, 11, 16})
"""FLOAT, FLOAT16, DOUBLE, BFLOAT16."""


def _shape(flow: DataFlow, types: Mapping[str, ValueType], name: str) -> tuple[object, ...] | None:
    tensor = flow.constant(name)
    if tensor is not None:
        return tensor.shape
    value_type = types.get(name)
    if value_type is None or value_type.kind != "tensor":
        return None
    return value_type.shape


def _elem_type(flow: DataFlow, types: Mapping[str, ValueType], name: str) -> int | None:
    value_type = types.get(name)
    if value_type is not None and value_type.kind == "tensor" and value_type.elem_type:
        return value_type.elem_type
    tensor = flow.constant(name)
    if tensor is None:
        return None
    return {"float32": 1, "float16": 10, "float64": 11}.get(str(tensor.dtype))


def _broadcasts(bias: tuple[object, ...], rows: object, columns: object) -> bool:
    """Whether a ``bias`` of this shape broadcasts to ``rows x columns`` one way."""
    if len(bias) > 2:
        return False
    padded = (1,) * (2 - len(bias)) + tuple(bias)
    return all(dim == 1 or dim == want for dim, want in zip(padded, (rows, columns), strict=True))


def _fusions(flow: DataFlow, types: Mapping[str, ValueType]) -> list[tuple[int, int, Op]]:
    """``(matmul index, add index, the Gemm)`` of each fusion in ``flow``'s net."""
    net = flow.net
    found = []
    for index, op in enumerate(net):
        if op.type != "MatMul" or op.domain not in (None, "", "ai.onnx") or len(op.inputs) != 2:
            continue
        reader = flow.only_reader(op.outputs[0])
        if reader is None:
            continue
        add = net[reader]
        if add.type != "Add" or add.domain not in (None, "", "ai.onnx") or len(add.inputs) != 2:
            continue
        bias = add.inputs[1] if add.inputs[0] == op.outputs[0] else add.inputs[0]
        if bias == op.outputs[0]:
            continue
        shapes = [_shape(flow, types, name) for name in (*op.inputs, bias)]
        if any(shape is None for shape in shapes):
            continue
        a, b, c = cast("list[tuple[object, ...]]", shapes)
        if len(a) != 2 or len(b) != 2 or not _broadcasts(c, a[0], b[1]):
            continue
        elem_types = {_elem_type(flow, types, name) for name in (*op.inputs, bias)}
        if len(elem_types) != 1 or not elem_types <= _FLOAT_TYPES:
            continue
        gemm = add.replace(type="Gemm", inputs=[op.inputs[0], op.inputs[1], bias], args={})
        found.append((index, reader, gemm))
    return found


@register_pass
@dataclass(frozen=True)
class FuseMatMulAdd(Pass):
    """Fuse MatMul + Add on matrices into Gemm (see the module docstring).

    Stats: ``fused``.
    """

    name: ClassVar[str] = "fuse-matmul-add"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the fusions of each graph and apply them in one edit per graph."""
        table = cast("OnnxOpTable", op_table(model))
        stats = {"fused": 0}
        all_scopes = scopes(model.predict_net, table)
        has_matmul = any("MatMul" in map(_type, scope.net) for scope in all_scopes)
        if (table.opset() or 1) < 7 or not has_matmul:
            return PassResult(model, False, stats)
        types = table.infer_types(model, nested=len(all_scopes) > 1)
        changed = False
        for scope in all_scopes:
            found = _fusions(DataFlow(scope), types)
            if not found:
                continue
            with scope.net.edit() as edit:
                for matmul, add, gemm in found:
                    edit.expand(add, [gemm])
                    edit.remove(matmul)
            changed = edit.changed or changed
            stats["fused"] += len(found)
        return PassResult(model, changed, stats)


def _type(op: Op) -> str:
    return op.type

"""Merge ops that compute the same value twice, in every graph of an ONNX model (control-flow
bodies included): the later op goes and its readers read the earlier op's outputs.

Two ops compute the same value when they have the same type and domain, read the same values
(in any order for the commutative ``Add``, ``Mul``, ``Max``, ``Min``, ``Sum``, ``Mean``,
``And``, ``Or``, ``Xor``, ``Equal``) and have equal attributes (``Constant`` values compared
by their bytes). Only ops the op table may fold are merged: known, deterministic (no
``RandomNormal``, no training ``Dropout``), holding no graph. A duplicate whose output is a
graph output or read by a nested graph stays, since neither can be rewired. Run
``dedupe-initializers`` first: ops reading equal weights under two names then merge too.

Example::

    before                              after
      #0 Relu(x@0) -> a@1                 #0 Relu(x@0) -> a@1
      #1 Relu(x@0) -> b@1                 #1 Add(a@1, a@1) -> y@1
      #2 Add(a@1, b@1) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.ssa import VersionedBlob

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["MergeCommonSubexpressions"]

_COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal"})


def _duplicates(
    net: Net, flow: DataFlow, table: OnnxOpTable
) -> tuple[list[int], list[tuple[VersionedBlob, VersionedBlob]]]:
    """The ops computing what an earlier op computes, and the rewires of their outputs."""
    canonical: dict[str, str] = {}
    seen: dict[tuple[Any, ...], int] = {}
    removed: list[int] = []
    rewires: list[tuple[VersionedBlob, VersionedBlob]] = []
    for index, op in enumerate(net):
        if not op.outputs or not table.foldable(op, net):
            continue
        attributes = table.attributes_key(op)
        if attributes is None:
            continue
        inputs = [canonical.get(name, name) for name in op.inputs]
        if op.type in _COMMUTATIVE and not op.domain:
            inputs.sort()
        outputs = tuple(bool(name) for name in op.outputs)
        key = (op.domain or "", op.type, tuple(inputs), attributes, outputs)
        first = seen.get(key)
        if first is None:
            seen[key] = index
            continue
        if any(name in flow.escaping for name in op.outputs if name):
            continue
        removed.append(index)
        for mine, theirs in zip(op.outputs, net[first].outputs, strict=True):
            if mine:
                canonical[mine] = theirs
                rewires.append(((mine, 1), (theirs, 1)))
    return removed, rewires


@register_pass
@dataclass(frozen=True)
class MergeCommonSubexpressions(Pass):
    """Merge ops computing the same value (see the module docstring).

    Stats: ``ops_removed``.
    """

    name: ClassVar[str] = "merge-common-subexpressions"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """One walk over each graph, then one edit per graph."""
        table = cast("OnnxOpTable", op_table(model))
        stats = {"ops_removed": 0}
        changed = False
        for scope in scopes(model.predict_net, table):
            net = scope.net
            removed, rewires = _duplicates(net, DataFlow(scope), table)
            if not removed:
                continue
            with net.edit() as edit:
                for old, new in rewires:
                    edit.replace_all_uses_with(old, new)
                for index in removed:
                    edit.remove(index)
            changed = edit.changed or changed
            stats["ops_removed"] += len(removed)
        return PassResult(model, changed, stats)

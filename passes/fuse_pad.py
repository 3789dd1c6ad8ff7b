"""Fold a ``Pad`` into the ``Conv``, ``AveragePool`` or ``MaxPool`` reading it, in every graph of
an ONNX model (control-flow bodies included): the op's own ``pads`` grow by the padding, and
the ``Pad`` goes.

Legal when the ``Pad`` pads only the spatial dims (none of the batch and channel dims), by
non-negative constant amounts, in ``constant`` mode with a value the op's own padding means:
zero for ``Conv`` and ``AveragePool``, minus infinity for ``MaxPool`` (a padded element never
wins); the op's
``auto_pad`` must be unset (explicit pads), and the ``Pad``'s output read by that op alone, as
its data. A pooling op's pads must stay smaller than its window (onnxruntime refuses the
others). ``AveragePool`` without ``count_include_pad`` leaves its own padding out of the
average while it counts the ``Pad``'s zeros: with no padding of its own it takes the ``Pad``
as padding it counts (``count_include_pad=1``, what PyTorch's ``F.pad`` before ``avg_pool2d``
exports; opset 7 on); with some, the ``Pad`` stays. So does one before a pool with
``ceil_mode=1``: the last window of a ceiled pool may start in its own end padding, which
onnxruntime (and ONNX's reference) then drop, so the output would shrink.

Example (``x`` is ``N x C x H x W``)::

    before (p = [0, 0, 1, 1, 0, 0, 1, 1])        after
      #0 Pad(x@0, p@0) -> xp@1                       #0 Conv(x@0, w@0) -> y@1 {pads=[1,1,1,1]}
      #1 Conv(xp@1, w@0) -> y@1 {pads=[0,0,0,0]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Op
from graphtools.pass_infra import Pass, PassResult, register_pass

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FusePad"]

_READERS = frozenset({"Conv", "AveragePool", "MaxPool"})


class _PadReader:
    """Reads a ``Pad``'s amounts and value under the model's opset."""

    def __init__(self, flow: DataFlow, opset: int) -> None:
        self.flow = flow
        self.opset = opset

    def amounts(self, pad: Op) -> list[int] | None:
        if self.opset >= 11:
            if len(pad.inputs) < 2 or not pad.inputs[1]:
                return None
            tensor = self.flow.constant(pad.inputs[1])
            if tensor is None:
                return None
            amounts = [int(v) for v in tensor.numpy().reshape(-1)]
            if len(pad.inputs) > 3 and pad.inputs[3]:
                return None  # pads on some axes only (opset 18): not worth the bookkeeping
            return amounts
        found = pad.arg("pads", pad.arg("paddings"))
        return None if found is None else [int(v) for v in found]

    def value(self, pad: Op) -> float | None:
        if self.opset >= 11:
            name = pad.inputs[2] if len(pad.inputs) > 2 else ""
            if not name:
                return 0.0
            tensor = self.flow.constant(name)
            if tensor is None or tensor.size != 1:
                return None
            return float(tensor.numpy().reshape(-1)[0])
        return float(pad.arg("value", 0.0))


def _mode(pad: Op) -> str:
    mode = pad.arg("mode", b"constant")
    return mode.decode() if isinstance(mode, bytes) else str(mode)


def _fusion(flow: DataFlow, reader: _PadReader, index: int, op: Op) -> tuple[int, Op] | None:
    """``(pad index, the op reading past it)``, or ``None``."""
    pad_index = flow.producer(op.inputs[0])
    if pad_index is None or flow.only_reader(op.inputs[0]) != index:
        return None
    pad = flow.net[pad_index]
    if pad.type != "Pad" or pad.domain not in (None, "", "ai.onnx") or _mode(pad) != "constant":
        return None
    amounts, value = reader.amounts(pad), reader.value(pad)
    if amounts is None or value is None or any(a < 0 for a in amounts) or len(amounts) % 2:
        return None
    rank = len(amounts) // 2
    begins, ends = amounts[:rank], amounts[rank:]
    if rank < 3 or any(begins[:2]) or any(ends[:2]):
        return None
    wanted = -np.inf if op.type == "MaxPool" else 0.0
    if value != wanted:
        return None
    counts_own_pads = op.type != "AveragePool" or op.arg("count_include_pad", 0)
    if op.type != "Conv" and op.arg("ceil_mode", 0):
        return None
    auto_pad = op.arg("auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) != "NOTSET":
        return None
    spatial = rank - 2
    own = [int(v) for v in op.arg("pads") or [0] * (2 * spatial)]
    if not counts_own_pads and (any(own) or reader.opset < 7):
        return None  # AveragePool takes count_include_pad from opset 7 on
    if len(own) != 2 * spatial:
        return None
    pads = [own[i] + begins[2 + i] for i in range(spatial)]
    pads += [own[spatial + i] + ends[2 + i] for i in range(spatial)]
    if op.type != "Conv":  # onnxruntime refuses a pooling window padded by its own size
        kernel = [int(k) for k in op.arg("kernel_shape") or ()]
        if len(kernel) != spatial or any(p >= kernel[i % spatial] for i, p in enumerate(pads)):
            return None
    fused = op.replace(inputs=[pad.inputs[0], *op.inputs[1:]]).with_arg("pads", pads)
    return pad_index, fused if counts_own_pads else fused.with_arg("count_include_pad", 1)


@register_pass
@dataclass(frozen=True)
class FusePad(Pass):
    """Fold Pad into the Conv or pooling reading it (see the module docstring).

    Stats: ``fused``.
    """

    name: ClassVar[str] = "fuse-pad"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the fusions of each graph and apply them in one edit per graph."""
        table = cast("OnnxOpTable", op_table(model))
        opset = table.opset() or 1
        stats = {"fused": 0}
        changed = False
        for scope in scopes(model.predict_net, table):
            if "Pad" not in {op.type for op in scope.net}:
                continue
            flow = DataFlow(scope)
            reader = _PadReader(flow, opset)
            found = []
            for index, op in enumerate(scope.net):
                if op.type in _READERS and op.domain in (None, "", "ai.onnx") and op.inputs:
                    fusion = _fusion(flow, reader, index, op)
                    if fusion is not None:
                        found.append((index, *fusion))
            if not found:
                continue
            with scope.net.edit() as edit:
                for index, pad_index, fused in found:
                    edit.set_op(index, fused)
                    edit.remove(pad_index)
            changed = edit.changed or changed
            stats["fused"] += len(found)
        return PassResult(model, changed, stats)

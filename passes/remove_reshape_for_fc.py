"""Remove the Reshape (and the ops computing its shape) that PyTorch exports before ``FC``.

``x.view(x.size(0), -1)`` before a ``Linear`` exports as ``Shape -> Gather -> ExpandDims/
Unsqueeze -> Concat -> Reshape -> FC``; Caffe2's ``FC`` flattens its input itself, so the whole
sub-graph can go and the ``FC`` read the Reshape's data input directly. Which sub-graphs can
go, and how this differs from detectron2: ``graphtools.analysis.reshape``. As detectron2, it
keeps a Reshape whose data is a value the net does not compute (an input or a param: a net
cut at the pooled blob by ``extract --inputs``), which nothing shows is not a param. The
params only the removed chains read leave the predict_net's external inputs and the init_net.

Example::

    before (external_output: y)                     after
      %0 Relu(x@0) -> r@1                             %0 Relu(x@0) -> r@1
      %1 Shape(r@1) -> s@1                            %1 FC(r@1, w@0, b@0) -> y@1
      %2 Gather(s@1, idx@0) -> n@1
      %3 Concat(n@1, minus_one@0) -> shape@1, split@1
      %4 Reshape(r@1, shape@1) -> flat@1, old@1
      %5 FC(flat@1, w@0, b@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.analysis.reshape import find_reshape_removal, init_ops_only_filling, written_by
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["RemoveReshapeForFC"]


@dataclass(frozen=True)
class RemoveReshapeForFC(Pass):
    """Remove Reshape sub-graphs whose output only ``FC`` ops read.

    Changes the interface: params only the removed chains read leave the predict_net's
    external inputs (and the init_net). Stats: ``reshapes_removed``, ``ops_removed``,
    ``params_removed``, ``init_ops_removed``.
    """

    name: ClassVar[str] = "remove-reshape-for-fc"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    reads_ssa: ClassVar[bool] = True
    changes_interface: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Remove every removable sub-graph found in one sweep."""
        init, net = model.init_net, model.predict_net
        removal = find_reshape_removal(net, written_by(init))
        dropped = set(removal.params)
        with net.edit() as edit:
            for reshaped, data in removal.rewires:
                edit.replace_all_uses_with(reshaped, data)
            for index in removal.removed:
                edit.remove(index)
            if not dropped.isdisjoint(net.external_inputs):
                edit.set_external_inputs(n for n in net.external_inputs if n not in dropped)
        fills: set[int] = set()
        if init is not None and dropped:
            fills = init_ops_only_filling(init, dropped)
            with init.edit() as init_edit:
                for index in fills:
                    init_edit.remove(index)
                if not dropped.isdisjoint(init.external_outputs):
                    kept = [n for n in init.external_outputs if n not in dropped]
                    init_edit.set_external_outputs(kept)
        stats = {
            "reshapes_removed": len(removal.reshapes),
            "ops_removed": len(removal.removed),
            "params_removed": len(removal.params),
            "init_ops_removed": len(fills),
        }
        return PassResult(model, edit.changed, stats)

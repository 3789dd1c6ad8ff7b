"""Fuse CPU<->GPU round trips: ``a -CopyAToB-> b -CopyBToA-> c`` makes ``c``'s readers read ``a``.

What is fused, and how it differs from detectron2's ``fuse_copy_between_cpu_and_gpu``:
``graphtools.analysis.copies``. When no blob is written twice one run reaches the fixpoint
(removing copies that overwrite a name can let a later run fuse more).

Example::

    before (external_output: y)              after
      %0 CopyCPUToGPU(a@0) -> b@1              %0 Relu(a@0) -> y@1
      %1 CopyGPUToCPU(b@1) -> c@1
      %2 Relu(c@1) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.analysis.copies import find_copy_fusion
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["FuseCopyOps"]


@dataclass(frozen=True)
class FuseCopyOps(Pass):
    """Fuse ``CopyCPUToGPU``/``CopyGPUToCPU`` round trips in the predict_net.

    Stats: ``copies_removed`` (forward and reverse copies dropped) and ``consumers_rewired``
    (ops now reading a round trip's source).
    """

    name: ClassVar[str] = "fuse-copy-ops"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Fuse every round trip found in one sweep."""
        net = model.predict_net
        fusion = find_copy_fusion(net)
        with net.edit() as edit:
            for result, source in fusion.rewires:
                edit.replace_all_uses_with(result, source)
            for index in fusion.removed:
                edit.remove(index)
        stats = {
            "copies_removed": len(fusion.removed),
            "consumers_rewired": len(fusion.consumers),
        }
        return PassResult(model, edit.changed, stats)

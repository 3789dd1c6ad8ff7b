"""Fuse CPU<->GPU round trips: ``a -CopyAToB-> b -CopyBToA-> c`` makes ``c``'s readers read ``a``.

For each forward copy (``CopyCPUToGPU`` or ``CopyGPUToCPU``) reading ``a`` and writing ``b``,
every reverse copy of ``b`` whose output ``c`` can be replaced is removed and *every* reader of
``c`` reads ``a`` instead; the forward copy goes too when nothing else reads ``b``. One forward
sweep over one SSA view: a rewired reader that is itself a forward copy sees ``a`` already, so
chains of round trips fuse in the same sweep, and when no blob is written twice one sweep reaches
the fixpoint (removing copies that overwrite a name can let a later sweep fuse more).

Differences from detectron2's ``fuse_copy_between_cpu_and_gpu`` (semantics.md 6.9), which
restarts after each fusion:

* detectron2 rewires only the *first* reader of each ``c`` and deletes the reverse copy, so the
  other readers read a blob nothing produces any more; here every reader is rewired.
* detectron2 gives up when ``b`` has any reader that is not a reverse copy; here the round trips
  are still fused and the forward copy is kept for those readers.
* detectron2 raises ``IndexError`` when a reverse copy's output has no reader; here that
  reverse copy is left for ``remove-dead-ends`` (removing it here could expose more fusions,
  and one sweep would no longer reach the fixpoint).
* A reader is rewired only if it still sees the version of ``a`` the forward copy read: when
  ``a`` is overwritten (in place) before that reader, the reverse copy is kept, untouched.

Never fused: a forward copy whose ``b`` is an external output, a reverse copy whose ``c`` is one,
and blobs named inside nested nets (read by name, invisibly to the versioned view).

Example::

    before (external_output: y)              after
      %0 CopyCPUToGPU(a@0) -> b@1              %0 Relu(a@0) -> y@1
      %1 CopyGPUToCPU(b@1) -> c@1
      %2 Relu(c@1) -> y@1
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from itertools import compress, count
from typing import ClassVar

from graphtools.graph import names_in_nested_nets
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef, net_to_netdef

__all__ = ["CopyFusion", "FuseCopyOps", "find_copy_fusion", "fuse_copy_between_cpu_and_gpu"]

logger = logging.getLogger(__name__)

REVERSE_COPY: dict[str, str] = {"CopyCPUToGPU": "CopyGPUToCPU", "CopyGPUToCPU": "CopyCPUToGPU"}
"""Each copy op type and the type that undoes it."""

_TYPE = operator.attrgetter("type")


@dataclass(frozen=True)
class CopyFusion:
    """What ``find_copy_fusion`` found: ops to drop and the new inputs of rewired ops."""

    removed: frozenset[int]
    new_inputs: dict[int, tuple[str, ...]]

    def apply(self, net: Net) -> None:
        """Commit the fusion to ``net`` (one ``set_ops``); nothing happens when empty."""
        if self.removed:
            net.edit_ops(self.removed, self.new_inputs)


def _is_copy(op: Op, op_type: str) -> bool:
    return op.type == op_type and len(op.inputs) == 1 and len(op.outputs) == 1


def find_copy_fusion(net: Net) -> CopyFusion:
    """Find the round trips of ``net`` to fuse (see the module docstring); linear time.

    Works on the SSA view's integer keys; only the copy ops and their readers are looked at
    once the view is built.
    """
    view = net.ssa()
    external = {key for key in map(view.key, view.external_outputs) if key is not None}
    nested = names_in_nested_nets(net)
    end = len(net)
    removed: set[int] = set()
    new_inputs: dict[int, list[str]] = {}
    same_as: dict[int, int] = {}
    for forward in compress(count(), map(REVERSE_COPY.__contains__, map(_TYPE, net))):
        op = net[forward]
        if forward in removed or not _is_copy(op, op.type):
            continue
        (read,) = view.input_keys(forward)
        source = same_as.get(read, read)
        (copied,) = view.output_keys(forward)
        if copied in external or view.name_of(copied) in nested:
            continue
        overwritten_at = view.next_write(source)
        if overwritten_at is None:
            overwritten_at = end
        source_name = view.name_of(source)
        reverse_type = REVERSE_COPY[op.type]
        kept_reader = False
        fused_any = False
        for reverse in dict.fromkeys(index for index, _ in view.readers(copied)):
            if not _is_copy(net[reverse], reverse_type):
                kept_reader = True
                continue
            (result,) = view.output_keys(reverse)
            readers = view.readers(result)
            if (
                not readers
                or result in external
                or view.name_of(result) in nested
                or any(index > overwritten_at for index, _ in readers)
            ):
                kept_reader = True
                continue
            removed.add(reverse)
            fused_any = True
            same_as[result] = source
            for index, position in readers:
                inputs = new_inputs.setdefault(index, list(net[index].inputs))
                inputs[position] = source_name
        if fused_any and not kept_reader:
            removed.add(forward)
    return CopyFusion(
        frozenset(removed),
        {index: tuple(inputs) for index, inputs in new_inputs.items() if index not in removed},
    )


def fuse_copy_between_cpu_and_gpu(predict_net: caffe2_pb2.NetDef) -> None:
    """detectron2's helper: fuse CPU<->GPU copy round trips of ``predict_net``, in place.

    Every reader of a round trip's result is rewired (detectron2 rewires only the first).
    """
    net = net_from_netdef(predict_net)
    fusion = find_copy_fusion(net)
    if fusion.removed:
        fusion.apply(net)
        predict_net.CopyFrom(net_to_netdef(net))


@dataclass(frozen=True)
class FuseCopyOps(Pass):
    """Fuse ``CopyCPUToGPU``/``CopyGPUToCPU`` round trips in the predict_net.

    Stats: ``copies_removed`` (forward and reverse copies dropped) and ``consumers_rewired``
    (ops now reading the round trip's source).
    """

    name: ClassVar[str] = "fuse-copy-ops"
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Fuse every round trip found in one sweep."""
        net = model.predict_net
        fusion = find_copy_fusion(net)
        fusion.apply(net)
        stats = {"copies_removed": len(fusion.removed), "consumers_rewired": len(fusion.new_inputs)}
        if fusion.removed:
            logger.info("fuse-copy-ops: removed %d copies", len(fusion.removed))
        return PassResult(model, bool(fusion.removed), stats)

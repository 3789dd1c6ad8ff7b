"""CPU<->GPU copy round trips that can be fused: ``a -CopyAToB-> b -CopyBToA-> c``, where
``c``'s readers can read ``a`` instead.

For each forward copy (``CopyCPUToGPU`` or ``CopyGPUToCPU``) reading ``a`` and writing ``b``,
every reverse copy of ``b`` whose output ``c`` can be replaced is fused: *every* reader of ``c``
reads ``a`` instead, and the forward copy goes too when nothing else reads ``b``. One forward
sweep: a rewired reader that is itself a forward copy sees ``a`` already, so chains of round
trips fuse in the same sweep.

Differences from detectron2's ``fuse_copy_between_cpu_and_gpu`` (semantics.md 6.9), which
restarts after each fusion:

* detectron2 rewires only the *first* reader of each ``c``, so the other readers read a blob
  nothing produces any more; here every reader is rewired.
* detectron2 gives up when ``b`` has any reader that is not a reverse copy; here the round
  trips are still fused and the forward copy is kept for those readers.
* detectron2 raises ``IndexError`` when a reverse copy's output has no reader; here that
  reverse copy is left for ``remove-dead-ends``.
* A reader is rewired only if it still sees the version of ``a`` the forward copy read: when
  ``a`` is overwritten before that reader, the round trip is kept. A reverse copy writing its
  result back into ``a`` itself (``Copy(a)->b, CopyBack(b)->a, Relu(a)``) is the round trip
  being fused, not an overwrite: it is fused, as upstream does.

Never fused: a forward copy whose ``b`` is an external output, a reverse copy whose ``c`` is
one (the pass keeps the net's interface), and blobs named inside nested nets.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import compress, count

from graphtools.ir import Net, Op
from graphtools.nested import names_in_nested_nets
from graphtools.ssa import VersionedBlob

__all__ = ["REVERSE_COPY", "VALUE_COPIES", "CopyFusion", "find_copy_fusion"]

REVERSE_COPY: dict[str, str] = {"CopyCPUToGPU": "CopyGPUToCPU", "CopyGPUToCPU": "CopyCPUToGPU"}

VALUE_COPIES: tuple[str, ...] = (
    *("Copy", "CopyCPUToGPU", "CopyGPUToCPU", "CopyFromCPUInput", "CopyOnDeviceLike"),
    *("EnsureCPUOutput", "Alias", "AliasWithName", "Identity", "StopGradient"),
)
"""Caffe2 op types whose first output is their first input's value (device copies, aliases,
``Identity``, ``StopGradient``): one list for the shape rule, the kernel and the ONNX export."""
"""Each copy op type and the type that undoes it."""

_TYPE = operator.attrgetter("type")


@dataclass(frozen=True)
class CopyFusion:
    """What ``find_copy_fusion`` found.

    Attributes:
        removed: the copies to drop (reverse copies, and forward copies nothing else reads).
        rewires: ``(c, a)`` pairs: every read of versioned blob ``c`` (a reverse copy's
            result) reads ``a`` (the forward copy's source) instead.
        consumers: the ops, other than removed ones, that will read a round trip's source.
    """

    removed: frozenset[int]
    rewires: tuple[tuple[VersionedBlob, VersionedBlob], ...]
    consumers: frozenset[int]
    """The ops, other than removed ones, that will read a round trip's source."""


def _is_copy(op: Op, op_type: str) -> bool:
    return op.type == op_type and len(op.inputs) == 1 and len(op.outputs) == 1


def find_copy_fusion(net: Net) -> CopyFusion:
    """Find the round trips of ``net`` to fuse (see the module docstring); linear time.

    Works on the SSA view's keys; only the copy ops and their readers are looked at once the
    view is built.
    """
    view = net.ssa()
    external = {key for key in map(view.key, view.external_outputs) if key is not None}
    nested = names_in_nested_nets(net)
    end = len(net)
    removed: set[int] = set()
    rewires: list[tuple[VersionedBlob, VersionedBlob]] = []
    consumers: set[int] = set()
    same_as: dict[int, int] = {}  # a fused result's key -> the key of what it copies
    for forward in compress(count(), map(REVERSE_COPY.__contains__, map(_TYPE, net))):
        op = net[forward]
        if forward in removed or not _is_copy(op, op.type):
            continue
        (read,) = view.input_keys(forward)
        source = same_as.get(read, read)
        (copied,) = view.output_keys(forward)
        if copied in external or view.name_of(copied) in nested:
            continue
        reverse_type = REVERSE_COPY[op.type]
        kept_reader = False
        fused_any = False
        for reverse in dict.fromkeys(index for index, _ in view.readers(copied)):
            if not _is_copy(net[reverse], reverse_type):
                kept_reader = True
                continue
            (result,) = view.output_keys(reverse)
            readers = view.readers(result)
            overwritten_at = view.next_write(source)
            if overwritten_at == reverse:  # the round trip writes a's value back into a
                overwritten_at = view.next_write(result)
            if (
                not readers
                or result in external
                or view.name_of(result) in nested
                or any(
                    index > (end if overwritten_at is None else overwritten_at)
                    for index, _ in readers
                )
            ):
                kept_reader = True
                continue
            removed.add(reverse)
            fused_any = True
            same_as[result] = source
            rewires.append((view.blob(result), view.blob(source)))
            consumers.update(index for index, _ in readers)
        if fused_any and not kept_reader:
            removed.add(forward)
    return CopyFusion(frozenset(removed), tuple(rewires), frozenset(consumers - removed))

"""Versioned-blob SSA with Caffe2's exact semantics, and the cached view passes use.

A versioned blob is a ``(name, version)`` tuple. Version 0 is the value a blob had before the
net ran; every write bumps the version, so the first write of a blob gives version 1 (Caffe2's
``core.get_ssa``, not its gradient ``IR``, which numbers differently). Plain tuples are used
rather than a NamedTuple because building millions of them is the hot path on big nets; they
compare equal to Caffe2's and detectron2's.

``get_ssa`` and the helpers keep Caffe2's and detectron2's names and signatures so users'
scripts port over; ``graphtools.ssa_view.SSAView`` (``Net.ssa()``) is the same data computed
once per revision of a net, with fast lookups for passes. This module reads nets without
importing the IR, so the view (which the IR imports) can build on it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any, NamedTuple

from graphtools._core import NetLike
from graphtools._gc import paused_gc
from graphtools.errors import InvalidArgumentError
from graphtools.proto import caffe2_pb2

VersionedBlob = tuple[str, int]
OpSSA = tuple[list[VersionedBlob], list[VersionedBlob]]

NO_VALUE = ""
"""The empty blob name: no value (an ONNX optional input or output left out). It is never
read or written: the SSA view numbers each occurrence as a value of its own that no other op
names, and the rewriter's checks ignore it."""


class Use(NamedTuple):
    """One read of a versioned blob by a top-level op: op index and input position.

    A read from inside an op's nested nets (an ``If`` branch reading the blob by name) is no
    ``Use``, as in Caffe2's ``get_ssa``: ``graphtools.nested.nested_accesses(net)`` lists
    those, and an edit that would break one is refused.
    """

    op: int
    position: int


__all__ = [
    "NO_VALUE",
    "OpSSA",
    "Use",
    "VersionedBlob",
    "as_blob",
    "get_consumer_map",
    "get_op_ids_in_path",
    "get_output_producers",
    "get_producer_map",
    "get_ssa",
    "get_undefined_blobs",
]


def as_blob(value: object, what: str) -> VersionedBlob:
    """``value`` as a ``(name, version)`` pair, or a clear refusal: a plain name (``"x"``)
    is the usual slip, and would otherwise fail deep inside as an ``IndexError``. Cheap for
    a well-formed pair (lookups in passes' loops go through it)."""
    if type(value) is tuple and len(value) == 2:
        name, version = value
        if type(name) is str and type(version) is int and version >= 0:
            return value
    if isinstance(value, tuple | list) and len(value) == 2:
        name, version = value
        whole = isinstance(version, Integral) and not isinstance(version, bool)
        if isinstance(name, str) and whole and version >= 0:
            return (name, int(version))
    raise InvalidArgumentError(
        f"{what}={value!r} is not a versioned blob: give (name, version), as uses() and the "
        "SSA view name values, e.g. ('x', 1)"
    )


def get_ssa(
    net: NetLike | caffe2_pb2.NetDef, blob_versions: dict[str, int] | None = None
) -> tuple[list[OpSSA], dict[str, int]]:
    """Caffe2's ``core.get_ssa``: per-op versioned inputs and outputs.

    Args:
        net: an IR ``Net`` or a ``NetDef``.
        blob_versions: current version of some blobs (e.g. where an init_net left them); it is
            mutated in place and returned, as Caffe2 does.

    Returns:
        ``(ssa, blob_versions)`` where ``ssa[i] = (versioned_inputs, versioned_outputs)`` of op
        ``i``, in the op's own order and with its duplicates. External inputs not already in
        ``blob_versions`` are seeded at 0. When the net declares no external input, every input
        read before it is written is also inserted at 0 (Caffe2's implicit declaration); when it
        declares some, such a blob is reported at version 0 but not inserted. An op that lists
        an output twice bumps it twice and reports both at the final version.
    """
    external_inputs, op_names = _blob_names(net)
    versions: dict[str, int] = {} if blob_versions is None else blob_versions
    for name in external_inputs:
        if name not in versions:
            versions[name] = 0
    implicit_inputs = not external_inputs
    ssa: list[OpSSA] = []
    append = ssa.append
    get = versions.get
    with paused_gc():
        for inputs, outputs in op_names:
            if implicit_inputs:
                for name in inputs:
                    if name not in versions:
                        versions[name] = 0
            ins = [(name, get(name, 0)) for name in inputs]
            for name in outputs:
                versions[name] = get(name, 0) + 1
            append((ins, [(name, versions[name]) for name in outputs]))
    return ssa, versions


def _blob_names(net: Any) -> tuple[Sequence[str], Iterable[tuple[Sequence[str], Sequence[str]]]]:
    """External inputs and per-op (inputs, outputs) of an IR ``Net``, a ``NetDef`` or a Caffe2
    ``core.Net`` (through its ``Proto()``), read without converting the net."""
    if isinstance(net, caffe2_pb2.NetDef):
        return net.external_input, ((op.input, op.output) for op in net.op)
    proto = getattr(net, "Proto", None)
    if callable(proto):
        return _blob_names(proto())
    if not hasattr(net, "external_inputs"):
        raise TypeError(f"expected a graphtools Net or a NetDef, got {type(net).__name__}")
    return net.external_inputs, ((op.inputs, op.outputs) for op in net)


def _ssa_list(ssa: Sequence[OpSSA], function: str) -> Sequence[OpSSA]:
    """``ssa`` itself, refused when it is a net: these helpers take ``get_ssa``'s list, as
    Caffe2's and detectron2's do."""
    if isinstance(ssa, caffe2_pb2.NetDef) or hasattr(ssa, "external_inputs"):
        raise TypeError(
            f"{function} takes the SSA list get_ssa(net) returns first, not a net: "
            f"{function}(get_ssa(net)[0])"
        )
    return ssa


def get_undefined_blobs(ssa: Sequence[OpSSA]) -> set[str]:
    """Names read at version 0 by any op ("used before defined"), as Caffe2 defines them."""
    return {
        name
        for ins, _ in _ssa_list(ssa, "get_undefined_blobs")
        for name, version in ins
        if version == 0
    }


def get_output_producers(ssa: Sequence[OpSSA]) -> dict[VersionedBlob, int]:
    """``{versioned output: index of the op producing it}`` (Caffe2's helper)."""
    ssa = _ssa_list(ssa, "get_output_producers")
    return {blob: index for index, (_, outs) in enumerate(ssa) for blob in outs}


def get_op_ids_in_path(
    ssa: Sequence[OpSSA],
    blob_versions: dict[str, int],
    inputs: Iterable[str],
    outputs: Iterable[str],
) -> list[int]:
    """Sorted indices of the ops needed to compute ``outputs`` from ``inputs``.

    Both are taken at their latest version in ``blob_versions`` (a missing name raises
    ``KeyError``, as in Caffe2); the walk stops at ``inputs`` and at blobs nothing produces.
    """
    producers = get_output_producers(ssa)
    stop = {(name, blob_versions[name]) for name in inputs}
    pending = [(name, blob_versions[name]) for name in outputs]
    used: set[int] = set()
    while pending:
        blob = pending.pop()
        if blob in stop:
            continue
        producer = producers.get(blob)
        if producer is not None and producer not in used:
            used.add(producer)
            pending.extend(ssa[producer][0])
    return sorted(used)


def get_producer_map(ssa: Sequence[OpSSA]) -> dict[VersionedBlob, tuple[int, int]]:
    """detectron2's ``{versioned output: (op index, output position)}``.

    A blob listed twice among one op's outputs maps to its last position.
    """
    producers: dict[VersionedBlob, tuple[int, int]] = {}
    with paused_gc():
        for index, (_, outs) in enumerate(_ssa_list(ssa, "get_producer_map")):
            for position, blob in enumerate(outs):
                producers[blob] = (index, position)
    return producers


def get_consumer_map(ssa: Sequence[OpSSA]) -> defaultdict[VersionedBlob, list[tuple[int, int]]]:
    """detectron2's ``{versioned input: [(op index, input position), ...]}`` in op order.

    A ``defaultdict(list)`` as upstream, so looking up an unread blob gives ``[]``.
    """
    consumers: defaultdict[VersionedBlob, list[tuple[int, int]]] = defaultdict(list)
    with paused_gc():
        for index, (ins, _) in enumerate(_ssa_list(ssa, "get_consumer_map")):
            for position, blob in enumerate(ins):
                consumers[blob].append((index, position))
    return consumers

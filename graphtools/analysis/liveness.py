"""Liveness: which top-level ops of a net can reach an external output.

Computed on versioned blobs in one backward sweep over the net's SSA view: a versioned blob
is live when it is a versioned external output or a *live* op reads it (as an input, a
control input, or from inside a nested net it holds); an op is live when one of its versioned
outputs is live. detectron2's ``remove_dead_end_ops`` instead calls a blob dead as soon as
*one* of its consumers was removed, and so deletes producers that kept ops still read
(semantics.md 6.10).

The sweep is the net's hottest loop (every op and blob of a million-op net), so it runs over
the view's integer keys with a ``bytearray`` of per-blob flags instead of versioned tuples.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from itertools import compress, count

from graphtools.ir import Net
from graphtools.nested import nested_accesses
from graphtools.ssa_view import SSAView

__all__ = ["dead_end_op_indices", "unread_outputs"]

_TYPE = operator.attrgetter("type")


def dead_end_op_indices(
    net: Net,
    *,
    kept: AbstractSet[int],
    keep_side_effects: bool = True,
    keep_types: Iterable[str] = (),
) -> list[int]:
    """Sorted indices of the top-level ops of ``net`` that cannot reach an external output.

    Always live: the ops in ``kept`` (what the net's op table says must stay: ops whose nested
    nets write blobs they do not list, ops with side effects, opaque ops), ops of a type in
    ``keep_types``, and with ``keep_side_effects`` ops with no outputs and the last write of a
    blob the net declares as an external input (state carried into the next run). Returns
    ``[]`` for a net that declares no external output. Linear in the size of the net (nested
    nets included): one forward sweep for control inputs and nested reads, one backward sweep
    for liveness over the SSA view's integer keys.
    """
    if not net.external_outputs:
        return []
    view = net.ssa()
    always_keep = set(keep_types)
    kept = set(kept)
    if always_keep:
        kept.update(compress(count(), map(always_keep.__contains__, map(_TYPE, net))))
    holders = net.nested_op_indices()
    extra_reads = _extra_reads(net, view) if holders or net.control_op_indices() else {}
    live = bytearray(view.num_keys)
    for key in map(view.key, view.external_outputs):
        if key is not None:
            live[key] = 1
    if keep_side_effects:
        for key in view.last_write_keys(net.external_inputs):
            live[key] = 1
    in_ptr, in_keys, out_ptr, out_keys = view.key_columns()
    dead: list[int] = []
    for index in range(len(net) - 1, -1, -1):
        first, last = out_ptr[index], out_ptr[index + 1]
        if last - first == 1:
            alive = live[out_keys[first]]
        elif last == first:
            alive = keep_side_effects
        else:
            alive = any(live[key] for key in out_keys[first:last])
        if alive or index in kept:
            for key in in_keys[in_ptr[index] : in_ptr[index + 1]]:
                live[key] = 1
            for key in extra_reads.get(index, ()):
                live[key] = 1
        else:
            dead.append(index)
    dead.reverse()
    return dead


def unread_outputs(net: Net) -> list[str]:
    """Blobs the top level of ``net`` writes and never reads afterwards, in order: the
    outputs of a net that declares none (what ``graphtools verify`` compares then)."""
    view = net.ssa()
    found: dict[str, None] = {}
    for _, outs in view.ssa:
        for blob in outs:
            if not view.consumer_ops(blob) and blob == view.latest(blob[0]):
                found[blob[0]] = None
    return list(found)


def _extra_reads(net: Net, view: SSAView) -> dict[int, list[int]]:
    """Reads that SSA does not list: control inputs, and blobs read inside nested nets.

    Each is keyed as a data input of the same op would be (before the op's own writes); a name
    no top-level op uses has no key (nothing at the top level writes it) and is skipped.
    """
    extra: dict[int, list[int]] = {}
    current: dict[str, int] = {}
    nested = nested_accesses(net)
    for index, op in enumerate(net):
        names = list(op.control_inputs) if op.has_control_inputs() else []
        if index in nested:
            names.extend(nested[index].reads)
        if names:
            keys = (view.key((name, current.get(name, 0))) for name in names)
            extra[index] = [key for key in keys if key is not None]
        for key in view.output_keys(index):
            current[view.name_of(key)] = view.version_of(key)
    return extra

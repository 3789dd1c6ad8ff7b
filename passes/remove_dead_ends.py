"""Remove ops none of whose outputs can reach an external output of the net.

Liveness is computed on versioned blobs in one backward sweep over the cached SSA view: a
versioned blob is live when it is a versioned external output or a *live* op reads it (as an
input, a control input, or from inside a nested net it holds); an op is live when one of its
versioned outputs is live. detectron2's ``remove_dead_end_ops`` instead calls a blob dead as
soon as *one* of its consumers was removed, and so deletes producers that kept ops still read
(semantics.md 6.10); this pass keeps them.

Rules a user should know:

* A net that declares no external output is left alone (stats ``skipped_no_external_outputs``):
  every op would be dead, and removing everything is never what a user wants.
* With ``keep_side_effects`` (the default), ops of a type in ``SIDE_EFFECT_OP_TYPES``, ops
  with no outputs, and the last write of a blob the net declares as an external input are kept:
  such a write is state carried into the next run (recurrent demo nets copy their hidden state
  back into their input blobs), which the next run reads although no op of this run does.
* Ops holding nested nets (``If``, ``While``, ``Do``, ``RecurrentNetwork``) are always kept:
  their nested ops may write enclosing blobs the op does not list (exported ``If`` ops often
  list no outputs), which the versioned view cannot see.
* Ops whose type is in ``keep_types`` are always kept.
* Only the predict_net's top level is rewritten; nested nets and the init_net are not.

Example::

    before                              after
      external_output: y@1                external_output: y@1
      %0 Relu(x@0) -> a@1                 %0 Sigmoid(x@0) -> y@1
      %1 Sigmoid(x@0) -> y@1
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import compress, count
from typing import ClassVar

from graphtools.ir import Model, Net, NetDef, Op
from graphtools.pass_infra import Pass, PassResult
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.ssa_view import SSAView

__all__ = ["SIDE_EFFECT_OP_TYPES", "RemoveDeadEnds", "dead_end_op_indices", "remove_dead_end_ops"]

SIDE_EFFECT_OP_TYPES: frozenset[str] = frozenset(
    {"Print", "Save", "Checkpoint", "Assert", "EnforceFinite"}
)
"""Op types whose effect is not (only) their outputs: logging, writing files, checks that
raise. (Caffe2's ``Log`` is the elementwise logarithm, not a logging op, so it is not here.)"""

_TYPE = operator.attrgetter("type")


def dead_end_op_indices(
    net: Net, *, keep_side_effects: bool = True, keep_types: Iterable[str] = ()
) -> list[int]:
    """Sorted indices of the top-level ops of ``net`` that cannot reach an external output.

    Returns ``[]`` for a net that declares no external output. Linear in the size of the net
    (nested nets included): one forward sweep for control inputs and nested reads, one
    backward sweep for liveness over the SSA view's integer keys.
    """
    if not net.external_outputs:
        return []
    view = net.ssa()
    always_keep = set(keep_types)
    if keep_side_effects:
        always_keep |= SIDE_EFFECT_OP_TYPES
    holders = net.nested_op_indices()
    kept = set(holders)
    kept.update(compress(count(), map(always_keep.__contains__, map(_TYPE, net))))
    extra_reads = _extra_reads(net, view) if holders or net.control_op_indices() else {}
    live = bytearray(view.num_keys)
    for key in map(view.key, view.external_outputs):
        if key is not None:
            live[key] = 1
    if keep_side_effects:
        for key in view.last_write_keys(net.external_inputs):
            live[key] = 1
    in_ptr, in_keys, out_ptr, out_keys = view.in_ptr, view.in_keys, view.out_ptr, view.out_keys
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


def _extra_reads(net: Net, view: SSAView) -> dict[int, list[int]]:
    """Reads that SSA does not list: control inputs, and blobs read inside nested nets.

    Each is keyed as a data input of the same op would be (before the op's own writes); a name
    no top-level op uses has no key (nothing at the top level writes it) and is skipped.
    """
    extra: dict[int, list[int]] = {}
    current: dict[str, int] = {}
    for index, op in enumerate(net):
        names = list(op.control_inputs) if op.has_control_inputs() else []
        if op.has_nested_nets():
            names.extend(_nested_reads(op))
        if names:
            keys = (view.key((name, current.get(name, 0))) for name in names)
            extra[index] = [key for key in keys if key is not None]
        for key in view.output_keys(index):
            current[view.name_of(key)] = view.version_of(key)
    return extra


def _nested_reads(op: Op) -> Iterator[str]:
    """Every blob name the nets held by ``op`` declare as input or read, recursively."""
    for _, nested in op.nested_nets():
        yield from nested.external_inputs
        for inner in nested:
            yield from inner.inputs
            yield from inner.control_inputs
            if inner.has_nested_nets():
                yield from _nested_reads(inner)


@dataclass(frozen=True)
class RemoveDeadEnds(Pass):
    """Remove predict_net ops whose outputs never reach an external output.

    Options:
        keep_side_effects: keep ops in ``SIDE_EFFECT_OP_TYPES`` and ops with no outputs even
            when nothing reads their outputs.
        keep_types: op types never removed (custom ops with side effects).

    Stats: ``ops_removed``; ``skipped_no_external_outputs`` = 1 when the net declares no
    external output (nothing is removed then).
    """

    name: ClassVar[str] = "remove-dead-ends"
    reads_ssa: ClassVar[bool] = True
    # Removed ops never feed a kept one, so the liveness of the rest is unchanged by a run.
    idempotent: ClassVar[bool] = True
    keep_side_effects: bool = True
    keep_types: tuple[str, ...] = ()

    def call(self, model: Model) -> PassResult:
        """Remove the dead ops of ``model.predict_net`` in one batch."""
        net = model.predict_net
        if not net.external_outputs:
            return PassResult(model, False, {"ops_removed": 0, "skipped_no_external_outputs": 1})
        dead = dead_end_op_indices(
            net, keep_side_effects=self.keep_side_effects, keep_types=self.keep_types
        )
        net.remove_ops(dead)
        return PassResult(model, bool(dead), {"ops_removed": len(dead)})


def remove_dead_end_ops(net_def: NetDef) -> None:
    """detectron2's ``remove_dead_end_ops``: remove dead-end ops from ``net_def`` in place.

    Same rules as ``RemoveDeadEnds()`` (correct liveness, side-effect ops kept, a net without
    external outputs left alone). The ops kept are written back into the same message.
    """
    net = net_from_netdef(net_def)
    dead = dead_end_op_indices(net)
    if not dead:
        return
    net.remove_ops(dead)
    rebuilt = net_to_netdef(net)
    del net_def.op[:]
    net_def.op.extend(rebuilt.op)

"""Renaming one versioned blob everywhere it appears: the plan, and the collisions refused.

detectron2's ``rename_op_input`` / ``rename_op_output`` (semantics.md 6.2-6.4) rename one
versioned blob ``(x, v)``: its producer's output, every op reading that version, the external
input when ``v`` is the start version of ``x`` and the external output when ``v`` is its final
version. ``rename_op_input`` seeds predict_net's versions from where the init_net left them, and
renames in the init_net too when the blob comes from it. Later versions of ``x`` keep the name
``x`` (an in-place chain splits).

detectron2 silently corrupts the net when the new name ``y`` already holds another value that
is still needed. Here a rename is refused (``IllegalRewriteError`` naming the op, the versioned
blob and the colliding blob) when the renamed value would overlap another value of ``y``. With
``P`` the op writing the renamed value (or the start of the net for an input) and ``L`` its last
reader (the end of the net when it is an external output, or flows on into the predict_net):

* an op at ``P``, or strictly between ``P`` and ``L``, writes ``y`` (it would clobber the value);
* an op after ``P`` reads a value of ``y`` written at or before ``P`` (it would now read ours);
* ``y`` is an external output whose final value is written at or before ``P``;
* the renamed value is a net input and ``y`` is an input too (declared, or left by the
  init_net);
* the renamed value is written by an op and ``y`` is an input of the net (a parameter the
  init_net fills once, data a caller feeds): the net would write over what its next run reads
  (a predictor runs the init_net once and the predict_net again and again; ``verify`` runs it
  once, and would not see it);
* ``x`` or ``y`` is referenced inside a nested net (``If``, ``RecurrentNetwork``): those read
  enclosing blobs by name at run time, which the versioned view cannot see.

This is exact for the ops the versioned view sees, and accepts detectron2's own uses such as
``fuse_alias_placeholder`` (an op renamed to read and write the same name). Each rename is one
linear pass over the net.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graphtools.errors import IllegalRewriteError
from graphtools.ir import Net, Op
from graphtools.nested import names_in_nested_nets
from graphtools.ssa import OpSSA, VersionedBlob, get_ssa

__all__ = ["RenamePlan", "op_slot", "plan_rename"]


@dataclass
class RenamePlan:
    """The changes of one rename, computed (and checked) before anything is written.

    Attributes:
        net: the net to rename in.
        count: how many places are renamed (op slots and external list entries).
        ops: the renamed ops by index.
        external_inputs / external_outputs: the new external lists (``None``: unchanged).
        moved: ``(old, new)`` when what the net keeps under the old name (an ONNX
            initializer, a declared type) moves to the new one: the renamed value was the
            only one of its name; ``None`` otherwise.
    """

    net: Net
    count: int = 0
    ops: dict[int, Op] = field(default_factory=dict)
    external_inputs: list[str] | None = None
    external_outputs: list[str] | None = None
    moved: tuple[str, str] | None = None


def _where(net: Net, index: int) -> str:
    return "the net's start" if index < 0 else f"op #{index} ({net[index].type})"


def plan_rename(
    net: Net,
    blob: VersionedBlob,
    new_name: str,
    *,
    start_versions: Mapping[str, int] | None,
    flows_on: bool,
    label: str,
) -> RenamePlan:
    """Check and plan renaming ``blob`` to ``new_name`` in ``net`` (see the module docstring)."""
    old, version = blob
    plan = RenamePlan(net)
    if new_name == old:
        return plan
    if start_versions is None:
        view = net.ssa()
        ssa, end_versions = view.ssa, view.versions
        starts: Mapping[str, int] = {}
    else:
        ssa, end_versions = get_ssa(net, dict(start_versions))
        starts = start_versions
    size = len(ssa)
    producer = -1
    last_use = -1
    for index, (ins, outs) in enumerate(ssa):
        if blob in outs:
            producer = index
        if blob in ins:
            last_use = index
    renames_start = producer < 0 and starts.get(old, 0) == version
    renames_end = end_versions.get(old, 0) == version
    declared_out = renames_end and old in net.external_outputs
    if flows_on or declared_out:
        last_use = size

    def refuse(reason: str, hint: str = "pick a name not in use") -> IllegalRewriteError:
        return IllegalRewriteError(
            f"cannot rename {blob} ({label}, written by {_where(net, producer)}) to "
            f"{new_name!r}: {reason}; {hint}"
        )

    nested = names_in_nested_nets(net)
    if old in nested or new_name in nested:
        which = old if old in nested else new_name
        hint = "graphtools does not rename inside nested nets"
        if which == new_name:
            hint = "pick a name no nested net uses"
        raise refuse(f"a nested net reads or writes {which!r} by name", hint)
    if renames_start and (new_name in net.external_inputs or new_name in starts):
        raise refuse(f"({new_name!r}, {starts.get(new_name, 0)}) is already an input of the net")
    writer: dict[int, int] = {}
    for index, (ins, outs) in enumerate(ssa):
        new_ins: list[str] | None = None
        for position, item in enumerate(ins):
            if item == blob:
                new_ins = new_ins if new_ins is not None else list(net[index].inputs)
                new_ins[position] = new_name
            elif item[0] == new_name and index > producer and writer.get(item[1], -1) <= producer:
                raise refuse(
                    f"op #{index} ({net[index].type}) reads {item}, which the rename would "
                    f"replace with the renamed value"
                )
        new_outs: list[str] | None = None
        for position, item in enumerate(outs):
            if item == blob:
                new_outs = new_outs if new_outs is not None else list(net[index].outputs)
                new_outs[position] = new_name
            elif item[0] == new_name:
                if index == producer or producer < index < last_use:
                    raise refuse(
                        f"op #{index} ({net[index].type}) writes {item} while the renamed value "
                        f"is still needed"
                    )
                writer[item[1]] = index
        if new_ins is not None or new_outs is not None:
            op = net[index]
            plan.ops[index] = op.replace(
                inputs=op.inputs if new_ins is None else new_ins,
                outputs=op.outputs if new_outs is None else new_outs,
            )
            plan.count += sum(1 for item in ins if item == blob)
            plan.count += sum(1 for item in outs if item == blob)
    if new_name in net.external_outputs:
        final = (new_name, end_versions.get(new_name, 0))
        if writer.get(final[1], -1) <= producer:
            raise refuse(f"{final} is an external output the rename would replace")
    if producer >= 0 and (new_name in net.external_input_set() or new_name in starts):
        # A predictor runs its init_net once and the predict_net again and again: a write over
        # an input (a parameter the init_net fills, data the caller feeds) would be what the
        # next run reads.
        raise refuse(
            f"op #{producer} ({net[producer].type}) would then write over the net's input "
            f"{new_name!r}, which its next run reads again"
        )
    if renames_start and old in net.external_inputs:
        plan.external_inputs = [new_name if n == old else n for n in net.external_inputs]
        plan.count += net.external_inputs.count(old)
    if declared_out:
        plan.external_outputs = [new_name if n == old else n for n in net.external_outputs]
        plan.count += net.external_outputs.count(old)
    if (old in net.initializers or old in net.types) and not _named_after(net, plan, old):
        plan.moved = (old, new_name)
    return plan


def _named_after(net: Net, plan: RenamePlan, name: str) -> bool:
    """Whether ``name`` still names a value of ``net`` once ``plan`` is applied."""
    externals = (
        net.external_inputs if plan.external_inputs is None else plan.external_inputs,
        net.external_outputs if plan.external_outputs is None else plan.external_outputs,
    )
    if any(name in names for names in externals):
        return True
    return any(
        name in op.inputs or name in op.outputs
        for op in (plan.ops.get(index, op) for index, op in enumerate(net))
    )


def op_slot(ssa: Sequence[OpSSA], op_id: int, slot: int, outputs: bool) -> VersionedBlob:
    kind = "output" if outputs else "input"
    if not 0 <= op_id < len(ssa):
        raise IndexError(f"op #{op_id} does not exist: the net has {len(ssa)} ops")
    blobs = ssa[op_id][1 if outputs else 0]
    if not 0 <= slot < len(blobs):
        raise IndexError(f"op #{op_id} has no {kind} #{slot} (it has {len(blobs)})")
    return blobs[slot]

"""Rename one versioned blob everywhere it appears, refusing renames that would collide.

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
* ``x`` or ``y`` is referenced inside a nested net (``If``, ``RecurrentNetwork``): those read
  enclosing blobs by name at run time, which the versioned view cannot see.

This is exact for the ops the versioned view sees, and accepts detectron2's own uses such as
``fuse_alias_placeholder`` (an op renamed to read and write the same name). Each rename is one
linear pass over the net.

Example (``rename{op=1,input=0,to=y}``)::

    before                            after
      %0 Relu(a@0) -> x@1               %0 Relu(a@0) -> y@1
      %1 Sigmoid(x@1) -> out@1          %1 Sigmoid(y@1) -> out@1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from graphtools.errors import IllegalRewriteError, NoProducerError, PreconditionError
from graphtools.graph import names_in_nested_nets
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import model_from_netdefs, net_to_netdef
from graphtools.ssa import OpSSA, VersionedBlob, get_ssa

__all__ = [
    "NoProducerError",
    "Rename",
    "rename_model_input",
    "rename_model_output",
    "rename_op_input",
    "rename_op_output",
    "rename_versioned_blob",
]


@dataclass
class _RenamePlan:
    """The edits of one rename, computed (and checked) before anything is written."""

    net: Net
    count: int = 0
    ops: dict[int, Op] = field(default_factory=dict)
    external_inputs: list[str] | None = None
    external_outputs: list[str] | None = None

    def apply(self) -> None:
        net = self.net
        if self.ops:
            net.set_ops(self.ops.get(index, op) for index, op in enumerate(net.ops))
        if self.external_inputs is not None:
            net.set_external_inputs(self.external_inputs)
        if self.external_outputs is not None:
            net.set_external_outputs(self.external_outputs)


def _where(net: Net, index: int) -> str:
    return "the net's start" if index < 0 else f"op #{index} ({net[index].type})"


def _plan_rename(
    net: Net,
    blob: VersionedBlob,
    new_name: str,
    *,
    start_versions: Mapping[str, int] | None,
    flows_on: bool,
    label: str,
) -> _RenamePlan:
    """Check and plan renaming ``blob`` to ``new_name`` in ``net`` (see the module docstring)."""
    old, version = blob
    plan = _RenamePlan(net)
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

    def refuse(reason: str) -> IllegalRewriteError:
        return IllegalRewriteError(
            f"cannot rename {blob} ({label}, written by {_where(net, producer)}) to "
            f"{new_name!r}: {reason}; pick a name not in use"
        )

    nested = names_in_nested_nets(net)
    if old in nested or new_name in nested:
        which = old if old in nested else new_name
        raise refuse(f"a nested net reads or writes {which!r} by name")
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
    if renames_start and old in net.external_inputs:
        plan.external_inputs = [new_name if n == old else n for n in net.external_inputs]
        plan.count += net.external_inputs.count(old)
    if declared_out:
        plan.external_outputs = [new_name if n == old else n for n in net.external_outputs]
        plan.count += net.external_outputs.count(old)
    return plan


def rename_versioned_blob(
    net: Net,
    blob: VersionedBlob,
    new_name: str,
    *,
    start_versions: Mapping[str, int] | None = None,
    flows_on: bool = False,
) -> int:
    """Rename ``blob`` to ``new_name`` in ``net`` wherever that version appears.

    Renames the producer's output, every read of that version, the external input when the
    version is the start version and the external output when it is the final version.

    Args:
        net: the net, rewritten in place (one ``set_ops`` at most).
        blob: ``(name, version)`` in the numbering of ``start_versions``.
        new_name: the new blob name; equal to the old name is a no-op.
        start_versions: versions blobs hold when the net starts (where an init_net left
            them); ``None`` numbers from 0 as ``net.ssa()`` does.
        flows_on: the value is needed after the net ends (an init_net's blob that the
            predict_net reads), so no later write of ``new_name`` is allowed.

    Returns:
        How many places were renamed (op slots and external entries).

    Raises:
        IllegalRewriteError: the rename would collide with another value of ``new_name``
            (see the module docstring); the net is left untouched.
    """
    plan = _plan_rename(
        net,
        blob,
        new_name,
        start_versions=start_versions,
        flows_on=flows_on,
        label="versioned blob",
    )
    plan.apply()
    return plan.count


def _op_slot(ssa: Sequence[OpSSA], op_id: int, slot: int, outputs: bool) -> VersionedBlob:
    kind = "output" if outputs else "input"
    if not 0 <= op_id < len(ssa):
        raise IndexError(f"op #{op_id} does not exist: the net has {len(ssa)} ops")
    blobs = ssa[op_id][1 if outputs else 0]
    if not 0 <= slot < len(blobs):
        raise IndexError(f"op #{op_id} has no {kind} #{slot} (it has {len(blobs)})")
    return blobs[slot]


def rename_model_output(model: Model, op_id: int, output_id: int, new_name: str) -> int:
    """IR form of ``rename_op_output``: rename output ``output_id`` of predict op ``op_id``.

    Returns how many places were renamed.
    """
    net = model.predict_net
    blob = _op_slot(net.ssa().ssa, op_id, output_id, outputs=True)
    plan = _plan_rename(
        net,
        blob,
        new_name,
        start_versions=None,
        flows_on=False,
        label=f"output #{output_id} of op #{op_id} ({net[op_id].type})",
    )
    plan.apply()
    return plan.count


def rename_model_input(
    model: Model, op_id: int, input_id: int, new_name: str, from_producer: bool = False
) -> int:
    """IR form of ``rename_op_input``: rename input ``input_id`` of predict op ``op_id``.

    Versions are seeded from the init_net's final versions (when the model has one). The
    input must be read by this op alone, unless ``from_producer`` re-routes through its
    producer (renaming every reader). A blob the init_net leaves is renamed there too.

    Returns:
        How many places were renamed in both nets.

    Raises:
        IllegalRewriteError: other ops read the input, or the rename would collide.
        NoProducerError: ``from_producer`` and no predict op produces the input.
    """
    predict, init = model.predict_net, model.init_net
    init_versions = {} if init is None else dict(init.ssa().versions)
    ssa, _ = get_ssa(predict, dict(init_versions))
    blob = _op_slot(ssa, op_id, input_id, outputs=False)
    op_label = f"input #{input_id} of op #{op_id} ({predict[op_id].type})"
    if from_producer:
        producer = next(
            ((i, outs.index(blob)) for i, (_, outs) in enumerate(ssa) if blob in outs), None
        )
        if producer is None:
            raise NoProducerError(
                f"cannot rename {blob} ({op_label}) from its producer: no predict_net op "
                f"produces it; it probably comes from the init_net or is an input of the net"
            )
        return rename_model_output(model, producer[0], producer[1], new_name)
    readers = [i for i, (ins, _) in enumerate(ssa) if blob in ins]
    if len(readers) > 1:
        others = ", ".join(f"#{i} ({predict[i].type})" for i in readers if i != op_id)
        raise IllegalRewriteError(
            f"input {blob[0]!r} ({op_label}, version {blob[1]}) is also read by ops {others}; "
            f"use rename_op_output on its producer, or from_producer=True"
        )
    plans = []
    if init is not None and init_versions.get(blob[0]) == blob[1]:
        plans.append(
            _plan_rename(
                init,
                blob,
                new_name,
                start_versions=None,
                flows_on=True,
                label=f"init_net, {op_label}",
            )
        )
    plans.append(
        _plan_rename(
            predict, blob, new_name, start_versions=init_versions, flows_on=False, label=op_label
        )
    )
    for plan in plans:
        plan.apply()
    return sum(plan.count for plan in plans)


def rename_op_output(
    predict_net: caffe2_pb2.NetDef, op_id: int, output_id: int, new_name: str
) -> None:
    """detectron2's ``rename_op_output``: rename an op's output and all its readers, in place.

    Refuses (``IllegalRewriteError``) renames that collide with another value of ``new_name``.
    """
    model = model_from_netdefs(predict_net)
    rename_model_output(model, op_id, output_id, new_name)
    predict_net.CopyFrom(net_to_netdef(model.predict_net))


def rename_op_input(
    predict_net: caffe2_pb2.NetDef,
    init_net: caffe2_pb2.NetDef,
    op_id: int,
    input_id: int,
    new_name: str,
    from_producer: bool = False,
) -> None:
    """detectron2's ``rename_op_input``: rename an op's input in both nets, in place.

    Same refusals as detectron2 (the input is read by other ops and ``from_producer`` is
    false; ``from_producer`` with no producer raises ``NoProducerError``, a
    ``NotImplementedError`` as before), plus the collision check of ``rename_versioned_blob``.
    """
    model = model_from_netdefs(predict_net, init_net)
    rename_model_input(model, op_id, input_id, new_name, from_producer)
    predict_net.CopyFrom(net_to_netdef(model.predict_net))
    if model.init_net is not None:
        init_net.CopyFrom(net_to_netdef(model.init_net))


@dataclass(frozen=True)
class Rename(Pass):
    """Rename one input or output of one predict_net op (``rename{op=2,input=0,to=y}``).

    Options:
        op: index of the op in the predict_net.
        input: the input slot to rename (as ``rename_op_input``), or -1.
        output: the output slot to rename (as ``rename_op_output``), or -1.
        to: the new name.
        from_producer: with ``input``, rename through the producer (every reader).
    """

    name: ClassVar[str] = "rename"
    reads_ssa: ClassVar[bool] = True
    changes_interface: ClassVar[bool] = True

    op: int = -1
    input: int = -1
    output: int = -1
    to: str = ""
    from_producer: bool = False

    def requires(self, model: Model) -> None:
        """Exactly one of ``input``/``output``, a valid ``op`` and a non-empty ``to``."""
        if (self.input >= 0) == (self.output >= 0):
            raise PreconditionError("rename needs exactly one of input=N or output=N")
        if not self.to:
            raise PreconditionError("rename needs a new name: to=NAME")
        if not 0 <= self.op < len(model.predict_net):
            raise PreconditionError(
                f"rename: op #{self.op} does not exist (predict_net has "
                f"{len(model.predict_net)} ops)"
            )

    def call(self, model: Model) -> PassResult:
        """Apply the rename; ``modified`` is false when the new name equals the old one."""
        before = model.revision
        if self.input >= 0:
            count = rename_model_input(model, self.op, self.input, self.to, self.from_producer)
        else:
            count = rename_model_output(model, self.op, self.output, self.to)
        return PassResult(model, model.revision != before, {"renamed": count})

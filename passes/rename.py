"""Rename one versioned blob everywhere it appears, refusing renames that would collide.

detectron2's ``rename_op_input`` / ``rename_op_output`` (semantics.md 6.2-6.4) rename one
versioned blob ``(x, v)``: its producer's output, every op reading that version, the external
input when ``v`` is the start version of ``x`` and the external output when ``v`` is its final
version. ``rename_op_input`` seeds predict_net's versions from where the init_net left them, and
renames in the init_net too when the blob comes from it. Later versions of ``x`` keep the name
``x`` (an in-place chain splits).

detectron2 silently corrupts the net when the new name already holds another value that is
still needed; here such a rename is refused with ``IllegalRewriteError`` (the rules:
``graphtools.analysis.rename``).

Example (``rename{op=1,input=0,to=y}``)::

    before                            after
      %0 Relu(a@0) -> x@1               %0 Relu(a@0) -> y@1
      %1 Sigmoid(x@1) -> out@1          %1 Sigmoid(y@1) -> out@1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import MAIN_NET
from graphtools.analysis.rename import RenamePlan, op_slot, plan_rename
from graphtools.errors import IllegalRewriteError, NoProducerError, PreconditionError
from graphtools.ir import Model, Net
from graphtools.pass_infra import Pass, PassResult
from graphtools.ssa import VersionedBlob, get_ssa

__all__ = [
    "Rename",
    "rename_model_input",
    "rename_model_output",
    "rename_versioned_blob",
]


def _apply(plan: RenamePlan) -> None:
    """Say what a rename changes, in one edit of its net."""
    with plan.net.edit() as edit:
        for index, op in plan.ops.items():
            edit.set_op(index, op)
        if plan.external_inputs is not None:
            edit.set_external_inputs(plan.external_inputs)
        if plan.external_outputs is not None:
            edit.set_external_outputs(plan.external_outputs)
        if plan.moved is not None:
            old, new = plan.moved
            tensor, value_type = plan.net.initializers.get(old), plan.net.types.get(old)
            if tensor is not None:
                edit.set_initializer(old, None)
                edit.set_initializer(new, tensor)
            if value_type is not None:
                edit.set_type(old, None)
                edit.set_type(new, value_type)


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
    plan = plan_rename(
        net,
        blob,
        new_name,
        start_versions=start_versions,
        flows_on=flows_on,
        label="versioned blob",
    )
    _apply(plan)
    return plan.count


def rename_model_output(model: Model, op_id: int, output_id: int, new_name: str) -> int:
    """IR form of ``rename_op_output``: rename output ``output_id`` of predict op ``op_id``.

    Returns how many places were renamed.
    """
    net = model.predict_net
    blob = op_slot(net.ssa().ssa, op_id, output_id, outputs=True)
    plan = plan_rename(
        net,
        blob,
        new_name,
        start_versions=None,
        flows_on=False,
        label=f"output #{output_id} of op #{op_id} ({net[op_id].type})",
    )
    _apply(plan)
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
    blob = op_slot(ssa, op_id, input_id, outputs=False)
    op_label = f"input #{input_id} of op #{op_id} ({predict[op_id].type})"
    from_init = init is not None and init_versions.get(blob[0]) == blob[1]
    if from_producer:
        producer = next(
            ((i, outs.index(blob)) for i, (_, outs) in enumerate(ssa) if blob in outs), None
        )
        if producer is not None:
            return rename_model_output(model, producer[0], producer[1], new_name)
        if from_init:
            raise NoProducerError(
                f"cannot rename {blob} ({op_label}) from its producer: the init_net writes "
                "it, and from_producer renames within the predict_net; rename it without "
                "from_producer (the rename pass renames it in both nets)"
            )
        # An input of the net: renamed with every read of it, as its producer's would be.
        return rename_versioned_blob(predict, blob, new_name)
    readers = [i for i, (ins, _) in enumerate(ssa) if blob in ins]
    if len(readers) > 1:
        others = ", ".join(f"#{i} ({predict[i].type})" for i in readers if i != op_id)
        produced = any(blob in outs for _, outs in ssa)
        if produced:
            hint = "use rename_op_output on its producer, or from_producer=True"
        elif from_init:
            hint = (
                "the init_net writes it: rename it in both nets with "
                "graphtools.passes.rename.rename_versioned_blob"
            )
        else:
            hint = "it is an input of the net: from_producer=True renames it and every read"
        raise IllegalRewriteError(
            f"input {blob[0]!r} ({op_label}, version {blob[1]}) is also read by ops {others}; "
            f"{hint}"
        )
    plans = []
    if init is not None and init_versions.get(blob[0]) == blob[1]:
        plans.append(
            plan_rename(
                init,
                blob,
                new_name,
                start_versions=None,
                flows_on=True,
                label=f"init_net, {op_label}",
            )
        )
    plans.append(
        plan_rename(
            predict, blob, new_name, start_versions=init_versions, flows_on=False, label=op_label
        )
    )
    for plan in plans:
        _apply(plan)
    return sum(plan.count for plan in plans)


@dataclass(frozen=True)
class Rename(Pass):
    """Rename one input or output of one op of the main net (the predict_net, the ONNX
    graph): ``rename{op=2,input=0,to=y}``.

    Options:
        op: index of the op in the main net (as ``graphtools show --ops`` numbers them).
        input: the input slot to rename (as ``rename_op_input``), or -1.
        output: the output slot to rename (as ``rename_op_output``), or -1.
        to: the new name.
        from_producer: with ``input``, rename the value everywhere: through its producer
            (every reader), or, for an input of the net, the input and every reader.
    """

    name: ClassVar[str] = "rename"
    example: ClassVar[str] = "rename{op=3,output=0,to=y}"
    reads_ssa: ClassVar[bool] = True
    changes_interface: ClassVar[bool] = True

    op: int = -1
    input: int = -1
    output: int = -1
    to: str = ""
    from_producer: bool = False

    def requires(self, model: Model) -> None:
        """Exactly one of ``input``/``output``, naming a slot of a valid ``op``, and a non-empty
        ``to``."""
        if (self.input >= 0) == (self.output >= 0):
            raise PreconditionError("rename needs exactly one of input=N or output=N")
        if not self.to:
            raise PreconditionError("rename needs a new name: to=NAME")
        if not 0 <= self.op < len(model.predict_net):
            raise PreconditionError(
                f"rename: op #{self.op} does not exist (the {MAIN_NET[model.dialect]} has "
                f"{len(model.predict_net)} ops)"
            )
        op = model.predict_net[self.op]
        kind, slot, names = (
            ("input", self.input, op.inputs)
            if self.input >= 0
            else ("output", self.output, op.outputs)
        )
        if slot >= len(names):
            raise PreconditionError(
                f"rename: op #{self.op} ({op.type}) has no {kind} #{slot} (it has {len(names)})"
            )

    def call(self, model: Model) -> PassResult:
        """Apply the rename; ``modified`` is false when the new name equals the old one."""
        before = model.revision
        if self.input >= 0:
            count = rename_model_input(model, self.op, self.input, self.to, self.from_producer)
        else:
            count = rename_model_output(model, self.op, self.output, self.to)
        return PassResult(model, model.revision != before, {"renamed": count})

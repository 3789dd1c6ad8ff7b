"""Remove params nobody reads: init_net fills whose blobs the predict_net never uses, and
initializers an ONNX graph never uses.

After an import or a rewrite (``remove-reshape-for-fc`` drops shape chains, constants folded
into arguments), the init_net can hold params no op reads: ONNX exporters leave unused
initializers too (onnxruntime warns "Removing initializer ... not used by any node"). A param
is *used* when a top-level predict_net op reads its initial value (version 0), a nested net
(``If`` branches, step nets) reads its name, or an external output is that value. Unused
params leave the init_net (their fill ops, when every blob the op fills is unused and no kept
init op reads it), its external outputs, and the predict_net's external inputs. An ONNX
initializer that is also a graph input a user may feed (IR 4 and later) is part of the
model's interface and stays, and so does one an ONNX model's ``training_info`` reads (a
training step's learning rate, say) or its graph's ``quantization_annotation`` names (a
quantized tensor's scale or zero point).

Example (``w_old`` is filled but never read)::

    init_net                                  init_net
      #0 GivenTensorFill -> w                   #0 GivenTensorFill -> w
      #1 GivenTensorFill -> w_old       =>
    predict_net (external_input: x, w, w_old)  predict_net (external_input: x, w)
      #0 FC(x@0, w@0) -> y@1                     #0 FC(x@0, w@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from typing import ClassVar

import numpy as np

from graphtools.dialects import op_table, read_outside_graph
from graphtools.ir import Model, Net
from graphtools.nested import nested_accesses
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.ssa_view import SSAView

__all__ = ["RemoveUnusedParams", "unused_params"]


def unused_params(model: Model) -> list[str]:
    """Params the predict_net never uses: blobs the init_net writes (init_net order), then the
    predict_net's own initializers (file order)."""
    net = model.predict_net
    init = model.init_net
    if init is None and not net.initializers:
        return []
    nested_reads: set[str] = set()
    for access in nested_accesses(net).values():
        nested_reads.update(access.reads)
    view = net.ssa()
    outputs = {name for name, version in view.external_outputs if version == 0}
    params = [name for op in init for name in op.outputs] if init is not None else []
    candidates = [*params, *net.initializers]
    # Flags, not a set of the read names: a net holds a param per op, and only the unread
    # few are then looked up (in the small sets of outputs and nested reads).
    spared = outputs | nested_reads | read_outside_graph(model)
    constants = op_table(model).constants(net)
    if len(constants) != len(net.initializers):  # a graph input a user may feed stays one
        spared.update(name for name in net.initializers if name not in constants)
    unread = compress(candidates, np.logical_not(view.initially_read(candidates)).tolist())
    return list(dict.fromkeys(name for name in unread if name not in spared))


def _removable_init_ops(init: Net, unused: set[str]) -> list[int]:
    """Init ops that only fill unused blobs, and whose blobs no kept init op reads."""
    read_by_kept: set[str] = set()
    removable = []
    for index in range(len(init) - 1, -1, -1):
        op = init[index]
        if op.outputs and unused.issuperset(op.outputs) and read_by_kept.isdisjoint(op.outputs):
            removable.append(index)
        else:
            read_by_kept.update(op.inputs)
    return removable


def _may_enable(view: SSAView, dropped: set[str]) -> frozenset[str] | None:
    """The passes removing ``dropped`` may give work to (``view``: the predict_net's before
    the removal): none when no top-level op writes a dropped name (no op read the params,
    and a declaration matters to a pass only for a name an op writes: the last write of a
    declared input is kept, an identity cannot give its source a declared input's name);
    any pass otherwise."""
    return None if view.last_write_keys(dropped) else frozenset()


@register_pass
@dataclass(frozen=True)
class RemoveUnusedParams(Pass):
    """Drop params (init_net fills, ONNX initializers) the main net never reads (see the
    module docstring).

    Changes the interface (the predict_net's external inputs lose the dropped params). Stats:
    ``params_removed``, ``init_ops_removed``.
    """

    name: ClassVar[str] = "remove-unused-params"
    changes_interface: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Remove the unused params' fills, initializers and declarations (one edit per net)."""
        unused = set(unused_params(model))
        init = model.init_net
        predict = model.predict_net
        view = predict.ssa()  # as unused_params saw it
        if not unused:
            return PassResult(model, False, {"params_removed": 0, "init_ops_removed": 0})
        removable = [] if init is None else _removable_init_ops(init, unused)
        changed = False
        dropped: set[str] = set()
        if init is not None and removable:
            dropped = {name for index in removable for name in init[index].outputs}
            with init.edit() as edit:
                for index in removable:
                    edit.remove(index)
                if not dropped.isdisjoint(init.external_outputs):
                    edit.set_external_outputs(n for n in init.external_outputs if n not in dropped)
            changed = edit.changed
        held = unused if init is None else unused.intersection(predict.initializers)
        dropped |= held
        if held or not dropped.isdisjoint(predict.external_inputs):
            with predict.edit() as declarations:
                for name in held:
                    declarations.set_initializer(name, None)
                if not dropped.isdisjoint(predict.external_inputs):
                    declarations.set_external_inputs(
                        n for n in predict.external_inputs if n not in dropped
                    )
            changed = declarations.changed or changed
        stats = {"params_removed": len(dropped), "init_ops_removed": len(removable)}
        return PassResult(model, changed, stats, _may_enable(view, dropped))

"""Remove ops none of whose outputs can reach an external output of the net.

Liveness (``graphtools.analysis.liveness``) is computed on versioned blobs: a blob is live
when a *live* op reads it, so producers that kept ops still read stay (detectron2's
``remove_dead_end_ops`` deletes them, semantics.md 6.10).

Rules a user should know:

* A net that declares no external output is left alone (stats ``skipped_no_external_outputs``):
  every op would be dead, and removing everything is never what a user wants.
* With ``keep_side_effects`` (the default), ops the model's op table says have side effects
  (Caffe2's ``Print``, ``Save``, ``Checkpoint``, ``Assert``, ``EnforceFinite``) or nobody knows
  (an ONNX op of a custom domain), ops with no outputs, and the last write of a blob the net
  declares as an external input are kept: such a write is state carried into the next run
  (recurrent demo nets copy their hidden state back into their input blobs), which the next
  run reads although no op of this run does.
* Caffe2 ops holding nested nets (``If``, ``While``, ``Do``, ``RecurrentNetwork``) are always
  kept: their nested ops may write enclosing blobs the op does not list (exported ``If`` ops
  often list no outputs), which the versioned view cannot see. An ONNX ``If`` or ``Loop``
  writes only its outputs, and goes when nothing reads them.
* Ops whose type is in ``keep_types`` are always kept.
* Only the predict_net's top level is rewritten; nested nets and the init_net are not.

Example::

    before                              after
      external_output: y@1                external_output: y@1
      %0 Relu(x@0) -> a@1                 %0 Sigmoid(x@0) -> y@1
      %1 Sigmoid(x@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools.analysis.liveness import dead_end_op_indices
from graphtools.dialects import op_table
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["RemoveDeadEnds"]


@dataclass(frozen=True)
class RemoveDeadEnds(Pass):
    """Remove ops of the main net (the predict_net, the ONNX graph) whose outputs never
    reach its outputs.

    Options:
        keep_side_effects: keep ops with side effects, opaque ops and ops with no outputs
            even when nothing reads their outputs.
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
        """Remove the dead ops of ``model.predict_net`` in one edit."""
        net = model.predict_net
        if not net.external_outputs:
            return PassResult(model, False, {"ops_removed": 0, "skipped_no_external_outputs": 1})
        dead = dead_end_op_indices(
            net,
            kept=op_table(model).kept_ops(net, side_effects=self.keep_side_effects),
            keep_side_effects=self.keep_side_effects,
            keep_types=self.keep_types,
        )
        with net.edit() as edit:
            for index in dead:
                edit.remove(index)
        return PassResult(model, edit.changed, {"ops_removed": len(dead)})

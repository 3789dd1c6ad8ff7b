"""Remove ops that pass their input through unchanged, as the model's op table says: Caffe2's
``Identity``, ``Alias``, ``AliasWithName`` (the aliases share their input's storage: kept when
either name is written after them) and test-mode ``Dropout``, ONNX's ``Identity`` and
inference-mode ``Dropout`` (whose masks nobody reads), and the op types of the ``types``
option. Which can go, and how an external output keeps its name:
``graphtools.analysis.identities`` (in a net declaring no outputs, one writing a blob nobody
reads stays: that blob is what the net's users fetch). An ONNX graph output copied from an
initializer no input declares goes too: the initializer takes the output's name, as onnxsim
renames it.

Example (external output ``y``)::

    before                              after
      %0 Relu(x@0) -> a@1                 %0 Relu(x@0) -> y@1
      %1 Dropout(a@1) -> d@1 {is_test=1}
      %2 Identity(d@1) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools.analysis.identities import find_identity_ops
from graphtools.dialects import op_table
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["RemoveIdentityOps"]


@dataclass(frozen=True)
class RemoveIdentityOps(Pass):
    """Drop identity ops from the main net (the predict_net, the ONNX graph), rewiring
    their readers to their input.

    Options:
        types: more op types to treat as identities (one input, one output), e.g.
            ``StopGradient`` in a net that will never be differentiated.

    Stats: ``ops_removed``, ``values_renamed`` (values that took an external output's name).
    """

    name: ClassVar[str] = "remove-identity-ops"
    reads_ssa: ClassVar[bool] = True
    types: tuple[str, ...] = ()

    def call(self, model: Model) -> PassResult:
        """Find the identities, then drop them in one edit."""
        net = model.predict_net
        table = op_table(model)
        found = find_identity_ops(
            net,
            table.identity_types(),
            lambda op: table.passes_through(op, net),
            self.types,
            table.shares_storage,
        )
        with net.edit() as edit:
            found.apply(edit)
        stats = {"ops_removed": len(found.removed), "values_renamed": len(found.renames)}
        return PassResult(model, edit.changed, stats)

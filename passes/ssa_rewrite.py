"""Rename blobs so every name is written once, as Caffe2's ONNX frontend did before export.

ONNX graphs are SSA: a value has one producer. The naming rules (``multi``, Caffe2's since
November 2018, and ``all``, the 2018 one) and how collisions are avoided:
``graphtools.analysis.ssa_names``.

Example (style ``multi``, external input and output ``X``)::

    before                          after
      #0 X@1 = Relu(X@0)              #0 X_1@1 = Relu(X@0)
      #1 X@2 = Relu(X@1)              #1 X_2@1 = Relu(X_1@0)
    external_output: X              external_output: X_2
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.analysis.ssa_names import plan_ssa_names
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["SSARewrite"]


@dataclass(frozen=True)
class SSARewrite(Pass):
    """Rename predict_net blobs so each name is written once (ONNX export preparation).

    Options:
        style: ``multi`` (rename only multi-version blobs; default) or ``all`` (every blob
            becomes ``name_version``, init_net included).

    Renames external outputs (and, with ``all``, external inputs), hence
    ``changes_interface``. Stats: ``blobs_renamed``, the versioned blobs given a new name.

    Upstream's ``all`` rule is not idempotent (``X_0`` becomes ``X_0_0``), which a pipeline
    run to its fixpoint cannot use; so with ``all`` the pass leaves a model alone when it is
    already SSA and every blob name of both nets ends in ``_<number>`` (what the rule
    produces). ``ssa_rewrite`` itself renames unconditionally, as upstream.
    """

    name: ClassVar[str] = "ssa-rewrite"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    reads_ssa: ClassVar[bool] = True
    changes_interface: ClassVar[bool] = True
    style: str = "multi"

    def call(self, model: Model) -> PassResult:
        """Rename in place; the init_net must hold only ``GivenTensor*Fill`` ops."""
        if self.style == "all" and _already_all_style(model):
            return PassResult(model, False, {"blobs_renamed": 0})
        net, init = model.predict_net, model.init_net
        names = plan_ssa_names(net, init, (), self.style)
        with net.edit() as edit:
            for index, (inputs, outputs) in names.ops.items():
                edit.set_op(index, net[index].replace(inputs=inputs, outputs=outputs))
            edit.set_external_inputs(names.external_inputs)
            edit.set_external_outputs(names.external_outputs)
        changed = edit.changed
        if init is not None and names.init_external_outputs is not None:
            with init.edit() as init_edit:
                for index, outputs in names.init_ops.items():
                    init_edit.set_op(index, init[index].replace(outputs=outputs))
                init_edit.set_external_inputs(names.init_external_inputs or ())
                init_edit.set_external_outputs(names.init_external_outputs)
            changed = changed or init_edit.changed
        return PassResult(model, changed, {"blobs_renamed": names.renamed if changed else 0})


_VERSIONED_NAME = re.compile(r".*_[0-9]+")


def _already_all_style(model: Model) -> bool:
    """Whether ``model`` looks like the output of ``style="all"``: SSA, names ``x_<n>``."""
    net = model.predict_net
    versions: dict[str, int] = {}
    for ins, outs in net.ssa().ssa:
        for name, version in (*ins, *outs):
            if versions.setdefault(name, version) != version:
                return False
    names = set(versions).union(net.external_inputs, net.external_outputs)
    init = model.init_net
    if init is not None:
        names.update(init.external_inputs, init.external_outputs)
        names.update(name for op in init.ops for name in op.outputs)
    return all(_VERSIONED_NAME.fullmatch(name) for name in names)

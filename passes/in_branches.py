"""Run a pipeline inside the control-flow bodies of a model, as it runs at the top level.

The passes see the top-level net; the bodies the model's op table names (Caffe2's ``If``
branches ``then_net``/``else_net``; ONNX's ``If`` branches and ``Loop``/``Scan`` bodies) keep
their Reshape chains, copies, identities and dead ends. This pass runs a pipeline (``default``
unless told otherwise) on each body as a model of its own, recursively. A Caffe2 branch writes
into the enclosing workspace, so while its pipeline runs, the names it writes that the
enclosing net reads after the If (or declares as outputs) count as the branch's outputs too;
its declared outputs are restored afterwards. The passes get a copy of the init_net, so they
know the params, but params they would drop stay (the enclosing net may read them). The If's
own declared inputs stay as they are (the rewriter refuses to edit an op whose nested nets
write blobs), so params only a removed branch chain read stay declared there, and
``remove-unused-params`` keeps them. An ONNX body's outputs are its own (it writes nothing
outside), and the values it reads from outside are left alone. When no body's pipeline changes
anything, the model is left exactly as it was (revision included).

Example (``default`` in the then-branch of an If writing ``y``)::

    then_net before                          then_net after
      #0 Shape(x@0) -> s@1                     #0 FC(x@0, w@0, b@0) -> y@1
      #1 Gather(s@1, zero@0) -> n@1
      #2 Concat(n@1, minus_one@0) -> shape@1, info@1
      #3 Reshape(x@0, shape@1) -> flat@1, old@1
      #4 FC(flat@1, w@0, b@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools.dialects import op_table
from graphtools.ir import Model, Net
from graphtools.nested import nested_access
from graphtools.pass_infra import Pass, PassManager, PassResult, register_pass

__all__ = ["InBranches"]


def _read_after(net: Net, index: int) -> set[str]:
    """Names the ops after ``index`` read (nested nets included), and the net's outputs."""
    names = set(net.external_outputs)
    for op in net.ops[index + 1 :]:
        names.update(op.inputs)
        names.update(nested_access(op).reads)
    return names


def _written(net: Net) -> list[str]:
    return list(dict.fromkeys(name for op in net for name in op.outputs))


@register_pass
@dataclass(frozen=True)
class InBranches(Pass):
    """Run ``pipeline`` in every control-flow body, recursively (see the module docstring).

    Options:
        pipeline: the pipeline spec to run in the bodies (``default``: the default pipeline of
            the model's dialect), written as at the top level
            (``in-branches{pipeline=remove-dead-ends,fold-constants}``).

    Stats: ``branches`` (bodies visited), ``branches_modified``.
    """

    name: ClassVar[str] = "in-branches"
    pipeline: str = "default"

    def __post_init__(self) -> None:
        # A typo in the inner pipeline is refused now, not on the first model with a body.
        PassManager.parse(self.pipeline)

    def call(self, model: Model) -> PassResult:
        """Rewrite each body in place through the pipeline's own edits."""
        table = op_table(model)
        stats = {"branches": 0, "branches_modified": 0}
        if not any(
            table.branch_nets(model.predict_net[i]) for i in model.predict_net.nested_op_indices()
        ):
            return PassResult(model, False, stats)  # no body: no pipeline to build
        manager = PassManager.parse(self.pipeline)
        before = model.revision
        state = model.snapshot()
        self._visit(model, model.predict_net, manager, stats)
        if not stats["branches_modified"]:
            model.restore(state)  # only the outputs widened for a while: nothing changed
        return PassResult(model, model.revision != before, stats)

    def _visit(self, model: Model, net: Net, manager: PassManager, stats: dict[str, int]) -> bool:
        """Run the pipeline in the bodies of ``net``'s ops; whether it changed one."""
        table = op_table(model)
        changed = False
        init = model.init_net
        for index, op in enumerate(net.ops):
            bodies = table.branch_nets(op)
            if not bodies:
                continue
            writes_outside = bool(nested_access(op).writes)
            keep = _read_after(net, index) | set(op.outputs) if writes_outside else set()
            for _, branch in bodies:
                stats["branches"] += 1
                declared = list(branch.external_outputs)
                outputs = set(declared)
                extra = [n for n in _written(branch) if n in keep and n not in outputs]
                if extra:
                    with branch.edit() as widen:
                        widen.set_external_outputs([*declared, *extra])
                # A copy of the init_net tells the passes which blobs are params; what they
                # drop from it is not dropped for real (the enclosing net may read it).
                body = Model(
                    branch,
                    None if init is None else init.copy(),
                    opset_imports=model.opset_imports,
                    header=model.header,
                )
                records = manager(body)
                if extra:
                    with branch.edit() as restore:
                        widened = set(extra)
                        restore.set_external_outputs(
                            [n for n in branch.external_outputs if n not in widened]
                        )
                inner = self._visit(body, branch, manager, stats)
                if inner or any(record.modified for record in records):
                    stats["branches_modified"] += 1
                    changed = True
        return changed

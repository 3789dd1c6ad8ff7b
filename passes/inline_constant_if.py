"""Replace an ONNX ``If`` whose condition is a constant by the nodes of the branch it takes, in
every graph of the model (control-flow bodies included), as onnxsim does.

The condition is a constant when it is an initializer (not one a user may feed) of the graph or
of a graph around it, as ``fold-constants`` leaves a condition computed from shapes or
constants (a scripted ``if x.dim() == 4``). The branch's nodes take the ``If``'s place, its
initializers and declared types join the graph, and the value the branch returns as its i-th
output is named as the ``If``'s i-th output: the node writing it writes that name instead, or,
when the branch returns a value it does not compute (an outer value, one of its initializers,
a value returned twice), an ``Identity`` copies it to that name, which ``remove-identity-ops``
then drops where it can.

The model names each value once: a value the branch defines that another graph of the model
also names (two Ifs whose branches both compute ``tmp``) gets a fresh name (``tmp_1``). An
``If`` stays when a body inside its branch reads a value whose name the inlining changes
(a body reads by name), and when its branch defines a name the ``If`` sees from outside (an
initializer ``k`` of the branch while the graph holds its own ``k``): the checker takes such
a model, and onnxruntime and onnx's reference evaluator then read the outer ``k`` in the
branch, so which value the branch means is not the model's to say.

Example (``c`` a true initializer)::

    before                                    after
      #0 If(c@0) -> y@1 {then: Relu(x) -> t}    #0 Relu(x@0) -> y@1
      #1 Sigmoid(y@1) -> z@1                    #1 Sigmoid(y@1) -> z@1
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set
from dataclasses import dataclass, field
from typing import ClassVar

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import NameSource, Scope, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.nested import nested_access
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import Tensor, ValueType

__all__ = ["InlineConstantIf"]


@dataclass
class _Inlined:
    """What one ``If`` becomes: the ops in its place and the values its graph gains."""

    ops: list[Op]
    initializers: dict[str, Tensor] = field(default_factory=dict)
    types: dict[str, ValueType] = field(default_factory=dict)


def _taken_branch(op: Op, flow: DataFlow) -> Net | None:
    """The branch a standard ``If`` with a one-element constant condition takes, else
    ``None``."""
    if op.type != "If" or op.domain not in (None, "", "ai.onnx") or not op.inputs:
        return None
    condition = flow.constant(op.inputs[0])
    if condition is None or condition.size != 1:
        return None
    wanted = "then_branch" if bool(condition.numpy().reshape(-1)[0]) else "else_branch"
    branches = dict(op.nested_nets())
    return branches.get(wanted)


def _defined_in(branch: Net) -> Counter[str]:
    """How often ``branch`` defines each name: its initializers and its nodes' outputs."""
    defined: Counter[str] = Counter(iter(branch.initializers))
    defined.update(name for op in branch for name in op.outputs if name)
    return defined


def _inline(
    op: Op, branch: Net, everywhere: Counter[str], names: NameSource, visible: Set[str]
) -> _Inlined | None:
    """The ops and values ``op`` (an ``If`` taking ``branch``) becomes; ``None`` when it must
    stay (see the module docstring). ``everywhere`` counts the names every graph of the model
    defines: a name of the branch also defined outside ``op``'s branches gets a fresh one
    from ``names``. ``visible``: the names ``op``'s graph and the graphs around it define,
    which the branch must not define again."""
    results = list(branch.external_outputs)
    if len(results) != len(op.outputs):
        return None
    defined = _defined_in(branch)
    if any(name in visible and name not in op.outputs for name in defined):
        return None  # the branch shadows a value of outside: what it reads is ambiguous
    written = {name for node in branch for name in node.outputs if name}
    renames: dict[str, str] = {}
    copies: list[tuple[str, str]] = []  # (value, If output) an Identity copies
    for result, target in zip(results, op.outputs, strict=True):
        if not target:
            continue
        if result in written and result not in renames:
            renames[result] = target
        else:
            copies.append((result, target))
    in_op: Counter[str] = Counter()
    for _, nested in op.nested_nets():
        in_op.update(_names_defined(nested))
    for name in defined:
        if name not in renames and everywhere[name] > in_op[name]:  # taken elsewhere
            renames[name] = names.fresh(name)
    ops = []
    for node in branch:
        if node.has_nested_nets() and not nested_access(node).reads.isdisjoint(renames):
            return None
        ops.append(
            node.replace(
                inputs=[renames.get(name, name) for name in node.inputs],
                outputs=[renames.get(name, name) for name in node.outputs],
            )
        )
    ops += [Op("Identity", [renames.get(value, value)], [target]) for value, target in copies]
    types = {
        renames.get(name, name): value_type
        for name, value_type in branch.types.items()
        if name in defined and name not in results
    }
    initializers = {renames.get(name, name): t for name, t in branch.initializers.items()}
    return _Inlined(ops, initializers, types)


@register_pass
@dataclass(frozen=True)
class InlineConstantIf(Pass):
    """Replace an ``If`` on a constant condition by its branch (see the module docstring).

    Stats: ``ifs_inlined``.
    """

    name: ClassVar[str] = "inline-constant-if"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """For each graph, innermost first: the ``If`` ops on constants, then one edit."""
        stats = {"ifs_inlined": 0}
        table = op_table(model)
        all_scopes = scopes(model.predict_net, table)
        if len(all_scopes) == 1:  # no body anywhere: no If to look at
            return PassResult(model, False, stats)
        everywhere: Counter[str] | None = None
        names = NameSource()
        changed = False
        for scope in all_scopes:
            net = scope.net
            candidates = [i for i in net.nested_op_indices() if net[i].type == "If"]
            if not candidates:
                continue
            flow = DataFlow(scope)
            taken = {i: branch for i in candidates if (branch := _taken_branch(net[i], flow))}
            if not taken:
                continue
            if everywhere is None:
                everywhere = _names_defined(model.predict_net)
                names.reserve(model_names(model.predict_net))
            visible = _visible_in(scope)
            plans = {
                i: plan
                for i, branch in taken.items()
                if (plan := _inline(net[i], branch, everywhere, names, visible))
            }
            if not plans:
                continue
            with net.edit() as edit:
                for index, plan in plans.items():
                    edit.expand(index, plan.ops)
                    for name, tensor in plan.initializers.items():
                        edit.set_initializer(name, tensor)
                    for name, value_type in plan.types.items():
                        edit.set_type(name, value_type)
            changed = edit.changed or changed
            stats["ifs_inlined"] += len(plans)
        return PassResult(model, changed, stats)


def _visible_in(scope: Scope) -> set[str]:
    """The names a body nested in ``scope``'s net sees from outside: what the graphs around
    the net define, and the net's own inputs, initializers and op outputs."""
    net = scope.net
    visible = set(scope.outer_names)
    visible.update(net.external_inputs)
    visible.update(net.initializers)
    visible.update(name for op in net for name in op.outputs if name)
    return visible


def _names_defined(net: Net) -> Counter[str]:
    """How often each name is defined in ``net`` and every graph nested in it: graph inputs,
    initializers and node outputs."""
    defined: Counter[str] = Counter(net.external_inputs)
    defined.update(iter(net.initializers))
    defined.update(name for op in net for name in op.outputs if name)
    for index in net.nested_op_indices():
        for _, nested in net[index].nested_nets():
            defined.update(_names_defined(nested))
    return defined

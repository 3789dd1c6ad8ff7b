"""Fold constants into params, keeping a dynamic batch dimension dynamic.

ONNX models, every graph (control-flow bodies too, which also read the initializers of the
graphs enclosing them): every op the model's op table may fold (a known, deterministic op,
``Constant``, ``ConstantOfShape`` and ``Shape``/``Size`` included) whose inputs are all constants
is evaluated by onnxruntime (``onnx.reference`` where it lacks a kernel), the whole constant
sub-graph in one run; the values the rest of the graph reads become initializers and the ops
go, with the ops left without readers. Constants are initializers (not one a user may feed:
from IR version 4 an initializer also listed as a graph input is a default that onnxruntime
replaces by the value fed, so no pass bakes it in), outputs of ops folded with them, and in
the main graph the shape values ONNX shape inference with data propagation knows
entirely: ``Shape``/``Size`` of static dims, and the arithmetic chains on them (``Gather`` of
the static dim 1 of an ``N x 3 x H x W`` input is ``3``). A Reshape target it knows but for one
dim becomes a constant with ``-1`` there, and a dim it knows to be the input's own dim at the
same position (the dynamic batch of ``x.view(x.size(0), -1)``) becomes ``0``, so a dynamic
batch stays dynamic (onnxsim#526); ``allowzero`` goes when the target holds no other zero. A
value bigger than ``max_bytes`` and than the constants it was computed from (a
``ConstantOfShape`` or ``Expand`` blowing a scalar up) is not folded, so a fold never makes the
file bigger by more than that; graph outputs stay computed, and so do values that are no
tensors (sequences). A ``DequantizeLinear`` of a constant stays too: it is how a quantized
(QDQ) model stores an integer weight for the back-ends that run it as such. Caffe2 models:

Exporters compute shapes at run time: ``x.view(x.size(0), -1)`` becomes
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``. Two rewrites remove such chains:

* **Constant ops**: an op of a foldable type (``Gather``, ``ExpandDims``, ``Squeeze``,
  ``Concat``, ``Cast``, integer ``Add``/``Sub``/``Mul``/``Div``) whose inputs are all known
  constants (``GivenTensor*Fill`` params of the init_net, or outputs of ops folded before) is
  evaluated now; its output becomes a new param and the op goes.
* **Reshape shapes with dynamic dims**: a Reshape whose shape is a ``Concat`` of constants and
  of dims of the Reshape's own input taken at the same position (``Gather(Shape(x), i)`` at
  position ``i``) gets a constant shape with ``0`` there: Caffe2's Reshape (like ONNX's with
  ``allowzero=0``) copies the input's dim for a ``0``, so the batch stays whatever it is at run
  time instead of being baked in (onnxsim folds such shapes the same way, with ``-1``).

Ops left without readers by a rewrite (the rest of the chain) are removed. Only blobs written
once, read by no nested net and not external outputs are folded; everything goes through one
edit of each net. Example (``x`` is a ``N x 4 x 4`` input)::

    before                                   after (new param shape_folded = [0, -1])
      #0 Shape(x@0) -> s@1                     #0 Reshape(x@0, shape_folded@0) -> y@1, o@1
      #1 Gather(s@1, zero@0) -> n@1            #1 MatMul(y@1, w@0) -> z@1
      #2 ExpandDims(n@1) -> n1@1
      #3 Concat(n1@1, minus_one@0) -> shape@1, info@1
      #4 Reshape(x@0, shape@1) -> y@1, o@1
      #5 MatMul(y@1, w@0) -> z@1
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.constants import constant_ops, needed_outputs
from graphtools.analysis.scopes import NameSource, Scope, model_names, scopes
from graphtools.dialects import OpTable, op_table
from graphtools.errors import PipelineSpecError, UnsupportedOpError
from graphtools.ir import Model, Net, Op
from graphtools.nested import nested_accesses
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.ssa import VersionedBlob
from graphtools.values import ArrayTensor, Tensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["FoldConstants"]

_FILL_DTYPES: dict[str, Any] = {
    "GivenTensorFill": np.float32,
    "GivenTensorDoubleFill": np.float64,
    "GivenTensorIntFill": np.int32,
    "GivenTensorInt64Fill": np.int64,
    "GivenTensorInt16Fill": np.int16,
    "GivenTensorBoolFill": np.bool_,
}
_FILL_FOR: dict[Any, str] = {np.dtype(v): k for k, v in _FILL_DTYPES.items()}
_CAFFE2_DTYPES = {
    1: np.float32,
    2: np.int32,
    5: np.bool_,
    9: np.int16,
    10: np.int64,
    13: np.float64,
}


def _ints(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, tuple) else (value,))]


def _fill_value(op: Op) -> np.ndarray | None:
    dtype = _FILL_DTYPES.get(op.type)
    if dtype is None or op.inputs or len(op.outputs) != 1 or op.has_arg("dtype"):
        return None
    values = op.arg("values", ())
    values = values if isinstance(values, tuple) else (values,)
    array = np.asarray(values, dtype=dtype)
    shape = _ints(op.arg("shape")) if op.has_arg("shape") else [array.size]
    if int(np.prod(shape)) != array.size:
        return None
    return array.reshape(shape)


def _binary(fn: Callable[[Any, Any], Any]) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
    def evaluate(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
        a, b = inputs
        if op.arg("broadcast", 0) or not np.issubdtype(np.result_type(a, b), np.integer):
            raise ValueError("only numpy-broadcast integer arithmetic is folded")
        return np.asarray(fn(a, b)).astype(np.result_type(a, b))

    return evaluate


def _gather(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    return np.take(inputs[0], inputs[1], axis=int(op.arg("axis", 0)))


def _expand_dims(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    x = inputs[0]
    for dim in sorted(_ints(op.arg("dims"))):
        x = np.expand_dims(x, dim)
    return x


def _squeeze(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    dims = _ints(op.arg("dims"))
    if not dims:
        raise ValueError("Squeeze without dims")
    return np.squeeze(inputs[0], axis=tuple(dims))


def _concat(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    if op.arg("add_axis", 0) or not op.has_arg("axis"):
        raise ValueError("only Concat with an explicit axis is folded")
    return np.concatenate(inputs, axis=int(op.arg("axis")))


def _cast(op: Op, inputs: list[np.ndarray]) -> np.ndarray:
    dtype = _CAFFE2_DTYPES.get(int(op.arg("to", -1))) if isinstance(op.arg("to"), int) else None
    if dtype is None:
        raise ValueError("unsupported Cast target")
    return inputs[0].astype(dtype)


_EVALUATORS: dict[str, Callable[[Op, list[np.ndarray]], np.ndarray]] = {
    "Gather": _gather,
    "ExpandDims": _expand_dims,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Cast": _cast,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(lambda a, b: np.trunc(np.true_divide(a, b))),
}


@dataclass
class _Plan:
    """What the pass found: new params, rewired reads and ops to remove."""

    params: dict[str, np.ndarray]
    inputs: dict[int, list[str]]
    removed: set[int]


class _Folder:
    def __init__(self, model: Model) -> None:
        self.net = model.predict_net
        self.view = self.net.ssa()
        self.init = model.init_net
        names = set(self.net.written_names()) | set(self.net.external_inputs)
        if self.init is not None:
            names |= self.init.written_names()
        self.taken = names
        self.writes = Counter(name for op in self.net for name in op.outputs)
        self.nested: set[str] = set()
        for access in nested_accesses(self.net).values():
            self.nested |= access.names
        self.outputs = set(self.net.external_outputs)
        self.known: dict[VersionedBlob, np.ndarray] = {}
        if self.init is not None:
            for op in self.init:
                value = _fill_value(op)
                if value is not None and self.writes[op.outputs[0]] == 0:
                    self.known[(op.outputs[0], 0)] = value
        self.plan = _Plan({}, {}, set())

    def fresh(self, hint: str) -> str:
        name, suffix = hint, 0
        while name in self.taken:
            suffix += 1
            name = f"{hint}_{suffix}"
        self.taken.add(name)
        return name

    def foldable_output(self, name: str) -> bool:
        return self.writes[name] == 1 and name not in self.nested and name not in self.outputs

    def fold_constant_ops(self) -> None:
        for index, op in enumerate(self.net):
            evaluate = _EVALUATORS.get(op.type)
            ins, outs = self.view.ssa[index]
            if evaluate is None or not ins or not all(b in self.known for b in ins):
                continue
            if not self.foldable_output(op.outputs[0]):
                continue
            if any(self.net.uses(b) for b in outs[1:]) or any(
                not self.foldable_output(n) for n in op.outputs[1:]
            ):
                continue
            try:
                value = evaluate(op, [self.known[b] for b in ins])
            except (ValueError, IndexError, TypeError):
                continue
            if np.dtype(value.dtype) not in _FILL_FOR:
                continue
            self.known[outs[0]] = value
            self.replace_value(outs[0], value, f"{op.outputs[0]}_folded")
            self.plan.removed.add(index)

    def replace_value(self, blob: VersionedBlob, value: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.plan.params[name] = value
        for use in self.net.uses(blob):
            inputs = self.plan.inputs.setdefault(use.op, list(self.net[use.op].inputs))
            inputs[use.position] = name
        return name

    def dim_source(self, blob: VersionedBlob) -> tuple[VersionedBlob, int] | None:
        """``(x, i)`` when ``blob`` is dim ``i`` of ``x`` as a 1-element vector."""
        producer = self.net.producer(blob)
        if producer is None:
            return None
        op = self.net[producer]
        ins = self.view.ssa[producer][0]
        if op.type == "ExpandDims" and _ints(op.arg("dims")) == [0]:
            return self.scalar_dim(ins[0])
        if op.type == "Gather" and int(op.arg("axis", 0)) == 0 and ins[1] in self.known:
            index = self.known[ins[1]]
            if index.shape == (1,):
                return self.shape_dim(ins[0], int(index[0]))
        return None

    def scalar_dim(self, blob: VersionedBlob) -> tuple[VersionedBlob, int] | None:
        producer = self.net.producer(blob)
        if producer is None or self.net[producer].type != "Gather":
            return None
        op, ins = self.net[producer], self.view.ssa[producer][0]
        index = self.known.get(ins[1])
        if int(op.arg("axis", 0)) != 0 or index is None or index.shape != ():
            return None
        return self.shape_dim(ins[0], int(index))

    def shape_dim(self, blob: VersionedBlob, index: int) -> tuple[VersionedBlob, int] | None:
        producer = self.net.producer(blob)
        if producer is None or self.net[producer].type != "Shape":
            return None
        op = self.net[producer]
        if op.has_arg("axes") or index < 0:
            return None
        return self.view.ssa[producer][0][0], index

    def fold_reshape_shapes(self) -> None:
        for index, op in enumerate(self.net):
            if op.type != "Reshape" or len(op.inputs) != 2 or index in self.plan.inputs:
                continue
            data, shape = self.view.ssa[index][0]
            producer = self.net.producer(shape)
            if producer is None or self.net[producer].type != "Concat":
                continue
            concat = self.net[producer]
            if int(concat.arg("axis", -1)) != 0 or concat.arg("add_axis", 0):
                continue
            dims: list[int] = []
            for piece in self.view.ssa[producer][0]:
                if piece in self.known and self.known[piece].ndim == 1:
                    dims.extend(int(v) for v in self.known[piece])
                    continue
                source = self.dim_source(piece)
                if source is None or source != (data, len(dims)):
                    dims = []
                    break
                dims.append(0)
            if not dims or dims.count(-1) > 1 or 0 not in dims:
                continue
            hint = f"{op.inputs[1]}_folded"
            name = self.fresh(hint)
            self.plan.params[name] = np.asarray(dims, dtype=np.int64)
            self.plan.inputs[index] = [op.inputs[0], name]

    def remove_dead_chain(self) -> None:
        """Remove ops the rewrites left without readers, walking producers backwards."""
        pending = [
            b
            for index, new in self.plan.inputs.items()
            for b, name in zip(self.view.ssa[index][0], self.net[index].inputs, strict=True)
            if name not in new
        ]
        pending += [b for index in self.plan.removed for b in self.view.ssa[index][0]]
        while pending:
            blob = pending.pop()
            producer = self.net.producer(blob)
            if producer is None or producer in self.plan.removed:
                continue
            outs = self.view.ssa[producer][1]
            op = self.net[producer]
            if op.has_nested_nets() or any(not self.foldable_output(n) for n in op.outputs):
                continue
            if all(self.dead(b) for b in outs):
                self.plan.removed.add(producer)
                pending.extend(self.view.ssa[producer][0])

    def dead(self, blob: VersionedBlob) -> bool:
        for use in self.net.uses(blob):
            if use.op in self.plan.removed:
                continue
            new = self.plan.inputs.get(use.op)
            if new is not None and new[use.position] != blob[0]:
                continue
            return False
        return True


def _fill_op(name: str, value: np.ndarray) -> Op:
    values = value.reshape(-1).tolist()
    return Op(
        _FILL_FOR[np.dtype(value.dtype)],
        [],
        [name],
        args={"shape": list(value.shape), "values": values},
    )


@register_pass
@dataclass(frozen=True)
class FoldConstants(Pass):
    """Fold constants (see the module docstring): ONNX constant sub-graphs into initializers;
    Caffe2 shape arithmetic and Reshape shapes with dynamic dims into params.

    Options:
        max_bytes: an ONNX value bigger than this and than the constants it was computed
            from stays computed.

    Adds params (init_net fills and predict_net external inputs; ONNX initializers), hence
    ``changes_interface``. Stats: ``ops_folded`` (constant ops evaluated), ``reshapes_folded``,
    ``ops_removed``, ``params_added``.
    """

    name: ClassVar[str] = "fold-constants"
    changes_interface: ClassVar[bool] = True
    reads_ssa: ClassVar[bool] = True
    max_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if isinstance(self.max_bytes, int) and self.max_bytes < 0:
            raise PipelineSpecError(
                f"fold-constants{{max_bytes={self.max_bytes}}}: a size is 0 or more bytes"
            )

    def call(self, model: Model) -> PassResult:
        """Plan on the nets as they are, then apply it in one edit per net."""
        if model.dialect == ONNX:
            return _fold_onnx(model, cast("OnnxOpTable", op_table(model)), self.max_bytes)
        folder = _Folder(model)
        folder.fold_constant_ops()
        folded = len(folder.plan.removed)
        reshapes_before = set(folder.plan.inputs)
        folder.fold_reshape_shapes()
        reshapes = len(set(folder.plan.inputs) - reshapes_before)
        folder.remove_dead_chain()
        plan = folder.plan
        stats = {
            "ops_folded": folded,
            "reshapes_folded": reshapes,
            "ops_removed": len(plan.removed),
            "params_added": 0,
        }
        live_params = {
            name
            for index, inputs in plan.inputs.items()
            if index not in plan.removed
            for name in inputs
            if name in plan.params
        }
        if not plan.removed and not live_params:
            return PassResult(model, False, stats)
        if model.init_net is None:
            model.init_net = Net(name=f"{model.predict_net.name or 'net'}_init")
        init = model.init_net
        new = [name for name in plan.params if name in live_params]
        with init.edit() as init_edit:
            init_edit.insert(len(init), [_fill_op(n, plan.params[n]) for n in new])
        net = model.predict_net
        with net.edit() as edit:
            for index in plan.removed:
                edit.remove(index)
            for index, inputs in plan.inputs.items():
                if index not in plan.removed:
                    edit.set_op(index, net[index].replace(inputs=inputs))
            if net.external_inputs:
                edit.set_external_inputs([*net.external_inputs, *new])
        stats["params_added"] = len(new)
        return PassResult(model, True, stats)


_SHAPE_ELEM_TYPES = {6: np.int32, 7: np.int64}
"""ONNX element types of the integer tensors shapes are computed with, and their dtypes."""
_LONGEST_SHAPE_VALUE = 64
"""Longer integer vectors are data, not shapes: their values are not asked of inference."""
_SCALAR = -1
"""The length ``OnnxOpTable.shape_values`` takes for a scalar."""
_LARGEST_PLACEHOLDER = 1 << 24
"""Elements of the largest zeros a static ``Shape`` is evaluated on."""


@dataclass
class _Propagated:
    """What data propagation knows of the main graph's shape values.

    Attributes:
        values: the values it knows entirely (name -> array).
        entries: the Reshape targets it knows in part (name -> entries: int, symbol or None).
        types: the types inference gives the main graph's values.
        placeholders: zeros of the static shape of each value a ``Shape``/``Size`` reads:
            such an op is evaluated on them (it reads nothing else of its input), with the
            other constants, in one run; data propagation knows those values too, but only
            from the opsets where the ops propagate data (``Shape`` 15 on).
    """

    values: dict[str, np.ndarray]
    entries: dict[str, tuple[Any, ...]]
    types: Mapping[str, ValueType]
    placeholders: dict[str, np.ndarray]


@dataclass
class _OnnxPlan:
    """What folding one ONNX net changes: ops removed, the values they computed that others
    read (now initializers), Reshapes reading a new constant target."""

    removed: set[int]
    constants: dict[str, np.ndarray]
    reshapes: dict[int, tuple[str, np.ndarray]]
    folded: int


def _fold_onnx(model: Model, table: OnnxOpTable, max_bytes: int) -> PassResult:
    """The ONNX folding of ``FoldConstants`` (module docstring): each control-flow body, then
    the main graph, in one edit each."""
    stats = {"ops_folded": 0, "reshapes_folded": 0, "ops_removed": 0, "params_added": 0}
    names = NameSource(model_names(model.predict_net))
    changed = False
    for scope in scopes(model.predict_net, table):
        known = _propagated(model, table) if scope.depth == 0 else None
        plan = _plan_onnx(scope, table, max_bytes, known, names)
        if not (plan.removed or plan.reshapes):
            continue
        net = scope.net
        with net.edit() as edit:
            for index in sorted(plan.removed):
                edit.remove(index)
            for name, value in plan.constants.items():
                edit.replace_with_constant((name, 1), ArrayTensor(value))
            for index, (name, target) in plan.reshapes.items():
                op = net[index]
                if op.arg("allowzero", 0) and 0 in target:
                    op = op.without_arg("allowzero")
                edit.set_initializer(name, ArrayTensor(target))
                edit.set_op(index, op.replace(inputs=(op.inputs[0], name, *op.inputs[2:])))
        changed = edit.changed or changed
        stats["ops_folded"] += plan.folded
        stats["reshapes_folded"] += len(plan.reshapes)
        stats["ops_removed"] += len(plan.removed)
        stats["params_added"] += len(plan.constants) + len(plan.reshapes)
    return PassResult(model, changed, stats)


def _plan_onnx(
    scope: Scope,
    table: OpTable,
    max_bytes: int,
    known: _Propagated | None,
    names: NameSource,
) -> _OnnxPlan:
    """Fold the constant ops of one net, the values data propagation knows (main graph), and
    the Reshape targets it knows in part."""
    net = scope.net
    outer = scope.outer_constants
    propagated = {} if known is None else _producible(net, known.values)
    placeholders = {} if known is None else known.placeholders
    own = scope.constants  # not an initializer a user may feed
    held = set(own).union(outer)

    def foldable(op: Op) -> bool:  # a placeholder is read for its shape alone
        shaped = table.shape_only(op) or placeholders.keys().isdisjoint(op.inputs)
        return shaped and table.foldable(op, net)

    constant = held | set(propagated) | set(placeholders)
    found = constant_ops(net, foldable, constant)
    ops = [net[i] for i in found.ops]
    feeds: dict[str, np.ndarray] = {}
    for name in found.inputs:
        if name in propagated or name in placeholders:
            feeds[name] = propagated.get(name, placeholders.get(name))  # type: ignore[assignment]
        else:
            tensor = own.get(name)
            feeds[name] = (tensor if tensor is not None else outer[name]).numpy()
    values: dict[str, np.ndarray] = {**placeholders, **propagated}
    if ops:
        wanted = [name for op in ops for name in op.outputs if name]
        values.update(_evaluate(table, ops, feeds, wanted))
    folded = _within_size(net, found.ops, values, constant, outer, max_bytes)
    removed = folded | {i for i, op in enumerate(net) if op.outputs and op.outputs[0] in propagated}
    graph_outputs = set(net.external_outputs)
    removed = {i for i in removed if not graph_outputs.intersection(net[i].outputs)}
    reshapes: dict[int, tuple[str, np.ndarray]] = {}
    if known is not None:
        for index, target in _reshape_targets(net, known, removed, values).items():
            reshapes[index] = (names.fresh(f"{net[index].inputs[1]}_folded"), target)
    dropped = [net[index].inputs[1] for index in reshapes]
    removed |= _dead_producers(net, removed, dropped, lambda op: table.foldable(op, net))
    rewired = set(dropped)  # read only by the Reshapes given a new target
    constants = {name: values[name] for name in needed_outputs(net, removed) if name not in rewired}
    return _OnnxPlan(removed, constants, reshapes, len(folded))


def _propagated(model: Model, table: OnnxOpTable) -> _Propagated | None:
    """What data propagation knows of the integer values computed from ``Shape``/``Size`` ops
    of the main graph (``None`` when it has no such op)."""
    net = model.predict_net
    if not any(map(table.shape_only, net)):
        return None
    types = table.infer_types(model)
    placeholders = _placeholders(net, table, types)
    derived: set[str] = set()
    candidates: dict[str, tuple[int, int]] = {}
    targets: dict[str, bool] = {}
    for op in net:
        if op.type == "Reshape" and len(op.inputs) > 1 and op.inputs[1] in candidates:
            targets[op.inputs[1]] = True
        if not (table.shape_only(op) or any(name in derived for name in op.inputs)):
            continue
        for name in op.outputs:
            value_type = types.get(name)
            if value_type is None or value_type.kind != "tensor" or value_type.shape is None:
                continue
            if value_type.elem_type not in _SHAPE_ELEM_TYPES or len(value_type.shape) > 1:
                continue
            length = value_type.shape[0] if value_type.shape else _SCALAR
            if isinstance(length, int) and length <= _LONGEST_SHAPE_VALUE:
                derived.add(name)
                candidates[name] = (value_type.elem_type, length)
    dynamic = any(
        table.shape_only(op) and op.inputs and op.inputs[0] not in placeholders for op in net
    )
    entries = table.shape_values(model, candidates, targets) if dynamic else {}
    values: dict[str, np.ndarray] = {}
    for name, found in entries.items():
        if all(isinstance(entry, int) for entry in found):
            elem_type, length = candidates[name]
            array = np.asarray(found, dtype=_SHAPE_ELEM_TYPES[elem_type])
            values[name] = array.reshape(()) if length == _SCALAR else array
    partial = {name: found for name, found in entries.items() if name in targets}
    return _Propagated(values, partial, types, placeholders)


def _placeholders(
    net: Net, table: OnnxOpTable, types: Mapping[str, ValueType]
) -> dict[str, np.ndarray]:
    """Zeros of the static shape of each value a ``Shape``/``Size`` of ``net`` reads."""
    found: dict[str, np.ndarray] = {}
    for op in net:
        if not (table.shape_only(op) and op.inputs and op.inputs[0]):
            continue
        name = op.inputs[0]
        value_type = types.get(name)
        if name in net.initializers or value_type is None or value_type.shape is None:
            continue
        dims = [d for d in value_type.shape if isinstance(d, int)]
        if len(dims) == len(value_type.shape) and np.prod(dims) <= _LARGEST_PLACEHOLDER:
            found[name] = np.zeros(dims, np.float32)
    return found


def _producible(net: Net, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The known ``values`` that can replace the op computing them: every output of that op
    that is read is known too, and none is a graph output."""
    outputs = set(net.external_outputs)
    kept: dict[str, np.ndarray] = {}
    for op in net:
        if not any(name in values for name in op.outputs):
            continue
        if op.has_nested_nets() or outputs.intersection(op.outputs):
            continue
        written = [name for name in op.outputs if name]
        if all(name in values for name in written):
            kept.update((name, values[name]) for name in written)
    return kept


def _evaluate(
    table: OpTable, ops: list[Op], feeds: dict[str, np.ndarray], wanted: list[str]
) -> dict[str, np.ndarray]:
    """The ``wanted`` outputs of ``ops`` on ``feeds``: all in one run, or op by op when that
    fails (an op the runtimes cannot evaluate, or whose output is no tensor, is left out
    with what depends on it)."""
    try:
        return table.evaluate_ops(ops, feeds, wanted)
    except UnsupportedOpError:
        pass
    values = dict(feeds)
    for op in ops:
        reads = [name for name in op.inputs if name]
        if not all(name in values for name in reads):
            continue
        try:
            results = table.evaluate(op, [values[name] if name else None for name in op.inputs])
        except UnsupportedOpError:
            continue
        values.update(zip([name for name in op.outputs if name], results, strict=True))
    return {name: values[name] for name in wanted if name in values}


def _within_size(
    net: Net,
    ops: tuple[int, ...],
    values: dict[str, np.ndarray],
    constant: set[str],
    outer: Mapping[str, Tensor],
    max_bytes: int,
) -> set[int]:
    """The constant ops whose outputs are no bigger than ``max_bytes`` or than the constants
    they read, and whose inputs all stay constant (an op fed by one left computed stays)."""
    constant = set(constant)
    folded: set[int] = set()
    for index in ops:
        op = net[index]
        reads = [name for name in op.inputs if name]
        written = [name for name in op.outputs if name]
        if not all(name in constant for name in reads) or not all(n in values for n in written):
            continue
        read_bytes = 0
        for name in reads:
            tensor = net.initializers.get(name) or outer.get(name)
            read_bytes += tensor.nbytes if tensor is not None else np.asarray(values[name]).nbytes
        budget = max(max_bytes, read_bytes)
        if any(np.asarray(values[name]).nbytes > budget for name in written):
            continue
        folded.add(index)
        constant.update(written)
    return folded


def _reshape_targets(
    net: Net, known: _Propagated, removed: set[int], values: dict[str, np.ndarray]
) -> dict[int, np.ndarray]:
    """Reshapes whose target data propagation knows but for one dim, or but for dims it
    copies from the same position of the input: ``{op index: constant target}``, the dim
    left dynamic as ``-1``, the copied ones as ``0`` (``allowzero`` unset)."""
    found: dict[int, np.ndarray] = {}
    for index, op in enumerate(net):
        if op.type != "Reshape" or len(op.inputs) != 2 or index in removed:
            continue
        entries = known.entries.get(op.inputs[1])
        if entries is None or op.inputs[1] in values or op.inputs[1] in net.initializers:
            continue
        data = known.types.get(op.inputs[0])
        dims = () if data is None or data.shape is None else data.shape
        # With allowzero set a 0 is a size, not a copy; a target without a static 0 reads the
        # same without it (a copied dim of size 0 is 0 either way), so it may go.
        copies = not op.arg("allowzero", 0) or 0 not in entries
        target = _reshape_target(entries, dims, copies=copies)
        if target is not None:
            found[index] = np.asarray(target, dtype=np.int64)
    return found


def _reshape_target(
    entries: tuple[Any, ...], dims: tuple[Any, ...], *, copies: bool
) -> list[int] | None:
    """The constant Reshape target for ``entries`` (see ``_reshape_targets``), or ``None``."""
    target: list[int | None] = []
    for position, entry in enumerate(entries):
        if isinstance(entry, int):
            target.append(entry)
        elif copies and isinstance(entry, str) and position < len(dims) and dims[position] == entry:
            target.append(0)
        else:
            target.append(None)
    free = [position for position, entry in enumerate(target) if entry is None]
    if len(free) > 1 or (free and -1 in target):
        return None
    if free:
        target[free[0]] = -1
    return [int(entry) for entry in target if entry is not None]


def _dead_producers(
    net: Net, removed: set[int], dropped: list[str], pure: Callable[[Op], bool]
) -> set[int]:
    """Ops left without readers once ``removed`` go and the reads ``dropped`` (one each) are
    gone, recursively: pure ops none of whose outputs is read, by an op, a nested net or as a
    graph output."""
    readers: Counter[str] = Counter(name for op in net for name in op.inputs)
    for access in nested_accesses(net).values():
        readers.update(access.reads)
    readers.update(net.external_outputs)
    producer = {name: index for index, op in enumerate(net) for name in op.outputs if name}
    pending = [name for index in removed for name in net[index].inputs]
    pending.extend(dropped)
    dead: set[int] = set()
    while pending:
        name = pending.pop()
        readers[name] -= 1
        index = producer.get(name)
        if index is None or index in removed or index in dead:
            continue
        op = net[index]
        if any(readers[output] > 0 for output in op.outputs if output) or not pure(op):
            continue
        dead.add(index)
        pending.extend(op.inputs)
    return dead

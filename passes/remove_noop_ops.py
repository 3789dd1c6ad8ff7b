"""Remove the ops of an ONNX model that give back their input unchanged, in every graph
(control-flow bodies included), and the optional inputs that hold their default value.

An op is a no-op when, on the types shape inference gives and the constants it reads:

* ``Identity``, and ``Dropout`` in inference mode (the op table's ``passes_through``);
* ``Transpose`` by the identity permutation;
* ``Reshape`` to the shape its input has (each target entry copies, repeats or, once, infers
  the input's dim at the same position);
* ``Cast`` to the type its input has;
* ``Pad`` by zeros on every side, ``Slice`` taking every element of each axis it names
  (start 0, step 1, end past the dim), ``Expand`` to a shape its input already broadcasts to
  without growing, ``Tile`` by repeats of 1, ``Concat`` of one input, ``Flatten`` at axis 1 of
  a value of rank 2;
* ``MaxPool``/``AveragePool`` whose windows are single elements (kernel, strides 1, no pads,
  one output);
* an idempotent op applied again to its own output: ``Relu(Relu(x))``, ``Floor``, ``Ceil``,
  ``Round``, ``Sign``, ``Abs``, ``Clip`` to the same bounds (the op table's ``repeats``;
  exact; onnxsim drops these too);
* ``ReduceSum``/``Mean``/``Max``/``Min``/``Prod`` keeping dims over axes all of size 1 (or
  over no axes with ``noop_with_empty_axes``): the sum, mean, ... of one element is it;
* ``Add``/``Sub`` of a constant of zeros and ``Mul``/``Div`` by a constant of ones, given as
  the second input, that broadcasts to the first without growing it (a GroupNorm's default
  zero bias in a dynamo export). Exact, but for ``-0.0 + 0.0``, which is ``+0.0`` (equal;
  onnxsim and onnxoptimizer drop these too).

Each goes as ``remove-identity-ops`` drops an identity (``graphtools.analysis.identities``):
its readers read its input, and a graph output keeps its name. An op returning a value of an
enclosing graph from a body stays: onnxruntime refuses a body output that is an outer value
(onnx-ir's cleanup removes such an ``Identity`` and breaks the model).

The recurrent ops' initial states (``initial_h``, ``initial_c`` of ``LSTM``, ``GRU``, ``RNN``)
and bias ``B`` default to zeros: an input that is all zeros (a zero initializer, a
``ConstantOfShape`` of zero, an ``Expand``, ``Slice``, ``Reshape``, ... of either) is left
out, and what computed it dies
(``remove-dead-ends`` drops it). The legacy exporter builds a zero state from the input's batch
size; without it the recurrent op needs no batch-sized constant.

Example::

    before                                   after
      #0 Relu(x@0) -> a@1                      #0 Relu(x@0) -> y@1
      #1 Transpose(a@1) -> t@1 {perm=[0,1]}
      #2 Cast(t@1) -> y@1 {to=1}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.identities import find_identity_ops
from graphtools.analysis.scopes import scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["RemoveNoopOps"]

_NOOP_TYPES = frozenset(
    {
        "Identity",
        "Dropout",
        "Transpose",
        "Reshape",
        "Cast",
        "Pad",
        "Slice",
        "Expand",
        "Tile",
        "Flatten",
        "Concat",
        "MaxPool",
        "AveragePool",
        "Add",
        "Sub",
        "Mul",
        "Div",
        *("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"),
    }
)
_RECURRENT_DEFAULTS = {"LSTM": (3, 5, 6), "GRU": (3, 5), "RNN": (3, 5)}
"""Recurrent op types and the positions of their inputs whose default is zeros."""
_FULL = 1 << 62
"""A Slice end at least this large reaches past any dim."""


class _NoopCheck:
    """Decides which ops of one graph give back their input."""

    def __init__(
        self, flow: DataFlow, types: Callable[[], Mapping[str, ValueType]], table: OnnxOpTable
    ) -> None:
        self.flow = flow
        self._types = types
        self.table = table
        self.opset = table.opset() or 1

    def shape(self, name: str) -> tuple[int | str | None, ...] | None:
        value_type = self._types().get(name)
        tensor = self.flow.constant(name)
        if tensor is not None:
            return tensor.shape
        if value_type is None or value_type.kind != "tensor" or value_type.shape is None:
            return None
        return value_type.shape

    def array(self, name: str) -> np.ndarray | None:
        tensor = self.flow.constant(name)
        return None if tensor is None else tensor.numpy()

    def ints(self, op: Op, position: int, attribute: str) -> list[int] | None:
        """Integers an op takes as an input (newer opsets) or an attribute (older)."""
        if len(op.inputs) > position and op.inputs[position]:
            array = self.array(op.inputs[position])
            return None if array is None else [int(v) for v in array.reshape(-1)]
        value = op.arg(attribute)
        return None if value is None else [int(v) for v in value]

    def __call__(self, op: Op) -> bool:
        if op.domain not in (None, "", "ai.onnx") or not op.inputs or not op.inputs[0]:
            return False
        if op.type in ("Identity", "Dropout"):
            return self.table.passes_through(op, self.flow.net)
        if len(op.outputs) != 1:
            return op.type in ("MaxPool",) and self._pool(op) and not any(op.outputs[1:])
        if op.type in self.table.idempotent_types():
            producer = self.flow.producer(op.inputs[0])
            return producer is not None and self.table.repeats(op, self.flow.net[producer])
        check = getattr(self, f"_{op.type.lower()}", None)
        return bool(check is not None and check(op))

    def _transpose(self, op: Op) -> bool:
        perm = op.arg("perm")
        if perm is None:
            shape = self.shape(op.inputs[0])
            return shape is not None and len(shape) <= 1
        return list(perm) == list(range(len(perm)))

    def _reshape(self, op: Op) -> bool:
        shape = self.shape(op.inputs[0])
        if shape is None or len(op.inputs) < 2:
            return False
        target = self.array(op.inputs[1])
        if target is None or target.ndim != 1 or len(target) != len(shape):
            return False
        copies = not op.arg("allowzero", 0)
        unmatched = []
        for position, (entry, dim) in enumerate(zip(target.tolist(), shape, strict=True)):
            if (entry == 0 and copies) or (isinstance(dim, int) and entry == dim):
                continue
            unmatched.append((position, entry))
        return not unmatched or (len(unmatched) == 1 and unmatched[0][1] == -1)

    def _cast(self, op: Op) -> bool:
        value_type = self._types().get(op.inputs[0])
        tensor = self.flow.constant(op.inputs[0])
        if tensor is not None:
            return False  # fold-constants casts constants
        return value_type is not None and value_type.elem_type == op.arg("to", -1) != 0

    def _pad(self, op: Op) -> bool:
        pads = self.ints(op, 1, "pads" if self.opset >= 11 else "paddings")
        if self.opset < 11 and pads is None:
            pads = op.arg("pads")
        return pads is not None and not any(pads)

    def _slice(self, op: Op) -> bool:
        starts = self.ints(op, 1, "starts")
        ends = self.ints(op, 2, "ends")
        if starts is None or ends is None:
            return False
        steps = self.ints(op, 4, "steps") if self.opset >= 10 else None
        if any(step != 1 for step in steps or []):
            return False
        shape = self.shape(op.inputs[0])
        axes = self.ints(op, 3, "axes")
        if axes is None:
            axes = list(range(len(starts)))
        if shape is None and any(axis < 0 for axis in axes):
            return False
        for axis, start, end in zip(axes, starts, ends, strict=False):
            dim = None if shape is None else shape[axis]
            if start != 0 and not (isinstance(dim, int) and start <= -dim):
                return False
            if end < _FULL and not (isinstance(dim, int) and end >= dim):
                return False
        return True

    def _expand(self, op: Op) -> bool:
        shape = self.shape(op.inputs[0])
        target = self.array(op.inputs[1]) if len(op.inputs) > 1 else None
        if shape is None or target is None or target.ndim != 1 or len(target) > len(shape):
            return False
        aligned = shape[len(shape) - len(target) :]
        return all(
            entry == 1 or (isinstance(dim, int) and entry == dim)
            for entry, dim in zip(target.tolist(), aligned, strict=True)
        )

    def _tile(self, op: Op) -> bool:
        repeats = self.array(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] else None
        return repeats is not None and repeats.size > 0 and bool(np.all(repeats == 1))

    def _flatten(self, op: Op) -> bool:
        shape = self.shape(op.inputs[0])
        return shape is not None and len(shape) == 2 and op.arg("axis", 1) in (1, -1)

    def _concat(self, op: Op) -> bool:
        return len(op.inputs) == 1

    def _pool(self, op: Op) -> bool:
        kernel = op.arg("kernel_shape")
        if kernel is None or any(k != 1 for k in kernel):
            return False
        if any(s != 1 for s in op.arg("strides") or ()) or any(op.arg("pads") or ()):
            return False
        return op.arg("auto_pad", b"NOTSET") in (b"NOTSET", b"VALID", "NOTSET", "VALID")

    _maxpool = _pool
    _averagepool = _pool

    def _reduce(self, op: Op) -> bool:
        if op.arg("keepdims", 1) != 1:
            return False  # dropping the axes is a Squeeze, not a no-op
        if len(op.inputs) > 1 and op.inputs[1] and self.array(op.inputs[1]) is None:
            return False  # axes computed at run time
        axes = self.ints(op, 1, "axes")
        if not axes and op.arg("noop_with_empty_axes", 0):
            return True
        shape = self.shape(op.inputs[0])
        if shape is None:
            return False
        rank = len(shape)
        chosen = axes or range(rank)
        return all(-rank <= axis < rank and shape[axis] == 1 for axis in chosen)

    _reducesum = _reduce
    _reducemean = _reduce
    _reducemax = _reduce
    _reducemin = _reduce
    _reduceprod = _reduce

    def _neutral(self, op: Op, neutral: int) -> bool:
        """Whether ``op`` combines its first input with a constant of ``neutral`` elements
        that broadcasts to it without growing its shape (or changing its element type)."""
        if len(op.inputs) != 2 or not op.inputs[1]:
            return False
        constant = self.array(op.inputs[1])
        if constant is None or constant.size > 1 << 20 or not np.all(constant == neutral):
            return False
        if constant.ndim == 0:
            return True
        shape = self.shape(op.inputs[0])
        if shape is None or constant.ndim > len(shape):
            return False
        aligned = shape[len(shape) - constant.ndim :]
        return all(
            size == 1 or (isinstance(dim, int) and size == dim)
            for size, dim in zip(constant.shape, aligned, strict=True)
        )

    def _add(self, op: Op) -> bool:
        return self._neutral(op, 0)

    def _sub(self, op: Op) -> bool:
        return self._neutral(op, 0)

    def _mul(self, op: Op) -> bool:
        return self._neutral(op, 1)

    def _div(self, op: Op) -> bool:
        return self._neutral(op, 1)


_KEEPS_ZEROS = frozenset(
    {"Expand", "Slice", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Flatten", "Identity"}
    | {"Tile", "Gather", "Cast"}
)
"""Ops whose output holds only elements of their first input (cast or not): zeros in, zeros
out (the legacy exporter slices one zero state per layer out of a ``ConstantOfShape``)."""


def _zeros(flow: DataFlow, table: OnnxOpTable, name: str) -> bool:
    """Whether the value ``name`` is all zeros: a zero constant, a ``ConstantOfShape`` of zero,
    an op of ``_KEEPS_ZEROS`` reading a zero value."""
    tensor = flow.constant(name)
    if tensor is not None:
        return tensor.size <= 1 << 20 and not np.any(tensor.numpy())
    index = flow.producer(name)
    if index is None:
        return False
    op = flow.net[index]
    if op.domain not in (None, "", "ai.onnx"):
        return False
    if op.type == "ConstantOfShape":
        value = table.attribute_array(op, "value")
        return value is None or not np.any(value)
    if op.type in _KEEPS_ZEROS and op.inputs and op.inputs[0]:
        return _zeros(flow, table, op.inputs[0])
    return False


def _default_inputs(flow: DataFlow, table: OnnxOpTable) -> dict[int, Op]:
    """Recurrent ops with zero inputs left out: ``{op index: the op without them}``."""
    changed: dict[int, Op] = {}
    for index, op in enumerate(flow.net):
        positions = _RECURRENT_DEFAULTS.get(op.type)
        if positions is None or op.domain not in (None, "", "ai.onnx"):
            continue
        inputs = list(op.inputs)
        for position in positions:
            if (
                position < len(inputs)
                and inputs[position]
                and _zeros(flow, table, inputs[position])
            ):
                inputs[position] = ""
        while inputs and not inputs[-1]:
            inputs.pop()
        if tuple(inputs) != op.inputs:
            changed[index] = op.replace(inputs=inputs)
    return changed


@register_pass
@dataclass(frozen=True)
class RemoveNoopOps(Pass):
    """Remove ops that give back their input, and recurrent inputs that are zeros (see the
    module docstring).

    Stats: ``ops_removed``, ``values_renamed`` (values that took a graph output's name),
    ``inputs_dropped`` (zero recurrent inputs left out).
    """

    name: ClassVar[str] = "remove-noop-ops"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """For each graph, innermost first: find the no-ops and zero inputs, then one edit."""
        table = cast("OnnxOpTable", op_table(model))
        stats = {"ops_removed": 0, "values_renamed": 0, "inputs_dropped": 0}
        all_scopes = scopes(model.predict_net, table)
        wanted = _NOOP_TYPES | table.idempotent_types() | _RECURRENT_DEFAULTS.keys()
        if not any(wanted.intersection(map(_type, scope.net)) for scope in all_scopes):
            return PassResult(model, False, stats)
        nested = len(all_scopes) > 1

        def types() -> Mapping[str, ValueType]:  # only asked for shapes and element types
            return table.infer_types(model, nested=nested)

        changed = False
        for scope in all_scopes:
            flow = DataFlow(scope)
            changed = _remove(scope.net, flow, types, table, stats) or changed
        return PassResult(model, changed, stats)


def _type(op: Op) -> str:
    return op.type


def _remove(
    net: Net,
    flow: DataFlow,
    types: Callable[[], Mapping[str, ValueType]],
    table: OnnxOpTable,
    stats: dict[str, int],
) -> bool:
    check = _NoopCheck(flow, types, table)
    found = find_identity_ops(net, _NOOP_TYPES | table.idempotent_types(), check)
    rewired = {output[0] for output, _ in found.rewires}
    defaults = {
        index: op
        for index, op in _default_inputs(flow, table).items()
        if index not in found.removed and rewired.isdisjoint(net[index].inputs)
    }
    if not (found.removed or defaults):
        return False
    dropped = sum(_present(net[index]) - _present(op) for index, op in defaults.items())
    with net.edit() as edit:
        found.apply(edit)
        for index, op in defaults.items():
            edit.set_op(index, op)
    stats["ops_removed"] += len(found.removed)
    stats["values_renamed"] += len(found.renames)
    stats["inputs_dropped"] += dropped
    return edit.changed


def _present(op: Op) -> int:
    return sum(1 for name in op.inputs if name)

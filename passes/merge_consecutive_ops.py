"""Merge consecutive ops of one family into fewer ops, in every graph of an ONNX model
(control-flow bodies included). Each op merged away fed only the next one.

* **Data movement** (``Transpose``, ``Reshape``, ``Squeeze``, ``Unsqueeze``, ``Flatten``): a
  chain on a static shape becomes the fewest ops that move the elements the same way
  (``Reshape``, ``Transpose``, or one of each), found from where the chain sends each element of
  ``arange`` (onnxruntime runs the chain; ``graphtools.analysis.layouts``). On symbolic shapes,
  a run of ``Transpose``/``Squeeze``/``Unsqueeze`` becomes at most one of each (dims followed
  by rank alone: ``Unsqueeze -> Transpose -> Squeeze`` that moves a dim of size 1 around is one
  ``Transpose``), a ``Reshape`` to a constant target reads past the
  ``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze`` ops before it when the dims it copies (its
  0s) are the same there, and a ``Squeeze``/``Unsqueeze`` after such a ``Reshape`` is the
  ``Reshape`` to the target squeezed or unsqueezed, when its 0s keep their places. A
  ``ReduceMax``/``Min``/``Sum``/``Mean``/``Prod`` that drops axes of size 1 moves elements as a
  ``Squeeze`` and joins a chain as one (``x.unsqueeze(1).mean(1)`` is ``x``, exactly).
* **Cast**: ``Cast(Cast(x, T1), T2)`` is ``Cast(x, T2)`` when ``T1`` holds every value of
  ``x``'s type exactly (``float32 -> float64 -> float16``, not ``float32 -> float16 ->
  float32``).
* **Concat** of a ``Concat`` on the same axis takes its inputs in its place.
* **Slice** of a ``Slice`` on other axes is one ``Slice`` (constant bounds, opset 10 on).
* **Reduce**: ``ReduceMax``/``Min``/``Sum``/``Mean``/``Prod`` of the same reduce over
  constant axes is one reduce over both sets of axes (``x.mean(3).mean(2)``), when both keep
  their dims or neither does. Max and Min are exact on data without NaN (onnxruntime's
  reduce keeps or skips a NaN by where it lies); Sum, Mean and Prod add in another order
  (within float rounding, as onnxsim's merge).
* **Arithmetic**: ``Mul(Mul(x, c1), c2)`` is ``Mul(x, c1 * c2)`` and ``Add(Add(x, c1), c2)``
  is ``Add(x, c1 + c2)`` for constants ``c1``, ``c2`` (either operand), the combined constant
  computed by onnxruntime, when it holds no more elements than the two and its values stay in
  the type's normal range (``1024 * 1024`` overflows float16; a layer scale times a scalar;
  within float rounding).

New targets, axes and bounds are initializers; an op of the model's opset is never replaced by
one it lacks (a ``Reshape`` target input needs opset 5, ``Squeeze`` axes inputs follow 13).

Example (``x`` is ``8 x 2 x 96``)::

    before                                          after
      #0 Reshape(x@0, s@0) -> v@1 {s=[8,2,3,32]}      #0 Reshape(x@0, s@0) -> v@1
      #1 Unsqueeze(v@1, zero@0) -> u@1                #1 Transpose(v@1) -> y@1 {perm=[2,0,1,3]}
      #2 Transpose(u@1) -> t@1 {perm=[3,1,2,0,4]}
      #3 Squeeze(t@1, minus_two@0) -> y@1
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.float_range import fits_float_type
from graphtools.analysis.layouts import compose_labels, element_forms, normalize_axes
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.values import ArrayTensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable

__all__ = ["MergeConsecutiveOps"]

_MOVES = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_RESHAPES = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_REDUCES = frozenset({"ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd"})
"""Reduces whose result over axes ``a`` then ``b`` is the result over ``a`` and ``b``."""
_ASSOCIATIVE = frozenset({"Mul", "Add"})
_ARITHMETIC = {"Mul": np.multiply, "Add": np.add}
"""The float64 arithmetic that checks a combined constant fits its type (``float_range``)."""
_CHAINED = _MOVES | _REDUCES
"""Ops a chain of data movement may hold: a reduce over axes of size 1 drops them, a Squeeze."""
_FAMILIES = _MOVES | _REDUCES | _ASSOCIATIVE | {"Cast", "Concat", "Slice"}
_LARGEST_CHAIN = 1 << 20
"""Elements of the biggest static tensor whose chain is run on ``arange``, and of the
constants of a Mul or Add chain combined."""
_EXACT: dict[int, frozenset[int]] = {
    9: frozenset({1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 16}),
    2: frozenset({1, 4, 5, 6, 7, 10, 11, 12, 13, 16}),
    3: frozenset({1, 5, 6, 7, 10, 11, 16}),
    4: frozenset({1, 6, 7, 11, 12, 13}),
    5: frozenset({1, 6, 7, 11}),
    12: frozenset({7, 11, 13}),
    6: frozenset({7, 11}),
    10: frozenset({1, 11}),
    16: frozenset({1, 11}),
    1: frozenset({11}),
}
"""ONNX element type -> the types that hold each of its values exactly."""


@dataclass
class _Rewrite:
    """Ops ``removed`` replaced by ``ops`` at the place of the last of them (``expand``), or
    one op changed in place (``replaced``), and the initializers the new ops read."""

    removed: list[int]
    ops: list[Op] = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class _Chain:
    """A chain of data-movement ops: their indices, input and output."""

    ops: list[int]
    source: str
    target: str


class _Merger:
    """Finds the merges of one graph."""

    def __init__(
        self,
        flow: DataFlow,
        types: Callable[[], Mapping[str, ValueType]],
        table: OnnxOpTable,
        names: NameSource,
    ) -> None:
        self.flow = flow
        self.net = flow.net
        self.types = types
        self.opset = table.opset() or 1
        self.names = names
        self.used: set[int] = set()
        self.rewrites: list[_Rewrite] = []

    # -- what is known of a value ---------------------------------------------------------------

    def shape(self, name: str) -> tuple[int | str | None, ...] | None:
        tensor = self.flow.constant(name)
        if tensor is not None:
            return tensor.shape
        value_type = self.types().get(name)
        if value_type is None or value_type.kind != "tensor":
            return None
        return value_type.shape

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        shape = self.shape(name)
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        return cast("tuple[int, ...]", shape)

    def ints(self, op: Op, position: int, attribute: str) -> list[int] | None:
        """Integers ``op`` takes as input ``position`` (newer opsets) or attribute."""
        if len(op.inputs) > position and op.inputs[position]:
            tensor = self.flow.constant(op.inputs[position])
            return None if tensor is None else [int(v) for v in tensor.numpy().reshape(-1)]
        value = op.arg(attribute)
        return None if value is None else [int(v) for v in value]

    def standard(self, op: Op) -> bool:
        return op.domain in (None, "", "ai.onnx")

    def next_op(self, index: int, kinds: frozenset[str]) -> int | None:
        """The op of ``kinds`` that alone reads op ``index``'s one output, as its data."""
        op = self.net[index]
        if len(op.outputs) != 1:
            return None
        reader = self.flow.only_reader(op.outputs[0])
        if reader is None or reader in self.used:
            return None
        follower = self.net[reader]
        if follower.type not in kinds or not self.standard(follower):
            return None
        return reader if follower.inputs[0] == op.outputs[0] else None

    # -- new values ---------------------------------------------------------------------------

    def constant(self, rewrite: _Rewrite, hint: str, values: Sequence[int]) -> str:
        name = self.names.fresh(hint)
        rewrite.initializers[name] = np.asarray(list(values), dtype=np.int64)
        return name

    def axes_op(
        self, rewrite: _Rewrite, kind: str, source: str, target: str, axes: Sequence[int]
    ) -> Op:
        if self.opset >= 13:
            name = self.constant(rewrite, f"{target}_axes", axes)
            return Op(kind, [source, name], [target])
        return Op(kind, [source], [target], args={"axes": list(axes)})

    def reshape_op(self, rewrite: _Rewrite, source: str, target: str, shape: Sequence[int]) -> Op:
        name = self.constant(rewrite, f"{target}_shape", shape)
        return Op("Reshape", [source, name], [target])

    def claim(self, rewrite: _Rewrite) -> None:
        self.used.update(rewrite.removed)
        self.rewrites.append(rewrite)

    # -- chains of data movement ----------------------------------------------------------------

    def movable(self, op: Op) -> bool:
        """Whether ``op`` is a data-movement op whose parameters are known (a reduce that
        drops axes of size 1 is a ``Squeeze``)."""
        if op.type in _REDUCES:
            return self.dropped_axes(op) is not None
        if op.type not in _MOVES or not self.standard(op) or len(op.outputs) != 1:
            return False
        if op.type == "Reshape":
            return self.opset >= 5 and len(op.inputs) == 2 and self.ints(op, 1, "shape") is not None
        if op.type in ("Squeeze", "Unsqueeze") and len(op.inputs) > 1:
            return self.flow.constant(op.inputs[1]) is not None
        return True

    def dropped_axes(self, op: Op) -> list[int] | None:
        """The axes a reduce drops when they all have size 1 (one element each: the result
        is its input without those dims, exactly, for every reduce of ``_REDUCES``), sorted
        and counted from the front; ``None`` for any other op or reduce."""
        if op.type not in _REDUCES or not self.standard(op) or len(op.outputs) != 1:
            return None
        if op.arg("keepdims", 1) != 0:
            return None  # keeping them is remove-noop-ops' no-op
        shape = self.shape(op.inputs[0])
        if shape is None:
            return None
        axes_given = (len(op.inputs) > 1 and bool(op.inputs[1])) or op.arg("axes") is not None
        if not axes_given:
            if op.arg("noop_with_empty_axes", 0):
                return None
            axes = list(range(len(shape)))
        else:
            found = self.ints(op, 1, "axes")
            if found is None:
                return None  # axes computed at run time
            axes = found
        rank = len(shape)
        if not axes or any(not -rank <= axis < rank for axis in axes):
            return None
        dropped = sorted({axis % rank for axis in axes})
        return dropped if all(shape[axis] == 1 for axis in dropped) else None

    def chains(self) -> list[_Chain]:
        """Maximal chains of at least two movable ops, each feeding only the next."""
        found = []
        net = self.net
        for index, op in enumerate(net):
            if index in self.used or not self.movable(op):
                continue
            producer = self.flow.producer(op.inputs[0])
            if (
                producer is not None
                and self.movable(net[producer])
                and self.flow.only_reader(op.inputs[0]) == index
            ):
                continue  # not the first of its chain
            ops = [index]
            follower = self.next_op(index, _CHAINED)
            while follower is not None and self.movable(net[follower]):
                ops.append(follower)
                follower = self.next_op(follower, _CHAINED)
            if len(ops) > 1:
                found.append(_Chain(ops, op.inputs[0], net[ops[-1]].outputs[0]))
        return found

    def static_chain(self, chain: _Chain) -> tuple[int, ...] | None:
        """The static input shape of ``chain`` when its elements can be followed."""
        shape = self.static_shape(chain.source)
        output = self.static_shape(chain.target)
        if shape is None or output is None:
            return None
        size = int(np.prod(shape, dtype=np.int64))
        return shape if 0 < size <= _LARGEST_CHAIN else None

    def apply_form(self, chain: _Chain, steps: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Replace ``chain`` by ``steps`` (an element-map form)."""
        rewrite = _Rewrite(list(chain.ops))
        if not steps:
            rewrite.ops.append(Op("Identity", [chain.source], [chain.target]))
        current = chain.source
        for number, (kind, values) in enumerate(steps):
            target = (
                chain.target if number == len(steps) - 1 else self.names.fresh(f"{chain.target}_0")
            )
            if kind == "Reshape":
                rewrite.ops.append(self.reshape_op(rewrite, current, target, values))
            else:
                rewrite.ops.append(
                    Op("Transpose", [current], [target], args={"perm": list(values)})
                )
            current = target
        self.claim(rewrite)

    def symbolic_chain(self, chain: _Chain) -> None:
        """Merge the runs of ``chain`` that ranks alone describe, and the reshapes a constant
        ``Reshape`` makes pointless."""
        net = self.net
        run: list[int] = []
        for index in [*chain.ops, None]:
            op = None if index is None else net[index]
            if op is not None and self.label_step(op) is not None:
                run.append(index)  # type: ignore[arg-type]
                continue
            if len(run) > 1:
                self.label_run(run)
            run = []
        for position, index in enumerate(chain.ops):
            if index in self.used or net[index].type != "Reshape" or position == 0:
                continue
            self.absorb(chain.ops[:position], index)
        for first, second in zip(chain.ops, chain.ops[1:], strict=False):
            if first not in self.used and second not in self.used:
                self.fold_into_reshape(first, second)

    def label_step(self, op: Op) -> tuple[str, list[int] | None] | None:
        if op.type in _REDUCES:
            dropped = self.dropped_axes(op)
            return None if dropped is None else ("Squeeze", dropped)
        if op.type == "Transpose":
            perm = op.arg("perm")
            return ("Transpose", None if perm is None else [int(p) for p in perm])
        if op.type in ("Squeeze", "Unsqueeze"):
            axes = self.ints(op, 1, "axes")
            if axes is None and op.type == "Squeeze":
                return None
            return (op.type, axes)
        return None

    def label_run(self, run: list[int]) -> None:
        net = self.net
        source = net[run[0]].inputs[0]
        shape = self.shape(source)
        if shape is None:
            return
        steps = [self.label_step(net[index]) for index in run]
        form = compose_labels(len(shape), [step for step in steps if step is not None])
        if form is None or form.ops >= len(run):
            return
        target = net[run[-1]].outputs[0]
        rewrite = _Rewrite(list(run))
        parts: list[tuple[str, list[int]]] = []
        if form.squeeze:
            parts.append(("Squeeze", list(form.squeeze)))
        if form.perm is not None:
            parts.append(("Transpose", list(form.perm)))
        if form.unsqueeze:
            parts.append(("Unsqueeze", list(form.unsqueeze)))
        current = source
        for number, (kind, values) in enumerate(parts):
            output = target if number == len(parts) - 1 else self.names.fresh(f"{target}_0")
            if kind == "Transpose":
                rewrite.ops.append(Op("Transpose", [current], [output], args={"perm": values}))
            else:
                rewrite.ops.append(self.axes_op(rewrite, kind, current, output, values))
            current = output
        if not parts:
            rewrite.ops.append(Op("Identity", [source], [target]))
        self.claim(rewrite)

    def absorb(self, before: list[int], index: int) -> None:
        """A ``Reshape`` to a constant target reads the input of the reshapes before it in
        the chain, the farthest whose dims it copies (a 0 of the target, ``allowzero`` unset)
        are the very dims it copies now (the same size or the same symbol)."""
        op = self.net[index]
        target = self.ints(op, 1, "shape")
        if target is None:
            return
        copied = [] if op.arg("allowzero", 0) else [i for i, d in enumerate(target) if d == 0]
        absorbed = []
        for previous in reversed(before):
            if previous in self.used or self.net[previous].type not in _RESHAPES:
                break
            absorbed.append(previous)
        while absorbed and not self.same_dims(
            self.net[absorbed[-1]].inputs[0], op.inputs[0], copied
        ):
            absorbed.pop()
        if not absorbed:
            return
        source = self.net[absorbed[-1]].inputs[0]
        rewrite = _Rewrite([*absorbed, index], [op.replace(inputs=[source, *op.inputs[1:]])])
        self.claim(rewrite)

    def same_dims(self, first: str, second: str, positions: Sequence[int]) -> bool:
        """Whether ``first`` and ``second`` have the same known size or symbol at each of
        ``positions``."""
        if not positions:
            return True
        one, other = self.shape(first), self.shape(second)
        if one is None or other is None or max(positions) >= min(len(one), len(other)):
            return False
        return all(one[i] == other[i] and one[i] not in (None, "") for i in positions)

    def fold_into_reshape(self, first: int, second: int) -> None:
        """A ``Squeeze``/``Unsqueeze`` (a reduce dropping axes of size 1 too) right after a
        ``Reshape`` to a constant target is that ``Reshape`` to the target squeezed or
        unsqueezed, when every dim the target copies (a 0) keeps its place."""
        op, follower = self.net[first], self.net[second]
        if op.type != "Reshape" or len(op.inputs) < 2:
            return
        target = self.ints(op, 1, "shape")
        step = self.label_step(follower)
        if target is None or step is None or step[0] == "Transpose" or step[1] is None:
            return
        copies = not op.arg("allowzero", 0)
        moved = _moved_target(target, step[0], step[1], copies)
        if moved is None:
            return
        rewrite = _Rewrite([first, second])
        name = self.constant(rewrite, f"{follower.outputs[0]}_shape", moved)
        rewrite.ops.append(op.replace(inputs=[op.inputs[0], name], outputs=follower.outputs))
        self.claim(rewrite)

    # -- Cast, Concat, Slice ----------------------------------------------------------------

    def elem_type(self, name: str) -> int | None:
        tensor = self.flow.constant(name)
        if tensor is not None:
            return None
        value_type = self.types().get(name)
        return None if value_type is None or value_type.kind != "tensor" else value_type.elem_type

    def casts(self) -> None:
        for index, op in enumerate(self.net):
            if op.type != "Cast" or index in self.used or not self.standard(op):
                continue
            follower = self.next_op(index, frozenset({"Cast"}))
            source_type = self.elem_type(op.inputs[0])
            if follower is None or source_type is None:
                continue
            middle = int(op.arg("to", 0))
            if middle != source_type and middle not in _EXACT.get(source_type, ()):
                continue
            second = self.net[follower]
            self.claim(_Rewrite([index, follower], [second.replace(inputs=[op.inputs[0]])]))

    def concats(self) -> None:
        for index, op in enumerate(self.net):
            if op.type != "Concat" or index in self.used or not self.standard(op):
                continue
            rank = self.shape(op.outputs[0])
            inputs: list[str] = []
            merged: list[int] = []
            for name in op.inputs:
                producer = self.flow.producer(name)
                inner = None if producer is None else self.net[producer]
                if (
                    inner is not None
                    and producer not in self.used
                    and inner.type == "Concat"
                    and self.standard(inner)
                    and self.flow.only_reader(name) == index
                    and _same_axis(inner.arg("axis", 0), op.arg("axis", 0), rank)
                ):
                    inputs.extend(inner.inputs)
                    merged.append(producer)  # type: ignore[arg-type]
                else:
                    inputs.append(name)
            if merged:
                self.claim(_Rewrite([*merged, index], [op.replace(inputs=inputs)]))

    def slices(self) -> None:
        if self.opset < 10:
            return
        for index, op in enumerate(self.net):
            if op.type != "Slice" or index in self.used or not self.standard(op):
                continue
            follower = self.next_op(index, frozenset({"Slice"}))
            shape = self.shape(op.inputs[0])
            if follower is None or shape is None:
                continue
            first, second = self.slice_params(op, len(shape)), None
            if first is not None:
                second = self.slice_params(self.net[follower], len(shape))
            if first is None or second is None or set(first[2]) & set(second[2]):
                continue
            rewrite = _Rewrite([index, follower])
            target = self.net[follower].outputs[0]
            params = [
                self.constant(rewrite, f"{target}_{what}", first[number] + second[number])
                for number, what in enumerate(("starts", "ends", "axes", "steps"))
            ]
            rewrite.ops.append(self.net[follower].replace(inputs=[op.inputs[0], *params]))
            self.claim(rewrite)

    def reduces(self) -> None:
        for index, op in enumerate(self.net):
            if op.type not in _REDUCES or index in self.used or not self.standard(op):
                continue
            follower = self.next_op(index, frozenset({op.type}))
            shape = self.shape(op.inputs[0])
            if follower is None or shape is None:
                continue
            second = self.net[follower]
            axes = self.merged_axes(op, second, len(shape))
            if axes is None:
                continue
            rewrite = _Rewrite([index, follower])
            if len(second.inputs) > 1:  # axes are an input (ReduceSum 13, the others 18 on)
                name = self.constant(rewrite, f"{second.outputs[0]}_axes", axes)
                merged = second.replace(inputs=[op.inputs[0], name])
            else:
                merged = second.replace(inputs=[op.inputs[0]]).with_arg("axes", axes)
            rewrite.ops.append(merged)
            self.claim(rewrite)

    def merged_axes(self, first: Op, second: Op, rank: int) -> list[int] | None:
        """The axes of ``first`` then ``second`` (reading ``first``'s output, on an input of
        ``rank``) as axes of that input; ``None`` when one reduce cannot do both: axes not
        constant or empty (every axis, or none), one keeping the axes it reduces and the other
        dropping them."""
        kept = bool(first.arg("keepdims", 1))
        if kept != bool(second.arg("keepdims", 1)):
            return None  # one reduce either keeps every axis it reduces or drops them all
        if first.arg("noop_with_empty_axes", 0) or second.arg("noop_with_empty_axes", 0):
            return None
        first_axes = normalize_axes(self.ints(first, 1, "axes") or [], rank)
        left = rank if kept else rank - len(set(first_axes or ()))
        second_axes = normalize_axes(self.ints(second, 1, "axes") or [], left)
        if not first_axes or not second_axes:
            return None
        if not kept:  # the second's axes count the dims the first left
            dropped = set(first_axes)
            remaining = [axis for axis in range(rank) if axis not in dropped]
            second_axes = [remaining[axis] for axis in second_axes]
        return sorted(set(first_axes) | set(second_axes))

    def arithmetic(self) -> list[tuple[_Rewrite, Op, list[np.ndarray]]]:
        """The Mul/Add chains by constants to merge, each with the merged op and the two
        constants whose combination it reads (computed for all at once: ``_combine``)."""
        found = []
        for index, op in enumerate(self.net):
            if op.type not in _ASSOCIATIVE or index in self.used or not self.standard(op):
                continue
            first = self.constant_operand(op)
            reader = self.flow.only_reader(op.outputs[0]) if first is not None else None
            if first is None or reader is None or reader in self.used:
                continue
            follower = self.net[reader]
            second = self.constant_operand(follower)
            if follower.type != op.type or not self.standard(follower) or second is None:
                continue
            if second[0] != op.outputs[0]:
                continue
            constants = [self.flow.constant(first[1]), self.flow.constant(second[1])]
            values = [tensor.numpy() for tensor in constants if tensor is not None]
            if sum(value.size for value in values) > _LARGEST_CHAIN or _grows(values):
                continue
            exact = _ARITHMETIC[op.type](*(value.astype(np.float64) for value in values))
            if not fits_float_type(exact, values[0].dtype):
                continue  # c1 * c2 overflows or flushes to zero where each step did not
            rewrite = _Rewrite([index, reader])
            name = self.names.fresh(f"{follower.outputs[0]}_{op.type.lower()}")
            rewrite.ops.append(follower.replace(inputs=[first[0], name]))
            self.claim(rewrite)
            found.append((rewrite, Op(op.type, ["", ""], [name]), values))
        return found

    def constant_operand(self, op: Op) -> tuple[str, str] | None:
        """``(the other input, the constant input)`` of a binary ``op`` with exactly one
        constant input (two: ``fold-constants`` computes it)."""
        if len(op.inputs) != 2 or len(op.outputs) != 1 or not all(op.inputs):
            return None
        left, right = op.inputs
        if (self.flow.constant(left) is None) == (self.flow.constant(right) is None):
            return None
        return (left, right) if self.flow.constant(right) is not None else (right, left)

    def slice_params(self, op: Op, rank: int) -> tuple[list[int], ...] | None:
        starts, ends = self.ints(op, 1, "starts"), self.ints(op, 2, "ends")
        if starts is None or ends is None or len(starts) != len(ends):
            return None
        axes = self.ints(op, 3, "axes") if len(op.inputs) > 3 and op.inputs[3] else None
        steps = self.ints(op, 4, "steps") if len(op.inputs) > 4 and op.inputs[4] else None
        axes = normalize_axes(list(range(len(starts))) if axes is None else axes, rank)
        steps = [1] * len(starts) if steps is None else steps
        if axes is None or len(axes) != len(starts) or len(steps) != len(starts):
            return None
        return starts, ends, axes, steps


def _moved_target(
    target: Sequence[int], kind: str, axes: Sequence[int], copies: bool
) -> list[int] | None:
    """A Reshape target after ``kind`` (Squeeze or Unsqueeze) of ``axes``; ``None`` when a
    squeezed entry is not a literal 1 or (``copies``: 0 copies the input's dim) a 0 would
    move to another place."""
    if kind == "Squeeze":
        rank = len(target)
        dropped = {axis % rank for axis in axes if -rank <= axis < rank}
        if len(dropped) != len(axes) or any(target[axis] != 1 for axis in dropped):
            return None
        moved = [d for i, d in enumerate(target) if i not in dropped]
        shift = [sum(1 for axis in dropped if axis < i) for i in range(rank)]
    else:
        rank = len(target) + len(axes)
        added = {axis % rank for axis in axes if -rank <= axis < rank}
        if len(added) != len(axes):
            return None
        rest = iter(target)
        moved = [1 if i in added else next(rest) for i in range(rank)]
        kept = [i for i in range(rank) if i not in added]
        shift = [new - old for old, new in enumerate(kept)]
    if copies and any(shift[i] for i, d in enumerate(target) if d == 0):
        return None
    return moved


def _same_axis(first: int, second: int, shape: tuple[object, ...] | None) -> bool:
    if first == second:
        return True
    if shape is None:
        return False
    rank = len(shape)
    return (first + rank if first < 0 else first) == (second + rank if second < 0 else second)


def _chain_ops(
    net: Net, merger: _Merger, chain: _Chain, number: int
) -> tuple[list[Op], dict[str, np.ndarray]]:
    """The chain's ops renamed to run on ``arange`` of its input, with their constants (a
    reduce over axes of size 1 runs as the ``Squeeze`` it is: ``arange`` is int64, which not
    every reduce takes)."""
    prefix = f"chain{number}_"
    renamed = {chain.source: f"{prefix}in"}
    feeds: dict[str, np.ndarray] = {}
    ops = []
    for position, index in enumerate(chain.ops):
        op = net[index]
        inputs = [renamed[op.inputs[0]]]
        output = f"{prefix}{position}_out"
        renamed[op.outputs[0]] = output
        dropped = merger.dropped_axes(op)
        if dropped is not None:
            if merger.opset < 13:
                ops.append(Op("Squeeze", inputs, [output], args={"axes": dropped}))
                continue
            feeds[f"{prefix}{position}_axes"] = np.asarray(dropped, dtype=np.int64)
            ops.append(Op("Squeeze", [*inputs, f"{prefix}{position}_axes"], [output]))
            continue
        for slot, name in enumerate(op.inputs[1:], start=1):
            if not name:
                inputs.append("")
                continue
            fed = f"{prefix}{position}_{slot}"
            tensor = merger.flow.constant(name)
            assert tensor is not None  # movable() checked every parameter is a constant
            feeds[fed] = tensor.numpy()
            inputs.append(fed)
        ops.append(op.replace(inputs=inputs, outputs=[output]))
    return ops, feeds


@register_pass
@dataclass(frozen=True)
class MergeConsecutiveOps(Pass):
    """Merge consecutive data-movement, Cast, Concat, Slice, Reduce and constant Mul/Add ops
    (see the module docstring).

    Stats: ``merged`` (groups of ops replaced), ``ops_removed`` (ops fewer).
    """

    name: ClassVar[str] = "merge-consecutive-ops"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Find the merges of every graph (static chains evaluated in one run), then one edit
        per graph."""
        table = cast("OnnxOpTable", op_table(model))
        stats = {"merged": 0, "ops_removed": 0}
        all_scopes = scopes(model.predict_net, table)
        if not any(_FAMILIES.intersection(op.type for op in s.net) for s in all_scopes):
            return PassResult(model, False, stats)
        nested = len(all_scopes) > 1

        def types() -> Mapping[str, ValueType]:  # shape inference only once a rule asks
            return table.infer_types(model, nested=nested)

        names = NameSource(model_names(model.predict_net))
        mergers = [_Merger(DataFlow(s), types, table, names) for s in all_scopes]
        self._movements(mergers, table)
        changed = False
        merges: list[tuple[_Rewrite, Op, list[np.ndarray]]] = []
        for merger in mergers:
            merger.casts()
            merger.concats()
            merger.slices()
            merger.reduces()
            merges += merger.arithmetic()
        _combine(merges, table)
        for merger in mergers:
            if merger.rewrites:
                changed = _apply(merger.net, merger.rewrites) or changed
                stats["merged"] += len(merger.rewrites)
                stats["ops_removed"] += sum(len(r.removed) - len(r.ops) for r in merger.rewrites)
        return PassResult(model, changed, stats)

    def _movements(self, mergers: list[_Merger], table: OnnxOpTable) -> None:
        static: list[tuple[_Merger, _Chain, tuple[int, ...]]] = []
        for merger in mergers:
            for chain in merger.chains():
                shape = merger.static_chain(chain)
                if shape is None:
                    merger.symbolic_chain(chain)
                else:
                    static.append((merger, chain, shape))
        if not static:
            return
        ops: list[Op] = []
        feeds: dict[str, np.ndarray] = {}
        for number, (merger, chain, shape) in enumerate(static):
            chain_ops, chain_feeds = _chain_ops(merger.net, merger, chain, number)
            ops.extend(chain_ops)
            feeds.update(chain_feeds)
            feeds[f"chain{number}_in"] = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(
                shape
            )
        wanted = [f"chain{n}_{len(chain.ops) - 1}_out" for n, (_, chain, _) in enumerate(static)]
        values = table.evaluate_ops(ops, feeds, wanted)
        for number, (merger, chain, shape) in enumerate(static):
            forms = element_forms(shape, values[wanted[number]])
            best = next(
                (
                    form
                    for form in forms
                    if len(form.steps) < len(chain.ops)
                    and (merger.opset >= 5 or all(kind != "Reshape" for kind, _ in form.steps))
                ),
                None,
            )
            if best is None:
                merger.symbolic_chain(chain)
            else:
                merger.apply_form(chain, best.steps)


def _grows(values: list[np.ndarray]) -> bool:
    """Whether constants broadcast against each other into one bigger than both (a bigger
    file), or not at all."""
    try:
        shape = np.broadcast_shapes(*(value.shape for value in values))
    except ValueError:
        return True
    return math.prod(shape) > max(value.size for value in values)


def _combine(merges: list[tuple[_Rewrite, Op, list[np.ndarray]]], table: OnnxOpTable) -> None:
    """Compute the combined constant of each Mul/Add merge (onnxruntime, one run for all)
    into its rewrite's initializers."""
    if not merges:
        return
    ops: list[Op] = []
    feeds: dict[str, np.ndarray] = {}
    for number, (_, op, values) in enumerate(merges):
        inputs = [f"c{number}_{side}" for side in range(2)]
        feeds.update(zip(inputs, values, strict=True))
        ops.append(op.replace(inputs=inputs))
    combined = table.evaluate_ops(ops, feeds, [op.outputs[0] for op in ops])
    for rewrite, op, _ in merges:
        rewrite.initializers[op.outputs[0]] = combined[op.outputs[0]]


def _apply(net: Net, rewrites: list[_Rewrite]) -> bool:
    with net.edit() as edit:
        for rewrite in rewrites:
            for name, value in rewrite.initializers.items():
                edit.set_initializer(name, ArrayTensor(value))
            *others, last = sorted(rewrite.removed)
            edit.expand(last, rewrite.ops)
            for index in others:
                edit.remove(index)
    return edit.changed

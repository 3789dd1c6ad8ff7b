"""Make the batch dimension of an ONNX model symbolic, rewriting what bakes the exported batch
size in, or refuse naming the node that pins it.

The batch axis of each graph input is axis 0 (axis 1 when a recurrent op reads the input with
its sequence on axis 0, as ``nn.LSTM`` exports by default; when axis 0 is refused, the inputs
whose axis 1 has the first input's size are tried on axis 1, as a batch-first recurrent net's
initial states ``[layers, batch, hidden]`` are), or what the ``inputs`` option says
(``x=1``); a refusal shows how to give them. Inputs whose dim there is the first input's (or
already symbolic) get the symbol: the one an input already has there, else ``symbol``. Then
ONNX shape inference with data propagation (the declared shapes of other values set aside)
follows the symbol through every graph, bodies included, and each node reading a batched
value is checked, in order:

* it must be one the op table knows, and it must not combine elements along the batch axis
  while keeping it (``Softmax`` over it, a training-mode ``BatchNormalization``, an ``LSTM``
  along it: ``graphtools.dialects.onnx_axes``);
* its outputs must have types inference can give, none holding the batch twice, and one
  holding it (else the batch is consumed or pinned: ``ReduceMean`` over all axes, a
  ``Reshape`` to the exported size).

What pins the batch and can be rewritten is: a ``Reshape`` target holding the exported size at
the batch position (it becomes ``0``, copying the dim, or ``-1``), when as many elements come
before the batch in its output as in its input (``[1, 8] -> [8, 1]`` would deal the rows of a
batch out across columns: refused); the ``sizes`` of a
``Resize``, the shape of an ``Expand`` or the repeats of a ``Tile`` holding it (the batch
entry becomes the input's batch at run time: ``Shape -> Gather -> Concat``); a
``ConstantOfShape``/``Expand``/``Tile`` making a batch-sized constant that meets batched values
(same); a recurrent op's constant initial state with the exported batch (dropped when zero,
else expanded to the batch). Anything else pinning the batch is refused: ``PreconditionError``
naming the node, its type and why; the model is left as it was. At the end strict shape
inference must accept the model, graph outputs are declared with the symbol where it lands,
and the intermediate value_info (holding the exported batch) is dropped. Constants are folded
first (``fold-constants``), so that targets and sizes computed from constants are constants.
A model that declares ``N`` therefore runs at batch ``N``; whether its rows stay independent
is what the op checks above are for (the tests run batch 3 against three batch-1 runs). A
target whose ``-1`` is the batch (``x.view(-1, 2, 3)`` of a ``[1, 6]``) passes it on.

An export that is dynamic already stays as it is (declarations included) unless a node pins
the batch: where it folds the batch into a ``-1`` or sizes a value at run time (a
transformer's tokens, ``[T, B, 4, 8] -> [-1, 32]``), the export follows the batch where
inference cannot, and the checks stop following it there.

Example (``x`` was ``1 x 1280 x 1 x 1``; efficientnet's classifier head)::

    before                                      after (x: N x 1280 x 1 x 1, shape_1 = [0, 1280])
      #0 Reshape(x@0, shape@0) -> f@1             #0 Reshape(x@0, shape_1@0) -> f@1
      #1 Gemm(f@1, w@0, b@0) -> y@1               #1 Gemm(f@1, w@0, b@0) -> y@1
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from graphtools._core import ONNX
from graphtools.analysis.scopes import NameSource, model_names, scopes
from graphtools.dialects import op_table
from graphtools.errors import PipelineSpecError, PreconditionError
from graphtools.ir import Model, Net, Op
from graphtools.nested import names_in_nested_nets
from graphtools.pass_infra import Pass, PassResult, register_pass
from graphtools.passes.fold_constants import FoldConstants
from graphtools.values import ArrayTensor, Dim, Tensor, ValueType

if TYPE_CHECKING:
    from graphtools.dialects.onnx import OnnxOpTable
    from graphtools.rewriter import Edit

__all__ = ["MakeDynamicBatch"]

_SEQUENCES = frozenset({"LSTM", "GRU", "RNN", "Scan"})
"""Ops that run along an axis of their input: their input's batch is on another axis."""
_STATES = {"LSTM": (5, 6), "GRU": (5,), "RNN": (5,)}
"""Recurrent ops and the positions of their initial states."""
_SHAPE_INPUTS = {"Resize": 3, "Expand": 1, "Tile": 1}
"""Ops reading a batched value and a constant saying the size of their output: its input."""
_MAKERS = {"ConstantOfShape": 0, "Expand": 1, "Tile": 1}
"""Ops making a tensor of a size a constant input gives."""


@dataclass(frozen=True)
class _Pin:
    """A node that pins the batch: where, what kind of problem, and why in words."""

    net: Net
    index: int
    kind: str
    why: str

    def message(self) -> str:
        op = self.net[self.index]
        name = f" {op.name!r}" if op.name else ""
        where = "" if self.net.name is None else f" of graph {self.net.name!r}"
        return f"node #{self.index}{where} ({op.type}{name}) {self.why}"


class _Refused(Exception):
    def __init__(self, pin: _Pin) -> None:
        super().__init__(pin.message())
        self.pin = pin


def _walk(net: Net, table: OnnxOpTable) -> Iterator[tuple[Net, int, Op]]:
    """Every op of ``net`` in order, the ops of its bodies just before the op holding them."""
    for index, op in enumerate(net):
        for _, body in table.branch_nets(op):
            yield from _walk(body, table)
        yield net, index, op


class _Attempt:
    """Making the batch symbolic with one choice of batch axes."""

    def __init__(self, model: Model, table: OnnxOpTable, axes: dict[str, int], symbol: str):
        self.model = model
        self.table = table
        self.axes = axes
        self.net = model.predict_net
        batch_dims = [_dims(self.net.types[name])[axis] for name, axis in axes.items()]
        symbols = [dim for dim in batch_dims if isinstance(dim, str)]
        sizes = [dim for dim in batch_dims if isinstance(dim, int)]
        self.already = len(symbols) == len(axes)
        self.symbol = symbols[0] if symbols else self._fresh_symbol(symbol)
        self.size = sizes[0] if sizes else None
        self.names = NameSource(model_names(self.net))
        self.types: Mapping[str, ValueType] = {}
        self.constants = self._constants()
        self._pending: dict[str, np.ndarray] = {}
        self._made: dict[tuple[str, tuple[int, ...]], str] = {}  # new int64 constants by value
        self._displaced: set[str] = set()  # initializers a rewrite stopped some op reading

    def _fresh_symbol(self, symbol: str) -> str:
        used = {
            dim
            for value_type in self.net.types.values()
            if value_type.shape is not None
            for dim in value_type.shape
            if isinstance(dim, str)
        }
        name, number = symbol, 0
        while name in used:
            number += 1
            name = f"{symbol}{number}"
        return name

    def _constants(self) -> dict[str, Tensor | np.ndarray]:
        """The initializers of every graph, and the values of ``Constant`` nodes."""
        found: dict[str, Tensor | np.ndarray] = {}
        for scope in scopes(self.net, self.table):
            found.update(scope.constants)
            for op in scope.net:
                if op.type == "Constant" and op.outputs and op.domain in (None, "", "ai.onnx"):
                    value = self.table.attribute_array(op, "value")
                    if value is not None:
                        found[op.outputs[0]] = value
        return found

    # -- what is known of values --------------------------------------------------------------

    def shape(self, name: str) -> tuple[Dim, ...] | None:
        value_type = self.types.get(name)
        if value_type is None or value_type.kind != "tensor":
            return None
        return value_type.shape

    def batch_position(self, name: str) -> int | None:
        shape = self.shape(name)
        if not name or shape is None or self.symbol not in shape:
            return None
        return shape.index(self.symbol)

    def constant(self, name: str) -> np.ndarray | None:
        found = self.constants.get(name) if name else None
        return found.numpy() if isinstance(found, Tensor) else found

    # -- the attempt ----------------------------------------------------------------------------

    def run(self) -> dict[str, object]:
        # The checks see inference's types (a declared output dim the exporter named on its
        # own, ``Gemmy_dim_0``, would hide the batch from them); an export dynamic already
        # that needs no rewrite is then put back as it was (``call``).
        self._declare_symbol()
        fixed: set[tuple[int, tuple[str, ...], str]] = set()
        rewrites = 0
        limit = sum(len(scope.net) for scope in scopes(self.net, self.table)) + 2
        for _ in range(limit):
            self.types = self.table.infer_types(self.model, nested=True)
            pin = self._find()
            if pin is None:
                break
            key = (id(pin.net), pin.net[pin.index].outputs, pin.kind)
            if key in fixed or not self._fix(pin):
                raise _Refused(pin)
            fixed.add(key)
            self.constants = self._constants()
            rewrites += 1
        else:
            raise PreconditionError(f"make-dynamic-batch: no end to the rewrites after {limit}")
        stats: dict[str, object] = {"symbol": self.symbol, "rewrites": rewrites}
        error = self.table.inference_error(self.model)
        if error is not None:
            raise PreconditionError(
                f"make-dynamic-batch: shape inference refuses the model with a symbolic batch: "
                f"{error}"
            )
        if not self.already or rewrites:
            self._declare_outputs()
        self._drop_displaced()
        return stats

    def _declare_symbol(self) -> None:
        """Inputs get the symbol (those of an export dynamic already have it); the other
        declared types (which hold the exported batch) lose their shapes, for inference to
        work them out again."""
        for scope in scopes(self.net, self.table):
            net = scope.net
            interface = set(net.external_inputs) | set(net.external_outputs)
            with net.edit() as edit:
                for name, value_type in net.types.items():
                    if scope.depth == 0 and name in self.axes:
                        shape = list(value_type.shape or ())
                        shape[self.axes[name]] = self.symbol
                        edit.set_type(name, value_type.with_shape(tuple(shape)))
                    elif name in interface:
                        if not (scope.depth == 0 and name in net.external_inputs):
                            edit.set_type(name, value_type.with_shape(None))
                    else:
                        edit.set_type(name, None)

    def _declare_outputs(self) -> None:
        """Graph outputs (and body interfaces) declared as inference gives them now."""
        types = self.table.infer_types(self.model, nested=True)
        for scope in scopes(self.net, self.table):
            net = scope.net
            names = list(net.external_outputs)
            if scope.depth:
                names += net.external_inputs
            with net.edit() as edit:
                for name in names:
                    declared, inferred = net.types.get(name), types.get(name)
                    if inferred is None or inferred.kind != "tensor" or declared is None:
                        continue
                    if declared.kind == "tensor" and declared.shape != inferred.shape:
                        edit.set_type(name, declared.with_shape(inferred.shape))

    # -- finding pins -----------------------------------------------------------------------

    def _find(self) -> _Pin | None:
        for net, index, op in _walk(self.net, self.table):
            pin = self._check(net, index, op)
            if pin is not None:
                return pin
        return None

    def _check(self, net: Net, index: int, op: Op) -> _Pin | None:
        if op.type in ("Shape", "Size") and op.domain in (None, "", "ai.onnx"):
            return None
        batched = [
            (position, name)
            for position, name in enumerate(op.inputs)
            if self.batch_position(name) is not None
            and not (op.type == "CastLike" and position == 1)
        ]
        if not batched:
            return None
        for position, name in batched:
            shape = self.shape(name)
            assert shape is not None  # batch_position found the symbol in it
            combined = self.table.combined_axes(op, position, len(shape), self.constant)
            if combined is None:
                return _Pin(
                    net,
                    index,
                    "unknown",
                    "is not a standard op: what it does with the batch is unknown",
                )
            batch = self.batch_position(name)
            if batch in combined:
                return _Pin(
                    net,
                    index,
                    "sequence" if op.type in _SEQUENCES else "combines",
                    f"combines the rows of the batch (axis {batch} of input {position}, "
                    f"{name!r}): the outputs at batch N would not be N separate results",
                )
        outputs = [name for name in op.outputs if name]
        for name in outputs:
            shape = self.shape(name)
            if shape is None:
                why = (
                    "carries the batch through a body, where ONNX shape inference forgets "
                    "the shapes of carried values: the batch cannot be followed"
                    if op.has_nested_nets()
                    else f"gives {name!r} a type shape inference cannot work out from a "
                    f"batch of {self.symbol}"
                )
                return _Pin(net, index, "untyped", why)
            if shape.count(self.symbol) > 1:
                return _Pin(net, index, "twice", f"pairs the batch with itself in {name!r}")
        if outputs and all(self.batch_position(name) is None for name in outputs):
            if self.already and (
                op.type == "Flatten"
                or self._computed_size(op)
                or self._folded_by_the_export(op)
                or self._renamed_by_inference(op, outputs)
            ):
                return None  # the export follows the batch where inference cannot
            shapes = ", ".join(f"{n}: {list(self.shape(n) or ())}" for n in outputs)
            hint = (
                ": it folds the batch into another dim, which only an export with a dynamic "
                "batch (dynamic_axes, dynamic_shapes) can say"
                if op.type in ("Reshape", "Flatten")
                else ": it reduces or pins the batch"
            )
            sized = self._sized_constants(op)
            if sized:
                hint = (
                    f": its constant input {sized} holds the exported batch of {self.size} "
                    "(make it broadcast over the batch, size 1, or compute it from the input)"
                )
            return _Pin(
                net,
                index,
                "lost",
                f"takes the batch {self.symbol} in and gives none out ({shapes}){hint}",
            )
        return self._gemm_bias(net, index, op) or self._states(net, index, op)

    def _sized_constants(self, op: Op) -> str:
        """The constant inputs of ``op`` with a dim of the exported batch's size (an
        initializer the exporter folded for one batch: ``zeros_like(x)``), named with their
        shapes; empty when there are none or the size is not known."""
        if self.size is None:
            return ""
        found = []
        for name in op.inputs:
            value = self.constant(name) if self.batch_position(name) is None else None
            if value is not None and self.size in value.shape:
                found.append(f"{name!r} {list(value.shape)}")
        return ", ".join(found)

    def _gemm_bias(self, net: Net, index: int, op: Op) -> _Pin | None:
        """A ``Gemm`` whose bias ``C`` has as many rows as the exported batch: inference sizes
        the output from ``A`` and ``B`` alone, and at another batch ``C`` cannot broadcast to
        it (a per-row bias, which ``fuse-matmul-add`` makes of an ``Add`` that pinned the batch
        already)."""
        if op.type != "Gemm" or op.domain not in (None, "", "ai.onnx") or len(op.inputs) < 3:
            return None
        outputs = [name for name in op.outputs if name]
        out_shape = self.shape(outputs[0]) if outputs else None
        held = self.constant(op.inputs[2])
        bias = self.shape(op.inputs[2]) if held is None else held.shape
        if not out_shape or out_shape[0] != self.symbol or bias is None or len(bias) != 2:
            return None
        if bias[0] in (1, self.symbol):
            return None
        return _Pin(
            net,
            index,
            "lost",
            f"adds a bias {op.inputs[2]!r} of shape {list(bias)}, one row per row of the "
            f"exported batch: at another batch it cannot broadcast to the output",
        )

    def _computed_size(self, op: Op) -> bool:
        """Whether ``op`` sizes its output by a value computed at run time (a ``Reshape``
        target from ``Shape`` arithmetic), which an export with a dynamic batch writes so
        that it follows the batch, and inference often cannot."""
        position = 1 if op.type == "Reshape" else _SHAPE_INPUTS.get(op.type)
        if position is None or position >= len(op.inputs) or not op.inputs[position]:
            return False
        return self.constant(op.inputs[position]) is None

    def _renamed_by_inference(self, op: Op, outputs: list[str]) -> bool:
        """Whether a broadcasting op (``Add``, ``Where``) meets the batch with a dim sized at
        run time and gives an output inference could only name anew: where an export dynamic
        already adds its input to a value reshaped from computed shapes (a transformer's
        residual ``Add`` of its attention), inference makes up a dim (``unk__5``), or none, for
        what is the batch at run time. Axes align from the right, as broadcasting does; any
        other op (a ``Concat`` or ``Slice`` along the batch) is checked as before."""
        if not self.table.broadcasts(op):
            return False
        shapes = [self.shape(name) or () for name in op.inputs]
        for position, (name, shape) in enumerate(zip(op.inputs, shapes, strict=True)):
            batch = self.batch_position(name)
            if batch is None:
                continue
            from_end = len(shape) - batch
            run_time = [
                other[-from_end]
                for index, other in enumerate(shapes)
                if index != position and len(other) >= from_end
            ]
            if not any(_unsized(dim) and dim != self.symbol for dim in run_time):
                continue
            for output in outputs:
                out_shape = self.shape(output) or ()
                if len(out_shape) >= from_end and _unsized(out_shape[-from_end]):
                    return True
        return False

    def _folded_by_the_export(self, op: Op) -> bool:
        """Whether ``op`` is a ``Reshape`` folding the batch into its target's ``-1``, the
        entries before it being the input's own leading dims (``x.view(-1, 32)`` of
        ``[T, B, 4, 8]``, the tokens of a transformer; ``[T, B, 32] -> [0, -1, 8]``, its
        heads). An export dynamic already writes that so, and the batch is no axis after it
        for the checks to follow; ``[N, 4] -> [2, -1]``, whose ``2`` deals the rows out, is
        no such fold."""
        batch = self.batch_position(op.inputs[0]) if op.inputs else None
        target = (
            self.constant(op.inputs[1]) if op.type == "Reshape" and len(op.inputs) > 1 else None
        )
        if batch is None or target is None or target.ndim != 1:
            return False
        entries = [int(v) for v in target]
        if entries.count(-1) != 1:
            return False
        position = entries.index(-1)
        data = self.shape(op.inputs[0]) or ()
        allowzero = bool(op.arg("allowzero", 0))
        lead = _resolved(data, entries[:position], allowzero)
        return position <= batch and lead == list(data[:position])

    def _states(self, net: Net, index: int, op: Op) -> _Pin | None:
        positions = _STATES.get(op.type, ())
        if not positions or self.batch_position(op.inputs[0]) is None:
            return None
        for position in positions:
            name = op.inputs[position] if position < len(op.inputs) else ""
            if not name or self.batch_position(name) is not None:
                continue
            return _Pin(
                net,
                index,
                "state",
                f"starts from the initial state {name!r} (input {position}) made for one "
                "batch size",
            )
        return None

    # -- fixing pins ------------------------------------------------------------------------

    def _fix(self, pin: _Pin) -> bool:
        op = pin.net[pin.index]
        if (self.table.opset() or 1) < 8:
            return False  # the rewrites use Expand and Reshape targets with 0: opset 8 on
        if pin.kind in ("lost", "untyped") and op.type == "Reshape":
            return self._fix_reshape(pin.net, pin.index, op)
        if (
            pin.kind in ("lost", "untyped")
            and op.type in _SHAPE_INPUTS
            and self._fix_size_input(pin.net, pin.index, op, _SHAPE_INPUTS[op.type])
        ):
            return True
        if pin.kind == "untyped":
            return self._fix_maker_inputs(pin.net, op)
        if pin.kind == "state":
            return self._fix_states(pin.net, pin.index, op)
        return False

    def _fix_reshape(self, net: Net, index: int, op: Op) -> bool:
        """A constant target holding the exported batch: at the input's batch position it
        becomes ``0`` (copy that dim); elsewhere, when it is the only entry of that size,
        ``-1`` (what is left once the other dims are taken: the batch), and the output is
        declared with the batch there, which inference cannot work out from ``-1``."""
        batch = self.batch_position(op.inputs[0])
        target = self.constant(op.inputs[1]) if len(op.inputs) > 1 else None
        if batch is None or target is None or target.ndim != 1:
            return False
        entries = [int(v) for v in target]
        allowzero = bool(op.arg("allowzero", 0))
        if -1 in entries and self._follow_inferred_batch(net, op, batch, entries, allowzero):
            return True  # the -1 is the batch (a batch-1 export's view(-1, 1, 6) too)
        if self.size is None:
            return False
        if batch < len(entries) and entries[batch] == self.size:
            position = batch
            others = entries[:batch] + entries[batch + 1 :]
        elif entries.count(self.size) == 1:
            position = entries.index(self.size)
            others = entries[:position] + entries[position + 1 :]
        else:
            return False
        data = self.shape(op.inputs[0]) or ()
        if not _rows_stay_apart(data, batch, entries, position, allowzero):
            raise _Refused(
                _Pin(
                    net,
                    index,
                    "mixes",
                    f"moves the batch from axis {batch} of {list(data)} to axis {position} "
                    f"of its target {entries} with other elements before it: at batch "
                    f"{self.symbol} the rows would mix (the reshape is right at batch "
                    f"{self.size} only)",
                )
            )
        if position == batch and (not allowzero or 0 not in others):
            entries[position] = 0
            if allowzero:
                op = op.without_arg("allowzero")
        elif -1 not in others and 0 not in others:
            entries[position] = -1
        else:
            return False
        shape: list[Dim] = [
            self.symbol if i == position else (data[i] if entry == 0 else entry)
            for i, entry in enumerate(entries)
        ]
        declare = entries[position] == -1 and _undeclared(net, op.outputs[0])
        elem_type = self.elem_type(op.inputs[0])
        with net.edit() as edit:
            name = self._shape_constant(edit, op.inputs[1], entries)
            edit.set_op(index, op.replace(inputs=[op.inputs[0], name, *op.inputs[2:]]))
            if declare and elem_type and all(isinstance(d, int | str) for d in shape):
                edit.set_type(op.outputs[0], ValueType(elem_type, tuple(shape)))
        return True

    def _follow_inferred_batch(
        self, net: Net, op: Op, batch: int, entries: list[int], allowzero: bool
    ) -> bool:
        """A target whose ``-1`` is the batch (``x.view(-1, 2, 3)`` of a ``[N, 6]``: as many
        elements before and after it as around the input's batch), which inference cannot
        work out: the output is declared with the batch there, nothing else changes."""
        if entries.count(-1) != 1:
            return False
        position = entries.index(-1)
        data = self.shape(op.inputs[0]) or ()
        resolved = _resolved(data, entries, allowzero)
        rest_in = [d for d in data[batch + 1 :] if isinstance(d, int)]
        rest_out = [d for d in resolved[position + 1 :] if isinstance(d, int) and d >= 0]
        if (
            len(rest_in) < len(data) - batch - 1
            or len(rest_out) < len(resolved) - position - 1
            or math.prod(rest_in) != math.prod(rest_out)
            or not _rows_stay_apart(data, batch, entries, position, allowzero)
        ):
            return False
        shape: list[Dim] = [self.symbol if i == position else d for i, d in enumerate(resolved)]
        elem_type = self.elem_type(op.inputs[0])
        if not elem_type or not all(isinstance(d, int | str) for d in shape):
            return False
        with net.edit() as edit:
            edit.set_type(op.outputs[0], ValueType(elem_type, tuple(shape)))
        return True

    def elem_type(self, name: str) -> int:
        value_type = self.types.get(name)
        return 0 if value_type is None else value_type.elem_type

    def _resize_keeps_batch(self, net: Net, op: Op, batch: int) -> bool:
        """A ``Resize`` scaling the batch by 1, or sizing it to the input's batch as data
        propagation knows: its output keeps the batch, which inference cannot tell."""
        scales = self.constant(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
        if scales is not None and scales.ndim == 1 and batch < len(scales):
            return bool(scales[batch] == 1) and self._declare_batch(net, op, batch)
        sizes = op.inputs[3] if len(op.inputs) > 3 else ""
        shape = self.shape(sizes)
        if not sizes or shape is None or len(shape) != 1 or not isinstance(shape[0], int):
            return False
        known = self.table.shape_values(self.model, {sizes: (7, shape[0])}, {sizes: True})
        entries = known.get(sizes)
        return (
            entries is not None
            and batch < len(entries)
            and entries[batch] == self.symbol
            and self._declare_batch(net, op, batch)
        )

    def _declare_batch(self, net: Net, op: Op, position: int) -> bool:
        """Declare ``op``'s output with the batch at ``position``: an op that keeps the batch
        where inference loses it (a ``Resize`` scaling it by 1)."""
        output = op.outputs[0]
        shape = self.shape(output)
        if shape is None or position >= len(shape) or not _undeclared(net, output):
            return False
        dims = list(shape)
        dims[position] = self.symbol
        with net.edit() as edit:
            edit.set_type(output, ValueType(self.elem_type(output), tuple(dims)))
        return True

    def _batch_vector(self, source: str, axis: int, hint: str) -> tuple[list[Op], str]:
        """Ops computing ``[N]`` from the value ``source`` (whose batch is on ``axis``)."""
        shape, index, vector = (
            self.names.fresh(f"{hint}_shape"),
            self.names.fresh(f"{hint}_batch_index"),
            self.names.fresh(f"{hint}_batch"),
        )
        self._pending[index] = np.asarray([axis], np.int64)
        return [
            Op("Shape", [source], [shape]),
            Op("Gather", [shape, index], [vector], args={"axis": 0}),
        ], vector

    def _dynamic(
        self, entries: list[int], position: int, source: str, axis: int, hint: str
    ) -> tuple[list[Op], str]:
        """Ops computing ``entries`` with the one at ``position`` the batch of ``source``."""
        ops, vector = self._batch_vector(source, axis, hint)
        pieces = []
        for part in (entries[:position], None, entries[position + 1 :]):
            if part is None:
                pieces.append(vector)
            elif part:
                name = self.names.fresh(f"{hint}_part")
                self._pending[name] = np.asarray(part, np.int64)
                pieces.append(name)
        joined = self.names.fresh(f"{hint}_dynamic")
        ops.append(Op("Concat", pieces, [joined], args={"axis": 0}))
        return ops, joined

    def _source(self, op: Op) -> tuple[str, int]:
        """A batched value the op can read for the batch: one of its inputs, else a graph
        input (visible in every body)."""
        for name in op.inputs:
            position = self.batch_position(name)
            if position is not None:
                return name, position
        name, axis = next(iter(self.axes.items()))
        return name, axis

    def _replace_input(
        self, net: Net, index: int, op: Op, slot: int, entries: list[int], position: int
    ) -> None:
        self._pending = {}
        source, axis = self._source(op)
        ops, joined = self._dynamic(entries, position, source, axis, op.inputs[slot] or op.type)
        inputs = list(op.inputs)
        inputs[slot] = joined
        with net.edit() as edit:
            for name, value in self._pending.items():
                edit.set_initializer(name, ArrayTensor(value))
            edit.insert(index, ops)
            edit.set_op(index, op.replace(inputs=inputs))

    def _fix_size_input(self, net: Net, index: int, op: Op, slot: int) -> bool:
        """A ``Resize``/``Expand``/``Tile`` of a batched value whose size input holds the
        exported batch at the batch position."""
        batch = self.batch_position(op.inputs[0])
        values = self.constant(op.inputs[slot]) if len(op.inputs) > slot else None
        if batch is not None and op.type == "Resize" and values is None:
            return self._resize_keeps_batch(net, op, batch)
        if batch is None or values is None or values.ndim != 1:
            return False
        entries = [int(v) for v in values]
        data_rank = len(self.shape(op.inputs[0]) or ())
        position = batch + len(entries) - data_rank if op.type == "Expand" else batch
        if not 0 <= position < len(entries) or entries[position] != self.size:
            return False
        if op.type == "Tile":
            entries[position] = 1  # the batch is already N: repeat it once
            return self._set_constant(net, index, op, slot, entries)
        if op.type == "Expand":
            entries[position] = 1  # broadcasting keeps the input's batch
            return self._set_constant(net, index, op, slot, entries)
        self._replace_input(net, index, op, slot, entries, position)
        shape: list[Dim] = list(entries)
        shape[position] = self.symbol
        elem_type = self.elem_type(op.inputs[0])
        if elem_type and _undeclared(net, op.outputs[0]):
            with net.edit() as edit:  # inference does not read sizes it has to propagate
                edit.set_type(op.outputs[0], ValueType(elem_type, tuple(shape)))
        return True

    def _set_constant(self, net: Net, index: int, op: Op, slot: int, entries: list[int]) -> bool:
        inputs = list(op.inputs)
        with net.edit() as edit:
            inputs[slot] = self._shape_constant(edit, op.inputs[slot], entries)
            edit.set_op(index, op.replace(inputs=inputs))
        return True

    def _shape_constant(self, edit: Edit, replaced: str, entries: list[int]) -> str:
        """The name of an int64 constant holding ``entries``, to read instead of ``replaced``:
        the one this attempt made already for the same value and name, else a new one."""
        self._displaced.add(replaced)
        key = (replaced, tuple(entries))
        name = self._made.get(key)
        if name is None:
            name = self._made[key] = self.names.fresh(f"{replaced}_batch")
            edit.set_initializer(name, ArrayTensor(np.asarray(entries, np.int64)))
        return name

    def _drop_displaced(self) -> None:
        """Drop the initializers the rewrites left unread (their ops read new constants)."""
        read = {name for op in self.net for name in op.inputs}
        read |= names_in_nested_nets(self.net) | set(self.net.external_outputs)
        read |= set(self.net.external_inputs)  # an initializer a caller may feed stays
        unread = [n for n in self._displaced if n in self.net.initializers and n not in read]
        if unread:
            with self.net.edit() as edit:
                for name in sorted(unread):
                    edit.set_initializer(name, None)

    def _fix_maker_inputs(self, net: Net, op: Op) -> bool:
        """A node that cannot be typed because a batch-free input made for the exported batch
        meets a batched one: that input's ``ConstantOfShape``/``Expand``/``Tile`` gets the
        batch at run time."""
        batched = [name for name in op.inputs if self.batch_position(name) is not None]
        if not batched or self.size is None:
            return False
        reference = self.shape(batched[0]) or ()
        batch = reference.index(self.symbol)
        for name in op.inputs:
            if not name or name in batched:
                continue
            producer = next(
                (i for i, candidate in enumerate(net) if name in candidate.outputs), None
            )
            if producer is None:
                continue
            maker = net[producer]
            slot = _MAKERS.get(maker.type)
            values = (
                None
                if slot is None or slot >= len(maker.inputs)
                else self.constant(maker.inputs[slot])
            )
            if slot is None or values is None or values.ndim != 1:
                continue
            entries = [int(v) for v in values]
            position = batch - (len(reference) - len(entries))
            if not 0 <= position < len(entries) or entries[position] != self.size:
                continue
            if maker.type == "Tile":
                data = self.constant(maker.inputs[0])
                if data is None or data.shape[position] != 1:
                    continue
            self._replace_input(net, producer, maker, slot, entries, position)
            return True
        return False

    def _fix_states(self, net: Net, index: int, op: Op) -> bool:
        axis = 0 if op.arg("layout", 0) else 1
        inputs = list(op.inputs)
        expansions: list[tuple[int, np.ndarray]] = []
        for position in _STATES[op.type]:
            name = inputs[position] if position < len(inputs) else ""
            if not name or self.batch_position(name) is not None:
                continue
            state = self.constant(name)
            if state is None or state.ndim != 3:
                return False
            if not np.any(state):
                inputs[position] = ""
                continue
            first = np.take(state, [0], axis=axis)
            if not np.array_equal(np.broadcast_to(first, state.shape), state):
                return False
            expansions.append((position, first))
        while inputs and not inputs[-1]:
            inputs.pop()
        self._pending = {}
        new_ops: list[Op] = []
        x_batch = self.batch_position(op.inputs[0])
        assert x_batch is not None  # _states only pins ops whose data input is batched
        for position, first in expansions:
            row = self.names.fresh(f"{op.inputs[position]}_row")
            self._pending[row] = first
            entries = [1, 1, 1]
            ops, joined = self._dynamic(entries, axis, op.inputs[0], x_batch, op.inputs[position])
            expanded = self.names.fresh(f"{op.inputs[position]}_batch")
            new_ops += [*ops, Op("Expand", [row, joined], [expanded])]
            inputs[position] = expanded
        with net.edit() as edit:
            for name, value in self._pending.items():
                edit.set_initializer(name, ArrayTensor(value))
            if new_ops:
                edit.insert(index, new_ops)
            edit.set_op(index, op.replace(inputs=inputs))
        return True


def _resolved(data: tuple[Dim, ...], entries: list[int], allowzero: bool) -> list[Dim]:
    """A Reshape target's ``entries`` with each ``0`` (copy the dim, unless ``allowzero``)
    replaced by the input's dim ``data`` holds there."""
    return [
        data[i] if entry == 0 and not allowzero and i < len(data) else entry
        for i, entry in enumerate(entries)
    ]


def _rows_stay_apart(
    data: tuple[Dim, ...], batch: int, entries: list[int], position: int, allowzero: bool
) -> bool:
    """Whether a Reshape of ``data`` (batch on axis ``batch``) to ``entries`` (batch on axis
    ``position``) keeps each batch row's elements together: a row-major reshape does when as
    many elements come before the batch in its output as in its input (then the elements
    after it match too). ``[1, 8] -> [8, 1]`` is an identity at batch 1 and a transposition
    of rows at batch 3. The same dims before it (a symbolic one copied by ``0``) are as many
    elements too."""
    after = _resolved(data, entries[:position], allowzero)
    if list(data[:batch]) == after:
        return True
    before = [d for d in data[:batch] if isinstance(d, int)]
    known = [d for d in after if isinstance(d, int) and d >= 0]
    if len(before) < batch or len(known) < position:
        return False  # a symbolic or inferred (-1) dim before the batch: cannot tell
    return math.prod(before) == math.prod(known)


def _undeclared(net: Net, name: str) -> bool:
    """Whether ``net`` declares no shape for value ``name`` (a graph output's shape is dropped
    while the batch is made symbolic, for inference to work it out)."""
    declared = net.types.get(name)
    return declared is None or declared.shape is None


def _dims(value_type: ValueType) -> tuple[Dim, ...]:
    return () if value_type.shape is None else value_type.shape


def _parse_axes(items: tuple[str, ...], model: Model) -> dict[str, int]:
    """The ``inputs`` option: graph inputs of a known rank and an axis within it."""
    net = model.predict_net
    found = {}
    for item in items:
        name, _, axis = item.rpartition("=")
        if not name or not axis.lstrip("-").isdigit():
            raise PipelineSpecError(
                f"make-dynamic-batch: inputs items are NAME=AXIS (x=0;h=1), got {item!r}"
            )
        declared = net.types.get(name)
        if name not in net.external_inputs or declared is None or declared.shape is None:
            raise PreconditionError(
                f"make-dynamic-batch: {name!r} is not a graph input of a known rank; the "
                f"inputs are {', '.join(net.external_inputs)}"
            )
        rank = len(declared.shape)
        if not -rank <= int(axis) < rank:
            raise PreconditionError(f"make-dynamic-batch: {name!r} has no axis {axis}")
        found[name] = int(axis) % rank
    return found


@register_pass
@dataclass(frozen=True)
class MakeDynamicBatch(Pass):
    """Make the batch dimension symbolic, rewriting what pins it, or refuse naming the node
    (see the module docstring).

    Options:
        symbol: the name of the batch dim when no input has one at its batch axis.
        inputs: ``NAME=AXIS`` items (``x=1;h=1``) choosing the batched inputs and their axes
            (default: found as the module docstring says).

    Stats: ``symbol`` (the batch dim's name), ``rewrites`` (nodes rewritten).
    """

    name: ClassVar[str] = "make-dynamic-batch"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    idempotent: ClassVar[bool] = True
    symbol: str = "N"
    inputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.symbol.strip():
            raise PipelineSpecError(
                "make-dynamic-batch: symbol must name the batch dim (an empty one would tie "
                "nothing: each dim would be its own unknown)"
            )
        if self.symbol.strip().lstrip("+-").isdigit():
            raise PipelineSpecError(
                f"make-dynamic-batch: symbol {self.symbol!r} is a number, which would read as "
                "a size: name the batch dim (N, batch_size)"
            )

    def call(self, model: Model) -> PassResult:
        """Try axis 0 (then axis 1 when a sequence op refuses axis 0); each try is
        rolled back when it is refused."""
        table = cast("OnnxOpTable", op_table(model))
        before = model.revision
        trials = [_parse_axes(self.inputs, model)] if self.inputs else [_batch_axes(model, 0)]
        if not trials[0]:
            return PassResult(model, False, {"symbol": "", "rewrites": 0})
        FoldConstants()(model)  # targets, sizes and pads computed from constants become constants
        first: _Refused | None = None
        symbolic: str | None = None  # the first refused attempt's symbol, when already so
        mixed = None if self.inputs else _mixed_batch_axes(model)
        tried: list[dict[str, int]] = []  # each choice once: two sequence ops may refuse both
        while trials:
            axes = trials.pop(0)
            tried.append(axes)
            state = model.snapshot()
            attempt = _Attempt(model, table, axes, self.symbol)
            try:
                stats = attempt.run()
            except _Refused as refusal:
                model.restore(state)
                if first is None:
                    first, symbolic = refusal, attempt.symbol if attempt.already else None
                more = [mixed]  # recurrent states batched on axis 1
                if refusal.pin.kind == "sequence" and not self.inputs:
                    more.insert(0, _batch_axes(model, 1))
                trials += [m for m in more if m and m not in tried and m not in trials]
                continue
            if attempt.already and not stats["rewrites"]:
                model.restore(state)  # dynamic already, nothing pinned: left as exported
            return PassResult(model, model.revision != before, stats)
        assert first is not None
        if first.pin.kind == "unknown":  # no choice of axes gets through such an op
            hint = (
                "; make the batch dynamic on the model before the step that brought that op "
                "in (a quantizer's, an optimizer's), where every op is standard"
            )
        else:
            hint = "" if self.inputs else f"; {_axes_hint(model)}"
        if symbolic is not None:  # nothing to make dynamic: the refusal is the checks'
            hint += (
                f"; the inputs' batch is symbolic already ({symbolic!r}): without "
                "make-dynamic-batch (the CLI's --dynamic-batch) the model stays as exported"
            )
        raise PreconditionError(f"cannot make the batch dynamic: {first}{hint}")


def _batch_axes(model: Model, axis: int) -> dict[str, int]:
    """The graph inputs batched on ``axis``: those whose dim there is the first one's size
    (or symbolic)."""
    net = model.predict_net
    found: dict[str, int] = {}
    size: Dim = None
    for name in net.external_inputs:
        value_type = net.types.get(name)
        if name in net.initializers or value_type is None or value_type.kind != "tensor":
            continue
        shape = value_type.shape
        if shape is None or len(shape) <= axis:
            continue
        dim = shape[axis]
        if isinstance(dim, int):
            if size is None:
                size = dim
            if dim != size:
                continue
        elif dim is None:
            continue
        found[name] = axis
    return found


def _mixed_batch_axes(model: Model) -> dict[str, int] | None:
    """The graph inputs batched on axis 0 as the first one is, and those whose axis 1 has
    that size instead (a recurrent net's initial states, [layers, batch, hidden], beside a
    batch-first input); ``None`` when no input is of the second kind."""
    first = _batch_axes(model, 0)
    net = model.predict_net
    size = next((net.types[name].shape[0] for name in first), None)  # type: ignore[index]
    if not isinstance(size, int):
        return None
    found = dict(first)
    for name in net.external_inputs:
        value_type = net.types.get(name)
        if name in found or name in net.initializers or value_type is None:
            continue
        shape = value_type.shape
        if value_type.kind == "tensor" and shape is not None and shape[1:2] == (size,):
            found[name] = 1
    return found if len(found) > len(first) else None


def _axes_hint(model: Model) -> str:
    """How to name each input's batch axis, with the inputs of this model."""
    net = model.predict_net
    inputs = [n for n in net.external_inputs if n not in net.initializers][:4]
    items = ";".join(f"{name}=0" for name in inputs) or "x=0"
    return (
        "if an input holds its batch on another axis, name each one's, as in "
        f"-p 'make-dynamic-batch{{inputs={items}}}' with the right axes"
    )


def _unsized(dim: Dim) -> bool:
    """Whether a dim is known by a name or not at all (no size)."""
    return not isinstance(dim, int)

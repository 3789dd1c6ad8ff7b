"""A model at a glance: what ``graphtools show`` prints before anyone asks for a dump.

``summarize(model, input_shapes)`` returns data (the CLI renders it as text or JSON): op
counts and the op-type histogram, inputs and outputs with their static types (from
``graphtools.analysis.shapes`` with the given or guessed input shapes), the parameters the
init_net provides and their total size, the devices ops run on, and the nested nets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np

from graphtools.analysis.input_shapes import first_readers, placeholder_inputs
from graphtools.analysis.shapes import TensorType, fill_types, infer_model_shapes, infer_shapes
from graphtools.errors import GraphToolsError
from graphtools.ir import Model, Net, Op
from graphtools.printer import format_device

__all__ = ["BlobSummary", "ModelSummary", "NestedSummary", "dtype_bytes", "summarize"]


@dataclass(frozen=True)
class BlobSummary:
    """An input, output or parameter: its name and static type (``?`` parts unknown)."""

    name: str
    type: str
    size: int | None = None
    """Values it holds, when its shape is known."""


@dataclass(frozen=True)
class NestedSummary:
    """A net held in an op argument (If branches, loop bodies, RecurrentNetwork steps)."""

    op_index: int
    op_type: str
    argument: str
    name: str
    ops: int


@dataclass
class ModelSummary:
    """What ``summarize`` found; see the module docstring.

    Attributes:
        name: the predict_net's name.
        ops: top-level predict_net ops.
        init_ops: init_net ops (``None`` without an init_net).
        op_types: predict_net op types with their counts (nested nets included), most first.
        inputs: data inputs (external inputs the init_net does not fill, and undeclared reads).
        outputs: declared external outputs (empty when the net declares none).
        params: blobs the init_net fills that the predict_net reads.
        missing_params: blobs the predict_net reads at a parameter position (a weight, a
            bias) that nothing provides: a predict_net shipped without its init_net.
        devices: device of each op (``CPU`` when unset), with counts.
        nested: the nested nets.
        input_shapes: the input shapes the types were inferred with.
        contradiction: why the shape analysis refuses those shapes (a weight of another
            size than the computed shape before it), ``None`` when it accepts them; the
            types are then inferred from the parameters' types alone.
    """

    name: str | None
    ops: int
    init_ops: int | None
    op_types: list[tuple[str, int]] = field(default_factory=list)
    inputs: list[BlobSummary] = field(default_factory=list)
    outputs: list[BlobSummary] = field(default_factory=list)
    params: list[BlobSummary] = field(default_factory=list)
    missing_params: list[str] = field(default_factory=list)
    devices: list[tuple[str, int]] = field(default_factory=list)
    nested: list[NestedSummary] = field(default_factory=list)
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    contradiction: str | None = None

    @property
    def param_values(self) -> int:
        """Values the known parameters hold together (unknown sizes count 0)."""
        return sum(p.size or 0 for p in self.params)


def _size(t: TensorType) -> int | None:
    if t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return prod(int(d) for d in t.shape if d is not None)


def _types(net: Net, counter: Counter[str], devices: Counter[str]) -> None:
    for op in net:
        counter[op.type] += 1
        device = net.op_device(op)
        devices["CPU" if device is None else format_device(device)] += 1
        for _, nested in op.nested_nets():
            _types(nested, counter, devices)


def _nested_first_readers(net: Net) -> dict[str, tuple[int, Op, int]]:
    """``first_readers`` of the nets nested in ``net`` (deepest included), the first found
    winning: where a blob ``net`` itself never reads is read."""
    found: dict[str, tuple[int, Op, int]] = {}
    for op in net:
        for _, nested in op.nested_nets():
            for name, reader in first_readers(nested).items():
                found.setdefault(name, reader)
            for name, reader in _nested_first_readers(nested).items():
                found.setdefault(name, reader)
    return found


def _nested(net: Net) -> list[NestedSummary]:
    found = []
    for index, op in enumerate(net):
        for argument, nested in op.nested_nets():
            found.append(
                NestedSummary(index, op.type, argument or "", nested.name or "", len(nested))
            )
    return found


def summarize(
    model: Model,
    input_shapes: Mapping[str, Sequence[int]],
    fed_as_input: Callable[[str, int], bool] = lambda op_type, position: False,
) -> ModelSummary:
    """Summarize ``model``; ``input_shapes`` (given or guessed) type the inputs and outputs.

    A blob nothing provides is an input when its first reader (in the predict_net, else in a
    net nested in it: an ``If`` branch's weights) reads it as data (input 0) or where
    ``fed_as_input(op type, input position)`` says ``verify`` feeds an input (a detector's
    ``im_info``: ``graphtools.feeds.roles.ROLES``), else a missing parameter."""
    net = model.predict_net
    counter: Counter[str] = Counter()
    devices: Counter[str] = Counter()
    _types(net, counter, devices)
    init = model.init_net
    summary = ModelSummary(
        name=net.name,
        ops=len(net),
        init_ops=None if init is None else len(init),
        op_types=sorted(counter.items(), key=lambda item: (-item[1], item[0])),
        devices=sorted(devices.items(), key=lambda item: (-item[1], item[0])),
        nested=_nested(net),
        input_shapes={name: tuple(int(d) for d in shape) for name, shape in input_shapes.items()},
    )
    try:
        filled = {} if init is None else fill_types(init)
    except GraphToolsError:
        filled = {}
    # an init_net placeholder of a data input is an input (verify feeds it), not a parameter
    placeholders = placeholder_inputs(model)
    produced = set() if init is None else {name for op in init for name in op.outputs}
    produced.difference_update(placeholders)
    try:
        info = infer_model_shapes(model, summary.input_shapes)
    except GraphToolsError as exc:
        summary.contradiction = str(exc)
        try:
            info = infer_shapes(net, summary.input_shapes, params=filled)
        except GraphToolsError:
            info = None

    def typed(name: str) -> BlobSummary:
        t = TensorType()
        if info is not None and name in info.versions:
            t = info.final(name)
        return BlobSummary(name, str(t), _size(t))

    readers = first_readers(net)
    nested_readers = _nested_first_readers(net)
    declared = net.external_input_set()
    for name in dict.fromkeys([*net.external_inputs, *readers]):  # each name once
        if name in produced:
            continue
        reader = readers.get(name) or nested_readers.get(name)
        read_as = None if reader is None else (reader[1].type, reader[2])
        if (
            read_as is not None
            and read_as[1] >= 1
            and not fed_as_input(*read_as)
            and name not in summary.input_shapes
        ):
            summary.missing_params.append(name)
        elif reader is not None or name in declared:
            first = info.types.get((name, 0)) if info is not None else None
            t = first if first is not None else TensorType()
            summary.inputs.append(BlobSummary(name, str(t), _size(t)))
    summary.outputs = [typed(name) for name in net.external_outputs]
    for name in sorted(produced & set(readers)):
        t = filled.get(name, TensorType())
        summary.params.append(BlobSummary(name, str(t), _size(t)))
    return summary


def dtype_bytes(type_text: str) -> int:
    """Bytes per value of a ``TensorType`` text's dtype (4 when unknown)."""
    head = type_text.split("[", 1)[0].removeprefix("int8q(").rstrip(")")
    try:
        return int(np.dtype(head).itemsize)
    except TypeError:
        return 4

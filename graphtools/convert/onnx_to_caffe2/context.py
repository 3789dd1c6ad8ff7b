"""What a converter sees of the ONNX op it converts, and how it emits Caffe2 ops.

``NodeContext`` gives the op (an IR ``Op`` of the ONNX dialect), its attributes (decoded from
its arguments), its inputs' constant values when the importer knows them (initializers,
``Constant`` outputs), static shapes from ONNX shape inference, fresh blob names, and ``emit``
to append a Caffe2 op. Converters raise ``ctx.refuse(...)``, an ``UnsupportedOpError`` naming
the node, op type, opset and attribute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from onnx import AttributeProto

from graphtools.analysis.scopes import NameSource
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Argument, Net, Op, make_arg

__all__ = ["NodeContext", "Shape", "attribute_value", "int_list"]

Shape = tuple[int | None, ...]
"""A static shape from ONNX shape inference; ``None`` marks an unknown or symbolic dim."""


class GraphImporter(Protocol):
    """What a converter's context uses of the importer of the graph it converts (the importer
    module, which imports the converters, implements it)."""

    graph_label: str
    folded: set[str]
    shapes: Mapping[str, Shape]
    names: NameSource
    ops: list[Op]

    def constant(self, name: str) -> np.ndarray | None: ...

    def add_constant(self, name: str, value: np.ndarray, where: str) -> None: ...

    def import_subgraph(self, graph: Net, outputs: Sequence[str], ctx: NodeContext) -> Net: ...

    def import_body(self, graph: Net, ctx: NodeContext) -> list[Op]: ...


def int_list(values: Any) -> list[int]:
    """An array or sequence as a list of Python ints (for Caffe2 list arguments)."""
    return [int(v) for v in np.asarray(values).reshape(-1)]


_A = AttributeProto
_FIELDS: dict[int, str] = {
    _A.FLOAT: "f",
    _A.INT: "i",
    _A.STRING: "s",
    _A.TENSOR: "t",
    _A.SPARSE_TENSOR: "t",
    _A.TYPE_PROTO: "t",
    _A.GRAPH: "n",
    _A.FLOATS: "floats",
    _A.INTS: "ints",
    _A.STRINGS: "strings",
    _A.TENSORS: "tensors",
    _A.SPARSE_TENSORS: "tensors",
    _A.TYPE_PROTOS: "tensors",
    _A.GRAPHS: "nets",
}
"""The Argument field holding an ONNX attribute of each type."""


def attribute_value(argument: Argument) -> Any:
    """An ONNX attribute's value from its argument, as ``onnx.helper.get_attribute_value``
    gives it but with strings decoded: a scalar, a tensor message, a net (a graph), or a list;
    an argument built without its type (``kind``) gives the field that holds a value."""
    field_name = _FIELDS.get(argument.kind) if argument.kind is not None else None
    value = argument.value if field_name is None else getattr(argument, field_name)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, tuple):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


@dataclass
class NodeContext:
    """One ONNX op being converted (see the module docstring)."""

    node: Op
    index: int
    opset: int
    since: int
    importer: GraphImporter
    attrs: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.attrs = {a.name: attribute_value(a) for a in self.node.args}

    # -- describing the node ----------------------------------------------------------------

    @property
    def where(self) -> str:
        """``node #i 'name' (Type, opset N)`` plus the graph for nodes inside sub-graphs."""
        node = self.node
        name = f" {node.name!r}" if node.name else ""
        graph = self.importer.graph_label
        return f"node #{self.index}{name} ({node.type}, opset {self.opset}{graph})"

    def refuse(self, reason: str, attribute: str | None = None) -> UnsupportedOpError:
        """An ``UnsupportedOpError`` for this node; ``attribute`` names the offending one."""
        what = ""
        if attribute is not None:
            shown = self.attrs.get(attribute, "<input>")
            if isinstance(shown, Net):
                shown = f"graph {shown.name!r}"
            what = f" attribute {attribute!r}={shown!r}"
        return UnsupportedOpError(f"{self.where}:{what} {reason}")

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's decoded value, else ``default``."""
        return self.attrs.get(name, default)

    # -- inputs and outputs -----------------------------------------------------------------

    def input(self, index: int) -> str | None:
        """Name of input ``index``, ``None`` when absent or empty (optional input skipped)."""
        inputs = self.node.inputs
        if index < len(inputs) and inputs[index]:
            return inputs[index]
        return None

    def output(self, index: int) -> str | None:
        """Name of output ``index``, ``None`` when absent or empty (not requested)."""
        outputs = self.node.outputs
        if index < len(outputs) and outputs[index]:
            return outputs[index]
        return None

    @property
    def inputs(self) -> list[str]:
        """The present inputs, in order."""
        return [name for name in self.node.inputs if name]

    @property
    def outputs(self) -> list[str]:
        """The requested outputs, in order."""
        return [name for name in self.node.outputs if name]

    def const(self, index: int) -> np.ndarray | None:
        """The value of input ``index`` when it is a known constant, else ``None``."""
        name = self.input(index)
        return None if name is None else self.importer.constant(name)

    def need_const(self, index: int, what: str) -> np.ndarray:
        """The constant value of input ``index``; refused when it is computed at run time.

        The input then counts as folded into the op's arguments (its initializer is dropped
        when nothing else reads it).
        """
        value = self.const(index)
        name = self.input(index)
        if value is None or name is None:
            raise self.refuse(
                f"input {index} ({what}, {name!r}) is computed at run time; Caffe2 takes it "
                "as an argument, so only a constant (initializer or Constant) is supported"
            )
        self.importer.folded.add(name)
        return value

    def shape(self, name: str | None) -> Shape | None:
        """The static shape ONNX shape inference found for ``name``, else ``None``."""
        if name is None:
            return None
        value = self.importer.constant(name)
        if value is not None:
            return tuple(value.shape)
        return self.importer.shapes.get(name)

    def rank(self, name: str | None) -> int | None:
        """The rank of ``name`` when known."""
        shape = self.shape(name)
        return None if shape is None else len(shape)

    def need_rank(self, name: str | None, why: str) -> int:
        """The rank of ``name``; refused when shape inference could not find it."""
        rank = self.rank(name)
        if rank is None:
            raise self.refuse(
                f"needs the rank of {name!r} ({why}), which shape inference could not determine"
            )
        return rank

    # -- emitting -----------------------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        """A blob name no other blob of the model uses."""
        return self.importer.names.fresh(hint)

    def emit(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **args: Any) -> Op:
        """Append the Caffe2 op ``op_type`` (arguments with value ``None`` are left out)."""
        made = [make_arg(k, v) for k, v in args.items() if v is not None]
        name = self.node.name or None
        op = Op(op_type, inputs, outputs, name=name, args=made)
        self.importer.ops.append(op)
        return op

    def subgraph(self, graph: Net, outputs: Sequence[str]) -> Net:
        """Convert a sub-graph attribute into a Caffe2 net writing ``outputs``."""
        return self.importer.import_subgraph(graph, outputs, self)

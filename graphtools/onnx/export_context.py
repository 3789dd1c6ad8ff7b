"""What an op exporter sees: the Caffe2 op, what is known about its blobs, and how to emit ONNX
nodes and constants."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Op
from graphtools.onnx.context import NameGen

__all__ = ["EXPORTERS", "ExportContext", "TypeInfo", "exporter", "onnx_int64"]


@dataclass(frozen=True)
class TypeInfo:
    """What is known of a blob: numpy dtype and shape (either may be ``None``; a dim is an
    int, a symbolic name, or ``None``)."""

    dtype: np.dtype[Any] | None
    shape: tuple[int | str | None, ...] | None


@dataclass
class ExportContext:
    """Shared state of one export; ``op``/``index`` name the op being exported.

    Attributes:
        opset: the target default-domain opset.
        names: fresh names for helper values.
        types: known types of blobs (params, inputs, shape analysis).
        read: every blob name some op reads or the graph outputs (to drop unused outputs).
        nodes: the ONNX nodes emitted so far.
        constants: initializers made for constant operands.
    """

    opset: int
    names: NameGen
    types: dict[str, TypeInfo]
    read: set[str]
    nodes: list[NodeProto] = field(default_factory=list)
    node_names: NameGen = field(default_factory=NameGen)
    constants: list[TensorProto] = field(default_factory=list)
    op: Op | None = None
    index: int = -1
    net_label: str = ""
    missing_rank: bool = False
    outer_names: frozenset[str] = frozenset()
    rewritten: frozenset[str] = frozenset()

    def refuse(self, reason: str) -> UnsupportedOpError:
        """An ``UnsupportedOpError`` naming the op being exported."""
        op_type = self.op.type if self.op is not None else "?"
        return UnsupportedOpError(
            f"op #{self.index} ({op_type}){self.net_label}: cannot export to ONNX opset "
            f"{self.opset}: {reason}"
        )

    def node(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
    ) -> None:
        """Append an ONNX node (attributes with value ``None`` are left out)."""
        kept = {k: v for k, v in attrs.items() if v is not None}
        name = self.op.name if self.op is not None and self.op.name else None
        if name is not None:  # ONNX node names are unique; one Caffe2 op may give several
            name = self.node_names.fresh(name)
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **kept))

    def fresh(self, hint: str) -> str:
        """A value name unused anywhere in the model."""
        return self.names.fresh(hint)

    def const(self, value: Any, hint: str, dtype: Any = None) -> str:
        """An initializer holding ``value`` (as ``dtype``); returns its name."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.constants.append(numpy_helper.from_array(array, name))
        return name

    def child(self, read: set[str], label: str) -> ExportContext:
        """A context for a sub-graph: same names, types and constants, its own nodes."""
        return ExportContext(
            self.opset,
            self.names,
            self.types,
            read,
            constants=self.constants,
            node_names=self.node_names,
            net_label=label,
            outer_names=self.outer_names,
            rewritten=self.rewritten,
        )

    def info(self, name: str) -> TypeInfo | None:
        """What is known of blob ``name``."""
        return self.types.get(name)

    def rank(self, name: str) -> int | None:
        """The rank of ``name`` when known."""
        info = self.types.get(name)
        if info is None or info.shape is None:
            self.missing_rank = True
            return None
        return len(info.shape)

    def need_rank(self, name: str, why: str) -> int:
        """The rank of ``name``; refused when unknown."""
        rank = self.rank(name)
        if rank is None:
            raise self.refuse(
                f"needs the rank of {name!r} ({why}); give value_info for the "
                "inputs so shapes can be inferred"
            )
        return rank

    def dtype(self, name: str, default: Any = np.float32) -> np.dtype[Any]:
        """The dtype of ``name``, else ``default``."""
        info = self.types.get(name)
        if info is None or info.dtype is None:
            return np.dtype(default)
        return info.dtype

    def used(self, name: str) -> bool:
        """Whether ``name`` is read by some op or is a graph output."""
        return name in self.read


ExportFn = Callable[[ExportContext, Op], None]
EXPORTERS: dict[str, ExportFn] = {}


def exporter(*op_types: str) -> Callable[[ExportFn], ExportFn]:
    """Register the decorated function as the exporter of the Caffe2 ``op_types``."""

    def register(fn: ExportFn) -> ExportFn:
        for op_type in op_types:
            if op_type in EXPORTERS:
                raise ValueError(f"an exporter for {op_type!r} is already registered")
            EXPORTERS[op_type] = fn
        return fn

    return register


def onnx_int64(values: Iterable[int]) -> np.ndarray:
    """``values`` as an int64 array (ONNX's type for axes, shapes, pads)."""
    return np.asarray(list(values), dtype=np.int64)

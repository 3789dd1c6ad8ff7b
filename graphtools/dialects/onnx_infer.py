"""What ONNX shape inference, with data propagation, knows about a model's values.

Two questions, both answered by ``onnx.shape_inference`` itself (never a shape rule of ours):

* ``inferred_types``: the type of every value of the main graph and, when asked, of every
  nested graph (values are named once model-wide in ONNX, so one mapping holds them all).
* ``shape_values``: the *values* of the small integer tensors exporters compute shapes with
  (``Shape -> Gather -> Unsqueeze -> Concat``). Data propagation works them out entry by entry,
  a symbolic dim staying a symbol (``[N, 512]``), but keeps them to itself; they are read back
  with probes: a copy of the model gets ``ConstantOfShape`` nodes whose output *shape* is the
  value asked about. One probe per value shifts the entries by a large constant first (so that
  the ``-1`` of a Reshape target is a valid dim) and gives every static entry; one probe per
  entry that is not static gives its symbol.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphtools.ir import Model
from graphtools.serde.onnx_codec import model_to_onnx_bytes, value_type_from_proto
from graphtools.values import Dim, ValueType

__all__ = ["SCALAR", "SHIFT", "inference_error", "inferred_types", "shape_values"]

SCALAR = -1
"""The length ``shape_values`` takes for a scalar (rank 0): it is asked as one entry."""
SHIFT = 1 << 40
"""What the static probe adds to each entry, so that negative entries make a valid shape."""
_PREFIX = "__graphtools_probe"
_INTEGERS = frozenset({TensorProto.INT64, TensorProto.INT32})
_ENTRIES = 8
"""Entries of one value whose symbols are asked for (shapes have few dims)."""


def _infer(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return onnx.shape_inference.infer_shapes(proto, data_prop=True)
        except Exception:  # inference refusing a model is not an error of the model's user
            return None


def _graphs(graph: onnx.GraphProto, nested: bool) -> list[onnx.GraphProto]:
    found = [graph]
    if not nested:
        return found
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                found.extend(_graphs(attribute.g, nested))
            for sub in attribute.graphs:
                found.extend(_graphs(sub, nested))
    return found


class InferredTypes(Mapping[str, ValueType]):
    """The types of a model's values as inference gave them, each decoded when first asked
    (a pass asks about a few values of a model with thousands)."""

    def __init__(self, infos: dict[str, onnx.ValueInfoProto]) -> None:
        self._infos = infos
        self._decoded: dict[str, ValueType] = {}

    def __getitem__(self, name: str) -> ValueType:
        found = self._decoded.get(name)
        if found is None:
            found = self._decoded[name] = value_type_from_proto(self._infos[name])
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)


def inferred_types(model: Model, *, nested: bool = False) -> Mapping[str, ValueType]:
    """The types inference gives the values of an ONNX model's main graph (and of its nested
    graphs with ``nested``); empty when inference refuses the model."""
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    inferred = _infer(proto)
    if inferred is None:
        return InferredTypes({})
    return InferredTypes(
        {
            info.name: info
            for graph in _graphs(inferred.graph, nested)
            for section in (graph.input, graph.value_info, graph.output)
            for info in section
        }
    )


def inference_error(model: Model) -> str | None:
    """What strict shape inference with data propagation says is wrong with ``model`` (the
    first node whose types do not fit), ``None`` when it accepts the model."""
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
        except Exception as exc:  # onnx raises InferenceError, ValidationError, RuntimeError
            text = " ".join(str(exc).split())
            return text[:500] or type(exc).__name__
    return None


def shape_values(
    model: Model,
    candidates: Mapping[str, tuple[int, int]],
    symbols: Mapping[str, bool] | None = None,
) -> dict[str, tuple[Dim, ...]]:
    """The values data propagation knows of the main graph's integer tensors ``candidates``
    (name -> (``TensorProto`` element type, length; ``SCALAR`` for a scalar)): each entry an
    ``int``, a symbolic name, or ``None`` when unknown. ``symbols`` names the values whose
    non-static entries should be asked for their symbol (a probe per entry). Values inference
    knows nothing of are left out; scalars come back as one entry.
    """
    opset = _default_opset(model)
    if opset is None or opset < 9 or not candidates:
        return {}
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    graph = proto.graph
    constant = _probe_constants(graph, opset)
    asked_symbols = symbols or {}
    static_probe: dict[str, str] = {}
    entry_probes: dict[str, list[str]] = {}
    for number, (name, (elem_type, length)) in enumerate(candidates.items()):
        if elem_type not in _INTEGERS:
            continue
        vector = _as_int64_vector(graph, name, elem_type, length, number, opset)
        shifted = f"{_PREFIX}{number}_shifted"
        static_probe[name] = f"{_PREFIX}{number}_static"
        graph.node.append(helper.make_node("Add", [vector, constant["shift"]], [shifted]))
        graph.node.append(helper.make_node("ConstantOfShape", [shifted], [static_probe[name]]))
        if asked_symbols.get(name):
            probes = []
            for entry in range(min(1 if length == SCALAR else length, _ENTRIES)):
                picked = f"{_PREFIX}{number}_entry{entry}"
                probes.append(f"{picked}_shape")
                graph.node.append(
                    helper.make_node("Gather", [vector, constant[f"index{entry}"]], [picked])
                )
                graph.node.append(helper.make_node("ConstantOfShape", [picked], [probes[-1]]))
            entry_probes[name] = probes
    inferred = _infer(proto)
    if inferred is None:
        return {}
    shapes = {
        info.name: info.type.tensor_type.shape
        for info in inferred.graph.value_info
        if info.name.startswith(_PREFIX) and info.type.tensor_type.HasField("shape")
    }
    found: dict[str, tuple[Dim, ...]] = {}
    for name, probe in static_probe.items():
        shape = shapes.get(probe)
        if shape is None:
            continue
        entries: list[Dim] = [
            dim.dim_value - SHIFT if dim.HasField("dim_value") else None for dim in shape.dim
        ]
        for position, entry_probe in enumerate(entry_probes.get(name, ())):
            entry_shape = shapes.get(entry_probe)
            if entries[position] is None and entry_shape is not None and entry_shape.dim:
                entries[position] = entry_shape.dim[0].dim_param or None
        found[name] = tuple(entries)
    return found


def _default_opset(model: Model) -> int | None:
    for domain in ("", "ai.onnx"):
        if domain in model.opset_imports:
            return int(model.opset_imports[domain])
    return None


def _probe_constants(graph: onnx.GraphProto, opset: int) -> dict[str, str]:
    """The initializers the probes read (the shift, entry indices, Unsqueeze axes)."""
    names = {"shift": f"{_PREFIX}_shift", "axes": f"{_PREFIX}_axes"}
    graph.initializer.append(numpy_helper.from_array(np.array([SHIFT], np.int64), names["shift"]))
    if opset >= 13:
        graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), names["axes"]))
    for entry in range(_ENTRIES):
        names[f"index{entry}"] = f"{_PREFIX}_index{entry}"
        graph.initializer.append(
            numpy_helper.from_array(np.array([entry], np.int64), names[f"index{entry}"])
        )
    return names


def _as_int64_vector(
    graph: onnx.GraphProto, name: str, elem_type: int, length: int, number: int, opset: int
) -> str:
    """Nodes making ``name`` an int64 vector (a scalar becomes one entry); its name."""
    current = name
    if elem_type != TensorProto.INT64:
        current = f"{_PREFIX}{number}_int64"
        graph.node.append(helper.make_node("Cast", [name], [current], to=TensorProto.INT64))
    if length == SCALAR:
        vector = f"{_PREFIX}{number}_vector"
        if opset >= 13:
            graph.node.append(helper.make_node("Unsqueeze", [current, f"{_PREFIX}_axes"], [vector]))
        else:
            graph.node.append(helper.make_node("Unsqueeze", [current], [vector], axes=[0]))
        current = vector
    return current

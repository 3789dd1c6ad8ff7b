"""Load-time validation of an ONNX model's bytes: complete, linear, and mostly at C speed.

Checked, at every depth (graphs held by attributes, function bodies, training graphs): every
string the IR turns into ``str`` (op types, domains, value names, node and graph names,
attribute names, tensor names, symbolic dims, opset domains) is UTF-8; every message and list of
numbers a graph's nodes, tensors and types hold decodes as a full parse would decode it (the
codec parses nodes and tensors only on demand and writes unchanged ones back as their bytes, so
this is where a damaged one is caught; ``tests/test_onnx_codec_hostile.py`` holds
``proto/onnx_check.proto`` to onnx's own messages); graphs nest no deeper than ``MAX_NESTING``.
A failure is a ``SerdeError`` naming the file and, for a bad string, the graph, node and field.

How: ``proto/onnx_check.proto`` reads one nesting level of a model in one C-level parse, every
node merged into one message (nothing is allocated per node) while each string is validated as
UTF-8, as ``graphtools.serde.check`` does for NetDefs. The graphs a level holds, joined, are the
next level. Only when a check fails is the model walked in Python, to say where.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import message

from graphtools.errors import SerdeError
from graphtools.proto import onnx_check_pb2
from graphtools.serde.check import MAX_NESTING, too_deep

__all__ = ["OnnxProbe", "probe_onnx"]


@dataclass(frozen=True)
class OnnxProbe:
    """What one scan of a model's bytes found.

    Attributes:
        nested: whether a node of the main graph holds a graph in an attribute.
        depth: how deep graphs nest inside the main graph (0: none).
    """

    nested: bool
    depth: int


def probe_onnx(data: bytes, path: str | Path | None = None) -> OnnxProbe:
    """Validate a serialized ModelProto (see the module docstring) and say what it holds.

    Raises:
        SerdeError: the bytes are not a model, a string is not UTF-8, or graphs nest too deep.
    """
    model = _parse(onnx_check_pb2.ModelLevel, data, path)
    top = _graph_level(b"".join(model.graph), data, path)
    nested = _held_graphs(top.node.attribute)
    depth = 0
    pending = nested + list(model.training_info.initialization)
    pending += list(model.training_info.algorithm)
    for level in (model.functions.node.attribute, model.functions.attribute_proto):
        pending += _held_graphs(level)
    while pending:
        depth += 1
        if depth > MAX_NESTING:
            raise SerdeError(path, too_deep("graphs held by attributes: "))
        level = _graph_level(b"".join(pending), data, path)
        pending = _held_graphs(level.node.attribute)
    return OnnxProbe(bool(nested), depth)


def _held_graphs(attribute: onnx_check_pb2.AttributeLevel) -> list[bytes]:
    return [*attribute.g, *attribute.graphs]


def _graph_level(graphs: bytes, data: bytes, path: str | Path | None) -> Any:
    return _parse(onnx_check_pb2.GraphLevel, graphs, path, data)


def _parse(kind: Any, chunk: bytes, path: str | Path | None, whole: bytes | None = None) -> Any:
    try:
        return kind.FromString(chunk)
    except message.DecodeError:
        raise SerdeError(path, _what_is_wrong(chunk if whole is None else whole)) from None
    except RecursionError:
        raise SerdeError(path, too_deep("types or graphs: ")) from None


def _what_is_wrong(data: bytes) -> str:
    """Why ``data`` failed the check: no ModelProto at all, or the first non-UTF-8 string."""
    import onnx

    try:
        model = onnx.ModelProto.FromString(data)
    except (message.DecodeError, RecursionError) as exc:
        return f"not an ONNX model (the bytes do not decode as a ModelProto: {exc})"
    for where, value in _strings(model):
        if isinstance(value, bytes):
            return (
                f"{where} is not UTF-8 ({value[:40]!r}): the file is damaged or was not "
                "written by an ONNX exporter"
            )
    return "a string of the model is not UTF-8"


def _strings(model: Any) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for the strings the IR reads, model first, graphs depth first."""
    yield "the producer name", model.producer_name
    for opset in model.opset_import:
        yield "an opset domain", opset.domain
    yield from _graph_strings(model.graph, "the main graph")
    for function in model.functions:
        yield "a function name", function.name
        yield from _node_strings(function.node, f"function {function.name!r}")


def _graph_strings(graph: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield f"the name of {where}", graph.name
    for kind in ("input", "output", "value_info"):
        for value in getattr(graph, kind):
            yield f"a {kind} name of {where}", value.name
            yield from _type_strings(value.type, f"the type of {value.name!r} in {where}")
    for tensor in graph.initializer:
        yield f"an initializer name of {where}", tensor.name
        for entry in tensor.external_data:
            yield f"external data of initializer {tensor.name!r} in {where}", entry.value
    yield from _node_strings(graph.node, where)


def _node_strings(nodes: Any, where: str) -> Iterator[tuple[str, Any]]:
    for index, node in enumerate(nodes):
        label = f"node #{index} of {where}"
        yield f"the op type of {label}", node.op_type
        label = f"node #{index} ({node.op_type!r}) of {where}"
        for field in ("name", "domain"):
            yield f"the {field} of {label}", getattr(node, field)
        for name in (*node.input, *node.output):
            yield f"a value name of {label}", name
        for attribute in node.attribute:
            yield f"an attribute name of {label}", attribute.name
            for graph in (attribute.g, *attribute.graphs):
                yield from _graph_strings(graph, f"attribute {attribute.name!r} of {label}")


def _type_strings(value_type: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield where, value_type.denotation
    if value_type.HasField("tensor_type"):
        for dim in value_type.tensor_type.shape.dim:
            yield f"a dim of {where}", dim.dim_param

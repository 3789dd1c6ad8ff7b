"""What the code knows about ops, one table per dialect.

``op_table(model)`` gives the ``OpTable`` of the model's dialect (for ONNX, of its opsets and
model-local functions). Generic passes ask it (which ops liveness must keep, which pass their
input through, which nested nets are control-flow bodies, how to evaluate an op on constants)
instead of naming a dialect's op types. Caffe2's table is built from graphtools' own facts and
executor kernels; ONNX's from what already knows the ops: ``onnx.defs`` schemas, and
onnxruntime (or ``onnx.reference``) to evaluate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphtools._core import CAFFE2, ONNX
from graphtools.dialects.base import OpTable
from graphtools.ir import Model, Net

__all__ = [
    "OpTable",
    "annotated_params",
    "initializer_inputs_are_defaults",
    "op_table",
    "read_outside_graph",
]


def op_table(model: Model | Net) -> OpTable:
    """The op table of ``model``'s dialect (a ``Net`` gets the table of its dialect with no
    opset information: ONNX's newest opsets). Each dialect's table loads on first use."""
    dialect = model.dialect
    if dialect == CAFFE2:
        from graphtools.dialects.caffe2 import CAFFE2_TABLE

        return CAFFE2_TABLE
    if dialect == ONNX:
        from graphtools.dialects.onnx import onnx_table

        if isinstance(model, Model):
            return onnx_table(
                dict(model.opset_imports),
                _function_ids(model),
                initializers_fed=initializer_inputs_are_defaults(model),
            )
        return onnx_table({}, frozenset())
    raise ValueError(f"no op table for dialect {dialect!r}")


def initializer_inputs_are_defaults(model: Model) -> bool:
    """Whether an initializer ``model`` also lists as a graph input is a default a user may
    feed over (IR version 4 and later, as onnxruntime reads it), not a constant: IR 3 lists
    every initializer as an input."""
    return not 0 < getattr(model.header, "ir_version", 0) < 4


def _function_ids(model: Model) -> frozenset[tuple[str, str]]:
    """``(domain, name)`` of the model-local functions an ONNX model defines."""
    functions = getattr(model.header, "functions", ())
    return frozenset((f.domain, f.name) for f in functions)


def read_outside_graph(model: Model) -> frozenset[str]:
    """Names of ``model``'s main graph that something besides its nodes reads: an ONNX
    model's ``training_info`` (its algorithm and initialization graphs' nodes, nested graphs
    included, and the names its bindings update) and the scales and zero points its graph's
    ``quantization_annotation`` names. A pass must keep such a value (an initializer no node
    reads may be a training step's learning rate, or a quantized tensor's scale)."""
    infos = getattr(model.header, "training_info", ())
    names = set(annotated_params(model.predict_net))
    for info in infos:
        for graph in (info.algorithm, info.initialization):
            names.update(_graph_reads(graph))
        names.update(binding.key for binding in info.update_binding)
        names.update(binding.key for binding in info.initialization_binding)
    return frozenset(names)


def annotated_params(net: Net) -> frozenset[str]:
    """The scales and zero points an ONNX graph's ``quantization_annotation`` names (a nested
    graph's too): values read by name from outside the nodes."""
    annotations = getattr(net.header, "quantization_annotation", ())
    return frozenset(
        entry.value for note in annotations for entry in note.quant_parameter_tensor_names
    )


def _graph_reads(graph: Any) -> Iterator[str]:
    """The names the nodes of a GraphProto read, its nested graphs' included."""
    for node in graph.node:
        yield from node.input
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graph_reads(attribute.g)
            for nested in attribute.graphs:
                yield from _graph_reads(nested)

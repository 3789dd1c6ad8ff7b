"""Cut a sub-model out of an ONNX model, by ``onnx.utils.Extractor`` (``extract_model``'s
semantics), with typed errors.

The model is read with its external data and typed by ONNX shape inference (as
``extract_model(infer_shapes=True)`` does), so an intermediate value can be an input; then the
cut is checked before it is delegated: an unknown name, an output the inputs do not determine
(it needs a graph input that is not among them) and a kept If/Loop/Scan whose body reads a value
from outside that no kept node writes (``Extractor`` follows node inputs only) are refused by
name with ``SubNetError``; the extracted model is checked with ``onnx.checker``. This module is
the whole of the ONNX side, so it can later move onto graphtools' own ONNX IR.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import GraphProto, ModelProto, NodeProto

from graphtools.errors import SubNetError
from graphtools.onnx.external import ModelSource, load_onnx

__all__ = ["extract_onnx"]


def extract_onnx(source: ModelSource, inputs: Sequence[str], outputs: Sequence[str]) -> ModelProto:
    """The sub-model of ``source`` computing ``outputs`` from ``inputs``.

    Args:
        source: a ModelProto, a path to an ``.onnx`` file or its bytes (external data is loaded).
        inputs: values the sub-model starts from (graph inputs or intermediate values).
        outputs: values it computes.

    Raises:
        SerdeError: the model cannot be read.
        SubNetError: an unknown or repeated name, an input ONNX shape inference gives no type,
            an output the inputs do not determine, or a body reading a value the cut drops.
    """
    model = load_onnx(source)
    try:
        typed = onnx.shape_inference.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise SubNetError(f"ONNX shape inference failed on the model: {exc}") from exc
    graph = typed.graph
    _check_names(graph, inputs, outputs)
    nodes = _kept_nodes(graph, inputs, outputs)
    _check_bodies(graph, nodes, set(inputs))
    try:
        extracted = onnx.utils.Extractor(typed).extract_model(list(inputs), list(outputs))
    except ValueError as exc:
        raise SubNetError(f"onnx.utils.Extractor refused the cut: {exc}") from exc
    try:
        onnx.checker.check_model(extracted)
    except onnx.checker.ValidationError as exc:
        raise SubNetError(f"the extracted model is not valid ONNX: {exc}") from exc
    return extracted


def _typed_names(graph: GraphProto) -> set[str]:
    return {v.name for v in (*graph.input, *graph.output, *graph.value_info)}


def _check_names(graph: GraphProto, inputs: Sequence[str], outputs: Sequence[str]) -> None:
    if not inputs or not outputs:
        raise SubNetError("an ONNX sub-model needs at least one input and one output")
    known = {name for node in graph.node for name in (*node.input, *node.output) if name}
    known |= {v.name for v in graph.input} | {t.name for t in graph.initializer}
    typed = _typed_names(graph)
    for kind, names in (("input", inputs), ("output", outputs)):
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        if repeated:
            raise SubNetError(f"{kind} {repeated[0]!r} is named twice")
        for name in names:
            if name not in known:
                raise SubNetError(f"{kind} {name!r} is not a value of graph {graph.name!r}")
            if name not in typed:
                raise SubNetError(
                    f"{kind} {name!r} has no type: ONNX shape inference could not type it, "
                    "and an extracted model needs a type for each input and output"
                )


def _kept_nodes(graph: GraphProto, inputs: Sequence[str], outputs: Sequence[str]) -> set[int]:
    """The nodes ``Extractor`` keeps; refuses an output that reaches a graph input the cut does
    not give (or a value nothing writes)."""
    producer = {name: i for i, node in enumerate(graph.node) for name in node.output if name}
    constants = {t.name for t in graph.initializer}
    given = set(inputs)
    kept: set[int] = set()
    for output in outputs:
        todo, seen = [output], set()
        while todo:
            name = todo.pop()
            if name in seen or name in given or name in constants or not name:
                continue
            seen.add(name)
            index = producer.get(name)
            if index is None:
                raise SubNetError(
                    f"output {output!r} is not determined by the inputs {sorted(given)}: it "
                    f"needs {name!r}, which no kept node writes and the inputs do not give; "
                    f"add {name!r} to the inputs"
                )
            if index not in kept:
                kept.add(index)
                todo.extend(graph.node[index].input)
    return kept


def _outer_reads(node: NodeProto) -> set[str]:
    """Names the bodies of ``node`` read from the enclosing graph."""
    found: set[str] = set()
    for attribute in node.attribute:
        for body in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
            defined = {v.name for v in body.input} | {t.name for t in body.initializer}
            for inner in body.node:
                found.update(n for n in inner.input if n and n not in defined)
                found.update(n for n in _outer_reads(inner) if n not in defined)
                defined.update(inner.output)
    return found


def _check_bodies(graph: GraphProto, kept: set[int], given: set[str]) -> None:
    produced = {name for i in kept for name in graph.node[i].output}
    available = produced | given | {t.name for t in graph.initializer}
    for index in sorted(kept):
        node = graph.node[index]
        missing = sorted(_outer_reads(node) - available)
        if missing:
            raise SubNetError(
                f"node #{index} ({node.op_type} {node.name!r}) is kept, but its body reads "
                f"{missing[0]!r} from outside, which onnx.utils.Extractor does not follow: "
                f"add {missing[0]!r} to the inputs"
            )

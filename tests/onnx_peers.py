"""What the ONNX optimisers users compare with make of a model, for tests that compare with them.

Test support, not a test module. The peers are in the optional ``peers`` extra
(``pip install -e ".[peers]"``); without onnxsim, ``onnxsim_node_count`` returns None so that a
comparison test can skip. ``node_count`` is the one way nodes are counted, here and in
``benchmarks/onnx_peers.py``: every node, those of If/Loop/Scan bodies included, so moving work
into a branch never looks like removing it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import onnx


def node_count(model: onnx.ModelProto | onnx.GraphProto) -> int:
    """Nodes of a model or graph, nested graphs included (model-local functions are not)."""
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    return sum(1 for _ in _nodes(graph))


def onnxsim_node_count(path: Path) -> int | None:
    """Nodes left after ``onnxsim.simplify`` with its defaults; None without onnxsim."""
    if importlib.util.find_spec("onnxsim") is None:
        return None
    import onnxsim

    simplified, _ = onnxsim.simplify(onnx.load(path))
    return node_count(simplified)


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attribute.g)
            for subgraph in attribute.graphs:
                yield from _nodes(subgraph)

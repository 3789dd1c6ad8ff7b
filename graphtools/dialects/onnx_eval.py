"""Evaluating ONNX ops on constants: the ops as a small model, run by onnxruntime (or by
``onnx.reference`` when onnxruntime refuses it: an op it has no kernel for, a type it lacks).

Never a hand-written kernel: what a node computes is what a runtime computes for it. A whole
constant sub-graph runs as one model (one session), which is what makes folding hundreds of
shape computations cheap.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model, Op
from graphtools.serde.onnx_codec import model_to_onnx_bytes, node_to_proto, value_type_from_proto
from graphtools.values import ValueType

__all__ = ["evaluate_node", "inferred_types", "run_ops"]


def evaluate_node(
    op: Op, inputs: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> list[np.ndarray]:
    """The outputs of one op on constant ``inputs`` (``None``: an input left out)."""
    feeds = {
        name: value
        for name, value in zip(op.inputs, inputs, strict=True)
        if name and value is not None
    }
    wanted = [name for name in op.outputs if name]
    found = run_ops([op], feeds, wanted, opsets)
    return [found[name] for name in wanted]


_CHUNK = 2048
"""Ops evaluated by one session at most: onnxruntime's session set-up grows faster than the
graph (17 s for 100,000 nodes, 1 s for 20,000), so a long list runs in slices of this size."""


def run_ops(
    ops: Sequence[Op],
    feeds: Mapping[str, Any],
    wanted: Sequence[str],
    opsets: Mapping[str, int],
) -> dict[str, np.ndarray]:
    """Run ``ops`` (in order, reading ``feeds`` and each other's outputs) and return the
    ``wanted`` values; a long list runs in slices of ``_CHUNK`` ops, each slice handing the
    values later slices read to the next.

    Raises:
        UnsupportedOpError: neither onnxruntime nor the reference evaluator can run them.
    """
    if len(ops) <= _CHUNK:
        return _run_slice(ops, feeds, wanted, opsets)
    last_read = {name: index for index, op in enumerate(ops) for name in op.inputs if name}
    wanted_set = set(wanted)
    values: dict[str, Any] = dict(feeds)
    for start in range(0, len(ops), _CHUNK):
        part = ops[start : start + _CHUNK]
        end = start + len(part)
        kept = [
            name
            for op in part
            for name in op.outputs
            if name and (name in wanted_set or last_read.get(name, -1) >= end)
        ]
        reads = {name: values[name] for op in part for name in op.inputs if name in values}
        values.update(_run_slice(part, reads, kept, opsets))
    return {name: values[name] for name in wanted}


def _run_slice(
    ops: Sequence[Op],
    feeds: Mapping[str, Any],
    wanted: Sequence[str],
    opsets: Mapping[str, int],
) -> dict[str, np.ndarray]:
    model = _model(ops, feeds, wanted, opsets)
    try:
        return _with_onnxruntime(model, {}, wanted)
    except Exception as ort_error:  # onnxruntime raises its own exception types
        try:
            return _with_reference(model, {}, wanted)
        except Exception as exc:  # the reference evaluator raises anything
            types = sorted({op.type for op in ops})
            raise UnsupportedOpError(
                f"cannot evaluate {', '.join(types)} on constants: onnxruntime: "
                f"{_first_line(ort_error)}; onnx.reference: {_first_line(exc)}"
            ) from exc


def _model(
    ops: Sequence[Op], feeds: Mapping[str, Any], wanted: Sequence[str], opsets: Mapping[str, int]
) -> onnx.ModelProto:
    # The constants are the graph's initializers, not inputs: onnxruntime checks each fed
    # name against a list of its inputs, quadratic in a run that folds thousands of values.
    constants = [
        onnx.numpy_helper.from_array(np.asarray(value), name) for name, value in feeds.items()
    ]
    outputs = [onnx.ValueInfoProto(name=name) for name in wanted]
    graph = onnx.helper.make_graph(
        [node_to_proto(op) for op in ops], "fold", [], outputs, initializer=constants
    )
    imports = [onnx.helper.make_opsetid(domain, version) for domain, version in opsets.items()]
    if not any(domain in ("", "ai.onnx") for domain in opsets):
        imports.append(onnx.helper.make_opsetid("", onnx.defs.onnx_opset_version()))
    model = onnx.helper.make_model(graph, opset_imports=imports)
    model.ir_version = min(model.ir_version, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # shape inference refusing leaves the outputs untyped
            return model
    types = {info.name: info for info in inferred.graph.value_info}
    types.update({info.name: info for info in inferred.graph.output})
    del model.graph.output[:]
    model.graph.output.extend(types.get(name, onnx.ValueInfoProto(name=name)) for name in wanted)
    return model


def _with_onnxruntime(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], wanted: Sequence[str]
) -> dict[str, np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # fatal only: its errors are raised, not printed
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    values = session.run(list(wanted), feeds)
    return _tensors(wanted, values)


def _with_reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], wanted: Sequence[str]
) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = ReferenceEvaluator(model).run(list(wanted), feeds)
    return _tensors(wanted, list(values))


def _tensors(wanted: Sequence[str], values: Sequence[Any]) -> dict[str, np.ndarray]:
    """The runtime's values by name; a value that is no tensor (a sequence, a map, an empty
    optional) cannot be a constant, and makes the whole evaluation refused."""
    found = {}
    for name, value in zip(wanted, values, strict=True):
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            raise UnsupportedOpError(f"value {name!r} is a {type(value).__name__}, not a tensor")
        found[name] = value
    return found


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def inferred_types(model: Model) -> dict[str, ValueType]:
    """The types ONNX shape inference (with data propagation) gives the values of an ONNX
    model's main graph; empty when inference refuses the model."""
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
        except Exception:  # inference refusing a model is not an error of the model's user
            return {}
    graph = inferred.graph
    return {
        info.name: value_type_from_proto(info)
        for section in (graph.input, graph.value_info, graph.output)
        for info in section
    }

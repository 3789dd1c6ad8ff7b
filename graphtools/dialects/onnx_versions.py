"""Converting an ONNX model to another opset with onnx's own version converter.

The model is written to bytes as it is (external data stays where it lies), converted by
``onnx.version_converter.convert_version``, and read back; the converter's adapters are the
only knowledge of how an op changes between opsets, none of ours.
"""

from __future__ import annotations

import warnings

import onnx

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model
from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes

__all__ = ["convert_opset"]


def convert_opset(model: Model, opset: int) -> Model:
    """``model`` converted to ``opset`` of the default domain (a new model; its external data
    is read from where ``model``'s lies).

    Raises:
        UnsupportedOpError: the converter has no adapter for an op of the model, or refuses
            the conversion.
    """
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    current = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            converted = onnx.version_converter.convert_version(proto, opset)
        except Exception as exc:  # the converter raises RuntimeError, ValidationError, ...
            text = " ".join(str(exc).split())[:400] or type(exc).__name__
            raise UnsupportedOpError(
                f"onnx's version converter cannot take this model from opset {current} to "
                f"{opset}: {text}"
            ) from exc
    _keep_what_the_converter_drops(proto, converted)
    base = None if model.predict_path is None else model.predict_path.parent
    loaded = model_from_onnx_bytes(converted.SerializeToString(), base_dir=base)
    loaded.predict_path = model.predict_path
    return loaded


def _keep_what_the_converter_drops(source: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """What onnx's converter loses or adds besides the conversion, put back: an IR version
    able to carry the new opset (it keeps the old one, which may be too old for it), the
    ``metadata_props`` of the main graph's nodes (by node name) and of its inputs, outputs
    and value_info (by value name), and no value_info the source did not have (its shape
    inference adds an entry for every value)."""
    needed = onnx.helper.find_min_ir_version_for(list(converted.opset_import), True)
    converted.ir_version = max(converted.ir_version, needed)
    graph, before = converted.graph, source.graph
    nodes = {node.name: node for node in before.node if node.name}
    for node in graph.node:
        found = nodes.get(node.name) if node.name else None
        if found is not None and not node.metadata_props:
            node.metadata_props.extend(found.metadata_props)
    declared = {v.name: v for v in (*before.input, *before.output, *before.value_info)}
    kept = [v for v in graph.value_info if v.name in declared]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for value in (*graph.input, *graph.output, *graph.value_info):
        same = declared.get(value.name)
        if same is not None and not value.metadata_props:
            value.metadata_props.extend(same.metadata_props)

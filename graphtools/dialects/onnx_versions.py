"""Converting an ONNX model to another opset with onnx's own version converter.

The model is written to bytes as it is (external data stays where it lies), converted by
``onnx.version_converter.convert_version``, and read back; the converter's adapters are the
only knowledge of how an op changes between opsets, none of ours. What the converter drops
is put back: local functions (kept at their own opset when onnx's checker accepts them so),
node and value metadata.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

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
    _drop_defaults_the_target_lacks(converted, current, opset)
    converted.functions.extend(proto.functions)  # the converter drops them: see _check_converted
    _check_converted(converted, current, opset, bool(proto.functions))
    base = None if model.predict_path is None else model.predict_path.parent
    loaded = model_from_onnx_bytes(converted.SerializeToString(), base_dir=base)
    loaded.predict_path = model.predict_path
    return loaded


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """``graph`` and every graph its nodes' attributes hold, depth first."""
    found = [graph]
    for node in graph.node:
        for attribute in node.attribute:
            for held in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                found += _graphs(held)
    return found


def _drop_defaults_the_target_lacks(
    converted: onnx.ModelProto, current: int | None, opset: int
) -> None:
    """Attributes a converted node keeps that its op does not have at ``opset``: dropped when
    they hold the default they had at the source opset (onnx's converter keeps
    ``ReduceMean``'s ``noop_with_empty_axes=0``, an opset-18 attribute, going down to 14, and
    the checker then refuses the model); any other value is refused, naming the node.

    Raises:
        UnsupportedOpError: a node uses such an attribute with a value other than its default.
    """
    for graph in _graphs(converted.graph):
        for node in graph.node:
            if node.domain not in ("", "ai.onnx") or not node.attribute:
                continue
            try:
                target = onnx.defs.get_schema(node.op_type, opset, "")
            except onnx.defs.SchemaError:
                continue  # the checker says what is wrong with an op opset lacks
            unknown = [a for a in node.attribute if a.name not in target.attributes]
            if not unknown:
                continue
            source = onnx.defs.get_schema(node.op_type, current or opset, "")
            kept = [a for a in node.attribute if a.name in target.attributes]
            for attribute in unknown:
                declared = source.attributes.get(attribute.name)
                default = None if declared is None else declared.default_value
                if (
                    default is None
                    or default.type == onnx.AttributeProto.UNDEFINED
                    or (
                        onnx.helper.get_attribute_value(attribute)
                        != onnx.helper.get_attribute_value(default)
                    )
                ):
                    raise UnsupportedOpError(
                        f"node {node.name or node.op_type!r} ({node.op_type}) sets "
                        f"{attribute.name}, which {node.op_type} does not have at opset "
                        f"{opset}: the model cannot go from opset {current} to {opset}"
                    )
            del node.attribute[:]
            node.attribute.extend(kept)


def _check_converted(
    converted: onnx.ModelProto, current: int | None, opset: int, functions: bool
) -> None:
    """onnx's checker on the converter's result, the model's local functions put back as they
    were (the converter drops them, and their nodes would then be unknown ops): a function
    keeps its own opset imports, which ONNX allows when its ops read the same in both
    versions. A model the checker refuses is the conversion's failure, said as such (not a
    pass breaking the model at the end of the pipeline).

    Raises:
        UnsupportedOpError: the checker refuses the result: a function using an op that
            differs between the two opsets, or the converter's own result.
    """
    try:
        onnx.checker.check_model(_external_data_set_aside(converted))
    except onnx.checker.ValidationError as exc:
        text = " ".join(str(exc).split())[:300]
        if functions:
            raise UnsupportedOpError(
                f"onnx's version converter does not convert local functions, and this "
                f"model's do not read the same at opset {opset} as at {current}: {text}; "
                "inline them first (onnx.inliner.inline_local_functions) or keep the opset"
            ) from exc
        raise UnsupportedOpError(
            f"onnx's version converter took the model from opset {current} to {opset}, and "
            f"onnx's checker refuses the result: {text}; keep the opset"
        ) from exc


def _external_data_set_aside(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` for onnx's checker: a tensor whose data lies in an external file (an
    initializer, a Constant's value) replaced by an empty one of its name and type. Given a
    model in memory, the checker looks for data files from the working folder, not the
    model's; the conversion does not change the data, and ``run`` checks the files where
    they lie before any pass."""
    if not any(_is_external(t) for graph in _graphs(model.graph) for t in _tensors(graph)):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # external tensors hold no data: the copy is the graph's size
    for graph in _graphs(copy.graph):
        for tensor in _tensors(graph):
            if _is_external(tensor):
                name, data_type = tensor.name, tensor.data_type
                tensor.Clear()
                tensor.name, tensor.data_type = name, data_type
                tensor.dims.append(0)  # no values to hold (the check reads no shapes)
    return copy


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The dense tensors of ``graph`` itself: initializers and node attributes."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors


def _is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


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

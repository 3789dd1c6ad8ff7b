"""Caffe2 init_net/predict_net pair -> ONNX model (``export_onnx``).

What Caffe2's frontend did, with its gaps closed: blobs are renamed to SSA form by our
``ssa_rewrite`` (on a copy), initializers come from running the init_net with the executor,
every op is converted by the table in ``export_context.EXPORTERS`` (the ``export_*`` modules;
ops without a one-to-one ONNX op as compositions or as calls of ``caffe2``-domain model-local
functions, declared with the ``caffe2`` opset import), and the IR version is pinned to the lowest
one the chosen opset needs (the newest IR is refused by older runtimes). Int8 blobs are their
uint8/int32 values with their scales in the graph's ``quantization_annotation``. Graph input
types come from ``value_info``; output types and the graph's value info from our shape analysis
(``graphtools.analysis.shapes``), with ONNX shape inference over the exported graph for what it
leaves unknown (and for ranks an op's conversion needs). The result passes
``onnx.checker.check_model(full_check=True)``, whose own inference must agree with ours.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

from graphtools.analysis.ssa_names import plan_ssa_names
from graphtools.errors import GraphToolsError, InvalidNetError, UnsupportedOpError
from graphtools.executor import Int8Tensor, Workspace, run_net
from graphtools.ir import Model, Net
from graphtools.onnx import (  # noqa: F401  (importing registers the exporters)
    export_aten,
    export_control,
    export_detection,
    export_elementwise,
    export_image,
    export_int8,
    export_math,
    export_nn,
    export_normalize,
    export_random,
    export_recurrent,
    export_sparse,
    export_tensor,
)
from graphtools.onnx.context import NameGen
from graphtools.onnx.dtypes import numpy_of_onnx, onnx_dtype_of_numpy
from graphtools.onnx.export_context import CAFFE2_DOMAIN, EXPORTERS, ExportContext, TypeInfo
from graphtools.onnx.export_control import explicit_if_effects
from graphtools.onnx.export_nn import net_in_test_mode
from graphtools.onnx.importer import max_opset

__all__ = ["BATCH_DIM", "DEFAULT_OPSET", "MIN_EXPORT_OPSET", "export_onnx", "ir_version_for"]

DEFAULT_OPSET = 17
"""Opset written when none is asked for: supported by onnxruntime since 1.11."""
MIN_EXPORT_OPSET = 11
"""The oldest opset the exporter writes (optional Gemm C and Clip/Pad operands start at 11)."""

BATCH_DIM = "N"
"""Name of the free batch dimension written with ``dynamic_batch=True``."""

ValueInfo = Mapping[str, tuple[int, Sequence[int | str | None] | None]]


def ir_version_for(opset: int) -> int:
    """The lowest ONNX IR version that can carry default-domain ``opset``."""
    return int(helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def _init_values(model: Model) -> dict[str, Any]:
    """Every blob the init_net writes, by running it (Int8 blobs as ``Int8Tensor``)."""
    if model.init_net is None or not len(model.init_net):
        return {}
    workspace = Workspace()
    run_net(model.init_net, workspace)
    values = {}
    for name in workspace.local_blobs():
        value = workspace.fetch(name)
        values[name] = value if isinstance(value, Int8Tensor) else np.asarray(value)
    return values


def _split_quantized(
    values: Mapping[str, Any],
) -> tuple[dict[str, np.ndarray], dict[str, tuple[float, int]]]:
    """Params as arrays, and the ``(scale, zero point)`` of the Int8 ones (whose arrays are
    their quantized values: uint8, or int32 for biases)."""
    arrays, quant = {}, {}
    for name, value in values.items():
        if isinstance(value, Int8Tensor):
            arrays[name] = np.asarray(value.values)
            quant[name] = (float(value.scale), int(value.zero_point))
        else:
            arrays[name] = value
    return arrays, quant


def _shape_info(
    model: Model, inputs: Mapping[str, TypeInfo], dynamic_batch: bool
) -> dict[str, TypeInfo]:
    """Types and shapes our shape analysis derives for the predict_net's blobs (by name: the
    net is in SSA form here). With ``dynamic_batch`` the inputs' batch dim is the symbol
    ``N``, so what depends on it stays symbolic. The analysis is a help: when it fails on a
    net, the exporter relies on ``value_info`` and ONNX shape inference alone."""
    from graphtools.analysis.shapes import TensorType, infer_model_shapes

    del dynamic_batch  # already in the inputs' shapes
    given = {name: TensorType(t.dtype, t.shape) for name, t in inputs.items()}
    try:
        info = infer_model_shapes(model, given)
    except GraphToolsError:
        return {}
    found = {}
    for name in info.versions:
        t = info.final(name)
        if t.dtype is not None:  # an Int8 blob's dtype is that of its values, as in ONNX
            found[name] = TypeInfo(t.dtype, t.shape)
    return found


def _reads(net: Net) -> Iterable[str]:
    for op in net.ops:
        yield from op.inputs
        for _, nested in op.nested_nets():
            yield from nested.external_inputs
            yield from _reads(nested)


def _free_reads(net: Net) -> list[str]:
    written: set[str] = set()
    free: dict[str, None] = {}
    for op in net.ops:
        for name in op.inputs:
            if name not in written:
                free[name] = None
        written.update(op.outputs)
    return list(free)


_CONVERTED_NETS = {"If": ("then_net", "else_net"), "RecurrentNetwork": ("step_net",)}
"""The nested nets whose ops an exporter converts (a RecurrentNetwork's backward_step_net is
not exported)."""


def _unmapped(net: Net, where: str = "") -> list[tuple[int, str, str]]:
    """``(op index, op type, where)`` of every op of ``net`` and of the nested nets exported
    with it that has no ONNX exporter, in op order."""
    found = []
    for index, op in enumerate(net.ops):
        if op.type not in EXPORTERS:
            found.append((index, op.type, where))
        for arg_name, nested in op.nested_nets():
            if arg_name in _CONVERTED_NETS.get(op.type, ()):
                found += _unmapped(nested, f"{where}, in {arg_name} of op #{index} ({op.type})")
    return found


def _refuse_unmapped(net: Net, opset: int) -> None:
    """Refuse a net holding an op type without an ONNX form before anything else is asked
    of it (input types, shapes): the op type is what the user has to deal with first."""
    found = _unmapped(net)
    if not found:
        return
    index, op_type, where = found[0]
    others = sorted({t for _, t, _ in found} - {op_type})
    also = f"; other op types without one: {', '.join(others)}" if others else ""
    raise UnsupportedOpError(
        f"op #{index} ({op_type}){where}: cannot export to ONNX opset {opset}: no ONNX "
        f"mapping for Caffe2 op type {op_type!r}{also}"
    )


def _value_info(name: str, info: TypeInfo | None) -> onnx.ValueInfoProto:
    if info is None or info.dtype is None:
        return onnx.ValueInfoProto(name=name)
    shape = None if info.shape is None else list(info.shape)
    return helper.make_tensor_value_info(name, onnx_dtype_of_numpy(info.dtype), shape)


def _input_types(
    value_info: ValueInfo | None, names: Sequence[str], dynamic_batch: bool
) -> dict[str, TypeInfo]:
    """Types of the graph inputs from ``value_info``; with ``dynamic_batch`` dim 0 of the first
    input is ``N`` and that of every other input its own free dim ``N_<input>`` (inputs need
    not share their first dim: a sparse net's indices and lengths do not)."""
    types: dict[str, TypeInfo] = {}
    shaped = [n for n in names if n in (value_info or {}) and (value_info or {})[n][1]]
    for name, (elem_type, shape) in (value_info or {}).items():
        dims: tuple[int | str | None, ...] | None = None if shape is None else tuple(shape)
        if dynamic_batch and name in names and dims:
            free = BATCH_DIM if name == shaped[0] else f"{BATCH_DIM}_{name}"
            dims = (free, *dims[1:])
        types[name] = TypeInfo(numpy_of_onnx(int(elem_type)), dims)
    return types


def _opset_imports(opset: int, functions: Sequence[onnx.FunctionProto]) -> list[Any]:
    imports = [helper.make_opsetid("", opset)]
    if functions:
        imports.append(helper.make_opsetid(CAFFE2_DOMAIN, 1))
    return imports


def _output_types(
    graph: onnx.GraphProto,
    opset: int,
    ir_version: int,
    functions: Sequence[onnx.FunctionProto] = (),
) -> dict[str, Any]:
    """Types ONNX shape inference gives the graph's values."""
    probe = helper.make_model(
        graph, opset_imports=_opset_imports(opset, functions), functions=list(functions)
    )
    probe.ir_version = ir_version
    inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=False, data_prop=True)
    found = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            found[info.name] = info.type
    return found


def _learn_types(types: dict[str, TypeInfo], found: Mapping[str, Any]) -> bool:
    """Add the shapes ONNX inference ``found`` for blobs ``types`` lacks; whether any was."""
    learned = False
    for name, type_proto in found.items():
        tensor = type_proto.tensor_type
        if name in types or not tensor.HasField("shape"):
            continue
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
        types[name] = TypeInfo(numpy_of_onnx(tensor.elem_type), dims)
        learned = True
    return learned


def _convert(
    net: Net,
    opset: int,
    types: dict[str, TypeInfo],
    read: set[str],
    params: Mapping[str, Any],
    rewritten: frozenset[str],
    quant: Mapping[str, tuple[float, int]],
    nested_names: dict[int, tuple[tuple[str, ...], tuple[str, ...]]],
    *,
    final: bool,
    recurrent: str = "loop",
) -> ExportContext:
    """Convert every op of ``net``. Unless ``final``, an exporter that refused for want of a
    rank stops the conversion early (``missing_rank`` is set) so the caller can learn more
    shapes and convert again."""
    names = NameGen([*read, *params, *(n for op in net.ops for n in op.outputs)])
    outer = frozenset(n for op in net.ops for n in (*op.inputs, *op.outputs))
    cx = ExportContext(
        opset,
        names,
        types,
        read,
        outer_names=outer | frozenset(params),
        rewritten=rewritten,
        recurrent=recurrent,
        quant=dict(quant),
        nested_names=nested_names,
    )
    for index, op in enumerate(net.ops):
        fn = EXPORTERS.get(op.type)
        cx.op, cx.index = op, index
        if fn is None:
            raise cx.refuse(f"no ONNX mapping for Caffe2 op type {op.type!r}")
        try:
            fn(cx, op)
        except UnsupportedOpError:
            if final or not cx.missing_rank:
                raise
            return cx
    return cx


def _ssa_renamed(net: Net, params: Iterable[str]) -> Net:
    """``net`` renamed to SSA form as ``ssa_rewrite`` names it (Caffe2's rule), built anew: an
    If whose branches write a blob the net versions (``explicit_if_effects``) is mapped by the
    If exporter, so the rewriter's refusal of such renames does not apply here."""
    names = plan_ssa_names(net, None, params)
    ops = [
        op.replace(inputs=names.ops[i][0], outputs=names.ops[i][1]) if i in names.ops else op
        for i, op in enumerate(net.ops)
    ]
    return Net(ops, names.external_inputs, names.external_outputs, name=net.name)


def _graph_reads(graph: onnx.GraphProto) -> Iterable[str]:
    """Every value the nodes of ``graph`` and of its sub-graphs read."""
    for node in graph.node:
        yield from node.input
        for sub in _subgraphs(node):
            yield from _graph_reads(sub)


def _subgraphs(node: onnx.NodeProto) -> Iterable[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _without_unread_helpers(
    nodes: Sequence[onnx.NodeProto], outputs: Sequence[str], helpers: set[str]
) -> list[onnx.NodeProto]:
    """``nodes`` without the helper transposes whose results no node (sub-graphs included)
    and no graph output reads: one walk from the last node back."""
    needed = set(outputs)
    kept: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if node.output and node.output[0] in helpers and node.output[0] not in needed:
            continue
        kept.append(node)
        needed.update(node.input)
        for sub in _subgraphs(node):
            needed.update(_graph_reads(sub))
    kept.reverse()
    return kept


def _annotate_quantization(
    graph: onnx.GraphProto, quant: Mapping[str, tuple[float, int]], names: set[str]
) -> None:
    """Say the scale and zero point of every Int8 graph input, output and initializer in
    ``graph.quantization_annotation`` (ONNX's record of them), with scalar initializers."""
    elem_types = {i.name: i.type.tensor_type.elem_type for i in (*graph.input, *graph.output)}
    elem_types.update({t.name: t.data_type for t in graph.initializer})
    taken = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    taken |= {n for node in graph.node for n in (*node.input, *node.output)}
    fresh = NameGen(taken)
    for name in sorted(n for n in names if n in quant):
        scale, zero_point = quant[name]
        zp_type = np.uint8 if elem_types.get(name) == onnx.TensorProto.UINT8 else np.int32
        scale_name, zp_name = fresh.fresh(f"{name}_scale"), fresh.fresh(f"{name}_zero_point")
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.asarray(scale, np.float32), scale_name),
                numpy_helper.from_array(np.asarray(zero_point, zp_type), zp_name),
            ]
        )
        annotation = graph.quantization_annotation.add(tensor_name=name)
        annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value=scale_name)
        annotation.quant_parameter_tensor_names.add(key="ZERO_POINT_TENSOR", value=zp_name)


def export_onnx(
    model: Model,
    opset: int | None = None,
    ir_version: int | None = None,
    value_info: ValueInfo | None = None,
    dynamic_batch: bool = False,
    recurrent: str = "loop",
    input_quantization: Mapping[str, tuple[float, int]] | None = None,
    test_mode: bool = False,
) -> ModelProto:
    """Convert an init_net/predict_net pair into an ONNX model.

    Args:
        model: the pair (not modified).
        opset: default-domain opset to write (``DEFAULT_OPSET`` when ``None``), from
            ``MIN_EXPORT_OPSET`` to the newest the installed onnx knows.
        ir_version: IR version to write; by default the lowest that carries ``opset``.
        value_info: ``{input name: (onnx elem_type, shape)}`` as Caffe2's frontend took it;
            needed for every graph input our shape analysis cannot type.
        dynamic_batch: write dim 0 of the graph inputs (and what follows from them) as free
            dimensions: ``N`` for the first input, ``N_<input>`` for each other one.
        recurrent: ``"loop"`` writes each RecurrentNetwork op as an ONNX ``Loop``, ``"scan"``
            as a ``Scan`` (``graphtools.onnx.export_recurrent``).
        input_quantization: ``{input name: (scale, zero point)}`` of the graph inputs that
            are Int8 blobs (fed as their uint8 values; ``value_info`` gives UINT8).
        test_mode: export a training net's inference form: ``is_test=1`` on the ops that
            have it (``Dropout``, ``SpatialBN``), which are refused in training mode otherwise.

    Raises:
        UnsupportedOpError: an op without an ONNX form (naming op index and type; op types
            without an exporter, nested nets included, are refused before anything else), or
            an argument variant without one (NHWC order, training mode, ...).
        InvalidNetError: an input whose type cannot be known, or a blob read before any op
            writes it that is neither an input nor a param. (A declared external input that
            no op reads is left out of the graph unless ``value_info`` types it.)
    """
    opset = DEFAULT_OPSET if opset is None else int(opset)
    if recurrent not in ("loop", "scan"):
        raise UnsupportedOpError(
            f"recurrent={recurrent!r}: RecurrentNetwork exports as 'loop' or 'scan'"
        )
    if not MIN_EXPORT_OPSET <= opset <= max_opset():
        raise UnsupportedOpError(
            f"cannot export to opset {opset}: supported are {MIN_EXPORT_OPSET} to {max_opset()}"
        )
    ir = ir_version_for(opset) if ir_version is None else int(ir_version)
    _refuse_unmapped(model.predict_net, opset)
    work = model.copy()
    if test_mode:
        work = Model(net_in_test_mode(work.predict_net), work.init_net)
    # A blob the init_net fills but value_info names is fed (a feed overrides the init value).
    params, quant = _split_quantized(
        {k: v for k, v in _init_values(work).items() if k not in (value_info or {})}
    )
    quant.update(input_quantization or {})
    net, nested_names = explicit_if_effects(work.predict_net)
    work = Model(net, work.init_net)
    writes = Counter(name for op in net.ops for name in op.outputs)
    rewritten = frozenset(
        n for n, count in writes.items() if count > 1 or n in params or n in net.external_inputs
    )
    net = _ssa_renamed(net, params)
    work = Model(net, work.init_net)
    # A name declared twice is one graph input (ONNX names are unique).
    declared = list(dict.fromkeys(net.external_inputs)) or _free_reads(net)
    # A declared input no op reads changes nothing; without a type from value_info it cannot
    # be a graph input (a training net's data queue blob), so it is left out.
    unread = set(declared) - set(_reads(net)) - set(net.external_outputs)
    declared = [n for n in declared if n not in unread or n in (value_info or {})]
    inputs = [name for name in declared if name not in params]
    undeclared = [n for n in _free_reads(net) if n not in params and n not in declared]
    # Exported nets often read their data blob without declaring it (the predictor feeds
    # it): with value_info for it, it is an input like a declared one.
    inputs += [n for n in undeclared if value_info is not None and n in value_info]
    unknown = [n for n in undeclared if value_info is None or n not in value_info]
    if unknown:
        raise InvalidNetError(
            f"blobs {unknown} are read before any op writes them and are neither external "
            "inputs nor init_net outputs; give their types in value_info to make them inputs"
        )
    types = _input_types(value_info, inputs, dynamic_batch)
    for name, value in params.items():
        types[name] = TypeInfo(value.dtype, tuple(value.shape))
    types.update(_shape_info(work, {n: types[n] for n in inputs if n in types}, dynamic_batch))
    untyped = [name for name in inputs if name not in types or types[name].dtype is None]
    if untyped:
        raise InvalidNetError(
            f"the type of graph inputs {untyped} cannot be known: pass value_info="
            "{name: (onnx elem_type, shape)}"
        )
    outputs = list(net.external_outputs)
    if not outputs:
        raise InvalidNetError(f"net {net.name!r} declares no external outputs: nothing to export")
    read = set(_reads(net)) | set(outputs)
    initializers = [
        numpy_helper.from_array(value, name) for name, value in params.items() if name in read
    ]
    graph_inputs = [_value_info(name, types.get(name)) for name in inputs]
    cx = _convert(
        net,
        opset,
        types,
        read,
        params,
        rewritten,
        quant,
        nested_names,
        final=False,
        recurrent=recurrent,
    )
    while cx.missing_rank:
        # An exporter wanted a rank nobody knew: learn the shapes ONNX inference finds for
        # the graph converted so far, then convert again with them.
        partial = helper.make_graph(
            cx.nodes, "probe", graph_inputs, [], [*initializers, *cx.constants]
        )
        functions = list(cx.functions.values())
        learned = _learn_types(types, _output_types(partial, opset, ir, functions))
        cx = _convert(
            net,
            opset,
            types,
            read,
            params,
            rewritten,
            quant,
            nested_names,
            final=not learned,
            recurrent=recurrent,
        )
        if not learned:
            break
    functions = list(cx.functions.values())
    graph = helper.make_graph(
        _without_unread_helpers(cx.nodes, outputs, cx.helpers),
        net.name or "graphtools",
        graph_inputs,
        [onnx.ValueInfoProto(name=name) for name in outputs],
        [*initializers, *cx.constants],
    )
    # The value info we know goes in first: ONNX inference starts from it (it cannot follow
    # a Loop whose carried values grow, as the detection functions' do).
    produced = {name for node in graph.node for name in node.output}
    for name in sorted(produced - set(outputs)):
        known = types.get(name)
        if known is not None and known.dtype is not None and known.shape is not None:
            graph.value_info.append(_value_info(name, known))
    inferred = _output_types(graph, opset, ir, functions)
    for output in graph.output:
        known = types.get(output.name)
        if known is not None and known.dtype is not None and known.shape is not None:
            output.CopyFrom(_value_info(output.name, known))
        elif output.name in inferred and inferred[output.name].tensor_type.HasField("shape"):
            output.type.CopyFrom(inferred[output.name])
        else:
            raise InvalidNetError(
                f"the type of graph output {output.name!r} cannot be inferred (its rank)"
            )
    _annotate_quantization(graph, cx.quant, {*inputs, *outputs, *params})
    result = helper.make_model(
        graph,
        opset_imports=_opset_imports(opset, functions),
        producer_name="graphtools",
        functions=functions,
    )
    result.ir_version = ir
    try:
        onnx.checker.check_model(result, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise GraphToolsError(f"the exported model fails the ONNX checker: {exc}") from exc
    return result

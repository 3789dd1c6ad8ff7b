"""Caffe2 init_net/predict_net pair -> ONNX-dialect model (``export_model``): the work of the
``convert-to-onnx`` pass.

What Caffe2's frontend did, with its gaps closed: blobs are renamed to SSA form by Caffe2's rule
(``analysis.ssa_names``, on a copy), initializers come from running the init_net with the
executor, every op is converted by the table in ``table.EXPORTERS`` (ops without a one-to-one
ONNX op as compositions or as calls of ``caffe2``-domain model-local functions, declared with
the ``caffe2`` opset import), and the IR version is pinned to the lowest one the chosen opset
needs (the newest IR is refused by older runtimes). Int8 blobs are their uint8/int32 values with
their scales in the graph's ``quantization_annotation``. Graph input types are the types the
predict_net declares (``Net.types``: an imported pair keeps its inputs', ``export_onnx`` puts its
``value_info`` there); output types and the graph's value info come from our shape analysis
(``graphtools.analysis.shapes``), with ONNX shape inference over the exported graph (the ONNX
op table's ``infer_types``) for what it leaves unknown (and for ranks an op's conversion needs).
The result is an IR model (ops, ``ArrayTensor`` initializers, ``ValueType`` declarations; the
functions, opset and IR version in its header) that passes ``onnx.checker.check_model
(full_check=True)``, whose own inference must agree with ours.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import onnx
from onnx import helper

from graphtools._core import ONNX
from graphtools.analysis.scopes import NameSource
from graphtools.analysis.ssa_names import renamed_for_export
from graphtools.convert.caffe2_to_onnx.context import ExportContext, TypeInfo
from graphtools.convert.caffe2_to_onnx.control import explicit_if_effects
from graphtools.convert.caffe2_to_onnx.nn import net_in_test_mode
from graphtools.convert.caffe2_to_onnx.options import (
    BATCH_DIM,
    DEFAULT_OPSET,
    MIN_EXPORT_OPSET,
    RECURRENT_FORMS,
    ExportOptions,
)
from graphtools.convert.caffe2_to_onnx.table import EXPORTERS
from graphtools.convert.conventions import CAFFE2_DOMAIN, PROBE_KEEPS, max_opset
from graphtools.convert.dtypes import numpy_of_onnx, onnx_dtype_of_numpy
from graphtools.dialects import op_table
from graphtools.errors import GraphToolsError, InvalidNetError, UnsupportedOpError
from graphtools.executor import Int8Tensor, Workspace, run_net
from graphtools.ir import Model, Net, Op
from graphtools.values import ArrayTensor, Tensor, ValueType

__all__ = [
    "BATCH_DIM",
    "DEFAULT_OPSET",
    "MIN_EXPORT_OPSET",
    "RECURRENT_FORMS",
    "ExportOptions",
    "ExportedModel",
    "check_options",
    "export_model",
    "ir_version_for",
]


@dataclass(frozen=True)
class ExportedModel:
    """What a pair exports to: the pieces of an ONNX-dialect ``Model``.

    Attributes:
        predict_net: the main graph (ONNX dialect).
        opset_imports: ``{domain: version}``: the default domain's, and ``caffe2`` when a
            model-local function is called.
        header: the ModelProto without its graph: IR version, producer, functions.
    """

    predict_net: Net
    opset_imports: dict[str, int]
    header: onnx.ModelProto


def ir_version_for(opset: int) -> int:
    """The lowest ONNX IR version that can carry default-domain ``opset``."""
    return int(helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def check_options(options: ExportOptions) -> None:
    """Refuse options no export can honour (an opset outside the range, a recurrent form).

    Raises:
        UnsupportedOpError: naming the option and what is supported.
    """
    if options.recurrent not in RECURRENT_FORMS:
        raise UnsupportedOpError(
            f"recurrent={options.recurrent!r}: RecurrentNetwork exports as 'loop' or 'scan'"
        )
    if not MIN_EXPORT_OPSET <= options.opset <= max_opset():
        raise UnsupportedOpError(
            f"cannot export to opset {options.opset}: supported are {MIN_EXPORT_OPSET} to "
            f"{max_opset()}"
        )


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


def _shape_info(model: Model, inputs: Mapping[str, TypeInfo]) -> dict[str, TypeInfo]:
    """Types and shapes our shape analysis derives for the predict_net's blobs (by name: the
    net is in SSA form here). With a dynamic batch the inputs' dim 0 is a symbol, so what
    depends on it stays symbolic. The analysis is a help: when it fails on a net, the export
    relies on the declared input types and ONNX shape inference alone."""
    from graphtools.analysis.shapes import TensorType, infer_model_shapes

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


def _value_type(info: TypeInfo) -> ValueType:
    shape = None if info.shape is None else tuple(info.shape)
    return ValueType(onnx_dtype_of_numpy(info.dtype), shape)


def _input_types(
    declared: Mapping[str, ValueType],
    names: Sequence[str],
    dynamic_batch: bool,
    sequence_first: Iterable[str] = (),
) -> dict[str, TypeInfo]:
    """Types of the graph inputs from the declared ones; with ``dynamic_batch`` the batch dim
    of the first input is ``N`` and that of every other input its own free dim ``N_<input>``
    (inputs need not share their first dim: a sparse net's indices and lengths do not). The
    batch is dim 0, dim 1 for the inputs in ``sequence_first`` (time on dim 0)."""
    types: dict[str, TypeInfo] = {}
    shaped = [n for n in names if n in declared and declared[n].shape]
    later = frozenset(sequence_first)
    for name, value_type in declared.items():
        dims = value_type.shape
        if dynamic_batch and name in names and dims:
            free = BATCH_DIM if name == shaped[0] else f"{BATCH_DIM}_{name}"
            axis = 1 if name in later and len(dims) > 1 else 0
            dims = (*dims[:axis], free, *dims[axis + 1 :])
        types[name] = TypeInfo(numpy_of_onnx(value_type.elem_type), dims)
    return types


def _sequence_first_inputs(
    model: Model, declared: Mapping[str, ValueType], inputs: Sequence[str]
) -> list[str]:
    """The inputs whose dim 0 is the time of a ``RecurrentNetwork`` (which reads its sequence
    as T x N x D): a longer dim 0 of the input makes a longer dim 0 of an op's sequence input,
    as the shape analysis follows it through the ops between them. Their batch is dim 1."""
    from graphtools.analysis.shapes import TensorType, infer_model_shapes

    recurrent = [op for op in model.predict_net if op.type == "RecurrentNetwork" and op.inputs]
    if not recurrent:
        return []
    shapes: dict[str, tuple[int, ...]] = {}
    for name in inputs:
        dims = declared[name].shape if name in declared else None
        if dims and all(isinstance(d, int) for d in dims):
            shapes[name] = tuple(d for d in dims if isinstance(d, int))
    dtypes = {name: numpy_of_onnx(declared[name].elem_type) for name in shapes}
    given = {name: TensorType(dtypes[name], dims) for name, dims in shapes.items()}
    candidates = {name: dims for name, dims in shapes.items() if len(dims) >= 3}
    if not candidates:
        return []
    try:
        before = infer_model_shapes(model, given)  # one analysis at the shapes as declared
    except GraphToolsError:
        return []
    found = []
    for name, dims in candidates.items():
        longer = {**given, name: TensorType(dtypes[name], (dims[0] + 1, *dims[1:]))}
        try:
            after = infer_model_shapes(model, longer)
        except GraphToolsError:
            continue
        for op in recurrent:
            sequence = op.inputs[0]
            first, second = before.final(sequence).shape, after.final(sequence).shape
            if first and second and first[0] != second[0] and first[1:] == second[1:]:
                found.append(name)
                break
    return found


def _convert(
    net: Net,
    options: ExportOptions,
    types: dict[str, TypeInfo],
    read: set[str],
    params: Mapping[str, Any],
    rewritten: frozenset[str],
    quant: Mapping[str, tuple[float, int]],
    nested_names: dict[int, tuple[tuple[str, ...], tuple[str, ...]]],
    *,
    final: bool,
) -> ExportContext:
    """Convert every op of ``net``. Unless ``final``, an exporter that refused for want of a
    rank stops the conversion early (``missing_rank`` is set) so the caller can learn more
    shapes and convert again."""
    names = NameSource(chain(read, params, (n for op in net.ops for n in op.outputs)))
    outer = frozenset(n for op in net.ops for n in (*op.inputs, *op.outputs))
    cx = ExportContext(
        options.opset,
        names,
        types,
        read,
        outer_names=outer | frozenset(params),
        rewritten=rewritten,
        recurrent=options.recurrent,
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


def _nested_reads(op: Op) -> Iterable[str]:
    """Every value the ops of ``op``'s sub-graphs (and theirs) read."""
    for _, sub in op.nested_nets():
        for inner in sub.ops:
            yield from inner.inputs
            yield from _nested_reads(inner)


def _without_unread_helpers(
    ops: Sequence[Op], outputs: Sequence[str], helpers: set[str]
) -> list[Op]:
    """``ops`` without the helper transposes whose results no op (sub-graphs included) and
    no graph output reads: one walk from the last op back."""
    needed = set(outputs)
    kept: list[Op] = []
    for op in reversed(ops):
        if op.outputs and op.outputs[0] in helpers and op.outputs[0] not in needed:
            continue
        kept.append(op)
        needed.update(op.inputs)
        needed.update(_nested_reads(op))
    kept.reverse()
    return kept


def _header(opset: int, ir_version: int, functions: Sequence[onnx.FunctionProto]) -> Any:
    """The model's header (a ModelProto without its graph): IR version, producer, opset
    imports and the model-local functions."""
    return onnx.ModelProto(
        ir_version=ir_version,
        producer_name="graphtools",
        opset_import=[
            helper.make_opsetid(domain, version)
            for domain, version in _opsets(opset, functions).items()
        ],
        functions=list(functions),
    )


def _opsets(opset: int, functions: Sequence[onnx.FunctionProto]) -> dict[str, int]:
    return {"": opset, **({CAFFE2_DOMAIN: 1} if functions else {})}


def _model(
    net: Net, options: ExportOptions, ir_version: int, functions: Sequence[onnx.FunctionProto]
) -> Model:
    return Model(
        net,
        opset_imports=_opsets(options.opset, functions),
        header=_header(options.opset, ir_version, functions),
    )


def _inferred(
    ops: Sequence[Op],
    inputs: Mapping[str, ValueType],
    initializers: Mapping[str, Tensor],
    known: Mapping[str, ValueType],
    options: ExportOptions,
    ir_version: int,
    functions: Sequence[onnx.FunctionProto],
) -> dict[str, ValueType]:
    """The types ONNX shape inference gives the values ``ops`` compute (``known``: the value
    info it starts from; it cannot follow a Loop whose carried values grow, as the detection
    functions' do). It needs no weights: big initializers are typed inputs of the model it
    reads (``PROBE_KEEPS``), so no weight is encoded for it."""
    types = {**known, **inputs}
    kept: dict[str, Tensor] = {}
    fed = list(inputs)
    for name, tensor in initializers.items():
        if tensor.size <= PROBE_KEEPS:
            kept[name] = tensor
        else:
            fed.append(name)
            types[name] = ValueType(onnx_dtype_of_numpy(tensor.dtype), tensor.shape)
    net = Net(ops, fed, [], name="probe", dialect=ONNX, initializers=kept, types=types)
    probe = _model(net, options, ir_version, functions)
    found = op_table(probe).infer_types(probe)
    return {
        name: value_type
        for name, value_type in found.items()
        if value_type.kind == "tensor" and value_type.elem_type
    }


def _learn_types(types: dict[str, TypeInfo], found: Mapping[str, ValueType]) -> bool:
    """Add the shapes ONNX inference ``found`` for blobs ``types`` lacks; whether any was."""
    learned = False
    for name, value_type in found.items():
        if name in types or value_type.shape is None:
            continue
        types[name] = TypeInfo(numpy_of_onnx(value_type.elem_type), value_type.shape)
        learned = True
    return learned


def _annotation_header(
    name: str,
    initializers: dict[str, Tensor],
    types: Mapping[str, ValueType],
    quant: Mapping[str, tuple[float, int]],
    names: Iterable[str],
    taken: Iterable[str],
) -> onnx.GraphProto | None:
    """The graph header saying the scale and zero point of every Int8 graph input, output and
    initializer (ONNX's ``quantization_annotation``), whose scalar initializers it adds to
    ``initializers``; ``None`` when there is none."""
    quantized = sorted(n for n in set(names) if n in quant)
    if not quantized:
        return None
    fresh = NameSource(taken)
    header = onnx.GraphProto(name=name)
    for blob in quantized:
        scale, zero_point = quant[blob]
        if blob in initializers:
            elem_type = onnx_dtype_of_numpy(initializers[blob].dtype)
        else:
            elem_type = types[blob].elem_type if blob in types else 0
        zp_type = np.uint8 if elem_type == onnx.TensorProto.UINT8 else np.int32
        scale_name, zp_name = fresh.fresh(f"{blob}_scale"), fresh.fresh(f"{blob}_zero_point")
        initializers[scale_name] = ArrayTensor(np.asarray(scale, np.float32))
        initializers[zp_name] = ArrayTensor(np.asarray(zero_point, zp_type))
        annotation = header.quantization_annotation.add(tensor_name=blob)
        annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value=scale_name)
        annotation.quant_parameter_tensor_names.add(key="ZERO_POINT_TENSOR", value=zp_name)
    return header


@dataclass
class _Prepared:
    """The pair made ready to convert: in SSA form, its params, inputs and what is known."""

    net: Net
    params: dict[str, np.ndarray]
    quant: dict[str, tuple[float, int]]
    inputs: list[str]
    outputs: list[str]
    types: dict[str, TypeInfo]
    rewritten: frozenset[str]
    nested_names: dict[int, tuple[tuple[str, ...], tuple[str, ...]]]


def _prepare(model: Model, options: ExportOptions) -> _Prepared:
    """Params, SSA names, graph inputs and the types known before converting (see
    ``export_model`` for the rules and refusals)."""
    declared = dict(model.predict_net.types)
    work = model.copy()
    if options.test_mode:
        work = Model(net_in_test_mode(work.predict_net), work.init_net)
    # A blob the init_net fills but a declared type names is fed (a feed overrides the value).
    params, quant = _split_quantized(
        {k: v for k, v in _init_values(work).items() if k not in declared}
    )
    quant.update(options.input_quantization)
    net, nested_names = explicit_if_effects(work.predict_net)
    writes = Counter(name for op in net.ops for name in op.outputs)
    external_inputs = frozenset(net.external_inputs)
    rewritten = frozenset(
        n for n, count in writes.items() if count > 1 or n in params or n in external_inputs
    )
    net = renamed_for_export(net, params)
    # A name declared twice is one graph input (ONNX names are unique).
    names = list(dict.fromkeys(net.external_inputs)) or _free_reads(net)
    # A declared input no op reads changes nothing; without a declared type it cannot be a
    # graph input (a training net's data queue blob), so it is left out.
    unread = set(names) - set(_reads(net)) - set(net.external_outputs)
    names = [n for n in names if n not in unread or n in declared]
    inputs = [name for name in names if name not in params]
    undeclared = [n for n in _free_reads(net) if n not in params and n not in names]
    # Exported nets often read their data blob without declaring it (the predictor feeds
    # it): with a declared type it is an input like a declared one.
    inputs += [n for n in undeclared if n in declared]
    unknown = [n for n in undeclared if n not in declared]
    if unknown:
        raise InvalidNetError(
            f"blobs {unknown} are read before any op writes them and are neither external "
            "inputs nor init_net outputs; declare their types (export_onnx's value_info, "
            "export-onnx's --shapes) to make them inputs"
        )
    sequence_first = (
        _sequence_first_inputs(Model(net, work.init_net), declared, inputs)
        if options.dynamic_batch
        else []
    )
    types = _input_types(declared, inputs, options.dynamic_batch, sequence_first)
    for name, value in params.items():
        types[name] = TypeInfo(value.dtype, tuple(value.shape))
    known_inputs = {n: types[n] for n in inputs if n in types}
    types.update(_shape_info(Model(net, work.init_net), known_inputs))
    untyped = [name for name in inputs if name not in types or types[name].dtype is None]
    if untyped:
        raise InvalidNetError(
            f"the type of graph inputs {untyped} cannot be known: declare them (export_onnx's "
            "value_info={name: (onnx elem_type, shape)}, export-onnx's --shapes)"
        )
    outputs = list(net.external_outputs)
    if not outputs:
        raise InvalidNetError(
            f"net {net.name!r} declares no external outputs: nothing to export (declare them: "
            "prepare_export(model, outputs=[...]) or net.set_external_outputs; export-onnx "
            "takes the blobs nothing reads, or --outputs)"
        )
    return _Prepared(net, params, quant, inputs, outputs, types, rewritten, nested_names)


def export_model(model: Model, options: ExportOptions) -> ExportedModel:
    """Convert an init_net/predict_net pair into an ONNX-dialect model (``model`` is not
    modified).

    Raises:
        UnsupportedOpError: an option outside what is supported, an op without an ONNX form
            (naming op index and type; op types without an exporter, nested nets included, are
            refused before anything else), or an argument variant without one (NHWC order,
            training mode, ...).
        InvalidNetError: an input whose type cannot be known, or a blob read before any op
            writes it that is neither an input nor a param. (A declared external input that
            no op reads is left out of the graph unless its type is declared.)
        GraphToolsError: the result fails onnx's checker.
    """
    check_options(options)
    ir_version = ir_version_for(options.opset) if options.ir_version is None else options.ir_version
    _refuse_unmapped(model.predict_net, options.opset)
    found = _prepare(model, options)
    net, types = found.net, found.types
    read = set(_reads(net)) | set(found.outputs)
    initializers: dict[str, Tensor] = {
        name: ArrayTensor(value) for name, value in found.params.items() if name in read
    }
    inputs = {name: _value_type(types[name]) for name in found.inputs}

    def convert(final: bool) -> ExportContext:
        return _convert(
            net,
            options,
            types,
            read,
            found.params,
            found.rewritten,
            found.quant,
            found.nested_names,
            final=final,
        )

    cx = convert(final=False)
    while cx.missing_rank:
        # An exporter wanted a rank nobody knew: learn the shapes ONNX inference finds for
        # the graph converted so far, then convert again with them.
        held = {**initializers, **cx.constants}
        functions = list(cx.functions.values())
        inferred = _inferred(cx.nodes, inputs, held, {}, options, ir_version, functions)
        learned = _learn_types(types, inferred)
        cx = convert(final=not learned)
        if not learned:
            break
    functions = list(cx.functions.values())
    ops = _without_unread_helpers(cx.nodes, found.outputs, cx.helpers)
    initializers.update(cx.constants)
    # The value info we know goes in first: ONNX inference starts from it (it cannot follow
    # a Loop whose carried values grow, as the detection functions' do).
    produced = {name for op in ops for name in op.outputs}
    value_info = {
        name: _value_type(known)
        for name in sorted(produced - set(found.outputs))
        if (known := types.get(name)) is not None
        and known.dtype is not None
        and known.shape is not None
    }
    inferred = _inferred(ops, inputs, initializers, value_info, options, ir_version, functions)
    outputs: dict[str, ValueType] = {}
    for name in found.outputs:
        known = types.get(name)
        if known is not None and known.dtype is not None and known.shape is not None:
            outputs[name] = _value_type(known)
        elif name in inferred and inferred[name].shape is not None:
            outputs[name] = inferred[name].with_shape(inferred[name].shape)
        else:
            raise InvalidNetError(
                f"the type of graph output {name!r} cannot be inferred (its rank)"
            )
    declared = {**inputs, **outputs, **value_info}
    graph_name = net.name or "graphtools"
    taken = chain(initializers, inputs, (n for op in ops for n in (*op.inputs, *op.outputs)))
    header = _annotation_header(
        graph_name,
        initializers,
        declared,
        cx.quant,
        chain(found.inputs, found.outputs, found.params),
        taken,
    )
    graph = Net(
        ops,
        list(inputs),
        found.outputs,
        name=graph_name,
        dialect=ONNX,
        initializers=initializers,
        types=declared,
        header=header,
    )
    exported = _model(graph, options, ir_version, functions)
    try:
        op_table(exported).check(exported)
    except InvalidNetError as exc:
        raise GraphToolsError(f"the exported model fails the ONNX checker: {exc}") from exc
    return ExportedModel(graph, dict(exported.opset_imports), exported.header)

"""ONNX-dialect model -> Caffe2 init_net/predict_net pair, inside the IR (``import_model``,
the ``convert-to-caffe2`` pass).

Model level, as Caffe2's ``onnx_graph_to_caffe2_net`` did: initializers become the init_net's
``GivenTensor*Fill`` ops (by dtype); graph inputs that are not initializers become the
predict_net's external inputs (IR-3 models list their weights as inputs too: those are params,
not feeds), followed by the params; graph outputs become external outputs. Ops are converted
one by one by the table in ``table`` (families in ``nn``, ``math``, ``tensor``, ``elementwise``,
``random``, ``control``, ``recurrent``); a call of a ``caffe2``-domain function ``export_onnx``
wrote becomes the Caffe2 op it stands for (``caffe2_calls``), and a uint8/int32 initializer the
graph's ``quantization_annotation`` gives a scale and zero point becomes an Int8 fill.

The model is read as the ONNX codec loaded it (an initializer's data is decoded when it is
converted) and the pair is made of IR ops of the Caffe2 dialect: no protobuf message is built on
the way. The fills hold their arrays (``graphtools.convert.fills``), so weights never become
Python floats. The predict_net declares the types the graph declares for its inputs
(``Net.types``), which ``export_onnx`` reads: exporting the pair back needs no ``value_info``.

Choices where upstream was silent or loose:

* A top-level ``Constant`` becomes an init_net fill like an initializer (a param), so passes
  see shape constants as params; inside an ``If`` branch it stays a fill op of the branch.
* A constant input Caffe2 takes as an argument (Unsqueeze axes, Clip bounds, Pad pads, ...)
  is folded into the op; its fill is dropped when nothing else reads it.
* Static shapes come from ONNX shape inference (``onnx.shape_inference``) and are used only
  where a Caffe2 op needs what the ONNX op left implicit (a rank for a negative axis, input
  sizes for ``auto_pad=SAME_*`` or ``ceil_mode``); when they are unknown the node is refused.
* Opsets 7 to ``onnx.defs.onnx_opset_version()`` are accepted; each node's schema version must
  be one its converter implements (see ``supported_ops``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from graphtools._gc import paused_gc
from graphtools.analysis.scopes import NameSource
from graphtools.convert.conventions import CAFFE2_DOMAIN, PROBE_KEEPS, max_opset
from graphtools.convert.dtypes import onnx_dtype_of_numpy
from graphtools.convert.fills import fill_op, fill_ops, fill_spec, int8_fill_spec
from graphtools.convert.onnx_to_caffe2.caffe2_calls import caffe2_call
from graphtools.convert.onnx_to_caffe2.context import NodeContext, Shape
from graphtools.convert.onnx_to_caffe2.table import CONVERTERS
from graphtools.dialects import op_table
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model, Net, Op
from graphtools.serde.array_fills import ArrayFill
from graphtools.values import ValueType

__all__ = [
    "MIN_OPSET",
    "GraphImporter",
    "import_model",
    "max_opset",
    "supported_ops",
]

MIN_OPSET = 7
"""The oldest default-domain opset imported (numpy broadcasting in arithmetic starts at 7)."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


def supported_ops() -> dict[str, tuple[int, ...]]:
    """``{ONNX op type: schema versions the importer implements}``, sorted by op type."""
    return {name: CONVERTERS[name].since for name in sorted(CONVERTERS)}


def _quantization(
    annotations: Iterable[Any], arrays: dict[str, np.ndarray]
) -> dict[str, tuple[float, int]]:
    """``{tensor: (scale, zero point)}`` of the graph's ``quantization_annotation``: the
    per-tensor entries whose scale and zero point are scalar initializers."""
    found = {}
    for annotation in annotations:
        keys = {p.key: p.value for p in annotation.quant_parameter_tensor_names}
        scale, zero_point = (
            arrays.get(keys.get(k, "")) for k in ("SCALE_TENSOR", "ZERO_POINT_TENSOR")
        )
        if scale is not None and zero_point is not None and scale.size == zero_point.size == 1:
            found[annotation.tensor_name] = (
                float(scale.reshape(-1)[0]),
                int(zero_point.reshape(-1)[0]),
            )
    return found


def _header_field(net: Net, name: str) -> Sequence[Any]:
    """A repeated field of the graph's header (``()`` for a net built without one)."""
    return () if net.header is None else getattr(net.header, name)


def _nets(net: Net) -> Iterable[Net]:
    """``net`` and every graph nested in it, depth first."""
    yield net
    for index in sorted(net.nested_op_indices()):
        for _, nested in net[index].nested_nets():
            yield from _nets(nested)


def _shape(value_type: ValueType) -> Shape | None:
    if value_type.kind != "tensor" or value_type.shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in value_type.shape)


def _probe(model: Model) -> Model:
    """The model ONNX shape inference reads: the main graph's big initializers (``PROBE_KEEPS``)
    are typed graph inputs there, so no weight is encoded for it."""
    net = model.predict_net.copy()
    big = {name: t for name, t in net.initializers.items() if t.size > PROBE_KEEPS}
    if big:
        with net.edit() as edit:
            for name, tensor in big.items():
                edit.set_initializer(name, None)
                edit.set_type(name, ValueType(onnx_dtype_of_numpy(tensor.dtype), tensor.shape))
            inputs = set(net.external_inputs)
            edit.set_external_inputs([*net.external_inputs, *(n for n in big if n not in inputs)])
    return Model(net, opset_imports=model.opset_imports, header=model.header)


def _static_shapes(model: Model) -> dict[str, Shape]:
    """Shapes ONNX shape inference finds (unknown and symbolic dims ``None``) over the ones
    the graphs declare (all there is when inference refuses the model)."""
    shapes: dict[str, Shape] = {}
    probe = _probe(model)
    inferred = op_table(probe).infer_all_types(probe)
    for types in (*(net.types for net in _nets(model.predict_net)), inferred):
        for name, value_type in types.items():
            shape = _shape(value_type)
            if shape is not None:
                shapes[name] = shape
    return shapes


class _LazyShapes(Mapping[str, Shape]):
    """``_static_shapes`` of a model, found on the first question: shape inference encodes the
    whole model, and most nodes convert without asking for a shape."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._shapes: dict[str, Shape] | None = None

    def _found(self) -> dict[str, Shape]:
        if self._shapes is None:
            self._shapes = _static_shapes(self._model)
        return self._shapes

    def __getitem__(self, name: str) -> Shape:
        return self._found()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


def _all_names(graph: Net) -> Iterable[str]:
    for net in _nets(graph):
        yield from net.external_inputs
        yield from net.external_outputs
        yield from net.initializers
        for op in net.ops:
            yield from op.inputs
            yield from op.outputs


class GraphImporter:
    """Converts the nodes of one ONNX graph (the main graph or an ``If`` branch).

    Attributes:
        ops: the Caffe2 ops emitted so far, in order.
        folded: constants converters took as arguments (shared by every graph of the model).
        shapes: static shapes by value name (shared).
        names: the model-wide fresh-name generator.
        graph_label: text naming the graph in error messages (empty for the main graph).
    """

    def __init__(
        self,
        opset: int,
        shapes: Mapping[str, Shape],
        names: NameSource,
        *,
        parent: GraphImporter | None = None,
        graph_label: str = "",
    ) -> None:
        self.opset = opset
        self.shapes = shapes
        self.names = names
        self.parent = parent
        self.graph_label = graph_label
        self.ops: list[Op] = []
        self.folded: set[str] = set() if parent is None else parent.folded
        self.quantized: dict[str, tuple[float, int]] = {} if parent is None else parent.quantized
        self.consts: dict[str, np.ndarray] = {}
        self.params: list[ArrayFill] = []

    def constant(self, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is a constant of this graph or an enclosing one."""
        importer: GraphImporter | None = self
        while importer is not None:
            value = importer.consts.get(name)
            if value is not None:
                return value
            importer = importer.parent
        return None

    def add_constant(self, name: str, value: np.ndarray, where: str) -> None:
        """Record a constant: an init_net param in the main graph (an Int8 fill when the graph's
        ``quantization_annotation`` gives its scale), a fill op in a branch."""
        self.consts[name] = value
        if self.parent is None and name in self.quantized:
            self.params.append(int8_fill_spec(name, value, *self.quantized[name]))
        elif self.parent is None:
            self.params.append(fill_spec(name, value, where))
        else:
            self.ops.append(fill_op(name, value, where))

    def convert(self, graph: Net) -> None:
        """Convert every op of ``graph`` (an ONNX-dialect net) in order."""
        for index, node in enumerate(graph.ops):
            self._convert_node(index, node)

    def _convert_node(self, index: int, node: Op) -> None:
        since = 0
        ctx = NodeContext(node, index, self.opset, since, self)
        domain = node.domain or ""
        if domain == CAFFE2_DOMAIN:
            caffe2_call(ctx)
            return
        if domain not in _DEFAULT_DOMAINS:
            raise ctx.refuse(f"op domain {domain!r} is not supported (only the default)")
        entry = CONVERTERS.get(node.type)
        if entry is None:
            raise ctx.refuse("no Caffe2 mapping for this op type in graphtools")
        try:
            ctx.since = onnx.defs.get_schema(node.type, self.opset, "").since_version
        except onnx.defs.SchemaError as exc:
            raise ctx.refuse(f"onnx has no schema for it at this opset: {exc}") from exc
        if ctx.since not in entry.since:
            raise ctx.refuse(
                f"schema version {node.type}-{ctx.since} is not supported (implemented: "
                f"{', '.join(map(str, entry.since))})"
            )
        for argument in node.args:
            if argument.name not in entry.attributes:
                raise ctx.refuse("is not supported by the Caffe2 mapping", argument.name)
        entry.fn(ctx)

    def _sub_importer(self, graph: Net, what: str, ctx: NodeContext) -> GraphImporter:
        """The importer of a sub-graph, its initializers recorded as constants (fill ops)."""
        label = f"{self.graph_label}, {what} {graph.name!r} of node #{ctx.index}"
        sub = GraphImporter(self.opset, self.shapes, self.names, parent=self, graph_label=label)
        if _header_field(graph, "sparse_initializer"):
            raise ctx.refuse(f"{what} {graph.name!r} has sparse initializers")
        for name, tensor in graph.initializers.items():
            sub.add_constant(name, tensor.numpy(), ctx.where)
        return sub

    def import_body(self, graph: Net, ctx: NodeContext) -> list[Op]:
        """The Caffe2 ops of a sub-graph (a ``Loop`` body) under its own value names, its
        initializers as fill ops first."""
        sub = self._sub_importer(graph, "body", ctx)
        sub.convert(graph)
        return sub.ops

    def import_subgraph(self, graph: Net, outputs: Sequence[str], ctx: NodeContext) -> Net:
        """Convert a branch graph into a net writing the node's ``outputs``.

        The branch's output values are renamed to the enclosing node's output names (Caffe2
        branches write the If's outputs in the shared workspace); a branch output that no
        branch op writes (an outer value or a duplicate) is copied.
        """
        branch_outputs = list(graph.external_outputs)
        if len(branch_outputs) != len(outputs):
            raise ctx.refuse(
                f"branch {graph.name!r} has {len(branch_outputs)} outputs, the node {len(outputs)}"
            )
        sub = self._sub_importer(graph, "branch", ctx)
        sub.convert(graph)
        written: dict[str, int] = {}
        for position, op in enumerate(sub.ops):
            for name in op.outputs:
                written[name] = position
        renames: dict[str, str] = {}
        copies: list[Op] = []
        for inner, outer in zip(branch_outputs, outputs, strict=True):
            if inner in written and inner not in renames:
                renames[inner] = outer
            else:
                copies.append(Op("Copy", [renames.get(inner, inner)], [outer]))
        ops = [
            op.replace(
                inputs=[renames.get(n, n) for n in op.inputs],
                outputs=[renames.get(n, n) for n in op.outputs],
            )
            if renames
            else op
            for op in sub.ops
        ]
        ops.extend(copies)
        return Net(ops, _read_before_write(ops), list(outputs), name=graph.name or None)


def _read_before_write(ops: Sequence[Op]) -> list[str]:
    written: set[str] = set()
    read: dict[str, None] = {}
    for op in ops:
        for name in op.inputs:
            if name not in written:
                read[name] = None
        for _, net in op.nested_nets():
            for name in net.external_inputs:
                if name not in written:
                    read[name] = None
        written.update(op.outputs)
    return list(read)


def _default_opset(model: Model) -> int:
    versions = [v for domain, v in model.opset_imports.items() if domain in _DEFAULT_DOMAINS]
    if not versions:
        if getattr(model.header, "ir_version", 3) >= 3:
            raise UnsupportedOpError("the model imports no default-domain opset")
        return 1
    opset = int(versions[0])
    if opset < MIN_OPSET or opset > max_opset():
        raise UnsupportedOpError(
            f"default-domain opset {opset} is not supported (supported: {MIN_OPSET} to "
            f"{max_opset()}, the newest the installed onnx package knows)"
        )
    return opset


def _input_types(graph: Net, feeds: Sequence[str]) -> dict[str, ValueType]:
    """The tensor types the graph declares for ``feeds`` (what ``export_onnx`` reads back)."""
    types = graph.types
    return {
        name: types[name].with_shape(types[name].shape)
        for name in feeds
        if name in types and types[name].kind == "tensor" and types[name].elem_type
    }


def import_model(model: Model) -> Model:
    """Convert an ONNX-dialect model into a Caffe2 init_net/predict_net pair (see the module
    docstring); ``model`` is only read.

    Returns:
        The pair: ``<graph>_init`` holding one fill per param and ``<graph>_predict``, which
        declares the graph inputs' types (``Net.types``).

    Raises:
        UnsupportedOpError: a node, attribute, opset or element type without a Caffe2
            mapping (naming the node, op type, attribute and opset).
        SerdeError: the data of an initializer cannot be read (its external file).
    """
    with paused_gc():  # a big model makes millions of small objects; see graphtools._gc
        return _import(model)


def _import(model: Model) -> Model:
    opset = _default_opset(model)
    graph = model.predict_net
    sparse = _header_field(graph, "sparse_initializer")
    if sparse:
        raise UnsupportedOpError(
            f"sparse initializers ({sparse[0].values.name!r}, ...) are not supported"
        )
    names = NameSource(_all_names(graph))
    importer = GraphImporter(opset, _LazyShapes(model), names)
    arrays = {name: tensor.numpy() for name, tensor in graph.initializers.items()}
    annotations = _header_field(graph, "quantization_annotation")
    importer.quantized.update(_quantization(annotations, arrays))
    for annotation in annotations:  # the scales live in the Int8 fills
        importer.folded.update(p.value for p in annotation.quant_parameter_tensor_names)
    for name, value in arrays.items():
        importer.add_constant(name, value, f"initializer {name!r}")
    initializers = graph.initializers
    feeds = list(dict.fromkeys(n for n in graph.external_inputs if n not in initializers))
    importer.convert(graph)
    outputs = list(graph.external_outputs)
    read = {name for op in importer.ops for name in op.inputs}
    read.update(name for op in importer.ops for _, net in op.nested_nets() for name in _reads(net))
    read.update(outputs)
    params = [
        spec for spec in importer.params if spec.blob in read or spec.blob not in importer.folded
    ]
    param_names = [spec.blob for spec in params]
    label = graph.name or ""
    init = Net(fill_ops(params), [], param_names, name=f"{label}_init")
    predict = Net(
        importer.ops,
        [*feeds, *param_names],
        outputs,
        name=f"{label}_predict",
        types=_input_types(graph, feeds),
    )
    return Model(predict, init)


def _reads(net: Net) -> Iterable[str]:
    yield from net.external_inputs
    for op in net.ops:
        yield from op.inputs
        for _, nested in op.nested_nets():
            yield from _reads(nested)

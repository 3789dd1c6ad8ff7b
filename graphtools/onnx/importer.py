"""ONNX model -> Caffe2 init_net/predict_net pair (``import_onnx``).

Model level, as Caffe2's ``onnx_graph_to_caffe2_net`` did: initializers become the init_net's
``GivenTensor*Fill`` ops (by dtype); graph inputs that are not initializers become the
predict_net's external inputs (IR-3 models list their weights as inputs too: those are params,
not feeds), followed by the params; graph outputs become external outputs. Nodes are converted
one by one by the table in ``registry`` (families in ``import_nn``, ``import_math``,
``import_tensor``, ``import_elementwise``, ``import_random``, ``import_control``,
``import_recurrent``); a call of a ``caffe2``-domain function ``export_onnx`` wrote becomes the
Caffe2 op it stands for (``import_caffe2``), and a uint8/int32 initializer the graph's
``quantization_annotation`` gives a scale and zero point becomes an Int8 fill.

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

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, numpy_helper

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model, Net, Op
from graphtools.onnx import (  # noqa: F401  (importing registers the converters)
    import_control,
    import_elementwise,
    import_math,
    import_nn,
    import_random,
    import_recurrent,
    import_tensor,
)
from graphtools.onnx.context import NameGen, NodeContext, Shape
from graphtools.onnx.dtypes import fill_op_for
from graphtools.onnx.export_context import CAFFE2_DOMAIN
from graphtools.onnx.external import ModelSource, load_onnx
from graphtools.onnx.import_caffe2 import caffe2_call
from graphtools.onnx.registry import CONVERTERS
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef, op_from_proto

__all__ = [
    "MIN_OPSET",
    "GraphImporter",
    "fill_message",
    "import_onnx",
    "int8_fill_message",
    "max_opset",
    "supported_ops",
]

MIN_OPSET = 7
"""The oldest default-domain opset imported (numpy broadcasting in arithmetic starts at 7)."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


def supported_ops() -> dict[str, tuple[int, ...]]:
    """``{ONNX op type: schema versions the importer implements}``, sorted by op type."""
    return {name: CONVERTERS[name].since for name in sorted(CONVERTERS)}


def max_opset() -> int:
    """The newest default-domain opset the installed onnx package knows."""
    return int(onnx.defs.onnx_opset_version())


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def fill_message(name: str, value: np.ndarray, where: str) -> caffe2_pb2.OperatorDef:
    """The ``GivenTensor*Fill`` OperatorDef writing ``value`` to blob ``name``.

    Float values are written as one packed field parsed in C, so weights of real models do
    not go through a Python list.
    """
    op_type, field = fill_op_for(value.dtype, where)
    msg = caffe2_pb2.OperatorDef(type=op_type, output=[name])
    shape = msg.arg.add(name="shape")
    shape.ints.extend(int(d) for d in value.shape)
    values = msg.arg.add(name="values")
    flat = value.reshape(-1)
    if field == "floats":
        raw = flat.astype("<f4").tobytes()
        values.MergeFromString(b"\x2a" + _varint(len(raw)) + raw)
    elif field == "ints":
        values.ints.extend(flat.astype(np.int64).tolist())
    elif field == "s":
        values.s = flat.tobytes()
    else:
        values.strings.extend(v if isinstance(v, bytes) else str(v).encode() for v in flat)
    return msg


def int8_fill_message(
    name: str, value: np.ndarray, scale: float, zero_point: int
) -> caffe2_pb2.OperatorDef:
    """The Int8 fill OperatorDef writing the quantized ``value`` (uint8: its bytes in an
    ``Int8GivenTensorFill``; int32, a bias: ``Int8GivenIntTensorFill``) with its quantization.

    Raises:
        UnsupportedOpError: ``value`` is neither uint8 nor int32.
    """
    if value.dtype == np.uint8:
        msg = caffe2_pb2.OperatorDef(type="Int8GivenTensorFill", output=[name])
        msg.arg.add(name="values").s = value.tobytes()
    elif value.dtype == np.int32:
        msg = caffe2_pb2.OperatorDef(type="Int8GivenIntTensorFill", output=[name])
        msg.arg.add(name="values").ints.extend(value.reshape(-1).tolist())
    else:
        raise UnsupportedOpError(
            f"initializer {name!r}: a quantized {value.dtype} tensor has no Caffe2 Int8 fill "
            "(uint8 and int32 do)"
        )
    msg.arg.add(name="shape").ints.extend(int(d) for d in value.shape)
    msg.arg.add(name="Y_scale").f = float(scale)
    msg.arg.add(name="Y_zero_point").i = int(zero_point)
    return msg


def _quantization(graph: GraphProto, arrays: dict[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """``{tensor: (scale, zero point)}`` of the graph's ``quantization_annotation``: the
    per-tensor entries whose scale and zero point are scalar initializers."""
    found = {}
    for annotation in graph.quantization_annotation:
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


def _fill_op(name: str, value: np.ndarray, where: str) -> Op:
    """``fill_message`` as an IR op (for fills inside nested nets, which are small)."""
    return op_from_proto(fill_message(name, value, where))


def _tensor_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # onnx raises TypeError/ValueError/KeyError on exotic types
        raise UnsupportedOpError(f"{where}: cannot read tensor {tensor.name!r}: {exc}") from exc


def _dims(value_info: onnx.ValueInfoProto) -> Shape | None:
    ttype = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not ttype.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim)


def _subgraphs(graph: GraphProto) -> Iterable[GraphProto]:
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield attr.g
            elif attr.type == onnx.AttributeProto.GRAPHS:
                yield from attr.graphs


def _all_graphs(graph: GraphProto) -> Iterable[GraphProto]:
    yield graph
    for sub in _subgraphs(graph):
        yield from _all_graphs(sub)


def _static_shapes(model: ModelProto) -> dict[str, Shape]:
    """Shapes ONNX shape inference finds (unknown dims ``None``); empty if inference fails."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is a help, not a requirement: nodes needing it refuse
        inferred = model
    shapes: dict[str, Shape] = {}
    for graph in _all_graphs(inferred.graph):
        for info in (*graph.input, *graph.value_info, *graph.output):
            dims = _dims(info)
            if dims is not None:
                shapes[info.name] = dims
    return shapes


def _all_names(graph: GraphProto) -> Iterable[str]:
    for g in _all_graphs(graph):
        yield from (i.name for i in g.input)
        yield from (o.name for o in g.output)
        yield from (t.name for t in g.initializer)
        for node in g.node:
            yield from node.input
            yield from node.output


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
        shapes: dict[str, Shape],
        names: NameGen,
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
        self.params: list[caffe2_pb2.OperatorDef] = []

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
            self.params.append(int8_fill_message(name, value, *self.quantized[name]))
        elif self.parent is None:
            self.params.append(fill_message(name, value, where))
        else:
            self.ops.append(_fill_op(name, value, where))

    def convert(self, graph: GraphProto) -> None:
        """Convert every node of ``graph`` in order."""
        for index, node in enumerate(graph.node):
            self._convert_node(index, node)

    def _convert_node(self, index: int, node: onnx.NodeProto) -> None:
        since = 0
        ctx = NodeContext(node, index, self.opset, since, self)
        if node.domain == CAFFE2_DOMAIN:
            caffe2_call(ctx)
            return
        if node.domain not in _DEFAULT_DOMAINS:
            raise ctx.refuse(f"op domain {node.domain!r} is not supported (only the default)")
        entry = CONVERTERS.get(node.op_type)
        if entry is None:
            raise ctx.refuse("no Caffe2 mapping for this op type in graphtools")
        try:
            ctx.since = onnx.defs.get_schema(node.op_type, self.opset, "").since_version
        except onnx.defs.SchemaError as exc:
            raise ctx.refuse(f"onnx has no schema for it at this opset: {exc}") from exc
        if ctx.since not in entry.since:
            raise ctx.refuse(
                f"schema version {node.op_type}-{ctx.since} is not supported (implemented: "
                f"{', '.join(map(str, entry.since))})"
            )
        for attr in node.attribute:
            if attr.name not in entry.attributes:
                raise ctx.refuse("is not supported by the Caffe2 mapping", attr.name)
        entry.fn(ctx)

    def import_body(self, graph: GraphProto, ctx: NodeContext) -> list[Op]:
        """The Caffe2 ops of a sub-graph (a ``Loop`` body) under its own value names, its
        initializers as fill ops first."""
        label = f"{self.graph_label}, body {graph.name!r} of node #{ctx.index}"
        sub = GraphImporter(self.opset, self.shapes, self.names, parent=self, graph_label=label)
        if graph.sparse_initializer:
            raise ctx.refuse(f"body {graph.name!r} has sparse initializers")
        for tensor in graph.initializer:
            sub.add_constant(tensor.name, _tensor_array(tensor, ctx.where), ctx.where)
        sub.convert(graph)
        return sub.ops

    def import_subgraph(self, graph: GraphProto, outputs: Sequence[str], ctx: NodeContext) -> Net:
        """Convert a branch graph into a net writing the node's ``outputs``.

        The branch's output values are renamed to the enclosing node's output names (Caffe2
        branches write the If's outputs in the shared workspace); a branch output that no
        branch op writes (an outer value or a duplicate) is copied.
        """
        label = f"{self.graph_label}, branch {graph.name!r} of node #{ctx.index}"
        sub = GraphImporter(self.opset, self.shapes, self.names, parent=self, graph_label=label)
        branch_outputs = [o.name for o in graph.output]
        if len(branch_outputs) != len(outputs):
            raise ctx.refuse(
                f"branch {graph.name!r} has {len(branch_outputs)} outputs, the node {len(outputs)}"
            )
        if graph.sparse_initializer:
            raise ctx.refuse(f"branch {graph.name!r} has sparse initializers")
        for tensor in graph.initializer:
            sub.add_constant(tensor.name, _tensor_array(tensor, ctx.where), ctx.where)
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


def _default_opset(model: ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        if model.ir_version >= 3:
            raise UnsupportedOpError("the model imports no default-domain opset")
        return 1
    opset = int(versions[0])
    if opset < MIN_OPSET or opset > max_opset():
        raise UnsupportedOpError(
            f"default-domain opset {opset} is not supported (supported: {MIN_OPSET} to "
            f"{max_opset()}, the newest the installed onnx package knows)"
        )
    return opset


def import_onnx(model_or_path: ModelSource, *, base_dir: str | Path | None = None) -> Model:
    """Convert an ONNX model into a Caffe2 init_net/predict_net pair.

    Args:
        model_or_path: a ModelProto, a path to an ``.onnx`` file or the file's bytes; external
            data is always loaded (next to the file, or from ``base_dir``).
        base_dir: folder of the external data of an in-memory model.

    Returns:
        The pair: ``<graph>_init`` holding one ``GivenTensor*Fill`` per param and
        ``<graph>_predict``.

    Raises:
        UnsupportedOpError: a node, attribute, opset or element type without a Caffe2
            mapping (naming the node, op type, attribute and opset).
        SerdeError: the file or its external data cannot be read.
    """
    model = load_onnx(model_or_path, base_dir=base_dir)
    opset = _default_opset(model)
    graph = model.graph
    if graph.sparse_initializer:
        raise UnsupportedOpError(
            f"sparse initializers ({graph.sparse_initializer[0].values.name!r}, ...) are not "
            "supported"
        )
    shapes = _static_shapes(model)
    names = NameGen(_all_names(graph))
    importer = GraphImporter(opset, shapes, names)
    arrays = {t.name: _tensor_array(t, f"initializer {t.name!r}") for t in graph.initializer}
    importer.quantized.update(_quantization(graph, arrays))
    for annotation in graph.quantization_annotation:  # the scales live in the Int8 fills
        importer.folded.update(p.value for p in annotation.quant_parameter_tensor_names)
    for name, value in arrays.items():
        importer.add_constant(name, value, f"initializer {name!r}")
    initializers = {t.name for t in graph.initializer}
    feeds = list(dict.fromkeys(i.name for i in graph.input if i.name not in initializers))
    importer.convert(graph)
    outputs = [o.name for o in graph.output]
    read = {name for op in importer.ops for name in op.inputs}
    read.update(name for op in importer.ops for _, net in op.nested_nets() for name in _reads(net))
    read.update(outputs)
    params = [
        msg
        for msg in importer.params
        if msg.output[0] in read or msg.output[0] not in importer.folded
    ]
    init = caffe2_pb2.NetDef(name=f"{graph.name}_init")
    init.op.extend(params)
    param_names = [msg.output[0] for msg in params]
    init.external_output.extend(param_names)
    predict = Net(
        importer.ops,
        [*feeds, *param_names],
        outputs,
        name=f"{graph.name}_predict",
    )
    return Model(predict, net_from_netdef(init))


def _reads(net: Net) -> Iterable[str]:
    yield from net.external_inputs
    for op in net.ops:
        yield from op.inputs
        for _, nested in op.nested_nets():
            yield from _reads(nested)

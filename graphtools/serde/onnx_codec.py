"""The ONNX codec: ONNX model bytes <-> the IR in the ``onnx`` dialect, losslessly.

A model's graph becomes the predict_net: its nodes are ops (type, inputs, outputs; the name,
domain and attributes are decoded from the node on first access, graph attributes as nested
nets), its inputs and outputs the external lists, its initializers the net's ``initializers``
(``OnnxTensor``: data decoded only when asked, external data read from its file only then) and
its inputs', outputs' and value_info's types the net's ``types``. The model's opset imports are
``Model.opset_imports``; the rest of the ModelProto (IR version, producer, functions, metadata,
training info) is ``Model.header``, kept as it was.

Loading builds no node or initializer message: the graph is split into the bytes of its parts
(``proto/onnx_lite.proto``), nodes' types and value names and initializers' names are read a
chunk at a time through messages that declare only those, and a node's or tensor's full message
is parsed when something asks for its attributes, type or data (at 10^6 nodes this halves the
load's time and memory). ``graphtools.serde.onnx_check`` has already validated every part as a
full parse would. Writing back, a node nothing changed is the bytes it was loaded as; a changed
node is its source node with the changed fields rewritten (doc strings, metadata and fields this
codec does not know survive); an unchanged initializer is its loaded bytes and an unchanged
type declaration its source message, so nothing is copied message by message. ``onnx_io``
turns files into bytes and back (external data, atomic writes); this module never touches files
except to read external tensor data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf import message

from graphtools._core import ONNX
from graphtools._gc import paused_gc
from graphtools.errors import SerdeError
from graphtools.ir import Argument, Model, Net, Op
from graphtools.proto import onnx_lite_pb2
from graphtools.serde.codec import op_bytes_reusing_loaded
from graphtools.serde.onnx_check import probe_onnx
from graphtools.values import Tensor, ValueType

__all__ = [
    "ExternalFile",
    "OnnxTensor",
    "argument_from_attribute",
    "attribute_to_proto",
    "check_external_data",
    "external_file",
    "external_tensors",
    "model_from_onnx_bytes",
    "model_to_onnx_bytes",
    "net_from_graph",
    "net_to_graph",
    "nets_of",
    "node_to_proto",
    "tensor_bytes",
    "tensor_to_proto",
    "value_type_from_proto",
]

_A = onnx.AttributeProto
_GRAPH_KINDS = (_A.GRAPH, _A.GRAPHS)
_ONNX_OP_FIELDS = frozenset(("type", "inputs", "outputs", "name", "domain", "args"))
"""The op fields an ONNX node holds; the others (Caffe2's) must stay unset in an ONNX net."""
_CAFFE2_DEFAULTS: dict[str, Any] = {
    "engine": None,
    "device_option": None,
    "control_inputs": (),
    "is_gradient_op": None,
    "debug_info": None,
    "op_version": None,
}


# -- tensors -------------------------------------------------------------------------------------


_SUB_BYTE = frozenset(
    value
    for value in (
        getattr(onnx.TensorProto, name, None)
        for name in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2", "FLOAT6E2M3", "FLOAT6E3M2")
    )
    if value is not None
)
"""Element types packed several to a byte (as the installed onnx knows them): their data's
size is not worked out here, only a declared length is checked."""
_NOT_FIXED = frozenset({onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED})


def external_extent(proto: onnx.TensorProto) -> tuple[int, int | None, int | None]:
    """``(offset, length, bytes its shape and type need)`` of ``proto``'s external data
    (``None``: not said, or not worked out: strings, types packed below a byte, unknown)."""
    entries = {entry.key: entry.value for entry in proto.external_data}
    length = entries.get("length")
    count = 1
    for dim in proto.dims:
        count *= dim
    needed: int | None = None
    if proto.data_type not in _SUB_BYTE and proto.data_type not in _NOT_FIXED:
        try:
            needed = count * onnx.helper.tensor_dtype_to_np_dtype(proto.data_type).itemsize
        except (KeyError, ValueError, TypeError):  # a type this onnx does not know
            needed = None
    return int(entries.get("offset") or 0), int(length) if length else None, needed


@dataclass(eq=False)
class ExternalFile:
    """A file of external tensor data a loaded model refers to.

    Attributes:
        base: the folder its location is relative to (the model file's).
        location: the location as the model gives it.
        count: how many tensors of the loaded model point into it (the writer copies the
            file whole when all of them are still there, unchanged).
    """

    base: Path
    location: str
    count: int = 0

    @property
    def path(self) -> Path:
        return self.base / self.location


class OnnxTensor(Tensor):
    """An initializer as loaded: its TensorProto, parsed from the bytes it was loaded as when
    its type, shape or data is first asked for, and decoded to numpy on the first ``numpy()``.

    ``name`` is the name its message gives it; ``external`` is the ``ExternalFile`` its data
    lies in, ``None`` for data held inline. A model of a million initializers loads without
    building their messages, and an unchanged one is written back as the bytes it was.
    """

    __slots__ = ("_array", "_bytes", "_path", "_proto", "external", "name")

    def __init__(self, proto: onnx.TensorProto, external: ExternalFile | None = None) -> None:
        self._proto: onnx.TensorProto | None = proto
        self._bytes: bytes | None = None
        self.name = proto.name
        self.external = external
        self._array: np.ndarray | None = None
        self._path: Path | None = None

    @classmethod
    def loaded(cls, data: bytes, name: str, path: Path | None = None) -> OnnxTensor:
        """The initializer whose serialized TensorProto is ``data`` (data held inline), named
        ``name``; ``path`` names the model file in the error a damaged message raises."""
        tensor = cls.__new__(cls)
        tensor._proto = None
        tensor._bytes = data
        tensor.name = name
        tensor.external = None
        tensor._array = None
        tensor._path = path
        return tensor

    @property
    def proto(self) -> onnx.TensorProto:
        """The TensorProto (parsed on first access; treat it as read-only)."""
        if self._proto is None:
            try:
                self._proto = onnx.TensorProto.FromString(self._bytes or b"")
            except message.DecodeError as exc:
                raise SerdeError(
                    self._path, f"initializer {self.name!r} does not decode as a tensor: {exc}"
                ) from exc
        return self._proto

    def serialized(self) -> bytes:
        """The serialized TensorProto: the bytes it was loaded as, when it was loaded."""
        if self._bytes is None:
            self._bytes = self.proto.SerializeToString()
        return self._bytes

    @property
    def dtype(self) -> np.dtype[Any]:
        try:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.proto.data_type))
        except (KeyError, ValueError, TypeError):
            return np.dtype(object)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.proto.dims)

    @property
    def elem_type(self) -> int:
        """The ONNX element type (``onnx.TensorProto.DataType``)."""
        return int(self.proto.data_type)

    def numpy(self) -> np.ndarray:
        if self._array is None:
            if self.external is not None:
                self._check_external_data()
            base = None if self.external is None else str(self.external.base)
            try:
                array = onnx.numpy_helper.to_array(self.proto, base_dir=base or "")
            except (OSError, ValueError, TypeError, KeyError, onnx.checker.ValidationError) as exc:
                where = self.external.path if self.external is not None else None
                raise SerdeError(
                    where, f"cannot read the data of initializer {self.name!r}: {exc}"
                ) from exc
            array.flags.writeable = False
            self._array = array
        return self._array

    def _check_external_data(self, sizes: dict[Path, int] | None = None) -> None:
        """Refuse, naming the file, external data that is missing or too short (onnx's own
        reader says "not regular file" of a file that does not exist). ``sizes``: file sizes
        known already, filled as files are looked at (one ``stat`` per file for a model)."""
        assert self.external is not None
        path = self.external.path
        size = None if sizes is None else sizes.get(path)
        if size is None:
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise SerdeError(
                    path,
                    f"cannot read the data of initializer {self.name!r}: {exc.strerror or exc}",
                ) from exc
            if sizes is not None:
                sizes[path] = size
        offset, length, needed = external_extent(self.proto)
        wanted = length if length is not None else needed
        if offset + (wanted or 0) > size:
            raise SerdeError(
                path,
                f"the external data of initializer {self.name!r} lies at bytes {offset} to "
                f"{offset + (wanted or 0)} of this file, which holds {size} (truncated?)",
            )

    def same_as(self, other: Tensor) -> bool:
        """``Tensor.same_as``; two inline tensors loaded as the same bytes are the same
        without decoding either (the initializers a diff of two models compares)."""
        if (
            isinstance(other, OnnxTensor)
            and self.external is None
            and other.external is None
            and self._bytes is not None
            and self._bytes == other._bytes
        ):
            return True
        return super().same_as(other)

    def __repr__(self) -> str:
        return f"OnnxTensor({self.name!r}, {self.dtype}{list(self.shape)})"


def tensor_to_proto(name: str, tensor: Tensor) -> onnx.TensorProto:
    """The TensorProto of initializer ``name``: the loaded one when it is still that name's,
    else made from the data."""
    if isinstance(tensor, OnnxTensor):
        if tensor.name == name:
            return tensor.proto
        renamed = onnx.TensorProto()
        renamed.CopyFrom(tensor.proto)
        renamed.name = name
        return renamed
    try:
        return onnx.numpy_helper.from_array(np.asarray(tensor.numpy()), name)
    except (TypeError, ValueError) as exc:
        raise SerdeError(None, f"initializer {name!r} cannot be written to ONNX: {exc}") from exc


def tensor_bytes(name: str, tensor: Tensor) -> bytes:
    """The serialized TensorProto of initializer ``name``: the bytes it was loaded as when it
    is still that name's (no message built), else ``tensor_to_proto``'s."""
    if isinstance(tensor, OnnxTensor) and tensor.name == name:
        return tensor.serialized()
    return tensor_to_proto(name, tensor).SerializeToString()


TensorWriter = Callable[[str, Tensor], onnx.TensorProto | bytes]
"""How the writer turns an initializer into a TensorProto or its bytes (``tensor_bytes``,
``tensor_to_proto``, or one that moves data to external files)."""


def external_file(
    proto: onnx.TensorProto, files: dict[str, ExternalFile], base: Path | None, path: Path | None
) -> ExternalFile:
    """The external file ``proto`` points into, checked to lie inside the model's folder
    (``files``: those met so far, by location as spelled after normalisation, so that
    ``w.bin`` and ``./w.bin`` are one file)."""
    entries = {entry.key: entry.value for entry in proto.external_data}
    location = entries.get("location", "")
    if base is None:
        raise SerdeError(
            path,
            f"initializer {proto.name!r} is stored as external data ({location!r}); load the "
            "model from its file so its folder is known",
        )
    key = os.path.normpath(location) if location and "\x00" not in location else location
    found = files.get(key)
    if found is None:
        if "\x00" in location:
            raise SerdeError(
                path,
                f"initializer {proto.name!r}: external data location {location!r} holds a NUL "
                "character, which no file name can; refusing it",
            )
        try:
            resolved = (base / location).resolve()
        except (OSError, ValueError, RuntimeError) as exc:
            raise SerdeError(
                path,
                f"initializer {proto.name!r}: external data location {location!r} cannot be "
                f"resolved: {exc}",
            ) from exc
        if (
            not location
            or Path(location).is_absolute()
            or not resolved.is_relative_to(base.resolve())
        ):
            raise SerdeError(
                path,
                f"initializer {proto.name!r}: external data location {location!r} lies outside "
                f"the model's folder {base}; refusing to read it",
            )
        found = files[key] = ExternalFile(base, location)
    for key in ("offset", "length"):  # ONNX's reader takes them as decimal byte counts
        value = entries.get(key, "")
        if value and not (value.isascii() and value.isdigit()):
            raise SerdeError(
                path,
                f"initializer {proto.name!r}: external data {key} {value!r} is not a number "
                "of bytes",
            )
    found.count += 1
    return found


# -- value types ---------------------------------------------------------------------------------

_KINDS = {
    "tensor_type": "tensor",
    "sequence_type": "sequence",
    "map_type": "map",
    "optional_type": "optional",
    "sparse_tensor_type": "sparse_tensor",
    "opaque_type": "opaque",
}


def value_type_from_proto(info: onnx.ValueInfoProto) -> ValueType:
    """The declared type of a ValueInfoProto (its message kept as ``raw``)."""
    value_type = info.type
    which = value_type.WhichOneof("value")
    if which != "tensor_type":
        return ValueType(0, None, _KINDS.get(which or "", "none"), raw=info)
    tensor = value_type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return ValueType(tensor.elem_type, shape, raw=info)


def _value_info(name: str, value_type: ValueType | None) -> onnx.ValueInfoProto:
    """The ValueInfoProto declaring ``name`` as ``value_type`` (the loaded one when it is
    still that name's and type's)."""
    raw = None if value_type is None else value_type.raw
    if raw is not None and raw.name == name and value_type_from_proto(raw) == value_type:
        return raw
    if value_type is None or value_type.kind == "none":  # declared without a type
        return onnx.ValueInfoProto(name=name)
    if value_type.kind != "tensor":
        if raw is None:
            raise SerdeError(None, f"value {name!r}: a {value_type.kind} type needs its message")
        info = onnx.ValueInfoProto()
        info.CopyFrom(raw)
        info.name = name
        return info
    made = onnx.helper.make_tensor_value_info(name, value_type.elem_type, value_type.shape)
    if value_type.shape is None:
        made.type.tensor_type.ClearField("shape")
    if raw is not None and raw.doc_string:
        made.doc_string = raw.doc_string
    return made


# -- attributes ----------------------------------------------------------------------------------


@dataclass
class _Context:
    """What decoding a model needs besides the messages: where external data lies."""

    base: Path | None
    path: Path | None
    files: dict[str, ExternalFile] = field(default_factory=dict)


def _attribute_kind(attribute: onnx.AttributeProto) -> int:
    """The attribute's type, inferred from the field set when the type is left undefined."""
    if attribute.type:
        return int(attribute.type)
    for name, kind in (
        ("g", _A.GRAPH),
        ("t", _A.TENSOR),
        ("sparse_tensor", _A.SPARSE_TENSOR),
        ("tp", _A.TYPE_PROTO),
        ("s", _A.STRING),
        ("f", _A.FLOAT),
        ("i", _A.INT),
    ):
        if attribute.HasField(name):
            return kind
    for name, kind in (
        ("graphs", _A.GRAPHS),
        ("tensors", _A.TENSORS),
        ("floats", _A.FLOATS),
        ("ints", _A.INTS),
        ("strings", _A.STRINGS),
        ("sparse_tensors", _A.SPARSE_TENSORS),
        ("type_protos", _A.TYPE_PROTOS),
    ):
        if len(getattr(attribute, name)):
            return kind
    return int(_A.UNDEFINED)


def _argument(attribute: onnx.AttributeProto, parent: Net | None, cx: _Context) -> Argument:
    """The IR argument of an attribute; graphs become nets owned by ``parent``."""
    kind = _attribute_kind(attribute)
    values: dict[str, Any] = {}
    if kind == _A.FLOAT:
        values["f"] = attribute.f
    elif kind == _A.INT:
        values["i"] = attribute.i
    elif kind == _A.STRING:
        values["s"] = attribute.s
    elif kind == _A.TENSOR:
        values["t"] = attribute.t
    elif kind == _A.SPARSE_TENSOR:
        values["t"] = attribute.sparse_tensor
    elif kind == _A.TYPE_PROTO:
        values["t"] = attribute.tp
    elif kind == _A.GRAPH:
        values["n"] = net_from_graph(attribute.g, parent, cx)
    elif kind == _A.FLOATS:
        values["floats"] = tuple(attribute.floats)
    elif kind == _A.INTS:
        values["ints"] = tuple(attribute.ints)
    elif kind == _A.STRINGS:
        values["strings"] = tuple(attribute.strings)
    elif kind == _A.TENSORS:
        values["tensors"] = tuple(attribute.tensors)
    elif kind == _A.SPARSE_TENSORS:
        values["tensors"] = tuple(attribute.sparse_tensors)
    elif kind == _A.TYPE_PROTOS:
        values["tensors"] = tuple(attribute.type_protos)
    elif kind == _A.GRAPHS:
        values["nets"] = tuple(net_from_graph(g, parent, cx) for g in attribute.graphs)
    return Argument(attribute.name, kind=kind, raw=attribute, **values)


def argument_from_attribute(attribute: onnx.AttributeProto) -> Argument:
    """The IR argument of one attribute made outside a loaded model, decoded as the codec
    decodes a loaded node's (its message kept as ``raw`` and written back as it is: a
    function body's reference attribute, ``ref_attr_name``, stays one)."""
    return _argument(attribute, None, _Context(None, None))


def _same_data(argument: Argument, attribute: onnx.AttributeProto) -> bool:
    """Whether ``argument`` holds what ``attribute`` holds, graphs aside."""
    decoded = _argument_without_graphs(attribute)
    return (
        argument.name == decoded.name
        and argument.kind in (None, decoded.kind)
        and (argument.f, argument.i, argument.s) == (decoded.f, decoded.i, decoded.s)
        and (argument.floats, argument.ints, argument.strings)
        == (decoded.floats, decoded.ints, decoded.strings)
        and (argument.t is decoded.t or argument.t == decoded.t)
        and len(argument.tensors) == len(decoded.tensors)
        and all(a is b or a == b for a, b in zip(argument.tensors, decoded.tensors, strict=True))
    )


def _argument_without_graphs(attribute: onnx.AttributeProto) -> Argument:
    kind = _attribute_kind(attribute)
    if kind in _GRAPH_KINDS:
        return Argument(attribute.name, kind=kind)
    return _argument(attribute, None, _Context(None, None))


def attribute_to_proto(
    argument: Argument,
    op_type: str = "",
    domain: str = "",
    write_tensor: TensorWriter | None = None,
) -> onnx.AttributeProto:
    """The AttributeProto of ``argument``: the loaded one when its data is unchanged (graphs
    written anew when they changed), else made from the value; an empty list takes its type
    from ``argument.kind``, else from the schema of ``op_type`` in ``domain``, else ``INTS``."""
    name = argument.name or ""
    raw = argument.raw
    graphs = [argument.n] if argument.n is not None else list(argument.nets)
    writer = tensor_bytes if write_tensor is None else write_tensor
    if raw is not None and _same_data(argument, raw):
        if not graphs:
            return raw
        attribute = onnx.AttributeProto()
        attribute.CopyFrom(raw)
        if argument.n is not None:
            attribute.g.CopyFrom(net_to_graph(argument.n, writer))
        else:
            del attribute.graphs[:]
            attribute.graphs.extend(net_to_graph(net, writer) for net in argument.nets)
        return attribute
    kind = argument.kind or _inferred_kind(argument, op_type, domain)
    attribute = onnx.AttributeProto(name=name)
    attribute.type = kind  # type: ignore[assignment]  # an AttributeType value
    if argument.f is not None:
        attribute.f = argument.f
    if argument.i is not None:
        attribute.i = argument.i
    if argument.s is not None:
        attribute.s = argument.s
    if argument.t is not None:
        single: dict[int, Any] = {
            _A.TENSOR: attribute.t,
            _A.SPARSE_TENSOR: attribute.sparse_tensor,
            _A.TYPE_PROTO: attribute.tp,
        }
        single[kind].CopyFrom(argument.t)
    if argument.n is not None:
        attribute.g.CopyFrom(net_to_graph(argument.n, writer))
    attribute.floats.extend(argument.floats)
    attribute.ints.extend(argument.ints)
    attribute.strings.extend(argument.strings)
    if argument.tensors:
        lists: dict[int, Any] = {
            _A.TENSORS: attribute.tensors,
            _A.SPARSE_TENSORS: attribute.sparse_tensors,
            _A.TYPE_PROTOS: attribute.type_protos,
        }
        lists[kind].extend(argument.tensors)
    attribute.graphs.extend(net_to_graph(net, writer) for net in argument.nets)
    if argument.qtensors:
        raise SerdeError(None, f"attribute {name!r}: Caffe2 qtensors have no ONNX form")
    return attribute


_MESSAGE_KINDS = {
    "onnx.TensorProto": (_A.TENSOR, _A.TENSORS),
    "onnx.SparseTensorProto": (_A.SPARSE_TENSOR, _A.SPARSE_TENSORS),
    "onnx.TypeProto": (_A.TYPE_PROTO, _A.TYPE_PROTOS),
}


def _inferred_kind(argument: Argument, op_type: str, domain: str) -> int:
    name = argument.name or ""
    for value, kind in (
        (argument.f, _A.FLOAT),
        (argument.i, _A.INT),
        (argument.s, _A.STRING),
        (argument.n, _A.GRAPH),
    ):
        if value is not None:
            return int(kind)
    if argument.t is not None:
        return int(_message_kind(argument.t, name)[0])
    for values, kind in (
        (argument.floats, _A.FLOATS),
        (argument.ints, _A.INTS),
        (argument.strings, _A.STRINGS),
        (argument.nets, _A.GRAPHS),
    ):
        if values:
            return int(kind)
    if argument.tensors:
        return int(_message_kind(argument.tensors[0], name)[1])
    return _schema_kind(op_type, domain, name)


def _schema_kind(op_type: str, domain: str, name: str) -> int:
    """The type the newest schema of ``op_type`` gives attribute ``name`` (``INTS`` when no
    schema says)."""
    try:
        attribute = onnx.defs.get_schema(op_type, domain=domain).attributes.get(name)
    except onnx.defs.SchemaError:
        attribute = None
    return int(_A.INTS) if attribute is None else int(attribute.type.value)  # type: ignore[attr-defined]


def _message_kind(value: Any, name: str) -> tuple[int, int]:
    full_name = type(value).DESCRIPTOR.full_name
    kinds = _MESSAGE_KINDS.get(full_name)
    if kinds is None:
        raise SerdeError(None, f"attribute {name!r}: a {full_name} has no ONNX attribute form")
    return kinds


# -- nodes ---------------------------------------------------------------------------------------


class _NodeSource:
    """The nodes of a loaded graph, as the bytes they were loaded as: an op decodes its name
    and domain from a two-field message of its node's bytes, and its attributes from the full
    NodeProto, parsed when first asked for (the last one parsed is kept for the next ask)."""

    __slots__ = ("_cx", "_last", "nodes")

    def __init__(self, nodes: list[bytes], cx: _Context) -> None:
        self.nodes = nodes
        self._cx = cx
        self._last: tuple[int, onnx.NodeProto] | None = None

    def node(self, index: int) -> onnx.NodeProto:
        """Node ``index``'s message (treat it as read-only).

        Raises:
            SerdeError: its bytes do not decode as a NodeProto (a damaged file).
        """
        last = self._last
        if last is not None and last[0] == index:
            return last[1]
        node = self._parsed(onnx.NodeProto, index)
        self._last = (index, node)
        return node

    def _parsed(self, kind: Any, index: int) -> Any:
        try:
            return kind.FromString(self.nodes[index])
        except message.DecodeError as exc:
            raise SerdeError(self._cx.path, f"node #{index} does not decode: {exc}") from exc

    def decode(self, index: int, key: str, parent: Net | None) -> Any:
        if key in ("name", "domain"):
            head = self._parsed(onnx_lite_pb2.NodeHead, index)
            return getattr(head, key) if head.HasField(key) else None
        if key == "args":
            return tuple(_argument(a, parent, self._cx) for a in self.node(index).attribute)
        return _CAFFE2_DEFAULTS[key]

    def has_nested_nets(self, index: int) -> bool:
        return any(_attribute_kind(a) in _GRAPH_KINDS for a in self.node(index).attribute)

    def encoded(self, index: int) -> bytes | None:
        return self.nodes[index]


def _source_node(op: Op) -> onnx.NodeProto | None:
    found = op.source()
    if found is None or not isinstance(found[0], _NodeSource):
        return None
    return found[0].node(found[1])


def node_to_proto(op: Op, write_tensor: TensorWriter | None = None) -> onnx.NodeProto:
    """The NodeProto of ``op`` (its source node when nothing changed).

    Raises:
        SerdeError: the op sets a field ONNX nodes do not have (a Caffe2 device option).
    """
    source = _source_node(op)
    changed = op.changed_fields()
    if write_tensor not in (None, tensor_bytes) and op.has_nested_nets():
        # The writer may move tensors (external data written anew): the graphs' initializers
        # must be written through it, not as the node held them.
        changed = changed | {"args"}
    if source is not None and not changed:
        return source
    for key in changed - _ONNX_OP_FIELDS:
        if getattr(op, key) != _CAFFE2_DEFAULTS[key]:
            raise SerdeError(None, f"op {op.type!r} sets {key!r}, which ONNX nodes do not have")
    node = onnx.NodeProto()
    if source is not None:
        node.CopyFrom(source)
    if "type" in changed:
        node.op_type = op.type
    if "inputs" in changed:
        del node.input[:]
        node.input.extend(op.inputs)
    if "outputs" in changed:
        del node.output[:]
        node.output.extend(op.outputs)
    for key in ("name", "domain"):
        if key in changed:
            value = getattr(op, key)
            if value is None:
                node.ClearField(key)
            else:
                setattr(node, key, value)
    if "args" in changed:
        del node.attribute[:]
        domain = op.domain or ""
        node.attribute.extend(attribute_to_proto(a, op.type, domain, write_tensor) for a in op.args)
    return node


def _loaded_node_bytes(source: Any) -> list[bytes] | None:
    return source.nodes if isinstance(source, _NodeSource) else None


# -- graphs --------------------------------------------------------------------------------------


def net_from_graph(
    graph: onnx.GraphProto, parent: Net | None, cx: _Context, *, nested: bool | None = None
) -> Net:
    """The IR net of ``graph`` (dialect ``onnx``), owned by ``parent`` when nested.

    ``nested``: whether some node holds a graph (``False``: certain, from the probe; ``None``:
    each op finds out when first asked).
    """
    raw = onnx_lite_pb2.GraphWithRawParts.FromString(graph.SerializeToString())
    return _net_from_parts(_GraphParts.of(raw), parent, cx, nested=nested)


_CHUNK = 1024
"""Nodes (or initializers) whose names are parsed at a time when loading: bounds the parsed
messages alive at once."""
_CHUNK_BYTES = 1 << 20
"""...and the bytes of a chunk, beyond its first message: a model's big weights are copied
into a chunk to have their names read, one or a few at a time."""
_PARTS = ("node", "initializer", "input", "output", "value_info")


@dataclass
class _GraphParts:
    """A serialized GraphProto split into its nodes' and initializers' bytes, its declared
    values and the rest (the header), with nothing else of it kept: the parse that split it
    (a copy of the graph) is freed before the IR is built."""

    nodes: list[bytes]
    initializers: list[bytes]
    declared: dict[str, list[onnx.ValueInfoProto]]
    header: onnx.GraphProto
    value_info: list[bytes]

    @classmethod
    def of(cls, raw: onnx_lite_pb2.GraphWithRawParts) -> _GraphParts:
        """The parts of ``raw`` (emptied: it keeps its header fields only)."""
        declared = {
            part: [onnx.ValueInfoProto.FromString(info) for info in getattr(raw, part)]
            for part in ("input", "output", "value_info")
        }
        nodes, initializers, value_info = (
            list(raw.node),
            list(raw.initializer),
            list(raw.value_info),
        )
        for part in _PARTS:
            raw.ClearField(part)
        header = onnx.GraphProto.FromString(raw.SerializeToString())
        return cls(nodes, initializers, declared, header, value_info)


def _net_from_parts(
    parts: _GraphParts, parent: Net | None, cx: _Context, *, nested: bool | None = None
) -> Net:
    """``net_from_graph`` of a graph's parts, without building its nodes' and initializers'
    messages: each op keeps its node's bytes (``_NodeSource``) and each initializer its
    tensor's (``OnnxTensor.loaded``); only names are read, a chunk at a time."""
    with paused_gc():
        nodes, header, declared = parts.nodes, parts.header, parts.declared
        initializers = _initializers(parts.initializers, cx)
        parts.initializers = []  # the tensors hold their bytes now
        types: dict[str, ValueType] = {}
        for infos in declared.values():
            for info in infos:
                types.setdefault(info.name, value_type_from_proto(info))
        source = _NodeSource(nodes, cx)
        return Net.loaded(
            lambda net: Op.wrap_loaded(
                chain.from_iterable(_chunks_of(nodes, "node", onnx_lite_pb2.GraphNodeNames)),
                net,
                source,
                nested=nested,
                control=False,
                type_field="op_type",
            ),
            [info.name for info in declared["input"]],
            [info.name for info in declared["output"]],
            header,
            lambda net: (),
            parent,
            name=header.name if header.HasField("name") else None,
            dialect=ONNX,
            initializers=initializers,
            types=types,
            declarations=parts.value_info,
            interface=(
                [info.SerializeToString() for info in declared["input"]],
                [info.SerializeToString() for info in declared["output"]],
            ),
        )


def _chunks_of(parts: list[bytes], field_name: str, kind: Any) -> Iterator[Any]:
    """The records of ``parts`` (serialized messages of a GraphProto's ``field_name``) as
    ``kind`` (a lite graph declaring only that field) parses them, a chunk at a time (at most
    ``_CHUNK`` messages, and ``_CHUNK_BYTES`` beyond the first)."""
    # Bytes up to and including each part.
    ends = np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)))
    first = 0
    while first < len(parts):
        end = min(first + _CHUNK, int(np.searchsorted(ends, ends[first] + _CHUNK_BYTES, "right")))
        tagged = onnx_lite_pb2.GraphWithRawParts(**{field_name: parts[first:end]})
        yield getattr(kind.FromString(tagged.SerializeToString()), field_name)
        first = end


def _initializers(parts: list[bytes], cx: _Context) -> dict[str, Tensor]:
    """The initializers of a graph by name (the first of a repeated name), from their bytes:
    inline ones keep their bytes; an external one is parsed to find and check its file."""
    initializers: dict[str, Tensor] = {}
    heads = chain.from_iterable(_chunks_of(parts, "initializer", onnx_lite_pb2.GraphTensorHeads))
    external = onnx.TensorProto.EXTERNAL
    for data, head in zip(parts, heads, strict=True):
        if head.data_location == external:
            proto = onnx.TensorProto.FromString(data)
            tensor = OnnxTensor(proto, external_file(proto, cx.files, cx.base, cx.path))
        else:
            tensor = OnnxTensor.loaded(data, head.name, cx.path)
        initializers.setdefault(tensor.name, tensor)
    return initializers


def net_to_graph(net: Net, write_tensor: TensorWriter = tensor_bytes) -> onnx.GraphProto:
    """The GraphProto of ``net`` (for graph attributes; the main graph is assembled as bytes)."""
    return onnx.GraphProto.FromString(_graph_bytes(net, write_tensor))


def _graph_bytes(
    net: Net, write_tensor: TensorWriter, *, initializers_as_inputs: bool = False
) -> bytes:
    if net.dialect != ONNX:
        raise SerdeError(None, f"net {net.name!r} is a {net.dialect} net, not an ONNX graph")
    header = net.header if net.header is not None else onnx.GraphProto()
    if (header.name if header.HasField("name") else None) != net.name:
        renamed = onnx.GraphProto()
        renamed.CopyFrom(header)
        if net.name is None:
            renamed.ClearField("name")
        else:
            renamed.name = net.name
        header = renamed
    graph = onnx_lite_pb2.GraphWithRawParts.FromString(header.SerializeToString())
    with paused_gc():
        graph.node.extend(
            op_bytes_reusing_loaded(
                net,
                _loaded_node_bytes,
                lambda op: node_to_proto(op, write_tensor).SerializeToString(),
            )
        )
        graph.initializer.extend(_initializer_bytes(net, write_tensor))
        types = net.types
        interface = net.loaded_interface()
        graph.input.extend(
            interface[0]
            if interface is not None
            else (
                _value_info(name, types.get(name)).SerializeToString()
                for name in net.external_inputs
            )
        )
        if initializers_as_inputs and interface is None:
            graph.input.extend(_undeclared_initializers(net))
        graph.output.extend(
            interface[1]
            if interface is not None
            else (
                _value_info(name, types.get(name)).SerializeToString()
                for name in net.external_outputs
            )
        )
        declarations = net.loaded_declarations()
        graph.value_info.extend(
            declarations
            if declarations is not None
            else (
                _value_info(name, value_type).SerializeToString()
                for name, value_type in _value_infos(net)
            )
        )
    return bytes(graph.SerializeToString())


def _initializer_bytes(net: Net, write_tensor: TensorWriter) -> list[bytes]:
    """Each initializer's serialized TensorProto, in order. With ``tensor_bytes`` as the
    writer, a loaded one still under its name is its loaded bytes, read inline (a save of
    10^6 initializers pays no call per tensor)."""
    if write_tensor is not tensor_bytes:
        return [_as_bytes(write_tensor(name, tensor)) for name, tensor in net.initializers.items()]
    return [
        tensor._bytes
        if tensor.__class__ is OnnxTensor and tensor._bytes is not None and tensor.name == name
        else tensor_bytes(name, tensor)
        for name, tensor in net.initializers.items()
    ]


def _as_bytes(tensor: onnx.TensorProto | bytes) -> bytes:
    return tensor if isinstance(tensor, bytes) else tensor.SerializeToString()


def _undeclared_initializers(net: Net) -> list[bytes]:
    """Graph inputs declaring the initializers ``net`` does not list as inputs: IR 3 wants
    every initializer to be a graph input too (passes add initializers, e.g. folded values)."""
    listed = set(net.external_inputs)
    found = []
    for name, tensor in net.initializers.items():
        if name in listed:
            continue
        declared = net.types.get(name)
        if declared is None:
            elem_type = (
                tensor.elem_type
                if isinstance(tensor, OnnxTensor)
                else onnx.helper.np_dtype_to_tensor_dtype(tensor.dtype)
            )
            declared = ValueType(elem_type, tensor.shape)
        found.append(_value_info(name, declared).SerializeToString())
    return found


def _value_infos(net: Net) -> Iterable[tuple[str, ValueType]]:
    """The value_info declarations to write: types of values the graph still computes or
    holds (initializers), other than its inputs and outputs."""
    types = net.types
    if len(types) <= len(net.external_inputs) + len(net.external_outputs):
        declared = set(net.external_inputs).union(net.external_outputs)
        if declared.issuperset(types):
            return []
    interface = set(net.external_inputs).union(net.external_outputs)
    computed = net.written_names()
    held = net.initializers
    return [
        (name, value_type)
        for name, value_type in types.items()
        if name not in interface and (name in computed or name in held)
    ]


# -- models --------------------------------------------------------------------------------------


def model_from_onnx_bytes(
    data: bytes, path: str | Path | None = None, base_dir: str | Path | None = None
) -> Model:
    """The IR of an ONNX model's bytes; external data is resolved against ``base_dir`` (the
    model file's folder when ``path`` is given).

    Raises:
        SerdeError: the bytes are not an ONNX model, a string is not UTF-8, graphs nest too
            deep, or an external data location lies outside the model's folder.
    """
    where = None if path is None else Path(path)
    probe = probe_onnx(data, where)
    try:
        # One parse splits the file into the graph's parts and the rest; the parse (a copy of
        # most of the file) is dropped before the IR is built.
        lite = onnx_lite_pb2.ModelWithGraphParts.FromString(data)
    except message.DecodeError as exc:
        raise SerdeError(where, f"not an ONNX model: {exc}") from exc
    if not lite.HasField("graph"):
        raise SerdeError(where, "not an ONNX model: it holds no graph")
    parts = _GraphParts.of(lite.graph)
    lite.ClearField("graph")
    header = onnx.ModelProto.FromString(lite.SerializeToString())
    del lite
    if not len(header.opset_import) and not 0 < header.ir_version < 3:  # IR 3 brought opsets
        raise SerdeError(
            where,
            "not an ONNX model: no IR version and no opset imports"
            if header.ir_version == 0
            else f"not a whole ONNX model: IR version {header.ir_version} but no opset imports, "
            "which every model declares after its graph (a file cut short?)",
        )
    opsets = _opsets(header)
    base = Path(base_dir) if base_dir is not None else (None if where is None else where.parent)
    net = _net_from_parts(
        parts, None, _Context(base, where), nested=None if probe.nested else False
    )
    return Model(net, predict_path=where, opset_imports=opsets, header=header)


def _opsets(header: onnx.ModelProto) -> dict[str, int]:
    """``{domain: version}`` of the header's opset imports (the first of a repeated domain)."""
    opsets: dict[str, int] = {}
    for opset in header.opset_import:
        opsets.setdefault(opset.domain, int(opset.version))
    return opsets


def model_to_onnx_bytes(model: Model, write_tensor: TensorWriter = tensor_bytes) -> bytes:
    """The serialized ModelProto of an ONNX-dialect ``model`` (``write_tensor`` makes each
    initializer's TensorProto).

    Raises:
        SerdeError: the model is not in the ONNX dialect, or something in it has no ONNX form.
    """
    if model.dialect != ONNX or model.init_net is not None:
        raise SerdeError(
            model.predict_path,
            f"a {model.dialect} model is not an ONNX model: convert it first (export-onnx)",
        )
    header = onnx.ModelProto()
    if model.header is not None:
        header.CopyFrom(model.header)
    if _opsets(header) != dict(model.opset_imports):
        del header.opset_import[:]
        header.opset_import.extend(
            onnx.OperatorSetIdProto(domain=domain, version=version)
            for domain, version in model.opset_imports.items()
        )
    graph = onnx_lite_pb2.ModelWithRawGraph(
        graph=_graph_bytes(
            model.predict_net, write_tensor, initializers_as_inputs=0 < header.ir_version < 4
        )
    )
    # In field order, as onnx writes a model: a file then starts with its IR version (field
    # 1), which is how a file is told to be ONNX before it is parsed (serde.sniff).
    first = onnx.ModelProto()
    for name in _FIELDS_BEFORE_GRAPH:
        if header.HasField(name):
            setattr(first, name, getattr(header, name))
            header.ClearField(name)
    return first.SerializeToString() + graph.SerializeToString() + header.SerializeToString()


_FIELDS_BEFORE_GRAPH = (
    "ir_version",
    "producer_name",
    "producer_version",
    "domain",
    "model_version",
    "doc_string",
)
"""The ModelProto fields numbered below ``graph`` (7), written before it."""


def nets_of(net: Net) -> Iterable[Net]:
    """``net`` and every net nested in it, depth first."""
    yield net
    for index in sorted(net.nested_op_indices()):
        for _, nested in net[index].nested_nets():
            yield from nets_of(nested)


def check_external_data(model: Model) -> None:
    """Refuse a model whose external data files are missing or too short for the tensors
    that lie in them, before anything reads one (a pass that folds a constant would otherwise
    be blamed for the missing file).

    Raises:
        SerdeError: naming the first such file and an initializer that lies in it.
    """
    sizes: dict[Path, int] = {}
    for _, _, tensor in external_tensors(model):
        assert isinstance(tensor, OnnxTensor)
        tensor._check_external_data(sizes)


def external_tensors(model: Model) -> Sequence[tuple[Net, str, Tensor]]:
    """``(net, name, tensor)`` of every initializer whose data lies in an external file."""
    return [
        (net, name, tensor)
        for net in nets_of(model.predict_net)
        for name, tensor in net.initializers.items()
        if isinstance(tensor, OnnxTensor) and tensor.external is not None
    ]

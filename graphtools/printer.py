"""The one canonical text dump of nets and models (goldens, ``graphtools show``, error notes).

Every blob use is printed as ``name@version`` from the SSA view, arguments are sorted by name,
devices are spelled ``CUDA:0``, nested nets are indented under their op. Long value lists are
cut after a few items with the total count, so dumps of real weights stay readable::

    net predict_net
      external_input: data@0 w@0
      external_output: y@2
      %0 FC(data@0, w@0) -> y@1 {axis=1}
      %1 Relu(y@1) -> y@2

An ONNX model prints the same way, with what an ONNX graph has besides: a ``model`` line (IR
version, opsets, producer), each declared type and each initializer (name, element type,
shape, external file), an op type of another domain qualified (``com.microsoft::Gelu``), and
tensor attributes by element type and shape (``<tensor 'value' INT64 2>``); graph attributes
are nested nets, as an If's branches are in Caffe2. A Caffe2 net has none of these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from graphtools._core import MAIN_NET
from graphtools.ir import Argument, DeviceOption, Model, Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.values import Tensor, ValueType

_DEVICE_NAMES = {
    0: "CPU",
    1: "CUDA",
    2: "MKLDNN",
    3: "OPENGL",
    4: "OPENCL",
    5: "IDEEP",
    6: "HIP",
    7: "FPGA",
    8: "MAIA",
    9: "XLA",
    10: "MPS",
}
_MAX_ITEMS = 8
_INDENT = "  "
_DEFAULT_DOMAINS = (None, "", "ai.onnx")


def format_device(device: DeviceOption) -> str:
    """``CPU``, ``CUDA:1``, ... plus any other set field, e.g. ``CUDA:0,seed=3``."""
    text = _DEVICE_NAMES.get(device.type, f"DEVICE{device.type}")
    if device.device_id is not None:
        text += f":{device.device_id}"
    extras = []
    if device.random_seed is not None:
        extras.append(f"seed={device.random_seed}")
    if device.node_name is not None:
        extras.append(f"node={device.node_name!r}")
    if device.numa_node_id is not None:
        extras.append(f"numa={device.numa_node_id}")
    extras.extend(f"extra={info!r}" for info in device.extra_info)
    return ",".join([text, *extras])


def _format_list(items: tuple[Any, ...], fmt: Any = repr, *, full: bool = False) -> str:
    limit = len(items) if full else _MAX_ITEMS
    shown = ", ".join(fmt(item) for item in items[:limit])
    if len(items) > limit:
        shown += f", ... ({len(items)} items)"
    return f"[{shown}]"


def _format_tensor(tensor: Any) -> str:
    """A Caffe2 tensor or qtensor, or an ONNX tensor, sparse tensor or type, in brief."""
    full_name = type(tensor).DESCRIPTOR.full_name
    if full_name.startswith("onnx."):
        return _format_onnx_message(tensor, full_name)
    dtype = caffe2_pb2.TensorProto.DataType.Name(tensor.data_type)
    dims = "x".join(str(d) for d in tensor.dims) or "scalar"
    name = f" {tensor.name!r}" if tensor.name else ""
    kind = "qtensor" if isinstance(tensor, caffe2_pb2.QTensorProto) else "tensor"
    return f"<{kind}{name} {dtype} {dims}>"


def _onnx_elem_name(tensor: Any, value: int) -> str:
    """The name of ONNX element type ``value``, from the enum an ONNX TensorProto carries."""
    enum = tensor.DESCRIPTOR.enum_types_by_name["DataType"]
    found = enum.values_by_number.get(value)
    return found.name if found is not None else f"TYPE{value}"


def _format_onnx_message(message: Any, full_name: str) -> str:
    if full_name == "onnx.TensorProto":
        dims = "x".join(str(d) for d in message.dims) or "scalar"
        name = f" {message.name!r}" if message.name else ""
        where = " external" if message.data_location == 1 else ""
        return f"<tensor{name} {_onnx_elem_name(message, message.data_type)} {dims}{where}>"
    if full_name == "onnx.SparseTensorProto":
        values = message.values
        dims = "x".join(str(d) for d in message.dims) or "scalar"
        return f"<sparse_tensor {_onnx_elem_name(values, values.data_type)} {dims}>"
    if full_name == "onnx.TypeProto":
        return f"<type {message.WhichOneof('value') or 'undefined'}>"
    return f"<{full_name}>"


def format_value_type(value_type: ValueType) -> str:
    """A declared ONNX type: ``FLOAT[N, 3, 224, 224]``, ``?`` for an unknown dim (``INT64[?]``:
    one dim, of unknown size), ``INT64[...]`` for an unknown rank; a value that is not a tensor
    by its kind (``sequence``)."""
    if value_type.kind != "tensor":
        return value_type.kind
    import onnx  # loaded already: the model came from the ONNX codec

    elem = _onnx_elem_name(onnx.TensorProto(), value_type.elem_type)
    if value_type.shape is None:
        return f"{elem}[...]" if value_type.elem_type else "?"
    dims = ", ".join("?" if d is None else str(d) for d in value_type.shape)
    return f"{elem}[{dims}]"


def format_tensor_value(tensor: Tensor, *, where: bool = True) -> str:
    """An initializer in brief: element type and shape, and with ``where`` its external file
    if it has one (the data is not read)."""
    proto = getattr(tensor, "proto", None)
    if proto is not None and type(proto).DESCRIPTOR.full_name == "onnx.TensorProto":
        elem = _onnx_elem_name(proto, proto.data_type)
        dims = "x".join(str(d) for d in proto.dims) or "scalar"
        external = getattr(tensor, "external", None) if where else None
        return f"{elem} {dims}" + (f" in {external.location}" if external is not None else "")
    dims = "x".join(str(d) for d in tensor.shape) or "scalar"
    return f"{_onnx_dtype_name(tensor.dtype)} {dims}"


def _onnx_dtype_name(dtype: np.dtype[Any]) -> str:
    """ONNX's name of a numpy dtype (``float32`` -> ``FLOAT``): an initializer an edit set
    prints as the one loaded from a file (numpy's name for a dtype ONNX has none for)."""
    import onnx  # loaded already: initializers are ONNX's

    try:
        code = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError):
        return str(dtype)
    return _onnx_elem_name(onnx.TensorProto(), code)


def _format_float(value: float) -> str:
    """A float32 field's value in the fewest digits that read back to the same float32."""
    return str(np.float32(value))


def _format_bytes(value: bytes) -> str:
    try:
        return repr(value.decode("utf-8"))
    except UnicodeDecodeError:
        return f"<{len(value)} bytes>"


def _net_label(net: Net) -> str:
    return f"<net {net.name}>" if net.name else "<net>"


def describe_net(net: Net, role: str | None = None, path: str | Path | None = None) -> str:
    """How messages name a net: ``net 'resnet'``, and its file when known (``net 'resnet'
    (models/a/predict_net.pb)``); an unnamed one by its role, ``the predict_net``, or as
    ``the unnamed net`` (never ``net None``)."""
    if net.name:
        head = f"net {net.name!r}"
    elif role:
        head = f"the {role}"
    else:
        head = "the unnamed net"
    return head if path is None else f"{head} ({path})"


def format_arg_value(
    arg: Argument, *, full: bool = False, max_chars: int | None = None, digests: bool = False
) -> str:
    """An argument's value as the dump shows it (nested nets are shown as ``<net NAME>``).

    ``full`` lists every item of a repeated value (the dump shows the first 8);
    ``max_chars`` cuts a longer text to that many characters and says how long it was;
    ``digests`` appends ``#`` and a digest of the content to a value the text does not show
    whole (a cut list, a tensor in brief), so two values that print alike still differ.
    """
    text = _arg_value(arg, full)
    cut = max_chars is not None and len(text) > max_chars
    if cut:
        text = f"{text[:max_chars]}... ({len(text)} chars)"
    if digests and (cut or _shown_in_part(arg, full)):
        text += f" #{argument_digest(arg)}"
    return text


def _shown_in_part(arg: Argument, full: bool) -> bool:
    """Whether the dump shows ``arg`` without all of its content (nested nets are printed
    whole below their op)."""
    if arg.t is not None or arg.tensors or arg.qtensors:
        return True
    if arg.s is not None and _format_bytes(arg.s).startswith("<"):
        return True
    if arg.strings and any(_format_bytes(s).startswith("<") for s in arg.strings):
        return True
    return not full and max(len(arg.floats), len(arg.ints), len(arg.strings)) > _MAX_ITEMS


def argument_digest(arg: Argument) -> str:
    """A short digest of an argument's content: its values, its tensors' bytes and its nested
    nets (their interface, types, initializers and ops with their arguments)."""
    import hashlib

    digest = hashlib.sha256()
    _digest_argument(digest, arg)
    return digest.hexdigest()[:8]


def tensor_digest(tensor: Tensor) -> str:
    """A short digest of an initializer's element type, shape and values."""
    import hashlib

    digest = hashlib.sha256()
    _digest_tensor(digest, tensor)
    return digest.hexdigest()[:8]


def _digest_tensor(digest: Any, tensor: Tensor) -> None:
    array = np.asarray(tensor.numpy())
    data = repr(array.tolist()).encode() if array.dtype == object else array.tobytes()
    digest.update(repr((str(array.dtype), array.shape)).encode() + data)


def _digest_argument(digest: Any, arg: Argument) -> None:
    scalars = (arg.name, arg.f, arg.i, arg.s, arg.floats, arg.ints, arg.strings, arg.kind)
    digest.update(repr(scalars).encode())
    for tensor in (arg.t, *arg.tensors, *arg.qtensors):
        if tensor is not None:
            digest.update(tensor.SerializeToString(deterministic=True))
    for net in (arg.n, *arg.nets):
        if net is not None:
            _digest_net(digest, net)


def _digest_net(digest: Any, net: Net) -> None:
    interface = (net.name, tuple(net.external_inputs), tuple(net.external_outputs))
    digest.update(repr((interface, sorted(net.types.items()))).encode())
    for name, tensor in net.initializers.items():
        digest.update(name.encode())
        _digest_tensor(digest, tensor)
    for op in net:
        digest.update(repr((op.type, op.inputs, op.outputs)).encode())
        for argument in op.args:
            _digest_argument(digest, argument)


def _arg_value(arg: Argument, full: bool) -> str:
    if arg.f is not None:
        return _format_float(arg.f)
    if arg.i is not None:
        return str(arg.i)
    if arg.s is not None:
        return _format_bytes(arg.s)
    if arg.t is not None:
        return _format_tensor(arg.t)
    if arg.n is not None:
        return _net_label(arg.n)
    if arg.floats:
        return _format_list(arg.floats, _format_float, full=full)
    if arg.ints:
        return _format_list(arg.ints, str, full=full)
    if arg.strings:
        return _format_list(arg.strings, _format_bytes, full=full)
    if arg.tensors:
        return _format_list(arg.tensors, _format_tensor, full=full)
    if arg.qtensors:
        return _format_list(arg.qtensors, _format_tensor, full=full)
    if arg.nets:
        return _format_list(arg.nets, _net_label, full=full)
    return "[]"


def qualified_type(op: Op) -> str:
    """The op type, ``domain::Type`` for an ONNX op of a domain other than the default."""
    domain = op.domain
    return op.type if domain in _DEFAULT_DOMAINS else f"{domain}::{op.type}"


def _versioned(blob: tuple[str, int]) -> str:
    """``name@version``; the empty name (an optional input or output left out) as ``-``."""
    name, version = blob
    return f"{name}@{version}" if name else "-"


def format_op(
    op: Op,
    index: int,
    ins: list[tuple[str, int]] | None,
    outs: list[tuple[str, int]] | None,
    *,
    full: bool = False,
    max_chars: int | None = None,
    digests: bool = False,
) -> str:
    """One op on one line: ``%3 Conv(x@0, w@0) -> y@1 {kernel=3} engine=CUDNN device=CUDA:0``.

    ``full``, ``max_chars`` and ``digests`` apply to argument values (see
    ``format_arg_value``).
    """
    in_text = ", ".join(map(_versioned, ins)) if ins is not None else ", ".join(op.inputs)
    out_text = ", ".join(map(_versioned, outs)) if outs is not None else ", ".join(op.outputs)
    line = f"%{index} {qualified_type(op)}({in_text}) -> {out_text or '()'}"
    args = sorted(op.args, key=lambda a: a.name or "")
    if args:
        values = (
            format_arg_value(a, full=full, max_chars=max_chars, digests=digests) for a in args
        )
        line += " {" + ", ".join(f"{a.name}={v}" for a, v in zip(args, values, strict=True)) + "}"
    if op.control_inputs:
        line += " control=" + _format_list(op.control_inputs, str)
    if op.engine:
        line += f" engine={op.engine}"
    if op.device_option is not None:
        line += f" device={format_device(op.device_option)}"
    if op.name:
        line += f" name={op.name!r}"
    if op.is_gradient_op:
        line += " gradient"
    return line


def print_net(
    net: Net,
    label: str = "net",
    *,
    indent: int = 0,
    full: bool = False,
    max_chars: int | None = None,
    digests: bool = False,
) -> str:
    """The canonical dump of ``net``; ``label`` names it (``predict_net``, ``init_net``).

    ``full``, ``max_chars`` and ``digests`` apply to argument values (see
    ``format_arg_value``); with ``digests`` an initializer's line ends with a digest of its
    values too.
    """
    pad = _INDENT * indent
    view = net.ssa()
    header = f"{pad}net {label}"
    if net.name:
        header += f" {net.name!r}"
    if net.net_type:
        header += f" type={net.net_type}"
    lines = [header]
    if net.device_option is not None:
        lines.append(f"{pad}{_INDENT}device: {format_device(net.device_option)}")
    net_args = sorted(net.args, key=lambda a: a.name or "")
    if net_args:
        shown = ", ".join(f"{a.name}={format_arg_value(a)}" for a in net_args)
        lines.append(f"{pad}{_INDENT}args: {{{shown}}}")
    if net.external_inputs:
        ext_in = " ".join(f"{n}@{v}" for n, v in view.external_inputs)
        lines.append(f"{pad}{_INDENT}external_input: {ext_in}")
    if net.external_outputs:
        ext_out = " ".join(f"{n}@{v}" for n, v in view.external_outputs)
        lines.append(f"{pad}{_INDENT}external_output: {ext_out}")
    for name, value_type in net.types.items():
        lines.append(f"{pad}{_INDENT}type: {name} {format_value_type(value_type)}")
    for name, tensor in net.initializers.items():
        line = f"{pad}{_INDENT}initializer: {name} {format_tensor_value(tensor)}"
        lines.append(f"{line} #{tensor_digest(tensor)}" if digests else line)
    for index, op in enumerate(net):
        ins, outs = view.ssa[index]
        line = format_op(op, index, ins, outs, full=full, max_chars=max_chars, digests=digests)
        lines.append(pad + _INDENT + line)
        for arg_name, nested in op.nested_nets():
            lines.append(
                print_net(
                    nested,
                    str(arg_name),
                    indent=indent + 2,
                    full=full,
                    max_chars=max_chars,
                    digests=digests,
                )
            )
    return "\n".join(lines)


def print_model(
    model: Model, *, full: bool = False, max_chars: int | None = None, digests: bool = False
) -> str:
    """The canonical dump of a model: its init_net (when present), then its predict_net
    (an ONNX model: its header, then its ``graph``).

    ``digests`` (for golden files): values the text shows in part (weights, tensors, cut
    lists) end with a digest of their content, so a changed weight changes the dump.
    """
    parts = []
    if model.dialect == "onnx":
        parts.append(_model_line(model))
    nets = [("init_net", model.init_net), (MAIN_NET[model.dialect], model.predict_net)]
    for label, net in nets:
        if net is not None:
            parts.append(print_net(net, label, full=full, max_chars=max_chars, digests=digests))
    return "\n".join(parts) + "\n"


def _model_line(model: Model) -> str:
    """``model ir_version=8 opsets=ai.onnx:17,com.microsoft:1 producer='pytorch 2.13'
    functions=2``: what an ONNX model's header says."""
    header = model.header
    opsets = ",".join(f"{d or 'ai.onnx'}:{v}" for d, v in model.opset_imports.items())
    line = f"model ir_version={getattr(header, 'ir_version', 0)} opsets={opsets or '-'}"
    producer = " ".join(
        part
        for part in (getattr(header, "producer_name", ""), getattr(header, "producer_version", ""))
        if part
    )
    if producer:
        line += f" producer={producer!r}"
    functions = getattr(header, "functions", ())
    if len(functions):
        names = ", ".join(f"{f.domain}::{f.name}" if f.domain else f.name for f in functions)
        line += f" functions=[{names}]"
    return line


def print_ssa_table(net: Net) -> str:
    """A table of every blob: its versions, with the op writing and the ops reading each."""
    view = net.ssa()
    producers = view.producers
    consumers = view.consumers
    # the empty name is no value (an optional input left out): not a blob
    blobs = sorted(
        blob for blob in set(producers) | set(consumers) | set(view.external_inputs) if blob[0]
    )
    rows = ["blob@version  written by  read by"]
    for name, version in blobs:
        writer = producers.get((name, version))
        written = f"%{writer[0]}" if writer else ("input" if version == 0 else "-")
        readers = " ".join(f"%{i}" for i in view.consumer_ops((name, version))) or "-"
        rows.append(f"{name}@{version}  {written}  {readers}")
    return "\n".join(rows) + "\n"

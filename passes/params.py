"""Parameters of an exported pair: read them out of an init_net, write them back as one.

``get_params_from_init_net`` evaluates an init_net's fill ops directly with numpy (upstream ran
the net in a Caffe2 workspace); ``construct_init_net_from_params`` writes one fill op per
parameter (detectron2's ``create_const_fill_op`` table); ``export_pair`` is Caffe2's
``predictor_exporter``-era ``Export``: it splits a net's blobs into inputs, parameters and
outputs and builds the init_net a Predictor expects.

Supported init_net ops: ``GivenTensorFill`` (with an optional ``dtype``) and its ``Double``,
``Fp16``, ``Int``, ``Int16``, ``Int64``, ``Bool``, ``String`` and ``ByteStringToUInt8``
variants; ``ConstantFill``; ``RangeFill``; ``Int8GivenTensorFill`` and
``Int8GivenIntTensorFill`` (as ``Int8Tensor``); the copy ops (``Copy``, ``CopyCPUToGPU``,
``CopyGPUToCPU``, ``EnsureCPUOutput``, ``Alias``) as identities; and, only when a ``seed`` is
given, the random fills ``XavierFill``, ``MSRAFill``, ``GaussianFill``, ``UniformFill`` and
``UniformIntFill``. Anything else raises ``UnsupportedOpError`` naming the op.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.errors import InvalidArgumentError, InvalidNetError, UnsupportedOpError
from graphtools.ir import Argument, DeviceOption, Net, Op
from graphtools.proto import caffe2_pb2

__all__ = [
    "Int8Tensor",
    "construct_init_net_from_params",
    "export_pair",
    "get_params_from_init_net",
]


@dataclass(frozen=True, eq=False)
class Int8Tensor:
    """A quantized parameter, as Caffe2's ``workspace.Int8Tensor`` fetched it.

    Attributes:
        values: ``uint8`` (from ``Int8GivenTensorFill``) or ``int32`` (from
            ``Int8GivenIntTensorFill``) array of the stored integers.
        scale: the ``Y_scale`` argument.
        zero_point: the ``Y_zero_point`` argument.
    """

    values: np.ndarray
    scale: float
    zero_point: int

    @property
    def data(self) -> np.ndarray:
        """``values`` under the name Caffe2's ``Int8Tensor`` namedtuple used."""
        return self.values


Param = np.ndarray | Int8Tensor

_DTYPES: dict[int, Any] = {
    caffe2_pb2.TensorProto.FLOAT: np.float32,
    caffe2_pb2.TensorProto.INT32: np.int32,
    caffe2_pb2.TensorProto.BYTE: np.uint8,
    caffe2_pb2.TensorProto.STRING: object,
    caffe2_pb2.TensorProto.BOOL: np.bool_,
    caffe2_pb2.TensorProto.UINT8: np.uint8,
    caffe2_pb2.TensorProto.INT8: np.int8,
    caffe2_pb2.TensorProto.UINT16: np.uint16,
    caffe2_pb2.TensorProto.INT16: np.int16,
    caffe2_pb2.TensorProto.INT64: np.int64,
    caffe2_pb2.TensorProto.FLOAT16: np.float16,
    caffe2_pb2.TensorProto.DOUBLE: np.float64,
}

_GIVEN_TENSOR_DTYPES: dict[str, Any] = {
    "GivenTensorFill": np.float32,
    "GivenTensorDoubleFill": np.float64,
    "GivenTensorFp16Fill": np.float16,
    "GivenTensorIntFill": np.int32,
    "GivenTensorInt16Fill": np.int16,
    "GivenTensorInt64Fill": np.int64,
    "GivenTensorBoolFill": np.bool_,
    "GivenTensorStringFill": object,
}

_COPY_OPS = frozenset({"Copy", "CopyCPUToGPU", "CopyGPUToCPU", "EnsureCPUOutput", "Alias"})
_RANDOM_FILLS = frozenset(
    {"XavierFill", "MSRAFill", "GaussianFill", "UniformFill", "UniformIntFill"}
)

# numpy dtype -> fill op for construct_init_net_from_params: detectron2's table (float32,
# int32, int64; uint8 is special-cased) extended with the other types this module reads back.
_FILL_OP_FOR_DTYPE: dict[np.dtype, str] = {
    np.dtype(dtype): op_type for op_type, dtype in _GIVEN_TENSOR_DTYPES.items()
}


def _where(index: int, op: Op) -> str:
    return f"init_net op {index} ({op.type}) writing {list(op.outputs)}"


def _shape(index: int, op: Op, inputs: list[Any]) -> tuple[int, ...] | None:
    """The output shape of a filler op (Caffe2's ``FillerOp``), ``None`` when unspecified."""
    if inputs:
        if op.arg("input_as_shape", 0):
            shape = tuple(int(d) for d in np.asarray(inputs[0]).reshape(-1))
        else:
            shape = tuple(np.shape(inputs[0]))
        return shape + tuple(op.arg("extra_shape", ()))
    if op.has_arg("shape"):
        return tuple(int(d) for d in op.arg("shape", ()))
    return None


def _values(op: Op) -> tuple[Any, ...]:
    value = op.arg("values")
    if value is None:
        return ()
    if isinstance(value, bytes):
        return (value,)
    return tuple(value)


def _as_bytes(index: int, op: Op) -> bytes:
    """The byte string a ``values`` argument holds in ``s`` or as its single ``strings`` item."""
    value = op.arg("values")
    if isinstance(value, bytes):
        return value
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], bytes):
        return value[0]
    if value is None:
        return b""
    raise InvalidNetError(f"{_where(index, op)}: 'values' must be one byte string")


def _given(index: int, op: Op, values: np.ndarray, shape: tuple[int, ...] | None) -> np.ndarray:
    if shape is None:
        return values
    if math.prod(shape) != values.size:
        raise InvalidNetError(
            f"{_where(index, op)}: {values.size} values do not fill shape {list(shape)}"
        )
    return values.reshape(shape)


def _given_tensor(index: int, op: Op, inputs: list[Any]) -> np.ndarray:
    dtype = _GIVEN_TENSOR_DTYPES[op.type]
    if op.type == "GivenTensorFill" and op.has_arg("dtype"):
        dtype = _dtype(index, op)
    values = np.array(_values(op), dtype=dtype)
    return _given(index, op, values, _shape(index, op, inputs))


def _dtype(index: int, op: Op) -> Any:
    code = op.arg("dtype")
    if code not in _DTYPES:
        raise UnsupportedOpError(f"{_where(index, op)}: unsupported dtype {code!r}")
    return _DTYPES[code]


def _constant_fill(index: int, op: Op, inputs: list[Any]) -> np.ndarray:
    value = op.arg("value", 0.0)
    if op.has_arg("dtype"):
        dtype = _dtype(index, op)
    elif isinstance(value, int):
        dtype = np.int64  # Caffe2 infers INT64 from an integer 'value' without 'dtype'
    else:
        dtype = np.float32
    shape = _shape(index, op, inputs)
    return np.full(() if shape is None else shape, value, dtype=dtype)


def _range_fill(index: int, op: Op, inputs: list[Any]) -> np.ndarray:
    shape = _shape(index, op, inputs) or ()
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape)


def _random_fill(index: int, op: Op, inputs: list[Any], rng: np.random.Generator) -> np.ndarray:
    shape = _shape(index, op, inputs) or ()
    size = math.prod(shape)
    if op.type == "UniformIntFill":
        low, high = int(op.arg("min", 0)), int(op.arg("max", 1))
        return rng.integers(low, high, size=shape, endpoint=True, dtype=np.int32)
    if op.type == "XavierFill":
        fan_in = size // shape[0] if shape and shape[0] else 1
        bound = math.sqrt(3.0 / max(fan_in, 1))
        values = rng.uniform(-bound, bound, size=shape)
    elif op.type == "MSRAFill":
        fan_out = size // shape[1] if len(shape) > 1 and shape[1] else size
        values = rng.normal(0.0, math.sqrt(2.0 / max(fan_out, 1)), size=shape)
    elif op.type == "GaussianFill":
        values = rng.normal(float(op.arg("mean", 0.0)), float(op.arg("std", 1.0)), size=shape)
    else:  # UniformFill
        values = rng.uniform(float(op.arg("min", 0.0)), float(op.arg("max", 1.0)), size=shape)
    return values.astype(np.float32)


def _int8_fill(index: int, op: Op, inputs: list[Any]) -> Int8Tensor:
    if op.type == "Int8GivenTensorFill":
        values = np.frombuffer(_as_bytes(index, op), dtype=np.uint8).copy()
    else:
        values = np.array(_values(op), dtype=np.int32)
    return Int8Tensor(
        _given(index, op, values, _shape(index, op, inputs)),
        float(op.arg("Y_scale", 1.0)),
        int(op.arg("Y_zero_point", 0)),
    )


def _byte_string_fill(index: int, op: Op, inputs: list[Any]) -> np.ndarray:
    values = np.frombuffer(_as_bytes(index, op), dtype=np.uint8).copy()
    return _given(index, op, values, _shape(index, op, inputs))


_Kernel = Callable[[int, Op, list[Any]], Any]
_KERNELS: dict[str, _Kernel] = {
    **dict.fromkeys(_GIVEN_TENSOR_DTYPES, _given_tensor),
    "GivenTensorByteStringToUInt8Fill": _byte_string_fill,
    "ConstantFill": _constant_fill,
    "RangeFill": _range_fill,
    "Int8GivenTensorFill": _int8_fill,
    "Int8GivenIntTensorFill": _int8_fill,
}


def _run_op(index: int, op: Op, inputs: list[Any], rng: np.random.Generator | None) -> list[Any]:
    if op.type in _COPY_OPS:
        if len(inputs) != len(op.outputs):
            raise InvalidNetError(f"{_where(index, op)}: copies need one input per output")
        return list(inputs)
    kernel = _KERNELS.get(op.type)
    if kernel is None and op.type not in _RANDOM_FILLS:
        raise UnsupportedOpError(
            f"{_where(index, op)}: cannot evaluate this op type in an init_net "
            "(only fill and copy ops are supported)"
        )
    if len(op.outputs) != 1:
        raise InvalidNetError(f"{_where(index, op)}: a fill op writes exactly one blob")
    if kernel is None:
        if rng is None:
            raise UnsupportedOpError(
                f"{_where(index, op)} is a random fill: its values are not in the file; "
                "pass seed=<int> to fill it deterministically with numpy"
            )
        return [_random_fill(index, op, inputs, rng)]
    return [kernel(index, op, inputs)]


def get_params_from_init_net(
    init_net: Net | caffe2_pb2.NetDef, *, seed: int | None = None
) -> tuple[dict[str, Param], dict[str, DeviceOption]]:
    """Evaluate an init_net's fill ops: detectron2's ``get_params_from_init_net``.

    The parameters are the init_net's external outputs or, when it declares none (every real
    init_net in the wild we checked), every blob its ops write, in order of first write.
    Each one's device option is that of the op writing its final version (the op's own, else
    the net-wide one; upstream read only the op's own), empty for a ``CopyGPUToCPU`` producer,
    whose result lives on the CPU.

    Args:
        init_net: an IR ``Net`` or a ``NetDef``.
        seed: seed of one numpy generator drawn from in op order by the random fills; without
            it a random fill raises, since its values are not in the file.

    Returns:
        ``(params, device_options)``: ``{name: ndarray | Int8Tensor}`` and
        ``{name: DeviceOption}``.

    Raises:
        UnsupportedOpError: an op that is not a fill or copy, or a random fill without seed.
        InvalidNetError: a malformed fill, an input read before any op wrote it, or an external
            output no op writes.
    """
    net = init_net if isinstance(init_net, Net) else Net.from_netdef(init_net)
    rng = None if seed is None else np.random.default_rng(seed)
    env: dict[str, Any] = {}
    for index, op in enumerate(net.ops):
        inputs = []
        for name in op.inputs:
            if name not in env:
                raise InvalidNetError(
                    f"{_where(index, op)} reads {name!r}, which no earlier init_net op writes"
                )
            inputs.append(env[name])
        env.update(zip(op.outputs, _run_op(index, op, inputs, rng), strict=True))

    names = list(net.external_outputs) or list(env)
    view = net.ssa()
    params: dict[str, Param] = {}
    device_options: dict[str, DeviceOption] = {}
    for name in names:
        producer = view.producer(view.latest(name))
        if producer is None:
            raise InvalidNetError(f"init_net external output {name!r} is written by no op")
        op = net.ops[producer]
        params[name] = env[name]
        device = DeviceOption() if op.type == "CopyGPUToCPU" else net.op_device(op)
        device_options[name] = DeviceOption() if device is None else device
    return params, device_options


def _device(value: DeviceOption | caffe2_pb2.DeviceOption | None) -> DeviceOption | None:
    if isinstance(value, caffe2_pb2.DeviceOption):
        return DeviceOption.from_proto(value)
    return value


def _fill_op(name: str, value: Any, device: DeviceOption | None) -> Op:
    """One fill op writing ``value`` into ``name`` (detectron2's ``create_const_fill_op``)."""
    if isinstance(value, Int8Tensor):
        if device is not None and device.type != 0:
            raise InvalidArgumentError(f"int8 parameter {name!r} must be on CPU, not {device}")
        data = value.values
        if data.dtype == np.uint8:
            op_type, values = "Int8GivenTensorFill", Argument("values", s=data.tobytes())
        elif data.dtype == np.int32:
            op_type = "Int8GivenIntTensorFill"
            values = Argument("values", ints=tuple(int(v) for v in data.reshape(-1)))
        else:
            raise InvalidArgumentError(f"int8 parameter {name!r} has dtype {data.dtype}")
        args = [
            values,
            Argument("shape", ints=tuple(int(d) for d in data.shape)),
            Argument("Y_scale", f=float(value.scale)),
            Argument("Y_zero_point", i=int(value.zero_point)),
        ]
        return Op(op_type, [], [name], args=args)
    array = np.asarray(value)
    if array.dtype == np.uint8:  # detectron2 stores uint8 tensors as one string blob
        args = [Argument("values", strings=(array.tobytes(),)), Argument("shape", ints=(1,))]
        return Op("GivenTensorStringFill", [], [name], args=args, device_option=device)
    fill_type = _FILL_OP_FOR_DTYPE.get(array.dtype)
    if fill_type is None:
        raise InvalidArgumentError(
            f"parameter {name!r} has dtype {array.dtype}, which has no fill op; "
            f"supported: {sorted(str(d) for d in _FILL_OP_FOR_DTYPE)} and uint8"
        )
    return Op(
        fill_type,
        [],
        [name],
        args=[_values_arg(array), Argument("shape", ints=tuple(int(d) for d in array.shape))],
        device_option=device,
    )


def _values_arg(array: np.ndarray) -> Argument:
    flat = array.reshape(-1)
    if array.dtype == object:
        return Argument(
            "values", strings=tuple(v.encode() if isinstance(v, str) else bytes(v) for v in flat)
        )
    if array.dtype.kind == "f":
        return Argument("values", floats=tuple(float(v) for v in flat))
    return Argument("values", ints=tuple(int(v) for v in flat))


def construct_init_net_from_params(
    params: Mapping[str, Any],
    device_options: Mapping[str, DeviceOption | caffe2_pb2.DeviceOption] | None = None,
) -> caffe2_pb2.NetDef:
    """An init_net with one fill op per parameter, in ``params`` order (detectron2's helper).

    Fill op by dtype: float32 ``GivenTensorFill``, int32 ``GivenTensorIntFill``, int64
    ``GivenTensorInt64Fill``, and (beyond detectron2's table) float64, float16, int16, bool and
    bytes/object arrays to the matching ``GivenTensor*Fill``. A uint8 array becomes, as
    upstream, a ``GivenTensorStringFill`` of one string holding its bytes with shape ``[1]``
    (so it does not read back as a uint8 array). ``Int8Tensor`` becomes
    ``Int8GivenTensorFill`` (uint8) or ``Int8GivenIntTensorFill`` (int32) with ``Y_scale`` and
    ``Y_zero_point``; its device must be CPU (upstream demanded none at all, which rejected
    the empty options ``get_params_from_init_net`` returns). Python ``str`` values are skipped
    with a warning, as upstream. Each name is appended to ``external_output``. Argument
    ``floats`` are 32-bit, so float64 values and ``Y_scale`` keep float32 precision only (in
    Caffe2 too).

    Raises:
        InvalidArgumentError: a dtype without fill op, or an int8 parameter on GPU.
    """
    ops = []
    for name, value in params.items():
        if isinstance(value, str):
            warnings.warn(f"parameter {name!r} is a Python string; skipped", stacklevel=2)
            continue
        device = None if device_options is None else _device(device_options.get(name))
        ops.append(_fill_op(name, value, device))
    return Net(ops, external_outputs=[name for op in ops for name in op.outputs]).to_netdef()


def _export_fill_op(name: str, value: Any) -> Op:
    """The fill op ``Export`` writes for a parameter: float arrays as ``GivenTensorFill``."""
    array = value if isinstance(value, Int8Tensor) else np.asarray(value)
    if isinstance(array, np.ndarray) and array.dtype.kind == "f":
        args = [
            Argument("shape", ints=tuple(int(d) for d in array.shape)),
            Argument("values", floats=tuple(float(v) for v in array.reshape(-1))),
        ]
        return Op("GivenTensorFill", [], [name], args=args)
    return _fill_op(name, array, None)


def export_pair(
    net: Net | caffe2_pb2.NetDef, params: Mapping[str, Any]
) -> tuple[Net, Net] | tuple[caffe2_pb2.NetDef, caffe2_pb2.NetDef]:
    """Caffe2's ``predictor_exporter`` ``Export``: the (init_net, predict_net) a Predictor loads.

    With ``ssa, versions = get_ssa(net)``:

    * inputs: blobs at version 0 in ``versions`` (declared external inputs never written, or,
      when the net declares none, every blob read before written) that are not in ``params``;
    * outputs: blobs written by the net (version > 0) that no op reads, in ``versions`` order;
    * init_net: one fill per parameter in ``params`` order (float arrays as
      ``GivenTensorFill`` with ``shape`` then ``values``, as upstream; other dtypes with the
      typed fill of ``construct_init_net_from_params``, where upstream wrote a
      ``GivenTensorFill`` Caffe2 could not run), then a ``[1, 1]`` placeholder of ``0.0`` per
      input so the blob exists in the workspace; its ``external_output`` lists them all
      (upstream left it empty, which nothing read);
    * predict_net: a copy of ``net`` with external inputs = inputs followed by the net's own
      external inputs (upstream listed declared inputs twice; each is listed once here) and
      external outputs = outputs.

    Returns:
        ``(init_net, predict_net)``, IR nets for an IR net and NetDefs for a NetDef.
    """
    ir_net = net if isinstance(net, Net) else Net.from_netdef(net)
    view = ir_net.ssa()
    read = {name for ins, _ in view.ssa for name, _ in ins}
    inputs = [n for n, v in view.versions.items() if v == 0 and n not in params]
    outputs = [n for n, v in view.versions.items() if v != 0 and n not in read]

    fills = [_export_fill_op(name, value) for name, value in params.items()]
    placeholders = [
        Op(
            "GivenTensorFill",
            [],
            [name],
            args=[Argument("shape", ints=(1, 1)), Argument("values", floats=(0.0,))],
        )
        for name in inputs
    ]
    init = Net(fills + placeholders, external_outputs=[*params, *inputs])
    predict = ir_net.copy()
    listed = set(inputs)
    predict.set_external_inputs(inputs + [n for n in ir_net.external_inputs if n not in listed])
    predict.set_external_outputs(outputs)
    if isinstance(net, Net):
        return init, predict
    return init.to_netdef(), predict.to_netdef()

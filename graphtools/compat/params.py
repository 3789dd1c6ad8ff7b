"""Parameters of an exported pair: read them out of an init_net, write them back as one.

``get_params_from_init_net`` runs an init_net in the reference executor's ``Workspace`` (as
upstream ran it in a Caffe2 workspace); ``construct_init_net_from_params`` writes one fill op
per parameter (detectron2's ``create_const_fill_op`` table); ``export_pair`` is Caffe2's
``predictor_exporter``-era ``Export``: it splits a net's blobs into inputs, parameters and
outputs and builds the init_net a Predictor expects.

Supported init_net ops: the executor's fill kernels (``kernels_fill.FILL_OPS``):
``GivenTensorFill`` (with an optional ``dtype``) and its ``Double``, ``Fp16``, ``Int``,
``Int16``, ``Int64``, ``Bool``, ``String`` and ``ByteStringToUInt8`` variants;
``ConstantFill``; ``RangeFill``; ``Int8GivenTensorFill`` and ``Int8GivenIntTensorFill`` (as
``Int8Tensor``); the copy ops (``Copy``, ``CopyCPUToGPU``, ``CopyGPUToCPU``,
``EnsureCPUOutput``, ``Alias``) as identities; and, only when a ``seed`` is given, the random
fills ``XavierFill``, ``MSRAFill``, ``GaussianFill``, ``UniformFill`` and ``UniformIntFill``.
Anything else raises ``UnsupportedOpError`` naming the op, before any op runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from graphtools.errors import InvalidArgumentError, MissingBlobError, UnsupportedOpError
from graphtools.executor import Int8Tensor, Workspace, run_net
from graphtools.executor.kernels_fill import FILL_OPS, GIVEN_FILL_DTYPES, RANDOM_FILLS
from graphtools.ir import Argument, DeviceOption, Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net, device_option_to_proto, net_to_netdef

__all__ = [
    "Int8Tensor",
    "construct_init_net_from_params",
    "export_pair",
    "get_params_from_init_net",
]

Param = np.ndarray | Int8Tensor

_COPY_OPS = frozenset({"Copy", "CopyCPUToGPU", "CopyGPUToCPU", "EnsureCPUOutput", "Alias"})
_INIT_NET_OPS = FILL_OPS | _COPY_OPS

# numpy dtype -> fill op for construct_init_net_from_params: detectron2's table (float32,
# int32, int64; uint8 is special-cased) extended with the other types this module reads back.
_FILL_OP_FOR_DTYPE: dict[np.dtype, str] = {
    np.dtype(dtype): op_type for op_type, dtype in GIVEN_FILL_DTYPES.items()
}


def _where(index: int, op: Op) -> str:
    return f"init_net op {index} ({op.type}) writing {list(op.outputs)}"


def _check_op_types(net: Net, seed: int | None) -> None:
    """Raise for the first op the executor must not run here: not a fill or copy, or unseeded."""
    for index, op in enumerate(net.ops):
        if op.type not in _INIT_NET_OPS:
            raise UnsupportedOpError(
                f"{_where(index, op)}: cannot evaluate this op type in an init_net "
                "(only fill and copy ops are supported)"
            )
        if seed is None and op.type in RANDOM_FILLS:
            raise UnsupportedOpError(
                f"{_where(index, op)} is a random fill: its values are not in the file; "
                "pass seed=<int> to fill it deterministically with numpy"
            )


def get_params_from_init_net(
    init_net: Net | caffe2_pb2.NetDef, *, seed: int | None = None
) -> tuple[dict[str, Param], dict[str, caffe2_pb2.DeviceOption]]:
    """Run an init_net's fill ops in the executor: detectron2's ``get_params_from_init_net``.

    The parameters are the init_net's external outputs or, when it declares none (every real
    init_net in the wild we checked), every blob its ops write, in order of first write.
    Each one's device option is that of the op writing its final version (the op's own, else
    the net-wide one; upstream read only the op's own), empty for a ``CopyGPUToCPU`` producer,
    whose result lives on the CPU.

    Args:
        init_net: an IR ``Net`` or a ``NetDef``.
        seed: seed of the executor ``Workspace``. Each random fill draws from a numpy generator
            seeded with it (or with the op's own ``random_seed``) and its output name, so its
            values do not depend on the other ops; without a seed a random fill raises, since
            its values are not in the file.

    Returns:
        ``(params, device_options)``: ``{name: ndarray | Int8Tensor}`` and
        ``{name: caffe2_pb2.DeviceOption}`` (messages, as upstream: scripts do
        ``op.device_option.CopyFrom(device_options[name])``).

    Raises:
        UnsupportedOpError: an op that is not a fill or copy, a random fill without seed (both
            checked before any op runs), or a fill ``dtype`` the executor does not know.
        MissingBlobError: an external output no op writes (a ``KeyError``, as upstream).
        ExecutionError: a malformed fill, or an input read before any op wrote it.
    """
    net = as_net(init_net)
    _check_op_types(net, seed)
    workspace = Workspace(seed=0 if seed is None else seed)
    run_net(net, workspace)

    names = list(net.external_outputs) or workspace.local_blobs()
    view = net.ssa()
    params: dict[str, Param] = {}
    device_options: dict[str, caffe2_pb2.DeviceOption] = {}
    for name in names:
        producer = view.producer(view.latest(name))
        if producer is None:
            raise MissingBlobError(f"init_net external output {name!r} is written by no op")
        op = net.ops[producer]
        params[name] = workspace.fetch(name)
        device = DeviceOption() if op.type == "CopyGPUToCPU" else net.op_device(op)
        device_options[name] = device_option_to_proto(DeviceOption() if device is None else device)
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
    return net_to_netdef(Net(ops, external_outputs=[name for op in ops for name in op.outputs]))


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
    ir_net = as_net(net)
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
    return net_to_netdef(init), net_to_netdef(predict)

"""Generic status inference over versioned blobs, and the device analysis built on it.

A *status* is any per-blob fact that ops propagate: a device (cpu/gpu), a layout, a dtype.
``infer_status`` is detectron2's ``_generic_status_identifier`` made to converge: it sweeps the
ops forward and backward, asking an updater what each op implies about its blobs, and repeats
until a round learns nothing. ``infer_device_type`` is the device table over it, and
``plan_device_options`` turns inferred devices into the DeviceOption each op should carry.
Analyses return data; ``assign_device_option`` and the ``infer-devices`` pass
(``graphtools.passes.infer_devices``) apply it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from graphtools.errors import (
    InvalidArgumentError,
    InvalidNetError,
    StatusConflictError,
    UnknownStatusError,
)
from graphtools.ir import DeviceOption, Net, Op
from graphtools.ssa import VersionedBlob, get_undefined_blobs

__all__ = [
    "DEVICE_NAME_STYLES",
    "StatusUpdater",
    "device_names",
    "get_external_blob_names",
    "infer_device_type",
    "infer_status",
    "plan_device_options",
]

StatusUpdater = Callable[[Op, list[Any], list[Any]], tuple[Sequence[Any], Sequence[Any]]]

_CPU_TO_GPU = "CopyCPUToGPU"
_GPU_TO_CPU = "CopyGPUToCPU"
DEVICE_NAME_STYLES: dict[str, tuple[str, str]] = {
    "caffe2": ("cpu", "gpu"),
    "pytorch": ("cpu", "cuda"),
}
"""``device_name_style`` -> (CPU name, GPU name) of ``infer_device_type``."""
_CUDA = 1
_GPU_OPTION = DeviceOption(device_type=_CUDA, device_id=0)
_CPU_OPTION = DeviceOption(device_type=0)
# How many unknown blobs an error message lists before summarising the rest.
_LISTED = 20


def _net_label(net: Net) -> str:
    return f"net {net.name!r}" if net.name else "the net"


def infer_status(
    net: Net,
    updater: StatusUpdater,
    known_status: Mapping[VersionedBlob, Any],
    *,
    allow_unknown: bool = False,
) -> dict[VersionedBlob, Any]:
    """Infer a status for every versioned blob from a few known ones.

    ``updater(op, input_statuses, output_statuses)`` returns ``(new_inputs, new_outputs)``, lists
    of the same lengths, ``None`` meaning "unknown". Ops are swept forward then backward, and
    the pair of sweeps is repeated until one round learns nothing (upstream stops after one
    round, which leaves blobs unknown when a fact learnt late in the backward sweep would feed
    an op already visited). Statuses are only ever added, so each round but the last learns at
    least one blob: at most ``U + 1`` rounds for ``U`` initially unknown blobs, each linear in
    the total number of op inputs and outputs (in practice two or three rounds). On return
    every op's updater agrees with the result, since the last round re-checked all of them.

    Args:
        net: the net (nested nets are opaque, as upstream; ``graphtools.compat`` takes a
            NetDef).
        updater: what an op implies about its blobs.
        known_status: starting facts; keys must be versioned blobs of the net (op inputs and
            outputs, ``(name, 0)`` for external inputs, versioned external outputs).
        allow_unknown: leave blobs whose status cannot be inferred out of the result instead
            of raising.

    Returns:
        ``{versioned blob: status}`` including the known ones.

    Raises:
        InvalidNetError: a known key is not a blob of the net, or the updater refuses an op.
        StatusConflictError: an updater result contradicts a known status (names the blob,
            the op index and type, both statuses); also a ``RuntimeError``, as upstream.
        UnknownStatusError: (without ``allow_unknown``) some blobs stay unknown (listed);
            also a ``NotImplementedError``, as upstream.
        InvalidArgumentError: a known status is ``None``, or the updater returns lists of the
            wrong lengths.
    """
    view = net.ssa()
    ssa = view.ssa
    seen: dict[VersionedBlob, None] = {}
    for ins, outs in ssa:
        seen.update(dict.fromkeys(ins))
        seen.update(dict.fromkeys(outs))
    allowed = set(seen).union(view.external_inputs, view.external_outputs)
    for key, value in known_status.items():
        if key not in allowed:
            raise InvalidNetError(
                f"known status given for {key!r}, which is not a versioned blob of "
                f"{_net_label(net)} (use (name, version) as get_ssa numbers them)"
            )
        if value is None:
            raise InvalidArgumentError(f"known status of {key!r} is None; leave unknowns out")

    status: dict[VersionedBlob, Any] = dict(known_status)
    ops = net.ops

    def update(index: int) -> bool:
        op = ops[index]
        ins, outs = ssa[index]
        try:
            new_ins, new_outs = updater(
                op, [status.get(b) for b in ins], [status.get(b) for b in outs]
            )
        except InvalidNetError as exc:
            kind = StatusConflictError if isinstance(exc, StatusConflictError) else InvalidNetError
            raise kind(
                f"op {index} ({op.type}) with inputs {ins} and outputs {outs}: {exc}"
            ) from exc
        if len(new_ins) != len(ins) or len(new_outs) != len(outs):
            raise InvalidArgumentError(
                f"status updater returned {len(new_ins)} input and {len(new_outs)} output "
                f"statuses for op {index} ({op.type}), which has {len(ins)} and {len(outs)}"
            )
        learnt = False
        for blob, value in zip((*ins, *outs), (*new_ins, *new_outs), strict=True):
            if value is None:
                continue
            old = status.get(blob)
            if old is None:
                status[blob] = value
                learnt = True
            elif old != value:
                raise StatusConflictError(
                    f"conflicting status for {blob!r} at op {index} ({op.type}): "
                    f"known {old!r}, the op implies {value!r}"
                )
        return learnt

    forward = range(len(ops))
    learnt = True
    while learnt:
        learnt = False
        for index in forward:
            learnt |= update(index)
        for index in reversed(forward):
            learnt |= update(index)

    unknown = [blob for blob in seen if blob not in status]
    if unknown and not allow_unknown:
        listed = ", ".join(repr(b) for b in unknown[:_LISTED])
        more = f" and {len(unknown) - _LISTED} more" if len(unknown) > _LISTED else ""
        raise UnknownStatusError(
            f"cannot infer the status of {len(unknown)} blob(s) of {_net_label(net)}: "
            f"{listed}{more}; give more known statuses or pass allow_unknown=True"
        )
    return status


def device_names(style: str) -> tuple[str, str]:
    """The (CPU, GPU) status names of ``style``; raises ``InvalidArgumentError`` if unknown."""
    names = DEVICE_NAME_STYLES.get(style)
    if names is None:
        raise InvalidArgumentError(
            f"unknown device_name_style {style!r}; expected one of {sorted(DEVICE_NAME_STYLES)}"
        )
    return names


def infer_device_type(
    predict_net: Net,
    known_status: Mapping[VersionedBlob, str],
    device_name_style: str = "caffe2",
    *,
    allow_unknown: bool = False,
) -> dict[VersionedBlob, str]:
    """Infer the device of every versioned blob (detectron2's ``infer_device_type``).

    ``CopyCPUToGPU`` reads CPU and writes GPU blobs, ``CopyGPUToCPU`` the reverse; every other
    op keeps all its inputs and outputs on one device. Statuses are ``"cpu"``/``"gpu"`` with
    ``device_name_style="caffe2"`` and ``"cpu"``/``"cuda"`` with ``"pytorch"``.

    Raises:
        InvalidArgumentError: unknown style, or a known status that is not a device name of it.
        StatusConflictError / UnknownStatusError: as ``infer_status``; an op other than a
            copy that touches blobs on two devices is a conflict named with its index, type
            and blobs.
    """
    cpu, gpu = device_names(device_name_style)
    for key, value in known_status.items():
        if value not in (cpu, gpu):
            raise InvalidArgumentError(
                f"device {value!r} of {key!r} is not one of {cpu!r}, {gpu!r} "
                f"(device_name_style {device_name_style!r})"
            )

    def updater(op: Op, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
        if op.type == _CPU_TO_GPU:
            return [cpu] * len(ins), [gpu] * len(outs)
        if op.type == _GPU_TO_CPU:
            return [gpu] * len(ins), [cpu] * len(outs)
        devices = {d for d in (*ins, *outs) if d is not None}
        if len(devices) > 1:
            raise StatusConflictError(
                f"the op mixes devices {sorted(devices)} (input devices {ins}, output devices "
                f"{outs}); only {_CPU_TO_GPU} and {_GPU_TO_CPU} move blobs between devices"
            )
        device = next(iter(devices), None)
        return [device] * len(ins), [device] * len(outs)

    return infer_status(predict_net, updater, known_status, allow_unknown=allow_unknown)


def _normalise_device(name: str, value: str) -> str:
    if value == "cpu":
        return "cpu"
    if value in ("gpu", "cuda"):
        return "gpu"
    raise InvalidArgumentError(f"device {value!r} of input {name!r} is not 'cpu', 'gpu' or 'cuda'")


def _target_option(op: Op, net: Net, device: str) -> DeviceOption | None:
    """The DeviceOption ``op`` needs to run on ``device``, or ``None`` when it already does."""
    current = net.op_device(op)
    current_type = 0 if current is None else current.type
    if device == "gpu":
        on_gpu0 = current_type == _CUDA and current is not None and current.device_id in (None, 0)
        return None if on_gpu0 else _GPU_OPTION
    return _CPU_OPTION if current_type == _CUDA else None


def _plan_net(net: Net, devices: Mapping[VersionedBlob, str]) -> dict[int, DeviceOption]:
    plan: dict[int, DeviceOption] = {}
    for index, (op, (ins, outs)) in enumerate(zip(net.ops, net.ssa().ssa, strict=True)):
        if op.type in (_CPU_TO_GPU, _GPU_TO_CPU):
            device: str | None = "gpu"
        else:
            device = next((devices[b] for b in (*ins, *outs) if b in devices), None)
        if device is None:
            continue
        option = _target_option(op, net, device)
        if option is not None:
            plan[index] = option
    return plan


def plan_device_options(
    predict_net: Net,
    init_net: Net | None,
    input_device_types: Mapping[str, str],
) -> tuple[dict[int, DeviceOption], dict[int, DeviceOption]]:
    """Which ops of each net need a new DeviceOption so the pair runs on the inferred devices.

    Devices of predict_net's blobs are inferred from its inputs' devices
    (``{name: "cpu" | "gpu" | "cuda"}``, read at version 0), strictly: every blob must be
    inferred. Each init_net blob then gets the device predict_net reads it on, and init_net's
    devices are inferred from those, leniently (an init op whose blobs predict_net never reads
    stays as it is). An op on GPU needs ``DeviceOption(device_type=1 (CUDA), device_id=0)``, as
    do both copy ops (they are CUDA ops, as in detectron2); an op on CPU whose effective device
    (its own option, else the net's) is CUDA needs ``DeviceOption(device_type=0)``. Ops already
    on the right device are left out, so the plan is empty at the fixpoint.

    Returns:
        ``(predict plan, init plan)``, each ``{op index: DeviceOption}``.
    """
    known = {
        (name, 0): _normalise_device(name, value) for name, value in input_device_types.items()
    }
    predict_devices = infer_device_type(predict_net, known)
    predict_plan = _plan_net(predict_net, predict_devices)
    if init_net is None:
        return predict_plan, {}
    init_known = {
        (name, version): predict_devices[(name, 0)]
        for name, version in init_net.ssa().versions.items()
        if version > 0 and (name, 0) in predict_devices
    }
    init_devices = infer_device_type(init_net, init_known, allow_unknown=True)
    return predict_plan, _plan_net(init_net, init_devices)


def get_external_blob_names(net: Net, lexical_scope: Iterable[str]) -> tuple[set[str], set[str]]:
    """The blobs a net reads from and writes to its enclosing scope (Caffe2's control-flow helper).

    Inputs are the blobs the net reads before writing them (``get_undefined_blobs``); each must
    be visible in ``lexical_scope``. Outputs are the op outputs that are in ``lexical_scope``.

    Raises:
        InvalidNetError: naming every input that is not in ``lexical_scope`` (upstream's
            ``AssertionError "Input blob X is undefined"``).
    """
    scope = set(lexical_scope)
    inputs = get_undefined_blobs(net.ssa().ssa)
    missing = sorted(inputs - scope)
    if missing:
        raise InvalidNetError(
            f"input blob(s) {', '.join(repr(m) for m in missing)} of {_net_label(net)} are "
            "undefined: not in the lexical scope"
        )
    outputs = {name for op in net.ops for name in op.outputs if name in scope}
    return inputs, outputs

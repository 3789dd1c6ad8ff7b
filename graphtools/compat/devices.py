"""detectron2's device helpers on NetDefs: ``infer_device_type``, its generic
``_generic_status_identifier`` (``infer_status`` here), ``_assign_device_option``
(``assign_device_option``), and Caffe2's ``get_external_blob_names``, over
``graphtools.analysis.devices`` and the ``infer-devices`` pass's edit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphtools.analysis import devices
from graphtools.analysis.devices import StatusUpdater, plan_device_options
from graphtools.compat._convert import to_ir, write_back
from graphtools.ir import DeviceOption, Net
from graphtools.proto import caffe2_pb2
from graphtools.ssa import VersionedBlob

__all__ = ["assign_device_option", "get_external_blob_names", "infer_device_type", "infer_status"]

NetLike = Net | caffe2_pb2.NetDef


def infer_status(
    net: NetLike,
    updater: StatusUpdater,
    known_status: Mapping[VersionedBlob, Any],
    *,
    allow_unknown: bool = False,
) -> dict[VersionedBlob, Any]:
    """``graphtools.analysis.devices.infer_status`` on a NetDef or IR net."""
    return devices.infer_status(to_ir(net), updater, known_status, allow_unknown=allow_unknown)


def infer_device_type(
    predict_net: NetLike,
    known_status: Mapping[VersionedBlob, str],
    device_name_style: str = "caffe2",
    *,
    allow_unknown: bool = False,
) -> dict[VersionedBlob, str]:
    """detectron2's ``infer_device_type`` (``graphtools.analysis.devices``) on a NetDef.

    A conflict is a ``StatusConflictError`` (also a ``RuntimeError``), blobs left unknown an
    ``UnknownStatusError`` (also a ``NotImplementedError``): the classes upstream raised.
    """
    return devices.infer_device_type(
        to_ir(predict_net), known_status, device_name_style, allow_unknown=allow_unknown
    )


def get_external_blob_names(
    net: NetLike, lexical_scope: Iterable[str]
) -> tuple[set[str], set[str]]:
    """Caffe2's control-flow helper (``graphtools.analysis.devices``) on a NetDef."""
    return devices.get_external_blob_names(to_ir(net), lexical_scope)


def assign_device_option(
    predict_net: NetLike, init_net: NetLike | None, input_device_types: Mapping[str, str]
) -> None:
    """Write device options into both nets, in place (detectron2's ``_assign_device_option``).

    ``input_device_types`` maps predict_net input names to ``"cpu"``, ``"gpu"`` or ``"cuda"``
    (upstream derived it from the example tensors). The rules are those of
    ``plan_device_options``; unlike upstream, ops already on their device are left untouched
    and CPU ops under a CUDA net-wide option are moved back to CPU. NetDefs are rewritten in
    place. Nothing is changed when inference fails.
    """
    predict_ir = to_ir(predict_net)
    init_ir = None if init_net is None else to_ir(init_net)
    predict_plan, init_plan = plan_device_options(predict_ir, init_ir, input_device_types)
    for original, net, plan in (
        (predict_net, predict_ir, predict_plan),
        (init_net, init_ir, init_plan),
    ):
        if net is not None and plan:
            _place(net, plan)
            write_back(original, net)


def _place(net: Net, plan: Mapping[int, DeviceOption]) -> None:
    with net.edit() as edit:
        for index, option in plan.items():
            edit.set_op(index, net[index].replace(device_option=option))

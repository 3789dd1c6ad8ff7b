"""Place every op of an exported pair on the device its blobs live on.

ONNX-exported nets carry no device options; detectron2 assigned them from the devices of the
example inputs. This pass does the same from an option: the devices of predict_net's inputs
are given, ``graphtools.analysis.devices.infer_device_type`` propagates them through the copy
ops (``CopyCPUToGPU``/``CopyGPUToCPU`` move a blob, every other op keeps one device), and each
op that is not already on its device gets ``DeviceOption(device_type=1, device_id=0)`` (GPU,
and both copy ops) or ``DeviceOption(device_type=0)`` (CPU op whose effective device was
CUDA). init_net ops get the device predict_net reads their blob on; init ops whose blobs
predict_net never reads are left alone. See ``plan_device_options`` for the exact rules.

Example (``infer-devices{inputs=x=cpu}``)::

    before
      #0 x_gpu@1 = CopyCPUToGPU(x@0)
      #1 y_gpu@1 = Relu(x_gpu@1)
      #2 y@1 = CopyGPUToCPU(y_gpu@1)
    after
      #0 x_gpu@1 = CopyCPUToGPU(x@0)      device_option {device_type: 1 device_id: 0}
      #1 y_gpu@1 = Relu(x_gpu@1)          device_option {device_type: 1 device_id: 0}
      #2 y@1 = CopyGPUToCPU(y_gpu@1)      device_option {device_type: 1 device_id: 0}
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.analysis.devices import device_names, plan_device_options
from graphtools.errors import InvalidArgumentError, PreconditionError
from graphtools.ir import DeviceOption, Model, Net
from graphtools.pass_infra import Pass, PassResult

__all__ = ["InferDevices", "parse_input_devices"]


def parse_input_devices(items: tuple[str, ...], style: str = "caffe2") -> dict[str, str]:
    """Turn ``("data=gpu", "im_info=cpu")`` into ``{"data": "gpu", "im_info": "cpu"}``.

    The device names are those of ``style`` (``cpu``/``gpu`` for ``caffe2``, ``cpu``/``cuda``
    for ``pytorch``). The split is at the last ``=``, so blob names may contain ``=``.

    Raises:
        InvalidArgumentError: an item without ``=``, an unknown device name or style, or a
            name given twice.
    """
    names = device_names(style)
    devices: dict[str, str] = {}
    for item in items:
        name, sep, device = item.rpartition("=")
        if not sep or not name:
            raise InvalidArgumentError(f"input device {item!r} is not of the form name=device")
        if device not in names:
            raise InvalidArgumentError(
                f"device {device!r} of input {name!r} is not one of {list(names)} (style {style!r})"
            )
        if name in devices:
            raise InvalidArgumentError(f"input {name!r} is given a device twice")
        devices[name] = device
    return devices


@dataclass(frozen=True)
class InferDevices(Pass):
    """Assign device options to predict_net and init_net ops from the inputs' devices.

    Options:
        inputs: ``name=device`` items for predict_net inputs (spec ``inputs=data=gpu;x=cpu``).
        style: ``caffe2`` (devices ``cpu``/``gpu``) or ``pytorch`` (``cpu``/``cuda``).

    Stats: ``predict_ops_placed`` and ``init_ops_placed``, the ops given a new DeviceOption.

    Raises ``PreconditionError`` when ``inputs`` names a blob that is not an external input
    of the predict_net, and ``InvalidNetError`` when a predict_net blob's device cannot be
    inferred or an op mixes devices; nothing is changed then.
    """

    name: ClassVar[str] = "infer-devices"
    example: ClassVar[str] = "infer-devices{inputs=data=gpu}"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    reads_ssa: ClassVar[bool] = True
    inputs: tuple[str, ...] = ()
    style: str = "caffe2"

    def requires(self, model: Model) -> None:
        """Every name in ``inputs`` must be an external input of the predict_net."""
        declared = list(model.predict_net.external_inputs)
        for name in parse_input_devices(self.inputs, self.style):
            if name not in declared:
                close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                shown = ", ".join(declared[:6]) + (", ..." if len(declared) > 6 else "")
                raise PreconditionError(
                    f"input {name!r} given a device is not an external input of the "
                    f"predict_net{hint}; its inputs are: {shown or 'none'}"
                )

    def call(self, model: Model) -> PassResult:
        """Infer devices, then write the needed device options into both nets."""
        devices = parse_input_devices(self.inputs, self.style)
        predict_plan, init_plan = plan_device_options(model.predict_net, model.init_net, devices)
        changed = place(model.predict_net, predict_plan)
        if model.init_net is not None:
            changed = place(model.init_net, init_plan) or changed
        stats = {"predict_ops_placed": len(predict_plan), "init_ops_placed": len(init_plan)}
        return PassResult(model, changed, stats)


def place(net: Net, plan: Mapping[int, DeviceOption]) -> bool:
    """Give the ops of ``plan`` their DeviceOption, in one edit; whether the net changed."""
    with net.edit() as edit:
        for index, option in plan.items():
            edit.set_op(index, net[index].replace(device_option=option))
    return edit.changed

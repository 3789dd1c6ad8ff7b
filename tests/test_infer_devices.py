"""The infer-devices pass and the drop-in assign_device_option."""

from __future__ import annotations

import pytest

from graphtools.errors import InvalidArgumentError, InvalidNetError
from graphtools.ir import DeviceOption, Model, Net, Op
from graphtools.pass_infra import available_passes
from graphtools.passes import assign_device_option
from graphtools.passes.infer_devices import InferDevices, parse_input_devices
from graphtools.serde.codec import net_to_netdef

GPU0 = DeviceOption(device_type=1, device_id=0)


def model() -> Model:
    predict = Net(
        [
            Op("CopyCPUToGPU", ["data"], ["data_gpu"]),
            Op("Conv", ["data_gpu", "w"], ["conv"]),
            Op("CopyGPUToCPU", ["conv"], ["out"]),
            Op("Relu", ["im_info"], ["info"]),
        ],
        ["data", "im_info", "w"],
        ["out", "info"],
    )
    init = Net([Op("GivenTensorFill", [], ["w"])], external_outputs=["w"])
    return Model(predict, init)


def test_registered_under_its_pipeline_name() -> None:
    assert available_passes()["infer-devices"] is InferDevices


def test_parse_input_devices() -> None:
    assert parse_input_devices(("data=gpu", "a=b=cpu")) == {"data": "gpu", "a=b": "cpu"}
    assert parse_input_devices(("data=cuda",), "pytorch") == {"data": "cuda"}
    for items, match in [
        (("data",), "'data'"),
        (("data=cuda",), "'cuda'"),
        (("x=cpu", "x=gpu"), "twice"),
    ]:
        with pytest.raises(InvalidArgumentError, match=match):
            parse_input_devices(items)
    with pytest.raises(InvalidArgumentError, match="'tpu'"):
        parse_input_devices(("x=cpu",), "tpu")


def test_pass_places_ops_and_reaches_a_fixpoint() -> None:
    m = model()
    result = InferDevices(inputs=("data=cpu", "im_info=cpu")).call(m)
    assert result.modified
    assert result.stats == {"predict_ops_placed": 3, "init_ops_placed": 1}
    assert [op.device_option for op in m.predict_net] == [GPU0, GPU0, GPU0, None]
    assert m.init_net is not None and m.init_net[0].device_option == GPU0
    again = InferDevices(inputs=("data=cpu", "im_info=cpu")).call(m)
    assert not again.modified and again.stats == {"predict_ops_placed": 0, "init_ops_placed": 0}


def test_pass_pytorch_style() -> None:
    m = model()
    InferDevices(inputs=("data=cpu", "im_info=cpu"), style="pytorch").call(m)
    assert m.predict_net[1].device_option == GPU0
    with pytest.raises(InvalidArgumentError, match="'gpu'"):
        InferDevices(inputs=("data=gpu",), style="pytorch").call(model())


def test_pass_needs_every_predict_blob_inferred() -> None:
    m = model()
    before = m.revision
    with pytest.raises(InvalidNetError, match=r"\('im_info', 0\)"):
        InferDevices(inputs=("data=cpu",)).call(m)
    assert m.revision == before


def test_pass_refuses_unknown_input_names() -> None:
    with pytest.raises(InvalidNetError, match="'nope'"):
        InferDevices(inputs=("data=cpu", "im_info=cpu", "nope=gpu")).call(model())


def test_assign_device_option_rewrites_netdefs_in_place() -> None:
    m = model()
    predict, init = net_to_netdef(m.predict_net), net_to_netdef(m.init_net)  # type: ignore[union-attr]
    assign_device_option(predict, init, {"data": "cpu", "im_info": "cpu"})
    assert [op.device_option.device_type for op in predict.op] == [1, 1, 1, 0]
    assert [op.HasField("device_option") for op in predict.op] == [True, True, True, False]
    assert init.op[0].device_option.device_type == 1 and init.op[0].device_option.device_id == 0


def test_assign_device_option_changes_nothing_on_error() -> None:
    m = model()
    predict = net_to_netdef(m.predict_net)
    snapshot = predict.SerializeToString()
    with pytest.raises(InvalidNetError):
        assign_device_option(predict, None, {"data": "cpu", "im_info": "cpu", "w": "cpu"})
    assert predict.SerializeToString() == snapshot

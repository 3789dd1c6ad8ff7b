"""The canonical dump: exact text of small nets, models and the SSA table."""

from __future__ import annotations

from graphtools.ir import Argument, DeviceOption, Model, Net, Op
from graphtools.printer import format_device, print_model, print_net, print_ssa_table
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef, net_to_netdef


def _small_net() -> Net:
    then = Net([Op("Relu", ["x"], ["x"])], ["x"], ["x"], name="then")
    tensor = caffe2_pb2.TensorProto(dims=[2, 3], data_type=caffe2_pb2.TensorProto.FLOAT, name="w")
    return Net(
        [
            Op(
                "Conv",
                ["data", "w"],
                ["y"],
                args={"stride": 2, "kernel": 3, "order": "NCHW", "pads": [0] * 10, "scale": 0.1},
                engine="CUDNN",
                device_option=DeviceOption(device_type=1, device_id=1),
                name="conv1",
            ),
            Op("Relu", ["y"], ["y"], device_option=DeviceOption(device_type=0, random_seed=3)),
            Op(
                "If", ["cond", "y"], ["y"], args={"then_net": then, "value": tensor, "raw": b"\xff"}
            ),
            Op("Sum", ["y", "y"], ["z", "z"], control_inputs=["data"], is_gradient_op=True),
        ],
        ["data", "w", "cond"],
        ["z"],
        name="small",
    )


SMALL_DUMP = """\
net predict_net 'small'
  external_input: data@0 w@0 cond@0
  external_output: z@2
  %0 Conv(data@0, w@0) -> y@1 {kernel=3, order='NCHW', pads=[0, 0, 0, 0, 0, 0, 0, 0, \
... (10 items)], scale=0.1, stride=2} engine=CUDNN device=CUDA:1 name='conv1'
  %1 Relu(y@1) -> y@2 device=CPU,seed=3
  %2 If(cond@0, y@2) -> y@3 {raw=<1 bytes>, then_net=<net then>, value=<tensor 'w' FLOAT 2x3>}
    net then_net 'then'
      external_input: x@0
      external_output: x@1
      %0 Relu(x@0) -> x@1
  %3 Sum(y@3, y@3) -> z@2, z@2 control=[data] gradient"""


def test_small_net_dump() -> None:
    assert print_net(_small_net(), "predict_net") == SMALL_DUMP


def test_dump_is_the_same_after_a_netdef_round_trip() -> None:
    assert print_net(net_from_netdef(net_to_netdef(_small_net())), "predict_net") == SMALL_DUMP


def test_net_header_and_float32_values() -> None:
    netdef = caffe2_pb2.NetDef(name="hdr", type="async_scheduling", external_input=["x"])
    netdef.device_option.device_type = 1
    netdef.device_option.device_id = 0
    netdef.arg.add(name="z", i=1)
    netdef.arg.add(name="a", f=0.1)  # stored as float32: printed in its shortest form
    netdef.op.add(type="Scale", input=["x"], output=["x"]).arg.add(name="scale", f=0.1)
    assert print_net(net_from_netdef(netdef)) == (
        "net net 'hdr' type=async_scheduling\n"
        "  device: CUDA:0\n"
        "  args: {a=0.1, z=1}\n"
        "  external_input: x@0\n"
        "  %0 Scale(x@0) -> x@1 {scale=0.1}"
    )


def test_lists_cut_after_eight_items() -> None:
    eight = Op("Fill", [], ["x"], args={"shape": list(range(8))})
    nine = Op("Fill", [], ["y"], args={"values": [0.5] * 9, "names": ["a"] * 9})
    dump = print_net(Net([eight, nine]), "init_net")
    assert dump.splitlines()[1:] == [
        "  %0 Fill() -> x@1 {shape=[0, 1, 2, 3, 4, 5, 6, 7]}",
        "  %1 Fill() -> y@1 {names=['a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', ... (9 items)], "
        "values=[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, ... (9 items)]}",
    ]


def test_nested_net_lists_and_empty_args() -> None:
    op = Op("X", [], [], args=[Argument("e"), Argument("nets", nets=(Net(name="a"), Net()))])
    assert print_net(Net([op])) == (
        "net net\n  %0 X() -> () {e=[], nets=[<net a>, <net>]}\n    net nets 'a'\n    net nets"
    )


def test_format_device() -> None:
    assert format_device(DeviceOption()) == "CPU"
    assert format_device(DeviceOption(device_type=1, device_id=1)) == "CUDA:1"
    assert format_device(DeviceOption(device_type=6, device_id=0)) == "HIP:0"
    assert format_device(DeviceOption(device_type=42)) == "DEVICE42"
    full = DeviceOption(
        device_type=1, device_id=1, node_name="n", numa_node_id=2, extra_info=("k",)
    )
    assert format_device(full) == "CUDA:1,node='n',numa=2,extra='k'"


def test_print_model() -> None:
    init = Net([Op("ConstantFill", [], ["w"], args={"value": 1.0})], [], ["w"])
    predict = Net([Op("FC", ["x", "w"], ["y"])], ["x", "w"], ["y"])
    assert print_model(Model(predict, init)) == (
        "net init_net\n"
        "  external_output: w@1\n"
        "  %0 ConstantFill() -> w@1 {value=1.0}\n"
        "net predict_net\n"
        "  external_input: x@0 w@0\n"
        "  external_output: y@1\n"
        "  %0 FC(x@0, w@0) -> y@1\n"
    )
    assert print_model(Model(predict)).startswith("net predict_net\n")


def test_ssa_table() -> None:
    assert print_ssa_table(_small_net()) == (
        "blob@version  written by  read by\n"
        "cond@0  input  %2\n"
        "data@0  input  %0\n"
        "w@0  input  %0\n"
        "y@1  %0  %1\n"
        "y@2  %1  %2\n"
        "y@3  %2  %3\n"
        "z@2  %3  -\n"
    )


def test_ssa_table_undeclared_input() -> None:
    net = Net([Op("Add", ["x", "u"], ["y"])], ["x"], ["y"])
    assert print_ssa_table(net).splitlines()[1:] == [
        "u@0  input  %0",
        "x@0  input  %0",
        "y@1  %0  -",
    ]


def test_an_optional_input_left_out_prints_as_a_dash_and_is_no_blob() -> None:
    """ONNX's empty name (an optional input or output left out) is no value: the dump shows
    ``-`` where it stands, and the SSA table lists no row for it."""
    net = Net(
        [Op("Clip", ["x", "", "m"], ["y"]), Op("Dropout", ["y"], ["z", ""])],
        ["x", "m"],
        ["z"],
        dialect="onnx",
    )
    dump = print_net(net)
    assert "Clip(x@0, -, m@0) -> y@1" in dump
    assert "-> z@1, -" in dump
    assert not [row for row in print_ssa_table(net).splitlines() if row.startswith("@")]

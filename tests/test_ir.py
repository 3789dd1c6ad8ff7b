"""The IR: lossless NetDef conversion, immutable ops, revisions, nested nets, transactions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from graphtools.ir import Argument, DeviceOption, Model, Net, Op, make_arg
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_net
from graphtools.serde.codec import (
    argument_from_proto,
    argument_to_proto,
    model_from_netdefs,
    net_from_netdef,
    net_to_netdef,
    op_to_proto,
)

MASK_RCNN_FP32 = "caffe2-models/mask_rcnn_2go/2018-12/fp32/model.pb"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            return bytes(out) + bytes([low])
        out.append(low | 0x80)


def _full_netdef() -> caffe2_pb2.NetDef:
    """A NetDef using every field the IR models, with arguments in a non-sorted order."""
    netdef = caffe2_pb2.NetDef(name="full", type="dag", num_workers=4)
    netdef.device_option.device_type = 1
    netdef.device_option.device_id = 0
    netdef.arg.add(name="net_arg", i=3)
    netdef.partition_info.add(name="p0", device_id=[0, 1])
    conv = netdef.op.add(type="Conv", input=["x", "w"], output=["y"], name="conv", engine="CUDNN")
    conv.arg.add(name="stride", i=2)
    conv.arg.add(name="kernel", ints=[3, 3])
    conv.arg.add(name="order", s=b"NCHW")
    conv.arg.add(name="scale", f=0.25)
    conv.device_option.device_type = 0
    conv.device_option.random_seed = 7
    conv.control_input.append("w")
    conv.debug_info = "made in a test"
    conv.is_gradient_op = False
    conv.domain = "caffe2"
    conv.op_version = 2
    netdef.op.add(type="Relu", input=["y"], output=["y"])
    netdef.external_input.extend(["x", "w"])
    netdef.external_output.append("y")
    return netdef


@pytest.fixture
def mask_rcnn(real_fixtures: Path) -> tuple[Net, bytes]:
    path = real_fixtures / MASK_RCNN_FP32
    return net_from_netdef(load_net(path)), path.read_bytes()


# -- conversion -----------------------------------------------------------------------------


def test_round_trip_keeps_every_field() -> None:
    netdef = _full_netdef()
    data = netdef.SerializeToString()
    net = net_from_netdef(netdef)
    assert net_to_netdef(net).SerializeToString() == data
    conv = net[0]
    assert conv.name == "conv"
    assert conv.engine == "CUDNN"
    assert conv.control_inputs == ("w",)
    assert conv.debug_info == "made in a test"
    assert conv.is_gradient_op is False
    assert (conv.domain, conv.op_version) == ("caffe2", 2)
    assert conv.device_option == DeviceOption(device_type=0, random_seed=7)
    assert [a.name for a in conv.args] == ["stride", "kernel", "order", "scale"]
    assert net_to_netdef(net).SerializeToString() == data  # decoding changed nothing
    assert (net.name, net.net_type) == ("full", "dag")
    assert net.device_option == DeviceOption(device_type=1, device_id=0)
    assert [(a.name, a.value) for a in net.args] == [("net_arg", 3)]


def test_absent_fields_read_none_and_stay_absent() -> None:
    netdef = caffe2_pb2.NetDef()
    netdef.op.add(type="Relu", input=["x"], output=["y"])
    net = net_from_netdef(netdef)
    op = net[0]
    assert (op.name, op.engine, op.device_option, op.is_gradient_op) == (None, None, None, None)
    assert (net.name, net.net_type, net.device_option) == (None, None, None)
    net.replace_op(0, op.replace(engine="X").replace(engine=None))
    assert net_to_netdef(net) == netdef
    assert not net_to_netdef(net).op[0].HasField("engine")


def test_net_built_in_python() -> None:
    net = Net(
        [Op("FC", ["x", "w", "b"], ["y"], args={"axis": 1}, engine="E", name="fc")],
        ["x", "w", "b"],
        ["y"],
        name="py",
    )
    expected = caffe2_pb2.NetDef(name="py", external_input=["x", "w", "b"], external_output=["y"])
    op = expected.op.add(type="FC", input=["x", "w", "b"], output=["y"], name="fc", engine="E")
    op.arg.add(name="axis", i=1)
    assert net_to_netdef(net) == expected
    assert net_to_netdef(net_from_netdef(net_to_netdef(net))) == expected


def test_unknown_op_fields_survive_rewrites() -> None:
    op_bytes = caffe2_pb2.OperatorDef(type="Relu", input=["x"], output=["y"]).SerializeToString()
    op_bytes += _varint(99 << 3) + _varint(7)
    data = caffe2_pb2.NetDef(name="n").SerializeToString()
    data += _varint(2 << 3 | 2) + _varint(len(op_bytes)) + op_bytes
    netdef = caffe2_pb2.NetDef.FromString(data)
    net = net_from_netdef(netdef)
    assert net_to_netdef(net).SerializeToString() == data
    net.replace_op(0, net[0].replace(inputs=["z"]))
    rewritten = net_to_netdef(net).SerializeToString()
    assert rewritten.endswith(_varint(99 << 3) + _varint(7))
    assert list(caffe2_pb2.NetDef.FromString(rewritten).op[0].input) == ["z"]


def test_unknown_net_fields_survive() -> None:
    data = caffe2_pb2.NetDef(name="n").SerializeToString() + _varint(98 << 3) + _varint(5)
    net = net_from_netdef(caffe2_pb2.NetDef.FromString(data))
    assert net_to_netdef(net).SerializeToString() == data


def test_copy_is_independent(mask_rcnn: tuple[Net, bytes]) -> None:
    net, data = mask_rcnn
    twin = net.copy()
    assert twin.revision == 0
    assert net_to_netdef(twin).SerializeToString() == data
    twin.remove_ops([0])
    _, nested = next(n for op in twin if op.type == "If" for n in op.nested_nets() if len(n[1]))
    nested.remove_ops([0])
    assert net_to_netdef(net).SerializeToString() == data


# -- immutable ops --------------------------------------------------------------------------


def test_replace_changes_only_what_is_asked() -> None:
    net = net_from_netdef(_full_netdef())
    conv = net[0]
    renamed = conv.replace(type="ConvRelu", inputs=["a", "b"], outputs=("c",))
    assert (conv.type, conv.inputs, conv.outputs) == ("Conv", ("x", "w"), ("y",))
    assert (renamed.type, renamed.inputs, renamed.outputs) == ("ConvRelu", ("a", "b"), ("c",))
    expected = caffe2_pb2.OperatorDef()
    expected.CopyFrom(_full_netdef().op[0])
    expected.type = "ConvRelu"
    expected.input[:] = ["a", "b"]
    expected.output[:] = ["c"]
    assert op_to_proto(renamed) == expected
    assert op_to_proto(conv) == _full_netdef().op[0]
    with pytest.raises(TypeError, match="no field 'colour'"):
        conv.replace(colour="red")
    assert conv.replace(args={"k": 1}).args == (Argument("k", i=1),)
    assert op_to_proto(conv.replace(device_option=None)).HasField("device_option") is False


def test_with_arg_and_without_arg() -> None:
    op = Op("Conv", ["x"], ["y"], args=[Argument("k", i=1), Argument("s", i=2), Argument("k", i=3)])
    assert op.arg("k") == 1  # first wins, as in Caffe2
    assert op.arg("missing", 9) == 9
    assert op.has_arg("s") and not op.has_arg("missing")
    replaced = op.with_arg("s", 5)
    assert [(a.name, a.value) for a in replaced.args] == [("k", 1), ("s", 5), ("k", 3)]
    appended = op.with_arg("pad", [1, 1])
    assert [a.name for a in appended.args] == ["k", "s", "k", "pad"]
    assert appended.arg("pad") == (1, 1)
    assert [a.name for a in op.without_arg("k").args] == ["s"]
    assert op.without_arg("missing") == op
    assert [(a.name, a.value) for a in op.args] == [("k", 1), ("s", 2), ("k", 3)]


def test_loaded_op_with_arg_keeps_other_fields() -> None:
    net = net_from_netdef(_full_netdef())
    changed = net[0].with_arg("stride", 1)
    proto = op_to_proto(changed)
    assert [a.name for a in proto.arg] == ["stride", "kernel", "order", "scale"]
    assert proto.arg[0].i == 1
    assert (proto.engine, proto.name, proto.debug_info) == ("CUDNN", "conv", "made in a test")


def test_bare_string_is_not_split_into_letters() -> None:
    for build in (
        lambda: Op("Relu", "data", "y").inputs,
        lambda: Op("Relu", ["x"], ["y"]).replace(inputs="data").inputs,
        lambda: Net([], "data").external_inputs,
    ):
        try:
            names = build()
        except TypeError:
            continue  # refusing is fine too
        assert tuple(names) == ("data",)


def test_op_equality_is_by_content() -> None:
    assert Op("Relu", ["x"], ["y"]) == Op("Relu", ["x"], ["y"])
    assert Op("Relu", ["x"], ["y"]) != Op("Relu", ["x"], ["z"])
    loaded = net_from_netdef(_full_netdef())[1]
    assert loaded == Op("Relu", ["y"], ["y"])
    with pytest.raises(TypeError):
        hash(loaded)


def test_ops_view_is_read_only() -> None:
    net = Net([Op("Relu", ["x"], ["y"])])
    assert not hasattr(net.ops, "append")
    with pytest.raises(TypeError):
        net.ops[0] = Op("Sigmoid", ["x"], ["y"])  # type: ignore[index]
    assert len(net.ops) == len(net) == 1
    assert list(net.ops) == list(net) == [net[0]]


# -- make_arg -------------------------------------------------------------------------------


def test_make_arg_conversions() -> None:
    tensor = caffe2_pb2.TensorProto(dims=[2])
    inner = Net(name="inner")
    assert make_arg("a", True) == Argument("a", i=1)
    assert make_arg("a", 3) == Argument("a", i=3)
    assert make_arg("a", 0.5) == Argument("a", f=0.5)
    assert make_arg("a", "NCHW") == Argument("a", s=b"NCHW")
    assert make_arg("a", b"\x00\x01") == Argument("a", s=b"\x00\x01")
    assert make_arg("a", tensor).t is tensor
    assert make_arg("a", inner).n is inner
    assert make_arg("a", [1, 2, True]) == Argument("a", ints=(1, 2, 1))
    assert make_arg("a", (0.5, 1.5)) == Argument("a", floats=(0.5, 1.5))
    assert make_arg("a", ["x", b"y"]) == Argument("a", strings=(b"x", b"y"))
    assert make_arg("a", [inner]).nets == (inner,)
    empty = make_arg("a", [])
    assert empty == Argument("a")
    assert empty.value is None
    with pytest.raises(TypeError):
        make_arg("a", [object()])


def test_argument_value_and_proto() -> None:
    for arg in (
        Argument("i", i=0),
        Argument("f", f=0.0),
        Argument("s", s=b""),
        Argument("ints", ints=(1, 2)),
        Argument("floats", floats=(0.5,)),
        Argument("strings", strings=(b"a",)),
    ):
        assert argument_from_proto(argument_to_proto(arg)) == arg
    assert Argument("i", i=0).value == 0
    assert Argument("s", s=b"").value == b""
    assert Argument("ints", ints=(1, 2)).value == (1, 2)
    assert Argument("none").value is None


def test_make_arg_mixed_numbers_are_not_truncated() -> None:
    try:
        arg = make_arg("a", [1, 2.5])
    except (TypeError, ValueError):
        return  # refusing, as Caffe2 does, is fine too
    assert arg.floats == (1.0, 2.5)


@pytest.mark.parametrize(
    ("value", "check"),
    [
        (np.float32(0.5), lambda a: a.f == 0.5),
        (np.int64(3), lambda a: a.i == 3),
        (np.array([1, 2]), lambda a: a.ints == (1, 2)),
        (np.array([0.5, 1.5], dtype=np.float32), lambda a: a.floats == (0.5, 1.5)),
        ([caffe2_pb2.TensorProto(dims=[1])], lambda a: len(a.tensors) == 1),
    ],
    ids=["np.float32", "np.int64", "int-array", "float32-array", "tensor-list"],
)
def test_make_arg_like_caffe2(value: object, check: Callable[[Argument], bool]) -> None:
    assert check(make_arg("a", value))


# -- revisions ------------------------------------------------------------------------------


MUTATIONS: dict[str, Callable[[Net], None]] = {
    "append_op": lambda n: n.append_op(Op("Relu", ["y"], ["z"])),
    "insert_op": lambda n: n.insert_op(0, Op("Relu", ["x"], ["x"])),
    "replace_op": lambda n: n.replace_op(0, n[0].replace(type="Sigmoid")),
    "set_ops": lambda n: n.set_ops(list(n)[::-1]),
    "remove_ops": lambda n: n.remove_ops([0]),
    "set_external_inputs": lambda n: n.set_external_inputs(["x", "extra"]),
    "set_external_outputs": lambda n: n.set_external_outputs([]),
    "set_device_option": lambda n: n.set_device_option(DeviceOption(device_type=1)),
    "set_name": lambda n: n.set_name("renamed"),
}


@pytest.mark.parametrize("method", MUTATIONS)
def test_every_mutation_bumps_revision(method: str) -> None:
    net = net_from_netdef(_full_netdef())
    before = net_to_netdef(net)
    view = net.ssa()
    MUTATIONS[method](net)
    assert net.revision == 1
    assert net_to_netdef(net) != before
    assert net.ssa() is not view
    model = Model(net_from_netdef(_full_netdef()), net_from_netdef(_full_netdef()))
    revision = model.revision
    assert model.init_net is not None
    MUTATIONS[method](model.init_net)
    assert model.revision != revision


def test_no_op_removal_keeps_revision() -> None:
    net = net_from_netdef(_full_netdef())
    net.remove_ops([])
    assert net.revision == 0


def test_ssa_view_cached_per_revision() -> None:
    net = net_from_netdef(_full_netdef())
    view = net.ssa()
    assert net.ssa() is view
    assert view.revision == 0
    net.set_external_outputs(["y"])
    fresh = net.ssa()
    assert fresh is not view
    assert net.ssa() is fresh
    assert fresh.revision == 1


# -- nested nets ----------------------------------------------------------------------------


def _if_op(net: Net) -> tuple[int, Op]:
    return next((i, op) for i, op in enumerate(net) if op.type == "If")


def test_nested_net_mutation_reaches_the_outer_net(mask_rcnn: tuple[Net, bytes]) -> None:
    net, data = mask_rcnn
    index, if_op = _if_op(net)
    nested = dict(if_op.nested_nets())
    assert sorted(nested) == ["else_net", "then_net"]
    else_net = nested["else_net"]
    assert len(else_net) == 27
    state = net.snapshot()
    outer_view = net.ssa()

    else_net.replace_op(0, else_net[0].replace(type="RoIAlignRotated"))
    assert else_net.revision == 1
    assert net.revision == 1
    assert net.ssa() is not outer_view
    written = next(a for a in net_to_netdef(net).op[index].arg if a.name == "else_net")
    assert written.n.op[0].type == "RoIAlignRotated"
    assert len(written.n.op) == 27

    else_net.remove_ops([1, 2])
    assert net.revision == 2
    written = next(a for a in net_to_netdef(net).op[index].arg if a.name == "else_net")
    assert len(written.n.op) == 25

    net.restore(state)
    assert (net.revision, else_net.revision) == (0, 0)
    assert len(else_net) == 27
    assert net_to_netdef(net).SerializeToString() == data


def test_nested_net_of_a_python_built_op_bumps_outer() -> None:
    inner = Net([Op("Relu", ["x"], ["x"])], ["x"], ["x"])
    outer = Net([Op("If", ["c"], [], args={"then_net": inner})], ["c"])
    inner.append_op(Op("Relu", ["x"], ["x"]))
    assert len(net_to_netdef(outer).op[0].arg[0].n.op) == 2  # the change is written ...
    assert outer.revision == 1  # ... but the outer net must also know it changed


def test_snapshot_restore_is_byte_identical(mask_rcnn: tuple[Net, bytes]) -> None:
    net, data = mask_rcnn
    state = net.snapshot()
    net.remove_ops(range(0, len(net), 2))
    net.insert_op(0, Op("Relu", ["data"], ["data"]))
    net.set_external_inputs(["data"])
    net.set_external_outputs(["nothing"])
    net.set_name("changed")
    net.set_device_option(DeviceOption(device_type=1, device_id=1))
    net.restore(state)
    assert net.revision == 0
    assert net_to_netdef(net).SerializeToString() == data


def test_model_snapshot_restore(real_fixtures: Path) -> None:
    folder = real_fixtures / "HungMingWu-pytorch_caffe2_cpp_binding"
    model = model_from_netdefs(
        load_net(folder / "predict_net.pb"), load_net(folder / "init_net.pb")
    )
    assert model.init_net is not None
    assert model.nets() == [model.init_net, model.predict_net]
    state, revision = model.snapshot(), model.revision
    model.predict_net.remove_ops([0])
    model.init_net.set_ops([])
    model.restore(state)
    assert model.revision == revision
    assert (model.predict_net.revision, model.init_net.revision) == (0, 0)
    assert (
        net_to_netdef(model.predict_net).SerializeToString()
        == (folder / "predict_net.pb").read_bytes()
    )
    assert (
        net_to_netdef(model.init_net).SerializeToString() == (folder / "init_net.pb").read_bytes()
    )


def test_ssa_view_not_stale_after_restore() -> None:
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    state = net.snapshot()
    net.append_op(Op("Relu", ["y"], ["z"]))
    net.ssa()  # cached at revision 1
    net.restore(state)
    net.append_op(Op("Sigmoid", ["y"], ["y"]))  # revision 1 again, different ops
    assert net.ssa().ssa[1] == ([("y", 1)], [("y", 2)])


def test_restore_twice_from_one_snapshot() -> None:
    net = Net(name="a")
    state = net.snapshot()
    net.restore(state)
    net.set_name("b")
    net.restore(state)
    assert net.name == "a"


def test_op_device_falls_back_to_net() -> None:
    net = net_from_netdef(_full_netdef())
    assert net.op_device(net[0]) == DeviceOption(device_type=0, random_seed=7)
    assert net.op_device(net[1]) == DeviceOption(device_type=1, device_id=0)
    assert DeviceOption().type == 0
    net.set_device_option(None)
    assert net.op_device(net[1]) is None


def test_edit_ops_drops_and_rewires_in_one_revision() -> None:
    net = Net(
        [Op("Copy", ["a"], ["b"]), Op("Relu", ["b"], ["c"]), Op("Sigmoid", ["b"], ["d"])],
        ["a"],
        ["c", "d"],
    )
    revision = net.revision
    net.edit_ops({0}, {1: ["a"], 2: ["a"]})
    assert [(op.type, op.inputs) for op in net] == [("Relu", ("a",)), ("Sigmoid", ("a",))]
    assert net.revision == revision + 1
    net.edit_ops()
    assert net.revision == revision + 1


def test_control_and_nested_flags_match_the_ops() -> None:
    inner = Net([Op("Relu", ["a"], ["b"])], ["a"], ["b"])
    netdef = net_to_netdef(
        Net(
            [
                Op("Relu", ["x"], ["y"]),
                Op("Sigmoid", ["y"], ["z"], control_inputs=["x"]),
                Op("If", ["c"], [], args={"then_net": inner}),
            ],
            ["x", "c"],
            ["z"],
        )
    )
    loaded = net_from_netdef(netdef)
    assert [op.has_control_inputs() for op in loaded] == [False, True, False]
    assert [op.has_nested_nets() for op in loaded] == [False, False, True]
    plain = net_from_netdef(net_to_netdef(Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])))
    assert not plain[0].has_control_inputs() and not plain[0].has_nested_nets()
    assert plain[0].replace(control_inputs=["x"]).has_control_inputs()


def test_model_restore_puts_back_reassigned_nets() -> None:
    predict, init = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"]), Net([], [], [])
    model = Model(predict, init)
    state, revision = model.snapshot(), model.revision
    model.predict_net = Net([], [], [])  # a new net object at the same revision number
    model.init_net = None
    assert model.revision != revision
    model.restore(state)
    assert model.predict_net is predict and model.init_net is init
    assert model.revision == revision


def test_a_failed_op_install_leaves_the_net_untouched() -> None:
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    view = net.ssa()
    for install in (
        lambda: net.append_op(caffe2_pb2.OperatorDef(type="Relu")),  # type: ignore[arg-type]
        lambda: net.set_ops([net[0], "Relu"]),  # type: ignore[list-item]
    ):
        with pytest.raises(TypeError, match="Op values"):
            install()
    assert len(net) == 1 and net.revision == 0 and net.ssa() is view


def test_restore_readopts_nested_nets() -> None:
    inner = Net([Op("Relu", ["a"], ["b"])], ["a"], ["b"])
    holder = Op("If", ["c"], [], args={"then_net": inner})
    predict, init = Net([holder], ["c", "a"], []), Net([], [], [])
    state = init.snapshot()
    init.append_op(holder)  # the same op in a second net, then rolled back
    init.restore(state)
    predict.restore(predict.snapshot())
    before = predict.revision
    inner.append_op(Op("Relu", ["b"], ["d"]))
    assert predict.revision == before + 1


def test_remove_ops_refuses_an_index_out_of_range_before_touching_the_net() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Relu", ["y"], ["z"])], ["x"], ["z"])
    for bad in (2, -1):
        with pytest.raises(IndexError, match=f"op index {bad} out of range"):
            net.remove_ops([0, bad])
        assert len(net) == 2 and net.revision == 0
    net.remove_ops([0])
    assert [op.outputs for op in net] == [("z",)]


def test_written_names_is_cached_per_revision() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Split", ["y"], ["a", "b"])], ["x"], ["a"])
    assert net.written_names() == {"y", "a", "b"}
    assert net.written_names() is net.written_names()
    net.remove_ops([1])
    assert net.written_names() == {"y"}


def test_written_among_answers_from_a_scan_or_from_the_cached_set() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Split", ["y"], ["a", "b"])], ["x"], ["a"])
    asked = ["x", "a", "b", "nowhere"]
    assert net.written_among(asked) == {"a", "b"}  # scanned: no set of every name built
    assert "written_names" not in net._memo
    net.written_names()
    assert net.written_among(asked) == {"a", "b"}  # from the set now that it is built
    net.remove_ops([1])
    assert net.written_among(asked) == set()  # the set of the old revision is not used
    assert net.written_among([]) == set()


def test_snapshot_shares_the_op_list_until_an_in_place_edit() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Tanh", ["y"], ["z"])], ["x"], ["z"])
    state = net.snapshot()
    net.replace_op(0, Op("Sigmoid", ["x"], ["y"]))
    net.append_op(Op("Relu", ["z"], ["w"]))
    net.insert_op(0, Op("Copy", ["x"], ["x2"]))
    assert [op.type for op in state.ops] == ["Relu", "Tanh"]  # the snapshot did not move
    net.restore(state)
    assert [op.type for op in net] == ["Relu", "Tanh"]
    net.replace_op(1, Op("Sigmoid", ["y"], ["z"]))  # restoring shares the state's list again
    net.restore(state)
    assert [op.type for op in net] == ["Relu", "Tanh"]


def test_removing_ops_keeps_knowing_that_no_op_holds_nets(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphtools.ir as ir_module

    net = Net([Op("Relu", ["x"], ["y"]), Op("Tanh", ["y"], ["z"])], ["x"], ["z"])
    assert net.nested_op_indices() == frozenset() == net.control_op_indices()

    def fail(_: Net) -> frozenset[int]:
        raise AssertionError("recomputed")

    monkeypatch.setattr(ir_module, "_nested_op_indices", fail)
    monkeypatch.setattr(ir_module, "_control_op_indices", fail)
    net.remove_ops([0])
    net.edit_ops((), {0: ["x"]})
    assert net.nested_op_indices() == frozenset() == net.control_op_indices()


def test_edit_ops_refuses_an_op_index_out_of_range_before_touching_the_net() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Tanh", ["y"], ["z"])], ["x"], ["z"])
    net.ssa()
    for bad in (-1, 2):
        with pytest.raises(IndexError, match=f"op index {bad} out of range"):
            net.edit_ops((), {bad: ["x"]})
    assert net.revision == 0 and [op.inputs for op in net] == [("x",), ("y",)]

"""Loading a NetDef into the IR (``graphtools.serde.codec.net_from_netdef``): the ops it builds
behave like ops built field by field, keep their lazily decoded fields and probe flags, and
re-serialise unchanged."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.ir import DeviceOption, Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import (
    argument_from_proto,
    net_from_netdef,
    net_to_netdef,
    op_from_proto,
    op_to_proto,
    serialize_net,
)

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)

_OPTIONAL_FIELDS = ("name", "engine", "is_gradient_op", "debug_info", "domain", "op_version")


def _load(netdef: caffe2_pb2.NetDef) -> tuple[Net, bytes]:
    """``netdef`` loaded the way ``serde`` loads a binary file: parsed, bytes passed along."""
    data = netdef.SerializeToString()
    return net_from_netdef(caffe2_pb2.NetDef.FromString(data), serialized=data), data


def _decoded(op: Op) -> bool:
    """Whether ``op``'s message was decoded from its loaded bytes (and is now kept)."""
    found = op.source()
    assert found is not None
    source, index = found
    return bool(source.decoded(index))  # type: ignore[attr-defined]


def _field_by_field(msg: caffe2_pb2.OperatorDef) -> Op:
    """The op built from ``msg``'s fields one by one, without keeping the message."""
    optional = {name: getattr(msg, name) for name in _OPTIONAL_FIELDS if msg.HasField(name)}
    return Op(
        msg.type,
        list(msg.input),
        list(msg.output),
        args=[argument_from_proto(a) for a in msg.arg],
        device_option=(
            DeviceOption.from_proto(msg.device_option) if msg.HasField("device_option") else None
        ),
        control_inputs=list(msg.control_input),
        **optional,
    )


def _mixed_netdef() -> caffe2_pb2.NetDef:
    """Ops with zero, one and many inputs/outputs, every lazy field, odd names, no type."""
    netdef = caffe2_pb2.NetDef(name="mixed", type="dag")
    netdef.arg.add(name="net_arg", i=1)
    conv = netdef.op.add(type="Conv", input=["x", "w", "b"], output=["y"], name="conv")
    conv.engine = "CUDNN"
    conv.arg.add(name="kernel", ints=[3, 3])
    conv.arg.add(name="order", s=b"NCHW")
    conv.device_option.device_type = 1
    conv.device_option.device_id = 2
    conv.is_gradient_op = True
    conv.debug_info = "dbg"
    conv.domain = "caffe2"
    conv.op_version = 3
    netdef.op.add(type="ConstantFill", output=["c"])
    netdef.op.add(type="Sum", input=["y", "c", "y", "c", "y"], output=["s", "t"])
    netdef.op.add(input=["s"], output=["u"])  # no type
    netdef.op.add(type="Nothing")  # no inputs, no outputs
    netdef.op.add(type="Relu", input=["", "\x00", "\u00e9\u4e2d"], output=[""])
    netdef.op.add(type="Sink", input=["t"], control_input=["u"])
    netdef.external_input.extend(["x", "w", "b"])
    netdef.external_output.extend(["s", "t"])
    return netdef


def _assert_same_as_fields(net: Net, netdef: caffe2_pb2.NetDef) -> None:
    assert len(net) == len(netdef.op)
    for op, msg in zip(net, netdef.op, strict=True):
        assert op.type == msg.type
        assert type(op.inputs) is tuple and op.inputs == tuple(msg.input)
        assert type(op.outputs) is tuple and op.outputs == tuple(msg.output)
        assert all(type(name) is str for name in op.inputs + op.outputs)
        built = _field_by_field(msg)
        if not msg.HasField("type"):  # a built op always has a type: compare the rest
            op, built = op.replace(type="T"), built.replace(type="T")
        assert op == built


# -- values -------------------------------------------------------------------------------------


def test_loaded_ops_equal_ops_built_field_by_field() -> None:
    netdef = _mixed_netdef()
    net, _ = _load(netdef)
    _assert_same_as_fields(net, netdef)
    assert [op.type for op in net] == ["Conv", "ConstantFill", "Sum", "", "Nothing", "Relu", "Sink"]
    assert net[2].inputs == ("y", "c", "y", "c", "y") and net[2].outputs == ("s", "t")
    assert net[4].inputs == () and net[4].outputs == ()
    assert net[5].inputs == ("", "\x00", "\u00e9\u4e2d")


def test_ops_of_one_type_share_one_type_string() -> None:
    # A million-op net holds a handful of op types: one string each, not one per op.
    netdef = caffe2_pb2.NetDef()
    for index in range(3):
        netdef.op.add(type="Relu", input=[f"x{index}"], output=[f"x{index + 1}"])
    net, _ = _load(netdef)
    assert net[0].type == "Relu" and net[0].type is net[1].type is net[2].type


def test_op_from_proto_wraps_one_message() -> None:
    netdef = _nested_netdef()
    ops = [op_from_proto(msg) for msg in netdef.op]
    assert [(op.type, op.inputs, op.outputs) for op in ops] == [
        (m.type, tuple(m.input), tuple(m.output)) for m in netdef.op
    ]
    assert all(op_to_proto(op) is msg for op, msg in zip(ops, netdef.op, strict=True))
    assert [op.has_control_inputs() for op in ops] == [False, True, False, False]
    assert [op.has_nested_nets() for op in ops] == [False, False, True, True]


def test_text_and_binary_loads_build_the_same_ops() -> None:
    netdef = _mixed_netdef()
    binary, _ = _load(netdef)
    plain = net_from_netdef(netdef)  # no bytes: the loader serialises the message itself
    assert [(op.type, op.inputs, op.outputs) for op in plain] == [
        (op.type, op.inputs, op.outputs) for op in binary
    ]
    assert list(plain) == list(binary)


def test_lazy_fields_are_decoded_on_access() -> None:
    net, _ = _load(_mixed_netdef())
    conv = net[0]
    assert conv._lazy is None  # nothing beyond type/inputs/outputs is decoded at load
    assert conv.name == "conv"
    assert conv.engine == "CUDNN"
    assert conv.device_option == DeviceOption(device_type=1, device_id=2)
    assert [(a.name, a.value) for a in conv.args] == [("kernel", (3, 3)), ("order", b"NCHW")]
    assert conv.is_gradient_op is True
    assert conv.debug_info == "dbg"
    assert conv.domain == "caffe2"
    assert conv.op_version == 3
    assert conv.control_inputs == ()
    relu = net[5]
    assert relu.name is None and relu.engine is None and relu.device_option is None
    assert relu.args == () and relu.op_version is None and relu.is_gradient_op is None
    assert net[6].control_inputs == ("u",)


def test_a_loaded_net_keeps_no_reference_to_the_parsed_message() -> None:
    # Loaders hand over the message they parsed; the net decodes its ops' fields from the
    # bytes instead, so that message (most of a big net's memory) can be freed after loading.
    expected = _mixed_netdef()
    data = expected.SerializeToString()
    parsed = caffe2_pb2.NetDef.FromString(data)
    net = net_from_netdef(parsed, serialized=data)
    parsed.Clear()
    _assert_same_as_fields(net, expected)
    assert net_to_netdef(net) == expected
    assert serialize_net(net) == data


def test_copying_a_loaded_net_decodes_none_of_its_ops() -> None:
    # to_netdef() and copy() of a loaded net parse its saved bytes once instead of decoding
    # (and keeping) every op's message: on a big net that would triple its memory.
    expected = _mixed_netdef()
    net, data = _load(expected)
    assert net_to_netdef(net) == expected
    copy = net.copy()
    assert net_to_netdef(copy) == expected and serialize_net(copy) == data
    assert not any(map(_decoded, (*net, *copy)))
    net[0].args  # noqa: B018  (a lazy field decodes that op only)
    assert [_decoded(op) for op in net] == [True] + [False] * (len(net) - 1)
    assert net_to_netdef(net) == expected


def test_last_type_field_wins_like_protobuf() -> None:
    # An op whose bytes hold `type` twice (merged messages): protobuf keeps the last one.
    op_bytes = (
        caffe2_pb2.OperatorDef(type="First", input=["a"]).SerializeToString()
        + caffe2_pb2.OperatorDef(type="Second", output=["b"]).SerializeToString()
    )
    data = b"\x12" + bytes([len(op_bytes)]) + op_bytes
    netdef = caffe2_pb2.NetDef.FromString(data)
    net = net_from_netdef(netdef, serialized=data)
    assert (net[0].type, net[0].inputs, net[0].outputs) == ("Second", ("a",), ("b",))
    # Saved as loaded: the unchanged op keeps its bytes, which parse to the same message.
    assert serialize_net(net) == data
    assert caffe2_pb2.NetDef.FromString(serialize_net(net)) == netdef == net_to_netdef(net)


# -- probe flags, nesting, parents -----------------------------------------------------------------


def _nested_netdef() -> caffe2_pb2.NetDef:
    inner = Net([Op("Relu", ["a"], ["b"])], ["a"], ["b"])
    return net_to_netdef(
        Net(
            [
                Op("Relu", ["x"], ["y"]),
                Op("Sigmoid", ["y"], ["z"], control_inputs=["x"]),
                Op("If", ["c"], [], args={"then_net": inner}),
                Op("While", ["c"], [], args={"loop_net": inner, "nets": [inner, inner]}),
            ],
            ["x", "c"],
            ["z"],
        )
    )


@pytest.mark.parametrize("with_bytes", [True, False])
def test_nested_nets_and_control_inputs_are_detected(with_bytes: bool) -> None:
    netdef = _nested_netdef()
    net = _load(netdef)[0] if with_bytes else net_from_netdef(netdef)
    assert [op.has_control_inputs() for op in net] == [False, True, False, False]
    assert [op.has_nested_nets() for op in net] == [False, False, True, True]
    assert net.nested_op_indices() == frozenset({2, 3})
    assert [len(op.nested_nets()) for op in net] == [0, 0, 1, 3]


def test_flags_of_a_net_without_nesting_or_control_inputs() -> None:
    netdef = caffe2_pb2.NetDef()
    # Length bytes 0x42 and 0x4a (the tags of the probed fields) must not fool the loader.
    netdef.op.add(type="Relu", input=["n" * 0x42], output=["o" * 0x4A])
    netdef.op.add(type="Sum", input=["x", "y"], output=["z"]).arg.add(name="k" * 0x42, i=1)
    net, data = _load(netdef)
    assert not any(op.has_nested_nets() or op.has_control_inputs() for op in net)
    assert serialize_net(net) == data


def test_only_control_inputs_or_only_nested_nets() -> None:
    control = caffe2_pb2.NetDef()
    control.op.add(type="Relu", input=["x"], output=["y"])
    control.op.add(type="Relu", input=["y"], output=["z"], control_input=["x"])
    net, _ = _load(control)
    assert [op.has_control_inputs() for op in net] == [False, True]
    assert [op.has_nested_nets() for op in net] == [False, False]
    nested = caffe2_pb2.NetDef()
    nested.op.add(type="Relu", input=["x"], output=["y"])
    nested.op.add(type="If", input=["c"]).arg.add(name="then_net").n.op.add(type="Relu")
    net, _ = _load(nested)
    assert [op.has_control_inputs() for op in net] == [False, False]
    assert [op.has_nested_nets() for op in net] == [False, True]


def test_nested_net_edits_reach_the_loaded_net() -> None:
    net, _ = _load(_nested_netdef())
    ((_, inner),) = net[2].nested_nets()
    revision = net.revision
    inner.append_op(Op("Relu", ["b"], ["c"]))
    assert net.revision == revision + 1
    assert net_to_netdef(net).op[2].arg[0].n.op[-1].type == "Relu"


# -- re-serialisation and edits ------------------------------------------------------------------


def test_unchanged_nets_reserialise_byte_identically() -> None:
    predict, init = synth.make_synthetic_pair(500, seed=3)
    for netdef in (predict, init, _mixed_netdef(), _nested_netdef()):
        net, data = _load(netdef)
        assert serialize_net(net) == data
        assert net_to_netdef(net).SerializeToString() == data
        _assert_same_as_fields(net, netdef)


def test_unknown_op_fields_survive() -> None:
    op_bytes = caffe2_pb2.OperatorDef(type="Relu", input=["x"], output=["y"]).SerializeToString()
    op_bytes += b"\xf8\x06\x07"  # field 111, varint 7: not in the schema
    data = b"\x12" + bytes([len(op_bytes)]) + op_bytes + b"\x3a\x01x"
    netdef = caffe2_pb2.NetDef.FromString(data)
    net = net_from_netdef(netdef, serialized=data)
    assert (net[0].type, net[0].inputs, net[0].outputs) == ("Relu", ("x",), ("y",))
    assert serialize_net(net) == data


def test_editing_one_op_leaves_the_others_untouched() -> None:
    predict, _ = synth.make_synthetic_pair(200, seed=5)
    net, data = _load(predict)
    before = list(net)
    index = len(net) // 2
    net.replace_op(index, net[index].replace(inputs=["renamed"]))
    assert net[index].inputs == ("renamed",)
    for position, (old, new) in enumerate(zip(before, net, strict=True)):
        if position != index:
            assert new is old
            assert (
                op_to_proto(new) is predict.op[position] or op_to_proto(new) == predict.op[position]
            )
    edited = caffe2_pb2.NetDef.FromString(serialize_net(net))
    expected = caffe2_pb2.NetDef.FromString(data)
    del expected.op[index].input[:]
    expected.op[index].input.append("renamed")
    assert edited == expected


# -- random nets ---------------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "", "\x00", "x y", "\u00e9", "\x00op-boundary", "a" * 200])


@st.composite
def _netdefs(draw: st.DrawFn) -> caffe2_pb2.NetDef:
    netdef = caffe2_pb2.NetDef()
    for _ in range(draw(st.integers(0, 12))):
        msg = netdef.op.add(
            input=draw(st.lists(_NAMES, max_size=5)), output=draw(st.lists(_NAMES, max_size=3))
        )
        if draw(st.booleans()):
            msg.type = draw(_NAMES)
        if draw(st.booleans()):
            msg.control_input.extend(draw(st.lists(_NAMES, min_size=1, max_size=2)))
        if draw(st.booleans()):
            msg.arg.add(name=draw(_NAMES), i=draw(st.integers(0, 2**40)))
        if draw(st.integers(0, 5)) == 0:
            msg.arg.add(name="net").n.op.add(type="Relu", input=["i"], output=["o"])
    return netdef


@settings(max_examples=150, deadline=None)
@given(_netdefs())
def test_random_nets_load_like_their_fields(netdef: caffe2_pb2.NetDef) -> None:
    net, data = _load(netdef)
    _assert_same_as_fields(net, netdef)
    assert [op.has_control_inputs() for op in net] == [len(m.control_input) > 0 for m in netdef.op]
    assert [op.has_nested_nets() for op in net] == [
        any(a.HasField("n") or len(a.nets) for a in m.arg) for m in netdef.op
    ]
    assert serialize_net(net) == data


def test_saved_bytes_of_loaded_ops_follow_them_across_nets_and_edits() -> None:
    source = Net(
        [Op("Relu", ["x"], ["y"], args={"alpha": 1.5}), Op("Tanh", ["y"], ["z"])], ["x"], ["z"]
    )
    data = serialize_net(source)
    loaded = net_from_netdef(caffe2_pb2.NetDef.FromString(data), serialized=data)
    other = Net([Op("Sigmoid", ["z"], ["w"])], ["z"], ["w"])
    other.append_op(loaded[0])  # an op loaded from another file keeps its own bytes
    loaded.replace_op(1, loaded[1].replace(type="Sigmoid"))  # a changed op is serialised again
    loaded.append_op(loaded[0].replace())  # a copy with no change keeps the bytes too
    for net in (loaded, other):
        assert caffe2_pb2.NetDef.FromString(serialize_net(net)) == net_to_netdef(net)
    assert [op.type for op in caffe2_pb2.NetDef.FromString(serialize_net(loaded)).op] == [
        "Relu",
        "Sigmoid",
        "Relu",
    ]


def test_ops_of_a_loaded_file_fetch_their_message_only_when_needed() -> None:
    source = Net(
        [
            Op("Conv", ["x", "w"], ["y"], args={"kernel": 3}, engine="CUDNN"),
            Op("Relu", ["y"], ["z"]),
        ],
        ["x", "w"],
        ["z"],
    )
    data = serialize_net(source)
    loaded = net_from_netdef(caffe2_pb2.NetDef.FromString(data), serialized=data)
    assert not any(map(_decoded, loaded))  # no protobuf message kept per op
    assert loaded[0].arg("kernel") == 3 and loaded[0].engine == "CUDNN"
    assert _decoded(loaded[0]) and not _decoded(loaded[1])
    assert net_to_netdef(loaded) == net_to_netdef(source)
    # A NetDef the caller hands over keeps its ops' messages, as given.
    given = caffe2_pb2.NetDef.FromString(data)
    wrapped = net_from_netdef(given)
    assert all(op_to_proto(op) is message for op, message in zip(wrapped, given.op, strict=True))
    assert op_to_proto(wrapped[0]) == given.op[0]

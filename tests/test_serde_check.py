"""Load-time validation (graphtools.serde.check): every string at every depth, the nesting limit
in binary and text alike, step nets given as text; and what saving refuses so that everything
graphtools writes loads again. Regression tests for issue 14's defects 1, 2 and 7."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_error_line, run_cli
from google.protobuf import text_format

from graphtools.errors import GraphToolsError, SerdeError
from graphtools.ir import Argument, Model, Net, Op
from graphtools.printer import print_model, print_ssa_table
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model, load_model_dir, load_net, save_model, save_net
from graphtools.serde.check import MAX_NESTING, nesting_depth, probe_netdef, step_net_from_text
from graphtools.serde.codec import net_from_netdef


def _chain(length: int, name: str = "x") -> caffe2_pb2.NetDef:
    """A net of ``length`` Relu ops b0 -> b1 -> ..., every blob name distinct."""
    net = caffe2_pb2.NetDef()
    net.name = name
    net.external_input.append("data")
    previous = "data"
    for index in range(length):
        op = net.op.add()
        op.type = "Relu"
        op.input.append(previous)
        op.output.append(f"blob{index:03d}")
        previous = op.output[0]
    net.external_output.append(previous)
    return net


def _corrupt(data: bytes, marker: bytes, bad: bytes) -> bytes:
    """``data`` with the one occurrence of ``marker`` replaced by ``bad`` (same length)."""
    assert data.count(marker) == 1 and len(marker) == len(bad)
    return data.replace(marker, bad)


def _wrap(net: caffe2_pb2.NetDef, depth: int) -> caffe2_pb2.NetDef:
    """``net`` as the then_net of an If, ``depth`` times over."""
    for level in range(depth):
        outer = caffe2_pb2.NetDef()
        outer.name = f"level{level}"
        op = outer.op.add()
        op.type = "If"
        op.input.append("cond")
        arg = op.arg.add()
        arg.name = "then_net"
        arg.n.CopyFrom(net)
        net = outer
    return net


def _deep_text(depth: int) -> str:
    """A text NetDef with an If nested ``depth`` deep (built as text: protobuf's own text
    printer overflows the stack on such nets)."""
    inner = 'op { type: "Relu" input: "x" output: "x" }'
    for _ in range(depth):
        inner = f'op {{ type: "If" input: "c" arg {{ name: "then_net" n {{ {inner} }} }} }}'
    return inner + "\n"


# -- defect 1: strings that are not UTF-8, anywhere -----------------------------------------


def test_argument_name_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = _chain(3)
    arg = net.op[1].arg.add()
    arg.name = "QQ"
    arg.i = 1
    path = tmp_path / "argname.pb"
    path.write_bytes(_corrupt(net.SerializeToString(), b"QQ", b"\xff\xfe"))
    with pytest.raises(SerdeError) as info:
        load_model(path)
    assert info.value.path == path
    assert "op #1 (Relu) of net 'x'" in info.value.reason
    assert "the name of argument 0" in info.value.reason
    for command in ("show", "ssa"):
        code, out, err = run_cli(capsys, command, str(path))
        assert (code, out) == (2, "")
        assert_one_error_line(err, str(path), "not valid UTF-8")


def test_blob_name_in_the_middle_of_a_big_net(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Op 64 of 129: beyond the format sniffer's sample of 64 ops from each end."""
    data = _corrupt(_chain(129).SerializeToString(), b"\x12\x07blob064", b"\x12\x07\xfelob064")
    path = tmp_path / "middle.pb"
    path.write_bytes(data)
    with pytest.raises(SerdeError) as info:
        load_model(path)
    assert "op #64 (Relu) of net 'x': output[0] is not valid UTF-8" in str(info.value)
    code, _, err = run_cli(capsys, "ssa", str(path))
    assert code == 2
    assert_one_error_line(err, "op #64 (Relu)", "output[0]")


def test_65th_external_input_fails_load_and_run_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    net = _chain(2)
    net.external_input.extend(f"extra{i:02d}" for i in range(64))
    net.external_input.append("QQ")
    path = tmp_path / "ext.pb"
    path.write_bytes(_corrupt(net.SerializeToString(), b"QQ", b"\xe1x"))
    out = tmp_path / "D"
    code, _, err = run_cli(capsys, "run", str(path), "-o", str(out))
    assert code == 2
    assert_one_error_line(err, "external_input[65] is not valid UTF-8", str(path))
    assert not out.exists()


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("type", "op #1 (?) of net 'x': type"),
        ("input", "op #1 (Relu) of net 'x': input[0]"),
        ("engine", "op #1 (Relu) of net 'x': engine"),
        ("control_input", "op #1 (Relu) of net 'x': control_input[0]"),
        ("node_name", "op #1 (Relu) of net 'x': device_option.node_name"),
        ("net_name", "net b'\\xffQ': name"),
        ("tensor_name", "argument 'values': tensor name"),
    ],
)
def test_every_string_field_is_checked(field: str, expected: str) -> None:
    net = _chain(3)
    op = net.op[1]
    if field == "type":
        op.type = "QQ"
    elif field == "input":
        op.input[0] = "QQ"
    elif field == "engine":
        op.engine = "QQ"
    elif field == "control_input":
        op.control_input.append("QQ")
    elif field == "node_name":
        op.device_option.node_name = "QQ"
    elif field == "net_name":
        net.name = "QQ"
    else:
        arg = op.arg.add()
        arg.name = "values"
        arg.t.name = "QQ"
    data = _corrupt(net.SerializeToString(), b"QQ", b"\xffQ")
    with pytest.raises(SerdeError) as info:
        net_from_netdef(caffe2_pb2.NetDef.FromString(data), serialized=data)
    assert expected in info.value.reason


def test_string_in_a_nested_net(tmp_path: Path) -> None:
    inner = _chain(2, "inner")
    inner.op[1].output[0] = "QQ"
    outer = _wrap(inner, 3)
    path = tmp_path / "nested.pb"
    path.write_bytes(_corrupt(outer.SerializeToString(), b"QQ", b"Q\x80"))
    with pytest.raises(SerdeError) as info:
        load_net(path)
    assert info.value.reason == (
        "op #1 (Relu) of net 'inner' in argument 'then_net' of op #0 (If) of net 'level0' in "
        "argument 'then_net' of op #0 (If) of net 'level1' in argument 'then_net' of op #0 (If) "
        "of net 'level2': output[0] is not valid UTF-8 text (b'Q\\x80')"
    )


def test_bad_escape_in_a_text_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "net.pbtxt"
    path.write_text('name: "x" op { type: "Relu" input: "\\377" output: "y" }\n')
    with pytest.raises(SerdeError, match="does not parse at line 1"):
        load_model(path)


# -- step nets given as text ------------------------------------------------------------------


def _recurrent(step: bytes, op_type: str = "RecurrentNetwork") -> caffe2_pb2.NetDef:
    net = _chain(1, "rnn")
    op = net.op.add()
    op.type = op_type
    op.input.append("blob000")
    op.output.append("hidden")
    arg = op.arg.add()
    arg.name = "step_net"
    arg.s = step
    return net


def test_step_net_text_is_checked() -> None:
    good = _recurrent(b'name: "step" op { type: "Relu" input: "x" output: "y" }')
    assert probe_netdef(good.SerializeToString()).depth == 1
    cases = {
        b'op { type: "Relu" input: "x" ': "the step net text does not parse at line 1",
        b'op { type: "Relu" input: "\xff" }': "the step net is not UTF-8 text",
        _deep_text(MAX_NESTING).encode(): "nets nest more than 16 deep",
    }
    for step, message in cases.items():
        with pytest.raises(SerdeError) as info:
            probe_netdef(_recurrent(step).SerializeToString())
        assert "argument 'step_net' of op #1 (RecurrentNetwork) of net 'rnn'" in str(info.value)
        assert message in str(info.value)
    # Other ops may use the name for anything: only RecurrentNetwork's is a net.
    assert probe_netdef(_recurrent(b"\xff", "MyOp").SerializeToString()).depth == 0


def test_real_lstm_step_nets_load(real_fixtures: Path) -> None:
    folder = real_fixtures / "breadbread1984-Caffe2-C-LSTM-demo" / "deploy_models"
    netdef = load_net(folder / "lstm_predict_net.pbtxt")
    assert probe_netdef(netdef.SerializeToString(), netdef).depth == 1
    step = step_net_from_text(
        next(a.s for op in netdef.op for a in op.arg if a.name == "step_net"), "step_net"
    )
    assert [op.type for op in step.op] == ["FC", "Sum", "LSTMUnit"]


# -- defect 2: the nesting limit --------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 34, 60])
def test_too_deep_binary_is_refused_by_name(tmp_path: Path, depth: int) -> None:
    """Beyond about 33 nets protobuf itself fails to decode; the depth is still named."""
    path = tmp_path / "deep.pb"
    path.write_bytes(_wrap(_chain(1), depth).SerializeToString())
    assert nesting_depth(path.read_bytes()) == MAX_NESTING + 1  # counted up to the limit + 1
    with pytest.raises(SerdeError, match=f"nets nest more than {MAX_NESTING} deep"):
        load_model(path)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 34, 130, 140, 400])
def test_too_deep_text_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    path = tmp_path / "deep.pbtxt"
    path.write_text(_deep_text(depth))
    with pytest.raises(SerdeError) as info:
        load_model(path)
    assert "nest" in info.value.reason and str(MAX_NESTING) in info.value.reason
    out = tmp_path / "D"
    code, _, err = run_cli(capsys, "run", str(path), "--binary", "-o", str(out))
    assert code == 2
    assert_one_error_line(err, str(path))
    assert not out.exists()


def test_limit_deep_loads_copies_and_saves_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "deep.pbtxt"
    path.write_text(_deep_text(MAX_NESTING))
    model = load_model(path)
    copied = model.copy()
    for text in (True, False):
        folder = tmp_path / f"out_{text}"
        save_model(copied, folder, text=text)
        assert print_model(load_model_dir(folder)) == print_model(model)


def test_save_refuses_what_the_loader_would_refuse(tmp_path: Path) -> None:
    net = Net([Op("Relu", ["x"], ["x"])])
    for level in range(MAX_NESTING + 1):
        net = Net([Op("If", ["c"], [], args=(Argument(name="then_net", n=net),))], name=f"n{level}")
    for text in (False, True):
        target = tmp_path / ("deep.pbtxt" if text else "deep.pb")
        with pytest.raises(SerdeError) as info:
            save_net(net, target, text=text)
        assert info.value.path == target
        assert "refusing to write what graphtools cannot load" in info.value.reason
        assert not target.exists()
    with pytest.raises(SerdeError, match="cannot write the name"):
        save_net(Net([Op("Relu", ["\ud800"], ["y"])]), tmp_path / "surrogate.pb")


def test_empty_predict_net_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(SerdeError, match="refusing to write an empty predict_net"):
        save_model(Model(Net([])), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_required_fields_left_out_round_trip(tmp_path: Path) -> None:
    """A QTensorProto or PartitionInfo missing required fields loads, and saves (partially)."""
    net = _chain(2)
    net.op[0].arg.add(name="q").qtensors.add()
    net.partition_info.add().device_id.append(1)
    path = tmp_path / "partial.pbtxt"
    path.write_text(text_format.MessageToString(net))
    model = load_model(path)
    model.predict_net.set_name("renamed")  # forces a re-encode of the header
    for text in (True, False):
        save_model(model, tmp_path / f"out_{text}", text=text)
        assert print_model(load_model_dir(tmp_path / f"out_{text}")) == print_model(model)


# -- defect 7: descriptions -------------------------------------------------------------------


def test_two_byte_netdef_is_not_called_a_plan(tmp_path: Path) -> None:
    path = tmp_path / "one_empty_op.pb"
    path.write_bytes(b"\x12\x00")
    with pytest.raises(SerdeError) as info:
        load_net(path)
    assert "PlanDef" not in info.value.reason
    assert info.value.reason == "not a NetDef: op #0 has no readable type"


def test_a_real_plan_is_still_named(real_fixtures: Path, tmp_path: Path) -> None:
    plan = caffe2_pb2.PlanDef()
    text_format.Parse(
        (real_fixtures / "breadbread1984-Caffe2-C-demo" / "train_plan.pbtxt").read_text(), plan
    )
    path = tmp_path / "plan.pb"
    path.write_bytes(plan.SerializeToString())
    with pytest.raises(SerdeError, match="PlanDef"):
        load_net(path)


def test_valid_nets_still_print(tmp_path: Path) -> None:
    """The checks refuse nothing valid: unusual but legal strings load and print."""
    net = _chain(3, "")
    net.op[0].output[0] = "blob000 with spaces and ünïcode"
    net.op[1].input[0] = net.op[0].output[0]
    path = tmp_path / "odd.pb"
    path.write_bytes(net.SerializeToString())
    model = load_model(path)
    assert "ünïcode" in print_ssa_table(model.predict_net)


def test_every_refusal_is_a_graphtools_error(tmp_path: Path) -> None:
    path = tmp_path / "x.pb"
    for data in (b"\x12\x00", b"\n\xff", _wrap(_chain(1), 50).SerializeToString()[:-3]):
        path.write_bytes(data)
        with pytest.raises(GraphToolsError):
            load_model(path)

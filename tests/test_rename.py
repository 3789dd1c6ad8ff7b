"""Tests of passes/rename.py: detectron2's rename_op_input/output, and the collision refusals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.errors import IllegalRewriteError, NoProducerError, PassError, PreconditionError
from graphtools.graph import next_write_index
from graphtools.ir import Model, Net, Op, make_arg
from graphtools.pass_infra import PassManager
from graphtools.passes import rename_op_input, rename_op_output
from graphtools.passes.rename import Rename, rename_model_input, rename_versioned_blob
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.ssa import get_ssa


def shape(net: Net | caffe2_pb2.NetDef) -> tuple[Any, ...]:
    """Ops as (type, inputs, outputs) and the external lists: what a rename may change."""
    if isinstance(net, caffe2_pb2.NetDef):
        net = net_from_netdef(net)
    ops = tuple((op.type, tuple(op.inputs), tuple(op.outputs)) for op in net)
    return ops, tuple(net.external_inputs), tuple(net.external_outputs)


def netdef(ops: list[tuple[str, list[str], list[str]]], ins: list[str], outs: list[str]) -> Any:
    return net_to_netdef(Net([Op(t, i, o) for t, i, o in ops], ins, outs))


# -- detectron2's semantics, written from semantics.md 6.2-6.4, as the reference ---------------


def _upstream_rename_in_proto(proto, old, new, version, ssa, start, end) -> None:  # type: ignore[no-untyped-def]
    for op, (ins, outs) in zip(proto.op, ssa, strict=True):
        for i, blob in enumerate(ins):
            if blob == (old, version):
                op.input[i] = new
        for i, blob in enumerate(outs):
            if blob == (old, version):
                op.output[i] = new
    if start.get(old, 0) == version:
        proto.external_input[:] = [new if n == old else n for n in proto.external_input]
    if end.get(old, 0) == version:
        proto.external_output[:] = [new if n == old else n for n in proto.external_output]


def upstream_rename_op_output(predict_net, op_id, output_id, new_name) -> None:  # type: ignore[no-untyped-def]
    ssa, versions = get_ssa(predict_net)
    old, version = ssa[op_id][1][output_id]
    _upstream_rename_in_proto(predict_net, old, new_name, version, ssa, {}, versions)


def upstream_rename_op_input(predict_net, init_net, op_id, input_id, new_name) -> None:  # type: ignore[no-untyped-def]
    init_ssa, init_versions = get_ssa(init_net)
    ssa, versions = get_ssa(predict_net, dict(init_versions))
    old, version = ssa[op_id][0][input_id]
    _upstream_rename_in_proto(init_net, old, new_name, version, init_ssa, {}, init_versions)
    _upstream_rename_in_proto(predict_net, old, new_name, version, ssa, init_versions, versions)


def dataflow(net: Net | caffe2_pb2.NetDef) -> tuple[Any, ...]:
    """Where every read value comes from: a producing op index, or a start value by name."""
    if isinstance(net, caffe2_pb2.NetDef):
        net = net_from_netdef(net)
    view = net.ssa()

    def source(blob: tuple[str, int]) -> Any:
        producer = view.producer(blob)
        return ("start", blob[0]) if producer is None else producer

    reads = tuple(tuple(source(b) for b in ins) for ins, _ in view.ssa)
    return reads, tuple(source(b) for b in view.external_outputs)


# -- rename_op_output ------------------------------------------------------------------------


def test_rename_op_output_renames_producer_readers_and_final_external_output() -> None:
    net = netdef(
        [("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["s"]), ("Add", ["x", "s"], ["x"])],
        ["a"],
        ["x"],
    )
    rename_op_output(net, 0, 0, "y")
    # (x, 1) becomes y; (x, 2), written by op 2, keeps its name: the in-place chain splits.
    assert shape(net) == (
        (("Relu", ("a",), ("y",)), ("Sigmoid", ("y",), ("s",)), ("Add", ("y", "s"), ("x",))),
        ("a",),
        ("x",),
    )


def test_rename_op_output_renames_external_output_when_final_version() -> None:
    net = netdef([("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["s"])], ["a"], ["x", "s"])
    rename_op_output(net, 0, 0, "y")
    assert shape(net) == (
        (("Relu", ("a",), ("y",)), ("Sigmoid", ("y",), ("s",))),
        ("a",),
        ("y", "s"),
    )


def test_rename_op_output_keeps_everything_else_of_the_message() -> None:
    op = Op("Relu", ["a"], ["x"], name="relu", args={"order": "NCHW"}, engine="CUDNN")
    net = net_to_netdef(Net([op, Op("Sigmoid", ["x"], ["s"])], ["a"], ["s"], name="n"))
    rename_op_output(net, 0, 0, "y")
    assert net.name == "n"
    assert net.op[0].name == "relu" and net.op[0].engine == "CUDNN"
    assert [(a.name, a.s) for a in net.op[0].arg] == [("order", b"NCHW")]


def test_rename_to_the_same_name_is_a_no_op() -> None:
    net = netdef([("Relu", ["a"], ["x"])], ["a"], ["x"])
    before = net.SerializeToString()
    rename_op_output(net, 0, 0, "x")
    assert net.SerializeToString() == before


# -- rename_op_input ---------------------------------------------------------------------------


def test_rename_op_input_single_reader() -> None:
    net = netdef([("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["s"])], ["a"], ["s"])
    rename_op_input(net, caffe2_pb2.NetDef(), 1, 0, "y")
    assert shape(net) == ((("Relu", ("a",), ("y",)), ("Sigmoid", ("y",), ("s",))), ("a",), ("s",))


def test_rename_op_input_from_init_net_renames_both_nets() -> None:
    init = netdef([("GivenTensorFill", [], ["w"]), ("GivenTensorFill", [], ["b"])], [], ["w", "b"])
    predict = netdef([("FC", ["data", "w", "b"], ["y"])], ["data", "w", "b"], ["y"])
    rename_op_input(predict, init, 0, 1, "fc_w")
    # w is version 1 in predict_net (seeded from the init_net), so the init_net's producer,
    # its external output and predict_net's external input are renamed.
    assert shape(init) == (
        (("GivenTensorFill", (), ("fc_w",)), ("GivenTensorFill", (), ("b",))),
        (),
        ("fc_w", "b"),
    )
    assert shape(predict) == (
        (("FC", ("data", "fc_w", "b"), ("y",)),),
        ("data", "fc_w", "b"),
        ("y",),
    )


def test_rename_op_input_refuses_when_other_ops_read_it() -> None:
    net = netdef(
        [("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["s"]), ("Tanh", ["x"], ["t"])],
        ["a"],
        ["s", "t"],
    )
    before = net.SerializeToString()
    with pytest.raises(IllegalRewriteError, match=r"also read by ops #2 \(Tanh\)") as info:
        rename_op_input(net, caffe2_pb2.NetDef(), 1, 0, "y")
    assert isinstance(info.value, ValueError)  # detectron2's IllegalGraphTransformError was one
    assert "rename_op_output on its producer" in str(info.value)
    assert net.SerializeToString() == before
    shared = netdef([("Sigmoid", ["a"], ["s"]), ("Tanh", ["a"], ["t"])], ["a"], ["s", "t"])
    with pytest.raises(
        IllegalRewriteError, match="an input of the net: from_producer=True renames"
    ):
        rename_op_input(shared, caffe2_pb2.NetDef(), 0, 0, "y")


def test_rename_op_input_from_producer_renames_every_reader() -> None:
    net = netdef(
        [("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["s"]), ("Tanh", ["x"], ["t"])],
        ["a"],
        ["s", "t"],
    )
    rename_op_input(net, caffe2_pb2.NetDef(), 1, 0, "y", from_producer=True)
    assert shape(net)[0] == (
        ("Relu", ("a",), ("y",)),
        ("Sigmoid", ("y",), ("s",)),
        ("Tanh", ("y",), ("t",)),
    )


def test_rename_op_input_from_producer_without_producer_says_init_net() -> None:
    init = netdef([("GivenTensorFill", [], ["w"])], [], ["w"])
    predict = netdef([("FC", ["data", "w"], ["y"])], ["data", "w"], ["y"])
    with pytest.raises(NoProducerError, match="init_net") as info:
        rename_op_input(predict, init, 0, 1, "v", from_producer=True)
    assert isinstance(info.value, NotImplementedError)  # what detectron2 raised


def test_rename_op_input_of_net_input() -> None:
    net = netdef([("Relu", ["data"], ["x"])], ["data"], ["x"])
    rename_op_input(net, caffe2_pb2.NetDef(), 0, 0, "image")
    assert shape(net) == ((("Relu", ("image",), ("x",)),), ("image",), ("x",))


# -- collisions: detectron2 renames and corrupts the net; we refuse ----------------------------


def test_refuses_name_read_later_as_another_value() -> None:
    ops = [("Relu", ["a"], ["x"]), ("Add", ["x", "y"], ["s"])]
    net = netdef(ops, ["a", "y"], ["s"])
    upstream = netdef(ops, ["a", "y"], ["s"])
    upstream_rename_op_output(upstream, 0, 0, "y")
    assert dataflow(upstream) != dataflow(net)  # Add now reads its first input twice
    with pytest.raises(IllegalRewriteError) as info:
        rename_op_output(net, 0, 0, "y")
    message = str(info.value)
    assert "('x', 1)" in message and "op #0 (Relu)" in message
    assert "op #1 (Add) reads ('y', 0)" in message
    assert shape(net) == shape(netdef(ops, ["a", "y"], ["s"]))


def test_refuses_name_written_while_renamed_value_is_alive() -> None:
    ops = [("Relu", ["a"], ["x"]), ("Tanh", ["a"], ["y"]), ("Add", ["x", "y"], ["s"])]
    with pytest.raises(IllegalRewriteError, match=r"op #1 \(Tanh\) writes \('y', 1\)"):
        rename_op_output(netdef(ops, ["a"], ["s"]), 0, 0, "y")


def test_refuses_name_of_an_external_output() -> None:
    ops = [("Relu", ["a"], ["y"]), ("Tanh", ["a"], ["x"])]
    with pytest.raises(IllegalRewriteError, match=r"op #1 \(Tanh\) writes \('y', 2\)|external"):
        rename_op_output(netdef(ops, ["a"], ["y", "x"]), 1, 0, "y")


def test_refuses_init_param_renamed_to_another_param() -> None:
    init = netdef([("GivenTensorFill", [], ["w"]), ("GivenTensorFill", [], ["b"])], [], ["w", "b"])
    predict = netdef([("FC", ["data", "w", "b"], ["y"])], ["data", "w", "b"], ["y"])
    with pytest.raises(IllegalRewriteError, match="'b'"):
        rename_op_input(predict, init, 0, 1, "b")
    assert shape(init)[2] == ("w", "b") and shape(predict)[0][0][1] == ("data", "w", "b")


def test_refuses_net_input_renamed_to_another_input() -> None:
    net = netdef([("Add", ["a", "b"], ["s"])], ["a", "b"], ["s"])
    with pytest.raises(IllegalRewriteError, match="already an input"):
        rename_op_input(net, caffe2_pb2.NetDef(), 0, 0, "b")


def test_refuses_names_used_inside_nested_nets() -> None:
    then_net = Net([Op("Relu", ["x"], ["z"])], ["x"], ["z"])
    ops = [Op("Relu", ["a"], ["x"]), Op("If", ["cond"], [], args=[make_arg("then_net", then_net)])]
    net = net_to_netdef(Net(ops, ["a", "cond"], ["z"]))
    with pytest.raises(IllegalRewriteError, match="nested net"):
        rename_op_output(net, 0, 0, "y")


def test_accepts_name_used_only_before_the_producer() -> None:
    ops = [
        ("Relu", ["a"], ["y"]),
        ("Tanh", ["y"], ["t"]),
        ("Sigmoid", ["t"], ["x"]),
        ("Exp", ["x"], ["e"]),
    ]
    net = netdef(ops, ["a"], ["e"])
    upstream = netdef(ops, ["a"], ["e"])
    rename_op_output(net, 2, 0, "y")
    upstream_rename_op_output(upstream, 2, 0, "y")
    assert shape(net) == shape(upstream)
    assert dataflow(net) == dataflow(netdef(ops, ["a"], ["e"]))


def test_accepts_alias_placeholder_fusion() -> None:
    # detectron2's fuse_alias_placeholder: rename the AliasWithName input, then its output, to
    # the alias name; the op then reads and writes that name.
    predict = netdef(
        [("Relu", ["a"], ["x"]), ("AliasWithName", ["x"], ["x2"]), ("Sigmoid", ["x2"], ["s"])],
        ["a"],
        ["s"],
    )
    init = caffe2_pb2.NetDef()
    rename_op_input(predict, init, 1, 0, "feat")
    rename_op_output(predict, 1, 0, "feat")
    assert shape(predict)[0] == (
        ("Relu", ("a",), ("feat",)),
        ("AliasWithName", ("feat",), ("feat",)),
        ("Sigmoid", ("feat",), ("s",)),
    )


# -- IR level and the pass ---------------------------------------------------------------------


def test_rename_versioned_blob_counts_and_commits_once() -> None:
    net = Net([Op("Relu", ["a"], ["x"]), Op("Add", ["x", "x"], ["x"])], ["a"], ["x"])
    revision = net.revision
    assert rename_versioned_blob(net, ("x", 1), "y") == 3
    assert net.revision == revision + 1
    assert shape(net)[0] == (("Relu", ("a",), ("y",)), ("Add", ("y", "y"), ("x",)))


def test_rename_versioned_blob_with_start_versions() -> None:
    net = Net([Op("Relu", ["w"], ["out"])], ["w"], ["out"])
    assert rename_versioned_blob(net, ("w", 1), "v", start_versions={"w": 1}) == 2
    assert shape(net) == ((("Relu", ("v",), ("out",)),), ("v",), ("out",))


def test_refusal_leaves_model_untouched_in_both_nets() -> None:
    init = Net([Op("GivenTensorFill", [], ["w"]), Op("GivenTensorFill", [], ["k"])], [], ["w", "k"])
    predict = Net(
        [Op("FC", ["d", "w"], ["y"]), Op("Relu", ["k"], ["z"])], ["d", "w", "k"], ["y", "z"]
    )
    model = Model(predict, init)
    revision = model.revision
    with pytest.raises(IllegalRewriteError):
        rename_model_input(model, 0, 1, "k")
    assert model.revision == revision


def test_next_write_index() -> None:
    net = Net([Op("Relu", ["a"], ["a"]), Op("Relu", ["a"], ["b"]), Op("Relu", ["b"], ["a", "a"])])
    assert next_write_index(net.ssa().ssa) == {("a", 0): 0, ("a", 1): 2, ("b", 0): 1}


def test_rename_pass_through_pipeline_spec() -> None:
    model = Model(Net([Op("Relu", ["a"], ["x"]), Op("Sigmoid", ["x"], ["s"])], ["a"], ["s"]))
    records = PassManager.parse("rename{op=1,input=0,to=y}")(model)
    assert records[0].modified and records[0].stats == {"renamed": 2}
    assert shape(model.predict_net)[0] == (("Relu", ("a",), ("y",)), ("Sigmoid", ("y",), ("s",)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"op": 0, "to": "y"}, "exactly one"),
        ({"op": 0, "input": 0}, "new name"),
        ({"op": 5, "input": 0, "to": "y"}, "does not exist"),
        ({"op": 0, "output": 5, "to": "y"}, r"op #0 \(Relu\) has no output #5 \(it has 1\)"),
        ({"op": 0, "input": 1, "to": "y"}, r"op #0 \(Relu\) has no input #1 \(it has 1\)"),
    ],
)
def test_rename_pass_options_are_checked(options: dict[str, Any], message: str) -> None:
    model = Model(Net([Op("Relu", ["a"], ["x"])], ["a"], ["x"]))
    with pytest.raises(PreconditionError, match=message):
        Rename(**options)(model)


# -- drop-in behaviour and random nets ---------------------------------------------------------

NAMES = ["a", "b", "x", "y", "z"]


@st.composite
def random_nets(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, list[str], list[str]]], list[str], list[str]]:
    defined = ["a", "b"]
    ops = []
    for index in range(draw(st.integers(2, 8))):
        ins = draw(st.lists(st.sampled_from(defined), min_size=1, max_size=2))
        outs = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))
        ops.append((f"Op{index}", ins, outs))
        defined.extend(name for name in outs if name not in defined)
    exts = draw(st.lists(st.sampled_from(defined), max_size=2, unique=True))
    return ops, ["a", "b"], exts


@settings(max_examples=300, deadline=None)
@given(random_nets(), st.data())
def test_random_renames_preserve_dataflow_and_match_upstream(
    spec: Any, data: st.DataObject
) -> None:
    ops, ins, outs = spec
    op_id = data.draw(st.integers(0, len(ops) - 1))
    output_id = data.draw(st.integers(0, len(ops[op_id][2]) - 1))
    new_name = data.draw(st.sampled_from([*NAMES, "fresh"]))
    net = netdef(ops, ins, outs)
    try:
        rename_op_output(net, op_id, output_id, new_name)
    except IllegalRewriteError:
        assert shape(net) == shape(netdef(ops, ins, outs))
        return
    upstream = netdef(ops, ins, outs)
    upstream_rename_op_output(upstream, op_id, output_id, new_name)
    assert shape(net) == shape(upstream)
    assert dataflow(net) == dataflow(netdef(ops, ins, outs))
    view = net_from_netdef(net).ssa()
    declared = set(net.external_input)
    for index, (reads, _) in enumerate(view.ssa):
        for blob in reads:  # every input is defined before use
            assert blob[1] > 0 or blob[0] in declared, (index, blob)


@settings(max_examples=200, deadline=None)
@given(random_nets(), st.data())
def test_random_input_renames_match_upstream_when_accepted(spec: Any, data: st.DataObject) -> None:
    ops, ins, outs = spec
    op_id = data.draw(st.integers(0, len(ops) - 1))
    input_id = data.draw(st.integers(0, len(ops[op_id][1]) - 1))
    new_name = data.draw(st.sampled_from([*NAMES, "fresh"]))
    net = netdef(ops, ins, outs)
    try:
        rename_op_input(net, caffe2_pb2.NetDef(), op_id, input_id, new_name)
    except IllegalRewriteError:
        assert shape(net) == shape(netdef(ops, ins, outs))
        return
    upstream = netdef(ops, ins, outs)
    upstream_rename_op_input(upstream, caffe2_pb2.NetDef(), op_id, input_id, new_name)
    assert shape(net) == shape(upstream)
    reads, finals = dataflow(net)
    old_reads, old_finals = dataflow(netdef(ops, ins, outs))
    renamed = ssa_input(ops, ins, op_id, input_id)

    def undo(item: Any) -> Any:  # a renamed start value keeps its identity under its new name
        if renamed[1] == 0 and new_name != renamed[0] and item == ("start", new_name):
            return ("start", renamed[0])
        return item

    assert tuple(tuple(undo(i) for i in r) for r in reads) == old_reads
    assert tuple(undo(i) for i in finals) == old_finals


def ssa_input(ops: Any, ins: list[str], op_id: int, input_id: int) -> tuple[str, int]:
    ssa, _ = get_ssa(netdef(ops, ins, []))
    return ssa[op_id][0][input_id]


def test_a_negative_op_index_counts_from_the_end_as_in_detectron2() -> None:
    """detectron2 indexes the SSA list with op_id: -1 is the last op (a ported script's "the
    output op"); it was refused as an op that does not exist."""
    net = netdef([("Relu", ["a"], ["x"]), ("Sigmoid", ["x"], ["out"])], ["a"], ["out"])
    rename_op_output(net, -1, 0, "probs")
    assert shape(net) == (
        (("Relu", ("a",), ("x",)), ("Sigmoid", ("x",), ("probs",))),
        ("a",),
        ("probs",),
    )
    rename_op_input(net, caffe2_pb2.NetDef(), -1, 0, "hidden")
    assert shape(net)[0][0] == ("Relu", ("a",), ("hidden",))
    with pytest.raises(IndexError, match="op #-3 does not exist"):
        rename_op_output(net, -3, 0, "z")


def test_refuses_a_write_over_an_input_the_next_run_reads() -> None:
    """rename{op=0,output=0,to=conv1_w}: the Conv then wrote over the weights its init_net
    fills once; verify (one run) said equal, and a predictor's second run failed. Refused,
    the model unchanged."""
    from conftest import FIXTURES

    from graphtools.serde import load_model_dir

    model = load_model_dir(FIXTURES / "models" / "tiny_export")
    before = model.copy()
    with pytest.raises(PassError, match="would then write over the net's input 'conv1_w'"):
        PassManager.parse("rename{op=0,output=0,to=conv1_w}")(model)
    assert model.predict_net.same_as(before.predict_net)

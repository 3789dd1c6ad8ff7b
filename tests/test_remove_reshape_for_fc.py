"""Tests of passes/remove_reshape_for_fc.py, and of all three passes on the real model files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.analysis.reshape import find_reshape_removal
from graphtools.executor.interpreter import run_model
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.passes import (
    fuse_copy_between_cpu_and_gpu,
    identify_reshape_sub_graph,
    remove_reshape_for_fc,
    rename_op_output,
)
from graphtools.passes.remove_reshape_for_fc import RemoveReshapeForFC
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model
from graphtools.serde.codec import model_from_netdefs, net_from_netdef, net_to_netdef
from graphtools.wellformed import verify

PARAMS = {"idx": np.array(0), "minus_one": np.array([-1]), "w": np.ones((3, 8)), "b": np.zeros(3)}
FLATTEN = [
    ("Relu", ["x"], ["r"]),
    ("Shape", ["r"], ["s"]),
    ("Gather", ["s", "idx"], ["n"]),
    ("ExpandDims", ["n"], ["n1"]),
    ("Concat", ["n1", "minus_one"], ["shape", "split"]),
    ("Reshape", ["r", "shape"], ["flat", "old"]),
    ("FC", ["flat", "w", "b"], ["y"]),
]
INPUTS = ["x", "idx", "minus_one", "w", "b"]


def netdef(ops: list[tuple[str, list[str], list[str]]], ins: list[str], outs: list[str]) -> Any:
    return net_to_netdef(Net([Op(t, i, o) for t, i, o in ops], ins, outs))


def shape(net: Net | caffe2_pb2.NetDef) -> tuple[Any, ...]:
    if isinstance(net, caffe2_pb2.NetDef):
        net = net_from_netdef(net)
    ops = tuple((op.type, tuple(op.inputs), tuple(op.outputs)) for op in net)
    return ops, tuple(net.external_inputs), tuple(net.external_outputs)


def unchanged(ops: list[Any], ins: list[str], outs: list[str], params: dict[str, Any]) -> None:
    """Assert the function leaves this net (and its params) alone."""
    kept = dict(params)
    result, returned = remove_reshape_for_fc(netdef(ops, ins, outs), params)
    assert shape(result) == shape(netdef(ops, ins, outs))
    assert returned is params and returned.keys() == kept.keys()


# -- the rules -----------------------------------------------------------------------------------


def test_onnx_flatten_chain_is_removed_and_params_dropped() -> None:
    original = netdef(FLATTEN, INPUTS, ["y"])
    snapshot = original.SerializeToString()
    params = dict(PARAMS)
    result, returned = remove_reshape_for_fc(original, params)
    assert shape(result) == (
        (("Relu", ("x",), ("r",)), ("FC", ("r", "w", "b"), ("y",))),
        ("x", "w", "b"),
        ("y",),
    )
    assert returned is params and sorted(params) == ["b", "w"]
    assert original.SerializeToString() == snapshot  # detectron2 renames inside the caller's net


def test_identify_reshape_sub_graph() -> None:
    assert identify_reshape_sub_graph(netdef(FLATTEN, INPUTS, ["y"])) == [[1, 2, 3, 4, 5]]


def test_chain_found_far_from_the_reshape() -> None:
    # detectron2 looks in ssa[first reader of data - 15 : ...]; with 20 ops in between the
    # start index is negative, the slice wraps, and the chain is not found.
    ops = FLATTEN[:2] + [("Tanh", ["x"], [f"pad{i}"]) for i in range(20)] + FLATTEN[2:]
    sub_graphs = identify_reshape_sub_graph(netdef(ops, INPUTS, ["y"]))
    assert sub_graphs == [[1, 22, 23, 24, 25]]
    pads = [f"pad{i}" for i in range(20)]
    result, _ = remove_reshape_for_fc(netdef(ops, INPUTS, ["y", *pads]), dict(PARAMS))
    assert [op.type for op in result.op].count("Reshape") == 0


def test_param_shape_is_removed() -> None:
    ops = [
        ("Relu", ["x"], ["r"]),
        ("Reshape", ["r", "shape"], ["flat", "old"]),
        ("FC", ["flat", "w", "b"], ["y"]),
    ]
    params = {"shape": np.array([0, -1]), "w": np.ones((3, 8)), "b": np.zeros(3)}
    result, _ = remove_reshape_for_fc(netdef(ops, ["x", "shape", "w", "b"], ["y"]), params)
    assert shape(result)[0] == (("Relu", ("x",), ("r",)), ("FC", ("r", "w", "b"), ("y",)))
    assert "shape" not in params and "shape" not in result.external_input


def test_shape_argument_reshape_is_removed() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["r"]),
            Op("Reshape", ["r"], ["flat", "old"], args={"shape": [-1, 8]}),
            Op("FC", ["flat", "w", "b"], ["y"]),
        ],
        ["x", "w", "b"],
        ["y"],
    )
    result, _ = remove_reshape_for_fc(net_to_netdef(net), {"w": 1, "b": 2})
    assert shape(result)[0] == (("Relu", ("x",), ("r",)), ("FC", ("r", "w", "b"), ("y",)))


def test_reshape_without_readers_is_kept() -> None:
    # detectron2: "all readers are FC" holds vacuously, and the Reshape goes.
    unchanged(FLATTEN[:-1], INPUTS, ["r"], dict(PARAMS))


def test_reshape_output_declared_external_is_kept() -> None:
    # detectron2 removes it and renames the net's external output to the data input (6.8 edge).
    unchanged(FLATTEN, INPUTS, ["y", "flat"], dict(PARAMS))
    unchanged(FLATTEN[:-1], INPUTS, ["flat"], dict(PARAMS))


@pytest.mark.parametrize(
    "reader",
    [
        ("Relu", ["flat"], ["y"]),  # not an FC
        ("FC", ["w", "flat", "b"], ["y"]),  # the reshaped blob is the FC's weight
    ],
)
def test_reshape_read_by_other_than_fc_data_is_kept(reader: Any) -> None:
    unchanged([*FLATTEN[:-1], reader], INPUTS, ["y"], dict(PARAMS))


def test_fc_with_other_axis_keeps_its_reshape() -> None:
    net = net_from_netdef(netdef(FLATTEN, INPUTS, ["y"]))
    net.replace_op(6, net[6].with_arg("axis", 2))
    assert find_reshape_removal(net, PARAMS.keys().__and__).removed == frozenset()


def test_data_input_at_version_zero_is_kept() -> None:
    ops = [(t, ["x" if n == "r" else n for n in i], o) for t, i, o in FLATTEN[1:]]
    unchanged(ops, INPUTS, ["y"], dict(PARAMS))


def test_data_overwritten_before_the_fc_is_kept() -> None:
    ops = [*FLATTEN[:-1], ("Sigmoid", ["r"], ["r"]), FLATTEN[-1]]
    unchanged(ops, INPUTS, ["y", "r"], dict(PARAMS))


def test_chain_op_read_elsewhere_skips_the_candidate() -> None:
    ops = [*FLATTEN, ("Cast", ["n"], ["batch"])]
    unchanged(ops, INPUTS, ["y", "batch"], dict(PARAMS))


def test_old_shape_in_use_is_kept() -> None:
    ops = [*FLATTEN, ("Shape", ["old"], ["o"])]
    unchanged(ops, INPUTS, ["y", "o"], dict(PARAMS))


def test_chain_shared_by_two_reshapes_is_kept() -> None:
    ops = [
        *FLATTEN,
        ("Reshape", ["r", "shape"], ["flat2", "old2"]),
        ("FC", ["flat2", "w", "b"], ["y2"]),
    ]
    unchanged(ops, INPUTS, ["y", "y2"], dict(PARAMS))


def test_leaf_that_is_not_a_param_skips_the_candidate() -> None:
    params = {k: v for k, v in PARAMS.items() if k != "idx"}  # idx is a real input now
    unchanged(FLATTEN, INPUTS, ["y"], params)


def test_param_read_elsewhere_is_kept() -> None:
    ops = [*FLATTEN, ("Cast", ["idx"], ["i2"])]
    params = dict(PARAMS)
    result, _ = remove_reshape_for_fc(netdef(ops, INPUTS, ["y", "i2"]), params)
    assert [op.type for op in result.op] == ["Relu", "FC", "Cast"]
    assert sorted(params) == ["b", "idx", "w"]
    assert list(result.external_input) == ["x", "idx", "w", "b"]


def test_constant_fills_inside_the_predict_net_are_part_of_the_chain() -> None:
    # The ONNX exporter of tokisamu-PytorchAICamera writes GivenTensorInt64Fill ops inside the
    # predict_net; detectron2 counts their outputs as non-param inputs and keeps the Reshape.
    ops = [
        ("Relu", ["x"], ["r"]),
        ("GivenTensorInt64Fill", [], ["idx"]),
        ("Shape", ["r"], ["s"]),
        ("Gather", ["s", "idx"], ["n"]),
        ("Reshape", ["r", "n"], ["flat", "old"]),
        ("FC", ["flat", "w", "b"], ["y"]),
    ]
    result, _ = remove_reshape_for_fc(netdef(ops, ["x", "w", "b"], ["y"]), {"w": 1, "b": 2})
    assert shape(result)[0] == (("Relu", ("x",), ("r",)), ("FC", ("r", "w", "b"), ("y",)))


def test_pass_drops_params_from_the_init_net() -> None:
    init = Net(
        [
            Op("GivenTensorInt64Fill", [], ["idx"]),
            Op("GivenTensorInt64Fill", [], ["minus_one"]),
            Op("GivenTensorFill", [], ["w"]),
            Op("GivenTensorFill", [], ["b"]),
        ],
        [],
        ["idx", "minus_one", "w", "b"],
    )
    model = Model(net_from_netdef(netdef(FLATTEN, INPUTS, ["y"])), init)
    result = RemoveReshapeForFC().call(model)
    assert result.modified
    assert result.stats == {
        "reshapes_removed": 1,
        "ops_removed": 5,
        "params_removed": 2,
        "init_ops_removed": 2,
    }
    assert shape(init) == (
        (("GivenTensorFill", (), ("w",)), ("GivenTensorFill", (), ("b",))),
        (),
        ("w", "b"),
    )
    assert shape(model.predict_net)[1] == ("x", "w", "b")


def test_pass_keeps_an_init_fill_that_a_kept_init_op_reads() -> None:
    # The init_net copies minus_one into a blob the predict_net does not use: its fill stays.
    init = Net(
        [
            Op("GivenTensorInt64Fill", [], ["idx"]),
            Op("GivenTensorInt64Fill", [], ["minus_one"]),
            Op("Copy", ["minus_one"], ["kept_copy"]),
            Op("GivenTensorFill", [], ["w"]),
            Op("GivenTensorFill", [], ["b"]),
        ],
        [],
        ["idx", "minus_one", "kept_copy", "w", "b"],
    )
    model = Model(net_from_netdef(netdef(FLATTEN, INPUTS, ["y"])), init)
    result = RemoveReshapeForFC().call(model)
    assert result.stats["params_removed"] == 2 and result.stats["init_ops_removed"] == 1
    assert [op.outputs for op in init] == [("minus_one",), ("kept_copy",), ("w",), ("b",)]
    assert init.external_outputs == ("kept_copy", "w", "b")


def test_pass_without_init_net_knows_no_params() -> None:
    model = Model(net_from_netdef(netdef(FLATTEN, INPUTS, ["y"])))
    assert not RemoveReshapeForFC().call(model).modified


def test_drop_in_matches_upstream_outcome_when_upstream_is_right() -> None:
    # detectron2 on FLATTEN (semantics.md 6.8): chain [1..5] removed, FC reads r, params idx
    # and minus_one deleted and removed from external_input.
    params = dict(PARAMS)
    result, _ = remove_reshape_for_fc(netdef(FLATTEN, INPUTS, ["y"]), params)
    assert [op.type for op in result.op] == ["Relu", "FC"]
    assert list(result.op[1].input) == ["r", "w", "b"]
    assert list(result.external_input) == ["x", "w", "b"] and sorted(params) == ["b", "w"]


def test_numerically_equal_on_the_bundled_export() -> None:
    folder = FIXTURES / "models" / "tiny_export"
    model = load_model(folder / "predict_net.pbtxt", folder / "init_net.pbtxt")
    feeds = {"data": np.random.default_rng(1).standard_normal((3, 1, 6, 6)).astype(np.float32)}
    before = run_model(model, feeds)
    records = PassManager.parse("fuse-copy-ops,remove-reshape-for-fc")(model)
    assert [r.modified for r in records if r.round == 1] == [True, True]
    assert not any(op.type in ("Reshape", "Shape", "Gather") for op in model.predict_net)
    np.testing.assert_allclose(run_model(model, feeds)["prob"], before["prob"], rtol=1e-6)


# -- random nets ---------------------------------------------------------------------------------


@st.composite
def reshape_nets(draw: st.DrawFn) -> Net:
    """FLATTEN with random extra readers, overwrites and external outputs mixed in."""
    ops = [Op(t, i, o) for t, i, o in FLATTEN]
    names = ["x", "r", "s", "n", "n1", "shape", "flat", "old", "y", "idx"]
    for _ in range(draw(st.integers(0, 3))):
        position = draw(st.integers(1, len(ops)))
        defined = {n for op in ops[:position] for n in op.outputs} | {"x", "idx"}
        source = draw(st.sampled_from(sorted(defined)))
        target = draw(st.sampled_from([*names, "extra"]))
        kind = draw(st.sampled_from(["Relu", "FC", "Reshape"]))
        ops.insert(position, Op(kind, [source], [target]))
    outs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    return Net(ops, INPUTS, outs)


def reads(net: Net, kept: list[int], removed_reshapes: set[int]) -> tuple[Any, ...]:
    """The value every kept op reads; an FC reading a removed Reshape reads its data."""
    view = net.ssa()

    def source(blob: tuple[str, int]) -> Any:
        producer = view.producer(blob)
        if producer is None:
            return ("start", blob[0])
        if kept[producer] in removed_reshapes:
            return source(view.ssa[producer][0][0])
        return (kept[producer], blob)

    return tuple((kept[i], tuple(source(b) for b in ins)) for i, (ins, _) in enumerate(view.ssa))


@settings(max_examples=300, deadline=None)
@given(reshape_nets())
def test_random_nets_keep_reads_and_ssa_invariants(net: Net) -> None:
    findings = len(verify(net))
    removal = find_reshape_removal(net, PARAMS.keys().__and__)
    before = dict(
        (i, r)
        for i, r in reads(net, list(range(len(net))), set(removal.reshapes))
        if i not in removal.removed
    )
    finals_before = [net.ssa().producer(b) for b in net.ssa().external_outputs]
    with net.edit() as edit:  # what the pass does with a removal
        for reshaped, data in removal.rewires:
            edit.replace_all_uses_with(reshaped, data)
        for index in removal.removed:
            edit.remove(index)
    kept = [i for i in range(len(net) + len(removal.removed)) if i not in removal.removed]
    after = dict(reads(net, kept, set()))
    # Blob versions may renumber when writes go away; compare producers only.
    strip = lambda r: tuple(s if s[0] == "start" else s[0] for s in r)  # noqa: E731
    assert {i: strip(r) for i, r in after.items()} == {i: strip(r) for i, r in before.items()}
    assert [
        kept[p] if p is not None else None
        for p in (net.ssa().producer(b) for b in net.ssa().external_outputs)
    ] == finals_before
    assert len(verify(net)) <= findings
    assert find_reshape_removal(net, PARAMS.keys().__and__).removed == frozenset()


# -- the real model files ------------------------------------------------------------------------


def _load(path: Path) -> caffe2_pb2.NetDef | None:
    """Parse a file as a NetDef with protobuf itself; ``None`` when it is not one."""
    net = caffe2_pb2.NetDef()
    try:
        if path.suffix == ".pbtxt":
            text_format.Parse(path.read_text().replace("cuda_gpu_id", "device_id"), net)
        else:
            net.ParseFromString(path.read_bytes())
    except (text_format.ParseError, UnicodeDecodeError, ValueError):
        return None
    return net


def _real_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".pb", ".pbtxt"))


def test_all_three_passes_run_on_every_real_netdef(real_fixtures: Path) -> None:
    parsed = 0
    for path in _real_files(real_fixtures):
        original = _load(path)
        if original is None or not original.op:
            continue
        parsed += 1
        net = caffe2_pb2.NetDef()
        net.CopyFrom(original)
        fuse_copy_between_cpu_and_gpu(net)
        result, _ = remove_reshape_for_fc(net, {})
        identify_reshape_sub_graph(result)
        model = model_from_netdefs(result)
        PassManager.parse("fuse-copy-ops,remove-reshape-for-fc")(model)
        if original.op[0].output:
            rename_op_output(net, 0, 0, original.op[0].output[0] + "__renamed")
    assert parsed > 100


def test_real_onnx_export_loses_its_reshape_before_fc(real_fixtures: Path) -> None:
    folder = real_fixtures / "HungMingWu-pytorch_caffe2_cpp_binding"
    predict, init = _load(folder / "predict_net.pb"), _load(folder / "init_net.pb")
    assert predict is not None and init is not None
    model = model_from_netdefs(predict, init)
    records = PassManager.parse("remove-reshape-for-fc")(model)
    assert records[0].stats["reshapes_removed"] == 1
    types = [op.type for op in model.predict_net]
    assert "Reshape" not in types
    fc = next(op for op in model.predict_net if op.type == "FC")
    assert fc.inputs[0] == "19"  # the Relu output the Reshape read


@pytest.mark.parametrize(
    "relative",
    [
        "tokisamu-PytorchAICamera/squeeze_predict_net.pb",
        "glow/caffe2Models/gather_const_fold.pbtxt",
    ],
)
def test_real_shape_chains_ending_in_an_external_output_are_kept(
    real_fixtures: Path, relative: str
) -> None:
    predict = _load(real_fixtures / relative)
    assert predict is not None
    params = {name: None for name in predict.external_input}
    result, _ = remove_reshape_for_fc(predict, params)
    assert result.SerializeToString() == predict.SerializeToString()


def test_real_shape_chain_before_an_fc_is_removed(real_fixtures: Path) -> None:
    # tokisamu's export with an FC appended after its flatten: Shape/Gather/ExpandDims/Concat,
    # the in-net GivenTensorInt64Fill constants and the Reshape all go.
    predict = _load(real_fixtures / "tokisamu-PytorchAICamera/squeeze_predict_net.pb")
    assert predict is not None
    predict.op.add(type="FC", input=["124", "fc_w", "fc_b"], output=["logits"])
    predict.external_input.extend(["fc_w", "fc_b"])
    predict.external_output[:] = ["logits"]
    params = {name: None for name in predict.external_input}
    result, _ = remove_reshape_for_fc(predict, params)
    types = [op.type for op in result.op]
    for gone in ("Shape", "Gather", "ExpandDims", "GivenTensorInt64Fill", "Reshape"):
        assert gone not in types
    assert len(result.op) == len(predict.op) - 8
    assert list(result.op[-1].input) == ["116", "fc_w", "fc_b"]

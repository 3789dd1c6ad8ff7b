"""remove-dead-ends: correct liveness on versioned blobs, kept ops, the drop-in NetDef function,
and every real NetDef."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_REAL
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.analysis.liveness import dead_end_op_indices
from graphtools.dialects import op_table
from graphtools.errors import SerdeError
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.passes import remove_dead_end_ops
from graphtools.passes.remove_dead_ends import RemoveDeadEnds
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_net
from graphtools.serde.codec import model_from_netdefs, net_to_netdef
from graphtools.wellformed import verify

FIXTURES_REAL = SHARED_REAL


def _dead(net: Net, *, keep_side_effects: bool = True) -> list[int]:
    """The analysis with the Caffe2 table's kept ops, as the pass calls it."""
    kept = op_table(net).kept_ops(net, side_effects=keep_side_effects)
    return dead_end_op_indices(net, kept=kept, keep_side_effects=keep_side_effects)


def _run(net: Net, **options: object) -> tuple[list[str], dict[str, int], bool]:
    """Run the pass through the manager (so every check applies); op names, stats, modified."""
    model = Model(net)
    manager = PassManager([RemoveDeadEnds(**options)], steps=1)  # type: ignore[arg-type]
    [record] = manager(model)
    return [op.name or op.type for op in net], record.stats, record.modified


def test_docstring_example() -> None:
    net = Net([Op("Relu", ["x"], ["a"]), Op("Sigmoid", ["x"], ["y"])], ["x"], ["y"])
    assert _run(net) == (["Sigmoid"], {"ops_removed": 1}, True)


def test_blob_read_by_a_dead_and_a_live_op_keeps_its_producer() -> None:
    # detectron2 calls 'a' dead because one of its consumers (#1) was removed, and deletes #0
    # although #2 still reads it (semantics.md 6.10). Here #0 stays.
    net = Net(
        [Op("Relu", ["x"], ["a"]), Op("Sigmoid", ["a"], ["unused"]), Op("Tanh", ["a"], ["y"])],
        ["x"],
        ["y"],
    )
    assert _run(net) == (["Relu", "Tanh"], {"ops_removed": 1}, True)


def test_in_place_chain_is_live_through_its_last_version() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["t"], name="t1"),
            Op("Sigmoid", ["t"], ["t"], name="t2"),
            Op("Tanh", ["t"], ["z"], name="z"),
            Op("Abs", ["t"], ["t"], name="t3"),
        ],
        ["x"],
        ["t"],
    )
    assert _run(net)[0] == ["t1", "t2", "t3"]


def test_in_place_write_after_the_last_use_is_dead() -> None:
    net = Net(
        [
            Op("Relu", ["x"], ["t"], name="t1"),
            Op("Abs", ["t"], ["y"], name="y"),
            Op("Sigmoid", ["t"], ["t"], name="t2"),
        ],
        ["x"],
        ["y"],
    )
    assert _run(net)[0] == ["t1", "y"]


def test_side_effect_and_no_output_ops() -> None:
    def net() -> Net:
        return Net(
            [
                Op("Relu", ["x"], ["a"], name="feeds-print"),
                Op("Print", ["a"], [], name="print"),
                Op("Save", ["x"], ["unused"], name="save"),
                Op("CustomSink", ["x"], [], name="sink"),
                Op("MyLogger", ["x"], ["log"], name="custom"),
                Op("Sigmoid", ["x"], ["y"], name="y"),
            ],
            ["x"],
            ["y"],
        )

    assert _run(net())[0] == ["feeds-print", "print", "save", "sink", "y"]
    assert _run(net(), keep_types=("MyLogger",))[0] == [
        "feeds-print",
        "print",
        "save",
        "sink",
        "custom",
        "y",
    ]
    assert _run(net(), keep_side_effects=False) == (["y"], {"ops_removed": 5}, True)


def test_repeated_outputs() -> None:
    net = Net(
        [Op("Split", ["x"], ["y", "y"], name="live"), Op("Split", ["x"], ["u", "u"], name="dead")],
        ["x"],
        ["y"],
    )
    assert _run(net)[0] == ["live"]


def test_control_inputs_count_as_reads() -> None:
    net = Net(
        [
            Op("ConstantFill", [], ["barrier"], name="barrier"),
            Op("Relu", ["x"], ["y"], control_inputs=["barrier"], name="y"),
        ],
        ["x"],
        ["y"],
    )
    assert _run(net)[0] == ["barrier", "y"]


def test_ops_holding_nested_nets_are_kept_with_their_reads() -> None:
    # The If lists no outputs but its branch writes 'y' and reads 'w' from the enclosing net.
    then_net = Net([Op("Add", ["x", "w"], ["y"])], ["x", "w"], ["y"])
    net = Net(
        [
            Op("Relu", ["x"], ["w"], name="w"),
            Op("Relu", ["x"], ["dead"], name="dead"),
            Op("If", ["cond"], [], args={"then_net": then_net}, name="if"),
        ],
        ["x", "cond"],
        ["y"],
    )
    assert _run(net, keep_side_effects=False)[0] == ["w", "if"]


def test_net_without_external_outputs_is_left_alone() -> None:
    net = Net([Op("Relu", ["x"], ["a"])], ["x"], [])
    assert _run(net) == (["Relu"], {"ops_removed": 0, "skipped_no_external_outputs": 1}, False)
    assert _dead(net) == []


def test_pipeline_spec_and_fixpoint() -> None:
    net = Net(
        [Op("Relu", ["x"], ["a"]), Op("Print", ["a"], []), Op("Tanh", ["x"], ["y"])], ["x"], ["y"]
    )
    model = Model(net)
    records = PassManager.parse("remove-dead-ends{keep_side_effects=false}")(model)
    # One run reaches the fixpoint, so round 2 skips the pass (it is idempotent).
    assert [(r.round, r.modified, r.skipped, r.stats) for r in records] == [
        (1, True, False, {"ops_removed": 2}),
        (2, False, True, {}),
    ]
    assert [op.type for op in model.predict_net] == ["Tanh"]
    assert _dead(model.predict_net, keep_side_effects=False) == []


def _netdef() -> caffe2_pb2.NetDef:
    netdef = caffe2_pb2.NetDef()
    text_format.Parse(
        """
        name: "n"
        op { input: "x" output: "a" type: "Relu" }
        op { input: "a" output: "unused" type: "Sigmoid" }
        op { input: "a" output: "y" type: "Tanh" arg { name: "k" i: 3 } }
        external_input: "x"
        external_output: "y"
        """,
        netdef,
    )
    return netdef


def test_remove_dead_end_ops_rewrites_the_netdef_in_place() -> None:
    netdef = _netdef()
    expected = caffe2_pb2.NetDef()
    expected.CopyFrom(netdef)
    del expected.op[1]
    assert remove_dead_end_ops(netdef) is None
    assert netdef == expected
    unchanged = netdef.SerializeToString()
    remove_dead_end_ops(netdef)
    assert netdef.SerializeToString() == unchanged


def test_remove_dead_end_ops_keeps_a_net_without_outputs() -> None:
    netdef = _netdef()
    del netdef.external_output[:]
    before = netdef.SerializeToString()
    remove_dead_end_ops(netdef)
    assert netdef.SerializeToString() == before


def test_keeps_last_write_of_an_external_input_as_state_for_the_next_run() -> None:
    # The LSTM demo nets copy their new hidden state back into the input blob.
    net = Net(
        [
            Op("FC", ["hidden", "w"], ["out"]),
            Op("Copy", ["out"], ["hidden"]),
            Op("Copy", ["out"], ["scratch"]),
        ],
        ["hidden", "w"],
        ["out"],
    )
    assert _dead(net) == [2]
    assert _dead(net, keep_side_effects=False) == [1, 2]


# -- property: the one-sweep liveness equals a naive fixpoint -------------------------------


def _naive_live_ops(net: Net) -> set[int]:
    """Quadratic reference: grow the live set until stable, by blob version."""
    view = net.ssa()
    ssa = view.ssa
    live_blobs = set(view.external_outputs)
    # The last write of an external input is state for the next run.
    live_blobs |= {(n, view.versions[n]) for n in net.external_inputs if view.versions[n]}
    live_ops: set[int] = set()
    changed = True
    while changed:
        changed = False
        for index, (ins, outs) in enumerate(ssa):
            if index not in live_ops and (not outs or any(b in live_blobs for b in outs)):
                live_ops.add(index)
                live_blobs.update(ins)
                changed = True
    return live_ops


_names = st.sampled_from(["a", "b", "c", "d", "x"])
_ops = st.lists(
    st.tuples(st.lists(_names, max_size=3), st.lists(_names, max_size=2)), min_size=1, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(_ops, st.lists(_names, min_size=1, max_size=3))
def test_matches_naive_fixpoint_and_stays_verified(
    ops: list[tuple[list[str], list[str]]], outputs: list[str]
) -> None:
    net = Net([Op("Op", ins, outs) for ins, outs in ops], ["x"], outputs)
    expected_live = _naive_live_ops(net)
    findings = {(f.kind, f.blob) for f in verify(net)}
    dead = _dead(net)
    assert set(dead) == set(range(len(ops))) - expected_live
    net.remove_ops(dead)
    assert {(f.kind, f.blob) for f in verify(net)} <= findings
    assert _dead(net) == []


# -- every real NetDef ---------------------------------------------------------------------------


def _real_netdefs() -> list[Path]:
    if not FIXTURES_REAL.is_dir():
        return []
    return sorted(p for p in FIXTURES_REAL.rglob("*") if p.suffix in (".pb", ".pbtxt"))


def _load(path: Path) -> caffe2_pb2.NetDef:
    try:
        return load_net(path, allow_empty=True)
    except SerdeError as exc:  # a plan, an ONNX model, TensorProtos: not this test's business
        pytest.skip(f"{path.name} is not a NetDef: {exc.reason}")


@pytest.mark.skipif(not FIXTURES_REAL.is_dir(), reason=f"{FIXTURES_REAL} is absent")
@pytest.mark.parametrize("path", _real_netdefs(), ids=lambda p: str(p.relative_to(FIXTURES_REAL)))
def test_real_netdefs(path: Path) -> None:
    netdef = _load(path)
    model = model_from_netdefs(netdef)
    before = {(f.kind, f.net, f.blob) for f in verify(model)}
    records = PassManager.parse("remove-dead-ends")(model)  # fails on a new finding, rolls back
    assert records[-1].modified is False
    assert {(f.kind, f.net, f.blob) for f in verify(model)} <= before
    assert model.predict_net.external_inputs == tuple(netdef.external_input)
    assert model.predict_net.external_outputs == tuple(netdef.external_output)
    # The drop-in function removes exactly the same ops.
    remove_dead_end_ops(netdef)
    assert netdef == net_to_netdef(model.predict_net)

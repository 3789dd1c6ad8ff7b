"""Tests of passes/fuse_copy_ops.py: CPU<->GPU round trips, against detectron2's semantics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.analysis.copies import find_copy_fusion
from graphtools.executor.interpreter import run_model
from graphtools.ir import Model, Net, Op, make_arg
from graphtools.pass_infra import PassManager
from graphtools.passes import fuse_copy_between_cpu_and_gpu
from graphtools.passes.fuse_copy_ops import FuseCopyOps
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.ssa import get_consumer_map, get_ssa
from graphtools.wellformed import verify

TO_GPU, TO_CPU = "CopyCPUToGPU", "CopyGPUToCPU"


def build(ops: list[tuple[str, list[str], list[str]]], ins: list[str], outs: list[str]) -> Net:
    return Net([Op(t, i, o) for t, i, o in ops], ins, outs)


def shape(net: Net | caffe2_pb2.NetDef) -> tuple[Any, ...]:
    if isinstance(net, caffe2_pb2.NetDef):
        net = net_from_netdef(net)
    ops = tuple((op.type, tuple(op.inputs), tuple(op.outputs)) for op in net)
    return ops, tuple(net.external_inputs), tuple(net.external_outputs)


def run_pass(net: Net) -> dict[str, Any]:
    return FuseCopyOps().call(Model(net)).stats


# -- detectron2's semantics, written from semantics.md 6.9, as the reference ------------------


def upstream_fuse(predict_net: caffe2_pb2.NetDef) -> None:
    copies = [TO_GPU, TO_CPU]

    def fuse_once() -> bool:
        ssa, versions = get_ssa(predict_net)
        consumers = get_consumer_map(ssa)
        ext = [(name, versions[name]) for name in predict_net.external_output]
        for op_id, op in enumerate(predict_net.op):
            if op.type not in copies:
                continue
            out = ssa[op_id][1][0]
            ids = [i for i, _ in consumers[out]]
            reverse = copies[1 - copies.index(op.type)]
            if (
                ids
                and out not in ext
                and all(predict_net.op[i].type == reverse and ssa[i][1][0] not in ext for i in ids)
            ):
                for rv in ids:
                    nxt, pos = consumers[ssa[rv][1][0]][0]
                    predict_net.op[nxt].input[pos] = op.input[0]
                kept = [o for i, o in enumerate(predict_net.op) if i != op_id and i not in ids]
                del predict_net.op[:]
                predict_net.op.extend(kept)
                return True
        return False

    while fuse_once():
        pass


# -- the rules -----------------------------------------------------------------------------------


def test_round_trip_is_fused() -> None:
    net = build(
        [(TO_GPU, ["a"], ["b"]), (TO_CPU, ["b"], ["c"]), ("Relu", ["c"], ["y"])], ["a"], ["y"]
    )
    assert run_pass(net) == {"copies_removed": 2, "consumers_rewired": 1}
    assert shape(net) == ((("Relu", ("a",), ("y",)),), ("a",), ("y",))


def test_every_reader_of_the_round_trip_is_rewired() -> None:
    ops = [
        (TO_GPU, ["a"], ["b"]),
        (TO_CPU, ["b"], ["c"]),
        ("Relu", ["c"], ["y"]),
        ("Sigmoid", ["c"], ["z"]),
        ("Add", ["c", "c"], ["w"]),
    ]
    net = build(ops, ["a"], ["y", "z", "w"])
    assert run_pass(net) == {"copies_removed": 2, "consumers_rewired": 3}
    assert shape(net)[0] == (
        ("Relu", ("a",), ("y",)),
        ("Sigmoid", ("a",), ("z",)),
        ("Add", ("a", "a"), ("w",)),
    )
    # detectron2 rewires the first reader only: the others read a blob nothing writes any more.
    upstream = net_to_netdef(build(ops, ["a"], ["y", "z", "w"]))
    upstream_fuse(upstream)
    assert shape(upstream)[0][1] == ("Sigmoid", ("c",), ("z",))
    assert [f.blob for f in verify(net_from_netdef(upstream))] == ["c", "c", "c"]


def test_forward_copy_kept_for_other_readers_but_round_trip_fused() -> None:
    ops = [
        (TO_GPU, ["a"], ["b"]),
        ("Relu", ["b"], ["g"]),
        (TO_CPU, ["b"], ["c"]),
        ("Sigmoid", ["c"], ["y"]),
    ]
    net = build(ops, ["a"], ["g", "y"])
    assert run_pass(net) == {"copies_removed": 1, "consumers_rewired": 1}
    assert shape(net)[0] == (
        (TO_GPU, ("a",), ("b",)),
        ("Relu", ("b",), ("g",)),
        ("Sigmoid", ("a",), ("y",)),
    )
    upstream = net_to_netdef(build(ops, ["a"], ["g", "y"]))
    upstream_fuse(upstream)  # detectron2 gives up on the whole forward copy
    assert shape(upstream) == shape(build(ops, ["a"], ["g", "y"]))


def test_forward_output_declared_external_is_left_alone() -> None:
    ops = [(TO_GPU, ["a"], ["b"]), (TO_CPU, ["b"], ["c"]), ("Relu", ["c"], ["y"])]
    net = build(ops, ["a"], ["y", "b"])
    assert run_pass(net) == {"copies_removed": 0, "consumers_rewired": 0}
    assert shape(net) == shape(build(ops, ["a"], ["y", "b"]))


def test_reverse_output_declared_external_keeps_that_reverse_copy() -> None:
    ops = [
        (TO_GPU, ["a"], ["b"]),
        (TO_CPU, ["b"], ["c"]),
        (TO_CPU, ["b"], ["d"]),
        ("Relu", ["d"], ["y"]),
    ]
    net = build(ops, ["a"], ["c", "y"])
    assert run_pass(net) == {"copies_removed": 1, "consumers_rewired": 1}
    assert shape(net)[0] == (
        (TO_GPU, ("a",), ("b",)),
        (TO_CPU, ("b",), ("c",)),
        ("Relu", ("a",), ("y",)),
    )


def test_reader_after_in_place_overwrite_of_source_is_not_rewired() -> None:
    ops = [
        (TO_GPU, ["a"], ["b"]),
        (TO_CPU, ["b"], ["c"]),
        ("Relu", ["a"], ["a"]),  # a is overwritten in place: a@2
        ("Sigmoid", ["c"], ["y"]),  # must keep reading the old value
    ]
    net = build(ops, ["a"], ["a", "y"])
    assert run_pass(net) == {"copies_removed": 0, "consumers_rewired": 0}
    assert shape(net) == shape(build(ops, ["a"], ["a", "y"]))


def test_reader_that_overwrites_source_itself_is_rewired() -> None:
    ops = [(TO_GPU, ["a"], ["b"]), (TO_CPU, ["b"], ["c"]), ("Add", ["c", "a"], ["a"])]
    net = build(ops, ["a"], ["a"])
    run_pass(net)
    assert shape(net)[0] == (("Add", ("a", "a"), ("a",)),)


def test_round_trip_without_reader_is_left_for_dead_end_removal() -> None:
    # detectron2 raises IndexError here (consumer_map[c][0] of an unread c).
    ops = [(TO_GPU, ["a"], ["b"]), (TO_CPU, ["b"], ["c"]), ("Relu", ["a"], ["y"])]
    upstream = net_to_netdef(build(ops, ["a"], ["y"]))
    with pytest.raises(IndexError):
        upstream_fuse(upstream)
    net = build(ops, ["a"], ["y"])
    assert run_pass(net) == {"copies_removed": 0, "consumers_rewired": 0}
    assert shape(net) == shape(build(ops, ["a"], ["y"]))


def test_chained_round_trips_fuse_in_one_sweep() -> None:
    ops = [
        (TO_GPU, ["a"], ["b"]),
        (TO_CPU, ["b"], ["c"]),
        (TO_GPU, ["c"], ["d"]),
        (TO_CPU, ["d"], ["e"]),
        ("Relu", ["e"], ["y"]),
    ]
    net = build(ops, ["a"], ["y"])
    revision = net.revision
    assert run_pass(net) == {"copies_removed": 4, "consumers_rewired": 1}
    assert net.revision == revision + 1
    assert shape(net)[0] == (("Relu", ("a",), ("y",)),)


def test_gpu_to_cpu_to_gpu_round_trip() -> None:
    ops = [
        ("Relu", ["x"], ["g"]),
        (TO_CPU, ["g"], ["h"]),
        (TO_GPU, ["h"], ["g2"]),
        ("Tanh", ["g2"], ["y"]),
    ]
    net = build(ops, ["x"], ["y"])
    run_pass(net)
    assert shape(net)[0] == (("Relu", ("x",), ("g",)), ("Tanh", ("g",), ("y",)))


def test_names_used_in_nested_nets_are_left_alone() -> None:
    then_net = Net([Op("Relu", ["c"], ["z"])], ["c"], ["z"])
    ops = [
        Op(TO_GPU, ["a"], ["b"]),
        Op(TO_CPU, ["b"], ["c"]),
        Op("Relu", ["c"], ["y"]),
        Op("If", ["cond"], [], args=[make_arg("then_net", then_net)]),
    ]
    net = Net(ops, ["a", "cond"], ["y"])
    assert find_copy_fusion(net).removed == frozenset()


def test_drop_in_function_is_in_place_and_matches_upstream_when_upstream_is_right() -> None:
    ops = [
        ("Relu", ["x"], ["a"]),
        (TO_GPU, ["a"], ["b"]),
        (TO_CPU, ["b"], ["c"]),
        (TO_CPU, ["b"], ["c2"]),
        ("Add", ["c", "c2"], ["y"]),
    ]
    mine = net_to_netdef(build(ops, ["x"], ["y"]))
    upstream = net_to_netdef(build(ops, ["x"], ["y"]))
    assert fuse_copy_between_cpu_and_gpu(mine) is None
    upstream_fuse(upstream)
    assert (
        shape(mine)
        == shape(upstream)
        == ((("Relu", ("x",), ("a",)), ("Add", ("a", "a"), ("y",))), ("x",), ("y",))
    )


def test_pass_in_a_pipeline_and_numerically_on_the_bundled_export() -> None:
    folder = FIXTURES / "models" / "tiny_export"
    model = load_model(folder / "predict_net.pbtxt", folder / "init_net.pbtxt")
    feeds = {"data": np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)}
    before = run_model(model, feeds)
    records = PassManager.parse("fuse-copy-ops")(model)
    assert records[0].stats == {"copies_removed": 2, "consumers_rewired": 3}
    assert not any(op.type.startswith("Copy") for op in model.predict_net)
    after = run_model(model, feeds)
    np.testing.assert_array_equal(after["prob"], before["prob"])


# -- random nets ---------------------------------------------------------------------------------


@st.composite
def copy_nets(draw: st.DrawFn) -> Net:
    defined = ["a", "x"]
    ops = []
    for _ in range(draw(st.integers(3, 10))):
        kind = draw(st.sampled_from([TO_GPU, TO_CPU, TO_GPU, TO_CPU, "Relu", "Add"]))
        ins = [draw(st.sampled_from(defined)) for _ in range(2 if kind == "Add" else 1)]
        out = draw(st.sampled_from([*defined, f"t{len(ops)}", f"t{len(ops)}"]))
        ops.append(Op(kind, ins, [out]))
        if out not in defined:
            defined.append(out)
    exts = draw(st.lists(st.sampled_from(defined), max_size=2, unique=True))
    return Net(ops, ["a", "x"], exts)


def values(net: Net, kept: list[int]) -> tuple[Any, ...]:
    """What every op reads: its root value (through copies) and the parity of copies on the way."""
    view = net.ssa()
    roots: dict[tuple[str, int], tuple[Any, int]] = {}

    def root(blob: tuple[str, int]) -> tuple[Any, int]:
        producer = view.producer(blob)
        if producer is None:
            return ("start", blob[0]), 0
        if net[producer].type in (TO_GPU, TO_CPU):
            value, parity = roots[view.ssa[producer][0][0]]
            return value, 1 - parity
        return (kept[producer], blob[0]), 0

    reads = []
    for index, (ins, outs) in enumerate(view.ssa):
        for blob in ins:
            roots.setdefault(blob, root(blob))
        if net[index].type not in (TO_GPU, TO_CPU):
            reads.append((kept[index], tuple(roots[b] for b in ins)))
        for blob in outs:
            roots[blob] = root(blob)
    finals = tuple(roots.get(b) or root(b) for b in view.external_outputs)
    return tuple(reads), finals


@settings(max_examples=400, deadline=None)
@given(copy_nets())
def test_random_nets_keep_values_devices_and_ssa_invariants(net: Net) -> None:
    single_writes = all(v == 1 for v in net.ssa().versions.values() if v)
    before = values(net, list(range(len(net))))
    findings_before = len(verify(net))
    fusion = find_copy_fusion(net)
    with net.edit() as edit:  # what the pass does with a fusion
        for result, source in fusion.rewires:
            edit.replace_all_uses_with(result, source)
        for index in fusion.removed:
            edit.remove(index)
    kept = [i for i in range(len(net) + len(fusion.removed)) if i not in fusion.removed]
    assert values(net, kept) == before
    assert len(verify(net)) <= findings_before
    if single_writes:  # one sweep reaches the fixpoint unless names are overwritten
        assert find_copy_fusion(net).removed == frozenset()

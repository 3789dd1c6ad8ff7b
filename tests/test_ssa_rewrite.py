"""SSA renaming for ONNX export: both historic naming rules, refusals, collisions."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.errors import (
    IllegalRewriteError,
    InvalidArgumentError,
    InvalidNetError,
    UnsupportedOpError,
)
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import available_passes
from graphtools.passes import ssa_rewrite
from graphtools.passes.ssa_rewrite import SSARewrite
from graphtools.serde.codec import net_to_netdef
from graphtools.ssa import get_ssa


def names(net: Net) -> list[tuple[list[str], list[str]]]:
    return [(list(op.inputs), list(op.outputs)) for op in net.ops]


def in_place_chain() -> Net:
    return Net([Op("Relu", ["X"], ["X"]), Op("Relu", ["X"], ["X"])], ["X"], ["X"])


def test_registered_and_changes_interface() -> None:
    assert available_passes()["ssa-rewrite"] is SSARewrite
    assert SSARewrite.changes_interface


def test_multi_in_place_chain() -> None:
    net = in_place_chain()
    ssa_rewrite(net)
    assert names(net) == [(["X"], ["X_1"]), (["X_1"], ["X_2"])]
    assert list(net.external_inputs) == ["X"]
    assert list(net.external_outputs) == ["X_2"]


def test_multi_keeps_single_version_blobs() -> None:
    net = Net([Op("FC", ["x", "W", "b"], ["y"]), Op("Relu", ["y"], ["z"])], ["x", "W", "b"], ["z"])
    before = net_to_netdef(net)
    ssa_rewrite(net)
    assert net_to_netdef(net) == before


def test_multi_repeated_outputs_share_one_name() -> None:
    net = Net([Op("Split", ["a"], ["y", "y"]), Op("Relu", ["y"], ["z"])], ["a"], ["z"])
    ssa_rewrite(net)
    assert names(net) == [(["a"], ["y", "y"]), (["y"], ["z"])]
    net = Net([Op("Relu", ["y"], ["y"]), Op("Split", ["y"], ["y", "y"])], ["y"], ["y"])
    ssa_rewrite(net)
    assert names(net) == [(["y"], ["y_1"]), (["y_1"], ["y_3", "y_3"])]
    assert list(net.external_outputs) == ["y_3"]


def test_multi_is_idempotent() -> None:
    net = Net(
        [Op("Relu", ["X"], ["X"]), Op("Add", ["X", "Y"], ["Y"]), Op("Relu", ["Y"], ["X"])],
        ["X", "Y"],
        ["X", "Y"],
    )
    ssa_rewrite(net)
    once = net_to_netdef(net)
    ssa_rewrite(net)
    assert net_to_netdef(net) == once


def test_multi_leaves_init_net_and_value_info_alone() -> None:
    net = Net([Op("Add", ["X", "W"], ["X"])], ["X", "W"], ["X"])
    init = Net([Op("GivenTensorFill", [], ["W"])], external_outputs=["W"])
    info = {"X": (1, [2])}
    ssa_rewrite(net, init, info)
    assert names(net) == [(["X", "W"], ["X_1"])]
    assert list(init[0].outputs) == ["W"] and info == {"X": (1, [2])}


def test_all_style_names_every_version() -> None:
    net = Net([Op("FC", ["X", "W"], ["Y"]), Op("Relu", ["Y"], ["Y"])], ["X", "W"], ["Y"])
    init = Net([Op("GivenTensorFill", [], ["W"])], ["seed"], ["W"])
    info = {"X": "float[1,2]"}
    ssa_rewrite(net, init, info, style="all")
    assert names(net) == [(["X_0", "W_0"], ["Y_1"]), (["Y_1"], ["Y_2"])]
    assert list(net.external_inputs) == ["X_0", "W_0"]
    assert list(net.external_outputs) == ["Y_2"]
    assert list(init[0].outputs) == ["W_0"]
    assert list(init.external_inputs) == ["seed_0"] and list(init.external_outputs) == ["W_0"]
    assert info == {"X_0": "float[1,2]"}


def test_collision_with_an_existing_blob_gets_a_suffix() -> None:
    net = Net(
        [Op("Relu", ["x"], ["x"]), Op("Relu", ["x"], ["x"]), Op("Add", ["x", "x_1"], ["y"])],
        ["x", "x_1"],
        ["x", "y"],
    )
    ssa_rewrite(net)
    assert names(net) == [
        (["x"], ["x_1_1"]),
        (["x_1_1"], ["x_2"]),
        (["x_2", "x_1"], ["y"]),
    ]
    assert list(net.external_outputs) == ["x_2", "y"]


def test_suffix_skips_names_taken_by_other_renamed_blobs() -> None:
    # x_1 (an input) is kept, so x@1 cannot be x_1; x_1_1 is the plain name of x_1@1,
    # so x@1 takes the next free suffix.
    net = Net(
        [
            Op("Relu", ["x"], ["x"]),
            Op("Relu", ["x_1"], ["x_1"]),
            Op("Relu", ["x"], ["x"]),
        ],
        ["x", "x_1"],
        ["x", "x_1"],
    )
    ssa_rewrite(net)
    assert names(net) == [(["x"], ["x_1_2"]), (["x_1"], ["x_1_1"]), (["x_1_2"], ["x_2"])]


def test_names_used_by_the_init_net_are_not_reused() -> None:
    net = Net([Op("Relu", ["a"], ["a"]), Op("Relu", ["a"], ["a"])], ["a"], ["a"])
    init = Net([Op("GivenTensorFill", [], ["a_1"])])
    ssa_rewrite(net, init)
    assert names(net) == [(["a"], ["a_1_1"]), (["a_1_1"], ["a_2"])]


def test_refuses_init_ops_other_than_given_tensor_fills() -> None:
    net = in_place_chain()
    before = net_to_netdef(net)
    init = Net([Op("GivenTensorIntFill", [], ["i"]), Op("XavierFill", [], ["w"])])
    with pytest.raises(UnsupportedOpError, match=r"op 1 \(XavierFill\)"):
        ssa_rewrite(net, init)
    assert net_to_netdef(net) == before
    with pytest.raises(InvalidNetError, match=r"op 0 \(GivenTensorFill\) writes 2"):
        ssa_rewrite(net, Net([Op("GivenTensorFill", [], ["a", "b"])]))


def test_external_output_must_exist() -> None:
    with pytest.raises(InvalidNetError, match="'ghost'"):
        ssa_rewrite(Net([Op("Relu", ["a"], ["b"])], ["a"], ["ghost"]))


def test_unknown_style() -> None:
    with pytest.raises(InvalidArgumentError, match="'some'"):
        ssa_rewrite(in_place_chain(), style="some")


def test_netdefs_are_rewritten_in_place() -> None:
    net = net_to_netdef(in_place_chain())
    init = net_to_netdef(Net([Op("GivenTensorFill", [], ["W"])], external_outputs=["W"]))
    ssa_rewrite(net, init, style="all")
    assert [list(op.output) for op in net.op] == [["X_1"], ["X_2"]]
    assert list(net.external_input) == ["X_0"] and list(init.external_output) == ["W_0"]


def test_pass_reports_renamed_blobs() -> None:
    model = Model(in_place_chain())
    result = SSARewrite().call(model)
    assert result.modified and result.stats == {"blobs_renamed": 2}
    again = SSARewrite().call(model)
    assert not again.modified and again.stats == {"blobs_renamed": 0}


def test_pass_with_style_all_reaches_a_fixpoint() -> None:
    init = Net([Op("GivenTensorFill", [], ["W"])], external_outputs=["W"])
    model = Model(Net([Op("Add", ["X", "W"], ["X"])], ["X", "W"], ["X"]), init)
    assert SSARewrite(style="all").call(model).modified
    once = net_to_netdef(model.predict_net)
    assert names(model.predict_net) == [(["X_0", "W_0"], ["X_1"])]
    again = SSARewrite(style="all").call(model)
    assert not again.modified and net_to_netdef(model.predict_net) == once
    # the function itself follows upstream and renames again
    ssa_rewrite(model.predict_net, style="all")
    assert names(model.predict_net) == [(["X_0_0", "W_0_0"], ["X_1_1"])]


def test_nested_net_names_are_not_reused() -> None:
    inner = Net([Op("Relu", ["c"], ["x_1"])])
    net = Net(
        [Op("Relu", ["x"], ["x"]), Op("If", ["c"], [], args={"then_net": inner})],
        ["x", "c"],
        ["x"],
    )
    ssa_rewrite(net)
    assert list(net[0].outputs) == ["x_1_1"]


def test_renaming_a_blob_a_nested_net_reads_is_refused() -> None:
    # Upstream renames x@1 to x_1 and leaves the If's branch reading "x", which then reads
    # the net's input instead of the Relu's output: a silently different net.
    inner = Net([Op("Relu", ["x"], ["z"])])
    net = Net(
        [Op("Relu", ["x"], ["x"]), Op("If", ["c"], [], args={"then_net": inner})],
        ["x", "c"],
        ["x"],
    )
    before = net_to_netdef(net)
    with pytest.raises(IllegalRewriteError, match="inside its nested net"):
        ssa_rewrite(net)
    assert net_to_netdef(net) == before


BLOBS = st.sampled_from(["a", "b", "c", "a_1", "b_2"])
OPS = st.lists(
    st.tuples(st.lists(BLOBS, max_size=3), st.lists(BLOBS, min_size=1, max_size=2)),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(
    OPS,
    st.lists(BLOBS, unique=True, max_size=3),
    st.lists(BLOBS, unique=True, max_size=3),
    st.sampled_from(["multi", "all"]),
)
def test_every_blob_is_written_by_at_most_one_op(
    ops: list[tuple[list[str], list[str]]], inputs: list[str], outputs: list[str], style: str
) -> None:
    net = Net([Op("Op", ins, outs) for ins, outs in ops], inputs)
    written = {name for _, outs in ops for name in outs}
    net.set_external_outputs([o for o in outputs if o in written or o in inputs])
    ssa_rewrite(net, style=style)
    writers = Counter(name for op in net.ops for name in set(op.outputs))
    assert all(count == 1 for count in writers.values())
    # and nothing is read before it is written, except external inputs and undeclared reads
    ssa, _ = get_ssa(net)
    version_sets: dict[str, set[int]] = {}
    for ins, outs in ssa:
        for name, version in (*ins, *outs):
            version_sets.setdefault(name, set()).add(version)
    assert all(len(versions) == 1 for versions in version_sets.values())
    if style == "multi":
        once = net_to_netdef(net)
        ssa_rewrite(net)
        assert net_to_netdef(net) == once

"""``recurrent_net`` builds the RecurrentNetwork op upstream's ``recurrent.py`` builds: inputs,
outputs, arguments in upstream's order, the backward step net, and typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from recurrent_cells import lstm, sum_mul, tanh_rnn

from graphtools.analysis.recurrent import step_net_of
from graphtools.errors import RecurrentLinkError, RecurrentNetError
from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.recurrent import recurrent_net, set_rnn_executor_config
from graphtools.serde import load_model
from graphtools.serde.codec import op_from_proto
from graphtools.testing import check_gradients

UPSTREAM_ORDER = [
    "alias_src",
    "alias_dst",
    "alias_offset",
    "recurrent_states",
    "initial_recurrent_state_ids",
    "link_internal",
    "link_external",
    "link_offset",
    "enable_rnn_executor",
    "step_net",
    "timestep",
    "param",
    "backward_link_internal",
    "backward_link_external",
    "backward_link_offset",
    "outputs_with_grads",
    "recompute_blobs_on_backward",
    "param_grads",
    "backward_step_net",
]
DEMO = "breadbread1984-Caffe2-C-LSTM-demo/deploy_models"


def _strings(op: Op, name: str) -> list[str]:
    return [s.decode() for s in op.arg(name, ())]


def _demo_like_lstm() -> Op:
    """The LSTM of the demo fixture, built with recurrent_net (its names and inputs)."""
    step = Net(
        [
            Op(
                "FC",
                ["LSTM/hidden_t_prev", "LSTM/gates_t_w", "LSTM/gates_t_b"],
                ["LSTM/gates_t"],
                args={"axis": 2},
            ),
            Op("Sum", ["LSTM/gates_t", "input_t"], ["LSTM/gates_t"]),
            Op(
                "LSTMUnit",
                [
                    "LSTM/hidden_t_prev",
                    "LSTM/cell_t_prev",
                    "LSTM/gates_t",
                    "seq_lengths",
                    "timestep",
                ],
                ["LSTM/hidden_t", "LSTM/cell_t"],
            ),
        ],
        [
            "input_t",
            "timestep",
            "LSTM/hidden_t_prev",
            "LSTM/cell_t_prev",
            "LSTM/gates_t_w",
            "LSTM/gates_t_b",
            "seq_lengths",
        ],
        ["LSTM/hidden_t", "LSTM/cell_t"],
        name="LSTM",
    )
    net = Net([], [], name="lstm_predict_net")
    recurrent_net(
        net,
        step,
        [("input_t", "LSTM/i2h")],
        [("LSTM/hidden_t_prev", "hidden_init"), ("LSTM/cell_t_prev", "cell_init")],
        {"LSTM/hidden_t_prev": "LSTM/hidden_t", "LSTM/cell_t_prev": "LSTM/cell_t"},
        timestep="timestep",
        scope="LSTM",
    )
    return net[0]


def test_arguments_come_in_upstream_order() -> None:
    op = lstm().net[-1]
    assert [a.name for a in op.args] == UPSTREAM_ORDER
    assert op.arg("enable_rnn_executor") == 1 and op.arg("timestep") == b"timestep"
    assert step_net_of(op, "step_net").net_type == "simple"
    assert step_net_of(op, "backward_step_net").name == "RecurrentBackwardStep"


def test_the_op_matches_the_one_in_the_lstm_demo_file(real_fixtures) -> None:  # type: ignore[no-untyped-def]
    """The demo's op was written by a Caffe2 builder: same inputs, outputs, links, aliases,
    states, params and backward links as ours (its backward step net uses Caffe2's older
    gradient names, ``_split`` instead of ``_autosplit_0``)."""
    directory = real_fixtures / DEMO
    demo = load_model(directory / "lstm_predict_net.pbtxt").predict_net[1]
    ours = _demo_like_lstm()
    assert ours.inputs == demo.inputs and ours.outputs == demo.outputs
    for name in UPSTREAM_ORDER:
        if name in ("step_net", "backward_step_net", "enable_rnn_executor"):
            continue
        assert ours.arg(name) == demo.arg(name), name
    ours_backward = step_net_of(ours, "backward_step_net")
    demo_backward = step_net_of(demo, "backward_step_net")
    assert ours_backward.external_inputs == demo_backward.external_inputs
    assert [op.type for op in ours_backward][:1] == ["LSTMUnitGradient"]


def test_forward_only_arguments_stop_after_timestep() -> None:
    op = tanh_rnn(forward_only=True).net[-1]
    assert [a.name for a in op.args] == UPSTREAM_ORDER[:11]


def test_recomputed_ops_come_first_in_the_backward_step_net() -> None:
    op = tanh_rnn(recompute_blobs_on_backward=["s", "g"]).net[-1]
    backward = step_net_of(op, "backward_step_net")
    assert [o.type for o in backward][:2] == ["FC", "Sum"]
    assert _strings(op, "recompute_blobs_on_backward") == ["g", "s"]


def test_recompute_needs_every_output_of_the_recomputed_op() -> None:
    step = Net(
        [Op("Split", ["x_t"], ["a", "b"], args={"axis": 2}), Op("Mul", ["a", "h_prev"], ["h"])],
        ["x_t", "h_prev"],
        ["h"],
    )
    with pytest.raises(RecurrentNetError, match=r"\['b'\] are output by op Split") as caught:
        recurrent_net(
            Net(),
            step,
            [("x_t", "x")],
            [("h_prev", "h0")],
            {"h_prev": "h"},
            recompute_blobs_on_backward=["a"],
        )
    assert isinstance(caught.value, AssertionError)


def test_outside_gradients_are_summed_into_gradients_from_inside() -> None:
    """A cell output also read inside the step (layer 1 of a stack) gets ``_accum`` + Sum."""
    step = Net(
        [
            Op("Tanh", ["h_prev"], ["h"]),
            Op("Mul", ["h", "x_t"], ["y"]),
            Op("Sum", ["y", "y_prev"], ["y_out"]),
        ],
        ["x_t", "h_prev", "y_prev"],
        ["h", "y_out"],
    )
    net = Net([], ["x", "h0", "y0"])
    recurrent_net(
        net,
        step,
        [("x_t", "x")],
        [("h_prev", "h0"), ("y_prev", "y0")],
        {"h_prev": "h", "y_prev": "y_out"},
        outputs_with_grads=(0, 2),
    )
    backward = step_net_of(net[0], "backward_step_net")
    pairs = [(op.type, op.inputs, op.outputs) for op in backward]
    assert ("Sum", ("h_grad", "h_grad_accum"), ("h_grad",)) in pairs
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((3, 2, 2)),
        "h0": rng.standard_normal((2, 2)),
        "y0": rng.standard_normal((2, 2)),
    }
    check_gradients(net, feeds, ["h_all", "y_out_all"], all_elements=True)


def test_a_gradient_passed_through_to_two_links_is_copied_for_the_second() -> None:
    """``s = h_prev + x_t``: the Sum passes ``s_grad`` to both; upstream bound ``s_grad`` to two
    windows (the recurrent gradient was lost); here the second link reads a copy."""
    step = Net(
        [Op("Sum", ["h_prev", "x_t"], ["s"]), Op("Tanh", ["s"], ["h"])], ["x_t", "h_prev"], ["h"]
    )
    net = Net([], ["x", "h0"])
    recurrent_net(
        net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, outputs_with_grads=(0, 1)
    )
    internals = _strings(net[0], "backward_link_internal")
    assert len(set(internals)) == len(internals) and "s_grad_link2" in internals
    rng = np.random.default_rng(1)
    check_gradients(
        net,
        {"x": rng.standard_normal((3, 2, 2)), "h0": rng.standard_normal((2, 2))},
        ["h_all", "h_last"],
        all_elements=True,
    )


def test_typed_errors_where_upstream_asserted_or_failed_a_lookup() -> None:
    step = Net([Op("Mul", ["x_t", "h_prev"], ["h"])], ["x_t", "h_prev"], ["h"])
    with pytest.raises(RecurrentNetError, match="Only one input blob") as one:
        recurrent_net(
            Net(), step, [("x_t", "x"), ("x_t", "y")], [("h_prev", "h0")], {"h_prev": "h"}
        )
    assert isinstance(one.value, AssertionError)
    with pytest.raises(
        RecurrentLinkError, match="no link for the recurrent input: 'h_prev'"
    ) as link:
        recurrent_net(Net(), step, [("x_t", "x")], [("h_prev", "h0")], {})
    assert isinstance(link.value, KeyError)
    unused = Net([Op("Tanh", ["h_prev"], ["h"])], ["x_t", "h_prev"], ["h"])
    with pytest.raises(RecurrentLinkError, match="no gradient for the cell input: 'x_t'"):
        recurrent_net(Net(), unused, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"})


def test_a_netdef_gets_the_same_op_as_an_ir_net() -> None:
    step = Net(
        [Op("Sum", ["x_t", "h_prev"], ["s"]), Op("Mul", ["x_t", "s"], ["h"])],
        ["x_t", "h_prev"],
        ["h"],
        name="sum_mul_step",
    )
    netdef = caffe2_pb2.NetDef(name="main")
    outputs = recurrent_net(
        netdef, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, scope="sm"
    )
    assert outputs == ["h_all", "h_last"]
    assert op_from_proto(netdef.op[0]) == sum_mul().net[0]


def test_the_default_scope_is_made_unique_in_the_net() -> None:
    step = Net([Op("Mul", ["x_t", "h_prev"], ["h"])], ["x_t", "h_prev"], ["h"])
    net = Net([], ["x", "h0"], name="main")
    for _ in range(2):
        recurrent_net(net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"})
    assert [op.outputs[-1] for op in net] == [
        "main/recurrent/step_workspaces",
        "main/recurrent_2/step_workspaces",
    ]


def test_set_rnn_executor_config() -> None:
    op = tanh_rnn().net[0]
    configured = set_rnn_executor_config(op, num_threads=4)
    assert isinstance(configured, Op) and configured.arg("rnn_executor.num_threads") == 4
    with pytest.raises(RecurrentNetError):
        set_rnn_executor_config(Op("FC"), num_threads=1)


def test_scripts_of_the_generation_with_scratch_sizes_still_run() -> None:
    """Issue 21 item 11: the first ``recurrent_net`` took ``scratch_sizes`` (sizes to
    preallocate the scratch blobs with) as its sixth argument, before ``timestep`` and
    ``scope``; scripts written for it, by keyword or by position, build the same op."""
    step = Net(
        [Op("Sum", ["x_t", "h_prev"], ["s"]), Op("Mul", ["x_t", "s"], ["h"])],
        ["x_t", "timestep", "h_prev"],
        ["h"],
        name="sum_mul_step",
    )
    args = (step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"})
    today = Net([], ["x", "h0"], name="main")
    recurrent_net(today, *args, timestep="timestep", scope="sm")
    by_keyword = Net([], ["x", "h0"], name="main")
    recurrent_net(by_keyword, *args, scratch_sizes=[4], timestep="timestep", scope="sm")
    by_position = Net([], ["x", "h0"], name="main")
    recurrent_net(by_position, *args, [4], "timestep", "sm")
    assert by_keyword[0] == today[0] and by_position[0] == today[0]


def _main_reading_w_in_its_step_net(text: bool, in_place: bool = False) -> caffe2_pb2.NetDef:
    """``w = Relu(w_raw)`` (then ``w = Relu(w)`` when ``in_place``), then a recurrent net whose
    step net reads ``w`` by name, a nested NetDef or (as old frontends wrote it) NetDef text."""
    cell = caffe2_pb2.NetDef(name="cell")
    cell.op.add(type="Mul", input=["h_prev", "w"], output=["hw"])
    cell.op.add(type="Add", input=["hw", "x_t"], output=["h"])
    cell.external_input.extend(["x_t", "h_prev", "w"])
    cell.external_output.append("h")
    net = caffe2_pb2.NetDef(name="main")
    net.op.add(type="Relu", input=["w_raw"], output=["w"])
    if in_place:
        net.op.add(type="Relu", input=["w"], output=["w"])
    net.external_input.extend(["seq", "h0", "w_raw"])
    outputs = recurrent_net(
        net, cell, [("x_t", "seq")], [("h_prev", "h0")], {"h_prev": "h"}, forward_only=True
    )
    net.external_output.append(outputs[0])
    if text:
        for arg in net.op[-1].arg:
            if arg.name == "step_net":
                arg.s = str(arg.n).encode()
                arg.ClearField("n")
    return net


@pytest.mark.parametrize("text", [False, True], ids=["netdef", "text"])
def test_a_step_net_given_as_text_is_a_nested_net_to_the_rewrites(text: bool) -> None:
    """Renaming or versioning ``w`` would leave the step net reading the old name (the text
    form was invisible: the rename was accepted and the result no longer ran, ssa_rewrite
    changed the outputs): both forms are refused alike, and the file is unchanged."""
    from graphtools.errors import IllegalRewriteError
    from graphtools.passes import rename_op_output, ssa_rewrite
    from graphtools.serde.codec import as_net

    net = _main_reading_w_in_its_step_net(text)
    assert as_net(net)[1].has_nested_nets()
    before = net.SerializeToString()
    with pytest.raises(IllegalRewriteError, match="nested net"):
        rename_op_output(net, 0, 0, "w_renamed")
    assert net.SerializeToString() == before
    net = _main_reading_w_in_its_step_net(text, in_place=True)
    before = net.SerializeToString()
    with pytest.raises(IllegalRewriteError, match="nested net"):
        ssa_rewrite(net)
    assert net.SerializeToString() == before


def test_a_text_step_net_inside_a_branch_is_read_by_the_branch() -> None:
    from graphtools.nested import names_in_nested_nets
    from graphtools.serde.codec import as_net

    step = b'name: "cell" op { type: "Mul" input: "h_prev" input: "w" output: "h" }'
    recurrent = caffe2_pb2.OperatorDef(type="RecurrentNetwork", input=["seq"], output=["out"])
    recurrent.arg.add(name="step_net", s=step)
    top = caffe2_pb2.NetDef(name="main")
    top.op.add(type="Relu", input=["w_raw"], output=["w"])
    branch = top.op.add(type="If", input=["cond"], output=["out"])
    then = branch.arg.add(name="then_net")
    then.n.name = "then"
    then.n.op.append(recurrent)
    assert "w" in names_in_nested_nets(as_net(top))

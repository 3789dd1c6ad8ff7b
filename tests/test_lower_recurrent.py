"""The pass ``lower-recurrent-networks``: what it unrolls, keeps and refuses, and the LSTM demo
net of ``../shared/fixtures-real`` (its step nets are text in string arguments)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from recurrent_cells import tanh_rnn
from test_executor_recurrent import _as_text
from test_recurrent_numbers import input_shapes, run

from graphtools.errors import UnsupportedOpError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.passes.lower_recurrent import LowerRecurrentNetworks
from graphtools.recurrent import recurrent_net
from graphtools.serde import load_model
from graphtools.wellformed import verify

DEMO = "breadbread1984-Caffe2-C-LSTM-demo/deploy_models"


def test_the_sequence_length_comes_from_the_option_or_the_shapes() -> None:
    cell = tanh_rnn()
    kept = Model(cell.net.copy())
    result = LowerRecurrentNetworks()(kept)
    assert not result.modified and result.stats["kept"] == 1
    by_option = Model(cell.net.copy())
    shapes = tuple(s for s in input_shapes(cell.feeds) if not s.startswith("x:"))
    result = LowerRecurrentNetworks(seq_len=3, input_shapes=shapes)(by_option)
    assert result.stats == {"lowered": 1, "gradients_lowered": 0, "ops_added": 12, "kept": 0}
    expected = run(cell.net, cell.feeds)
    flat = run(by_option.predict_net, cell.feeds)
    np.testing.assert_array_equal(flat.fetch("h_all"), expected.fetch("h_all"))


def test_the_pass_runs_in_a_pipeline_and_reaches_its_fixpoint() -> None:
    cell = tanh_rnn()
    model = Model(cell.net.copy())
    spec = "lower-recurrent-networks{input_shapes=" + ";".join(input_shapes(cell.feeds)) + "}"
    PassManager.parse(spec)(model)
    assert [op.type for op in model.predict_net].count("RecurrentNetwork") == 0
    assert not LowerRecurrentNetworks(input_shapes=input_shapes(cell.feeds))(model).modified


def test_step_nets_given_as_text_are_unrolled() -> None:
    cell = tanh_rnn()
    textual = Net([_as_text(cell.net[0])], cell.net.external_inputs)
    model = Model(textual)
    assert LowerRecurrentNetworks(input_shapes=input_shapes(cell.feeds))(model).modified
    flat = run(model.predict_net, cell.feeds)
    np.testing.assert_array_equal(flat.fetch("h_all"), run(cell.net, cell.feeds).fetch("h_all"))


def test_an_op_whose_step_workspaces_other_ops_read_is_kept() -> None:
    cell = tanh_rnn()
    net = cell.net.copy()
    net.append_op(Op("RecurrentNetworkBlobFetcher", ["rnn/step_workspaces"], ["names"]))
    result = LowerRecurrentNetworks(input_shapes=input_shapes(cell.feeds))(Model(net))
    assert not result.modified and result.stats["kept"] == 1


def test_a_step_writing_a_blob_of_the_enclosing_net_is_refused_and_the_model_kept() -> None:
    step = Net(
        [Op("Copy", ["x_t"], ["last_input"]), Op("Copy", ["h_prev"], ["h"])],
        ["x_t", "h_prev"],
        ["h"],
    )
    net = Net([], ["x", "h0", "last_input"])
    recurrent_net(net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, forward_only=True)
    model = Model(net)
    before = model.predict_net.copy()
    with pytest.raises(
        UnsupportedOpError, match="writes 'last_input', a blob of the enclosing net"
    ):
        LowerRecurrentNetworks(seq_len=2, input_shapes=("h0:2x2",))(model)
    assert model.predict_net.same_as(before)


def test_a_write_to_a_window_of_several_rows_is_refused() -> None:
    step = Net(
        [Op("Copy", ["x_t"], ["win"]), Op("Copy", ["h_prev"], ["h"])],
        ["x_t", "h_prev", "win"],
        ["h"],
    )
    net = Net([], ["x", "h0", "w0"])
    recurrent_net(net, step, [("x_t", "x")], [("h_prev", "h0")], {"h_prev": "h"}, forward_only=True)
    op = net[0]
    op = op.replace(inputs=[*op.inputs, "w0"]).with_arg("recurrent_states", ["rnn_h", "rnn_w"])
    op = op.with_arg("initial_recurrent_state_ids", [1, 3])
    links = [
        ("h_prev", "rnn_h", 0, 1),
        ("h", "rnn_h", 1, 1),
        ("x_t", "x", 0, 1),
        ("win", "rnn_w", 0, 2),
    ]
    for k, name in enumerate(("link_internal", "link_external", "link_offset", "link_window")):
        op = op.with_arg(name, [link[k] for link in links])
    op = op.with_arg("alias_src", ["rnn_h", "rnn_h"])
    net = Net([op], net.external_inputs)
    with pytest.raises(UnsupportedOpError, match="a link window of 2 rows"):
        LowerRecurrentNetworks(seq_len=2, input_shapes=("h0:2x2", "w0:3x2x2"))(Model(net))


def _demo(real_fixtures: Path) -> tuple[Model, dict[str, np.ndarray]]:
    """The demo's model and random weights of the right shapes: its init_net ``Load``s them
    from an lmdb DB that is not among the fixtures, so that op is dropped."""
    directory = real_fixtures / DEMO
    model = load_model(directory / "lstm_predict_net.pbtxt", directory / "lstm_init_net.pbtxt")
    init = model.init_net
    assert init is not None
    with init.edit() as edit:
        for index, op in enumerate(init):
            if op.type == "Load":
                edit.remove(index)
    rng = np.random.default_rng(7)
    shapes = {
        "LSTM/i2h_w": (400, 62),
        "LSTM/i2h_b": (400,),
        "LSTM/gates_t_w": (400, 100),
        "LSTM/gates_t_b": (400,),
        "char_rnn_blob_0_w": (62, 100),
        "char_rnn_blob_0_b": (62,),
    }
    weights = {
        name: (rng.standard_normal(s) * 0.1).astype(np.float32) for name, s in shapes.items()
    }
    return model, weights


def test_the_lstm_demo_loads_verifies_runs_and_lowers_to_equal_outputs(real_fixtures) -> None:  # type: ignore[no-untyped-def]
    model, weights = _demo(real_fixtures)
    op = model.predict_net[1]
    assert op.type == "RecurrentNetwork" and isinstance(op.arg("step_net"), bytes)
    assert verify(model) == []
    expected = run_model(model, weights)
    assert expected["softmax"].shape == (1, 1, 62)
    np.testing.assert_allclose(expected["softmax"].sum(), 1.0, rtol=1e-5)
    lowered = model.copy()
    result = LowerRecurrentNetworks(input_shapes=("input_blob:1x1x62",))(lowered)
    assert result.stats["lowered"] == 1 and result.stats["kept"] == 0
    assert "RecurrentNetwork" not in [o.type for o in lowered.predict_net]
    assert verify(lowered) == []
    actual = run_model(lowered, weights)
    assert list(actual) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_a_length_read_from_an_init_net_placeholder_is_not_unrolled_for(
    real_fixtures: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The demo's init_net fills its input with a 1x1x62 placeholder that the data replaces:
    unrolled for that one step, a 4-step sequence would fail (or worse, a 1-step one pass). So
    the op is kept, with a warning that says why and what to give; given the shape, the
    unrolled net computes the op's values for a sequence of that length."""
    model, weights = _demo(real_fixtures)
    kept = model.copy()
    with caplog.at_level("WARNING", logger="graphtools"):
        result = LowerRecurrentNetworks()(kept)
    assert not result.modified and result.stats["kept"] == 1
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "kept op #1 (RecurrentNetwork)" in warning
    assert "placeholder of 'input_blob' (Reshape of shape 1x1x62)" in warning
    assert "input_shapes" in warning and "seq_len" in warning

    rows = np.random.default_rng(5).standard_normal((4, 1, 62)).astype(np.float32)
    feeds = {**weights, "input_blob": rows}
    expected = run_model(model, feeds)
    assert expected["softmax"].shape == (4, 1, 62)
    lowered = model.copy()
    result = LowerRecurrentNetworks(input_shapes=("input_blob:4x1x62",))(lowered)
    assert result.stats["lowered"] == 1
    assert [o.type for o in lowered.predict_net].count("LSTMUnit") == 4
    actual = run_model(lowered, feeds)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6)
    assert LowerRecurrentNetworks(seq_len=4)(model.copy()).stats["lowered"] == 1


def _upstream_simple_rnn(step_ops: list[Op]) -> Net:
    """Caffe2's ``recurrent_network_test.simple_rnn``: inputs ``input`` and ``initial_input``,
    a step reading ``input_t`` and ``output_t_prev`` and writing ``output_t``."""
    step = Net(step_ops, ["input_t", "output_t_prev"], ["output_t"], name="step")
    net = Net([], ["input", "initial_input"], name="external")
    recurrent_net(
        net,
        step,
        [("input_t", "input")],
        [("output_t_prev", "initial_input")],
        {"output_t_prev": "output_t"},
        scope="test_rnn_sum_mull",
    )
    return net


@pytest.mark.parametrize(
    "step_ops",
    [
        [Op("Sum", ["input_t", "output_t_prev"], ["s"]), Op("Mul", ["input_t", "s"], ["output_t"])],
        [Op("Mul", ["input_t", "output_t_prev"], ["output_t"])],
    ],
    ids=["test_sum_mul", "test_mul"],
)
@pytest.mark.parametrize("initial_dims", [3, 2, 1])
def test_upstreams_rnn_cases_lower_with_the_sequence_length_alone(
    step_ops: list[Op], initial_dims: int
) -> None:
    """Issue 21 item 11: ``seq_len`` suffices, as the docs say: the initial state's rows are
    shaped at run time from the sequence's batch (upstream feeds ``initial_input`` as
    ``1 x n x d``; an ``n x d`` or a ``d`` initial value runs too)."""
    rng = np.random.default_rng(3)
    for seq_len, n, d in [(1, 1, 1), (3, 2, 4), (4, 5, 2)]:
        net = _upstream_simple_rnn(step_ops)
        initial = rng.standard_normal((1, n, d)).astype(np.float32)
        initial = (
            initial.reshape((1, n, d)[3 - initial_dims :]) if initial_dims > 1 else initial[0, 0]
        )
        feeds = {
            "input": rng.standard_normal((seq_len, n, d)).astype(np.float32),
            "initial_input": initial,
        }
        model = Model(net.copy())
        result = LowerRecurrentNetworks(seq_len=seq_len)(model)
        assert result.stats["lowered"] == 1
        assert verify(model) == []
        expected = run_model(Model(net), feeds)
        for name, value in run_model(model, feeds).items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-6, err_msg=name)


def _demo_pair(real_fixtures: Path, folder: Path) -> Path:
    """The demo as a model folder (predict_net.pbtxt and init_net.pbtxt) in ``folder``."""
    folder.mkdir()
    for name in ("predict_net", "init_net"):
        source = real_fixtures / DEMO / f"lstm_{name}.pbtxt"
        (folder / f"{name}.pbtxt").write_bytes(source.read_bytes())
    return folder


def test_run_unrolls_for_the_shapes_it_is_given_and_never_for_the_placeholder(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --shapes`` (or a shapes.txt beside the model) reaches lower-recurrent-networks:
    it wrote the net unrolled for the init_net's one-step placeholder, silently, whatever
    length the user said the data has."""
    from conftest import run_cli

    pair = _demo_pair(real_fixtures, tmp_path / "demo")
    spec = ["-p", "lower-recurrent-networks"]
    code, _, err = run_cli(capsys, "run", str(pair), *spec, "-o", str(tmp_path / "kept"))
    assert code == 0 and "kept op #1 (RecurrentNetwork)" in err
    kept = load_model(tmp_path / "kept" / "predict_net.pbtxt")
    assert "RecurrentNetwork" in [op.type for op in kept.predict_net]

    given = ["--shapes", "input_blob=3x1x62", "-o", str(tmp_path / "given")]
    code, out, err = run_cli(capsys, "run", str(pair), *spec, *given)
    assert code == 0, err
    assert "'lowered': 1" in out
    flat = load_model(tmp_path / "given" / "predict_net.pbtxt")
    assert [op.type for op in flat.predict_net].count("LSTMUnit") == 3
    # the shapes go with the net unrolled for them: later commands read them as given
    assert (tmp_path / "given" / "shapes.txt").read_text().split() == ["input_blob=3x1x62"]

    (pair / "shapes.txt").write_text("input_blob=5xQx62\n")  # read only when a pass takes it
    code, _, err = run_cli(capsys, "run", str(pair), "-o", str(tmp_path / "default"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", str(pair), *spec, "-o", str(tmp_path / "bad"))
    assert code == 2 and "shapes.txt" in err
    (pair / "shapes.txt").write_text("input_blob=5x1x62\n")
    code, _, err = run_cli(capsys, "run", str(pair), *spec, "-o", str(tmp_path / "beside"))
    assert code == 0, err
    flat = load_model(tmp_path / "beside" / "predict_net.pbtxt")
    assert [op.type for op in flat.predict_net].count("LSTMUnit") == 5


def test_verify_unrolls_for_the_length_it_feeds(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify feeds ``--shapes`` to the pipeline's lowering: the unrolled net runs on the
    same 4-step data as the op (it failed with a Split error, unrolled for one step)."""
    from conftest import run_cli

    pair = _demo_pair(real_fixtures, tmp_path / "demo")
    code, out, err = run_cli(
        capsys, "verify", str(pair), "-p", "lower-recurrent-networks", "--shapes",
        "input_blob=4x1x62",
    )  # fmt: skip
    assert code == 0, err
    assert "'lowered': 1" in out and "outputs equal" in out
    softmax = next(line for line in out.splitlines() if line.startswith("softmax"))
    assert "[4, 1, " in softmax  # the 4 steps' rows


def test_every_run_path_gives_the_pass_the_shapes_and_none_a_guess_or_symbol(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shapes reach the pass on a run written as ONNX, a batch run over a folder and an
    in-place run (whose shapes.txt follows the net); a symbolic length says no length (the
    op is kept), and verify gives the pass only the shapes it was given, never its guess."""
    import onnx
    from conftest import run_cli

    from graphtools.onnx import run_onnxruntime
    from graphtools.serde import save_model

    model, weights = _demo(real_fixtures)
    init = model.init_net
    assert init is not None
    fills = [
        Op(
            "GivenTensorFill",
            [],
            [name],
            args={"shape": list(w.shape), "values": w.ravel().tolist()},
        )
        for name, w in weights.items()
    ]
    with init.edit() as edit:
        edit.insert(len(init), fills)
    pair = tmp_path / "whole"
    save_model(model, pair)
    spec = ["-p", "lower-recurrent-networks"]

    target = tmp_path / "flat.onnx"
    given = ["--shapes", "input_blob=3x1x62"]
    code, _, err = run_cli(capsys, "run", str(pair), *spec, *given, "-o", str(target))
    assert code == 0, err
    exported = onnx.load(str(target))
    assert "Loop" not in {node.op_type for node in exported.graph.node}
    rows = np.random.default_rng(2).standard_normal((3, 1, 62)).astype(np.float32)
    expected = run_model(model, {"input_blob": rows})
    actual = run_onnxruntime(exported, {"input_blob": rows})
    np.testing.assert_allclose(actual["softmax"], expected["softmax"], rtol=1e-5, atol=1e-6)

    symbolic = ["--shapes", "input_blob={T}x1x62", "-o", str(tmp_path / "any")]
    code, _, err = run_cli(capsys, "run", str(pair), *spec, *symbolic)
    assert code == 0 and "kept op #1 (RecurrentNetwork)" in err

    folder = tmp_path / "several"
    for name, steps in (("a", 4), ("b", 2)):
        save_model(model, folder / name)
        (folder / name / "shapes.txt").write_text(f"input_blob={steps}x1x62\n")
    code, _, err = run_cli(capsys, "run", str(folder), *spec, "-o", str(tmp_path / "batch"))
    assert code == 0, err
    for name, steps in (("a", 4), ("b", 2)):
        flat = load_model(tmp_path / "batch" / name)
        assert [op.type for op in flat.predict_net].count("LSTMUnit") == steps

    in_place = tmp_path / "in_place"
    save_model(model, in_place)
    (in_place / "shapes.txt").write_text("input_blob=3x1x62\n")
    code, _, err = run_cli(
        capsys, "run", str(in_place), *spec, "--in-place", "--shapes", "input_blob=5x1x62"
    )
    assert code == 0, err
    assert (in_place / "shapes.txt").read_text().split() == ["input_blob=5x1x62"]

    code, out, err = run_cli(capsys, "verify", str(pair), *spec)
    assert code == 0 and "no pass changed the model" in err + out  # the guessed 1x1x62 is no length

"""graphtools.feeds on RecurrentNetwork ops whose init_net lacks the weights: the step net's
parameters get the shapes its ops need given the linked inputs (states from the initial
values, one time slice of the sequence), and a made-up layer outside the loop feeding the
sequence gets the feature count the step net needs (here 4 gates x hidden, not the default)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_error_line, run_cli
from recurrent_cells import Cell, lstm

from graphtools import save_model
from graphtools.errors import MadeUpDataTooLargeError
from graphtools.feeds import synthesize
from graphtools.ir import Model, Net, Op
from graphtools.recurrent import recurrent_net

SEQ, BATCH, DIM_IN, HIDDEN = 3, 2, 7, 5


def _init(
    tmp_path: Path, loaded: list[str], states: list[str], given: dict[str, np.ndarray]
) -> Net:
    """Fills of the ``given`` parameters, the initial states and the sequence lengths, and a
    ``Load`` of ``loaded`` from a database that is not there (as the LSTM demo ships it)."""
    ops = [
        Op("GivenTensorFill", [], [name], args={"shape": list(v.shape), "values": v.ravel()})
        for name, v in given.items()
    ]
    ops += [Op("XavierFill", [], [name], args={"shape": [BATCH, HIDDEN]}) for name in states]
    ops.append(
        Op("GivenTensorIntFill", [], ["seq_lengths"], args={"shape": [BATCH], "values": [3, 2]})
    )
    db = str(tmp_path / "absent_params")
    ops.append(Op("Load", [], loaded, args={"db": db, "db_type": "lmdb"}))
    return Net(ops, [], [], name="init")


_LSTM_PARAMS = ("i2h_w", "i2h_b", "L/gates_t_w", "L/gates_t_b")


def _lstm_model(tmp_path: Path, loaded: list[str]) -> tuple[Model, Cell]:
    """The test LSTM cell with hidden size ``HIDDEN``; the init_net ships the cell's own
    values of the parameters not ``loaded``."""
    cell = lstm(SEQ, BATCH, DIM_IN, HIDDEN)
    predict = Net(cell.net.ops, cell.net.external_inputs, cell.outputs, name="lstm")
    given = {name: cell.feeds[name] for name in _LSTM_PARAMS if name not in loaded}
    return Model(predict, _init(tmp_path, loaded, ["h0", "c0"], given)), cell


@pytest.mark.parametrize(
    "loaded",
    [
        list(_LSTM_PARAMS),
        ["i2h_w", "i2h_b"],
        ["L/gates_t_w", "L/gates_t_b"],
    ],
    ids=["all-missing", "outer-missing", "step-missing"],
)
def test_lstm_parameters_fit_the_step_net_and_the_outputs_match_numpy(
    tmp_path: Path, loaded: list[str]
) -> None:
    model, cell = _lstm_model(tmp_path, loaded)
    made = synthesize(model, {"x": (SEQ, BATCH, DIM_IN)})
    expected = {
        "i2h_w": (4 * HIDDEN, DIM_IN),
        "i2h_b": (4 * HIDDEN,),
        "L/gates_t_w": (4 * HIDDEN, HIDDEN),
        "L/gates_t_b": (4 * HIDDEN,),
    }
    assert made.params == {name: expected[name] for name in loaded}
    values = {**made.init_values, **made.feeds}
    reference = cell.numpy({k: np.asarray(v, np.float64) for k, v in values.items()})
    for name in cell.outputs:
        np.testing.assert_allclose(made.outputs[name], reference[name], rtol=1e-5, atol=1e-5)


def test_a_tanh_cell_takes_its_hidden_size_from_the_state_it_writes(tmp_path: Path) -> None:
    step = Net(
        [
            Op("FC", ["h_prev", "w", "b"], ["g"], args={"axis": 2}),
            Op("Sum", ["g", "x_t"], ["s"]),
            Op("Tanh", ["s"], ["h"]),
        ],
        ["x_t", "h_prev", "w", "b"],
        ["h"],
        name="tanh_step",
    )
    predict = Net(
        [Op("FC", ["x", "x_w", "x_b"], ["i2h"], args={"axis": 2})],
        ["x", "h0", "x_w", "x_b", "w", "b"],
        name="tanh_rnn",
    )
    outputs = recurrent_net(
        predict, step, [("x_t", "i2h")], [("h_prev", "h0")], {"h_prev": "h"}, scope="rnn"
    )
    predict = Net(predict.ops, predict.external_inputs, outputs, name="tanh_rnn")
    init = _init(tmp_path, ["x_w", "x_b", "w", "b"], ["h0"], {})
    made = synthesize(Model(predict, init), {"x": (SEQ, BATCH, DIM_IN)})
    assert made.params == {
        "x_w": (HIDDEN, DIM_IN),
        "x_b": (HIDDEN,),
        "w": (HIDDEN, HIDDEN),
        "b": (HIDDEN,),
    }
    f = {k: np.asarray(v, np.float64) for k, v in {**made.init_values, **made.feeds}.items()}
    h, rows = f["h0"], []
    for x_t in f["x"]:
        h = np.tanh(np.einsum("nk,hk->nh", h, f["w"]) + f["b"] + x_t @ f["x_w"].T + f["x_b"])
        rows.append(h)
    np.testing.assert_allclose(made.outputs[outputs[0]], np.stack(rows), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(made.outputs[outputs[1]], h[None], rtol=1e-5, atol=1e-5)


def test_a_step_layer_summed_with_the_sequence_slice_takes_its_size() -> None:
    """LeakyRelu is not among the ops known to keep features, so only the Sum with the
    sequence slice (given 5 wide) says what the step FC must output."""
    step = Net(
        [
            Op("FC", ["h_prev", "w", "b"], ["g"], args={"axis": 2}),
            Op("Sum", ["x_t", "g"], ["s"]),
            Op("LeakyRelu", ["s"], ["h"], args={"alpha": 0.1}),
        ],
        ["x_t", "h_prev", "w", "b"],
        ["h"],
        name="leaky_step",
    )
    predict = Net([], ["x", "h0", "w", "b"], name="leaky_rnn")
    links = {"h_prev": "h"}
    outputs = recurrent_net(
        predict, step, [("x_t", "x")], [("h_prev", "h0")], links, scope="rnn", forward_only=True
    )
    predict = Net(predict.ops, predict.external_inputs, outputs, name="leaky_rnn")
    made = synthesize(Model(predict), {"x": (SEQ, BATCH, HIDDEN), "h0": (BATCH, HIDDEN)})
    assert made.params == {"w": (HIDDEN, HIDDEN), "b": (HIDDEN,)}
    f = {k: np.asarray(v, np.float64) for k, v in made.feeds.items()}
    h, rows = f["h0"], []
    for x_t in f["x"]:
        s = x_t + h @ f["w"].T + f["b"]
        h = np.maximum(s, 0.1 * s)
        rows.append(h)
    np.testing.assert_allclose(made.outputs[outputs[0]], np.stack(rows), rtol=1e-5, atol=1e-5)


def test_verify_reaches_a_verdict_on_an_lstm_without_its_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, _ = _lstm_model(tmp_path, list(_LSTM_PARAMS))
    save_model(model, tmp_path / "model", text=True)
    predict = tmp_path / "model" / "predict_net.pbtxt"
    shapes = f"x={SEQ}x{BATCH}x{DIM_IN}"  # the guess would give x a batch of 1, h0 has 2
    code, out, err = run_cli(
        capsys, "verify", "-q", "-p", "default", "--shapes", shapes, str(predict)
    )
    assert code == 0, err
    assert "outputs equal" in out


def test_verify_of_a_mutated_lstm_refuses_made_up_data_too_big_to_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    """Issue 21 item 8: the LSTM demo with its output FC's ``axis`` mutated to 0 makes the
    walks ask for ever wider step layers, up to a 131072x32768 gate weight (32 GiB as numpy
    draws it): a typed error names the blob and its shape instead of a ``MemoryError``
    traceback."""
    source = real_fixtures / "breadbread1984-Caffe2-C-LSTM-demo/deploy_models"
    text = (source / "lstm_predict_net.pbtxt").read_text()
    fc = 'input: "LSTM/hidden_t_all"'
    head, tail = text.split(fc)
    mutated = head + fc + tail.replace("i: 2", "i: 0", 1)
    (tmp_path / "predict_net.pbtxt").write_text(mutated)
    code, _, err = run_cli(capsys, "verify", "-q", str(tmp_path / "predict_net.pbtxt"))
    assert code == 2
    assert_one_error_line(err, "'LSTM/gates_t_w'", "131072x32768", "made-up", "net 'LSTM'")


def test_made_up_data_over_the_limit_is_a_typed_memory_error() -> None:
    """The limit holds for data inputs too, and the error is also a ``MemoryError``."""
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"], name="big")
    with pytest.raises(MadeUpDataTooLargeError, match=r"'x'.*100000x100000") as caught:
        synthesize(Model(net), {"x": (100000, 100000)})
    assert isinstance(caught.value, MemoryError)
    assert caught.value.name == "x" and caught.value.shape == (100000, 100000)

"""Recurrent nets through the ONNX bridge.

Export: RecurrentNetwork ops of the four test cells (and the LSTM demo net) as ONNX ``Loop`` and
``Scan``, run by onnxruntime = our executor = the numpy loop; zero-length sequences through
``Loop``; link patterns without a loop form refused; LSTMUnit with sequence lengths. Import:
ONNX ``LSTM``/``GRU``/``RNN`` nodes (initial states or not, ``sequence_lens`` or not) =
onnxruntime, and exported back = onnxruntime; refusals by attribute name; PyTorch
``nn.LSTM``/``nn.GRU`` exports round-trip.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_round_trip import pair, round_trip
from recurrent_cells import CELLS, Cell, tanh_rnn
from test_lower_recurrent import _demo
from test_recurrent_stateful import conv_op

from graphtools.convert.dtypes import onnx_dtype_of_numpy
from graphtools.errors import UnsupportedOpError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import export_onnx, import_onnx, run_onnxruntime
from graphtools.pass_infra import PassManager


def _value_info(feeds: dict[str, np.ndarray]) -> dict[str, tuple[int, list[int]]]:
    return {k: (onnx_dtype_of_numpy(v.dtype), list(v.shape)) for k, v in feeds.items()}


def _close(actual: dict[str, Any], expected: dict[str, Any], rtol: float) -> None:
    for name, value in expected.items():
        np.testing.assert_allclose(
            np.asarray(actual[name]), value, rtol=rtol, atol=rtol, err_msg=name
        )


def _exportable(cell: Cell) -> Model:
    net = cell.net.copy()
    net.set_external_outputs(cell.outputs)
    return Model(net)


@pytest.mark.parametrize("recurrent", ["loop", "scan"])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cells_export_as_loop_and_scan_equal_to_numpy(name: str, recurrent: str) -> None:
    cell = CELLS[name]()
    model = _exportable(cell)
    exported = export_onnx(model, value_info=_value_info(cell.feeds), recurrent=recurrent)
    kinds = {node.op_type for node in exported.graph.node}
    assert ("Loop" if recurrent == "loop" else "Scan") in kinds and "RecurrentNetwork" not in kinds
    ours = run_model(model, cell.feeds)
    expected = cell.numpy(cell.feeds)
    _close(ours, expected, 1e-10)
    _close(run_onnxruntime(exported, cell.feeds), ours, 1e-9)


def test_a_zero_length_sequence_runs_through_the_loop() -> None:
    cell = tanh_rnn(seq_len=0)
    model = _exportable(cell)
    exported = export_onnx(model, value_info=_value_info(cell.feeds))
    result = run_onnxruntime(exported, cell.feeds)
    assert np.asarray(result["h_all"]).shape == (0, 2, 3)
    np.testing.assert_array_equal(result["h_last"], cell.feeds["h0"][None])


def test_the_lstm_demo_exports_as_a_loop(real_fixtures: Path) -> None:
    model, weights = _demo(real_fixtures)
    assert model.init_net is not None
    fills = [
        Op(
            "GivenTensorFill",
            [],
            [k],
            args={"shape": list(v.shape), "values": v.reshape(-1).tolist()},
        )
        for k, v in weights.items()
    ]
    with model.init_net.edit() as edit:
        edit.insert(len(model.init_net), fills)
    ours = run_model(model, {})
    for recurrent in ("loop", "scan"):
        result = run_onnxruntime(export_onnx(model, recurrent=recurrent), {})
        _close(result, ours, 1e-5)


@pytest.mark.parametrize("drop_states", [0, 1])
def test_an_lstm_unit_with_sequence_lengths_round_trips(drop_states: int) -> None:
    """LSTMUnit's 5-input form (rows past their sequence length keep, or with
    ``drop_states`` zero, their state) is a ``caffe2``-domain function that imports back."""
    rng = np.random.default_rng(0)
    feeds = {
        "h": rng.standard_normal((1, 4, 3)).astype(np.float32),
        "c": rng.standard_normal((1, 4, 3)).astype(np.float32),
        "g": rng.standard_normal((1, 4, 12)).astype(np.float32),
        "lengths": np.int32([0, 2, 3, 5]),
        "t": np.int32([2]),
    }
    args = {"forget_bias": 0.5, "drop_states": drop_states}
    op = Op("LSTMUnit", list(feeds), ["h_t", "c_t"], args=args)
    exported = round_trip(pair([op], list(feeds), ["h_t", "c_t"], {}), feeds)
    assert [n.op_type for n in exported.graph.node] == ["LSTMUnit"]


def test_windowed_links_have_no_loop_form() -> None:
    net = Net([conv_op("c", "x", "x0", "y0")], ["x", "x0", "y0", "w", "b"], ["c/y_all"])
    feeds = {"x": np.zeros((4, 2, 2), np.float32), "x0": np.zeros((2, 2, 2), np.float32)}
    feeds |= {"y0": np.zeros((2, 3), np.float32), "w": np.zeros((3, 6), np.float32)}
    feeds["b"] = np.zeros(3, np.float32)
    with pytest.raises(UnsupportedOpError, match=r"linked at \(offset, window\)"):
        export_onnx(Model(net), value_info=_value_info(feeds))


# -- import ---------------------------------------------------------------------------------

T, N, D_IN, H = 4, 3, 2, 3
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _recurrent_model(
    op_type: str, *, lengths: bool, initial: bool, **attrs: Any
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    gates = GATES[op_type]
    tensors = {
        "W": rng.standard_normal((1, gates * H, D_IN)),
        "R": rng.standard_normal((1, gates * H, H)),
        "B": rng.standard_normal((1, 2 * gates * H)),
    }
    inits = [numpy_helper.from_array((v * 0.5).astype(np.float32), k) for k, v in tensors.items()]
    feeds = {"X": rng.standard_normal((T, N, D_IN)).astype(np.float32)}
    if lengths:
        feeds["lens"] = np.array([4, 2, 1], np.int32)
    node_inputs = ["X", "W", "R", "B", "lens" if lengths else "", "h0" if initial else ""]
    outputs = ["Y", "Y_h"]
    if initial:
        feeds["h0"] = rng.standard_normal((1, N, H)).astype(np.float32)
    if op_type == "LSTM":
        node_inputs.append("c0" if initial else "")
        outputs.append("Y_c")
        if initial:
            feeds["c0"] = rng.standard_normal((1, N, H)).astype(np.float32)
    node = helper.make_node(op_type, node_inputs, outputs, hidden_size=H, **attrs)
    graph = helper.make_graph(
        [node],
        "rnn",
        [
            helper.make_tensor_value_info(k, onnx_dtype_of_numpy(v.dtype), list(v.shape))
            for k, v in feeds.items()
        ],
        [
            helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * (4 if o == "Y" else 3))
            for o in outputs
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), feeds


@pytest.mark.parametrize(
    ("op_type", "attrs"),
    [
        ("LSTM", {}),
        ("LSTM", {"direction": "forward", "layout": 0, "input_forget": 0}),
        ("GRU", {"linear_before_reset": 1}),
        ("GRU", {}),
        ("RNN", {}),
        ("RNN", {"activations": ["Relu"]}),
    ],
    ids=["lstm", "lstm-torch-defaults", "gru-linear-before-reset", "gru", "rnn", "rnn-relu"],
)
@pytest.mark.parametrize("lengths", [False, True], ids=["", "lengths"])
@pytest.mark.parametrize("initial", [True, False], ids=["initial", "zeros"])
def test_onnx_recurrent_nodes_import_and_export_back(
    op_type: str, attrs: dict[str, Any], lengths: bool, initial: bool
) -> None:
    model, feeds = _recurrent_model(op_type, lengths=lengths, initial=initial, **attrs)
    pair = import_onnx(model)
    assert "RecurrentNetwork" in [op.type for op in pair.predict_net]
    expected = run_onnxruntime(model, feeds)
    ours = run_model(pair, feeds)
    _close(ours, expected, 1e-5)
    exported = export_onnx(pair)  # the pair keeps the graph inputs' types
    assert "Loop" in [node.op_type for node in exported.graph.node]
    _close(run_onnxruntime(exported, feeds), expected, 1e-5)


@pytest.mark.parametrize(
    ("attrs", "words"),
    [
        ({"direction": "bidirectional"}, "'direction'='bidirectional'"),
        ({"direction": "reverse"}, "'direction'='reverse'"),
        ({"layout": 1}, "'layout'=1"),
        ({"clip": 3.0}, "'clip'"),
        ({"input_forget": 1}, "'input_forget'=1"),
        ({"activations": ["Relu", "Tanh", "Tanh"]}, "'activations'"),
    ],
)
def test_unsupported_lstm_variants_are_refused_by_name(attrs: dict[str, Any], words: str) -> None:
    model, _ = _recurrent_model("LSTM", lengths=False, initial=True, **attrs)
    with pytest.raises(UnsupportedOpError, match=words):
        import_onnx(model)


def test_peepholes_are_refused() -> None:
    model, _ = _recurrent_model("LSTM", lengths=False, initial=True)
    node = model.graph.node[0]
    node.input.append("P")
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 3 * H), np.float32), "P"))
    with pytest.raises(UnsupportedOpError, match="peepholes"):
        import_onnx(model)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_pytorch_export_round_trips(kind: str, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install torch)")
    pytest.importorskip("onnxscript", reason="torch's default ONNX exporter needs onnxscript")
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(4, 5).eval()
    x = torch.randn(6, 2, 4)
    path = tmp_path / "rnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), input_names=["x"])
    assert kind in [node.op_type for node in onnx.load(str(path)).graph.node]
    pair = import_onnx(path)
    feeds = {"x": x.numpy()}
    ours = run_model(pair, feeds)
    expected = run_onnxruntime(path, feeds)
    _close(ours, expected, 1e-5)
    with torch.no_grad():
        output = module(x)[0].numpy()
    np.testing.assert_allclose(ours[next(iter(ours))], output, rtol=1e-5, atol=1e-6)
    PassManager.parse("default")(pair)
    exported = export_onnx(pair, value_info=_value_info(feeds))
    _close(run_onnxruntime(exported, feeds), expected, 1e-5)


def test_a_dynamic_batch_export_frees_the_batch_of_a_time_major_input(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The LSTM demo reads its input as T x N x D: --dynamic-batch frees dim 1 (dim 0, its
    time, was freed and called N before), and rows at batch 3 are the three rows run apart."""
    from conftest import run_cli
    from test_lower_recurrent import DEMO

    out = tmp_path / "lstm.onnx"
    source = real_fixtures / DEMO / "lstm_predict_net.pbtxt"
    code, _, err = run_cli(
        capsys, "export-onnx", str(source), "--random-params", "--dynamic-batch", "-o", str(out)
    )
    assert code == 0, err
    model = onnx.load(str(out))
    (declared,) = model.graph.input
    dims = [d.dim_param or d.dim_value for d in declared.type.tensor_type.shape.dim]
    assert dims == [1, "N", 62]
    rows = np.random.default_rng(3).standard_normal((1, 3, 62)).astype(np.float32)
    together = run_onnxruntime(model, {declared.name: rows})
    apart = [run_onnxruntime(model, {declared.name: rows[:, i : i + 1]}) for i in range(3)]
    for name, value in together.items():
        assert value.shape[1] == 3
        np.testing.assert_allclose(
            value, np.concatenate([a[name] for a in apart], axis=1), rtol=1e-5, atol=1e-6
        )

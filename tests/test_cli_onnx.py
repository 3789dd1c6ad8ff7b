"""The ONNX commands of the CLI: import-onnx, export-onnx, run on .onnx, verify --onnx."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import FIXTURES, assert_one_error_line, run_cli, save_pair_with_unfit_weights
from onnx import TensorProto, helper, numpy_helper
from onnx_check import graph_model

from graphtools.cli.common import parse_shape_items, parse_shape_specs, shapes_text
from graphtools.errors import UsageError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import import_onnx, run_onnxruntime
from graphtools.serde import load_model_dir, save_model, save_net


def _flatten_before_gemm(path: Path) -> Path:
    """x -> Conv -> Relu -> Shape/Gather/Unsqueeze/Concat/Reshape -> Gemm, as torch writes it."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3), dtype=np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((5, 4 * 4 * 4), dtype=np.float32), "fc_w"),
        numpy_helper.from_array(rng.standard_normal(5, dtype=np.float32), "fc_b"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_import_onnx_writes_a_cleaned_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    code, out, _ = run_cli(
        capsys, "import-onnx", str(source), "-o", str(tmp_path / "pair"), "-p", "default"
    )
    assert code == 0 and "wrote" in out
    pair = load_model_dir(tmp_path / "pair")
    assert [op.type for op in pair.predict_net] == ["Conv", "Relu", "FC"]


def test_run_onnx_to_onnx_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    out_path = tmp_path / "clean.onnx"
    code, out, _ = run_cli(capsys, "run", str(source), "-o", str(out_path))
    assert code == 0 and "opsets ai.onnx 17" in out
    cleaned = onnx.load(str(out_path))
    # run on an ONNX model rewrites the ONNX graph itself: nothing to remove here, no export
    assert [n.op_type for n in cleaned.graph.node] == [
        n.op_type for n in onnx.load(str(source)).graph.node
    ]
    x = np.random.default_rng(1).standard_normal((3, 3, 4, 4), dtype=np.float32)
    np.testing.assert_allclose(
        run_onnxruntime(cleaned, {"x": x})["y"], run_onnxruntime(source, {"x": x})["y"], rtol=1e-5
    )

    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    assert "x={N}x3x4x4\n" in (pair_dir / "shapes.txt").read_text()
    (pair_dir / "shapes.txt").unlink()
    # no shapes.txt, no --shapes: the input's shape comes from m.onnx (N taken as 1)
    code, out, err = run_cli(capsys, "verify", "--onnx", str(source), str(pair_dir), "--per-blob")
    assert code == 0, out
    assert "outputs equal" in out and "no blob outside the tolerances" in out
    assert "shape [1, 3, 4, 4] from" in err

    exported = tmp_path / "again.onnx"
    code, out, _ = run_cli(
        capsys,
        "export-onnx",
        str(pair_dir),
        "-o",
        str(exported),
        "--opset",
        "13",
        "--external-data",
        "--shapes",
        "x=2x3x4x4",
    )
    assert code == 0 and exported.exists()
    assert import_onnx(exported) is not None


def test_verify_onnx_reports_the_first_diverging_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    pair = load_model_dir(pair_dir)
    pair.predict_net.replace_op(1, pair.predict_net[1].replace(type="Sigmoid"))
    save_model(pair, pair_dir)
    code, out, _ = run_cli(
        capsys,
        "verify",
        "--onnx",
        str(source),
        str(pair_dir),
        "--per-blob",
        "--shapes",
        "x=2x3x4x4",
    )
    assert code == 1
    assert "first blob outside the tolerances: op #1 (Sigmoid) writing 'r'" in out


def test_export_onnx_guesses_shapes_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    (pair_dir / "shapes.txt").unlink()  # the shape import-onnx wrote: nothing to guess
    target = tmp_path / "o.onnx"
    code, out, err = run_cli(capsys, "export-onnx", str(pair_dir), "-o", str(target))
    assert code == 0, err
    assert "input x: float32[1, 3, 4, 4] (guessed:" in out and target.exists()
    (graph_input,) = onnx.load(str(target)).graph.input
    assert [d.dim_value for d in graph_input.type.tensor_type.shape.dim] == [1, 3, 4, 4]
    # The model is fixed at the guess (onnxruntime refuses real images): said as a warning.
    assert (
        "warning: the ONNX model takes its inputs only at the shapes guessed here (x=1x3x4x4)"
        in err
    )
    code, _, err = run_cli(
        capsys, "export-onnx", str(pair_dir), "-o", str(target), "--shapes", "x=1x3x4x4"
    )
    assert code == 0 and "warning" not in err, err


def _pair_without_weights(folder: Path) -> Path:
    """A predict_net reading a weight nothing fills, declaring no outputs."""
    net = Net(
        [Op("FC", ["x", "w", "b"], ["y"]), Op("Relu", ["y"], ["r"]), Op("Sigmoid", ["y"], ["s"])],
        ["x", "w", "b"],
        [],
        name="net",
    )
    folder.mkdir()
    save_net(net, folder / "predict_net.pb")
    return folder / "predict_net.pb"


def test_export_onnx_without_weights_names_random_params(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _pair_without_weights(tmp_path / "pair")
    target = str(tmp_path / "o.onnx")
    args = ("--shapes", "x=2x5", "--outputs", "r,s")
    code, _, err = run_cli(capsys, "export-onnx", str(path), "-o", target, *args)
    assert code == 2
    assert_one_error_line(err, "the weights are missing", "'w'", "--random-params")
    code, out, err = run_cli(
        capsys, "export-onnx", str(path), "-o", target, "--shapes", "x=2x5", "--random-params"
    )
    assert code == 0, err
    assert "made up 2 parameters" in err and "declares no external outputs" in err
    assert [o.name for o in onnx.load(target).graph.output] == ["r", "s"]
    code, out, err = run_cli(
        capsys,
        "verify",
        "--onnx",
        target,
        str(path),
        "--shapes",
        "x=2x5",
        "--per-blob",
        "--random-params",
    )
    assert code == 0 and "outputs equal" in out, out + err
    # run takes no --random-params: its advice names the command that does
    code, _, err = run_cli(capsys, "run", str(path), "-o", target, *args)
    assert code == 2
    assert_one_error_line(err, "the weights are missing", "use export-onnx --random-params")


def test_run_to_onnx_suggests_an_input_shape_that_fits_the_net(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run PAIR -o X.onnx without --shapes suggested 1x3x224x224 whatever the net: a LeNet
    on one channel refused the suggestion with "cannot be inferred (its rank)"."""
    w = np.ones((2, 1, 3, 3), np.float32)
    init = Net(
        [Op("GivenTensorFill", [], ["w"], args={"shape": list(w.shape), "values": w.ravel()})],
        name="init",
    )
    predict = Net([Op("Conv", ["data", "w"], ["y"], args={"kernel": 3})], ["data", "w"], ["y"])
    save_model(Model(predict, init), tmp_path / "pair")
    code, _, err = run_cli(capsys, "run", str(tmp_path / "pair"), "-o", str(tmp_path / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, "need shapes", "--shapes data=1x1x")


def test_export_onnx_refuses_weights_that_do_not_fit_naming_random_params(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An init_net filling a bias of the wrong size: refused (the input shape guessed, so
    --shapes is suggested too); with --random-params the weight is made up, said so."""
    folder = save_pair_with_unfit_weights(tmp_path / "pair")
    target = str(tmp_path / "o.onnx")
    code, _, err = run_cli(capsys, "export-onnx", str(folder), "-o", target)
    assert code == 2
    assert_one_error_line(err, "do not fit the net: 'w', 'b'", "--random-params", "--shapes")
    code, _, err = run_cli(capsys, "export-onnx", str(folder), "-o", target, "--random-params")
    assert code == 0 and "parameter 'b' replaced by a made-up one" in err, err
    # verify --onnx makes up the same weights (same seed) only when asked to, as the export
    code, out, err = run_cli(capsys, "verify", "--onnx", target, str(folder), "--random-params")
    assert code == 0 and "outputs equal" in out, out + err


def test_export_onnx_outputs_chooses_the_graph_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _pair_without_weights(tmp_path / "pair")
    target = str(tmp_path / "o.onnx")
    args = ("--shapes", "x=2x5", "--random-params", "--outputs", "y,s")
    assert run_cli(capsys, "export-onnx", str(path), "-o", target, *args)[0] == 0
    assert [o.name for o in onnx.load(target).graph.output] == ["y", "s"]


def _fc_pair_without_outputs(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"], args={"shape": [3, 4], "values": w.ravel()}),
            Op("GivenTensorFill", [], ["b"], args={"shape": [3], "values": [0.5, -1.0, 2.0]}),
        ],
        name="init",
    )
    predict = Net([Op("FC", ["x", "w", "b"], ["y"]), Op("Relu", ["y"], ["z"])], ["x", "w", "b"])
    save_model(Model(predict, init), folder)
    return folder


def test_run_of_a_pair_converted_by_its_pipeline_writes_onnx_or_refuses_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-p convert-to-onnx`` with ``-o X.onnx`` writes the converted model once (its own
    options rule); with a pair folder it is refused (a predict_net of ONNX nodes without
    its weights used to be written, exit 0); ``--outputs`` names the graph outputs of a net
    that declares none, as ``export-onnx`` does."""
    pair = _fc_pair_without_outputs(tmp_path / "pair")
    folder = tmp_path / "out"
    code, _, err = run_cli(
        capsys, "run", str(pair), "-p", "convert-to-onnx", "-o", str(folder), "--shapes", "x=2x4"
    )
    assert code == 2 and "write it to an .onnx file" in err and not folder.exists()
    target = tmp_path / "m.onnx"
    args = ("-p", "convert-to-onnx{opset=13}", "--shapes", "x=2x4", "--outputs", "z")
    code, _, err = run_cli(capsys, "run", str(pair), "-o", str(target), *args)
    assert code == 0, err
    exported = onnx.load(str(target))
    onnx.checker.check_model(exported, full_check=True)
    assert exported.opset_import[0].version == 13
    assert [o.name for o in exported.graph.output] == ["z"]
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    w = numpy_helper.to_array(next(i for i in exported.graph.initializer if i.name == "w"))
    expected = np.maximum(x @ w.T + np.array([0.5, -1.0, 2.0], np.float32), 0)
    np.testing.assert_allclose(run_onnxruntime(exported, {"x": x})["z"], expected, rtol=1e-5)
    code, _, err = run_cli(capsys, "run", str(pair), "-o", str(target), *args, "--opset", "13")
    assert code == 2 and "convert-to-onnx{opset=13" in err
    code, _, err = run_cli(
        capsys, "run", str(pair), "-o", str(tmp_path / "plain.onnx"), "--shapes", "x=2x4"
    )
    assert code == 0 and "declares no external outputs" in err
    assert [o.name for o in onnx.load(str(tmp_path / "plain.onnx")).graph.output] == ["z"]


def _exported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: Model, shapes: str
) -> tuple[Path, Path, str]:
    """``model`` saved as a pair and exported with ``--shapes``: (pair folder, .onnx, stderr)."""
    folder, target = tmp_path / "pair", tmp_path / "o.onnx"
    save_model(model, folder)
    code, _, err = run_cli(
        capsys, "export-onnx", str(folder), "-o", str(target), "--shapes", shapes
    )
    assert code == 0, err
    return folder, target, err


def _placeholder_conv() -> tuple[Model, np.ndarray]:
    """A Conv pair whose init_net fills its data blob with a one-element placeholder, and
    the Conv's weights."""
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    init = Net(
        [
            Op("ConstantFill", [], ["data"], args={"shape": [1], "value": 0.0}),
            Op("GivenTensorFill", [], ["w"], args={"shape": list(w.shape), "values": w.ravel()}),
        ],
        name="init",
    )
    predict = Net([Op("Conv", ["data", "w"], ["y"], args={"kernel": 3})], ["data", "w"], ["y"])
    return Model(predict, init), w


def test_export_onnx_replaces_an_init_net_placeholder_by_a_graph_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The init_net fills the data blob with a placeholder (a 1-element fill): it becomes a
    graph input, said so, where a traceback used to be."""
    model, _ = _placeholder_conv()
    folder, target, err = _exported(capsys, tmp_path, model, "data=1x3x8x8")
    assert "a graph input instead of the init_net's placeholder" in err
    assert [i.name for i in onnx.load(str(target)).graph.input] == ["data"]
    code, out, err = run_cli(
        capsys, "verify", "--onnx", str(target), str(folder), "--shapes", "data=1x3x8x8"
    )
    assert code == 0 and "outputs equal" in out, out + err
    # Without --shapes the placeholder's shape is the ONNX model's input's, not a guess
    # (8x8 is no size the guess tries: onnxruntime refused the guessed one).
    code, out, err = run_cli(capsys, "verify", "--onnx", str(target), str(folder))
    assert code == 0 and "outputs equal" in out, out + err
    assert f"input 'data': shape [1, 3, 8, 8] from {target}" in err


@pytest.mark.parametrize("command", ["export-onnx", "run"])
def test_a_placeholder_given_a_symbolic_dim_0_stays_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """--shapes data={N}x3x8x8 for a blob the init_net fills as a placeholder: the graph
    input it becomes takes any N, said so (it was written at N=1, silently: the LSTM demo's
    time steps, given as {T}, were pinned at one)."""
    model, w = _placeholder_conv()
    rng = np.random.default_rng(1)
    folder, target = tmp_path / "pair", tmp_path / "o.onnx"
    save_model(model, folder)
    code, _, err = run_cli(
        capsys, command, str(folder), "-o", str(target), "--shapes", "data={N}x3x8x8"
    )
    assert code == 0, err
    assert "gives a symbolic batch (data={N})" in err
    (data,) = onnx.load(str(target)).graph.input
    assert data.type.tensor_type.shape.dim[0].dim_param == "N"
    for batch in (1, 3):
        x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        want = run_model(Model(model.predict_net), {"data": x, "w": w})["y"]
        got = run_onnxruntime(str(target), {"data": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_run_with_json_prints_one_document_whatever_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run --json of a pair to a folder, of a pair to an .onnx file (which printed nothing)
    and of an ONNX model to another: one JSON document naming what was written."""
    pair = FIXTURES / "models" / "tiny_export"
    onnx_out, folder, again = tmp_path / "x.onnx", tmp_path / "pair", tmp_path / "y.onnx"
    for source, target in ((pair, folder), (pair, onnx_out), (onnx_out, again)):
        code, out, err = run_cli(capsys, "run", str(source), "-o", str(target), "--json")
        assert code == 0, err
        document = json.loads(out)
        assert document["model"] == str(source) and document["rounds"]
        assert target.exists() and any(str(target) in p for p in document["written"])


def test_export_onnx_makes_the_init_nets_im_info_a_graph_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """detectron2's exports fill ``im_info`` in the init_net for one image size; the
    predictor feeds it per image. The export takes it as a graph input (it was baked in as
    a constant, so boxes were clipped to the wrong image), and onnxruntime on another
    ``im_info`` agrees with our executor on the pair fed the same."""
    rng = np.random.default_rng(0)
    init = Net(
        [Op("GivenTensorFill", [], ["im"], args={"shape": [1, 3], "values": [320, 427, 1]})],
        name="init",
    )
    predict = Net([Op("BBoxTransform", ["r", "d", "im"], ["b", "splits"])], ["r", "d", "im"], ["b"])
    _, target, err = _exported(capsys, tmp_path, Model(predict, init), "r=6x5,d=6x4")
    assert "input 'im': a graph input instead of the init_net's placeholder" in err
    exported = onnx.load(str(target))
    assert [i.name for i in exported.graph.input] == ["r", "d", "im"]
    rois = np.zeros((6, 5), np.float32)
    rois[:, 1:3] = rng.random((6, 2)) * 40
    rois[:, 3:] = rois[:, 1:3] + rng.random((6, 2)) * 40 + 1
    feeds = {
        "r": rois,
        "d": (rng.standard_normal((6, 4)) * 0.5).astype(np.float32),
        "im": np.array([[48, 64, 1]], np.float32),
    }
    ours = run_model(Model(predict, init), feeds)["b"]
    assert ours.max() <= 64  # clipped to the image fed, not to 320x427
    np.testing.assert_allclose(run_onnxruntime(exported, feeds)["b"], ours, rtol=1e-5, atol=1e-4)
    # run -o X.onnx makes the same model (it kept im_info as the init_net's constant, silently)
    ran = tmp_path / "run.onnx"
    shapes = ["--shapes", "r=6x5,d=6x4"]
    code, _, err = run_cli(capsys, "run", str(tmp_path / "pair"), "-p", "", "-o", str(ran), *shapes)
    assert code == 0, err
    assert "input 'im': a graph input instead of the init_net's placeholder" in err
    assert [i.name for i in onnx.load(str(ran)).graph.input] == ["r", "d", "im"]
    np.testing.assert_allclose(
        run_onnxruntime(onnx.load(str(ran)), feeds)["b"], ours, rtol=1e-5, atol=1e-4
    )


def test_export_onnx_dynamic_batch_refuses_a_net_pinned_to_its_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Reshape to ``[1, 8]`` pins the batch: the export declared ``N`` anyway and failed
    at batch 2 in onnxruntime. It is refused now (nothing written); a net whose batch is
    free exports with it."""
    pinned = Net(
        [Op("Reshape", ["x"], ["r", "old"], args={"shape": [1, 8]}), Op("Relu", ["r"], ["y"])],
        ["x"],
        ["y"],
    )
    folder = tmp_path / "pinned"
    save_model(Model(pinned), folder)
    target = tmp_path / "p.onnx"
    args = ("-o", str(target), "--shapes", "x=1x2x4", "--dynamic-batch")
    code, _, err = run_cli(capsys, "export-onnx", str(folder), *args)
    assert code == 2 and "--dynamic-batch: the model declares a free batch" in err
    assert "export without it" in err and not target.exists()
    assert run_cli(capsys, "export-onnx", str(folder), *args[:-1])[0] == 0
    free = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    save_model(Model(free), tmp_path / "free")
    code, _, err = run_cli(capsys, "export-onnx", str(tmp_path / "free"), *args)
    assert code == 0, err
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        run_onnxruntime(onnx.load(str(target)), {"x": x})["y"], np.maximum(x, 0)
    )


def test_verify_onnx_refuses_the_reference_file_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--save-outputs used to exit 0 and write nothing."""
    pair = _fc_pair_without_outputs(tmp_path / "pair")
    target = tmp_path / "m.onnx"
    args = ("--shapes", "x=2x4", "--outputs", "z")
    assert run_cli(capsys, "export-onnx", str(pair), "-o", str(target), *args)[0] == 0
    saved = tmp_path / "saved.npz"
    for option in ("--save-outputs", "--load-outputs"):
        code, _, err = run_cli(
            capsys, "verify", "--onnx", str(target), str(pair), *args, option, str(saved)
        )
        assert code == 2 and "verify --onnx runs both models on the inputs it makes" in err
    assert not saved.exists()


def test_export_onnx_test_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "pair"
    net = Net([Op("Dropout", ["x"], ["y", "mask"], args={"ratio": 0.5})], ["x"], ["y"])
    save_model(Model(net, Net(name="init")), folder)
    target = str(tmp_path / "o.onnx")
    shapes = ("--shapes", "x=2x3")
    code, _, err = run_cli(capsys, "export-onnx", str(folder), "-o", target, *shapes)
    assert code == 2
    assert_one_error_line(err, "op #0 (Dropout)", "training mode", "--test-mode")
    assert run_cli(capsys, "export-onnx", str(folder), "-o", target, *shapes, "--test-mode")[0] == 0
    args = ("verify", "--onnx", target, str(folder), "--shapes", "x=2x3")
    code, out, err = run_cli(capsys, *args)
    assert "op #0 (Dropout) run in training mode" in err and "--test-mode" in err
    code, out, err = run_cli(capsys, *args, "--test-mode")
    assert code == 0 and "outputs equal" in out, out + err
    code, _, err = run_cli(capsys, "verify", str(folder), "--test-mode")
    assert code == 2
    assert_one_error_line(err, "options of verify --onnx")


def test_verify_onnx_errors_of_onnxruntime_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model of other inputs, or one onnxruntime refuses: one error line, exit 2."""
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    other = onnx.load(str(source))
    other.graph.input[0].name = "z"
    other.graph.node[0].input[0] = "z"
    onnx.save(other, str(tmp_path / "other.onnx"))
    code, _, err = run_cli(capsys, "verify", "--onnx", str(tmp_path / "other.onnx"), str(pair_dir))
    assert code == 2
    assert_one_error_line(err, "takes inputs ['z']")
    broken = onnx.load(str(source))
    broken.graph.node[0].attribute.add().CopyFrom(helper.make_attribute("group", 7))
    onnx.save(broken, str(tmp_path / "broken.onnx"))
    code, _, err = run_cli(capsys, "verify", "--onnx", str(tmp_path / "broken.onnx"), str(pair_dir))
    assert code == 2
    assert_one_error_line(err, "onnxruntime")


def _relu_times_zero(path: Path) -> Path:
    """y = Relu(x) * 0: the intermediate ``r`` can change without the output changing."""
    zero = numpy_helper.from_array(np.zeros((1,), np.float32), "zero")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "zero"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], [zero]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_verify_onnx_per_blob_has_one_verdict_with_the_outputs_statistics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21 item 6: a blob outside the tolerances whose difference does not reach the
    outputs is reported with the statistics of the output table (max rel, mismatches), under
    the same (per-name) tolerances; the verdict and the exit code are the outputs'."""
    source = _relu_times_zero(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    pair = load_model_dir(pair_dir)
    relu = next(i for i, op in enumerate(pair.predict_net) if op.type == "Relu")
    pair.predict_net.replace_op(relu, pair.predict_net[relu].replace(type="Sigmoid"))
    save_model(pair, pair_dir)
    argv = ["verify", "--onnx", str(source), str(pair_dir), "--per-blob", "--shapes", "x=2x3"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0, out
    assert "outputs equal" in out and "outputs differ" not in out
    divergence = next(line for line in out.splitlines() if line.startswith("r "))
    assert "NO" in divergence and "/6" in divergence  # mismatches of the 6 values
    assert "0.0001/" in divergence  # the tolerances it was compared with (blob atol scaled)
    assert "first blob outside the tolerances: op #0 (Sigmoid) writing 'r'" in out

    code, out, _ = run_cli(capsys, *argv, "--rtol", "1e-5,r:100", "--atol", "1e-6,r:100")
    assert code == 0 and "no blob outside the tolerances" in out


def test_verify_onnx_of_a_pair_without_weights_says_they_are_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21 item 7: a predict_net shipped without its init_net is not asked for the shape
    of a weight; the error says the weights are missing and how to give them."""
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    (pair_dir / "init_net.pb").unlink()
    for command in (
        ["verify", "--onnx", str(source), str(pair_dir), "--shapes", "x=2x3x4x4"],
        ["export-onnx", str(pair_dir), "-o", str(tmp_path / "o.onnx"), "--shapes", "x=2x3x4x4"],
    ):
        code, _, err = run_cli(capsys, *command)
        assert code == 2
        assert_one_error_line(err, "weights", "'w'", "init_net", "--init")
        assert "--shapes w=" not in err


def test_import_onnx_keeps_static_input_shapes_for_the_way_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pair holds no types: import-onnx writes the inputs' static shapes to shapes.txt,
    which export-onnx reads, so the round trip keeps 2x3x4x4 instead of guessing."""
    model = onnx.load(str(_flatten_before_gemm(tmp_path / "m.onnx")))
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = 2
    source = tmp_path / "static.onnx"
    onnx.save(model, str(source))
    pair_dir = tmp_path / "pair"
    code, out, _ = run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))
    assert code == 0 and f"wrote {pair_dir / 'shapes.txt'}" in out
    assert _case_file(pair_dir) == {"x": (2, 3, 4, 4)}
    exported = tmp_path / "back.onnx"
    assert run_cli(capsys, "export-onnx", str(pair_dir), "-o", str(exported))[0] == 0
    (x,) = onnx.load(str(exported)).graph.input
    assert [d.dim_value for d in x.type.tensor_type.shape.dim] == [2, 3, 4, 4]


def _symbolic_batch_model(path: Path) -> Path:
    """A MatMul + Relu taking any batch (``batch_size``), weights in an initializer."""
    weights = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    return graph_model(
        path,
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        {"x": (TensorProto.FLOAT, ["batch_size", 4])},
        {"z": (TensorProto.FLOAT, ["batch_size", 3])},
        {"w": weights},
    )


@pytest.mark.parametrize("command", ["export-onnx", "run"])
def test_a_symbolic_batch_survives_import_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """An ONNX model taking any batch, imported and exported back, takes any batch: the case
    file keeps the symbolic dim ({batch_size}), and the export declares the batch by that name
    (it guessed 4x4 and took that one shape only). The result computes what the original
    does, at two batch sizes."""
    source = _symbolic_batch_model(tmp_path / "m.onnx")
    pair = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair))[0] == 0
    assert "x={batch_size}x4\n" in (pair / "shapes.txt").read_text()
    back = tmp_path / "back.onnx"
    code, out, err = run_cli(capsys, command, str(pair), "-o", str(back))
    assert code == 0, err
    assert "symbolic batch" in err and "guessed" not in out + err
    exported = onnx.load(str(back)).graph
    for value, size in ((exported.input[0], 4), (exported.output[0], 3)):
        dims = value.type.tensor_type.shape.dim
        assert [dims[0].dim_param, dims[1].dim_value] == ["batch_size", size]
    for batch in (1, 3):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)}
        want = run_onnxruntime(str(source), feeds)["z"]
        got = run_onnxruntime(str(back), feeds)["z"]
        assert want.shape == (batch, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    code, _, err = run_cli(capsys, "verify", str(pair))  # the case file runs it at batch 1
    assert code == 0, err


def _conv_model(path: Path, x_dims: list[int | str]) -> Path:
    weights = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    return graph_model(
        path,
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3])],
        {"x": (TensorProto.FLOAT, x_dims)},
        {"c": (TensorProto.FLOAT, None)},
        {"w": weights},
    )


@pytest.mark.parametrize("dims", [["batch", 3, "height", "width"], ["a\rb", 3, 8, 8]])
def test_an_input_whose_symbols_cannot_be_kept_is_left_to_the_guess(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dims: list[int | str]
) -> None:
    """A symbolic height and width would run at 1 (a 3x3 Conv on 1x1), and a name holding a
    line break would not read back: such an input stays out of shapes.txt, and export and
    verify of the pair guess it, as before symbolic dims were written."""
    pair = tmp_path / "pair"
    source = _conv_model(tmp_path / "m.onnx", dims)
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair))[0] == 0
    assert "x=" not in (pair / "shapes.txt").read_text()
    code, _, err = run_cli(capsys, "export-onnx", str(pair), "-o", str(tmp_path / "back.onnx"))
    assert code == 0, err
    code, out, err = run_cli(capsys, "verify", str(pair))
    assert code == 0 and "outputs equal" in out, err


def test_extract_writes_no_shape_resting_on_a_symbolic_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cut of a pair taking any batch was typed at batch 1 and its shapes.txt said
    x=1x3x8x8, read later as given: an export of the cut fixed the batch the source left
    free."""
    pair = tmp_path / "pair"
    source = _conv_model(tmp_path / "m.onnx", ["batch", 3, 8, 8])
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair))[0] == 0
    assert "x={batch}x3x8x8" in (pair / "shapes.txt").read_text()
    cut = tmp_path / "cut"
    argv = ["extract", str(pair), "--inputs", "x", "--outputs", "c", "-o", str(cut)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "no shape written for x: inferred from guessed or symbolic input shapes" in err
    assert not (cut / "shapes.txt").exists()


def test_symbolic_dims_in_shapes_read_back_and_only_the_batch_stays_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``{name}`` is a dim of any size, taken as 1 to run or type the net; -1 (what other tools
    write for it) is refused naming the form; a symbolic dim past the batch is exported at 1,
    said so."""
    shapes = {"x": ("N", 3, "max len"), "s": ()}
    assert parse_shape_specs(shapes_text(shapes).splitlines(), "t") == shapes
    assert parse_shape_items(["x={N}x3"], "t") == {"x": (1, 3)}
    with pytest.raises(UsageError, match=r"negative dimension .*\{N\}x3x224x224"):
        parse_shape_items(["x=-1x3"], "t")
    with pytest.raises(UsageError, match="not of the form"):
        parse_shape_items(["x=Nx3"], "t")
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    save_model(Model(net), tmp_path / "pair")
    target = tmp_path / "m.onnx"
    argv = ["export-onnx", str(tmp_path / "pair"), "-o", str(target), "--shapes", "x={B}x{T}"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "dims 1 ('T') are symbolic in --shapes; the ONNX export fixes them at 1" in err
    (x,) = onnx.load(str(target)).graph.input
    assert [d.dim_value for d in x.type.tensor_type.shape.dim] == [0, 1]


def test_a_symbolic_batch_the_net_pins_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Reshape to [1, 4] takes one batch only: the export with a symbolic batch runs the
    result at twice the batch and refuses, naming the batch, the node and the way out."""
    net = Net(
        [Op("Reshape", ["x"], ["y", "old"], args={"shape": [1, 4]}), Op("Relu", ["y"], ["z"])],
        ["x"],
        ["z"],
    )
    save_model(Model(net), tmp_path / "pair")
    (tmp_path / "pair" / "shapes.txt").write_text("x={N}x2x2\n")
    code, _, err = run_cli(
        capsys, "export-onnx", str(tmp_path / "pair"), "-o", str(tmp_path / "m.onnx")
    )
    assert code == 2
    note, error = err.splitlines()
    assert note.startswith("note:") and "symbolic batch (x={N})" in note
    assert_one_error_line(error, "the symbolic batch (x={N})", "give dim 0 a size", "Reshape")
    assert not (tmp_path / "m.onnx").exists()


def test_the_case_file_text_reads_back_scalars_included() -> None:
    shapes = {"data": (1, 3, 8, 8), "step": ()}
    assert parse_shape_items(shapes_text(shapes).split(), "t") == shapes


def test_a_case_file_naming_an_input_with_a_space_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import-onnx writes ``in put:0=4x3`` for such an input; reading split it at the space
    ("shape 'in' is not of the form ..."). A line of several items still splits."""
    net = Net([Op("Relu", ["in put:0"], ["y"]), Op("Relu", ["b"], ["z"])], ["in put:0", "b"])
    folder = tmp_path / "pair"
    save_model(Model(net), folder)
    (folder / "shapes.txt").write_text(shapes_text({"in put:0": (4, 3)}) + "b=2x2 \n")
    target = tmp_path / "m.onnx"
    code, _, err = run_cli(
        capsys, "export-onnx", str(folder), "-o", str(target), "--outputs", "y,z"
    )
    assert code == 0, err
    declared = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in onnx.load(str(target)).graph.input
    }
    assert declared == {"in put:0": [4, 3], "b": [2, 2]}
    (folder / "shapes.txt").write_text("in put:0=4x3 b=2x2\n")  # two items on one line
    code, _, err = run_cli(capsys, "export-onnx", str(folder), "-o", str(target), "--outputs", "y")
    assert code == 2 and "shape 'in' is not of the form" in err


def _case_file(folder: Path) -> dict[str, tuple[int, ...]]:
    lines = (folder / "shapes.txt").read_text().splitlines()
    return parse_shape_items([line for line in lines if not line.startswith("#")], "t")


def test_import_onnx_writes_the_shapes_of_the_inputs_the_pipeline_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pipeline renaming an input: the case file names no input the pair lost (every later
    command would refuse it), and an import over an older one replaces it."""
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "z"], ["y"])],
        "g",
        [value("x", TensorProto.FLOAT, [1, 4]), value("z", TensorProto.FLOAT, [1, 4])],
        [value("y", TensorProto.FLOAT, [1, 4])],
    )
    source = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    pair = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair))[0] == 0
    assert _case_file(pair) == {"x": (1, 4), "z": (1, 4)}
    rename = "rename{op=0,input=0,to=xx}"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair), "-p", rename)[0] == 0
    assert "x" not in _case_file(pair)
    code, _, err = run_cli(capsys, "show", str(pair))
    assert code == 0, err


def test_import_onnx_refusing_an_op_says_how_the_onnx_pipeline_may_remove_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """torch's LSTM exports build their initial state with an Expand of constants, which has
    no Caffe2 mapping; -p runs on the pair, too late: the error points at run -p optimize,
    which folds it, and the pair converts then."""
    state = helper.make_node("Expand", ["zero", "shape"], ["h"])
    add = helper.make_node("Add", ["x", "h"], ["y"])
    source = graph_model(
        tmp_path / "m.onnx",
        [state, add],
        {"x": (TensorProto.FLOAT, [2, 3])},
        {"y": (TensorProto.FLOAT, [2, 3])},
        {"zero": np.zeros((1, 3), np.float32), "shape": np.array([2, 3], np.int64)},
    )
    code, _, err = run_cli(capsys, "import-onnx", str(source), "-o", str(tmp_path / "pair"))
    assert code == 2
    assert_one_error_line(err, "(Expand, opset 17): no Caffe2 mapping", f"run {source} -p optimize")
    folded = tmp_path / "folded.onnx"
    assert run_cli(capsys, "run", str(source), "-p", "optimize", "-o", str(folded))[0] == 0
    code, _, err = run_cli(capsys, "import-onnx", str(folded), "-o", str(tmp_path / "pair"))
    assert code == 0, err


def test_import_onnx_advises_optimize_only_when_it_would_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal said 'run -p optimize first, after which import-onnx may convert' for
    every op, even one optimize can never remove (and for a model optimized already)."""
    f = TensorProto.FLOAT
    kept = graph_model(
        tmp_path / "hardswish.onnx",
        [helper.make_node("HardSwish", ["x"], ["y"])],
        {"x": (f, [1, 4])},
        {"y": (f, [1, 4])},
        {},
    )
    code, _, err = run_cli(capsys, "import-onnx", str(kept), "-o", str(tmp_path / "a"))
    assert code == 2 and "HardSwish" in err and "-p optimize" not in err
    folded = graph_model(  # the HardSwish reads constants only: optimize folds it away
        tmp_path / "folded.onnx",
        [
            helper.make_node("HardSwish", ["c"], ["h"]),
            helper.make_node("Add", ["x", "h"], ["y"]),
        ],
        {"x": (f, [1, 4])},
        {"y": (f, [1, 4])},
        {"c": np.ones((1, 4), np.float32)},
    )
    code, _, err = run_cli(capsys, "import-onnx", str(folded), "-o", str(tmp_path / "b"))
    assert code == 2 and "-p optimize -o OUT.onnx' folds or fuses it away" in err


def test_run_to_onnx_makes_an_init_net_placeholder_a_graph_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run PAIR -o X.onnx exported the placeholder's values as a constant: the model took no
    input and gave the same output for every image, while export-onnx made it an input. Now
    run does too, at the fill's shape (said so); a dummy fill the net does not take (shape
    1) is refused with a shape to pass, not "cannot be inferred (its rank)"."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    weight = Op("GivenTensorFill", [], ["w"], args={"shape": list(w.shape), "values": w.ravel()})
    predict = Net([Op("Conv", ["data", "w"], ["y"], args={"kernel": 3})], ["data", "w"], ["y"])
    for shape, name in (([1, 3, 8, 8], "sized"), ([1], "dummy")):
        fill = Op("ConstantFill", [], ["data"], args={"shape": shape, "value": 0.0})
        save_model(Model(predict, Net([fill, weight], name="init")), tmp_path / name)
    target = tmp_path / "sized.onnx"
    code, _, err = run_cli(capsys, "run", str(tmp_path / "sized"), "-o", str(target))
    assert code == 0, err
    assert "input 'data': a graph input instead of the init_net's placeholder" in err
    exported = onnx.load(str(target))
    assert [i.name for i in exported.graph.input] == ["data"]
    assert "data" not in {i.name for i in exported.graph.initializer}
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = run_onnxruntime(exported, {"data": x})["y"]
    pair = Model(predict, Net([weight], name="init"))
    np.testing.assert_allclose(got, run_model(pair, {"data": x})["y"], rtol=1e-5, atol=1e-5)
    code, _, err = run_cli(capsys, "run", str(tmp_path / "dummy"), "-o", str(tmp_path / "d.onnx"))
    assert code == 2
    assert_one_error_line(err, "placeholder", "--shapes data=")
    assert not (tmp_path / "d.onnx").exists()


def test_verify_onnx_says_equal_proves_nothing_when_every_output_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A detector finding nothing in made-up inputs (the int8 Mask R-CNN2Go exported at
    320x320): verify --onnx said "outputs equal" on 0 values compared, where verify warns."""
    predict = Net([Op("Slice", ["x"], ["y"], args={"starts": [0], "ends": [0]})], ["x"], ["y"])
    folder, target, _ = _exported(capsys, tmp_path, Model(predict, Net([], name="init")), "x=4")
    code, out, err = run_cli(capsys, "verify", "--onnx", str(target), str(folder))
    assert code == 0 and "outputs equal" in out, out + err
    assert "every output compared is empty on these inputs (0 values)" in err
    assert "--feeds with real inputs" in err
    code, out, _ = run_cli(capsys, "verify", "--onnx", str(target), str(folder), "--json")
    document = json.loads(out)
    assert code == 0 and document["verdict"] == "equal"
    assert any("0 values" in note for note in document["notes"])  # the JSON says it too


def test_verify_onnx_takes_the_shape_of_an_input_the_predict_net_reads_undeclared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jolibrain's lenet declares its params but not ``data``: verify --onnx guessed a batch
    of one for it, and onnxruntime refused the model exported at a batch of two. It takes the
    ONNX model's shape, and says the shape came from that file."""
    w = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    init = Net(
        [Op("GivenTensorFill", [], ["w"], args={"shape": [3, 4], "values": w.ravel().tolist()})]
    )
    predict = Net([Op("MatMul", ["data", "w"], ["y"])], ["w"], ["y"])
    folder, target, _ = _exported(capsys, tmp_path, Model(predict, init), "data=2x3")
    code, out, err = run_cli(capsys, "verify", "--onnx", str(target), str(folder))
    assert code == 0 and "outputs equal" in out, out + err
    assert f"input data: float32[2, 3] (given: {target})" in out + err


def test_verify_onnx_runs_both_models_on_the_feeds_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --onnx --feeds (refused before, though its help promised it): both models run
    on the arrays of the file, a batch of 3 of an export taking any batch, and one that does
    not take them is refused by name."""
    w = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    init = Net(
        [Op("GivenTensorFill", [], ["w"], args={"shape": [3, 4], "values": w.ravel().tolist()})]
    )
    predict = Net([Op("MatMul", ["data", "w"], ["y"])], ["data", "w"], ["y"])
    folder, target = tmp_path / "pair", tmp_path / "m.onnx"
    save_model(Model(predict, init), folder)
    code, _, err = run_cli(
        capsys, "export-onnx", str(folder), "--shapes", "data=2x3", "--dynamic-batch",
        "-o", str(target),
    )  # fmt: skip
    assert code == 0, err
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, data=np.arange(15, dtype=np.float32).reshape(5, 3))
    argv = ["verify", "--onnx", str(target), str(folder), "--feeds", str(feeds), "--json"]
    code, out, err = run_cli(capsys, *argv)
    document = json.loads(out)
    assert code == 0 and document["verdict"] == "equal", out + err
    assert document["inputs"] == {"data": [5, 3]}
    (output,) = document["outputs"]
    assert output["shape_before"] == output["shape_after"] == [5, 4] and output["size"] == 20
    np.savez(feeds, data=np.zeros((5, 2), np.float32))
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "data" in json.loads(out)["error"]


def test_a_float16_model_survives_the_caffe2_bridge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An fp16 Conv imported as a pair: verify --onnx fed the pair float32 data (onnxruntime
    refused it) and export-onnx declared a float32 input for float16 weights (the checker
    refused that). The pair's data now takes its weights' type, and half-precision outputs
    are compared as verify compares them."""
    rng = np.random.default_rng(2)
    f16 = TensorProto.FLOAT16
    source = graph_model(
        tmp_path / "m.onnx",
        [helper.make_node("Conv", ["img", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
        {"img": (f16, [2, 3, 8, 8])},
        {"y": (f16, [2, 4, 8, 8])},
        {
            "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float16),
            "b": rng.standard_normal(4).astype(np.float16),
        },
    )
    pair, back = tmp_path / "pair", tmp_path / "back.onnx"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair))[0] == 0
    code, out, err = run_cli(capsys, "verify", "--onnx", str(source), str(pair))
    assert code == 0 and "outputs equal" in out, out + err
    assert "input img: float16[2, 3, 8, 8]" in out + err
    assert "half-precision outputs y compared with rtol 0.01" in err
    code, _, err = run_cli(capsys, "export-onnx", str(pair), "-o", str(back))
    assert code == 0, err
    onnx.checker.check_model(onnx.load(str(back)), full_check=True)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float16)
    want = run_onnxruntime(str(source), {"img": x})["y"]
    got = run_onnxruntime(str(back), {"img": x})["y"]
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2
    )


def test_verify_onnx_json_carries_the_notes_on_made_up_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The notes ``verify --onnx`` prints while making the pair whole (made-up parameters)
    were missing from its --json document, where only the later notes went."""
    predict = Net([Op("FC", ["data", "w", "b"], ["y"])], ["data", "w", "b"], ["y"])
    folder = tmp_path / "pair"
    save_model(Model(predict), folder)
    target = tmp_path / "fc.onnx"
    shapes = ["--shapes", "data=2x4", "--random-params"]
    code, _, err = run_cli(capsys, "export-onnx", str(folder), *shapes, "-o", str(target))
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "verify", "--onnx", str(target), str(folder), *shapes, "--json"
    )
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(note.startswith("made up 2 parameters") for note in notes), notes


def test_run_to_onnx_types_its_inputs_as_export_onnx_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    """run PAIR -o X.onnx declared every input float: crayon's uint8 BGRA image and a
    Gather's indices became float inputs, onnxruntime refused the fed image and verify
    --onnx failed, while export-onnx typed them from their readers. run types them so now."""
    crayon = real_fixtures / "caffe2-models" / "style_transfer" / "crayon"
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    fill = Op("GivenTensorFill", [], ["table"], args={"shape": [4, 3], "values": table.ravel()})
    gather = Net([Op("Gather", ["table", "idx"], ["rows"])], ["table", "idx"], ["rows"])
    save_model(Model(gather, Net([fill], name="init")), tmp_path / "gather")
    cases = [(crayon, "data_int8_bgra=1x64x64x4", np.uint8), (tmp_path / "gather", "idx=5", None)]
    for folder, shapes, dtype in cases:
        target = tmp_path / f"{folder.name}.onnx"
        code, _, err = run_cli(capsys, "run", str(folder), "-o", str(target), "--shapes", shapes)
        assert code == 0, err
        declared = onnx.load(str(target)).graph.input[0].type.tensor_type.elem_type
        if dtype is not None:
            assert helper.tensor_dtype_to_np_dtype(declared) == dtype
        else:
            assert helper.tensor_dtype_to_np_dtype(declared).kind == "i"
        code, out, err = run_cli(
            capsys, "verify", "--onnx", str(target), str(folder), "--shapes", shapes
        )
        assert code == 0 and "outputs equal" in out, out + err

"""The ONNX commands of the CLI: import-onnx, export-onnx, run on .onnx, verify --onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_error_line, run_cli

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from graphtools.onnx import import_onnx, run_onnxruntime  # noqa: E402
from graphtools.serde import load_model_dir, save_model  # noqa: E402


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
    (pair_dir / "shapes.txt").write_text("x=2x3x4x4\n")
    code, out, _ = run_cli(capsys, "verify", "--onnx", str(source), str(pair_dir), "--per-blob")
    assert code == 0, out
    assert "outputs equal" in out and "no blob diverges" in out

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
    assert "first divergence: op #1 (Sigmoid) writing 'r'" in out


def test_export_onnx_without_shapes_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _flatten_before_gemm(tmp_path / "m.onnx")
    pair_dir = tmp_path / "pair"
    assert run_cli(capsys, "import-onnx", str(source), "-o", str(pair_dir))[0] == 0
    code, _, err = run_cli(capsys, "export-onnx", str(pair_dir), "-o", str(tmp_path / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, "need shapes")

"""The numeric commands: ``verify`` (pipeline before/after through the executor, ``--bisect``),
``exec`` (run a model on ``.npz`` feeds) and ``run --device``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
from conftest import (
    FIXTURES,
    TINY_DEAD_HEAD_NOTE,
    assert_one_error_line,
    publish_passes,
    run_cli,
    save_pair_with_unfit_weights,
)

from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import run_onnxruntime
from graphtools.pass_infra import Pass, PassResult
from graphtools.serde import load_model_dir, parse_netdef, save_model

TINY = FIXTURES / "models" / "tiny_export"
PLUGIN = "graphtools_test_plugin"


def _changing_ops(model: Model, op_type: str, **changes: Any) -> PassResult:
    """Every ``op_type`` op of the predict_net given ``changes`` (a test pass's whole job)."""
    net = model.predict_net
    found = {i for i, op in enumerate(net) if op.type == op_type}
    if found:
        net.set_ops(op.replace(**changes) if i in found else op for i, op in enumerate(net.ops))
    return PassResult(model, bool(found), {"ops_changed": len(found)})


@dataclass(frozen=True)
class BreakRelu(Pass):
    """A deliberately wrong pass: every Relu becomes a Sigmoid."""

    name: ClassVar[str] = "break-relu"

    def call(self, model: Model) -> PassResult:
        return _changing_ops(model, "Relu", type="Sigmoid")


@pytest.fixture
def broken_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish ``BreakRelu`` under the ``graphtools.passes`` entry-point group."""
    publish_passes(monkeypatch, {"BreakRelu": BreakRelu}, **{"break-relu": f"{PLUGIN}:BreakRelu"})


def _table_rows(out: str) -> dict[str, list[str]]:
    """The rows of the last diff table in ``out`` by output name: output, ok, max abs, mean
    abs, max rel, mean rel, mismatches, shape dims..."""
    lines = out.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("output  ok"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        cells = line.split()
        if len(cells) < 4 or cells[1] not in ("yes", "NO"):
            break
        rows[cells[0]] = cells
    return rows


# -- verify ---------------------------------------------------------------------------------


def test_verify_default_pipeline_on_the_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "verify", str(TINY), "-p", "default")
    assert (code, err) == (0, "")
    assert "round 1 remove-reshape-for-fc: 15 -> 10 ops (init_net 8 -> 6), modified" in out
    assert "outputs equal (rtol=1e-05, atol=1e-06, seed=0)" in out
    assert _table_rows(out)["prob"][:4] == ["prob", "yes", "0", "0"]


def test_verify_predict_file_reads_shapes_beside_it_or_from_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    predict, init = TINY / "predict_net.pbtxt", TINY / "init_net.pbtxt"
    code, out, _ = run_cli(capsys, "verify", str(predict), "--init", str(init))
    assert code == 0
    assert _table_rows(out)["prob"][7:9] == ["[1,", "3]"]
    assert f"input data: float32[1, 1, 6, 6] (given: {TINY / 'shapes.txt'})" in out
    code, out, _ = run_cli(
        capsys, "verify", "--shapes", "data=3x1x6x6", str(predict), "--init", str(init)
    )
    assert code == 0
    assert _table_rows(out)["prob"][7:9] == ["[3,", "3]"]


def test_verify_guesses_shapes_nobody_gave_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    save_model(load_model_dir(TINY), folder)
    code, out, err = run_cli(capsys, "verify", str(folder))
    assert code == 0, err
    assert "input data: float32[1, 1, 6, 6] (guessed: op #0 (Conv) reads it as an image" in out
    assert "1 channels from the conv1_w weight" in out


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--shapes", "data=1x1xsix"], ["--shapes", "'data=1x1xsix'", "name=1x3x224x224"]),
        (["--shapes", "1x1x6x6"], ["not of the form"]),
        (["--shapes", "data=1x1x6x6,data=1x1x8x8"], ["'data' is given a shape twice"]),
        (["--shapes", "data=1x1x4x4"], ["op #11 (FC)", "failed", "8"]),
        (["-p", "no-such-pass"], ["unknown pass 'no-such-pass'"]),
    ],
    ids=["bad-dims", "no-name", "twice", "wrong-size", "unknown-pass"],
)
def test_verify_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    code, out, err = run_cli(capsys, "verify", str(TINY), *argv)
    assert code == 2
    assert "outputs" not in out
    assert_one_error_line(err, *fragments)


def test_verify_unsupported_op_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    net = Net([Op("MadeUpOp", ["x"], ["y"])], ["x"], ["y"], name="odd")
    save_model(Model(net), tmp_path)
    code, _, err = run_cli(capsys, "verify", str(tmp_path), "--shapes", "x=2")
    assert code == 2
    assert_one_error_line(err, "op #0 (MadeUpOp)", "no executor kernel")


def test_verify_broken_pass_exits_1(
    capsys: pytest.CaptureFixture[str], broken_plugin: None
) -> None:
    code, out, err = run_cli(capsys, "verify", str(TINY), "-p", "default,break-relu")
    assert (code, err) == (1, "")
    assert "outputs differ" in out
    assert _table_rows(out)["prob"][1] == "NO"
    assert "first pass that changed" not in out


def test_verify_bisect_names_the_broken_entry_point_pass(
    capsys: pytest.CaptureFixture[str], broken_plugin: None
) -> None:
    code, out, err = run_cli(
        capsys, "verify", str(TINY), "-p", "remove-dead-ends,break-relu,fuse-copy-ops", "--bisect"
    )
    assert (code, err) == (1, "")
    assert "round 1 remove-dead-ends: 15 -> 14 ops, modified" in out
    assert "first pass that changed the outputs: break-relu (round 1)\n" in out
    after_bisect = out.split("first pass that changed the outputs:")[1]
    assert _table_rows(after_bisect)["prob"][1] == "NO"


def test_verify_bisect_is_quiet_when_outputs_are_equal(
    capsys: pytest.CaptureFixture[str], broken_plugin: None
) -> None:
    code, out, _ = run_cli(capsys, "verify", str(TINY), "-p", "default", "--bisect")
    assert code == 0
    assert "first pass" not in out


def test_verify_tolerance_options(capsys: pytest.CaptureFixture[str], broken_plugin: None) -> None:
    code, out, _ = run_cli(
        capsys, "verify", str(TINY), "-p", "break-relu", "--rtol", "10", "--atol", "10"
    )
    assert code == 0
    assert "outputs equal (rtol=10, atol=10, seed=0)" in out


def test_verify_interface_renaming_pipeline_matches_by_position(
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = FIXTURES / "golden" / "ssa-rewrite" / "style-all"
    code, out, err = run_cli(
        capsys,
        "verify",
        str(case / "predict_net.pbtxt"),
        "--init",
        str(case / "init_net.pbtxt"),
        "-p",
        "ssa-rewrite{style=all}",
        "--shapes",
        "X=2",
    )
    assert (code, err) == (0, ""), err
    assert _table_rows(out)["Y"][1] == "yes"


# -- exec -----------------------------------------------------------------------------------


@pytest.fixture
def feeds_file(tmp_path: Path) -> Path:
    path = tmp_path / "feeds.npz"
    data = np.random.default_rng(5).standard_normal((2, 1, 6, 6)).astype(np.float32)
    np.savez(path, data=data)
    return path


def test_exec_writes_every_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, feeds_file: Path
) -> None:
    out_path = tmp_path / "out.npz"
    code, out, err = run_cli(
        capsys, "exec", str(TINY), "--feeds", str(feeds_file), "-o", str(out_path)
    )
    assert (code, err) == (0, "")
    assert "prob: float32[2, 3]\n" in out
    assert f"wrote {out_path}" in out
    with np.load(feeds_file) as archive:
        expected = run_model(load_model_dir(TINY), {"data": archive["data"]})
    with np.load(out_path) as written:
        assert written.files == list(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(written[name], value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feeds.npz", "out.npz"]


def test_exec_predict_file_with_init(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, feeds_file: Path
) -> None:
    out_path = tmp_path / "out.npz"
    argv = ["--init", str(TINY / "init_net.pbtxt"), "--feeds", str(feeds_file)]
    code, _, _ = run_cli(
        capsys, "exec", str(TINY / "predict_net.pbtxt"), *argv, "-o", str(out_path)
    )
    assert code == 0
    with np.load(out_path) as written:
        assert written["prob"].shape == (2, 3)


def test_exec_refuses_to_overwrite_its_feeds(
    capsys: pytest.CaptureFixture[str], feeds_file: Path
) -> None:
    before = feeds_file.read_bytes()
    code, out, err = run_cli(
        capsys, "exec", str(TINY), "--feeds", str(feeds_file), "-o", str(feeds_file)
    )
    assert (code, out) == (2, "")
    assert_one_error_line(err, "refusing to overwrite", str(feeds_file))
    assert feeds_file.read_bytes() == before


def test_exec_refuses_to_overwrite_the_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, feeds_file: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    predict = folder / "predict_net.pbtxt"
    before = predict.read_bytes()
    code, _, err = run_cli(
        capsys, "exec", str(folder), "--feeds", str(feeds_file), "-o", str(predict)
    )
    assert code == 2
    assert_one_error_line(err, "refusing to overwrite")
    assert predict.read_bytes() == before


def _save_npz(path: Path, **arrays: Any) -> Path:
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    ("make_feeds", "fragments"),
    [
        (lambda d: d / "absent.npz", ["absent.npz", "no such file"]),
        (lambda d: d, ["a folder, not an .npz file"]),
        (lambda d: TINY / "predict_net.pbtxt", ["not an .npz archive"]),
        (
            lambda d: _save_npz(d / "f.npz", data=np.ones((1, 1, 6, 6), np.float32), extra=[1]),
            ["names 'extra', which is not an input of the model", "its inputs are: data"],
        ),
        (lambda d: _save_npz(d / "f.npz"), ["['data']", "neither fed"]),
        (
            lambda d: _save_npz(d / "f.npz", data=np.ones((1, 1, 5, 5), np.float32)),
            ["op #11 (FC)", "failed"],
        ),
    ],
    ids=["missing", "folder", "not-npz", "extra-feed", "missing-feed", "bad-shape"],
)
def test_exec_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make_feeds: Any, fragments: list[str]
) -> None:
    out_path = tmp_path / "out.npz"
    feeds = make_feeds(tmp_path)
    code, out, err = run_cli(capsys, "exec", str(TINY), "--feeds", str(feeds), "-o", str(out_path))
    assert (code, out) == (2, "")
    assert_one_error_line(err, *fragments)
    assert not out_path.exists()


# -- run --device ---------------------------------------------------------------------------


def test_run_device_appends_infer_devices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    argv = ["-p", "remove-dead-ends", "--device", "data=cpu", "-o", str(out_dir)]
    code, out, err = run_cli(capsys, "run", str(TINY), *argv)
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)
    assert "round 1 infer-devices: 14 -> 14 ops, modified" in out
    predict, _ = parse_netdef((out_dir / "predict_net.pbtxt").read_bytes())
    placed = {op.type for op in predict.op if op.HasField("device_option")}
    assert placed == {"CopyCPUToGPU", "CopyGPUToCPU"}
    assert all(op.device_option.device_type == 1 for op in predict.op if op.type in placed)
    plain = tmp_path / "plain"
    code, out, _ = run_cli(capsys, "run", str(TINY), "-p", "remove-dead-ends", "-o", str(plain))
    assert code == 0 and "infer-devices" not in out


def test_run_device_contradicting_the_copies_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    argv = ["-p", "remove-dead-ends", "--device", "data=gpu", "-o", str(out_dir)]
    code, out, err = run_cli(capsys, "run", str(TINY), *argv)
    assert code == 2 and "wrote" not in out
    assert_one_error_line(err, "pass 'infer-devices' failed", "CopyCPUToGPU")
    assert not out_dir.exists()


def test_run_device_with_two_inputs_keeps_each_branch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = FIXTURES / "golden" / "infer-devices" / "cuda-net-cpu-op"
    out_dir = tmp_path / "out"
    argv = ["--device", "data=gpu", "--device", "im_info=cpu", "-p", "remove-dead-ends"]
    code, _, err = run_cli(
        capsys, "run", str(folder / "predict_net.pbtxt"), *argv, "-o", str(out_dir)
    )
    assert (code, err) == (0, "")
    predict, _ = parse_netdef((out_dir / "predict_net.pbtxt").read_bytes())
    sigmoid = next(op for op in predict.op if op.type == "Sigmoid")
    assert sigmoid.HasField("device_option") and sigmoid.device_option.device_type == 0


@pytest.mark.parametrize(
    ("item", "fragment"),
    [("data=tpu", "device 'tpu' of input 'data'"), ("data", "not of the form name=device")],
)
def test_run_bad_device_exits_2_before_writing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, item: str, fragment: str
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "run", str(TINY), "--device", item, "-o", str(out_dir))
    assert (code, out) == (2, "")
    assert_one_error_line(err, fragment)
    assert not out_dir.exists()


def test_exec_keeps_any_output_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ops = [Op("Relu", ["x"], ["file"]), Op("Neg", ["x"], ["allow_pickle"])]
    save_model(Model(Net(ops, ["x"], ["file", "allow_pickle"], name="names")), tmp_path / "m")
    feeds = _save_npz(tmp_path / "f.npz", x=np.array([-1.0, 2.0], np.float32))
    out_path = tmp_path / "out.npz"
    code, _, err = run_cli(
        capsys, "exec", str(tmp_path / "m"), "--feeds", str(feeds), "-o", str(out_path)
    )
    assert (code, err) == (0, "")
    with np.load(out_path) as written:
        np.testing.assert_array_equal(written["file"], [0.0, 2.0])
        np.testing.assert_array_equal(written["allow_pickle"], [1.0, -2.0])


def test_verify_runs_the_nets_remove_identity_ops_exists_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 21 item 1: ``Identity`` has a kernel (it used to be the one identity type that
    verify refused, on exactly the nets ``remove-identity-ops`` cleans)."""
    case = FIXTURES / "golden" / "remove-identity-ops" / "chain-collapses" / "predict_net.pbtxt"
    code, out, err = run_cli(capsys, "verify", str(case), "-p", "default", "--shapes", "x=2x3")
    assert code == 0, err
    assert "outputs equal" in out


def test_saved_int8_inputs_feed_back_as_int8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --save-outputs then --load-outputs (and exec --feeds) on an Int8 net: the input
    is saved with its scale and zero point and fed back as the Int8 blob it was."""
    from conftest import SHARED_REAL

    glow = SHARED_REAL / "glow" / "caffe2Models"
    if not glow.is_dir():
        pytest.skip(f"no real fixtures at {SHARED_REAL}")
    predict = glow / "int8convrelu_pred_net.pbtxt"
    saved = tmp_path / "saved.npz"
    code, _, err = run_cli(capsys, "verify", str(predict), "-p", "", "--save-outputs", str(saved))
    assert code == 0, err
    code, out, err = run_cli(capsys, "verify", str(predict), "-p", "", "--load-outputs", str(saved))
    assert code == 0, err
    assert "outputs equal" in out
    code, out, err = run_cli(
        capsys, "exec", str(predict), "--feeds", str(saved), "-o", str(tmp_path / "o.npz")
    )
    assert code == 0, err
    with np.load(saved) as reference, np.load(tmp_path / "o.npz") as got:
        np.testing.assert_array_equal(got["conv_out"], reference["outputs/conv_out"])
    # the ONNX export takes the same file: an Int8 input is a graph input of its uint8 values
    exported = tmp_path / "m.onnx"
    code, _, err = run_cli(
        capsys, "export-onnx", str(predict), "-o", str(exported), "--opset", "17"
    )
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "exec", str(exported), "--feeds", str(saved), "-o", str(tmp_path / "x.npz")
    )
    assert code == 0, err
    with np.load(saved) as reference, np.load(tmp_path / "x.npz") as got:
        inputs = {k.removeprefix("inputs/"): reference[k] for k in reference if "inputs/" in k}
        assert all(v.dtype == np.uint8 for v in inputs.values())
        expected = run_onnxruntime(onnx.load(str(exported)), inputs)["conv_out"]
        np.testing.assert_array_equal(got["conv_out"], expected)


@dataclass(frozen=True)
class NudgeScale(Pass):
    """A pass moving every Scale's output by 0.1% (within a per-output rtol of 1e-2)."""

    name: ClassVar[str] = "nudge-scale"

    def call(self, model: Model) -> PassResult:
        return _changing_ops(model, "Scale", args={"scale": 1.001})


def _saved_pair(tmp_path: Path, ops: list[Op], outputs: list[str]) -> Path:
    folder = tmp_path / "pair"
    save_model(Model(Net(ops, ["x"], outputs, name="net"), Net([], name="init")), folder)
    (folder / "shapes.txt").write_text("x=2x3\n")
    return folder


def test_verify_bisect_uses_the_per_output_tolerances_of_the_verdict(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The nudge stays within p's own rtol; the Relu made a Sigmoid breaks q."""
    publish_passes(
        monkeypatch,
        {"BreakRelu": BreakRelu, "NudgeScale": NudgeScale},
        **{"break-relu": f"{PLUGIN}:BreakRelu", "nudge-scale": f"{PLUGIN}:NudgeScale"},
    )
    ops = [Op("Scale", ["x"], ["p"], args={"scale": 1.0}), Op("Relu", ["x"], ["q"])]
    pair = _saved_pair(tmp_path, ops, ["p", "q"])
    pipeline = "nudge-scale,break-relu"
    code, out, _ = run_cli(capsys, "verify", str(pair), "-p", pipeline, "--rtol", "p:1e-2")
    assert code == 1 and _table_rows(out)["p"][1] == "yes"
    code, out, _ = run_cli(
        capsys, "verify", str(pair), "-p", pipeline, "--rtol", "p:1e-2", "--bisect"
    )
    assert code == 1
    assert "first pass that changed the outputs: break-relu (round 1)\n" in out


def test_verify_bisect_of_a_net_declaring_no_outputs_names_the_pass(
    capsys: pytest.CaptureFixture[str], broken_plugin: None, tmp_path: Path
) -> None:
    """Such a net is compared on the blobs it never reads; bisect compares the same."""
    pair = _saved_pair(tmp_path, [Op("Relu", ["x"], ["r"]), Op("Scale", ["r"], ["y"])], [])
    code, out, _ = run_cli(capsys, "verify", str(pair), "-p", "break-relu", "--bisect")
    assert code == 1 and "outputs differ" in out
    assert "first pass that changed the outputs: break-relu (round 1)\n" in out


def test_verify_feeds_runs_both_models_on_the_given_arrays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --feeds: the original and the pipeline's result run on the user's own arrays
    (not made-up ones), as the saved inputs and outputs show: the outputs are exec's on the
    same file."""
    feeds = tmp_path / "feeds.npz"
    data = np.linspace(-1, 1, 36, dtype=np.float32).reshape(1, 1, 6, 6)
    np.savez(feeds, data=data)
    saved = tmp_path / "saved.npz"
    code, out, err = run_cli(
        capsys, "verify", str(TINY), "--feeds", str(feeds), "--save-outputs", str(saved)
    )
    assert code == 0, err
    assert "input data: float32[1, 1, 6, 6] (given: --feeds)" in out
    code, _, err = run_cli(
        capsys, "exec", str(TINY), "--feeds", str(feeds), "-o", str(tmp_path / "exec.npz")
    )
    assert code == 0, err
    with np.load(saved) as recorded, np.load(tmp_path / "exec.npz") as executed:
        np.testing.assert_array_equal(recorded["inputs/data"], data)
        np.testing.assert_array_equal(recorded["outputs/prob"], executed["prob"])


def test_verify_feeds_refuses_what_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt input name in the file is refused with the right name suggested (it would
    be fed to nothing while the real input was made up), and --feeds takes one model and no
    --load-outputs."""
    misspelt = tmp_path / "misspelt.npz"
    np.savez(misspelt, dta=np.ones((1, 1, 6, 6), np.float32))
    code, _, err = run_cli(capsys, "verify", str(TINY), "--feeds", str(misspelt))
    assert code == 2
    assert_one_error_line(err)
    assert "'dta', which is not an input of the predict_net (did you mean 'data'?)" in err
    with pytest.raises(SystemExit) as refused:  # argparse's refusal: usage, then error
        run_cli(
            capsys, "verify", str(TINY), "--feeds", str(misspelt), "--load-outputs", str(misspelt)
        )
    assert refused.value.code == 2
    assert "--load-outputs: not allowed with argument --feeds" in capsys.readouterr().err
    code, _, err = run_cli(capsys, "verify", str(TINY), str(TINY), "--feeds", str(misspelt))
    assert code == 2
    assert "--feeds" in err and "take one model" in err


def test_json_is_strict_and_a_nan_tolerance_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--atol prob:inf --json wrote "atol": Infinity (no JSON parser of the standard reads
    it), and --rtol nan was taken (every comparison with it fails)."""
    import json

    code, out, err = run_cli(capsys, "verify", str(TINY), "--atol", "prob:inf", "--json")
    assert code == 0, err

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    data = json.loads(out, parse_constant=refuse)
    assert data["verdict"] == "equal"
    assert "inf" in json.dumps(data)
    code, _, err = run_cli(capsys, "verify", str(TINY), "--rtol", "nan")
    assert code == 2
    assert_one_error_line(err, "--rtol 'nan' is not a number")


def test_two_tolerances_for_one_output_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """--rtol 1e-3,1e-4 compared at 1e-4 without a word (the last won): which was meant?
    The same value twice is no contradiction."""
    code, _, err = run_cli(capsys, "verify", str(TINY), "--rtol", "1e-3,1e-4")
    assert code == 2
    assert_one_error_line(err, "--rtol gives every output two tolerances (0.001 and 0.0001)")
    code, _, err = run_cli(capsys, "verify", str(TINY), "--atol", "prob:1e-3", "--atol", "prob:0")
    assert code == 2
    assert_one_error_line(err, "--atol gives output 'prob' two tolerances (0.001 and 0)")
    code, _, err = run_cli(
        capsys, "verify", str(TINY), "--rtol", "1e-3,prob:1e-2", "--rtol", "1e-3"
    )
    assert code == 0, err


@pytest.mark.parametrize("dialect", ["caffe2", "onnx"])
def test_verify_notes_outputs_that_are_nan_in_both_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dialect: str
) -> None:
    """The square root of made-up standard normal data is NaN about half the time: verify
    said 'equal' without a word, though it compared nothing there."""
    if dialect == "onnx":
        graph = onnx.helper.make_graph(
            [
                onnx.helper.make_node("Sqrt", ["x"], ["s"]),
                onnx.helper.make_node("Neg", ["s"], ["y"]),
            ],
            "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8, 8])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [8, 8])],
        )
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
        source = tmp_path / "m.onnx"
        onnx.save(model, str(source))
        argv = [str(source)]
    else:
        net = Net([Op("Sqrt", ["x"], ["s"]), Op("Negative", ["s"], ["y"])], ["x"], ["y"])
        save_model(Model(net), tmp_path / "m")
        argv = [str(tmp_path / "m"), "--shapes", "x=8x8"]
    code, out, err = run_cli(capsys, "verify", *argv, "-p", "default")
    assert code == 0, err
    note = [line for line in err.splitlines() if "is NaN in both models" in line]
    assert len(note) == 1 and "counted as equal" in note[0]
    count = int(note[0].split(" in ")[2].split(" of ")[0])
    assert 10 < count < 54  # about half of the 64 values
    code, out, _ = run_cli(capsys, "verify", *argv, "-p", "default", "--json")
    import json

    data = json.loads(out)
    assert data["outputs"][0]["nan_both"] == count
    assert any("is NaN in both models" in n for n in data["notes"])


def test_run_diff_shows_the_outputs_declared_by_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run --outputs pool1_cpu --diff hid the interface change that graphtools diff shows."""
    code, out, err = run_cli(
        capsys, "run", str(TINY), "--outputs", "pool1_cpu", "--diff", "-o", str(tmp_path / "o")
    )
    assert code == 0, err
    assert "- predict_net external output prob" in out
    assert "+ predict_net external output pool1_cpu" in out


def test_a_batch_keeps_numpy_warnings_off_its_report() -> None:
    """The workers of a batch inherit none of the command line's filters: made-up data's NaNs
    printed a RuntimeWarning from a kernel in batch mode only."""
    from conftest import SHARED_REAL

    dhruv = SHARED_REAL / "Dhruv-Mohan-supervision-by-registration" / "predict_net.pb"
    if not dhruv.is_file():
        pytest.skip(f"no real fixtures at {SHARED_REAL}")
    done = subprocess.run(
        [sys.executable, "-m", "graphtools", "verify", str(dhruv), str(TINY), "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr


@pytest.mark.usefixtures("broken_plugin")
def test_bisect_against_loaded_outputs_names_the_pass_or_says_none_is_to_blame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify --load-outputs --bisect said nothing at all: it bisects when the original gives
    the loaded outputs, and says no pass is to blame when it does not."""
    reference = tmp_path / "ref.npz"
    assert run_cli(capsys, "verify", str(TINY), "-p", "", "--save-outputs", str(reference))[0] == 0
    args = ("verify", str(TINY), "-p", "break-relu", "--load-outputs", str(reference), "--bisect")
    code, out, _ = run_cli(capsys, *args)
    assert code == 1
    assert "first pass that changed the outputs: break-relu" in out
    with np.load(reference) as saved:
        shifted = {
            key: value * 1.5 if key == "outputs/prob" else value for key, value in saved.items()
        }
    np.savez(tmp_path / "shifted.npz", **shifted)
    code, _, err = run_cli(
        capsys,
        "verify",
        str(TINY),
        "-p",
        "",
        "--load-outputs",
        str(tmp_path / "shifted.npz"),
        "--bisect",
    )
    assert code == 1
    assert "no pass is to blame" in err


def test_the_table_shows_both_shapes_of_an_output_whose_shape_differs() -> None:
    """A 'shape differs' row showed one side's shape only (the other was in --json alone)."""
    from graphtools.cli.common import diff_table
    from graphtools.testing import compare_outputs

    diffs = compare_outputs({"y": np.zeros(2, np.float32)}, {"y": np.zeros(0, np.float32)})
    console_text = "\n".join(_rows(diff_table(diffs)))
    assert "[2] vs [0]" in console_text and "shape" in diffs[0].reason


def _rows(table: Any) -> list[str]:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text().splitlines()


def test_verify_refuses_an_init_net_whose_weights_do_not_fit_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An init_net filling a bias of the wrong size: verify replaced it by a made-up one and
    said 'outputs equal' (exit 0, the notes gone with -q) of a model that cannot run on its
    own weights; now refused, as export-onnx refuses it, naming both ways out."""
    folder = save_pair_with_unfit_weights(tmp_path / "pair")
    code, out, err = run_cli(capsys, "verify", str(folder), "-q")
    assert code == 2 and "equal" not in out
    assert_one_error_line(err, "do not fit the net: 'w', 'b'", "--shapes", "--random-params")
    code, out, err = run_cli(capsys, "verify", str(folder), "--random-params")
    assert code == 0 and "outputs equal" in out and "replaced by a made-up one" in err


def test_verify_with_no_output_written_has_nothing_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The net declares an output no op writes: an empty table and 'outputs equal' proved
    nothing; it is an error naming the output and --outputs."""
    net = Net([Op("Relu", ["x"], ["a"])], ["x"], ["never"], name="net")
    folder = tmp_path / "pair"
    save_model(Model(net), folder)
    code, out, err = run_cli(capsys, "verify", str(folder), "--shapes", "x=2x3")
    assert code == 2 and "equal" not in out
    assert_one_error_line(err, "nothing to compare", "'never'", "--outputs")
    code, out, _ = run_cli(capsys, "verify", str(folder), "--shapes", "x=2x3", "--outputs", "a")
    assert code == 0 and "outputs equal" in out


def test_a_model_the_pipeline_leaves_unable_to_run_differs_and_bisect_names_the_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Reshape to [-1, 4] is no flatten, but remove-reshape-for-fc decides from its readers
    alone (as detectron2 does): after it the FC fails its size check. verify ended with the
    executor's error (exit 2), as if the input were at fault; the original runs, so the
    outputs differ, and --bisect names the pass."""
    net = Net(
        [
            Op("Relu", ["x"], ["r"]),
            Op("Reshape", ["r"], ["flat", "old"], args={"shape": [-1, 4]}),
            Op("FC", ["flat", "w", "b"], ["y"]),
        ],
        ["x", "w", "b"],
        ["y"],
        name="net",
    )
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"], args={"shape": [3, 4], "values": [0.5] * 12}),
            Op("GivenTensorFill", [], ["b"], args={"shape": [3], "values": [0.0] * 3}),
        ],
        name="init",
    )
    folder = tmp_path / "pair"
    save_model(Model(net, init), folder)
    argv = ["verify", str(folder), "--shapes", "x=1x2x2x2", "-p", "remove-reshape-for-fc"]
    code, out, err = run_cli(capsys, *argv, "--bisect")
    assert code == 1 and "outputs differ" in out
    assert "fails to run after the pipeline, where the original ran" in err
    assert "first pass that changed the outputs: remove-reshape-for-fc (round 1)" in out
    assert "after it the model fails to run: op #1 (FC)" in out
    code, out, _ = run_cli(capsys, *argv, "--json")
    assert code == 1 and '"verdict": "differ"' in out


def test_an_input_listed_twice_is_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """yolo-v3's predict_net lists its data input twice: run -o X.onnx asked shapes for
    ['gpu_0/data', 'gpu_0/data']."""
    net = Net([Op("Relu", ["x"], ["y"])], ["x", "x"], ["y"], name="net")
    save_model(Model(net), tmp_path / "pair")
    code, _, err = run_cli(capsys, "run", str(tmp_path / "pair"), "-o", str(tmp_path / "o.onnx"))
    assert code == 2
    assert_one_error_line(err, "inputs ['x'] need shapes")

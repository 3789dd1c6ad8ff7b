"""The command line: show, ssa, run, list-passes; exit codes and one-line errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, assert_one_error_line, run_cli

from graphtools.cli import main
from graphtools.printer import print_model, print_net, print_ssa_table
from graphtools.serde import load_model_dir, load_net, parse_netdef
from graphtools.serde.codec import net_from_netdef

TINY = FIXTURES / "models" / "tiny_export"
TENSORPROTOS = "facebookarchive-caffe2/negative/mnist_lenet_TensorProtos.pb"
PLAN = "breadbread1984-Caffe2-C-demo/test_plan.pbtxt"


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    return folder


# -- show / ssa -----------------------------------------------------------------------------


def test_show_model_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "show", str(TINY))
    assert (code, err) == (0, "")
    assert out == print_model(load_model_dir(TINY))
    assert out.startswith("net init_net 'tiny_export_init'\n")
    assert "net predict_net 'tiny_export'\n" in out
    assert "  %1 Relu(conv1@1) -> conv1@2\n" in out


def test_show_files(capsys: pytest.CaptureFixture[str]) -> None:
    predict = TINY / "predict_net.pbtxt"
    code, out, _ = run_cli(capsys, "show", str(predict))
    assert code == 0
    assert out == print_net(net_from_netdef(load_net(predict)), "predict_net.pbtxt") + "\n"
    code, out, _ = run_cli(capsys, "show", str(predict), str(TINY / "init_net.pbtxt"))
    assert code == 0
    assert out.startswith(f"# {predict}\nnet predict_net.pbtxt 'tiny_export'\n")
    assert f"\n\n# {TINY / 'init_net.pbtxt'}\nnet init_net.pbtxt 'tiny_export_init'\n" in out


def test_ssa(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "ssa", str(TINY))
    assert (code, err) == (0, "")
    assert out == print_ssa_table(load_model_dir(TINY).predict_net)
    assert "conv1@2  %1  %2\n" in out
    code, from_file, _ = run_cli(capsys, "ssa", str(TINY / "predict_net.pbtxt"))
    assert (code, from_file) == (0, out)


# -- errors ---------------------------------------------------------------------------------


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "absent.pb"
    for command in ("show", "ssa"):
        code, out, err = run_cli(capsys, command, str(missing))
        assert (code, out) == (2, "")
        assert_one_error_line(err, str(missing), "cannot read")


@pytest.mark.parametrize(("rel", "says"), [(TENSORPROTOS, "TensorProtos"), (PLAN, "PlanDef")])
def test_wrong_kind_of_file(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path, rel: str, says: str
) -> None:
    path = real_fixtures / rel
    code, out, err = run_cli(capsys, "show", str(path))
    assert (code, out) == (2, "")
    assert_one_error_line(err, str(path), says)


def test_traceback_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "--traceback", "show", str(tmp_path / "absent.pb"))
    assert code == 2
    assert err.startswith("Traceback (most recent call last):")
    assert "graphtools.errors.SerdeError" in err
    assert err.splitlines()[-1].startswith("error: ")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    capsys.readouterr()


# -- run ------------------------------------------------------------------------------------


def test_run_needs_an_output(capsys: pytest.CaptureFixture[str], tiny_copy: Path) -> None:
    before = {p.name: p.read_bytes() for p in tiny_copy.iterdir()}
    code, out, err = run_cli(capsys, "run", str(tiny_copy))
    assert (code, out) == (2, "")
    assert_one_error_line(err, "-o", "--in-place")
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "-o", str(tiny_copy))
    assert (code, out) == (2, "")
    assert_one_error_line(err, "refusing to overwrite", str(tiny_copy), "--in-place")
    assert {p.name: p.read_bytes() for p in tiny_copy.iterdir()} == before


def test_run_writes_output_folder(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run_cli(
        capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "-o", str(out_dir)
    )
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out_dir.iterdir()) == ["init_net.pbtxt", "predict_net.pbtxt"]
    assert f"wrote {out_dir / 'predict_net.pbtxt'}" in out
    predict, was_text = parse_netdef((out_dir / "predict_net.pbtxt").read_bytes())
    assert was_text
    assert "Sigmoid" not in [op.type for op in predict.op]  # the dead 'unused_debug' op
    assert len(predict.op) == 14
    init, was_text = parse_netdef((out_dir / "init_net.pbtxt").read_bytes())
    assert was_text
    assert len(init.op) == 8
    assert (tiny_copy / "predict_net.pbtxt").read_bytes() == (
        TINY / "predict_net.pbtxt"
    ).read_bytes()


def test_run_binary_output(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "bin"
    code, _, _ = run_cli(
        capsys,
        "run",
        str(tiny_copy / "predict_net.pbtxt"),
        "--init",
        str(tiny_copy / "init_net.pbtxt"),
        "--binary",
        "-o",
        str(out_dir),
    )
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["init_net.pb", "predict_net.pb"]
    assert parse_netdef((out_dir / "predict_net.pb").read_bytes())[1] is False


def test_run_in_place(capsys: pytest.CaptureFixture[str], tiny_copy: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "--in-place")
    assert (code, err) == (0, "")
    assert sorted(p.name for p in tiny_copy.iterdir()) == [
        "init_net.pbtxt",
        "predict_net.pbtxt",
        "shapes.txt",
    ]
    rewritten = (tiny_copy / "predict_net.pbtxt").read_bytes()
    assert rewritten != (TINY / "predict_net.pbtxt").read_bytes()
    predict, was_text = parse_netdef(rewritten)
    assert was_text
    assert "Sigmoid" not in [op.type for op in predict.op]
    assert f"wrote {tiny_copy / 'predict_net.pbtxt'}" in out


def test_run_unknown_pass(capsys: pytest.CaptureFixture[str], tiny_copy: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "-p", "no-such-pass", "--in-place")
    assert (code, out) == (2, "")
    assert_one_error_line(err, "no-such-pass")
    assert (tiny_copy / "predict_net.pbtxt").read_bytes() == (
        TINY / "predict_net.pbtxt"
    ).read_bytes()


def test_list_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "list-passes")
    assert (code, err) == (0, "")
    names = [
        line.split()[0] for line in out.splitlines() if line and not line.startswith("default")
    ]
    assert "remove-dead-ends" in names
    assert names == sorted(names)
    assert out.splitlines()[-1].startswith("default = ")


# -- the installed console script -----------------------------------------------------------


def _console_script() -> list[str]:
    found = shutil.which("graphtools") or shutil.which(
        "graphtools", path=str(Path(sys.executable).parent)
    )
    return [found] if found else [sys.executable, "-m", "graphtools"]


def test_console_script(tmp_path: Path) -> None:
    command = _console_script()
    shown = subprocess.run(
        [*command, "show", str(TINY)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == print_model(load_model_dir(TINY))
    missing = tmp_path / "absent.pb"
    failed = subprocess.run(
        [*command, "ssa", str(missing)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert (failed.returncode, failed.stdout) == (2, "")
    assert_one_error_line(failed.stderr, str(missing))

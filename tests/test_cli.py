"""The command line: show, ssa, run, list-passes; exit codes and one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, TINY_DEAD_HEAD_NOTE, assert_one_error_line, run_cli

from graphtools.cli import main
from graphtools.pass_infra import DEFAULT_PIPELINES, OPTIMIZE_PIPELINES
from graphtools.printer import print_model, print_net
from graphtools.serde import load_model_dir, load_net, parse_netdef, save_model
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


def test_show_summarises_a_model_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "show", str(TINY))
    assert (code, err) == (0, "")
    assert out.startswith("net tiny_export: 15 ops (")
    assert "init_net: 8 ops" in out
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines() if line}
    assert rows[("input", "data")] == ["float32[1,", "1,", "6,", "6]"]
    assert ("output", "prob") in rows
    assert "parameters: 8 blobs, 73 values" in out
    assert "devices: CPU 15" in out
    assert len(out.splitlines()) < 40


def test_show_full_is_the_canonical_dump(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "show", "--full", str(TINY))
    assert (code, err) == (0, "")
    assert out == print_model(load_model_dir(TINY), full=True)
    assert out.startswith("net init_net 'tiny_export_init'\n")
    assert "  %1 Relu(conv1@1) -> conv1@2\n" in out


def test_show_files_pair_with_the_init_net_beside_them(capsys: pytest.CaptureFixture[str]) -> None:
    predict = TINY / "predict_net.pbtxt"
    code, out, err = run_cli(capsys, "show", "--full", str(predict))
    assert code == 0
    assert out == print_model(load_model_dir(TINY), full=True)
    assert f"note: init_net {TINY / 'init_net.pbtxt'} found beside predict_net.pbtxt" in err
    code, out, err = run_cli(capsys, "show", "--full", "--no-init", str(predict))
    assert (code, err) == (0, "")
    expected = print_net(net_from_netdef(load_net(predict)), "predict_net", full=True)
    assert out == expected + "\n"
    code, out, _ = run_cli(capsys, "show", "--no-init", str(predict), str(TINY / "init_net.pbtxt"))
    assert code == 0
    assert out.startswith(f"# {predict}\nnet tiny_export: 15 ops")
    assert f"\n\n# {TINY / 'init_net.pbtxt'}\nnet tiny_export_init: 8 ops" in out


def test_a_predict_net_beside_an_init_net_in_two_formats_asks_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """predict_net.pb beside init_net.pb and init_net.pbtxt: no init_net is taken silently (the
    model was written without its parameters, exit 0); the user names one or none. The folder
    as a batch runs its two predict_nets, each asking the same, and never an init_net."""
    model = tmp_path / "m"
    shutil.copytree(TINY, model)
    assert (
        run_cli(capsys, "run", str(TINY), "--binary", "-p", "", "-o", str(tmp_path / "b"))[0] == 0
    )
    for name in ("predict_net.pb", "init_net.pb"):
        shutil.copy(tmp_path / "b" / name, model / name)
    predict = model / "predict_net.pb"
    code, _, err = run_cli(capsys, "run", str(predict), "-o", str(tmp_path / "out"))
    assert code == 2
    assert_one_error_line(err, "two init_nets fit predict_net.pb", "init_net.pb and init_net.pbtxt")
    assert not (tmp_path / "out").exists()
    chosen = ("--init", str(model / "init_net.pb"))
    code, _, err = run_cli(capsys, "run", str(predict), *chosen, "-o", str(tmp_path / "out"))
    assert code == 0, err
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["init_net.pb", "predict_net.pb", "shapes.txt"]
    assert run_cli(capsys, "show", "--no-init", str(predict))[0] == 0
    code, out, _ = run_cli(capsys, "run", str(model), "-o", str(tmp_path / "batch"))
    assert code == 2
    assert "predict_net_pb" in out and "predict_net_pbtxt" in out and "init_net" not in out


def test_ssa_table_is_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "ssa", str(TINY))
    assert (code, err) == (0, "")
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0].split() == ["blob@version", "written", "by", "read", "by"]
    column = lines[0].index("written by")
    assert all(line[column - 2 : column] == "  " for line in lines[1:])
    row = next(line for line in lines if line.startswith("conv1@2 "))
    assert row.split() == ["conv1@2", "%1", "%2"]
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


def test_run_refuses_an_output_folder_and_in_place_together(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    """Which one was meant is not ours to guess: the input stays as it was, nothing written."""
    before = {p.name: p.read_bytes() for p in tiny_copy.iterdir()}
    out_dir = tmp_path / "out"
    code, out, err = run_cli(
        capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "-o", str(out_dir), "--in-place"
    )
    assert (code, out) == (2, "")
    assert_one_error_line(err, "-o", "--in-place", "not both")
    assert {p.name: p.read_bytes() for p in tiny_copy.iterdir()} == before
    assert not out_dir.exists()


def test_run_writes_output_folder(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run_cli(
        capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "-o", str(out_dir)
    )
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)  # the fixture's dead debug head goes
    written = ["init_net.pbtxt", "predict_net.pbtxt", "shapes.txt"]
    assert sorted(p.name for p in out_dir.iterdir()) == written
    assert f"wrote {out_dir / 'predict_net.pbtxt'}" in out
    # the source's input shapes come along: later commands read them as given, not guessed
    assert (out_dir / "shapes.txt").read_text() == "data=1x1x6x6\n"
    code, out, _ = run_cli(capsys, "show", str(out_dir))
    assert f"input shapes data=1x1x6x6 ({out_dir / 'shapes.txt'})" in out
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
    # a source without shapes written there: the file left is another run's, and said so
    (tiny_copy / "shapes.txt").unlink()
    code, _, err = run_cli(capsys, "run", str(tiny_copy), "-o", str(out_dir))
    assert code == 0 and f"{out_dir / 'shapes.txt'} was not written by this run" in err


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
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "init_net.pb",
        "predict_net.pb",
        "shapes.txt",
    ]
    assert parse_netdef((out_dir / "predict_net.pb").read_bytes())[1] is False


def test_run_in_place(capsys: pytest.CaptureFixture[str], tiny_copy: Path) -> None:
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "--in-place")
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)
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


def test_list_passes_shows_options_with_types_and_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "list-passes")
    assert (code, err) == (0, "")
    assert "``" not in out
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line and " " in line}
    assert "keep_side_effects: bool (true/false) = true" in rows["remove-dead-ends"]
    assert "style: str = multi" in rows["ssa-rewrite"]
    assert " Caffe2, ONNX " in rows["remove-dead-ends"] and " Caffe2 " in rows["ssa-rewrite"]
    assert " ONNX (converts) " in rows["convert-to-caffe2"]
    pipelines = [line for line in out.splitlines() if " models = " in line]
    assert pipelines == [
        f"default on Caffe2 models = {DEFAULT_PIPELINES['caffe2']}",
        f"default on ONNX models = {DEFAULT_PIPELINES['onnx']}",
        f"optimize on ONNX models = {OPTIMIZE_PIPELINES['onnx']}",
    ]


def test_list_passes_for_one_dialect(capsys: pytest.CaptureFixture[str]) -> None:
    """An ONNX user sees the passes an ONNX model takes and the pipelines it runs, and the
    same in JSON (each pass with its dialects)."""
    code, out, err = run_cli(capsys, "list-passes", "--dialect", "onnx")
    assert (code, err) == (0, "")
    names = {line.split()[0] for line in out.splitlines()[1:] if line[:1].isalpha()}
    assert {"remove-dead-ends", "fuse-pad", "convert-to-caffe2"} <= names
    assert not names & {"fuse-copy-ops", "ssa-rewrite", "remove-reshape-for-fc"}
    assert "default on ONNX models = " in out and "on Caffe2 models" not in out
    code, out, _ = run_cli(capsys, "list-passes", "--dialect", "caffe2", "--json")
    data = json.loads(out)
    assert all("caffe2" in item["dialects"] for item in data["passes"])
    assert data["pipelines"] == {"default": {"caffe2": DEFAULT_PIPELINES["caffe2"]}}
    with pytest.raises(SystemExit) as refused:
        run_cli(capsys, "list-passes", "--dialect", "tflite")
    assert refused.value.code == 2 and "invalid choice: 'tflite'" in capsys.readouterr().err


def test_list_passes_name_shows_the_whole_doc(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "list-passes", "remove-dead-ends")
    assert (code, err) == (0, "")
    assert out.startswith(
        "remove-dead-ends: Remove ops of the main net (the predict_net, the ONNX graph) whose "
        "outputs never reach its outputs.\nmodels: Caffe2, ONNX\n"
    )
    assert "skipped_no_external_outputs" in out and "keep_types" in out
    assert "\nHow it works:\n\nRemove ops none of whose outputs can reach" in out
    code, out, err = run_cli(capsys, "list-passes", "fuse-pad")
    assert out.startswith('fuse-pad: Fold Pad into the Conv or pooling reading it (see "How it ')
    code, out, err = run_cli(capsys, "list-passes", "optimize")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"optimize on ONNX models = {OPTIMIZE_PIPELINES['onnx']}"
    code, out, err = run_cli(capsys, "list-passes", "remove-dead-end")
    assert (code, out) == (2, "")
    assert_one_error_line(err, "'remove-dead-end'", "did you mean 'remove-dead-ends'?")


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
    assert shown.stdout.startswith("net tiny_export: 15 ops")
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


def _binary_pair_and_onnx(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny export as a binary pair and as an ONNX model, in ``tmp_path``."""
    pair = tmp_path / "pair"
    save_model(load_model_dir(FIXTURES / "models" / "tiny_export"), pair, text=False)
    shutil.copy(FIXTURES / "models" / "tiny_export" / "shapes.txt", pair)
    model = tmp_path / "m.onnx"
    assert main(["export-onnx", str(pair), "-o", str(model), "-q"]) == 0
    return pair, model


@pytest.mark.parametrize(
    "command",
    [
        ["extract", "{onnx}", "--inputs", "pool1", "--outputs", "prob", "-o", "{onnx}"],
        ["extract", "{pair}", "--inputs", "pool1_cpu", "--outputs", "prob", "-o", "{pair}"],
        ["export-onnx", "{pair}", "-o", "{pair}/predict_net.pb"],
        ["verify", "{onnx}", "--save-outputs", "{onnx}"],
        ["verify", "{pair}", "--save-outputs", "{pair}/init_net.pb"],
    ],
    ids=["extract-onnx", "extract-pair", "export-onnx", "verify-onnx", "verify-pair"],
)
def test_no_command_writes_over_its_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    """Only run --in-place writes over a model: a slip of -o or --save-outputs is refused."""
    pair, model = _binary_pair_and_onnx(tmp_path)
    files = [*pair.iterdir(), model]
    before = {path: path.read_bytes() for path in files}
    argv = [part.format(pair=pair, onnx=model) for part in command]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert_one_error_line(err, "refusing to overwrite the input")
    assert {path: path.read_bytes() for path in files} == before


def test_a_folder_of_onnx_models_given_for_one_model_names_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A folder holding one ONNX model is that model (as a folder holding one pair is); one
    holding several is refused, naming them."""
    _, model = _binary_pair_and_onnx(tmp_path)
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(model, folder / "tiny.onnx")
    code, out, err = run_cli(capsys, "show", str(folder))
    assert (code, err) == (0, "") and out.startswith("onnx model tiny_export: 15 nodes")
    code, out, err = run_cli(capsys, "diff", str(folder), str(model))
    assert (code, err) == (0, "")
    ambiguous = tmp_path / "ambiguous"  # two predict_nets and an ONNX model: said, not guessed
    shutil.copytree(TINY, ambiguous)
    (ambiguous / "predict_net.pb").write_bytes(b"")
    shutil.copy(model, ambiguous / "tiny.onnx")
    code, _, err = run_cli(capsys, "show", str(ambiguous))
    assert code == 2 and "onnx model" not in err
    shutil.copy(model, folder / "other.onnx")
    code, _, err = run_cli(capsys, "show", str(folder))
    assert code == 2
    assert_one_error_line(
        err, "holds no Caffe2 pair", "2 ONNX models (other.onnx, tiny.onnx): give one"
    )


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["verify", "{tiny}", "-j", "0"], "at least one process"),
        (["run", "{tiny}", "-j", "-3", "-o", "{out}"], "at least one process"),
        (["verify", "{tiny}", "--print-after-each", "--json"], "without --json"),
        (["run", "{tiny}", "--print-after-each", "--json", "-o", "{out}"], "without --json"),
        (["diff", "{tiny}", "{tiny}", "--other-init", "x.pb"], "--other-init is only for"),
        (["show", "{tiny}", "--ops", "100:200"], "selects no op: the net has 15"),
        (["draw", "{tiny}", "--ops", "15", "-o", "{out}.dot"], "selects no op: the net has 15"),
    ],
    ids=["verify-j0", "run-j-3", "verify-json-dump", "run-json-dump", "other-init", "show", "draw"],
)
def test_options_that_would_do_nothing_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], fragment: str
) -> None:
    """-j 0 ran nothing, a dump under --json was dropped without a word, --ops past the end
    printed nothing (exit 0), and --other-init's error named --init."""
    tiny = FIXTURES / "models" / "tiny_export"
    try:
        code, _, err = run_cli(capsys, *(a.format(tiny=tiny, out=tmp_path / "o") for a in argv))
    except SystemExit as exc:  # argparse's own refusal: usage, then the error line
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and fragment in err.splitlines()[-1], err


def test_run_notes_a_head_it_removes_that_the_net_does_not_declare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MTCNN's PNet declares prob1 only: the default pipeline removed its box-regression
    head without a word. Now a note names it; declared, it stays and nothing is said."""
    from graphtools.ir import Model, Net, Op

    net = Net(
        [
            Op("Relu", ["x"], ["trunk"]),
            Op("Sigmoid", ["trunk"], ["prob"]),
            Op("Tanh", ["trunk"], ["boxes"]),
        ],
        ["x"],
        ["prob"],
        name="pnet",
    )
    save_model(Model(net), tmp_path / "pair")
    code, _, err = run_cli(capsys, "run", str(tmp_path / "pair"), "-o", str(tmp_path / "a"))
    assert code == 0
    assert "note: no op writes boxes any more" in err and "--outputs" in err
    code, _, err = run_cli(
        capsys, "run", str(tmp_path / "pair"), "-p", "", "-o", str(tmp_path / "c")
    )
    assert (code, err) == (0, "")  # no pass: nothing removed, and no view built to say so
    argv = ["run", str(tmp_path / "pair"), "-o", str(tmp_path / "b"), "--outputs", "prob,boxes"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0 and "no op writes" not in err
    assert [op.type for op in load_model_dir(tmp_path / "b").predict_net] == [
        "Relu",
        "Sigmoid",
        "Tanh",
    ]


def test_a_misspelt_shapes_txt_in_the_model_folder_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shapes.txt naming no input of the model was taken for another net's and ignored:
    with its one name misspelt, show and verify silently guessed the input shape instead. In
    the folder named (one model) it is refused as --shapes is; beside a net file named on the
    command line it may still belong to another net of the folder, and is ignored."""
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    (folder / "shapes.txt").write_text("dta=1x1x6x6\n")
    for command in ("show", "verify"):
        code, _, err = run_cli(capsys, command, str(folder))
        assert code == 2
        assert_one_error_line(err, "shapes.txt names 'dta'", "did you mean 'data'?")
    code, out, err = run_cli(capsys, "show", str(folder / "predict_net.pbtxt"))
    assert code == 0 and "data=1x1x6x6 (guessed)" in out, out + err


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--opset", "13"], "--opset: an option"),
        (["--dynamic-batch", "--test-mode"], "--dynamic-batch, --test-mode: options"),
        (["--external-data"], "--external-data: an option"),
    ],
)
def test_run_refuses_export_options_when_it_writes_a_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], named: str
) -> None:
    """--opset, --dynamic-batch, --external-data and --test-mode shape an ONNX output; with a
    Caffe2 pair written they were ignored without a word. Refused now, before anything is
    written, naming the option and the way to an ONNX output."""
    target = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", str(TINY), "-o", str(target), *options)
    assert code == 2
    assert_one_error_line(err, named, "-o OUT.onnx")
    assert not target.exists()

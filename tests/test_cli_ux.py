"""The users' first hour on the CLI: summaries and dumps, JSON, verbosity, help that teaches,
one rule for empty files, closed pipes, misspelt names, nets without outputs, verify's
statistics and reference files, batch runs, draw and diff."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_error_line, publish_passes, run_cli
from test_cli_verify import BreakRelu

from graphtools.analysis.model_diff import diff_models
from graphtools.cli import build_parser, main
from graphtools.cli.batch import BatchResult, exit_code, render_batch
from graphtools.cli.common import Output
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.serde import load_model_dir, save_model
from graphtools.serde.netdef_io import is_blank
from graphtools.serde.sniff import is_blank_data

TINY = FIXTURES / "models" / "tiny_export"
LSTM = "breadbread1984-Caffe2-C-LSTM-demo/deploy_models/lstm_predict_net.pbtxt"
SQUEEZE = "caffe2-models/squeezenet/predict_net.pb"


def _cli() -> list[str]:
    found = shutil.which("graphtools", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "graphtools"]


def _graphtools(*argv: str, timeout: int = 300, **options: Any) -> subprocess.CompletedProcess:
    """``graphtools ARGV`` in a fresh process, its output captured as text."""
    return subprocess.run(
        [*_cli(), *argv], capture_output=True, text=True, timeout=timeout, check=False, **options
    )


def _no_outputs(folder: Path) -> Path:
    net = Net(
        [Op("Relu", ["x"], ["a"]), Op("Sigmoid", ["a"], ["b"]), Op("Tanh", ["x"], ["c"])],
        ["x"],
        [],
        name="open",
    )
    save_model(Model(net), folder)
    return folder


@pytest.fixture
def broken_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    publish_passes(
        monkeypatch,
        {"BreakRelu": BreakRelu},
        **{"break-relu": "graphtools_test_plugin:BreakRelu"},
    )


# -- show ---------------------------------------------------------------------------------------


def test_show_ops_slices_and_cuts_long_values(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    code, out, err = run_cli(capsys, "show", "--ops", "1:3", str(TINY))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "%1 Relu(conv1@1) -> conv1@2",
        "%2 MaxPool(conv1@2) -> pool1@1 {kernel=2, order='NCHW', stride=2}",
    ]
    lstm = str(real_fixtures / LSTM)
    code, out, _ = run_cli(capsys, "show", "--ops", "1", lstm)
    assert code == 0 and "RecurrentNetwork" in out
    assert max(len(line) for line in out.splitlines()) < 1500
    assert "chars)" in out
    code, full, _ = run_cli(capsys, "show", "--full", lstm)
    assert code == 0 and "chars)" not in full
    assert max(len(line) for line in full.splitlines()) > 1500


def test_show_and_draw_take_a_slice_from_the_end_as_a_separate_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--ops -2:`` (the last two ops) is a value, not an unknown option."""
    code, out, err = run_cli(capsys, "show", "--ops", "-2:", str(TINY))
    assert (code, err) == (0, "")
    code, attached, _ = run_cli(capsys, "show", "--ops=-2:", str(TINY))
    assert out == attached and len(out.splitlines()) == 2
    code, out, err = run_cli(capsys, "show", "--ops", "-3:-1", str(TINY))
    assert (code, err) == (0, "") and len(out.splitlines()) == 2
    code, last, err = run_cli(capsys, "show", "--ops", "-1", str(TINY))  # was refused: none
    assert (code, err) == (0, "") and last.splitlines() == attached.splitlines()[-1:]
    code, _, err = run_cli(capsys, "draw", "--ops", "-2:", str(TINY), "-o", str(tmp_path / "d.dot"))
    assert (code, err) == (0, "") and "digraph" in (tmp_path / "d.dot").read_text()


def test_show_ops_before_the_path_lists_every_op(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``show --ops MODEL``: ``--ops`` has an optional range, and a path is not one; argparse
    alone took the model for the range and then asked for a path."""
    code, out, err = run_cli(capsys, "show", "--ops", str(TINY))
    assert (code, err) == (0, "")
    code, last_path, _ = run_cli(capsys, "show", str(TINY), "--ops")
    assert out == last_path and len(out.splitlines()) == 15
    code, _, err = run_cli(capsys, "draw", "--ops", str(TINY), "-o", str(tmp_path / "d.dot"))
    assert (code, err) == (0, "") and "digraph" in (tmp_path / "d.dot").read_text()
    code, _, err = run_cli(capsys, "show", "--ops", "1:x", str(TINY))
    assert code == 2
    assert_one_error_line(err, "--ops '1:x' is not a range")


@pytest.mark.parametrize("seed", ["-1", "x"])
def test_a_bad_seed_is_refused_as_usage(capsys: pytest.CaptureFixture[str], seed: str) -> None:
    """Not numpy's ValueError as a traceback with exit 1, which verify means as "differ"."""
    for command in ("verify", "exec", "export-onnx"):
        with pytest.raises(SystemExit) as refused:
            run_cli(capsys, command, str(TINY), f"--seed={seed}")
        err = capsys.readouterr().err
        assert refused.value.code == 2 and "argument --seed" in err and "Traceback" not in err


def test_a_file_that_is_no_model_is_named_for_what_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An ONNX user passing feeds or an external-data file is not told about NetDefs only."""
    np.savez(tmp_path / "feeds.npz", x=np.ones(3, np.float32))
    np.save(tmp_path / "x.npy", np.ones(3, np.float32))
    (tmp_path / "m.onnx.data").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    with zipfile.ZipFile(tmp_path / "model.pt", "w") as checkpoint:  # as torch.save writes
        checkpoint.writestr("model/data.pkl", b"\x80\x02}q\x00.")
        checkpoint.writestr("model/version", b"3\n")
    for name, fragment in [
        ("feeds.npz", "this is an .npz of arrays (for exec --feeds or verify), not a model"),
        ("model.pt", "this is a PyTorch checkpoint: export the model with torch.onnx.export"),
        ("x.npy", "this is a numpy array file (.npy), not a model"),
        ("m.onnx.data", "neither an ONNX model nor a binary Caffe2 NetDef"),
    ]:
        code, _, err = run_cli(capsys, "show", str(tmp_path / name))
        assert code == 2
        assert_one_error_line(err, name, fragment)


def test_show_params_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "show", "--params", str(TINY))
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows["conv1_w"] == ["float32[2,", "1,", "3,", "3]", "GivenTensorFill"]
    code, out, _ = run_cli(capsys, "show", "--json", str(TINY))
    data = json.loads(out)
    assert data["ops"] == 15 and data["init_ops"] == 8
    assert data["op_types"]["Relu"] == 2
    assert data["inputs"] == [{"name": "data", "type": "float32[1, 1, 6, 6]"}]
    assert data["param_values"] == 73
    code, out, _ = run_cli(capsys, "show", "--json", "--ops", "0:2", str(TINY))
    assert [op["type"] for op in json.loads(out)["ops"]] == ["Conv", "Relu"]


@pytest.mark.parametrize("command", ["show", "ssa", "verify", "diff", "run"])
@pytest.mark.parametrize("broken", ["model.onnx", "predict_net.pb"])
def test_json_commands_print_a_json_error_for_a_model_they_cannot_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, broken: str
) -> None:
    # A script reading --json parses stdout whatever happened: the error is a document too,
    # besides the one error line on stderr.
    path = tmp_path / broken
    path.write_bytes(b"not protobuf")
    argv = {"diff": [str(path), str(TINY)], "run": [str(path), "-o", str(tmp_path / "out")]}
    code, out, err = run_cli(capsys, command, "--json", *argv.get(command, [str(path)]))
    assert code == 2
    assert_one_error_line(err, broken)
    assert json.loads(out) == {"error": err.splitlines()[0].removeprefix("error: ")}


def test_json_error_document_only_when_nothing_else_was_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Several models shown: the bad one is an entry of the one document, not a second one.
    (tmp_path / "bad.onnx").write_bytes(b"not protobuf")
    code, out, _ = run_cli(capsys, "show", "--json", str(TINY), str(tmp_path / "bad.onnx"))
    assert code == 2
    documents = json.loads(out)
    assert [("error" in document) for document in documents] == [False, True]
    code, out, _ = run_cli(capsys, "show", str(tmp_path / "bad.onnx"))
    assert code == 2 and out == ""


def test_show_a_predict_only_zoo_net(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    code, out, _ = run_cli(capsys, "show", str(real_fixtures / SQUEEZE))
    assert code == 0
    assert "parameters nothing provides: 52" in out
    assert "input   data" in out and "guessed" in out


def test_ssa_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "ssa", "--json", str(TINY))
    rows = {row["blob"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["conv1@2"] == {"blob": "conv1@2", "written_by": "%1", "read_by": ["%2"]}


def _bracketed(folder: Path) -> Path:
    """A pair whose blob names hold brackets, as Mask R-CNN2Go's ``_[mask]_...`` blobs do."""
    net = Net(
        [Op("Conv", ["_[mask]_data", "_[mask]_w", "_[mask]_b"], ["[bold]y"], args={"kernel": 1})],
        ["_[mask]_data", "_[mask]_w", "_[mask]_b"],
        ["[bold]y"],
        name="brackets",
    )
    save_model(Model(net), folder)
    return folder


@pytest.mark.parametrize(
    "command", [["show"], ["show", "--full"], ["ssa"], ["show", "--ops", "0:1"]]
)
def test_names_with_brackets_print_as_they_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    """Issue 21 item 3: a name copied from a table works in ``--shapes`` (the tables used to
    read ``[mask]`` as markup and print ``__w``)."""
    code, out, err = run_cli(capsys, command[0], str(_bracketed(tmp_path / "m")), *command[1:])
    assert code == 0, err
    assert "_[mask]_data" in out and "[bold]y" in out


def test_ssa_json_has_no_table_placeholders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 21 item 10: a blob nothing writes or reads is ``null`` / ``[]`` in JSON, not the
    table's ``"-"``."""
    net = Net([Op("Relu", ["x"], ["a"])], ["x", "unused"], ["a"], name="n")
    save_model(Model(net), tmp_path / "m")
    code, out, _ = run_cli(capsys, "ssa", "--json", str(tmp_path / "m"))
    rows = {row["blob"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["unused@0"] == {"blob": "unused@0", "written_by": "input", "read_by": []}
    assert rows["a@1"] == {"blob": "a@1", "written_by": "%0", "read_by": []}


# -- one rule for empty files, one-line errors in the user's terms --------------------------------


@pytest.mark.parametrize("command", ["show", "ssa", "run", "verify", "exec", "draw"])
def test_an_empty_predict_file_is_refused_by_every_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    empty = tmp_path / "predict_net.pb"
    empty.write_bytes(b"")
    extra = {
        "run": ["-o", str(tmp_path / "out")],
        "exec": ["--feeds", str(tmp_path / "f.npz"), "-o", str(tmp_path / "o.npz")],
        "draw": ["-o", str(tmp_path / "n.dot")],
    }.get(command, [])
    code, out, err = run_cli(capsys, command, str(empty), *extra)
    assert (code, out) == (2, "")
    assert_one_error_line(err, str(empty), "the file is empty")
    assert "allow_empty" not in err


@pytest.mark.parametrize(
    ("content", "blank"),
    [
        (b"", True),
        (b" \n\t\r\x0b\x0c" * 30_000, True),  # whitespace past the first block read
        (b"\n" * 70_000 + b"x", False),  # its first other byte after the first block
        (b"\n\x05tiny", False),  # a binary NetDef's first byte is a newline
    ],
)
def test_a_file_of_whitespace_is_blank_whatever_its_length(
    tmp_path: Path, content: bytes, blank: bool
) -> None:
    path = tmp_path / "predict_net.pb"
    path.write_bytes(content)
    assert is_blank(path) is blank
    assert is_blank_data(content) is blank
    assert blank is (not content.strip())  # the rule it replaces


def test_an_empty_init_net_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(TINY / "predict_net.pbtxt", tmp_path / "predict_net.pbtxt")
    (tmp_path / "init_net.pbtxt").write_text("")
    code, out, err = run_cli(capsys, "show", str(tmp_path))
    assert code == 0 and out.startswith("net tiny_export")
    assert "warning: init_net" in err and "is empty" in err


def test_misspelt_shape_names_list_the_real_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "verify", str(TINY), "--shapes", "dta=1x1x6x6")
    assert (code, out) == (2, "")
    assert_one_error_line(err, "--shapes names 'dta'", "did you mean 'data'?", "inputs are: data")
    code, _, err = run_cli(capsys, "show", str(TINY), "--shapes", "dta=1x1x6x6")
    assert code == 2 and "did you mean 'data'?" in err


def test_misspelt_outputs_and_devices(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "verify", str(TINY), "--outputs", "porb")
    assert code == 2
    assert_one_error_line(err, "--outputs names 'porb'", "did you mean 'prob'?")
    code, _, err = run_cli(capsys, "run", str(TINY), "--device", "dat=gpu", "-o", str(tmp_path))
    assert code == 2
    assert_one_error_line(err, "--device names 'dat'", "did you mean 'data'?")


def test_traceback_verbosity_and_version_anywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, "show", str(tmp_path / "absent.pb"), "--traceback")
    assert code == 2 and err.startswith("Traceback (most recent call last):")
    code, out, _ = run_cli(capsys, "verify", str(TINY), "-q")
    assert code == 0
    assert out.splitlines()[0].startswith("pipeline ") and "round" not in out
    code, out, _ = run_cli(capsys, "-v", "verify", str(TINY))
    assert "round 2 remove-dead-ends" in out  # unchanged rounds only with -v
    code, out, _ = run_cli(capsys, "verify", str(TINY))
    assert "round 2" not in out
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("graphtools ")


def test_every_option_has_help_and_says_its_default() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
            default = action.default
            shown = default not in (None, False, argparse.SUPPRESS, [], ())
            if shown and action.option_strings:
                assert "default" in action.help, f"{name} {action.option_strings}: no default"


_LIST_MODULES = """
import atexit, sys
atexit.register(lambda: print("\\n".join(["MODULES", *sorted(sys.modules)])))
from graphtools.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _imported_by(*argv: str) -> set[str]:
    """The modules a fresh process has imported once ``graphtools ARGV`` is done."""
    done = subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split("MODULES\n", 1)[1].split())


def _heavy(modules: set[str], *roots: str) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in roots or m in roots)


def test_version_imports_no_command() -> None:
    # start-up is what a user waits for before anything happens: --version answers from the
    # grammar alone (graphtools.cli.grammar), without any command's machinery
    loaded = _imported_by("--version")
    assert _heavy(loaded, "numpy", "onnx", "rich", "google") == []
    commands = {"check", "common", "diff", "draw", "extract", "inspect", "list_passes"}
    commands |= {"onnx_commands", "pipeline"}
    assert sorted(m for m in loaded if m.removeprefix("graphtools.cli.") in commands) == []


def test_show_of_a_pair_imports_neither_onnx_nor_the_executor_nor_the_passes() -> None:
    loaded = _imported_by("show", str(TINY))
    assert _heavy(loaded, "onnx", "onnxruntime", "multiprocessing") == []
    unused = ("graphtools.executor", "graphtools.pass_infra", "graphtools.passes")
    unused += ("graphtools.testing", "graphtools.feeds", "graphtools.serde.onnx_codec")
    assert sorted(m for m in loaded if m.startswith(unused)) == []
    # Piped, its lines and tables are written as rich would write them, without rich's
    # console (a tenth of show's start); a model without recurrent ops needs not their
    # analysis, and a command that writes no file needs no temporary files.
    assert "rich.console" not in loaded and "rich.table" not in loaded
    assert "graphtools.analysis.recurrent" not in loaded
    assert "tempfile" not in loaded and "hashlib" not in loaded


def test_a_command_builds_the_parser_of_that_command_alone() -> None:
    from graphtools.cli.grammar import _REGISTER, command_parser

    def commands(parser: argparse.ArgumentParser) -> list[str]:
        found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(found.choices)

    everything = build_parser()
    assert commands(everything) == [name for names, _ in _REGISTER for name in names]
    assert commands(build_parser(["-v", "show", "x"])) == ["show", "ssa", "list-passes"]
    assert commands(build_parser(["verify", "x"])) == ["verify"]
    assert commands(build_parser(["--version"])) == []
    for whole in (["shwo", "x"], ["-h"], ["--help", "show"]):
        assert commands(build_parser(whole)) == commands(everything)
    for names, _ in _REGISTER:  # each group's parsers are the whole grammar's
        for name in names:
            alone = command_parser(build_parser([name]), name)
            assert alone.format_help() == command_parser(everything, name).format_help()


def test_run_of_a_pair_imports_neither_onnx_nor_the_executor(tmp_path: Path) -> None:
    loaded = _imported_by("-q", "run", str(TINY), "-o", str(tmp_path / "out"))
    assert _heavy(loaded, "onnx", "onnxruntime") == []
    unused = ("graphtools.executor", "graphtools.testing", "graphtools.serde.onnx_codec")
    assert sorted(m for m in loaded if m.startswith(unused)) == []


def test_the_grammars_steps_default_is_the_managers() -> None:
    from graphtools.cli.grammar import DEFAULT_STEPS
    from graphtools.pass_infra import DEFAULT_STEPS as MANAGER_STEPS

    assert DEFAULT_STEPS == MANAGER_STEPS


# -- closed pipes ---------------------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly_with_the_commands_exit_code(real_fixtures: Path) -> None:
    densenet = real_fixtures / "caffe2-models/densenet121/predict_net.pbtxt"
    command = [*_cli(), "show", "--full", str(densenet)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        err = process.stderr.read().decode()
        code = process.wait(timeout=60)
    assert first.startswith(b"net predict_net")
    assert code == 0
    assert "Traceback" not in err and "BrokenPipe" not in err


# -- verify ---------------------------------------------------------------------------------------


def test_verify_json_has_statistics_and_a_histogram(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "verify", "--json", str(TINY))
    assert code == 0
    data = json.loads(out)
    assert data["verdict"] == "equal"
    (prob,) = data["outputs"]
    assert prob["name"] == "prob" and prob["ok"] and prob["mismatches"] == 0
    assert prob["size"] == 3 and prob["mean_abs"] == 0.0
    assert sum(prob["histogram"]["counts"]) == 3
    assert data["inputs"][0]["name"] == "data"


def test_verify_per_output_tolerances_and_histogram(
    capsys: pytest.CaptureFixture[str], broken_plugin: None
) -> None:
    code, out, _ = run_cli(capsys, "verify", str(TINY), "-p", "break-relu")
    assert code == 1
    assert "|difference| histogram of prob (3 values):" in out
    code, out, _ = run_cli(
        capsys, "verify", str(TINY), "-p", "break-relu", "--atol", "1e-6,prob:10"
    )
    assert code == 0, out
    assert "outputs equal" in out and "1e-05/10" in out
    code, _, err = run_cli(capsys, "verify", "--rtol", "nope:1", str(TINY))
    assert code == 2
    assert_one_error_line(err, "'nope'", "not an output compared", "outputs compared: prob")
    code, _, err = run_cli(capsys, "verify", "--rtol", "prbo:1e-3", str(TINY))
    assert code == 2
    assert_one_error_line(err, "'prbo'", "did you mean 'prob'?")


def test_verify_saves_and_loads_reference_outputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, broken_plugin: None
) -> None:
    reference = tmp_path / "ref.npz"
    code, _, _ = run_cli(capsys, "verify", str(TINY), "--save-outputs", str(reference))
    assert code == 0
    with np.load(reference) as saved:
        assert {"inputs/data", "outputs/prob"} <= set(saved.files)
    code, out, _ = run_cli(
        capsys, "verify", str(TINY), "-p", "", "--load-outputs", str(reference), "--seed", "9"
    )
    assert code == 0 and "outputs equal" in out
    code, out, _ = run_cli(
        capsys, "verify", str(TINY), "-p", "break-relu", "--load-outputs", str(reference)
    )
    assert code == 1 and "outputs differ" in out


def test_verify_a_net_without_outputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = _no_outputs(tmp_path / "open")
    code, out, err = run_cli(capsys, "verify", str(folder), "--shapes", "x=2x3")
    assert code == 0, err
    assert "declares no external outputs: comparing the blobs it writes and never reads" in err
    assert "never reads (b, c)" in err
    assert {line.split()[0] for line in out.splitlines()[-2:]} == {"b", "c"}
    code, out, _ = run_cli(capsys, "verify", str(folder), "--shapes", "x=2x3", "--outputs", "a")
    assert code == 0
    assert out.splitlines()[-1].split()[:2] == ["a", "yes"]


def test_run_and_exec_warn_about_a_net_without_outputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = _no_outputs(tmp_path / "open")
    code, _, err = run_cli(capsys, "run", str(folder), "-o", str(tmp_path / "out"))
    assert code == 0
    assert "warning: the predict_net declares no external outputs" in err
    assert "remove-dead-ends keeps every op then" in err
    # a pipeline without remove-dead-ends has nothing to warn about
    code, _, err = run_cli(capsys, "run", str(folder), "-p", "", "-o", str(tmp_path / "out2"))
    assert (code, err) == (0, "")
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones((2, 3), np.float32))
    target = str(tmp_path / "o.npz")
    code, _, err = run_cli(capsys, "exec", str(folder), "--feeds", str(feeds), "-o", target)
    assert code == 0 and "note: the predict_net declares no external outputs: writing" in err
    code, _, _ = run_cli(
        capsys,
        "exec",
        str(folder),
        "--feeds",
        str(feeds),
        "-o",
        str(tmp_path / "o.npz"),
        "--outputs",
        "b,c",
    )
    assert code == 0
    with np.load(tmp_path / "o.npz") as written:
        assert sorted(written.files) == ["b", "c"]


def test_verify_makes_up_the_weights_of_a_predict_only_net(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    path = str(real_fixtures / SQUEEZE)
    code, _, err = run_cli(capsys, "verify", path)
    assert code == 0, err
    assert "made up 52 parameters" in err
    code, _, err = run_cli(capsys, "verify", path, "--no-random-params")
    assert code == 2
    assert_one_error_line(err, "parameter", "--random-params")


def test_verify_overrides_an_init_net_placeholder(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    """TrafficLight's init_net fills ``data`` with shape [1]: --shapes wins, and says so."""
    folder = real_fixtures / "Miyuan2018-TrafficLight-Test"
    code, out, err = run_cli(capsys, "verify", str(folder), "--shapes", "data=1x3x32x32")
    assert code == 0, err
    assert "input data: float32[1, 3, 32, 32] (given: --shapes)" in out
    assert "fed instead of the init_net's placeholder (ConstantFill of shape 1)" in err


def test_show_says_verify_feeds_a_detectors_im_info_the_init_net_fills(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    """Mask R-CNN2Go int8 fills im_info for the size it was exported at; verify feeds one made
    to fit its image, and show said nothing of it."""
    path = str(real_fixtures / "caffe2-models/mask_rcnn_2go/2018-12/int8/model.pb")
    code, _, err = run_cli(capsys, "show", path)
    assert code == 0, err
    assert "'im_info': the init_net fills it" in err and "op #69 (GenerateProposals)" in err
    code, _, err = run_cli(capsys, "verify", path)
    assert "input 'im_info': fed instead of the init_net's placeholder" in err


def test_verify_says_what_it_left_out_of_an_init_net_it_cannot_run(
    capsys: pytest.CaptureFixture[str], real_fixtures: Path
) -> None:
    path = real_fixtures / "breadbread1984-Caffe2-C-demo/deploy_models/mnist_predict_net.pbtxt"
    code, _, err = run_cli(capsys, "verify", str(path))
    assert code == 0, err
    assert "init_net op #1 (Load) cannot run here and is left out" in err
    assert "made up 8 parameters" in err


# -- run ------------------------------------------------------------------------------------------


def test_run_diff_json_time_and_print_after_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(
        capsys,
        "run",
        str(TINY),
        "-o",
        str(tmp_path / "o"),
        "--diff",
        "--time-passes",
        "--print-after-each",
    )
    assert code == 0
    assert "- predict_net %5 Sigmoid -> unused_debug" in out
    assert "predict_net: 8 removed, 0 added, 1 changed" in out
    assert "time per pass" in out and "fuse-copy-ops" in out
    assert "// after remove-dead-ends (round 1)" in out and "net predict_net" in out
    code, out, _ = run_cli(capsys, "run", "--json", str(TINY), "-o", str(tmp_path / "j"))
    data = json.loads(out)
    assert code == 0 and data["rounds"][0]["round"] == 1
    assert data["written"][0].endswith("predict_net.pbtxt")


def test_batch_run_and_verify_one_process_per_model(tmp_path: Path, real_fixtures: Path) -> None:
    models = tmp_path / "models"
    save_model(load_model_dir(TINY), models / "tiny")
    shutil.copy(real_fixtures / SQUEEZE, models / "squeeze_predict_net.pb")
    (models / "broken_predict_net.pb").write_bytes(b"not a net at all")
    done = _graphtools("run", str(models), "-o", str(tmp_path / "out"), "-j", "1")
    assert done.returncode == 2, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line}
    assert rows["tiny"][1:3] == ["15", "7"] and rows["tiny"][-1] == "ok"
    assert rows["squeeze_predict_net"][-1] == "ok"
    assert rows["broken_predict_net"][-1] == "error"
    assert "broken_predict_net: error:" in done.stderr
    assert (tmp_path / "out" / "tiny" / "predict_net.pbtxt").is_file()
    assert (tmp_path / "out" / "squeeze_predict_net" / "predict_net.pb").is_file()
    (models / "broken_predict_net.pb").unlink()
    done = _graphtools(
        "verify", "--json", str(models / "tiny"), str(models / "squeeze_predict_net.pb")
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [(r["name"], r["verdict"]) for r in results] == [
        ("tiny", "equal"),
        ("squeeze_predict_net", "equal"),
    ]


def test_batch_exit_code_is_the_worst_and_every_model_is_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Plugins published for one test do not reach the worker processes, so the summary and
    the exit code are checked on results (the subprocess test above runs real workers)."""
    results = [
        BatchResult("a", "a", "equal", 0, 5, 4, 0.1),
        BatchResult("b", "b", "differ", 1, 5, 5, 0.2),
        BatchResult("c", "c", "error", 2, error="c: the file is empty"),
    ]
    assert exit_code(results) == 2 and exit_code(results[:2]) == 1 and exit_code([]) == 0
    render_batch(Output(), results, "verify -p default")
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[2:5]] == ["a", "b", "c"]
    assert err == "c: error: c: the file is empty\n"  # errors on stderr, as for one model
    assert out.splitlines()[-1] == "1 differ, 1 equal, 1 error"


# -- draw -----------------------------------------------------------------------------------------


def test_draw_dot_has_every_op_and_every_external_blob(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, real_fixtures: Path
) -> None:
    path = real_fixtures / SQUEEZE
    target = tmp_path / "net.dot"
    code, out, _ = run_cli(capsys, "draw", str(path), "-o", str(target))
    assert code == 0 and f"wrote {target}" in out
    text = target.read_text()
    model = load_model_dir(path.parent)
    for index, op in enumerate(model.predict_net):
        assert f'label="%{index} {op.type}"' in text
    for name in model.predict_net.external_inputs:
        assert f'"in: {name}@0"' in text
    for name in model.predict_net.external_outputs:
        assert f"out: {name}@" in text
    code, _, _ = run_cli(capsys, "draw", str(path), "-o", str(target), "--ops", "0:3")
    sliced = target.read_text()
    assert 'label="%2 ' in sliced and 'label="%3 ' not in sliced


def test_draw_writes_to_stdout_a_folder_or_a_gv_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``-o -`` pipes DOT (``| dot -Tsvg``), a folder gets the model's name, ``.gv`` is DOT."""
    code, piped, err = run_cli(capsys, "draw", str(TINY), "-o", "-")
    assert (code, err) == (0, "") and piped.startswith('digraph "tiny_export" {')
    code, out, _ = run_cli(capsys, "draw", str(TINY), "-o", str(tmp_path))
    assert code == 0 and out == f"wrote {tmp_path / 'tiny_export.dot'}\n"
    assert (tmp_path / "tiny_export.dot").read_text() == piped
    code, _, _ = run_cli(capsys, "draw", str(TINY), "-o", str(tmp_path / "t.gv"))
    assert code == 0 and (tmp_path / "t.gv").read_text() == piped
    code, _, err = run_cli(capsys, "draw", str(TINY), "-o", str(tmp_path / "t.txt"))
    assert code == 2
    assert_one_error_line(err, "must end in .dot (or .gv), .svg or .png", "-o - writes DOT")


def test_draw_diff_colours_what_a_pipeline_changed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    after = tmp_path / "after"
    assert run_cli(capsys, "run", str(TINY), "-o", str(after))[0] == 0
    target = tmp_path / "diff.dot"
    code, _, _ = run_cli(capsys, "draw", str(TINY), "--diff", str(after), "-o", str(target))
    text = target.read_text()
    assert code == 0
    assert text.count('style="filled,dashed", fillcolor="#ffcdd2"') == 8  # removed ops
    assert "removed (red): 8, added (green): 0, changed (orange): 1" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_draw_renders_with_graphviz(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str, magic: bytes
) -> None:
    target = tmp_path / f"net{suffix}"
    code, _, err = run_cli(capsys, "draw", str(TINY), "-o", str(target))
    assert code == 0, err
    assert target.read_bytes().startswith(magic)


def test_draw_without_graphviz_says_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    done = _graphtools("draw", str(TINY), "-o", str(tmp_path / "net.svg"), env=env, timeout=60)
    assert done.returncode == 2
    assert_one_error_line(done.stderr, "Graphviz", "apt-get install graphviz", ".dot")
    done = _graphtools("draw", str(TINY), "-o", str(tmp_path / "net.dot"), env=env, timeout=60)
    assert done.returncode == 0 and (tmp_path / "net.dot").read_text().startswith("digraph")


# -- diff -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "removed", "init_removed", "params_removed", "changed"),
    [
        ("remove-dead-ends", "ops_removed", None, None, None),
        ("fuse-copy-ops", "copies_removed", None, None, "consumers_rewired"),
        (
            "remove-reshape-for-fc",
            "ops_removed",
            "init_ops_removed",
            "params_removed",
            "reshapes_removed",
        ),
    ],
)
def test_diff_lists_exactly_what_the_pass_stats_say(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    spec: str,
    removed: str,
    init_removed: str | None,
    params_removed: str | None,
    changed: str | None,
) -> None:
    before = load_model_dir(TINY)
    after = before.copy()
    (record,) = [r for r in PassManager.parse(spec, steps=1)(after) if r.modified]
    save_model(after, tmp_path / "after")
    code, out, _ = run_cli(capsys, "diff", "--json", str(TINY), str(tmp_path / "after"))
    assert code == 1
    data = json.loads(out)
    stats = record.stats
    assert len(data["predict"]["removed"]) == stats[removed]
    assert len(data["predict"]["added"]) == 0
    assert len(data["init"]["removed"]) == (stats[init_removed] if init_removed else 0)
    assert len(data["params_removed"]) == (stats[params_removed] if params_removed else 0)
    rewired = [c for c in data["predict"]["changed"] if c["rewired"]]
    assert len(rewired) == (stats[changed] if changed else 0)
    assert diff_models(before, after).same is False


def test_diff_of_a_model_with_itself_and_renames(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "diff", str(TINY), str(TINY))
    assert (code, out.strip()) == (0, "same structure")
    renamed = load_model_dir(TINY)
    PassManager.parse("rename{op=1,output=0,to=relu1}")(renamed)
    save_model(renamed, tmp_path / "r")
    code, out, _ = run_cli(capsys, "diff", str(TINY), str(tmp_path / "r"))
    assert code == 1
    assert "~ predict_net %1 -> %1 Relu: output 0 renamed conv1 -> relu1" in out
    assert "(1 renamed blobs)" in out


def test_more_flags_as_users_give_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(
        capsys,
        "run",
        str(TINY),
        "-p",
        "remove-dead-ends",
        "--outputs",
        "prob,fc1",
        "-o",
        str(tmp_path / "o"),
    )
    assert code == 0, err
    assert list(load_model_dir(tmp_path / "o").predict_net.external_outputs) == ["prob", "fc1"]
    code, _, err = run_cli(capsys, "run", str(TINY), "--steps", "1", "-o", str(tmp_path / "s"))
    assert code == 0
    assert "warning: pipeline" in err and "did not reach a fixpoint in 1 rounds" in err
    code, out, _ = run_cli(capsys, "list-passes", "--json")
    data = json.loads(out)
    assert code == 0 and data["default"].startswith("remove-identity-ops")
    rdead = next(p for p in data["passes"] if p["name"] == "remove-dead-ends")
    assert rdead["options"][0]["name"] == "keep_side_effects"
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, dta=np.ones((1, 1, 6, 6), np.float32))
    code, _, err = run_cli(
        capsys, "exec", str(TINY), "--feeds", str(feeds), "-o", str(tmp_path / "x.npz")
    )
    assert code == 2
    assert_one_error_line(err, "names 'dta'", "did you mean 'data'?")
    code, out, err = run_cli(capsys, "verify", str(TINY), "--random-params", "--seed", "4")
    assert code == 0 and "outputs equal (rtol=1e-05, atol=1e-06, seed=4)" in out


def test_run_verify_and_batch_count_ops_as_show_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 21 item 10: every command counts a model's ops as ``show`` does (the predict_net's;
    the init_net's apart), not predict_net + init_net (``23 -> 13`` beside ``15 ops``)."""
    code, out, _ = run_cli(capsys, "show", str(TINY))
    assert code == 0 and "15 ops" in out.splitlines()[0]
    code, out, _ = run_cli(capsys, "run", str(TINY), "-o", str(tmp_path / "one"))
    first = next(line for line in out.splitlines() if "remove-reshape-for-fc" in line)
    assert "15 -> 10 ops (init_net 8 -> 6)" in first
    code, out, _ = run_cli(capsys, "verify", "--json", str(TINY))
    assert (json.loads(out)["ops_before"], json.loads(out)["ops_after"]) == (15, 7)
    code, out, _ = run_cli(capsys, "run", str(FIXTURES / "models"), "-o", str(tmp_path / "b"))
    assert re.search(r"tiny_export\s+15\s+7\s", out), out


@pytest.mark.parametrize("name", ["x.pb", "x.pbtxt"])
def test_an_output_named_like_a_net_file_is_refused_not_made_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """Issue 21 item 10: ``-o out/x.pb`` used to create a folder named ``x.pb``; a pair is
    written into a folder, so a file name is refused in one line and nothing is created."""
    target = tmp_path / "out" / name
    for command in (["run", str(TINY)], ["run", str(FIXTURES / "models")]):
        code, out, err = run_cli(capsys, *command, "-o", str(target))
        assert (code, out) == (2, "")
        assert_one_error_line(err, f"-o {target}", "folder", "-o " + str(target.with_suffix("")))
        assert not target.exists()


def test_exec_of_a_net_without_outputs_writes_what_verify_compares(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A net declaring no external outputs: exec writes the blobs it writes and never reads,
    as verify compares them, instead of an empty .npz."""
    net = Net([Op("Relu", ["x"], ["a"]), Op("Sigmoid", ["a"], ["b"])], ["x"], [], name="n")
    save_model(Model(net), tmp_path / "m")
    np.savez(tmp_path / "f.npz", x=np.array([-1.0, 2.0], np.float32))
    code, _, err = run_cli(
        capsys,
        "exec",
        str(tmp_path / "m"),
        "--feeds",
        str(tmp_path / "f.npz"),
        "-o",
        str(tmp_path / "o.npz"),
    )
    assert code == 0 and "never reads (b)" in err
    with np.load(tmp_path / "o.npz") as written:
        assert list(written) == ["b"]


def test_show_says_what_makes_up_params_a_pair_lacks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    init = Net([Op("ConstantFill", [], ["w"], args={"shape": [2], "value": 1.0})], [], ["w"])
    net = Net([Op("Mul", ["x", "w"], ["y"]), Op("Add", ["y", "b"], ["z"])], ["x", "w", "b"], ["z"])
    save_model(Model(net, init), tmp_path / "m")
    code, out, _ = run_cli(capsys, "show", str(tmp_path / "m"))
    assert code == 0
    assert "parameters nothing provides: 1 (the init_net fills none of them; verify " in out
    assert "--random-params makes them up)" in out


def test_a_reversed_op_range_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "draw", str(TINY), "--ops", "5:2", "-o", str(tmp_path / "d.dot"))
    assert code == 2
    assert_one_error_line(err, "--ops '5:2' selects no op")


def _dying_worker(ref: Any, settings: Any) -> Any:
    """A worker whose process dies without a result (module level: spawned workers import
    it by name)."""
    os._exit(3)


def _echo_worker(ref: Any, settings: Any) -> BatchResult:
    return BatchResult(ref.name, str(ref.path), "ok", 0)


def test_a_worker_that_dies_is_that_models_error_and_the_batch_goes_on(tmp_path: Path) -> None:
    from graphtools.cli.batch import run_batch
    from graphtools.serde.pairing import ModelRef

    out = Output(1, False)
    refs = [ModelRef(tmp_path / name, None, name) for name in ("a", "b", "c")]
    results = run_batch(refs, _dying_worker, {}, 2, out)
    assert [(r.name, r.verdict, r.error) for r in results] == [
        (name, "error", "its process died (exit status 3)") for name in ("a", "b", "c")
    ]
    assert [r.name for r in run_batch(refs, _echo_worker, {}, 2, out)] == ["a", "b", "c"]


def _sleeping_worker(ref: Any, settings: Any) -> BatchResult:
    """A worker still at work long after the test ends, unless it is killed."""
    time.sleep(60)
    return BatchResult(ref.name, str(ref.path), "ok", 0)


def test_an_interrupt_during_a_workers_start_kills_that_worker_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that came while a worker was starting (SIGINT is held back then) is raised
    just after the start: that worker was not yet tracked, so it ran on, wrote its model
    after the interrupt and printed a BrokenPipe traceback sending its result."""
    import multiprocessing
    import multiprocessing.context

    from graphtools.cli.batch import run_batch
    from graphtools.serde.pairing import ModelRef

    spawn = multiprocessing.context.SpawnProcess
    original_start = spawn.start

    def start_then_interrupt(process: Any) -> None:
        original_start(process)
        raise KeyboardInterrupt  # where the held-back SIGINT is raised

    monkeypatch.setattr(spawn, "start", start_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_batch([ModelRef(tmp_path / "a", None, "a")], _sleeping_worker, {}, 1, Output(1, False))
    left = [child for child in multiprocessing.active_children() if child.name == "graphtools-a"]
    for child in left:  # not to leave it behind when the test fails
        child.kill()
    assert left == []


def test_a_batch_writing_inside_its_input_folder_does_not_run_its_own_results(
    tmp_path: Path,
) -> None:
    """run models -o models/optimized read back the last run's results and nested them
    again (2, then 4, then 6 models)."""
    models = tmp_path / "models"
    for name in ("a", "b"):
        save_model(load_model_dir(TINY), models / name)
    for _ in range(2):
        done = _graphtools("run", str(models), "-o", str(models / "optimized"), "-j", "1")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "2 ok"
    assert sorted(p.name for p in (models / "optimized").iterdir()) == ["a", "b"]


def test_an_unknown_option_shows_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's top-level parser reported it with the top-level usage, which lists no
    option of the command."""
    with pytest.raises(SystemExit) as stopped:
        main(["show", str(TINY), "--bogus"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: graphtools show ") and "[--params]" in err
    assert err.splitlines()[-1] == "graphtools show: error: unrecognized arguments: --bogus"


def test_verify_refuses_a_pipeline_that_converts_one_way(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Its outputs have nothing to be compared with: one line saying so, before any run (an
    ONNX input was told onnxruntime cannot run a caffe2 model, a pair that its inputs had no
    types)."""
    model = tmp_path / "tiny.onnx"
    assert run_cli(capsys, "export-onnx", str(TINY), "-o", str(model))[0] == 0
    for source, pipeline in (
        (model, "convert-to-caffe2"),
        (TINY, "remove-dead-ends,convert-to-onnx"),
    ):
        code, out, err = run_cli(capsys, "verify", str(source), "-p", pipeline)
        assert (code, out) == (2, "")
        advice = "convert-to-onnx" if source == model else "verify --onnx X.onnx PAIR"
        assert_one_error_line(err, "does not convert it back", advice)
    # a conversion that does not apply to the model is the pass's own refusal, as before
    code, _, err = run_cli(capsys, "verify", str(TINY), "-p", "convert-to-caffe2")
    assert code == 2 and "does not convert it back" not in err
    code, _, err = run_cli(capsys, "verify", str(model), "-p", "convert-to-caffe2,convert-to-onnx")
    assert code == 0, err

"""The CLI under interruption and misuse (issue 14): formats kept, folders never left ambiguous,
Ctrl-C and SIGTERM with one line, killed and concurrent runs never leaving a mixed pair.

The kill and concurrency tests run real processes on small synthetic pairs (benchmarks/synth.py):
a child imports the CLI, says it is ready, and runs the console script (``console_main``); the
parent signals it at a random point of its run (seeded), then checks that the output folder
loads as exactly the old pair or exactly the new one, and that no temporary, journal or lock
file is left behind.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, TINY_DEAD_HEAD_NOTE, assert_one_error_line, run_cli

from graphtools.cli import main
from graphtools.serde import load_model, load_model_dir, parse_netdef
from graphtools.serde.atomic import JOURNAL_NAME, LOCK_NAME, TEMP_SUFFIX

TINY = FIXTURES / "models" / "tiny_export"
_SYNTH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_CHILD = (
    "import sys\n"
    "from graphtools.cli import console_main\n"
    "print('ready', flush=True)\n"
    "if sys.argv[1] == 'wait':\n"
    "    sys.stdin.readline()\n"
    "console_main(sys.argv[2:])\n"
)


_HOLDER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from graphtools.serde import atomic\n"
    "with atomic._locked([Path(sys.argv[1]).resolve()]):\n"
    "    print('locked', flush=True)\n"
    "    sys.stdin.readline()\n"
)


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    return folder


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# -- defect 4: each file keeps its format ----------------------------------------------------


def _mixed_pair(tiny_copy: Path) -> tuple[Path, Path]:
    """tiny_export with its init_net turned binary: a text predict_net, a binary init_net."""
    init_text = tiny_copy / "init_net.pbtxt"
    netdef, _ = parse_netdef(init_text.read_bytes())
    init_bin = tiny_copy / "init_net.pb"
    init_bin.write_bytes(netdef.SerializeToString())
    init_text.unlink()
    return tiny_copy / "predict_net.pbtxt", init_bin


def test_in_place_keeps_each_files_format(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path
) -> None:
    predict, init = _mixed_pair(tiny_copy)
    code, _, err = run_cli(
        capsys, "run", str(predict), "--init", str(init), "-p", "remove-dead-ends", "--in-place"
    )
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)
    assert parse_netdef(predict.read_bytes())[1] is True
    assert parse_netdef(init.read_bytes())[1] is False  # not text under a .pb name
    assert sorted(_listing(tiny_copy)) == ["init_net.pb", "predict_net.pbtxt", "shapes.txt"]


def test_output_folder_keeps_each_files_format(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    _mixed_pair(tiny_copy)
    out_dir = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", str(tiny_copy), "-o", str(out_dir))
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)
    assert sorted(_listing(out_dir)) == ["init_net.pb", "predict_net.pbtxt", "shapes.txt"]
    assert parse_netdef((out_dir / "init_net.pb").read_bytes())[1] is False


def test_in_place_format_change_renames_and_removes_the_twin(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path
) -> None:
    """--binary on a mixed pair changes only the text file; its stale twin goes, with a line."""
    _mixed_pair(tiny_copy)
    init_before = (tiny_copy / "init_net.pb").read_bytes()
    code, out, err = run_cli(
        capsys, "run", str(tiny_copy), "-p", "remove-dead-ends", "--binary", "--in-place"
    )
    assert (code, err) == (0, TINY_DEAD_HEAD_NOTE)
    assert sorted(_listing(tiny_copy)) == ["init_net.pb", "predict_net.pb", "shapes.txt"]
    assert f"removed {tiny_copy / 'predict_net.pbtxt'} (replaced by predict_net.pb)" in out
    assert (tiny_copy / "init_net.pb").read_bytes() == init_before  # already binary, unchanged
    assert load_model_dir(tiny_copy).text is False


# -- defect 5: a folder never left ambiguous --------------------------------------------------


def test_output_that_would_make_the_folder_ambiguous_is_refused(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path
) -> None:
    before = _listing(tiny_copy)
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "--binary", "-o", str(tiny_copy))
    assert (code, out) == (2, "")
    assert_one_error_line(
        err, "predict_net.pb, predict_net.pbtxt", "remove predict_net.pbtxt", "--in-place"
    )
    assert _listing(tiny_copy) == before
    code, _, _ = run_cli(capsys, "show", str(tiny_copy))
    assert code == 0


def test_predict_only_model_beside_an_old_init_is_refused(
    capsys: pytest.CaptureFixture[str], tiny_copy: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "init_net.pbtxt").write_bytes((TINY / "init_net.pbtxt").read_bytes())
    # --no-init: the predict_net file alone (by default its init_net beside it comes along)
    predict = str(tiny_copy / "predict_net.pbtxt")
    code, _, err = run_cli(capsys, "run", predict, "--no-init", "-o", str(out_dir))
    assert code == 2
    assert_one_error_line(err, "holds init_net.pbtxt", "predict-only")
    assert sorted(_listing(out_dir)) == ["init_net.pbtxt"]


# -- defect 6: verify --shapes for nets without declared inputs -------------------------------


def test_verify_uses_shapes_for_implicit_inputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "avgpool.pbtxt"
    path.write_text(
        'name: "averagePool_test"\n'
        'op { input: "inputs" output: "output" type: "AveragePool"\n'
        '  arg { name: "kernel" i: 2 } arg { name: "stride" i: 1 } arg { name: "pad" i: 1 } }\n'
        'external_output: "output"\n'
    )
    code, out, err = run_cli(capsys, "verify", str(path), "--shapes", "inputs=1x1x4x4")
    assert code == 0 and "error" not in err
    assert "outputs equal" in out
    code, out, _ = run_cli(capsys, "verify", str(path))
    assert code == 0
    assert "input inputs: float32[1, 3, 28, 28] (guessed" in out


# -- defect 7: interrupts, in-process ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "code", "line"),
    [
        (KeyboardInterrupt, 130, "error: interrupted (Ctrl-C)"),
        (signal.SIGTERM, 143, "error: terminated by SIGTERM"),
    ],
)
def test_interrupt_exits_with_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_copy: Path,
    tmp_path: Path,
    raised: object,
    code: int,
    line: str,
) -> None:
    from graphtools.pass_infra import PassManager

    def stopped(self: object, model: object, **options: object) -> object:
        if raised is KeyboardInterrupt:
            raise KeyboardInterrupt
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(PassManager, "__call__", stopped)
    handler = signal.getsignal(signal.SIGTERM)
    result = run_cli(capsys, "run", str(tiny_copy), "-o", str(tmp_path / "out"))
    assert result == (code, "", line + "\n")
    assert not (tmp_path / "out").exists()
    assert signal.getsignal(signal.SIGTERM) is handler  # restored


# -- defect 3: killed runs, concurrent runs (real processes) ----------------------------------


def _synth() -> object:
    spec = importlib.util.spec_from_file_location("synth", _SYNTH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two different synthetic pairs A and B, and what ``run -o`` writes for each."""
    synth = _synth()
    root = tmp_path_factory.mktemp("pairs")
    found: dict[str, object] = {}
    for label, size, seed in (("A", 3000, 1), ("B", 3000, 2)):
        source = root / f"src{label}"
        source.mkdir()
        synth.write_pair(*synth.make_synthetic_pair(size, seed), source)  # type: ignore[attr-defined]
        out = root / f"out{label}"
        assert main(["run", str(source), "-o", str(out)]) == 0
        found[label] = source
        found[f"{label}_out"] = _listing(out)
    return found


def _child(argv: list[str], wait: bool = False) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD, "wait" if wait else "go", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


def _which_pair(folder: Path, models: dict[str, object]) -> str:
    """``A`` or ``B``: the whole pair the folder loads as (reading completes a killed write)."""
    load_model_dir(folder)
    files = {k: v for k, v in _listing(folder).items() if not k.startswith(".")}
    for label in ("A", "B"):
        if files == models[f"{label}_out"]:
            return label
    raise AssertionError(f"the folder holds a mixed or partial pair: {sorted(files)}")


def _leftovers(folder: Path) -> list[str]:
    return [
        p.name
        for p in folder.iterdir()
        if p.name.endswith(TEMP_SUFFIX) or p.name in (JOURNAL_NAME, LOCK_NAME)
    ]


_INTERRUPTED_IMPORT = """
import importlib.abc, os, signal, sys

class InterruptTheCli(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "graphtools.cli":
            os.kill(os.getpid(), signal.SIG{signal})
        return None

sys.meta_path.insert(0, InterruptTheCli())
from graphtools.launch import console_script
console_script()
"""


@pytest.mark.parametrize(
    ("name", "line"),
    [("INT", "error: interrupted (Ctrl-C)"), ("TERM", "error: terminated by SIGTERM")],
)
def test_a_signal_while_the_command_line_is_imported_exits_with_one_line(
    name: str, line: str
) -> None:
    """The console script installs its handlers before it imports the command line (tens of
    milliseconds): a signal in that import ends the process with the CLI's one line, not
    Python's KeyboardInterrupt traceback."""
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT.replace("{signal}", name), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        128 + getattr(signal, f"SIG{name}"),
        "",
        line + "\n",
    )


def test_a_signal_while_a_class_is_made_exits_with_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_copy: Path,
    tmp_path: Path,
) -> None:
    """SIGTERM arriving while the command's module is imported, as a class of it is made
    (found by the killed runs below: Python 3.11 wraps the signal's exception in a
    RuntimeError from __set_name__), still ends the run with the signal's one line."""
    import graphtools.cli as cli

    class RaisesOnNaming:
        def __set_name__(self, owner: type, name: str) -> None:
            signal.raise_signal(signal.SIGTERM)

    def import_interrupted(name: str) -> object:
        type("Made", (), {"field": RaisesOnNaming()})
        raise AssertionError("SIGTERM did not stop the import")

    monkeypatch.setattr(cli.importlib, "import_module", import_interrupted)
    code, out, err = run_cli(capsys, "run", str(tiny_copy), "-o", str(tmp_path / "out"))
    assert (code, out, err) == (128 + signal.SIGTERM, "", "error: terminated by SIGTERM\n")


@pytest.mark.slow
def test_killed_runs_leave_one_whole_pair(two_models: dict[str, object], tmp_path: Path) -> None:
    rng = random.Random(14)
    reference = _child(["run", str(two_models["B"]), "-o", str(tmp_path / "timing")])
    start = time.perf_counter()
    reference.communicate(timeout=120)
    duration = time.perf_counter() - start
    outcomes = []
    for trial, signum in enumerate([signal.SIGINT, signal.SIGTERM, signal.SIGKILL] * 2):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        for name, data in two_models["A_out"].items():  # type: ignore[attr-defined]
            (folder / name).write_bytes(data)
        process = _child(["run", str(two_models["B"]), "-o", str(folder)])
        time.sleep(rng.uniform(0, duration))
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
        code = process.returncode
        if signum != signal.SIGKILL:
            assert _leftovers(folder) == []
            # 0: the signal came after the process's last bytecode
            assert code in (0, 128 + signum), err
            if code == 128 + signum:  # after the note on the dead ends, when it came late
                lines = [x for x in err.splitlines() if not x.startswith("note: no op writes ")]
                assert len(lines) == 1 and lines[0].startswith("error: "), err
        outcomes.append(_which_pair(folder, two_models))
        assert main(["run", str(two_models["A"]), "-o", str(folder)]) == 0
        assert _leftovers(folder) == []  # a killed writer's temporaries are gone
    assert set(outcomes) <= {"A", "B"}


@pytest.mark.slow
def test_concurrent_runs_never_interleave(two_models: dict[str, object], tmp_path: Path) -> None:
    for trial in range(3):
        folder = tmp_path / f"trial{trial}"
        processes = [
            _child(["run", str(two_models[label]), "-o", str(folder)], wait=True)
            for label in ("A", "B")
        ]
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in processes:
            _, err = process.communicate(timeout=120)
            assert process.returncode in (0, 2), err
            if process.returncode == 2:  # the two writes overlapped: one was refused
                assert_one_error_line(err, "another graphtools process", "is writing")
        assert _which_pair(folder, two_models) in ("A", "B")
        assert _leftovers(folder) == []


def test_a_writer_holding_the_folder_refuses_the_run(
    capsys: pytest.CaptureFixture[str], two_models: dict[str, object], tmp_path: Path
) -> None:
    """Another process writing into the output folder: ``run`` fails with one clear line."""
    folder = tmp_path / "out"
    folder.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        code, _, err = run_cli(capsys, "run", str(two_models["A"]), "-o", str(folder))
    finally:
        holder.communicate("done\n", timeout=60)
    assert code == 2
    *notes, last = err.splitlines()  # the synthetic net's dead ends, removed, are noted
    assert all(line.startswith("note: no op writes ") for line in notes)
    assert_one_error_line(last, f"another graphtools process (pid {holder.pid}) is writing")
    assert _listing(folder) == {}
    assert main(["run", str(two_models["A"]), "-o", str(folder)]) == 0


def test_a_killed_pair_loads_whole_through_the_api(
    two_models: dict[str, object], tmp_path: Path
) -> None:
    """``load_model`` on the files of a folder (not the folder) also completes a killed write."""
    folder = tmp_path / "out"
    folder.mkdir()
    for name, data in two_models["A_out"].items():  # type: ignore[attr-defined]
        (folder / name).write_bytes(data)
    (folder / "predict_net.pb").write_bytes(two_models["B_out"]["predict_net.pb"])  # type: ignore[index]
    temp = folder / f".init_net.pb.x{TEMP_SUFFIX}"
    temp.write_bytes(two_models["B_out"]["init_net.pb"])  # type: ignore[index]
    (folder / JOURNAL_NAME).write_text(
        f'{{"renames": [["{temp}", "{folder / "init_net.pb"}"]], "remove": []}}'
    )
    load_model(folder / "predict_net.pb", folder / "init_net.pb")
    assert _which_pair(folder, two_models) == "B"


_LATE = (
    "import os, signal, sys, importlib.metadata\n"
    "import graphtools.cli as cli\n"
    "real, late = cli.main, getattr(signal, sys.argv[1])\n"
    "def main(argv=None):\n"
    "    code = real(argv)\n"
    "    os.kill(os.getpid(), late)  # just after the output commit\n"
    "    return code\n"
    "cli.main = main\n"
    "(script,) = importlib.metadata.entry_points(group='console_scripts', name='graphtools')\n"
    "sys.argv = ['graphtools', *sys.argv[2:]]\n"
    "script.load()()\n"
)


@pytest.mark.parametrize(
    ("signum", "line"),
    [
        (signal.SIGTERM, "error: terminated by SIGTERM"),
        (signal.SIGINT, "error: interrupted (Ctrl-C)"),
    ],
)
def test_a_signal_after_the_command_returned_still_exits_with_one_line(
    tiny_copy: Path, tmp_path: Path, signum: signal.Signals, line: str
) -> None:
    """Issue 21 item 9: the console script keeps its handlers until the process ends, so a
    signal arriving after the output is committed exits 128+N with one line, not by the signal
    (exit -15, no message)."""
    out_dir = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", _LATE, signum.name, "run", str(tiny_copy), "-o", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (128 + signum, TINY_DEAD_HEAD_NOTE + line + "\n")
    assert load_model_dir(out_dir) is not None  # the files were committed whole


@pytest.fixture(scope="module")
def slow_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of three synthetic pairs that ``run -j 2`` takes 3.5 s over on the machine
    this was written on: the later interrupt (1.8 s) comes well before the end."""
    synth = _synth()
    batch = tmp_path_factory.mktemp("batch")
    for index, size in enumerate([120000, 120000, 60000]):
        folder = batch / f"m{index}"
        folder.mkdir()
        synth.write_pair(*synth.make_synthetic_pair(size, index), folder)  # type: ignore[attr-defined]
    return batch


@pytest.mark.parametrize("delay", [0.7, 1.8])
def test_ctrl_c_stops_a_batch_at_once_without_tracebacks(
    slow_batch: Path, tmp_path: Path, delay: float
) -> None:
    """Ctrl-C in a terminal reaches the whole process group, workers included: the workers
    (blocked for SIGINT from their start) print nothing, the batch cancels what is not started
    and kills what runs, so no model is written after the interrupt."""
    batch = slow_batch
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "graphtools", "run", str(batch), "-o", str(out), "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    time.sleep(delay)
    interrupted_at = time.time()
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.splitlines()[0] == "error: interrupted (Ctrl-C)", err
    assert "Traceback" not in err
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert all(p.stat().st_mtime <= interrupted_at for p in written), written

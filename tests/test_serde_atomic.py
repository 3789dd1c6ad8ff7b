"""Pairs written as a unit (graphtools.serde.atomic): temporaries then renames, the folder lock,
nothing replaced on failure, temporaries removed, and recovery from a write killed mid-commit."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest

from graphtools.errors import SerdeError
from graphtools.interrupt import Terminated, signals_as_exceptions
from graphtools.printer import print_model
from graphtools.serde import atomic, load_model_dir
from graphtools.serde.atomic import (
    JOURNAL_NAME,
    LOCK_NAME,
    TEMP_SUFFIX,
    recover_interrupted_write,
    write_files,
)

OLD = {"predict_net.pb": b"old predict", "init_net.pb": b"old init"}
NEW = {"predict_net.pb": b"new predict", "init_net.pb": b"new init"}


def _folder_with_old_pair(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    for name, data in OLD.items():
        (folder / name).write_bytes(data)
    return folder


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _new_pair(folder: Path) -> list[tuple[Path, bytes]]:
    return [(folder / name, data) for name, data in NEW.items()]


def test_pair_replaces_old_pair_and_leaves_nothing_else(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    written = write_files(_new_pair(folder), remove=[folder / "stale.pbtxt"])
    assert written == [folder / "predict_net.pb", folder / "init_net.pb"]
    assert _contents(folder) == NEW


def test_second_writer_fails_with_a_clear_error(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    with atomic._locked([folder.resolve()]):
        assert (folder / LOCK_NAME).read_text() == str(os.getpid())
        with pytest.raises(SerdeError) as info:
            write_files(_new_pair(folder))
    assert info.value.path == folder.resolve()
    assert f"another graphtools process (pid {os.getpid()}) is writing" in info.value.reason
    assert _contents(folder) == OLD  # the lock file is gone with its holder


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_failure_replaces_nothing_and_removes_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """A full disk on the first file, the second, or the journal (the commit point)."""
    folder = _folder_with_old_pair(tmp_path)
    real_write = atomic._write_temp
    calls = []

    def full_disk(target: Path, data: bytes) -> Path:
        calls.append(target)
        if len(calls) > failing:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(target, data)

    monkeypatch.setattr(atomic, "_write_temp", full_disk)
    with pytest.raises(SerdeError) as info:
        write_files(_new_pair(folder))
    assert "No space left on device" in info.value.reason
    names = [*NEW, JOURNAL_NAME]
    assert info.value.path == folder / names[failing]
    assert _contents(folder) == OLD


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, Terminated])
def test_interrupt_while_writing_removes_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interrupt: type[BaseException]
) -> None:
    folder = _folder_with_old_pair(tmp_path)
    real_write = atomic._write_temp
    calls = []

    def interrupted(target: Path, data: bytes) -> Path:
        calls.append(target)
        if len(calls) == 2:
            raise interrupt(signal.SIGTERM) if interrupt is Terminated else interrupt()
        return real_write(target, data)

    monkeypatch.setattr(atomic, "_write_temp", interrupted)
    with pytest.raises(interrupt):
        write_files(_new_pair(folder))
    assert _contents(folder) == OLD


def test_signals_are_held_during_the_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM arriving between the two renames is delivered after them: the pair is whole."""
    folder = _folder_with_old_pair(tmp_path)
    real_replace = os.replace
    renames = []

    def replace_then_signal(source: Path, target: Path) -> None:
        real_replace(source, target)
        renames.append(target)
        if len(renames) == 2:  # the journal, then the first file of the pair
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(atomic.os, "replace", replace_then_signal)
    with pytest.raises(Terminated), signals_as_exceptions():
        write_files(_new_pair(folder))
    assert _contents(folder) == NEW


@pytest.mark.parametrize("step", ["flock", "ftruncate"])
def test_a_signal_while_locking_leaves_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """SIGTERM arriving after the lock file is created but before the write holds it (found
    by test_cli_hostile's killed runs) is delivered once the lock is held: the write stops
    and the lock file goes with it."""
    folder = _folder_with_old_pair(tmp_path)
    module = atomic.fcntl if step == "flock" else atomic.os
    real = getattr(module, step)

    def step_then_signal(*args: object) -> object:
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args)

    monkeypatch.setattr(module, step, step_then_signal)
    with pytest.raises(Terminated), signals_as_exceptions():
        write_files(_new_pair(folder))
    monkeypatch.undo()
    assert sorted(p.name for p in folder.iterdir()) == ["init_net.pb", "predict_net.pb"]
    assert _contents(folder) == OLD


def _die_after_first_rename(folder: Path) -> None:
    """In a child process: write the new pair and die (like SIGKILL) after one rename."""
    real_replace = os.replace
    renames = []

    def replace_then_die(source: Path, target: Path) -> None:
        real_replace(source, target)
        renames.append(target)
        if len(renames) == 2:  # the journal, then predict_net.pb
            os._exit(9)

    atomic.os.replace = replace_then_die  # type: ignore[assignment]
    write_files(_new_pair(folder))
    os._exit(0)


def _killed_mid_commit(folder: Path) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            _die_after_first_rename(folder)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9


def test_killed_mid_commit_is_completed_by_the_next_reader(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    _killed_mid_commit(folder)
    on_disk = _contents(folder)
    assert on_disk["predict_net.pb"] == NEW["predict_net.pb"]
    assert on_disk["init_net.pb"] == OLD["init_net.pb"]  # mixed, for now
    assert JOURNAL_NAME in on_disk
    assert recover_interrupted_write(folder) is True
    assert _contents(folder) == NEW
    assert recover_interrupted_write(folder) is False


def test_killed_mid_commit_is_completed_by_the_next_writer(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    _killed_mid_commit(folder)
    write_files([(folder / "other.txt", b"x")])
    assert _contents(folder) == {**NEW, "other.txt": b"x"}


def test_loading_a_folder_completes_a_killed_write(tmp_path: Path, real_fixtures: Path) -> None:
    source = real_fixtures / "i-lovelife-facial-detection"
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "predict_net.pb").write_bytes(b"\n\x03old")  # an old, different pair
    (folder / "init_net.pb").write_bytes(b"\n\x07oldinit")
    new = [(folder / n, (source / n).read_bytes()) for n in ("predict_net.pb", "init_net.pb")]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            real_replace = os.replace
            count = []

            def replace_then_die(a: Path, b: Path) -> None:
                real_replace(a, b)
                count.append(b)
                if len(count) == 2:
                    os._exit(9)

            atomic.os.replace = replace_then_die  # type: ignore[assignment]
            write_files(new)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    assert (folder / "init_net.pb").read_bytes() == b"\n\x07oldinit"  # mixed on disk
    assert print_model(load_model_dir(folder)) == print_model(load_model_dir(source))
    assert [p.read_bytes() for p, _ in new] == [data for _, data in new]


def test_orphan_temporaries_are_removed_by_the_next_writer(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    orphan = folder / f".predict_net.pb.abc123{TEMP_SUFFIX}"
    orphan.write_bytes(b"x" * 1000)
    (folder / LOCK_NAME).write_text("12345")  # a SIGKILLed writer's lock file: not held
    write_files(_new_pair(folder))
    assert _contents(folder) == NEW


def test_recovery_refuses_while_a_writer_holds_the_folder(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    (folder / JOURNAL_NAME).write_text('{"renames": [], "remove": []}')
    with atomic._locked([folder.resolve()]), pytest.raises(SerdeError) as info:
        recover_interrupted_write(folder)
    assert "interrupted graphtools write" in info.value.reason
    assert "is writing into this folder" in info.value.reason


def test_unreadable_journal_is_a_serde_error(tmp_path: Path) -> None:
    folder = _folder_with_old_pair(tmp_path)
    (folder / JOURNAL_NAME).write_text("{not json")
    with pytest.raises(SerdeError, match="unreadable journal"):
        recover_interrupted_write(folder)


def test_unwritable_folder(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = _folder_with_old_pair(tmp_path)
    folder.chmod(0o555)
    try:
        with pytest.raises(SerdeError, match="cannot write here"):
            write_files(_new_pair(folder))
    finally:
        folder.chmod(0o755)
    assert _contents(folder) == OLD


def test_file_systems_without_locks_are_written_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder_with_old_pair(tmp_path)

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(atomic.fcntl, "flock", no_locks)
    write_files(_new_pair(folder))
    assert _contents(folder) == NEW

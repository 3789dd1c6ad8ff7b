"""Writing files as a unit: a reader never sees half a file, nor half of a model's pair.

``write_files`` writes every file to a temporary beside its target, then renames them all
(POSIX renames are atomic), then removes what the caller asked to remove (a stale twin):

* the target folders are locked for the whole write (``LOCK_NAME``, an ``flock``): a second
  writer fails at once with a ``SerdeError`` naming the folder and the holder's pid, instead of
  interleaving its files with ours;
* on any failure before the renames (full disk, file size limit, unwritable folder, Ctrl-C,
  SIGTERM when the program turns it into an exception as the CLI does), the temporaries are
  removed and nothing of the old files has changed;
* the renames run with SIGINT, SIGTERM and SIGHUP held back (delivered right after), after a
  journal (``JOURNAL_NAME``) listing them has been written into each folder: a write that
  reached its renames completes, even when the process is being stopped.

What a SIGKILL (or a power cut) can leave: killed before the journal exists, the old files,
unchanged, and orphan temporaries (``*.graphtools-tmp``), which the next write into the folder
deletes; killed during the renames, the journal and some renamed files: a mixed pair for a
moment. The next graphtools process that reads or writes the folder finds the journal and
completes the renames (every temporary was complete before the journal was written), so what
graphtools loads is always one whole pair. The lock itself dies with its process.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import FrameType

from graphtools.errors import SerdeError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: writes are not locked
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "JOURNAL_NAME",
    "LOCK_NAME",
    "TEMP_SUFFIX",
    "atomic_write_bytes",
    "folder_for_write",
    "recover_interrupted_write",
    "write_files",
]

LOCK_NAME = ".graphtools.lock"
"""The lock file a writer holds (``flock``) in each folder it writes into."""

JOURNAL_NAME = ".graphtools.journal"
"""The renames a write is committed to, kept until they are all done (JSON)."""

TEMP_SUFFIX = ".graphtools-tmp"
"""Suffix of the temporaries (hidden files beside their targets)."""

_HELD_SIGNALS = frozenset(
    s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None
)


@contextlib.contextmanager
def folder_for_write(folder: Path) -> Iterator[None]:
    """Make ``folder`` (and its parents) for the write inside the block; a folder made here
    is removed again when the block fails, so a failed write leaves no empty folder behind.

    Raises:
        SerdeError: the folder cannot be made.
    """
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SerdeError(folder, f"cannot create output folder: {exc.strerror or exc}") from exc
    try:
        yield
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    ``path`` holds either its old content or all of ``data``. Raises ``SerdeError`` naming the
    path when the folder cannot be written or another graphtools process is writing into it.
    """
    return write_files([(Path(path), data)])[0]


def write_files(files: Sequence[tuple[Path, bytes]], *, remove: Iterable[Path] = ()) -> list[Path]:
    """Write each ``(path, data)`` and delete each of ``remove``, all as one unit.

    Either every file gets its new content (and ``remove`` is gone) or, when this raises,
    nothing changed (see the module docstring for what a SIGKILL can leave).

    Raises:
        SerdeError: a folder is locked by another writer or cannot be written; a target is a
            folder.
    """
    targets = [(Path(path), data) for path, data in files]
    removals = [Path(path) for path in remove]
    for path, _ in targets:
        if path.is_dir():
            raise SerdeError(path, "cannot write: it is a folder")
        if not _folder(path).is_dir():
            raise SerdeError(path, "cannot write: its folder does not exist")
    folders = sorted({_folder(path) for path, _ in targets} | {_folder(p) for p in removals})
    if not folders:
        return []
    with _locked(folders):
        for folder in folders:
            _recover_locked(folder)
            _remove_orphans(folder)
        temps: list[tuple[Path, Path]] = []
        committed = False
        current = folders[0]
        try:
            for path, data in targets:
                current = path
                temps.append((_write_temp(path, data), path))
            current = folders[0] / JOURNAL_NAME
            with _held_signals():
                _write_journals(folders, temps, removals)
                committed = True
                _apply(temps, removals)
                _sync_folders(folders)
                _remove_journals(folders)
        except OSError as exc:
            if committed:
                raise SerdeError(
                    folders[0],
                    f"write interrupted while replacing files ({exc.strerror or exc}); the next "
                    f"graphtools run reading or writing here completes it from {JOURNAL_NAME}",
                ) from exc
            _discard(temps, folders)
            raise SerdeError(current, f"cannot write: {exc.strerror or exc}") from exc
        except BaseException:
            if not committed:
                _discard(temps, folders)
            raise
    return [path for path, _ in targets]


def recover_interrupted_write(folder: str | Path) -> bool:
    """Complete a write into ``folder`` that a killed process left half done.

    Loaders call this before reading (one ``stat`` when there is nothing to do). Returns
    whether there was something to complete.

    Raises:
        SerdeError: another process is writing into the folder right now, or the journal
            cannot be applied (the folder is read-only, say).
    """
    where = Path(folder)
    try:
        if not (where / JOURNAL_NAME).exists():
            return False
    except OSError:  # the folder cannot be searched: whatever reads it will say so
        return False
    try:
        with _locked([_folder(where / JOURNAL_NAME)]):
            return _recover_locked(_folder(where / JOURNAL_NAME))
    except SerdeError as exc:
        raise SerdeError(
            where,
            f"holds files of an interrupted graphtools write that cannot be completed now: "
            f"{exc.reason}",
        ) from exc


# -- pieces -------------------------------------------------------------------------------------


def _folder(path: Path) -> Path:
    return (path.parent if str(path.parent) else Path(".")).resolve()


def _mode_for(target: Path) -> int:
    """The existing file's permissions, else what ``open()`` would give a new file (umask)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_temp(target: Path, data: bytes) -> Path:
    """``data`` in a complete, synced temporary file beside ``target``."""
    import tempfile  # here: a command that writes nothing starts without it (shutil, lzma, ...)

    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=_folder(target))
    temp = Path(name)
    try:
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _discard(temps: list[tuple[Path, Path]], folders: list[Path]) -> None:
    for temp, _ in temps:
        temp.unlink(missing_ok=True)
    for folder in folders:
        (folder / JOURNAL_NAME).unlink(missing_ok=True)


def _journal_text(temps: list[tuple[Path, Path]], removals: list[Path]) -> str:
    return json.dumps(
        {
            "renames": [[str(temp), str(_folder(path) / path.name)] for temp, path in temps],
            "remove": [str(_folder(path) / path.name) for path in removals],
        }
    )


def _write_journals(
    folders: list[Path], temps: list[tuple[Path, Path]], removals: list[Path]
) -> None:
    """The commit point: once every folder holds the journal, the renames will happen."""
    text = _journal_text(temps, removals).encode("utf-8")
    for folder in folders:
        journal = folder / JOURNAL_NAME
        temp = _write_temp(journal, text)
        os.replace(temp, journal)


def _apply(temps: Iterable[tuple[Path, Path]], removals: Iterable[Path]) -> None:
    for temp, target in temps:
        if temp.exists():
            os.replace(temp, target)
    for path in removals:
        path.unlink(missing_ok=True)


def _sync_folders(folders: Iterable[Path]) -> None:
    """Make the renames durable (where the platform can sync a folder)."""
    for folder in folders:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _remove_journals(folders: Iterable[Path]) -> None:
    for folder in folders:
        (folder / JOURNAL_NAME).unlink(missing_ok=True)


def _recover_locked(folder: Path) -> bool:
    """Apply the journal left in ``folder`` (the caller holds its lock)."""
    journal = folder / JOURNAL_NAME
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
        renames = [(Path(temp), Path(target)) for temp, target in entries["renames"]]
        removals = [Path(path) for path in entries["remove"]]
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SerdeError(journal, f"unreadable journal of an interrupted write: {exc}") from exc
    try:
        with _held_signals():
            _apply(renames, removals)
            involved = sorted({folder} | {_folder(t) for _, t in renames})
            _sync_folders(involved)
            _remove_journals(involved)
    except OSError as exc:
        raise SerdeError(journal, f"cannot complete it: {exc.strerror or exc}") from exc
    return True


def _remove_orphans(folder: Path) -> None:
    """Delete temporaries that killed writers left (the caller holds the folder's lock)."""
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    path.unlink()


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP until the block ends, then deliver them.

    In the main thread the handlers are swapped for one that notes the signal: Python runs
    handlers there whichever thread the OS delivered the signal to (numpy's BLAS threads, say),
    so blocking it in this thread alone would not do. Elsewhere the signals are blocked.
    """
    if threading.current_thread() is threading.main_thread():
        pending: list[int] = []
        previous = {signum: signal.signal(signum, _noting(pending)) for signum in _HELD_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
            for signum in pending:
                signal.raise_signal(signum)
    elif hasattr(signal, "pthread_sigmask"):
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    else:  # pragma: no cover - not POSIX
        yield


def _noting(pending: list[int]) -> Callable[[int, FrameType | None], None]:
    def note(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    return note


# -- the folder lock ----------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(folders: Sequence[Path]) -> Iterator[None]:
    """Hold the lock of every folder (in order), or raise ``SerdeError`` at once."""
    with contextlib.ExitStack() as stack:
        for folder in folders:
            stack.enter_context(_folder_lock(folder))
        yield


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover - not POSIX
        yield
        return
    lock_path = folder / LOCK_NAME
    fd: int | None = None
    try:
        # Signals wait while the lock file is created and locked: one raised in between
        # would leave the file behind (they arrive once ``fd`` is set, inside this ``try``).
        with _held_signals():
            fd = _acquire(lock_path)
        yield
    finally:
        if fd is not None:
            with _held_signals():
                with contextlib.suppress(OSError):
                    lock_path.unlink()
                os.close(fd)


def _acquire(lock_path: Path) -> int:
    """An open, ``flock``-ed descriptor of ``lock_path``, which still names that file.

    Releasing unlinks the file, so that folders are not left with lock files; a process that
    opened it just before then locks a file nobody else can see, which the inode check
    catches (it then starts again with a fresh file).
    """
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SerdeError(lock_path.parent, f"cannot write here: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in _NO_LOCKS:  # a file system without locks: write unlocked
                return fd
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise SerdeError(lock_path, f"cannot lock: {exc.strerror or exc}") from exc
            raise SerdeError(
                lock_path.parent,
                f"another graphtools process{holder} is writing into this folder; "
                "try again when it has finished",
            ) from exc
        try:
            same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd
        os.close(fd)


_NO_LOCKS = frozenset(
    getattr(errno, name) for name in ("ENOLCK", "EOPNOTSUPP", "ENOTSUP") if hasattr(errno, name)
)


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return f" (pid {int(os.pread(fd, 32, 0))})"
    return ""

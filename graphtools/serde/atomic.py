"""Atomic file writes: a reader never sees a half-written output file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from graphtools.errors import SerdeError


def _mode_for(target: Path) -> int:
    """The existing file's permissions, else what ``open()`` would give a new file (umask)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    The rename is atomic on POSIX, so ``path`` holds either its old content or all of ``data``.
    Raises ``SerdeError`` naming the path when the folder cannot be written.
    """
    target = Path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as exc:
        raise SerdeError(target, f"cannot write here: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise SerdeError(target, f"cannot write: {exc.strerror or exc}") from exc
    return target

"""Pipes read once per command.

A pipe (``run <(curl ...) -o out.onnx``, a FIFO) gives its bytes once, and a command looks at
its input more than once (its format, then the model). Inside ``streams_read_once`` (the CLI
runs every command inside it) the first read of a pipe is kept and given to later reads of
the same path; outside, every read reads the pipe again (a library caller's FIFO fed twice
gives two models).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

__all__ = ["read_stream_once", "streams_read_once"]

_STREAMS: dict[str, bytes] | None = None
"""Inside ``streams_read_once``: what each pipe gave, by path."""


@contextlib.contextmanager
def streams_read_once() -> Iterator[None]:
    """For the block (one command): a pipe is read once, its bytes kept for later reads."""
    global _STREAMS
    previous, _STREAMS = _STREAMS, {}
    try:
        yield
    finally:
        _STREAMS = previous


def read_stream_once(file: Path) -> bytes:
    """The bytes of ``file``; a pipe's (neither a regular file nor a folder) as first read
    inside ``streams_read_once``. Raises ``OSError`` as ``Path.read_bytes`` does."""
    streams = _STREAMS
    if streams is None or file.is_file() or not file.exists() or file.is_dir():
        return file.read_bytes()
    key = str(file)
    if key not in streams:
        streams[key] = file.read_bytes()
    return streams[key]

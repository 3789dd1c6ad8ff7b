"""Termination signals as exceptions, for programs that must clean up when stopped.

Python turns SIGINT (Ctrl-C) into ``KeyboardInterrupt``, but SIGTERM and SIGHUP kill the
process on the spot: ``finally`` blocks do not run, and a write in progress leaves its temporary
files behind. Inside ``signals_as_exceptions()`` they raise ``Terminated`` instead, so the same
clean-up runs for all three (the pair writer in ``graphtools.serde.atomic`` relies on it). The
CLI uses it around every command; a library does not install signal handlers on its own.

Before and after the command (from the console script's start to the process's end), a signal
has nothing left to clean up: ``exit_on_signals()`` makes it end the process at once with the
CLI's one line and 128 + its number, instead of killing it silently.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = [
    "INTERRUPTED_EXIT_CODE",
    "Terminated",
    "exit_on_signals",
    "signal_line",
    "signals_as_exceptions",
]

INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT
"""The exit code of a program stopped by Ctrl-C (130), as shells report it."""

_CAUGHT = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP")) if s is not None
)


class Terminated(BaseException):
    """The process received SIGTERM or SIGHUP (a ``BaseException``, like ``KeyboardInterrupt``:
    ``except Exception`` must not swallow it).

    Attributes:
        signum: the signal's number.
        exit_code: what the process should exit with (128 + ``signum``).
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


def signal_line(signum: int) -> str:
    """The one line a command stopped by ``signum`` ends with."""
    if signum == signal.SIGINT:
        return "error: interrupted (Ctrl-C)"
    return f"error: terminated by {signal.Signals(signum).name}"


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def _exit_now(signum: int, frame: FrameType | None) -> None:
    # a closed pipe, or the signal came inside a write: the line below still goes
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        sys.stdout.flush()
    os.write(2, (signal_line(signum) + "\n").encode())
    os._exit(128 + signum)


def exit_on_signals() -> None:
    """From now until the process ends, SIGINT, SIGTERM and SIGHUP end it at once with
    ``signal_line`` on stderr and exit code 128 + N (main thread only). For a console script,
    around a ``main`` whose ``signals_as_exceptions`` replaces these handlers while it runs."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, *_CAUGHT):
            signal.signal(signum, _exit_now)


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Raise ``Terminated`` on SIGTERM and SIGHUP, and ``KeyboardInterrupt`` on SIGINT, inside
    the block (main thread only: signal handlers can be set nowhere else; elsewhere the block
    changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise) for signum in _CAUGHT}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

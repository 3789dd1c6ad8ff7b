"""The ``graphtools`` command line.

Commands: ``show`` (a summary, or dumps), ``ssa``, ``list-passes`` (``graphtools.cli.inspect``),
``run`` and ``exec`` (``graphtools.cli.pipeline``), ``verify`` (``graphtools.cli.check``),
``draw`` (``graphtools.cli.draw``), ``diff`` (``graphtools.cli.diff``), ``extract``
(``graphtools.cli.extract``), ``import-onnx`` and ``export-onnx``
(``graphtools.cli.onnx_commands``, which also serves ``run`` of a pair to an ``.onnx`` file and
``verify --onnx``). The options of every command live in ``graphtools.cli.grammar``, which
imports none of them: a command imports only the module that runs it (``HANDLERS``), so
``--version`` and ``show`` start without onnx, the executor or the passes. Every command takes
ONNX models too: ``onnx_files`` tells and loads them, ``onnx_show``, ``onnx_run``,
``onnx_verify`` and ``onnx_diff`` do what differs for them.

Exit codes follow Polygraphy's: 0 success, 1 ``verify`` found a difference or ``diff`` found
differences, 2 bad input or an error (one line ``error: ...`` on stderr; ``--traceback``
anywhere on the line shows the chain). A closed pipe (``graphtools show net.pb | head``) ends
the output quietly; the exit code is the command's own.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from graphtools._malloc import map_big_blocks
from graphtools.cli.grammar import attach_ops_values, build_parser, command_parser
from graphtools.cli.quiet import numpy_quiet, reports_quiet
from graphtools.errors import GraphToolsError, UsageError
from graphtools.interrupt import (
    INTERRUPTED_EXIT_CODE,
    Terminated,
    exit_on_signals,
    signal_line,
    signals_as_exceptions,
)

__all__ = ["UsageError", "build_parser", "console_main", "main"]

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class _PipeGuard:
    """stdout that goes quiet once the reader closes the pipe (``... | head``), so the
    command finishes and returns its own exit code."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._closed = False
        self.written = 0  # characters the command wrote, for main's --json error document

    def _close(self) -> None:
        self._closed = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        self.written += len(text)
        if not self._closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._close()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _logging(verbosity: int) -> logging.Handler:
    """Send graphtools' log records (the manager's convergence warning) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger("graphtools")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity >= 2 else logging.WARNING)
    return handler


def _stopping_signal(exc: BaseException) -> int | None:
    """The signal behind ``exc``, when an interrupt is among its causes: Python wraps an
    exception raised while a class is being made (``RuntimeError: Error calling
    __set_name__``), so a signal arriving during an import reaches ``main`` wrapped."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, KeyboardInterrupt):
            return int(signal.SIGINT)
        if isinstance(cause, Terminated):
            return cause.signum
        cause = cause.__cause__ or cause.__context__
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphtools`` console script; returns the exit code."""
    words = attach_ops_values(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words)
    options, unknown = parser.parse_known_args(words)
    if unknown:  # the command's own usage, which lists the options it takes
        command_parser(parser, options.command).error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )
    options.verbosity = 1 + options.verbose - options.quiet
    stdout = sys.stdout
    guarded = not isinstance(stdout, _PipeGuard)
    if guarded:
        sys.stdout = _PipeGuard(stdout)
    handler = _logging(options.verbosity)
    written_before = getattr(sys.stdout, "written", 0)
    from graphtools.serde.streams import streams_read_once  # here: --version loads no serde

    map_big_blocks()

    try:
        with signals_as_exceptions(), reports_quiet(), streams_read_once():
            module = importlib.import_module(f"graphtools.cli.{options.handler_module}")
            with numpy_quiet():
                return int(module.HANDLERS[options.command](options))
    except GraphToolsError as exc:
        if options.traceback:
            traceback.print_exc()
        message = str(exc).replace("\n", " ")
        print(f"error: {message}", file=sys.stderr)
        if getattr(options, "json", False) and getattr(sys.stdout, "written", 0) == written_before:
            import json  # here: only a failing --json command needs it

            # A script reading --json gets a document in every outcome, the error's too.
            print(json.dumps({"error": message}, indent=2))
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(signal_line(signal.SIGINT), file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Terminated as exc:
        print(signal_line(exc.signum), file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        stopped_by = _stopping_signal(exc)
        if stopped_by is None:
            raise
        print(signal_line(stopped_by), file=sys.stderr)
        return 128 + stopped_by
    finally:
        logging.getLogger("graphtools").removeHandler(handler)
        try:
            sys.stdout.flush()
        finally:
            if guarded:
                sys.stdout = stdout


def console_main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``graphtools`` console script (and ``python -m graphtools``): ``main(argv)``, then
    the end of the process with its exit code.

    A signal that arrives before or after ``main`` (right after the output is committed, say)
    ends the process with the same one line and 128 + N. The process ends by ``os._exit``
    once stdout and stderr are flushed: the interpreter's own shutdown puts the default
    handlers back first, so a signal during it would kill the process silently, and there is
    nothing left for it to clean up (``main`` has closed every file it wrote).
    """
    exit_on_signals()
    code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()

"""The ``graphtools`` console script and ``python -m graphtools``: the signal handlers first,
then the command line.

Importing ``graphtools.cli`` takes tens of milliseconds; a Ctrl-C in them would end the
process with Python's KeyboardInterrupt traceback, since ``console_main`` installs the
handlers that print the CLI's one line only once it runs. This module imports nothing heavy
before installing them.
"""

from __future__ import annotations

from typing import NoReturn

from graphtools.interrupt import exit_on_signals

__all__ = ["console_script"]


def console_script() -> NoReturn:
    """Install the CLI's signal handlers, import the command line, run it and end the
    process (``graphtools.cli.console_main``)."""
    exit_on_signals()
    from graphtools.cli import console_main

    console_main()

"""Where a command writes: result lines and tables on stdout, notes and warnings on stderr,
JSON.

Piped (the usual case in scripts and batches), lines and plain tables are written here as rich
would write them, byte for byte (``tests/test_cli_plain_output.py``); rich renders what is not
plain and everything on a terminal. rich is imported only then: its console and tables cost a
short command such as ``show`` a tenth of its start (``benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is imported where it renders (see the module docstring)
    from rich.console import Console
    from rich.table import Table

__all__ = ["Output", "TextTable", "new_table"]

PIPED_WIDTH = 200
"""The width of a console that is no terminal: wide enough never to wrap a blob name."""

_STRIPPED_CONTROL_CODES = dict.fromkeys((7, 8, 11, 12, 13))
"""What rich's console drops from a line (bell, backspace, vertical tab, form feed, carriage
return: ``rich.control.STRIP_CONTROL_CODES``)."""


class Output:
    """Where a command writes: results to stdout, notes and warnings to stderr.

    ``verbosity`` is 0 with ``-q`` (verdicts and errors only), 1 by default, 2 with ``-v``.
    Tables go through rich, with markup off (blob names such as ``_[mask]_w`` print as they
    are); when stdout is not a terminal they are plain and wide enough never to wrap a blob
    name.
    """

    def __init__(self, verbosity: int = 1, json_mode: bool = False) -> None:
        self.verbosity = verbosity
        self.json_mode = json_mode
        self._streams = (sys.stdout, sys.stderr)
        self._consoles: dict[int, Console] = {}
        # Piped, a line is written as rich would write it, without rich's cost per line
        # (a tenth of a millisecond: seconds for the diff of two big models).
        self._piped = None if sys.stdout.isatty() else sys.stdout
        self._piped_err = None if sys.stderr.isatty() else sys.stderr

    @property
    def stdout(self) -> Console:
        """The rich console on stdout (made on first use)."""
        return self._console(0)

    @property
    def stderr(self) -> Console:
        """The rich console on stderr (made on first use)."""
        return self._console(1)

    def _console(self, which: int) -> Console:
        found = self._consoles.get(which)
        if found is None:
            found = self._consoles[which] = _console(self._streams[which])
        return found

    def line(self, text: str = "", *, level: int = 1) -> None:
        """A result line on stdout (not in JSON mode, and only at ``level`` or above)."""
        shown = not self.json_mode and self.verbosity >= level
        if shown and not _write_plain(self._piped, text):
            self.stdout.print(text, markup=False, highlight=False, soft_wrap=True)

    def table(self, table: TextTable | Table, *, level: int = 1) -> None:
        """A table on stdout (not in JSON mode, and only at ``level`` or above)."""
        if not self.json_mode and self.verbosity >= level:
            piped, text = self._piped, None
            if piped is not None and isinstance(table, TextTable):
                text = table.plain_text(PIPED_WIDTH)
            if piped is not None and text is not None:
                piped.write(text)
                piped.flush()
            else:
                self.stdout.print(table)

    def note(self, text: str, *, level: int = 1) -> None:
        """An informational line on stderr (``note: ...``)."""
        if self.verbosity >= level:
            self._error_line(f"note: {text}")

    def error(self, text: str) -> None:
        """An error line on stderr (``NAME: error: ...`` of a model in a batch), shown at every
        verbosity: the README's contract puts errors there."""
        self._error_line(text)

    def warn(self, text: str) -> None:
        """A warning on stderr, shown at every verbosity."""
        self._error_line(f"warning: {text}")

    def _error_line(self, text: str) -> None:
        if not _write_plain(self._piped_err, text):
            self.stderr.print(text, markup=False, highlight=False, soft_wrap=True)

    def json(self, data: Any) -> None:
        """The command's machine-readable result on stdout: strict JSON (an infinite number,
        a tolerance of inf, is the string ``"inf"``; NaN is ``null``)."""
        print(json.dumps(_strict(data), indent=2, default=_json_default, allow_nan=False))


def _write_plain(piped: TextIO | None, text: str) -> bool:
    """Write ``text`` as a line to a stream that is no terminal, as rich would; ``False``
    (nothing written) for a terminal and for a tab, which rich widens by cells."""
    if piped is None or "\t" in text:
        return False
    piped.write(text.translate(_STRIPPED_CONTROL_CODES) + "\n")
    piped.flush()  # as rich does: stdout and stderr stay in order in a pipe
    return True


def _console(stream: TextIO) -> Console:
    from rich.console import Console

    terminal = stream.isatty()
    return Console(
        file=stream,
        width=None if terminal else PIPED_WIDTH,
        no_color=not terminal,
        markup=False,
        highlight=False,
        emoji=False,
    )


def _strict(value: Any) -> Any:
    """``value`` with every non-finite number (numpy's too) as JSON can hold it."""
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # a numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, float):
        return None
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def new_table(*columns: str, title: str | None = None) -> TextTable:
    """A plain table with these column headers (no boxes: easy to read and to grep)."""
    return TextTable(columns, title)


class TextTable:
    """A ``new_table`` table: column headers and rows, rendered by rich as a box-less table
    whose cells fold (``rich_table``; rich prints it through ``__rich__``), or written as
    plain text when that is sure to be the same (``plain_text``: a piped table is written
    without rich's rendering, a third of a millisecond per row; ``ssa`` of a 10^5-op net took
    74 s, nearly all of it in rich).
    """

    def __init__(self, headers: tuple[str, ...], title: str | None = None) -> None:
        self.headers = headers
        self.title = title
        self._rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self._rich_only = False  # a row holds more than plain strings

    def add_row(self, *cells: Any, **options: Any) -> None:
        """A row: cells (text, or what rich renders) and rich's row options."""
        if options or not all(type(cell) is str for cell in cells):
            self._rich_only = True
        self._rows.append((cells, options))

    def rich_table(self) -> Table:
        """The table as rich renders it."""
        from rich.table import Table

        table = Table(*self.headers, title=self.title, box=None, pad_edge=False, show_edge=False)
        for column in table.columns:
            column.overflow = "fold"
        for cells, options in self._rows:
            table.add_row(*cells, **options)
        return table

    def __rich__(self) -> Table:
        return self.rich_table()

    def plain_text(self, width: int) -> str | None:
        """The table as rich renders it at ``width`` cells, or ``None`` when that is not sure
        to be the same: a title, cells that are not plain strings (control codes, whitespace
        but the space), a column empty throughout, or a table wider than ``width`` (rich
        folds it)."""
        if self.title is not None or self._rich_only:
            return None
        from rich.cells import cell_len

        rows = [self.headers, *(cells for cells, _ in self._rows)]
        if any(len(row) != len(self.headers) for row in rows):
            return None
        if any(_NOT_PLAIN.search(cell) for row in rows for cell in row):
            return None
        widths = [max(cell_len(row[i]) for row in rows) for i in range(len(self.headers))]
        if not widths or min(widths) == 0 or sum(widths) + 2 * (len(widths) - 1) > width:
            return None
        lines = (
            "  ".join(
                cell + " " * (size - cell_len(cell)) for cell, size in zip(row, widths, strict=True)
            )
            for row in rows
        )
        return "".join(line + "\n" for line in lines)


_NOT_PLAIN = re.compile(r"[^\S ]|[\x00-\x1f\x7f]")
"""A character rich's rendering of a table may widen, strip or break a line at: control
codes and every whitespace but the space (rich folds a cell at U+2028, drops a U+3000)."""

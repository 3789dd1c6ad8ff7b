"""Piped, the CLI writes result lines and tables itself instead of through rich (which costs a
tenth to a third of a millisecond per line): what it writes must be what rich would have
written, byte for byte, or rich must write it."""

from __future__ import annotations

import io
import random
import sys

import pytest
from rich.console import Console

from graphtools.cli.common import Output, new_table

_CHARACTERS = ["a", "b", "1", " ", "-", "%", "@", "[", "]", "é", "中", "😀", "\u200b", "\u0301"]
_CHARACTERS += ["\u200d", "\u3000", "\u2028", "\u2029", "\x85", "\xa0"]  # rich folds/drops
_CONTROL = ["\t", "\n", "\r", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x00", "\x7f"]


def _rich(renderable: object, **options: object) -> str:
    """What the CLI's piped console (``common._console``) writes for ``renderable``."""
    stream = io.StringIO()
    console = Console(
        file=stream, width=200, no_color=True, markup=False, highlight=False, emoji=False
    )
    console.print(renderable, **options)  # type: ignore[arg-type]
    return stream.getvalue()


def _piped(monkeypatch: pytest.MonkeyPatch) -> tuple[Output, io.StringIO]:
    stream = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stdout", stream)
    return Output(), stream


def _text(rng: random.Random, length: int, control: bool) -> str:
    pool = _CHARACTERS + (_CONTROL if control else [])
    return "".join(rng.choice(pool) for _ in range(length))


def test_piped_lines_are_what_rich_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(0)
    out, stream = _piped(monkeypatch)
    expected = []
    for _ in range(3000):
        text = _text(rng, rng.randint(0, 40), control=True)
        out.line(text)
        expected.append(_rich(text, markup=False, highlight=False, soft_wrap=True))
    assert stream.getvalue() == "".join(expected)


def test_piped_notes_warnings_and_errors_are_what_rich_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(2)
    stream = io.StringIO()  # stderr, not a terminal
    monkeypatch.setattr(sys, "stderr", stream)
    out = Output()
    expected = []
    for _ in range(1000):
        text = _text(rng, rng.randint(0, 40), control=True)
        out.note(text)
        out.warn(text)
        out.error(text)
        for line in (f"note: {text}", f"warning: {text}", text):
            expected.append(_rich(line, markup=False, highlight=False, soft_wrap=True))
    assert stream.getvalue() == "".join(expected)


def test_piped_tables_are_what_rich_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Random tables: plain cells, wide and zero-width characters, empty cells and columns,
    # control characters now and then, some wider than the console (rich folds those).
    rng = random.Random(1)
    out, stream = _piped(monkeypatch)
    expected = []
    for _ in range(1500):
        columns = rng.randint(1, 5)
        control = rng.random() < 0.1
        table = new_table(*(_text(rng, rng.randint(0, 8), control) for _ in range(columns)))
        for _ in range(rng.randint(0, 6)):
            longest = rng.choice([3, 12, 90])
            table.add_row(*(_text(rng, rng.randint(0, longest), control) for _ in range(columns)))
        out.table(table)
        expected.append(_rich(table))
    assert stream.getvalue() == "".join(expected)


def test_a_table_with_a_title_or_other_cells_goes_through_rich(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, stream = _piped(monkeypatch)
    titled = new_table("pass", "seconds", title="time per pass")
    titled.add_row("remove-dead-ends", "0.25")
    assert titled.plain_text(200) is None
    mixed = new_table("a", "b")
    mixed.add_row("x", "y")
    mixed.add_row("z", None)
    assert mixed.plain_text(200) is None
    out.table(titled)
    out.table(mixed)
    assert stream.getvalue() == _rich(titled) + _rich(mixed)


class _Flushes(io.StringIO):
    """A pipe that says what had been written when it was flushed."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def flush(self) -> None:
        self.flushed.append(self.getvalue())


def test_piped_lines_and_tables_are_flushed_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    # As rich does: a result line reaches the pipe before a later error line on stderr.
    stream = _Flushes()
    monkeypatch.setattr(sys, "stdout", stream)
    out = Output()
    out.line("net n: 3 ops")
    table = new_table("op type", "count")
    table.add_row("Relu", "3")
    out.table(table)
    assert stream.flushed[0] == "net n: 3 ops\n"
    assert stream.flushed[-1] == stream.getvalue() == "net n: 3 ops\n" + _rich(table)

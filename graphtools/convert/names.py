"""Fresh value names for the converters: a new name never collides with one the model uses."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["NameGen"]


class NameGen:
    """Fresh blob names that collide with no name used anywhere in the model.

    A hint asked for again continues from the last suffix it got, so making ``n`` names from
    one hint costs ``O(n)``, not ``O(n^2)``.
    """

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken = set(taken)
        self._next: dict[str, int] = {}

    def reserve(self, names: Iterable[str]) -> None:
        """Mark ``names`` as used."""
        self._taken.update(names)

    def fresh(self, hint: str) -> str:
        """``hint`` if unused, else ``hint_1``, ``hint_2``, ...; the result is then used."""
        name = hint
        suffix = self._next.get(hint, 0)
        if suffix:
            name = f"{hint}_{suffix}"
        while name in self._taken:
            suffix += 1
            name = f"{hint}_{suffix}"
        self._next[hint] = suffix + 1
        self._taken.add(name)
        return name

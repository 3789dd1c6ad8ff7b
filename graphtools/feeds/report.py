"""What ``synthesize`` made and what the model computed on it: the report a verdict on made-up
data is read with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

__all__ = [
    "MadeInput",
    "SkippedOp",
    "Synthesis",
    "guessed_note",
    "guessed_shapes",
    "unfit_weights",
]


@dataclass(frozen=True)
class MadeInput:
    """One data input fed to the model and where it came from.

    Attributes:
        name: the blob, as the net spells it.
        shape: its shape.
        dtype: its dtype name.
        origin: ``given`` (``--shapes`` or fed values), ``guessed`` or ``role`` (made to fit
            the op that reads it).
        reason: why this shape and these values, for the report.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    origin: str
    reason: str


def guessed_shapes(inputs: Sequence[MadeInput]) -> str:
    """``name=1x3x28x28, ...`` of the inputs whose shape was guessed (empty when none)."""
    return ", ".join(
        f"{made.name}={'x'.join(map(str, made.shape))}"
        for made in inputs
        if made.origin == "guessed"
    )


def guessed_note(inputs: Sequence[MadeInput]) -> str | None:
    """What to add to an error met on these inputs when some shapes were guessed (the guess
    may be what failed), else ``None``."""
    listed = guessed_shapes(inputs)
    return f"input shapes were guessed ({listed}); give them with --shapes" if listed else None


@dataclass(frozen=True)
class SkippedOp:
    """An op that cannot run here (a ``Load`` from a database that is not beside the file);
    what reads its outputs gets made-up values instead.

    Attributes:
        net: ``init_net`` or ``predict_net``.
        index: the op's position in that net.
        type: the op's type.
        outputs: the blobs it would have written.
        reason: why it cannot run.
    """

    net: str
    index: int
    type: str
    outputs: tuple[str, ...]
    reason: str


@dataclass
class Synthesis:
    """What ``synthesize`` fed the model and what the model computed on it.

    Attributes:
        feeds: every blob to feed (data inputs and made-up parameters), by name.
        inputs: the data inputs, in the order they were made.
        params: the made-up parameters' shapes, by name.
        placeholders: init_net placeholders a feed replaced, with the fill they came from.
        skipped_ops: ops that could not run here (their outputs were made up).
        replaced: init_net blobs that did not fit the op reading them, replaced by made-up
            parameters, with the reason.
        outputs: the model's outputs on these feeds, by name.
        missing_outputs: outputs the model never writes.
        init_values: what the init_net left in the workspace, by blob (a rewrite that keeps
            the init_net's ops can reuse it instead of running the init_net again).
    """

    feeds: dict[str, Any] = field(default_factory=dict)
    inputs: list[MadeInput] = field(default_factory=list)
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)
    skipped_ops: list[SkippedOp] = field(default_factory=list)
    replaced: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    missing_outputs: list[str] = field(default_factory=list)
    init_values: dict[str, Any] = field(default_factory=dict)

    @property
    def param_values(self) -> int:
        """How many values the made-up parameters hold together."""
        return sum(prod(shape) for shape in self.params.values())


def unfit_weights(synthesis: Synthesis) -> str | None:
    """Why the init_net's own parameters were replaced by made-up ones (they do not fit the
    ops that read them), naming them; ``None`` when none was."""
    if not synthesis.replaced:
        return None
    names = ", ".join(repr(n) for n in synthesis.replaced)
    reason = next(iter(synthesis.replaced.values())).split("from the init_net: ", 1)[-1]
    return f"the init_net's weights do not fit the net: {names} ({reason})"

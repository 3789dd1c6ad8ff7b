"""Input shapes handed to the passes that take them (``input_shapes``): what ``run`` and
``verify`` were given reaches ``lower-recurrent-networks``, which unrolls for the length of
the data and never for an init_net placeholder's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from graphtools.cli.common import Shape
from graphtools.pass_infra import PassManager

__all__ = ["takes_input_shapes", "with_input_shapes"]


def with_input_shapes(
    manager: PassManager,
    shapes: Mapping[str, Shape],
    dtypes: Mapping[str, str] | None = None,
) -> PassManager:
    """``manager`` with the input shapes the command was given (``--shapes``, a
    ``shapes.txt``; verify's given inputs, with their ``dtypes``; ``?``, an unknown element
    type, otherwise) as the ``input_shapes`` of each pass that takes them and was given none:
    ``lower-recurrent-networks`` then unrolls for the length of the data, where an init_net's
    placeholder (whose length it refuses to take) is all the model says. A shape with a
    symbolic dim (``{T}x1x62``) says no length: it is left out."""
    dtypes = dtypes or {}
    given = tuple(
        f"{name}:{'x'.join(map(str, shape))}:{dtypes.get(name, '?')}"
        for name, shape in shapes.items()
        if all(isinstance(dim, int) for dim in shape)
    )
    if not given:
        return manager
    passes = [
        replace(item, **{"input_shapes": given}) if _open(item) else item for item in manager.passes
    ]
    return PassManager(passes, steps=manager.steps)


def takes_input_shapes(manager: PassManager) -> bool:
    """Whether a pass of ``manager`` takes input shapes and was given none (what
    ``with_input_shapes`` fills)."""
    return any(_open(item) for item in manager.passes)


def _open(item: Any) -> bool:
    return getattr(item, "input_shapes", None) == ()

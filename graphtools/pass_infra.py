"""Passes: the ``Pass`` base, ``PassResult`` and the pass registry.

A pass is a small frozen dataclass: its fields are its options, ``name`` is its kebab-case
pipeline name, and ``call(model)`` rewrites the model in place and reports what it did.
Optional ``requires``/``ensures`` hooks check pre- and post-conditions. Passes see the IR
(``graphtools.ir``), never protobuf messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from graphtools.ir import Model


@dataclass
class PassResult:
    """What one pass did.

    Attributes:
        model: the model after the pass (the same object, rewritten in place).
        modified: whether the pass changed anything; must agree with the model's revision.
        stats: counters for reports and goldens (``{"ops_removed": 3}``).
    """

    model: Model
    modified: bool
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pass:
    """Base of every pass; subclasses are frozen dataclasses whose fields are their options.

    Class attributes:
        name: the pipeline name (kebab-case), unique in the registry.
        changes_interface: whether the pass may change the names of predict_net's external
            inputs and outputs (the manager's interface guard refuses it otherwise).
    """

    name: ClassVar[str] = ""
    changes_interface: ClassVar[bool] = False

    def call(self, model: Model) -> PassResult:
        """Rewrite ``model`` in place and say what changed."""
        raise NotImplementedError(f"{type(self).__name__} does not implement call()")

    def requires(self, model: Model) -> None:
        """Raise ``PreconditionError`` when ``model`` is not fit for this pass."""

    def ensures(self, model: Model) -> None:
        """Raise ``PostconditionError`` when the rewritten ``model`` breaks a promise."""


_REGISTRY: dict[str, type[Pass]] = {}


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator adding a pass to the registry under its ``name``."""
    if not cls.name:
        raise ValueError(f"pass class {cls.__name__} has no pipeline name")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise ValueError(
            f"pass name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}"
        )
    _REGISTRY[cls.name] = cls
    return cls

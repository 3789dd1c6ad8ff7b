"""Which passes exist: the built-in and plugin passes published as entry points, and passes
registered at run time with ``@register_pass``.

Built-in passes are found the same way as plugins, through the ``graphtools.passes``
entry-point group (``pyproject.toml`` lists them), so this module never imports the passes
package; a pass module added to ``passes/`` must be listed there too (a test checks it).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import TypeVar

from graphtools.errors import PipelineSpecError
from graphtools.pass_infra.base import Pass
from graphtools.pass_infra.spec import NAMED_PIPELINES

__all__ = ["ENTRY_POINT_GROUP", "available_passes", "get_pass", "register_pass"]

ENTRY_POINT_GROUP = "graphtools.passes"

_REGISTRY: dict[str, type[Pass]] = {}

_P = TypeVar("_P", bound=Pass)


def register_pass(cls: type[_P]) -> type[_P]:
    """Class decorator adding a pass to the run-time registry under its ``name``.

    For passes defined in a script or a test; a package publishes its passes as entry points
    instead (group ``graphtools.passes``), which needs no import to find them.
    """
    if not (isinstance(cls, type) and issubclass(cls, Pass) and dataclasses.is_dataclass(cls)):
        raise PipelineSpecError(
            f"register_pass takes a Pass dataclass (@dataclass(frozen=True) on a subclass of "
            f"graphtools.pass_infra.Pass), not {cls!r}"
        )
    name = cls.name
    if not name:
        raise PipelineSpecError(f"pass class {cls.__name__} has no pipeline name")
    if not all(char.isalnum() or char in "-_." for char in name) or name in NAMED_PIPELINES:
        raise PipelineSpecError(
            f"pass class {cls.__name__} is named {name!r}, which a pipeline spec cannot name: "
            "use letters, digits, '-', '_' and '.', and not "
            + " or ".join(map(repr, NAMED_PIPELINES))
        )
    existing = _REGISTRY.get(name) or _entry_point_pass(name, unless=cls)
    if existing is not None and existing is not cls:
        raise PipelineSpecError(
            f"pass name {name!r} is taken by {existing.__module__}.{existing.__qualname__}"
        )
    _REGISTRY[name] = cls
    return cls


def _entry_point_pass(name: str, unless: type[Pass] | None = None) -> type[Pass] | None:
    """The pass an entry point publishes as ``name``, loading only that entry point; not
    loaded when it names ``unless`` (a published pass registering itself as its module is
    imported: loading the entry point would import that module again)."""
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        if unless is not None and entry_point.value == f"{unless.__module__}:{unless.__qualname__}":
            return unless
        cls = entry_point.load()
        if isinstance(cls, type) and issubclass(cls, Pass) and cls.name == name:
            return cls
    return None


def _entry_point_passes() -> dict[str, type[Pass]]:
    found: dict[str, type[Pass]] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = (
            f"entry point {entry_point.name!r} ({entry_point.value}) of group {ENTRY_POINT_GROUP!r}"
        )
        try:
            cls = entry_point.load()
        except Exception as exc:
            raise PipelineSpecError(f"cannot load {where}: {type(exc).__name__}: {exc}") from exc
        if not (isinstance(cls, type) and issubclass(cls, Pass) and dataclasses.is_dataclass(cls)):
            raise PipelineSpecError(f"{where} does not name a Pass dataclass: got {cls!r}")
        if not cls.name:
            raise PipelineSpecError(f"{where}: pass class {cls.__qualname__} has no name")
        existing = found.get(cls.name)
        if existing is not None and existing is not cls:
            raise PipelineSpecError(
                f"{where}: pass class {cls.__module__}.{cls.__qualname__} claims the name "
                f"{cls.name!r}, held by {existing.__module__}.{existing.__qualname__}"
            )
        found[cls.name] = cls
    return found


def available_passes() -> dict[str, type[Pass]]:
    """Every known pass by pipeline name, sorted by name.

    Covers the classes published under the ``graphtools.passes`` entry-point group (the
    built-in passes and other packages' plugins) and those registered with
    ``@register_pass``. An entry point that fails to load, does not name a ``Pass``
    dataclass, or claims a name a different class holds raises ``PipelineSpecError``
    naming it.
    """
    passes = _entry_point_passes()
    for name, cls in _REGISTRY.items():
        existing = passes.get(name)
        if existing is not None and existing is not cls:
            raise PipelineSpecError(
                f"pass {cls.__module__}.{cls.__qualname__} registered as {name!r}, which "
                f"entry point pass {existing.__module__}.{existing.__qualname__} holds"
            )
        passes[name] = cls
    return dict(sorted(passes.items()))


def get_pass(name: str) -> type[Pass]:
    """The pass class called ``name``, loading only the entry points of that name (so one
    pass can be fetched without importing every plugin installed)."""
    found = _REGISTRY.get(name) or _entry_point_pass(name)
    if found is None:
        raise PipelineSpecError(f"no pass is called {name!r}")
    return found

"""Workspaces of control-flow ops: a ``Do``'s child workspace and the stack that keeps them.

A ``Do`` runs its net in a ``ScopedWorkspace`` that sees only the blobs bound to it: each bound
inner name reads and writes an outer blob (Caffe2's forwarded blobs), every other name is local.
The workspaces a forward ``Do`` used stay on a ``WorkspaceStack`` (the value of the blob that
``CreateScope`` writes) so that the gradient ``Do`` can pop them and read the forward locals,
the way Caffe2's ``WorkspaceStack`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphtools.errors import InvalidNetError
from graphtools.executor.workspace import Workspace

__all__ = ["ITERATION_START_SUFFIX", "ScopedWorkspace", "WorkspaceStack", "stack_of"]

#: A forward ``Do`` keeps the value each bound blob had when its subnet started under
#: ``inner + ITERATION_START_SUFFIX`` (graphtools' Do and While gradients read them; Caffe2
#: keeps only the values at the end).
ITERATION_START_SUFFIX = "/_DO_ITERATION_START_"


class ScopedWorkspace(Workspace):
    """A workspace whose bound names forward to blobs of other workspaces."""

    def __init__(self, parent: Workspace, bindings: Mapping[str, str]) -> None:
        super().__init__(None, seed=parent.seed)
        self._forwarded: dict[str, tuple[Workspace, str]] = {}
        self.add_bindings(parent, bindings)

    def add_bindings(
        self, parent: Workspace, bindings: Mapping[str, str], *, skip_defined: bool = False
    ) -> None:
        """Forward each inner name of ``bindings`` to the outer blob it names in ``parent``.

        With ``skip_defined`` (a gradient Do), an inner name already local keeps its local
        value. A name already forwarded elsewhere is an error (Caffe2's "Redefinition").
        """
        for inner, outer in bindings.items():
            current = self._forwarded.get(inner)
            if current is not None:
                if current[0] is not parent or current[1] != outer:
                    raise InvalidNetError(f"Redefinition of blob {inner!r} in a Do workspace")
                continue
            if inner in self._blobs:
                if skip_defined:
                    continue
                raise InvalidNetError(f"Redefinition of blob {inner!r} in a Do workspace")
            self._forwarded[inner] = (parent, outer)

    def forget_local_copies(self, parent: Workspace, bindings: Mapping[str, str]) -> None:
        """Drop local copies of bound names and bind them again (a reused forward workspace)."""
        for inner in bindings:
            self._blobs.pop(inner, None)
            self._forwarded.pop(inner, None)
        self.add_bindings(parent, bindings)

    def copy_forwarded(self, names: Mapping[str, str]) -> None:
        """Replace each forwarded name of ``names`` by a local copy of its current value."""
        for inner in names:
            target = self._forwarded.get(inner)
            if target is not None and target[0].has(target[1]):
                self._blobs[inner] = target[0].fetch(target[1])
                del self._forwarded[inner]

    def save_start_values(self, names: Mapping[str, str]) -> None:
        """Keep the current value of every bound name under ``name + ITERATION_START_SUFFIX``."""
        for inner in names:
            if self.has(inner):
                self._blobs[inner + ITERATION_START_SUFFIX] = self.fetch(inner)

    def feed(self, name: str, value: Any) -> None:
        target = self._forwarded.get(name)
        if target is not None:
            target[0].feed(target[1], value)
        else:
            super().feed(name, value)

    def fetch(self, name: str) -> Any:
        target = self._forwarded.get(name)
        if target is not None:
            return target[0].fetch(target[1])
        return super().fetch(name)

    def has(self, name: str) -> bool:
        target = self._forwarded.get(name)
        if target is not None:
            return target[0].has(target[1])
        return super().has(name)


class WorkspaceStack:
    """The forward workspaces of one scope blob, most recent on top (Caffe2's rules)."""

    def __init__(self) -> None:
        self._workspaces: list[ScopedWorkspace] = []
        self._top = -1

    def empty(self) -> bool:
        return self._top < 0

    def depth(self) -> int:
        """How many forward workspaces are on the stack."""
        return self._top + 1

    def push_forward(self, parent: Workspace, bindings: Mapping[str, str]) -> ScopedWorkspace:
        """A workspace for the next forward run: new, or one a gradient Do popped, re-bound."""
        if self._top == len(self._workspaces) - 1:
            self._workspaces.append(ScopedWorkspace(parent, bindings))
        else:
            self._workspaces[self._top + 1].forget_local_copies(parent, bindings)
        self._top += 1
        return self._workspaces[self._top]

    def reuse_last_forward(self, parent: Workspace, bindings: Mapping[str, str]) -> ScopedWorkspace:
        """The top workspace again (a Do with ``reuse_workspace``)."""
        workspace = self._workspaces[self._top]
        workspace.forget_local_copies(parent, bindings)
        return workspace

    def pop_gradient(self, parent: Workspace, bindings: Mapping[str, str]) -> ScopedWorkspace:
        """The top forward workspace, with the gradient bindings added, taken off the stack."""
        if self._top < 0:
            raise InvalidNetError(
                "a gradient Do found no forward workspace on its scope: the forward Do did not "
                "run (as many times) before it"
            )
        workspace = self._workspaces[self._top]
        workspace.add_bindings(parent, bindings, skip_defined=True)
        self._top -= 1
        return workspace

    def __repr__(self) -> str:
        return f"<WorkspaceStack: {self.depth()} workspaces>"


def stack_of(value: Any, name: str) -> WorkspaceStack:
    """The ``WorkspaceStack`` held by blob ``name`` (workspaces store it as an object array)."""
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 0:
        value = value.item()
    if not isinstance(value, WorkspaceStack):
        raise InvalidNetError(
            f"blob {name!r} holds no workspace stack: create it with a CreateScope op first"
        )
    return value

"""Workspaces of a ``RecurrentNetwork`` op: the shared-blobs workspace and one per step.

Caffe2 runs each step of a recurrent net in a step workspace whose parent is a shared-blobs
workspace, itself a child of the op's workspace. Reads fall through to the parents. Writes
follow ``Workspace::CreateBlob``: a name that exists up the chain (a blob the op's workspace
holds, a blob created in the shared workspace) is written there, any other name stays in the
step workspace. A linked name (``rnn_internal_apply_link``) is a view of rows of a state
tensor, so writing it writes those rows: ``StepWorkspace`` copies a value written to a bound
link into its rows, as Caffe2's shared pointer does.

``ScratchWorkspaces`` is what the op's last output (``step_workspaces``) holds: the step
workspaces and the shared one, which the gradient op reads back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphtools.errors import InvalidNetError
from graphtools.executor.workspace import Workspace

__all__ = ["ScratchWorkspaces", "SharedBlobsWorkspace", "StepWorkspace", "scratch_of"]


class SharedBlobsWorkspace(Workspace):
    """The child of the op's workspace that blobs shared by all steps live in.

    ``declare(name)`` is Caffe2's ``CreateBlob`` without a value: writes of ``name`` from any
    step then land here.
    """

    def __init__(self, parent: Workspace) -> None:
        super().__init__(parent, seed=parent.seed)
        self.outer = parent
        self._declared: set[str] = set()

    def declare(self, name: str) -> None:
        """Create ``name`` here (empty until a step writes it)."""
        self._declared.add(name)

    def owns(self, name: str) -> bool:
        """Whether ``name`` was created here (with or without a value)."""
        return name in self._blobs or name in self._declared

    def store(self, name: str, value: Any) -> None:
        """Write ``name`` here."""
        super().feed(name, value)

    def feed(self, name: str, value: Any) -> None:
        if self.owns(name) or not self.outer.has(name):
            self.store(name, value)
        else:
            self.outer.feed(name, value)

    def fetch(self, name: str) -> Any:
        if name in self._blobs:
            return self._blobs[name]
        return self.outer.fetch(name)

    def has(self, name: str) -> bool:
        return name in self._blobs or self.outer.has(name)


class StepWorkspace(Workspace):
    """The workspace of one step: local blobs, link views, and Caffe2's write rule."""

    def __init__(self, shared: SharedBlobsWorkspace) -> None:
        super().__init__(shared, seed=shared.seed)
        self.shared = shared
        self._links: dict[str, np.ndarray] = {}

    def bind_link(self, name: str, view: np.ndarray) -> None:
        """Make ``name`` a view of rows of a state tensor (written through from now on)."""
        self._links[name] = view

    def feed(self, name: str, value: Any) -> None:
        view = self._links.get(name)
        if view is not None and value is not view:
            array = np.asarray(value)
            if array.size == view.size:
                view[...] = array.reshape(view.shape)
                return
            del self._links[name]  # a differently sized write reallocates, as in Caffe2
        elif view is None:
            value = self._unaliased(value)
        if name in self._blobs or (not self.shared.has(name) and not self.shared.owns(name)):
            super().feed(name, value)
        else:
            self.shared.feed(name, value)

    def _unaliased(self, value: Any) -> Any:
        """``value``, copied when it is a view into a linked state row (a kernel that returns
        its input, fed under another name, must not change when the row is written later)."""
        if (
            isinstance(value, np.ndarray)
            and value.base is not None
            and any(np.may_share_memory(value, view) for view in self._links.values())
        ):
            return value.copy()
        return value

    def fetch(self, name: str) -> Any:
        if name in self._blobs:
            return self._blobs[name]
        return self.shared.fetch(name)

    def has(self, name: str) -> bool:
        return name in self._blobs or self.shared.has(name)


@dataclass(eq=False)
class ScratchWorkspaces:
    """The value of a RecurrentNetwork op's ``step_workspaces`` output.

    Attributes:
        shared: the shared-blobs workspace.
        steps: the step workspaces: one per step, or the one reused when forward-only.
        has_backward: whether the forward op kept one workspace per step for its gradient.
    """

    shared: SharedBlobsWorkspace
    steps: list[StepWorkspace] = field(default_factory=list)
    has_backward: bool = True

    def __repr__(self) -> str:
        return f"<ScratchWorkspaces: {len(self.steps)} step workspaces>"


def scratch_of(value: Any, name: str) -> ScratchWorkspaces:
    """The ``ScratchWorkspaces`` held by blob ``name`` (stored as a 0-d object array).

    Raises:
        InvalidNetError: the blob holds something else.
    """
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 0:
        value = value.item()
    if not isinstance(value, ScratchWorkspaces):
        raise InvalidNetError(
            f"blob {name!r} holds no step workspaces: it must be the last output of the "
            "RecurrentNetwork op this gradient belongs to"
        )
    return value

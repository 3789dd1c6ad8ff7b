"""Blob storage for the reference executor: ``Workspace`` and the ``Int8Tensor`` blob type."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.errors import InvalidNetError

__all__ = ["Int8Tensor", "Workspace"]


@dataclass(frozen=True, eq=False)
class Int8Tensor:
    """A quantized blob the way Caffe2's ``Int8TensorCPU`` holds it.

    ``real = (values - zero_point) * scale``. ``values`` is ``uint8`` for activations and
    weights, ``int32`` for biases (whose scale is input scale times weight scale). Equality is
    identity (field-wise ``==`` is ambiguous on arrays), which keeps instances hashable.
    """

    values: np.ndarray
    scale: float
    zero_point: int

    @property
    def data(self) -> np.ndarray:
        """``values`` under detectron2's spelling (Caffe2's ``Int8Tensor`` namedtuple field)."""
        return self.values

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the quantized values."""
        return tuple(self.values.shape)

    def dequantize(self) -> np.ndarray:
        """The real values as float32."""
        return (
            (self.values.astype(np.float32) - np.float32(self.zero_point)) * np.float32(self.scale)
        ).astype(np.float32)


class Workspace:
    """Blobs by name, like a Caffe2 workspace.

    A workspace may have a ``parent`` (control flow runs nested nets in child workspaces):
    reads fall through to the parent when a blob is not local, writes always stay local.
    ``seed`` seeds the random fills of ops that carry no ``random_seed`` of their own.
    """

    def __init__(self, parent: Workspace | None = None, *, seed: int = 0) -> None:
        self.parent = parent
        self.seed = seed
        self._blobs: dict[str, Any] = {}

    def feed(self, name: str, value: Any) -> None:
        """Store ``value`` (an array, array-like or ``Int8Tensor``) as blob ``name``."""
        if not isinstance(value, Int8Tensor | np.ndarray):
            value = np.asarray(value)
        self._blobs[name] = value

    def fetch(self, name: str) -> Any:
        """The value of blob ``name``, looked up here then in the parents."""
        workspace: Workspace | None = self
        while workspace is not None:
            blobs = workspace._blobs
            if name in blobs:
                return blobs[name]
            workspace = workspace.parent
        raise InvalidNetError(f"blob {name!r} does not exist in the workspace")

    def has(self, name: str) -> bool:
        """Whether blob ``name`` exists here or in a parent."""
        workspace: Workspace | None = self
        while workspace is not None:
            if name in workspace._blobs:
                return True
            workspace = workspace.parent
        return False

    def local_blobs(self) -> list[str]:
        """Names of the blobs stored in this workspace (not the parents), in write order."""
        return list(self._blobs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __repr__(self) -> str:
        nested = ", nested" if self.parent is not None else ""
        return f"<Workspace: {len(self._blobs)} blobs{nested}>"

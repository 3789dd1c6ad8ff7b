"""What a net holds beside its ops: constants (``Tensor``) and declared value types
(``ValueType``), as ONNX graphs do.

Both are immutable values. A ``Tensor`` decodes its data only when asked (``numpy()``): a
loaded model's initializers stay the bytes they were, and an unchanged one is written back as
it was. The codec provides its own ``Tensor`` for loaded data; ``ArrayTensor`` is one made in
Python from a numpy array (what a pass that folds a constant creates).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ArrayTensor", "Dim", "Tensor", "ValueType"]

Dim = int | str | None
"""One dimension of a shape: a size, a symbolic name, or unknown."""


class Tensor(ABC):
    """A constant a net holds, decoded on demand."""

    __slots__ = ()

    @property
    @abstractmethod
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the data."""

    @property
    @abstractmethod
    def shape(self) -> tuple[int, ...]:
        """The shape of the data."""

    @abstractmethod
    def numpy(self) -> np.ndarray:
        """The data as a read-only numpy array (decoded, and read from external files, on the
        first call)."""

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Size of the data in bytes (as numpy holds it)."""
        return self.size * self.dtype.itemsize

    def same_as(self, other: Tensor) -> bool:
        """Whether both hold the same dtype, shape and data."""
        if self is other:
            return True
        if self.dtype != other.dtype or self.shape != other.shape:
            return False
        return bool(np.array_equal(self.numpy(), other.numpy(), equal_nan=self.dtype.kind in "fc"))


class ArrayTensor(Tensor):
    """A tensor made from a numpy array (copied once, then read-only)."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        data = np.array(array)
        data.flags.writeable = False
        self._array = data

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._array.shape)

    def numpy(self) -> np.ndarray:
        return self._array

    def __repr__(self) -> str:
        return f"ArrayTensor({self.dtype}{list(self.shape)})"


@dataclass(frozen=True)
class ValueType:
    """The declared type of a value: ONNX element type and shape.

    Attributes:
        elem_type: ``onnx.TensorProto.DataType`` of the elements (0: undefined, or not a
            tensor).
        shape: dims (sizes, symbolic names, ``None`` for unknown), or ``None`` for an unknown
            rank.
        kind: ``"tensor"``, or the kind of a value that is not one (``"sequence"``,
            ``"map"``, ``"optional"``, ``"sparse_tensor"``, ``"opaque"``); ``raw`` then holds
            the whole type.
        raw: the codec's record of the declaration it was decoded from (its doc string and
            anything the fields above leave out), written back when the type is unchanged.
    """

    elem_type: int = 0
    shape: tuple[Dim, ...] | None = None
    kind: str = "tensor"
    raw: Any = field(default=None, compare=False, repr=False)

    def with_shape(self, shape: tuple[Dim, ...] | None) -> ValueType:
        """The same type with another shape (the codec's record dropped); a value that is
        not a tensor has no shape to change and comes back as it is."""
        if self.kind != "tensor":
            return self
        return ValueType(self.elem_type, shape, self.kind)

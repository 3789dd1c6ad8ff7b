"""What the lower core modules (the SSA view, use-def, nested-net access, the rewriter) rely on
in an op and a net, as protocols.

The data model (``graphtools.ir``) sits *above* those modules: ``Net.ssa()`` and ``Net.edit()``
use them, so they cannot import it, not even for type hints (the import graph has no cycle).
They name ``OpLike`` and ``NetLike`` instead, which ``ir.Op`` and ``ir.Net`` satisfy; mypy checks
that they do wherever an IR object is handed to one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["CAFFE2", "DIALECTS", "ONNX", "NetLike", "OpLike", "as_names"]

_T = TypeVar("_T")

CAFFE2 = "caffe2"
"""The dialect of Caffe2 NetDefs."""
ONNX = "onnx"
"""The dialect of ONNX graphs."""
DIALECTS = (CAFFE2, ONNX)


class OpLike(Protocol):
    """An op: type, blob names read and written, and the nets it holds."""

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def control_inputs(self) -> tuple[str, ...]: ...

    def has_nested_nets(self) -> bool: ...

    def has_control_inputs(self) -> bool: ...

    def nested_nets(self) -> Sequence[tuple[str | None, NetLike]]: ...

    def replace(self, **changes: Any) -> Any: ...

    def arg(self, name: str, default: Any = None) -> Any: ...


class NetLike(Protocol):
    """A net: ops in order, external lists, its dialect, a revision and a per-revision memo."""

    revision: int

    @property
    def dialect(self) -> str: ...

    @property
    def ops(self) -> Sequence[Any]: ...

    @property
    def external_inputs(self) -> Sequence[str]: ...

    @property
    def external_outputs(self) -> Sequence[str]: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __getitem__(self, index: int) -> Any: ...

    def cached(self, key: Hashable, compute: Callable[[Any], _T]) -> _T: ...

    def nested_op_indices(self) -> frozenset[int]: ...

    def defined_names(self) -> frozenset[str]: ...


def as_names(value: Iterable[str], what: str) -> tuple[str, ...]:
    """``value`` as a tuple of blob names; a bare string is refused, not split into letters."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{what} must be a list of blob names, not the string {value!r}")
    return tuple(value)

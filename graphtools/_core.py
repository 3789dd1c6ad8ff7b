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

__all__ = [
    "CAFFE2",
    "DIALECTS",
    "DIALECT_NAMES",
    "MAIN_NET",
    "ONNX",
    "STEP_NET_OPS",
    "NetLike",
    "OpLike",
    "as_names",
    "is_text_step_net",
]

_T = TypeVar("_T")

CAFFE2 = "caffe2"
"""The dialect of Caffe2 NetDefs."""
ONNX = "onnx"
"""The dialect of ONNX graphs."""
DIALECTS = (CAFFE2, ONNX)
MAIN_NET = {CAFFE2: "predict_net", ONNX: "graph"}
"""What a model's main net is called in each dialect, for messages."""
DIALECT_NAMES = {CAFFE2: "Caffe2", ONNX: "ONNX"}
"""How people write each dialect's name."""
STEP_NET_OPS = frozenset({"RecurrentNetwork", "RecurrentNetworkGradient"})
"""Caffe2 ops holding step nets (arguments named ``*step_net``), which old frontends wrote as
NetDef text in a string rather than as a nested NetDef."""


def is_text_step_net(op_type: str, arg_name: str | None, text: bytes | str | None) -> bool:
    """Whether an argument of an ``op_type`` op holds a step net as NetDef text."""
    return bool(text) and op_type in STEP_NET_OPS and (arg_name or "").endswith("step_net")


class OpLike(Protocol):
    """An op: type, blob names read and written, and the nets it holds."""

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def control_inputs(self) -> tuple[str, ...]: ...

    def has_nested_nets(self) -> bool: ...

    def text_step_nets(self) -> list[bytes]: ...

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
    """``value`` as a tuple of blob names; a bare string is refused, not split into letters,
    and so is an item that is not a string (``None``, a number), which would otherwise fail
    only when the net is written."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{what} must be a list of blob names, not the string {value!r}")
    names = tuple(value)
    if not all(isinstance(name, str) for name in names):
        position, bad = next((i, n) for i, n in enumerate(names) if not isinstance(n, str))
        raise TypeError(f"{what} must be blob names (strings): item {position} is {bad!r}")
    return names

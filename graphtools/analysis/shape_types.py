"""The vocabulary of the shape analysis: ``TensorType``, symbolic dims and the rule registry.

A dim is an ``int``, a symbol (``str``, e.g. ``"batch"``: a dynamic size, equal wherever the
same symbol appears) or ``None`` (unknown). Rules (``@shape_rule``) live in the
``shape_rules_*`` modules, one per executor kernel family; ``graphtools.analysis.shapes``
imports them all and walks nets. Rules raise ``ValueError`` on a contradiction (the walker
names the op and blobs) and ``UnsupportedOpError`` for an argument variant the executor does
not run either (the outputs are then unknown). The rules of ops holding nested nets (``If``,
``While``, ``Do``) get a ``NestedScope`` from the walker to infer those nets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from math import prod
from typing import Any, Protocol

import numpy as np

from graphtools.ir import Net, Op

__all__ = [
    "RULES",
    "VALUE_RULES",
    "Dim",
    "Lookup",
    "NestedScope",
    "ShapeRule",
    "TensorType",
    "ValueRule",
    "Values",
    "shape_rule",
    "value_rule",
]

Dim = int | str | None
#: The statically known contents of a small integer tensor (a shape being computed), flattened
#: in row-major order; an entry is a ``Dim`` (an unknown or symbolic element is allowed).
Values = tuple[Dim, ...]


_PLAIN = (int, str)


def _dim(value: Any) -> Dim:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"a dim is an int, a symbol (str) or None, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class TensorType:
    """What is known statically about a blob: its dtype and its shape.

    Attributes:
        dtype: numpy dtype of the values, ``None`` when unknown. For a quantized blob, the
            dtype of its stored values (``uint8`` activations and weights, ``int32`` biases).
        shape: one ``Dim`` per axis, or ``None`` when even the rank is unknown.
        quantized: the blob is an ``Int8Tensor`` (values with a scale and zero point), as the
            ``Int8*`` ops read and write.
    """

    dtype: np.dtype[Any] | None = None
    shape: tuple[Dim, ...] | None = None
    quantized: bool = False

    def __post_init__(self) -> None:
        if self.dtype is not None and not isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", np.dtype(self.dtype))
        shape = self.shape
        if shape is not None and (
            type(shape) is not tuple or not all(d is None or type(d) in _PLAIN for d in shape)
        ):
            object.__setattr__(self, "shape", tuple(_dim(d) for d in shape))

    @property
    def rank(self) -> int | None:
        """Number of axes, ``None`` when unknown."""
        return None if self.shape is None else len(self.shape)

    @property
    def complete(self) -> bool:
        """Whether dtype, rank and every dim are known (a symbolic dim counts as known)."""
        return (
            self.dtype is not None
            and self.shape is not None
            and all(d is not None for d in self.shape)
        )

    def __str__(self) -> str:
        dtype = "?" if self.dtype is None else str(self.dtype)
        if self.quantized:
            dtype = f"int8q({dtype})"
        if self.shape is None:
            return f"{dtype}[?]"
        return f"{dtype}[{', '.join('?' if d is None else str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class _Explained(TensorType):
    """A rule's result that is incomplete for a reason the rule knows (see ``explained``)."""

    why: str = field(default="", compare=False)


def explained(t: TensorType, why: str) -> TensorType:
    """``t`` carrying the reason it is incomplete (e.g. a data-dependent dim) to the walker."""
    return _Explained(t.dtype, t.shape, t.quantized, why)


def reason_of(t: TensorType) -> str | None:
    """The reason ``explained`` attached to ``t``, if any."""
    return t.why if isinstance(t, _Explained) else None


def plain(t: TensorType) -> TensorType:
    """``t`` without an attached reason."""
    return TensorType(t.dtype, t.shape, t.quantized) if isinstance(t, _Explained) else t


UNKNOWN = TensorType()

ShapeRule = Callable[..., list[TensorType]]
ValueRule = Callable[[Op, list[TensorType], list["Values | None"]], list["Values | None"]]


@dataclass(frozen=True)
class RuleEntry:
    """A registered shape rule; ``needs_values`` rules are called ``fn(op, types, values)``,
    ``nested`` rules ``fn(op, types, scope)`` with a ``NestedScope``."""

    fn: ShapeRule
    needs_values: bool = False
    nested: bool = False


#: ``lookup(name)``: the type of a blob a nested net reads before writing it, ``None`` when the
#: blob holds no value there.
Lookup = Callable[[str], "TensorType | None"]


class NestedScope(Protocol):
    """What the rule of an op holding nested nets sees of the net around the op.

    Types an incomplete result carries its reason in (``explained``); ``None`` stands for "no
    value": a blob that does not exist at that point of the run.
    """

    #: Where the op is (``op #3 (If) in net 'main'``), for reasons and messages.
    where: str

    def current(self, name: str) -> TensorType | None:
        """The type of blob ``name`` in the enclosing net just before the op."""
        ...

    def run(self, net: Net, lookup: Lookup) -> dict[str, TensorType]:
        """Infer ``net``, a name it reads before writing it typed by ``lookup``; returns the
        final type of every name the net writes (through its own nested nets too)."""
        ...

    def also_writes(self, name: str, t: TensorType) -> None:
        """Record that after the op, enclosing blob ``name`` (not an output of the op) may
        hold ``t`` (the versioned blob keeps its number, so its type becomes the join of the
        type before and ``t``)."""
        ...


#: Op type -> its shape rule.
RULES: dict[str, RuleEntry] = {}
#: Op type -> the rule computing the contents of its outputs from known input contents.
VALUE_RULES: dict[str, ValueRule] = {}


def shape_rule(
    *op_types: str, values: bool = False, nested: bool = False
) -> Callable[[ShapeRule], ShapeRule]:
    """Register the decorated function as the shape rule of every type in ``op_types``.

    The rule gets the op and one ``TensorType`` per input (``values=True``: also the list of
    the inputs' statically known contents, ``None`` where unknown; ``nested=True``: a
    ``NestedScope`` instead) and returns one ``TensorType`` per output position it defines,
    following the executor kernel's semantics.
    """

    def register(fn: ShapeRule) -> ShapeRule:
        for op_type in op_types:
            if op_type in RULES:
                raise ValueError(f"a shape rule for {op_type!r} is already registered")
            RULES[op_type] = RuleEntry(fn, values, nested)
        return fn

    return register


def value_rule(*op_types: str) -> Callable[[ValueRule], ValueRule]:
    """Register how ``op_types`` compute small integer tensors (shape arithmetic).

    The rule gets the op, its input types and known input contents, and returns the contents
    of each output (``None`` where not known). Only called when the op's rule ran.
    """

    def register(fn: ValueRule) -> ValueRule:
        for op_type in op_types:
            if op_type in VALUE_RULES:
                raise ValueError(f"a value rule for {op_type!r} is already registered")
            VALUE_RULES[op_type] = fn
        return fn

    return register


# -- dims -----------------------------------------------------------------------------------


def same_dim(a: Dim, b: Dim, what: str) -> Dim:
    """The dim two dims that must be equal share: an int wins over a symbol over ``None``.

    Raises:
        ValueError: both are ints and differ (``what`` says which dims).
    """
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ValueError(f"{what}: {a} != {b}")
        return a
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    return a if a is not None else b


def same_shape(a: Sequence[Dim], b: Sequence[Dim], what: str) -> tuple[Dim, ...]:
    """Two shapes that must be equal, unified dim by dim (see ``same_dim``)."""
    if len(a) != len(b):
        raise ValueError(f"{what}: {format_shape(a)} and {format_shape(b)} differ in rank")
    try:
        return tuple(same_dim(x, y, "") for x, y in zip(a, b, strict=True))
    except ValueError:
        raise ValueError(f"{what}: {format_shape(a)} != {format_shape(b)}") from None


def broadcast_dim(a: Dim, b: Dim) -> Dim:
    """numpy's broadcast of two dims (``ValueError`` when two ints cannot broadcast)."""
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ValueError(f"dims {a} and {b} do not broadcast")
        return a
    if isinstance(a, int):  # b is a symbol or unknown: it must be 1 or a
        return a
    if isinstance(b, int):
        return b
    return a if a == b else None


def broadcast_shapes(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...]:
    """numpy's broadcast of two shapes."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    try:
        return tuple(broadcast_dim(x, y) for x, y in zip(pa, pb, strict=True))
    except ValueError:
        raise ValueError(
            f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast"
        ) from None


def dim_product(dims: Iterable[Dim]) -> Dim:
    """The product of dims: an int, a symbol when one symbol times ints equal to 1, else None."""
    known = Product.of(dims)
    return None if known is None else known.as_dim()


@dataclass(frozen=True)
class Product:
    """A product of dims as an int coefficient times a sorted tuple of symbols."""

    coefficient: int
    symbols: tuple[str, ...] = ()

    @classmethod
    def of(cls, dims: Iterable[Dim]) -> Product | None:
        """The product of ``dims``, ``None`` when one is unknown."""
        coefficient, symbols = 1, []
        for d in dims:
            if d is None:
                return None
            if isinstance(d, str):
                symbols.append(d)
            else:
                coefficient *= d
        return cls(coefficient, tuple(sorted(symbols)))

    def divided_by(self, other: Product) -> Product | None:
        """``self / other`` when it is exact and ``other``'s symbols are among ``self``'s."""
        if other.coefficient == 0 or self.coefficient % other.coefficient:
            return None
        rest = list(self.symbols)
        for symbol in other.symbols:
            if symbol not in rest:
                return None
            rest.remove(symbol)
        return Product(self.coefficient // other.coefficient, tuple(rest))

    def as_dim(self) -> Dim:
        """The product as one dim: an int, a lone symbol, or ``None``."""
        if not self.symbols:
            return self.coefficient
        if self.coefficient == 1 and len(self.symbols) == 1:
            return self.symbols[0]
        return None


def join(a: TensorType, b: TensorType) -> TensorType:
    """The most precise type true of a blob that holds ``a`` or ``b``.

    What two types share is kept (the dtype, the rank, each equal dim); the rest is unknown.
    """
    a, b = plain(a), plain(b)
    if a == b:
        return a
    if a.quantized != b.quantized:
        return UNKNOWN
    dtype = a.dtype if a.dtype == b.dtype else None
    shape = None
    if a.shape is not None and b.shape is not None and len(a.shape) == len(b.shape):
        shape = tuple(x if x == y else None for x, y in zip(a.shape, b.shape, strict=True))
    return TensorType(dtype, shape, a.quantized)


def format_shape(shape: Sequence[Dim] | None) -> str:
    """``[1, batch, ?]``."""
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


# -- dtypes ---------------------------------------------------------------------------------


@cache
def _numpy_result(fn: Callable[..., Any], dtypes: tuple[np.dtype[Any], ...]) -> np.dtype[Any]:
    return np.asarray(fn(*(np.zeros((1,) * 2, dtype=d) for d in dtypes))).dtype


def result_dtype(fn: Callable[..., Any], *dtypes: np.dtype[Any] | None) -> np.dtype[Any] | None:
    """The dtype numpy's ``fn`` gives on arrays of ``dtypes`` (``None`` if one is unknown).

    Evaluated once per (function, dtypes) on tiny arrays, so it follows numpy's own promotion
    exactly as the kernels meet it.
    """
    if any(d is None for d in dtypes):
        return None
    known = tuple(d for d in dtypes if d is not None)
    with np.errstate(all="ignore"):
        return _numpy_result(fn, known)


def promoted(*dtypes: np.dtype[Any] | None) -> np.dtype[Any] | None:
    """``np.result_type`` of array dtypes (``None`` if one is unknown)."""
    if any(d is None for d in dtypes):
        return None
    return np.result_type(*(d for d in dtypes if d is not None))


def with_shape(t: TensorType, shape: tuple[Dim, ...] | None) -> TensorType:
    """``t`` with another shape (dtype and quantization kept)."""
    return replace(plain(t), shape=shape)


def count(shape: Sequence[Dim] | None) -> int | None:
    """Number of elements when every dim is an int, else ``None``."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return prod(d for d in shape if isinstance(d, int))

"""The importer's converter table: ONNX op type -> the function emitting its Caffe2 ops.

A converter states which schema versions (``since_version`` in ``onnx.defs``) it implements and
which attributes it understands. A node whose resolved schema version is not listed, or which
carries an attribute the converter does not understand, is refused with ``UnsupportedOpError``
before the converter runs, so a semantic change in a newer opset is never silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graphtools.convert.onnx_to_caffe2.context import NodeContext

__all__ = ["CONVERTERS", "Converter", "converter"]


@dataclass(frozen=True)
class Converter:
    """How one ONNX op type becomes Caffe2 ops.

    Attributes:
        op_type: the ONNX op type (default domain).
        since: the schema versions implemented.
        attributes: every attribute the converter reads; others are refused.
        fn: emits the ops through the ``NodeContext``.
    """

    op_type: str
    since: tuple[int, ...]
    attributes: frozenset[str]
    fn: Callable[[NodeContext], None]


CONVERTERS: dict[str, Converter] = {}


def converter(
    *op_types: str, since: Iterable[int], attributes: Iterable[str] = ()
) -> Callable[[Callable[[NodeContext], None]], Callable[[NodeContext], None]]:
    """Register the decorated function as the converter of ``op_types``."""

    def register(fn: Callable[[NodeContext], None]) -> Callable[[NodeContext], None]:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"a converter for {op_type!r} is already registered")
            CONVERTERS[op_type] = Converter(
                op_type, tuple(sorted(since)), frozenset(attributes), fn
            )
        return fn

    return register

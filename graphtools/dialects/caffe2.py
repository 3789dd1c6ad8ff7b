"""Caffe2's op table: graphtools' own facts about Caffe2 op types, and its executor's kernels.

Liveness keeps ops holding nested nets (an ``If``'s branches, a ``Do``'s net write enclosing
blobs the op does not list) and, with side effects, the ops in ``SIDE_EFFECT_TYPES``;
``Identity``, ``Alias``, ``AliasWithName`` and test-mode ``Dropout`` pass their input through
(the two aliases share its storage: only while neither name is written again);
an ``If``'s ``then_net``/``else_net`` are its branches; an op is evaluated by its executor kernel.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress, count
from typing import ClassVar

import numpy as np

from graphtools._core import CAFFE2
from graphtools.dialects.base import OpTable
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Net, Op

__all__ = ["CAFFE2_TABLE", "SIDE_EFFECT_TYPES", "Caffe2OpTable"]

SIDE_EFFECT_TYPES: frozenset[str] = frozenset(
    {"Print", "Save", "Checkpoint", "Assert", "EnforceFinite"}
)
"""Op types whose effect is not (only) their outputs: logging, writing files, checks that
raise. (Caffe2's ``Log`` is the elementwise logarithm, not a logging op, so it is not here.)"""

_IDENTITY_TYPES = frozenset({"Identity", "Alias", "AliasWithName"})
_SHARING_TYPES = frozenset({"Alias", "AliasWithName"})  # output.ShareData(input)
_BRANCHES = ("then_net", "else_net")
_TYPE = operator.attrgetter("type")


class Caffe2OpTable(OpTable):
    """The Caffe2 table (one for every Caffe2 model)."""

    dialect: ClassVar[str] = CAFFE2

    def kept_ops(self, net: Net, *, side_effects: bool = True) -> frozenset[int]:
        kept = set(net.nested_op_indices())
        if side_effects:
            kept.update(compress(count(), map(SIDE_EFFECT_TYPES.__contains__, map(_TYPE, net))))
        return frozenset(kept)

    def identity_types(self) -> frozenset[str]:
        return _IDENTITY_TYPES | {"Dropout"}

    def passes_through(self, op: Op, net: Net) -> bool:
        if len(op.inputs) != 1:
            return False
        if op.type == "Dropout":
            return bool(op.arg("is_test", 0)) and len(op.outputs) in (1, 2)
        return op.type in _IDENTITY_TYPES and len(op.outputs) == 1

    def shares_storage(self, op: Op) -> bool:
        return op.type in _SHARING_TYPES

    def branch_nets(self, op: Op) -> list[tuple[str, Net]]:
        if op.type != "If":
            return []
        return [(name, net) for name, net in op.nested_nets() if name in _BRANCHES]

    def evaluate(self, op: Op, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        from graphtools.executor import KERNELS, Workspace, run_op

        if op.type not in KERNELS:
            raise UnsupportedOpError(f"no executor kernel for Caffe2 op type {op.type!r}")
        workspace = Workspace()
        for name, value in zip(op.inputs, inputs, strict=True):
            if value is not None:
                workspace.feed(name, value)
        run_op(op, workspace)
        return [np.asarray(workspace.fetch(name)) for name in op.outputs]


CAFFE2_TABLE = Caffe2OpTable()
"""The table of every Caffe2 model."""

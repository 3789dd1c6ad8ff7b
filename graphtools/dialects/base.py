"""``OpTable``: the questions generic passes and analyses ask about ops."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from graphtools.ir import Model, Net, Op
from graphtools.values import Tensor, ValueType

__all__ = ["OpTable"]


class OpTable(ABC):
    """What one dialect (and, for ONNX, one set of opsets) knows about its ops."""

    dialect: ClassVar[str]

    @abstractmethod
    def kept_ops(self, net: Net, *, side_effects: bool = True) -> frozenset[int]:
        """Indices of the ops of ``net`` that stay whether or not their outputs are read: ops
        whose nested nets write outside them, and with ``side_effects`` ops whose effect is not
        (only) their outputs or that nobody knows (opaque ops)."""

    @abstractmethod
    def identity_types(self) -> frozenset[str]:
        """Op types that may pass their first input through as their first output."""

    @abstractmethod
    def passes_through(self, op: Op, net: Net) -> bool:
        """Whether ``op`` (of an ``identity_types`` type, in ``net``) writes its first input
        unchanged as its first output; its other outputs, if any, are side products a caller
        must check are unread."""

    def shares_storage(self, op: Op) -> bool:
        """Whether ``op``'s output shares its input's storage (Caffe2's ``Alias``): an
        in-place write to either name after it changes the other too, so it passes its input
        through only while neither name is written again."""
        return False

    @abstractmethod
    def branch_nets(self, op: Op) -> list[tuple[str, Net]]:
        """``(argument name, net)`` of the nested nets of ``op`` that are control-flow bodies
        (branches, loop bodies) a pipeline may rewrite as nets of their own."""

    def constants(self, net: Net) -> Mapping[str, Tensor]:
        """The values ``net`` holds that are constants (folding and fusing may bake them in):
        its initializers, unless the dialect lets a user feed one instead."""
        return net.initializers

    def foldable(self, op: Op, net: Net) -> bool:
        """Whether ``op`` may be replaced by its value when all its inputs are constants:
        known, deterministic, without side effects and nested nets."""
        return False

    def evaluate(self, op: Op, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """The outputs of ``op`` on constant ``inputs`` (``None`` for an input left out).

        Raises:
            UnsupportedOpError: the table cannot evaluate this op.
        """
        from graphtools.errors import UnsupportedOpError

        raise UnsupportedOpError(f"{self.dialect} ops are not evaluated by this table: {op.type}")

    def shape_only(self, op: Op) -> bool:
        """Whether ``op``'s outputs depend on the shape of its input alone (``Shape``): it may
        be evaluated on a placeholder of the input's static shape."""
        return False

    def evaluate_ops(
        self, ops: Sequence[Op], feeds: Mapping[str, np.ndarray], wanted: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Run ``ops`` in order on the constants ``feeds`` and return the ``wanted`` values
        (one op at a time through ``evaluate``; a table may run them together)."""
        values = dict(feeds)
        for op in ops:
            results = self.evaluate(op, [values.get(name) if name else None for name in op.inputs])
            values.update(zip(op.outputs, results, strict=False))
        return {name: values[name] for name in wanted}

    def infer_types(self, model: Model) -> Mapping[str, ValueType]:
        """The types (dtype, static or symbolic shape) the dialect's inference gives the
        predict_net's values; empty when the table has no inference."""
        return {}

    def check(self, model: Model) -> None:
        """Refuse ``model`` when the dialect's own checker does (``InvalidNetError`` saying
        why); a dialect without one has nothing to add to ``graphtools.wellformed``."""
        del model

    def infer_all_types(self, model: Model) -> Mapping[str, ValueType]:
        """``infer_types`` for the values of every net of the model, nested nets included
        (an ONNX model's value names are unique across its graphs)."""
        return self.infer_types(model)

    def describe(self) -> dict[str, Any]:
        """A summary for messages and ``show``."""
        return {"dialect": self.dialect}

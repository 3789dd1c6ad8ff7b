"""ONNX's op table, built from what already knows the ops: ``onnx.defs`` schemas for which ops
exist, and onnxruntime (``onnx.reference`` where onnxruntime has no kernel) to evaluate one.

An op of the default or ``ai.onnx.ml`` domain whose type the schemas know, or a call of a
model-local function, is a pure function of its inputs: liveness may drop it when nothing reads
it. Any other op (a custom domain's, an unknown type) is opaque: kept, never evaluated. ONNX
sub-graphs read outer values and write none (``graphtools.nested``), so no op is kept for its
nested nets. ``Identity`` passes its input through, and so does ``Dropout`` when it runs in
inference mode (no ``training_mode`` input, or one that is a constant false; before opset 7 its
``is_test`` attribute set). The branches of ``If`` and the bodies of ``Loop`` and ``Scan`` are
control-flow bodies.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, lru_cache
from itertools import compress, count
from typing import Any, ClassVar

import numpy as np
import onnx

from graphtools._core import ONNX
from graphtools.dialects.base import OpTable
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model, Net, Op
from graphtools.values import Dim, Tensor, ValueType

__all__ = ["STANDARD_DOMAINS", "OnnxOpTable", "onnx_table"]

STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
"""Domains whose ops ``onnx.defs`` describes."""
_DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})
_NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
"""Standard ops whose outputs are not a function of their inputs: never folded."""
_QUANTIZED_FORMAT = frozenset({"DequantizeLinear"})
"""Ops never folded although they could be: a ``DequantizeLinear`` of a constant is how a
quantized (QDQ) model stores an integer weight, which back-ends (TensorRT, onnxruntime's
quantized kernels) read as such; folded, the model would carry a float copy instead."""
_IDEMPOTENT = frozenset({"Relu", "Abs", "Floor", "Ceil", "Round", "Sign", "Clip"})
"""Standard ops with ``f(f(x)) == f(x)`` exactly (for ``Clip``, with the same bounds)."""
_BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}
_TYPE = operator.attrgetter("type")


@cache
def _standard_type(op_type: str) -> bool:
    """Whether the default or ``ai.onnx.ml`` domain defines ``op_type``."""
    return bool(onnx.defs.has(op_type) or onnx.defs.has(op_type, "ai.onnx.ml"))


def _domain(op: Op) -> str:
    return "" if op.domain in (None, "ai.onnx") else str(op.domain)


class OnnxOpTable(OpTable):
    """The table of ONNX models importing ``opsets`` and defining ``functions``.

    ``initializers_fed``: whether an initializer also listed as a graph input is a default
    the user may feed another value for (IR version 4 and later, as onnxruntime reads it)
    rather than a constant (IR 3 lists every initializer as an input).
    """

    dialect: ClassVar[str] = ONNX

    def __init__(
        self,
        opsets: Mapping[str, int],
        functions: Iterable[tuple[str, str]] = (),
        *,
        initializers_fed: bool = True,
    ) -> None:
        self.opsets = dict(opsets)
        self.functions = frozenset(functions)
        self.initializers_fed = initializers_fed
        self._custom = any(domain not in STANDARD_DOMAINS for domain in self.opsets)
        default = self.opsets.get("", self.opsets.get("ai.onnx"))
        self._old_dropout = default is None or default < 7  # is_test left Dropout at 7

    def constants(self, net: Net) -> Mapping[str, Tensor]:
        """The initializers of ``net``, without those a user may feed (``initializers_fed``):
        baking one of those into a folded or fused value would ignore what is fed."""
        initializers = net.initializers
        fed = self._fed(net)
        if initializers.keys().isdisjoint(fed):
            return initializers
        return {name: tensor for name, tensor in initializers.items() if name not in fed}

    def _fed(self, net: Net) -> frozenset[str]:
        """The names whose initializer a user may replace by feeding a value."""
        return net.external_input_set() if self.initializers_fed else frozenset()

    def known(self, op: Op) -> bool:
        """Whether ``op`` is a standard op the schemas know or a model-local function call."""
        domain = _domain(op)
        if (domain, op.type) in self.functions:
            return True
        if domain not in STANDARD_DOMAINS:
            return False
        return bool(onnx.defs.has(op.type, domain)) if domain else _standard_type(op.type)

    def kept_ops(self, net: Net, *, side_effects: bool = True) -> frozenset[int]:
        if not side_effects:
            return frozenset()
        unknown = {t for t in set(map(_TYPE, net)) if not _standard_type(t)}
        if not self._custom and not unknown:
            return frozenset()
        if self._custom:  # any type may be a custom domain's: ask each op
            return frozenset(i for i, op in enumerate(net) if not self.known(op))
        candidates = compress(count(), map(unknown.__contains__, map(_TYPE, net)))
        return frozenset(i for i in candidates if not self.known(net[i]))

    def identity_types(self) -> frozenset[str]:
        return frozenset({"Identity", "Dropout"})

    def passes_through(self, op: Op, net: Net) -> bool:
        if _domain(op) or not op.inputs or not op.outputs or not op.inputs[0]:
            return False
        if op.type == "Identity":
            return len(op.inputs) == 1 and len(op.outputs) == 1
        if op.type != "Dropout" or len(op.outputs) > 2:
            return False
        if self._old_dropout and op.has_arg("is_test"):  # Dropout-1, -6: training unless set
            return bool(op.arg("is_test"))
        training = op.inputs[2] if len(op.inputs) > 2 else ""
        if not training:
            return True
        tensor = net.initializers.get(training)
        if tensor is None or tensor.size != 1:
            return False
        if training in self._fed(net):
            return False  # a user may feed training_mode=True
        return not bool(np.asarray(tensor.numpy()).reshape(-1)[0])

    def branch_nets(self, op: Op) -> list[tuple[str, Net]]:
        names = _BODIES.get(op.type, ())
        if not names or _domain(op):
            return []
        return [(name, net) for name, net in op.nested_nets() if name in names]

    def foldable(self, op: Op, net: Net) -> bool:
        if _domain(op) or op.type in _NONDETERMINISTIC or op.type in _QUANTIZED_FORMAT:
            return False
        if op.has_nested_nets():
            return False
        if op.type == "Dropout":  # random in training mode
            return self.passes_through(op, net)
        return _standard_type(op.type)

    def evaluate(self, op: Op, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        from graphtools.dialects.onnx_eval import evaluate_node

        if not self.known(op) or op.has_nested_nets():
            raise UnsupportedOpError(f"op {op.type!r} cannot be evaluated on its own")
        return evaluate_node(op, inputs, self.opsets)

    def evaluate_ops(
        self, ops: Sequence[Op], feeds: Mapping[str, np.ndarray], wanted: Sequence[str]
    ) -> dict[str, np.ndarray]:
        from graphtools.dialects.onnx_eval import run_ops

        return run_ops(ops, feeds, wanted, self.opsets)

    def shape_only(self, op: Op) -> bool:
        return not _domain(op) and op.type in ("Shape", "Size")

    def infer_types(self, model: Model, *, nested: bool = False) -> Mapping[str, ValueType]:
        """The types shape inference with data propagation gives the values of the main graph
        (and of the nested graphs with ``nested``), computed once per revision of the model's
        main graph (an edit of a nested graph counts)."""
        from graphtools.dialects.onnx_infer import inferred_types

        key = ("onnx-inferred-types", nested, tuple(sorted(self.opsets.items())))
        return model.predict_net.cached(key, lambda _: inferred_types(model, nested=nested))

    def inference_error(self, model: Model) -> str | None:
        """What strict shape inference says is wrong with ``model``, ``None`` when nothing
        (``graphtools.dialects.onnx_infer.inference_error``)."""
        from graphtools.dialects.onnx_infer import inference_error

        return inference_error(model)

    def shape_values(
        self,
        model: Model,
        candidates: Mapping[str, tuple[int, int]],
        symbols: Mapping[str, bool] | None = None,
    ) -> dict[str, tuple[Dim, ...]]:
        """The values data propagation knows of the main graph's integer tensors
        ``candidates`` (``graphtools.dialects.onnx_infer.shape_values``)."""
        from graphtools.dialects.onnx_infer import shape_values

        return shape_values(model, candidates, symbols)

    def infer_all_types(self, model: Model) -> Mapping[str, ValueType]:
        return self.infer_types(model, nested=True)

    def check(self, model: Model) -> None:
        from graphtools.dialects.onnx_eval import check_model

        check_model(model)

    def schema(self, op: Op) -> Any:
        """The ``onnx.defs`` schema ``op`` resolves to under the model's opsets (``None`` for
        an op the schemas do not know)."""
        domain = _domain(op)
        version = self.opsets.get(domain, self.opsets.get(domain if domain else "ai.onnx"))
        try:
            if version is None:
                return onnx.defs.get_schema(op.type, domain=domain)
            return onnx.defs.get_schema(op.type, version, domain)
        except onnx.defs.SchemaError:
            return None

    def opset(self, domain: str = "") -> int | None:
        """The version the model imports of ``domain`` (``""``: the default domain)."""
        if domain in ("", "ai.onnx"):
            found = self.opsets.get("", self.opsets.get("ai.onnx"))
        else:
            found = self.opsets.get(domain)
        return None if found is None else int(found)

    def combined_axes(
        self, op: Op, position: int, rank: int, constant: Callable[[str], np.ndarray | None]
    ) -> frozenset[int] | None:
        """The axes of ``op``'s input ``position`` (of ``rank`` dims) along which it combines
        several elements into one (``graphtools.dialects.onnx_axes``); ``None`` for an op
        the schemas do not know, which may do anything. ``constant`` gives the value of a
        constant input (a ``CumSum`` axis, ``ReduceSum`` axes)."""
        if not self.known(op) or (_domain(op), op.type) in self.functions:
            return None
        from graphtools.dialects.onnx_axes import combined_axes

        return combined_axes(op, position, rank, constant, self.opset() or 1)

    def broadcasts(self, op: Op) -> bool:
        """Whether ``op`` works element by element on its inputs broadcast against each other
        (``Add``, ``Where``: ``graphtools.dialects.onnx_axes.broadcasts``)."""
        if _domain(op) or (_domain(op), op.type) in self.functions:
            return False
        from graphtools.dialects.onnx_axes import broadcasts

        return broadcasts(op.type, self.opset() or 1)

    def idempotent_types(self) -> frozenset[str]:
        """Op types that may repeat their input's producer (``repeats``)."""
        return _IDEMPOTENT

    def repeats(self, op: Op, first: Op) -> bool:
        """Whether ``op``, reading ``first``'s output, gives back exactly that output: both
        apply one idempotent standard function (``Relu``, ``Floor``, ``Clip`` to the same
        bounds, ...; ``f(f(x)) == f(x)``, NaN and -0.0 included)."""
        return (
            op.type == first.type
            and op.type in _IDEMPOTENT
            and not _domain(op)
            and not _domain(first)
            and len(op.outputs) == len(first.outputs) == 1
            and op.inputs[1:] == first.inputs[1:]
            and first.outputs[0] == op.inputs[0]
            and self.attributes_key(op) == self.attributes_key(first) is not None
        )

    def attribute_array(self, op: Op, name: str) -> np.ndarray | None:
        """The tensor attribute ``name`` of ``op`` as an array (``ConstantOfShape``'s and
        ``Constant``'s ``value``), ``None`` when it holds no tensor."""
        tensor = op.arg(name)
        if tensor is None or type(tensor).__name__ != "TensorProto":
            return None
        try:
            return np.asarray(onnx.numpy_helper.to_array(tensor))
        except Exception:  # a tensor numpy cannot hold (or broken data) is no known value
            return None

    def attributes_key(self, op: Op) -> tuple[Any, ...] | None:
        """A hashable summary of ``op``'s attributes: two ops of one type and domain with
        equal keys compute the same function of their inputs. ``None`` for an op holding a
        graph (its body may read anything)."""
        key: list[Any] = []
        for argument in op.args:
            if argument.n is not None or argument.nets:
                return None
            tensors = (
                (argument.t, *argument.tensors) if argument.t is not None else argument.tensors
            )
            key.append(
                (
                    argument.name,
                    argument.f,
                    argument.i,
                    argument.s,
                    argument.floats,
                    argument.ints,
                    argument.strings,
                    tuple(t.SerializeToString(deterministic=True) for t in tensors),
                )
            )
        return tuple(sorted(key, key=lambda item: item[0] or ""))

    def describe(self) -> dict[str, Any]:
        return {"dialect": self.dialect, "opsets": self.opsets, "functions": len(self.functions)}


@lru_cache(maxsize=64)
def _table(
    opsets: tuple[tuple[str, int], ...],
    functions: frozenset[tuple[str, str]],
    initializers_fed: bool,
) -> OnnxOpTable:
    return OnnxOpTable(dict(opsets), functions, initializers_fed=initializers_fed)


def onnx_table(
    opsets: Mapping[str, int],
    functions: frozenset[tuple[str, str]] = frozenset(),
    *,
    initializers_fed: bool = True,
) -> OnnxOpTable:
    """The table for a model importing ``opsets`` and defining ``functions`` (cached);
    ``initializers_fed``: see ``OnnxOpTable``."""
    return _table(tuple(sorted(opsets.items())), functions, initializers_fed)

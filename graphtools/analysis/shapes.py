"""Static shape and dtype inference over a net, one rule per op type, following the executor.

Usage::

    info = infer_shapes(net, {"data": TensorType(np.float32, ("batch", 3, 224, 224))},
                        params={"conv1_w": (64, 3, 7, 7)})
    info.final("prob")              # TensorType(float32, ("batch", 1000))
    info.types[("conv1", 1)]        # by versioned blob, numbered as net.ssa() numbers them
    info.unknown                    # {versioned blob: why its type is not (fully) known}

    info = infer_model_shapes(model, {"data": (1, 3, 224, 224)})  # init_net fills as params

API:

* ``TensorType(dtype, shape, quantized=False)``: ``dtype`` a numpy dtype or ``None``;
  ``shape`` a tuple of dims or ``None`` (rank unknown); a dim is an ``int``, a symbol such as
  ``"batch"`` (a dynamic size), or ``None`` (unknown). ``quantized`` marks Int8 blobs.
* ``infer_shapes(net, inputs, *, params=None, missing=None, param_values=None) -> ShapeInfo``:
  ``inputs`` and ``params`` map blob names to a ``TensorType`` or to a shape tuple (float32),
  ``param_values`` to the known contents of small integer params. One walk over
  the ops, linear in the net's size. ``missing`` optionally makes up the type of a blob an op
  reads that is neither given nor written before (``channels.infer_param_shapes`` uses it).
* ``ShapeInfo``: ``types`` (every versioned blob met: ``(name, 0)`` for what the net reads
  first), ``unknown`` (the blobs whose type is incomplete, and why: no rule for the op type,
  an unknown input, a data-dependent shape), ``values`` (the contents of the small integer
  blobs that compute shapes), ``final(name)`` (the type at the end of the net) and
  ``why(name)`` (the reason it is incomplete, ``None`` when complete).
* ``infer_model_shapes(model, inputs) -> ShapeInfo``: the init_net's fills give the
  predict_net's params (their static ``shape``/``values``/``dtype`` arguments); a given input
  overrides an init_net placeholder of the same name.
* Rules: ``@shape_rule("Conv", ...)`` registers ``rule(op, input_types) -> list[TensorType]``
  in ``RULES`` (``values=True``: ``rule(op, types, values)`` also gets the inputs' known
  contents), in the ``shape_rules_*`` modules, one per executor kernel family and with the
  kernel's exact semantics. ``@value_rule`` registers how an op computes small integer
  tensors (``Shape``, ``Gather``, ``Concat``, ...), so a ``Reshape`` to a computed shape stays
  static. ``nested=True``: ``rule(op, types, scope)`` gets a ``NestedScope`` to infer the
  op's nested nets in the enclosing net's types (``If``, ``While``, ``Do``).

Control flow (``shape_rules_control``): an ``If`` gives the type its branches agree on, else
what they share with a reason naming both; a ``While`` the join of the types over any number
of iterations (a fixed point); a ``Do`` follows its bindings. A blob a nested net writes that
is not an output of the op keeps its version number (the SSA view numbers op outputs only),
so its type becomes what holds before and after the op (Mask R-CNN2Go's If writes the masks
that way). Types inside nested nets are not reported.

Contradictions (an FC whose weight does not fit its input, a Concat of unequal non-axis
dims) raise ``InvalidNetError`` naming the op index and type and the typed input blobs.
Symbols propagate where a rule can keep them (a Conv keeps the batch symbol; a Reshape's
-1 against a symbolic dim is that symbol when the other symbols cancel, else unknown).

**Adding an executor kernel? Add its rule** in the matching ``shape_rules_*`` module (or, when
its output shape always depends on input values, an entry in ``DATA_DEPENDENT`` with the
reason): a test checks that every type in ``graphtools.executor.KERNELS`` is covered, and
another runs each rule's op through its kernel and compares shapes and dtypes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from graphtools._core import CAFFE2, DIALECT_NAMES
from graphtools._gc import paused_gc
from graphtools.analysis import (  # noqa: F401  (importing registers the rules)
    shape_rules_aten,
    shape_rules_control,
    shape_rules_detection,
    shape_rules_fill,
    shape_rules_grad,
    shape_rules_int8,
    shape_rules_logic,
    shape_rules_math,
    shape_rules_misc,
    shape_rules_nn,
    shape_rules_recurrent,
    shape_rules_sparse,
    shape_rules_tensor,
    shape_rules_train,
)
from graphtools.analysis.shape_types import (
    RULES,
    UNKNOWN,
    VALUE_RULES,
    Dim,
    Lookup,
    ShapeRule,
    TensorType,
    Values,
    explained,
    join,
    plain,
    reason_of,
    shape_rule,
    value_rule,
)
from graphtools.errors import (
    GraphToolsError,
    InvalidNetError,
    PreconditionError,
    UnsupportedOpError,
)
from graphtools.ir import Model, Net, Op
from graphtools.ssa import VersionedBlob

__all__ = [
    "DATA_DEPENDENT",
    "RULES",
    "Dim",
    "ShapeInfo",
    "ShapeRule",
    "TensorType",
    "infer_model_shapes",
    "infer_shapes",
    "shape_rule",
    "value_rule",
]

#: Op types with an executor kernel but no shape rule, because their output shape depends on
#: input values, with the reason (their outputs are unknown, with that reason). The
#: data-dependent *variants* of other ops (Reshape, Slice, Split, TopK and ResizeNearest reading
#: their shape, bounds, sizes, k or scales from an input; fills with ``input_as_shape``) have
#: rules that leave those dims unknown with a "data-dependent" reason, unless the value rules
#: know the input's contents.
DATA_DEPENDENT: dict[str, str] = {
    "GenerateProposals": "the number of proposals NMS keeps depends on the scores",
    "GenerateProposalsCPP": "the number of proposals NMS keeps depends on the scores",
    "BoxWithNMSLimit": "the number of detections NMS keeps depends on the scores",
    "LengthsRangeFill": "the output length is the sum of the lengths' values",
    "GatherRanges": "the output length is the sum of the ranges' lengths",
    "SparseLabelSplit": "each output's length is how many values carry that label",
    "SparseToDense": "the first dim is max(indices) + 1 unless DATA_TO_INFER_DIM is given",
    "OneHot": "the row length is the value of the index-size input",
    "Load": "the blobs and their shapes are those stored in the db file it reads",
    "RecurrentNetworkBlobFetcher": "one name per blob the step workspaces hold after a run",
}

TypeLike = TensorType | Sequence[int | str | None]
#: ``missing(op_index, op, position, input_types_so_far) -> TensorType | None``.
MissingHook = Callable[[int, Op, int, list[TensorType]], TensorType | None]

_FLOAT32 = np.dtype(np.float32)


def as_type(value: TypeLike) -> TensorType:
    """A ``TensorType`` as given, or a float32 one of the given shape."""
    if isinstance(value, TensorType):
        return plain(value)
    return TensorType(_FLOAT32, tuple(value))


@dataclass
class ShapeInfo:
    """The result of ``infer_shapes``: a type for every versioned blob of the net.

    Attributes:
        types: the type of each versioned blob (``(name, 0)`` is the value before the net).
        unknown: the blobs whose type is incomplete (dtype, rank or a dim unknown; symbols
            count as known), with the reason.
        values: statically known contents of small integer blobs (computed shapes), flat.
        versions: the final version of every name the net reads or writes.
    """

    types: dict[VersionedBlob, TensorType] = field(default_factory=dict)
    unknown: dict[VersionedBlob, str] = field(default_factory=dict)
    values: dict[VersionedBlob, Values] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)

    def final(self, name: str) -> TensorType:
        """The type of ``name`` at the end of the net.

        Raises:
            KeyError: the net neither reads nor writes ``name``.
        """
        if name not in self.versions:
            raise KeyError(f"blob {name!r} is neither read nor written by the net")
        return self.types[(name, self.versions[name])]

    def why(self, name: str) -> str | None:
        """Why the final type of ``name`` is incomplete, ``None`` when it is complete."""
        if name not in self.versions:
            raise KeyError(f"blob {name!r} is neither read nor written by the net")
        return self.unknown.get((name, self.versions[name]))


def _describe(op: Op, blobs: list[VersionedBlob], types: list[TensorType]) -> str:
    return ", ".join(f"{b[0]}@{b[1]}: {t}" for b, t in zip(blobs, types, strict=True))


def _where(index: int, op: Op, net: Net) -> str:
    name = f" in net {net.name!r}" if net.name else ""
    return f"op #{index} ({op.type}){name}"


class _Walk:
    """One pass over a net's ops, keeping the current version and type of every name.

    ``lookup`` types a blob read before any op writes it (the given types; for a nested net,
    the enclosing net's). ``nested_writes`` collects the names that nested nets of its ops
    write besides the ops' outputs.
    """

    def __init__(
        self,
        net: Net,
        lookup: Lookup,
        missing: MissingHook | None,
        known: Mapping[str, Values] | None = None,
    ) -> None:
        self.net = net
        self.lookup = lookup
        self.missing = missing
        self.known = known or {}  # contents of blobs read before any op writes them
        self.info = ShapeInfo()
        self.nested_writes: dict[str, None] = {}
        #: For a blob left incomplete by a rule that ran: the incomplete input it read.
        self.stale: dict[VersionedBlob, VersionedBlob] = {}

    def record(self, blob: VersionedBlob, t: TensorType, why: str | None) -> None:
        self.info.types[blob] = plain(t)
        if why is not None and not t.complete:
            self.info.unknown[blob] = reason_of(t) or why

    def _read(self, index: int, op: Op, position: int, types: list[TensorType]) -> VersionedBlob:
        name = op.inputs[position]
        versions = self.info.versions
        if name not in versions:
            versions[name] = 0
        blob = (name, versions[name])
        if blob not in self.info.types:
            t = self.lookup(name)
            why = f"the type given for {name!r} is incomplete"
            if t is None:
                why = f"{name!r} is read before any op writes it and its type was not given"
                if self.missing is not None:
                    t = self.missing(index, op, position, types)
            self.record(blob, UNKNOWN if t is None else t, why)
            if blob[1] == 0 and name in self.known:
                self.info.values[blob] = self.known[name]
        return blob

    def run(self) -> ShapeInfo:
        info = self.info
        for name in self.net.external_inputs:
            info.versions.setdefault(name, 0)
        for index, op in enumerate(self.net):
            blobs: list[VersionedBlob] = []
            types: list[TensorType] = []
            for position in range(len(op.inputs)):
                blob = self._read(index, op, position, types)
                blobs.append(blob)
                types.append(info.types[blob])
            outputs, values, failure = self._apply(index, op, blobs, types)
            versions = info.versions
            for name in op.outputs:
                versions[name] = versions.get(name, 0) + 1
            for position, name in enumerate(op.outputs):
                blob = (name, versions[name])
                t = outputs[position] if position < len(outputs) else UNKNOWN
                info.types[blob] = plain(t)
                info.values.pop(blob, None)
                if position < len(values) and values[position] is not None:
                    info.values[blob] = values[position]  # type: ignore[assignment]
                if not t.complete:
                    why = reason_of(t) or failure or self._why(index, op, blob, blobs, types)
                    info.unknown[blob] = why
        for name in self.net.external_inputs:
            if (name, 0) not in info.types:
                given = self.lookup(name)
                why = f"input {name!r} not given"
                self.record((name, 0), UNKNOWN if given is None else given, why)
        return info

    def _why(
        self,
        index: int,
        op: Op,
        output: VersionedBlob,
        blobs: list[VersionedBlob],
        types: list[TensorType],
    ) -> str:
        """Why a rule that ran left ``output`` incomplete."""
        where = _where(index, op, self.net)
        stale = next((b for b, t in zip(blobs, types, strict=True) if not t.complete), None)
        if stale is not None:
            self.stale[output] = stale
            return f"{where} reads {stale[0]}@{stale[1]}, whose type is unknown"
        return f"{where}: an output dim is no int or lone symbol of the input dims"

    def full_why(self, blob: VersionedBlob) -> str | None:
        """Why ``blob`` is incomplete, with the reason at the start of the chain of incomplete
        inputs that led to it (a nested net's reader cannot follow the chain itself)."""
        why = self.info.unknown.get(blob)
        start, seen = blob, {blob}
        while start in self.stale and self.stale[start] not in seen:
            start = self.stale[start]
            seen.add(start)
        root = self.info.unknown.get(start)
        return why if root is None or root == why else f"{why}; at the start: {root}"

    def _apply(
        self, index: int, op: Op, blobs: list[VersionedBlob], types: list[TensorType]
    ) -> tuple[list[TensorType], list[Values | None], str | None]:
        """The op's output types and values, and why they are all unknown if the rule did not
        run (``None`` when it did)."""
        entry = RULES.get(op.type)
        if entry is None:
            why = DATA_DEPENDENT.get(op.type, "no shape rule for the op type")
            if op.type in DATA_DEPENDENT:
                why = f"data-dependent: {why}"
            return [], [], f"{_where(index, op, self.net)}: {why}"
        values_map = self.info.values
        known: list[Values | None] = [values_map.get(b) for b in blobs]
        try:
            if entry.nested:
                outputs = entry.fn(op, types, _Scope(self, _where(index, op, self.net)))
            elif entry.needs_values:
                outputs = entry.fn(op, types, known)
            else:
                outputs = entry.fn(op, types)
            value_fn = VALUE_RULES.get(op.type)
            values = value_fn(op, types, known) if value_fn is not None else []
        except UnsupportedOpError as exc:
            return [], [], f"{_where(index, op, self.net)}: {exc}"
        except (ValueError, TypeError, IndexError) as exc:
            error = InvalidNetError(
                f"{_where(index, op, self.net)}: {exc} "
                f"(inputs: {_describe(op, blobs, types) or 'none'})"
            )
            raise error from exc
        except GraphToolsError as exc:
            exc.add_note(f"in a nested net of {_where(index, op, self.net)}")
            raise
        return outputs, values, None


class _Scope:
    """The ``NestedScope`` a walk gives the rule of one op holding nested nets."""

    def __init__(self, walk: _Walk, where: str) -> None:
        self.walk = walk
        self.where = where

    def current(self, name: str) -> TensorType | None:
        info = self.walk.info
        version = info.versions.get(name)
        if version is not None and (name, version) in info.types:
            blob = (name, version)
            why = self.walk.full_why(blob)
            return info.types[blob] if why is None else explained(info.types[blob], why)
        given = self.walk.lookup(name)
        if given is not None:
            info.versions.setdefault(name, 0)
            self.walk.record((name, 0), given, f"the type given for {name!r} is incomplete")
            return given
        if version is not None:
            return explained(UNKNOWN, f"input {name!r} not given")
        return None

    def run(self, net: Net, lookup: Lookup) -> dict[str, TensorType]:
        walk = _Walk(net, lookup, None)
        info = walk.run()
        written = [name for name, version in info.versions.items() if version > 0]
        found: dict[str, TensorType] = {}
        for name in dict.fromkeys([*written, *walk.nested_writes]):
            blob = (name, info.versions[name])
            why = walk.full_why(blob)
            found[name] = info.types[blob] if why is None else explained(info.types[blob], why)
        return found

    def also_writes(self, name: str, t: TensorType) -> None:
        before = self.current(name)
        info = self.walk.info
        blob = (name, info.versions.setdefault(name, 0))
        joined = plain(t) if before is None else join(before, t)
        info.types[blob] = joined
        info.values.pop(blob, None)
        self.walk.nested_writes[name] = None
        if joined.complete:
            info.unknown.pop(blob, None)
        else:
            why = reason_of(t) if not t.complete else None
            if why is None and before is not None and not before.complete:
                why = reason_of(before)
            info.unknown[blob] = why or (
                f"{self.where} may overwrite it through a nested net: {before} before, {t} after"
            )


def infer_shapes(
    net: Net,
    inputs: Mapping[str, TypeLike],
    *,
    params: Mapping[str, TypeLike] | None = None,
    missing: MissingHook | None = None,
    param_values: Mapping[str, Values] | None = None,
) -> ShapeInfo:
    """Infer the type of every versioned blob of ``net`` from its inputs' types.

    Args:
        net: the net (ops without a rule give unknown outputs).
        inputs: types (or float32 shapes) of the blobs fed to the net.
        params: types of the parameters; ``inputs`` win over ``params`` for the same name.
        param_values: the known contents of small integer parameters (``fill_facts``: a
            ``Gather``'s indices, a ``Concat``'s ``-1``), for the value rules; ignored for a
            name ``inputs`` gives.
        missing: called for a blob read before any op writes it and given in neither; returns
            its type or ``None`` (unknown).

    Returns:
        A ``ShapeInfo`` (see the module docstring).

    Raises:
        InvalidNetError: an op's inputs contradict each other or its arguments.
        PreconditionError: ``net`` is an ONNX graph (these are Caffe2's rules).
    """
    if net.dialect != CAFFE2:
        raise PreconditionError(
            f"infer_shapes applies Caffe2's shape rules, and {net.name or 'this net'!r} is "
            f"a net of the {DIALECT_NAMES[net.dialect]} dialect: its types come from onnx's "
            "shape inference "
            "(graphtools.dialects.op_table(model).infer_types(model))"
        )
    given = {name: as_type(t) for name, t in (params or {}).items()}
    given.update((name, as_type(t)) for name, t in inputs.items())
    known = {n: v for n, v in (param_values or {}).items() if n not in inputs}
    with paused_gc():
        return _Walk(net, given.get, missing, known).run()


def fill_types(init_net: Net) -> dict[str, TensorType]:
    """The static type of every blob ``init_net`` leaves behind (its fills' arguments); blobs
    of which nothing is known are left out."""
    return dict(fill_facts(init_net)[0])


def fill_facts(init_net: Net) -> tuple[dict[str, TensorType], dict[str, Values]]:
    """``fill_types`` and the contents the value rules know of the small integer blobs
    ``init_net`` leaves behind (what a ``Reshape`` to a computed shape reads), from one
    analysis remembered per revision of the net (treat both as read-only)."""
    return init_net.cached("fill_facts", _fill_facts)


def _fill_facts(init_net: Net) -> tuple[dict[str, TensorType], dict[str, Values]]:
    info = infer_shapes(init_net, {})
    types: dict[str, TensorType] = {}
    values: dict[str, Values] = {}
    for name in {name for op in init_net for name in op.outputs}:
        final = (name, info.versions[name])
        if info.types[final] != UNKNOWN:
            types[name] = info.types[final]
        if final in info.values:
            values[name] = info.values[final]
    return types, values


def infer_model_shapes(model: Model, inputs: Mapping[str, TypeLike]) -> ShapeInfo:
    """Infer the predict_net's types with the init_net's outputs as parameters.

    An input given here overrides an init_net blob of the same name (a placeholder fill of
    the data blob, as some exported nets carry).

    Raises:
        InvalidNetError: as ``infer_shapes``, in either net.
        PreconditionError: ``model`` is an ONNX model (see ``infer_shapes``).
    """
    params: dict[str, TensorType] = {}
    values: dict[str, Values] = {}
    if model.init_net is not None:
        try:
            params, values = fill_facts(model.init_net)
        except GraphToolsError as exc:
            exc.add_note("in the init_net")
            raise
    return infer_shapes(model.predict_net, inputs, params=params, param_values=values)

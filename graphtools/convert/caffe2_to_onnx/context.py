"""What an op exporter sees: the Caffe2 op, what is known about its blobs, and how to emit ONNX
ops (IR ``Op``s of the ONNX dialect), constants, sub-graphs (nested ONNX ``Net``s) and calls of
model-local functions.

A Caffe2 op without a one-to-one ONNX op is written either as a composition of standard ops in
the graph, or as a call of an ONNX model-local function of the ``caffe2`` domain (``Function``,
``ExportContext.call``): the function is named after the Caffe2 op type, its body is built once
per model from standard ops, and the call node carries the op's arguments as attributes, so the
exported graph keeps one node per Caffe2 op and the importer maps it back to that op.
Attributes whose names start with ``_`` are what the export derived for the body (the
quantization of the inputs, permutations); the import drops them. An op type whose input or
output count changes the body has one function per form, named ``Type__form``
(``VARIANT_SEPARATOR``; Caffe2 op types hold no double underscore).

Everything emitted is IR: top-level constants are ``ArrayTensor`` initializers, sub-graphs
nets, attributes arguments. A function body is IR too while it is built; it becomes the
``FunctionProto`` the model's header holds (functions are opaque model data) when defined,
through the ONNX codec, its references to the function's attributes (``AttrRef``) kept as the
codec keeps a loaded one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from onnx import AttributeProto, FunctionProto, helper, numpy_helper

from graphtools._core import ONNX
from graphtools.analysis.scopes import NameSource
from graphtools.convert.conventions import CAFFE2_DOMAIN, DERIVED_PREFIX, VARIANT_SEPARATOR
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Argument, Net, Op, make_arg
from graphtools.serde.onnx_codec import argument_from_attribute, node_to_proto
from graphtools.values import ArrayTensor, Tensor, ValueType

__all__ = [
    "CAFFE2_DOMAIN",
    "DERIVED_PREFIX",
    "EXPORTERS",
    "FUNCTION_MIN_OPSET",
    "VARIANT_SEPARATOR",
    "AttrRef",
    "ExportContext",
    "Function",
    "TypeInfo",
    "exporter",
    "onnx_int64",
]

FUNCTION_MIN_OPSET = 15
"""The oldest default-domain opset function bodies are written for (``CastLike`` is 15)."""

_KINDS = {
    "int": AttributeProto.INT,
    "float": AttributeProto.FLOAT,
    "ints": AttributeProto.INTS,
    "floats": AttributeProto.FLOATS,
    "string": AttributeProto.STRING,
}
_CONSTANT_FIELDS = {
    "int": "value_int",
    "float": "value_float",
    "ints": "value_ints",
    "floats": "value_floats",
    "string": "value_string",
}


@dataclass(frozen=True)
class TypeInfo:
    """What is known of a blob: numpy dtype and shape (either may be ``None``; a dim is an
    int, a symbolic name, or ``None``)."""

    dtype: np.dtype[Any] | None
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class AttrRef:
    """A node attribute taking the value of the enclosing function's attribute ``name``."""

    name: str


@dataclass(frozen=True, eq=False)
class Function:
    """A Caffe2 op type written as a model-local function of the ``caffe2`` domain.

    Attributes:
        op_type: the Caffe2 op type.
        inputs: formal input names (the Caffe2 op's inputs, in order).
        outputs: formal output names (the Caffe2 op's outputs, in order).
        attributes: ``{name: kind}`` of every attribute a call carries (``int``, ``float``,
            ``ints``, ``floats``, ``string``); a call gives all of them.
        body: emits the body's nodes through a function context (``ExportContext.in_function``)
            reading the formal inputs and writing the formal outputs; it sees no shapes.
        since: the oldest default-domain opset the body is written for.
        variant: names the form when the op type has several (input or output counts).
    """

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: Mapping[str, str]
    body: Callable[[ExportContext], None]
    since: int = FUNCTION_MIN_OPSET
    variant: str = ""

    @property
    def name(self) -> str:
        """The function's name: the op type, with the form after ``__`` when there is one."""
        return f"{self.op_type}{VARIANT_SEPARATOR}{self.variant}" if self.variant else self.op_type


@dataclass
class ExportContext:
    """Shared state of one export; ``op``/``index`` name the op being exported.

    Attributes:
        opset: the target default-domain opset.
        names: fresh names for helper values.
        types: known types of blobs (params, inputs, shape analysis).
        read: every blob name some op reads or the graph outputs (to drop unused outputs).
        nodes: the ONNX ops emitted so far.
        constants: initializers made for constant operands, by name (shared).
        recurrent: how RecurrentNetwork ops are exported, ``"loop"`` or ``"scan"``.
        functions: the model-local functions called so far, by name (shared).
        quant: ``(scale, zero point)`` of every Int8 blob exported as a uint8/int32 tensor
            (shared; names are unique after the SSA rewrite).
        helpers: outputs of the transposes ``transpose`` made (the model drops those no one
            reads, shared).
        in_function: the function whose body is being built, else ``None``.
        graph_inputs: the inputs of a sub-graph being built (``subgraph``), with their types.
        nested_names: ``{op index: (inputs, outputs)}`` of the top-level If ops as their
            branches spell them (before the SSA renaming; ``export_control``).
    """

    opset: int
    names: NameSource
    types: dict[str, TypeInfo]
    read: set[str]
    nodes: list[Op] = field(default_factory=list)
    node_names: NameSource = field(default_factory=NameSource)
    constants: dict[str, Tensor] = field(default_factory=dict)
    op: Op | None = None
    index: int = -1
    net_label: str = ""
    missing_rank: bool = False
    outer_names: frozenset[str] = frozenset()
    rewritten: frozenset[str] = frozenset()
    recurrent: str = "loop"
    functions: dict[str, FunctionProto] = field(default_factory=dict)
    quant: dict[str, tuple[float, int]] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)
    in_function: Function | None = None
    graph_inputs: dict[str, ValueType] = field(default_factory=dict)
    nested_names: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    _transposed: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    _transposes: dict[tuple[str, tuple[int, ...]], str] = field(default_factory=dict)

    def refuse(self, reason: str) -> UnsupportedOpError:
        """An ``UnsupportedOpError`` naming the op being exported."""
        op_type = self.op.type if self.op is not None else "?"
        return UnsupportedOpError(
            f"op #{self.index} ({op_type}){self.net_label}: cannot export to ONNX opset "
            f"{self.opset}: {reason}"
        )

    # -- emitting -----------------------------------------------------------------------------

    def node(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
    ) -> None:
        """Append an ONNX op (attributes with value ``None`` are left out; an ``AttrRef``
        value refers to an attribute of the function being built)."""
        self._emit(op_type, inputs, outputs, None, attrs)

    def _emit(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        domain: str | None,
        attrs: Mapping[str, Any],
        kinds: Mapping[str, str] | None = None,
    ) -> None:
        args: list[Argument] = []
        for key, value in attrs.items():
            if isinstance(value, AttrRef):
                args.append(self._reference(key, value.name))
            elif value is not None:
                kind = (kinds or {}).get(key)
                args.append(_argument(key, value, None if kind is None else _KINDS[kind]))
        name = None
        if self.in_function is None and self.op is not None and self.op.name:
            name = self.node_names.fresh(self.op.name)  # unique; one op may give several
        self.nodes.append(Op(op_type, inputs, outputs, name=name, domain=domain, args=args))

    def _reference(self, key: str, name: str, kind: int | None = None) -> Argument:
        """Attribute ``key`` taking the value of the function's attribute ``name``."""
        found = self._kind(name) if kind is None else kind
        return argument_from_attribute(
            AttributeProto(name=key, ref_attr_name=name, type=found)  # type: ignore[arg-type]
        )

    def fresh(self, hint: str) -> str:
        """A value name unused anywhere in the model (in the function, in a body)."""
        return self.names.fresh(hint)

    def const(self, value: Any, hint: str, dtype: Any = None) -> str:
        """A constant holding ``value`` (as ``dtype``): an initializer, or a ``Constant`` op
        inside a function body; returns its name."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        if self.in_function is not None:
            self.nodes.append(
                Op("Constant", [], [name], args=[make_arg("value", numpy_helper.from_array(array))])
            )
        else:
            self.constants[name] = ArrayTensor(array)
        return name

    def attr(self, name: str, hint: str | None = None) -> str:
        """Inside a function body: a value holding the call's attribute ``name`` (a 0-d tensor
        for ``int``/``float``, 1-D for lists; ints are int64, floats float32)."""
        kind = self.in_function.attributes.get(name) if self.in_function else None
        if kind is None:
            raise ValueError(f"no function attribute {name!r} to read here")
        value = self.fresh(hint or name.lstrip(DERIVED_PREFIX))
        reference = self._reference(_CONSTANT_FIELDS[kind], name, _KINDS[kind])
        self.nodes.append(Op("Constant", [], [value], args=[reference]))
        return value

    def _kind(self, name: str) -> Any:
        if self.in_function is None:
            raise ValueError(f"attribute reference {name!r} outside a function body")
        kind = self.in_function.attributes.get(name)
        if kind is None:
            raise ValueError(f"function {self.in_function.op_type} has no attribute {name!r}")
        return _KINDS[kind]

    # -- model-local functions ----------------------------------------------------------------

    def call(
        self, fn: Function, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
    ) -> None:
        """Emit a call of ``fn`` (defining it on first use) reading ``inputs`` and writing
        ``outputs`` (the function's trailing outputs the op does not name get fresh names);
        ``attrs`` gives every attribute ``fn`` declares."""
        if self.opset < fn.since:
            raise self.refuse(f"its ONNX form (function {fn.op_type}) needs opset {fn.since}")
        if len(inputs) != len(fn.inputs) or len(outputs) > len(fn.outputs):
            raise ValueError(
                f"{fn.op_type}: {len(inputs)} inputs and {len(outputs)} outputs for a function "
                f"of {len(fn.inputs)} and {len(fn.outputs)}"
            )
        if set(attrs) != set(fn.attributes):
            raise ValueError(
                f"{fn.op_type}: attributes {sorted(attrs)} given, {sorted(fn.attributes)} declared"
            )
        if fn.name not in self.functions:
            self.functions[fn.name] = self._define(fn)
        named = list(outputs) + [
            self.fresh(f"{fn.op_type}_{o}") for o in fn.outputs[len(outputs) :]
        ]
        values = {k: _typed(fn.attributes[k], v, fn.op_type, k) for k, v in attrs.items()}
        self._emit(fn.name, inputs, named, CAFFE2_DOMAIN, values, fn.attributes)

    def _define(self, fn: Function) -> FunctionProto:
        body = ExportContext(
            self.opset,
            NameSource([*fn.inputs, *fn.outputs]),
            {},
            set(),
            functions=self.functions,
            in_function=fn,
        )
        fn.body(body)
        written = {name for op in body.nodes for name in op.outputs}
        missing = [name for name in fn.outputs if name not in written]
        if missing:
            raise ValueError(f"the body of function {fn.name} does not write {missing}")
        imports = [helper.make_opsetid("", self.opset)]
        if any(op.domain == CAFFE2_DOMAIN for op in body.nodes):
            imports.append(helper.make_opsetid(CAFFE2_DOMAIN, 1))
        return helper.make_function(
            CAFFE2_DOMAIN,
            fn.name,
            list(fn.inputs),
            list(fn.outputs),
            [node_to_proto(op) for op in body.nodes],
            imports,
            attributes=list(fn.attributes),
            doc_string=f"Caffe2's {fn.op_type} in standard ONNX ops (graphtools).",
        )

    # -- sub-graphs ---------------------------------------------------------------------------

    def subgraph(self, label: str, inputs: Sequence[tuple[str, int, Any]]) -> ExportContext:
        """A context for the body of a ``Loop``/``If`` built inside this one: its ops go to
        the sub-graph, names and constants are shared; ``graph_inputs`` holds the inputs made
        from ``(hint, ONNX elem type, shape or None)``, with those types."""
        sub = self.child(set(), label)
        sub.in_function = self.in_function
        for hint, elem_type, shape in inputs:
            dims = None if shape is None else tuple(shape)
            sub.graph_inputs[self.fresh(hint)] = ValueType(int(elem_type), dims)
        return sub

    def input_names(self) -> list[str]:
        """Names of the sub-graph inputs ``subgraph`` made."""
        return list(self.graph_inputs)

    def graph(
        self, name: str, outputs: Sequence[str], types: Mapping[str, ValueType] | None = None
    ) -> Net:
        """The sub-graph built in this context, an ONNX net returning ``outputs`` (a value
        returned twice, or a sub-graph input, is copied first: ONNX graph outputs are distinct
        op outputs); ``types`` declares the types of some outputs."""
        results: list[str] = []
        produced = {n for op in self.nodes for n in op.outputs}
        declared = dict(types or {})
        for value in outputs:
            if value in results or value not in produced:
                copy = self.fresh(f"{value}_out")
                self.node("Identity", [value], [copy])
                if value in declared:
                    declared[copy] = declared.pop(value)
                value = copy
            results.append(value)
        return Net(
            self.nodes,
            list(self.graph_inputs),
            results,
            name=name,
            dialect=ONNX,
            types={**self.graph_inputs, **declared},
        )

    def child(self, read: set[str], label: str) -> ExportContext:
        """A context for a sub-graph: same names, types, constants and functions, its own
        nodes; the transposes it makes stay its own."""
        return ExportContext(
            self.opset,
            self.names,
            self.types,
            read,
            constants=self.constants,
            node_names=self.node_names,
            net_label=label,
            outer_names=self.outer_names,
            rewritten=self.rewritten,
            recurrent=self.recurrent,
            functions=self.functions,
            quant=self.quant,
            helpers=self.helpers,
            in_function=self.in_function,
            _transposed=dict(self._transposed),
            _transposes=dict(self._transposes),
        )

    # -- layouts ------------------------------------------------------------------------------

    def transpose(self, value: str, perm: Sequence[int], out: str | None = None) -> str:
        """``value`` transposed by ``perm``: the source of an earlier transpose when ``perm``
        undoes it (the pair cancels), an earlier identical transpose when there is one, else
        a new ``Transpose`` node. ``out`` names the result (an ``Identity`` when it is an
        existing value). A ``Transpose`` or ``Identity`` made here that no one reads is
        dropped from the model (so the Caffe2 blob a cancelled pair stood for may vanish)."""
        perm = tuple(int(p) for p in perm)
        identity = tuple(range(len(perm)))
        source = value
        if perm == identity:
            found: str | None = value
        elif value in self._transposed:
            inner, first = self._transposed[value]
            combined = tuple(first[p] for p in perm)
            if combined == identity:
                found = inner
            else:
                source, perm = inner, combined
                found = self._transposes.get((source, perm))
        else:
            found = self._transposes.get((source, perm))
        if found is None:
            found = out or self.fresh(f"{source}_t")
            self.node("Transpose", [source], [found], perm=list(perm))
            self.helpers.add(found)
            self._transposed[found] = (source, perm)
            self._transposes[(source, perm)] = found
            return found
        if out is None or out == found:
            return found
        self.node("Identity", [found], [out])
        self.helpers.add(out)
        # out holds found's value: transposing it is transposing found.
        self._transposed[out] = self._transposed.get(found, (found, identity))
        return out

    def elementwise(self, op_type: str, inputs: Sequence[str], output: str, **attrs: Any) -> None:
        """An element-wise op whose first input may be a transposed value: then it runs on
        the source (its other inputs must be scalars) and ``output`` is its result transposed
        the same way, so the Transposes around it can cancel."""
        found = self.transposed(inputs[0])
        if found is None:
            self.node(op_type, inputs, [output], **attrs)
            return
        source, perm = found
        inner = self.fresh(f"{output}_{'_'.join(map(str, perm))}")
        self.node(op_type, [source, *inputs[1:]], [inner], **attrs)
        self.transpose(inner, perm, out=output)

    def transposed(self, value: str) -> tuple[str, tuple[int, ...]] | None:
        """``(source, perm)`` when ``value`` is ``source`` transposed by ``perm`` here."""
        found = self._transposed.get(value)
        if found is None or found[1] == tuple(range(len(found[1]))):
            return None
        return found

    # -- what is known ------------------------------------------------------------------------

    def info(self, name: str) -> TypeInfo | None:
        """What is known of blob ``name``."""
        return self.types.get(name)

    def rank(self, name: str) -> int | None:
        """The rank of ``name`` when known."""
        info = self.types.get(name)
        if info is None or info.shape is None:
            self.missing_rank = True
            return None
        return len(info.shape)

    def need_rank(self, name: str, why: str) -> int:
        """The rank of ``name``; refused when unknown."""
        rank = self.rank(name)
        if rank is None:
            raise self.refuse(
                f"needs the rank of {name!r} ({why}); give the inputs' shapes so that it can "
                "be inferred (--shapes; export_onnx's value_info)"
            )
        return rank

    def dtype(self, name: str, default: Any = np.float32) -> np.dtype[Any]:
        """The dtype of ``name``, else ``default``."""
        info = self.types.get(name)
        if info is None or info.dtype is None:
            return np.dtype(default)
        return info.dtype

    def declare(self, name: str, dtype: Any, shape: Sequence[int | str | None]) -> None:
        """Record the type an exporter knows a value it wrote has, unless something knew it
        already (for outputs whose size depends on the data, which ONNX shape inference
        cannot follow through a ``Loop``: the graph's outputs need at least a rank)."""
        known = self.types.get(name)
        if known is None or known.dtype is None or known.shape is None:
            self.types[name] = TypeInfo(np.dtype(dtype), tuple(shape))

    def used(self, name: str) -> bool:
        """Whether ``name`` is read by some op or is a graph output."""
        return name in self.read

    def quantization(self, name: str) -> tuple[float, int]:
        """``(scale, zero point)`` of the Int8 blob ``name``; refused when it is not one."""
        found = self.quant.get(name)
        if found is None:
            raise self.refuse(
                f"input {name!r} is not an Int8 blob with a known scale and zero point (an "
                "Int8 op's output, an Int8 fill, or an input given with its quantization)"
            )
        return found


def _argument(name: str, value: Any, kind: int | None) -> Argument:
    """The argument of attribute ``name``; ``kind`` (an ``AttributeProto`` type) when the
    attribute's type is declared rather than read from the value (a function call's)."""
    argument = make_arg(name, value)
    return argument if kind is None else replace(argument, kind=kind)


def _typed(kind: str, value: Any, op_type: str, name: str) -> Any:
    """A call attribute as the type its function declares."""
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "ints":
            return [int(v) for v in value]
        if kind == "floats":
            return [float(v) for v in value]
        return value.decode() if isinstance(value, bytes) else str(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{op_type} attribute {name!r}: {value!r} is not {kind}") from exc


ExportFn = Callable[[ExportContext, Op], None]
EXPORTERS: dict[str, ExportFn] = {}


def exporter(*op_types: str) -> Callable[[ExportFn], ExportFn]:
    """Register the decorated function as the exporter of the Caffe2 ``op_types``."""

    def register(fn: ExportFn) -> ExportFn:
        for op_type in op_types:
            if op_type in EXPORTERS:
                raise ValueError(f"an exporter for {op_type!r} is already registered")
            EXPORTERS[op_type] = fn
        return fn

    return register


def onnx_int64(values: Iterable[int]) -> np.ndarray:
    """``values`` as an int64 array (ONNX's type for axes, shapes, pads)."""
    return np.asarray(list(values), dtype=np.int64)

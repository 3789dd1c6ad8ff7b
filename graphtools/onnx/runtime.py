"""Running ONNX-dialect models (``graphtools.serde.onnx_io``) on onnxruntime's CPU provider.

``run_model`` runs an IR model as it is now (a pipeline's result included): the model is
written to bytes, or, when its initializers keep data in external files or it is over
protobuf's limit, to a temporary folder with those files beside it, and onnxruntime loads that.
Graph optimizations are off and one thread runs the graph, so the graph runs as written and
two runs of one model give the same numbers. Values that are not graph outputs can be fetched
too (they are declared outputs of the copy onnxruntime runs).

``seeded_inputs`` makes the data a model's graph inputs declare (element type and shape): a
symbolic or unknown dim is taken from ``shapes`` when given, else 1, and said so.

onnxruntime's exceptions never escape: they become ``RuntimeFailure`` (a ``GraphToolsError``)
naming the model and, when onnxruntime says, the node.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphtools._core import ONNX
from graphtools.errors import GraphToolsError, SerdeError, refuse_unknown_inputs
from graphtools.feeds import MadeInput
from graphtools.ir import Model
from graphtools.serde.onnx_codec import external_tensors, model_to_onnx_bytes
from graphtools.serde.onnx_io import PROTOBUF_LIMIT, onnx_model_files, write_onnx_files
from graphtools.ssa import NO_VALUE
from graphtools.values import ValueType

__all__ = [
    "MAX_MADE_BYTES",
    "TRIP_COUNT",
    "InputSpec",
    "RuntimeFailure",
    "feeds_for",
    "graph_inputs",
    "numpy_dtype",
    "quiet_run",
    "run_model",
    "runtime_failure",
    "seeded_inputs",
]

_NODE_PATTERNS = (
    re.compile(r"running (?P<type>\w+) node\. Name:'(?P<name>[^']*)'"),
    re.compile(r"In Node, \(\"(?P<name>[^\"]*)\", (?P<type>[\w.]+),"),
    re.compile(r"Node \((?P<name>[^)]*)\) Op \((?P<type>[\w.]+)\)"),
    re.compile(r"node (?P<name>\S+) of type (?P<type>\w+)", re.IGNORECASE),
)
_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_SOURCE_LOCATION = re.compile(
    r"\S+\.(?:h|hpp|cc|cpp|cu):\d+ (?:[\w~<>,*& ]*::[\w:~<>,*& ]*\([^()]*\)(?: const)? )?"
)
"""onnxruntime's source file, line and C++ function before a reason: for its developers, and
long enough to push the shapes that explain a failure out of a one-line error."""
_MAX_REASON = 600
MAX_MADE_BYTES = 2**31
"""The most data ``seeded_inputs`` makes up for one input (a declared dim can be huge)."""


def missing_required_input(model: Model) -> str | None:
    """The first node (nested graphs included) that leaves out (names ``""``) an input its
    ``onnx.defs`` schema does not mark optional, said as a reason; ``None`` when none does.
    onnxruntime may crash the whole process on such a node (1.32 does on ``Max(x, "")``)
    instead of refusing it, so it is refused before onnxruntime sees the model."""
    from graphtools.dialects import op_table

    for net in model.nets():
        table = op_table(net)
        schema_of = getattr(table, "schema", None)
        if schema_of is None:
            continue
        for index, op in enumerate(net):
            if NO_VALUE not in op.inputs:
                continue
            schema = schema_of(op)
            if schema is None or not schema.inputs:
                continue
            formal = schema.inputs
            optional = type(formal[0].option).Optional
            for position, name in enumerate(op.inputs):
                param = formal[min(position, len(formal) - 1)]
                if name == NO_VALUE and param.option != optional:
                    where = f"node #{index} ({op.type}{f' {op.name!r}' if op.name else ''})"
                    return (
                        f"{where} leaves out its input {position} ({param.name}), which "
                        f"{op.type} requires: not run in onnxruntime, which may crash on it"
                    )
    return None


class RuntimeFailure(GraphToolsError):
    """onnxruntime could not load or run a model.

    Attributes:
        path: the model's file (``None`` for a model made in memory).
        stage: what onnxruntime was asked to do: ``load`` or ``run``.
        node: the node onnxruntime names (its name, else ``None``).
        op_type: that node's op type, when onnxruntime says.
        reason: onnxruntime's message, first line, without its status prefix.
    """

    def __init__(
        self,
        path: Path | None,
        stage: str,
        reason: str,
        node: str | None,
        op_type: str | None,
        subject: str = "the model",
    ) -> None:
        self.path = path
        self.stage = stage
        self.node = node
        self.op_type = op_type
        self.reason = reason
        self.subject = subject
        where = f"{path}: " if path is not None else ""
        at = ""
        if node is not None or op_type is not None:
            at = f" at node {node!r}" if node else " at a node"
            at += f" ({op_type})" if op_type else ""
        super().__init__(f"{where}onnxruntime cannot {stage} {subject}{at}: {reason}")


def runtime_failure(
    exc: BaseException, path: Path | None, stage: str, subject: str = "the model"
) -> RuntimeFailure:
    """The ``RuntimeFailure`` of an exception onnxruntime raised while it tried to ``stage``
    (``load``, ``run``) the model of ``path`` (``subject``: what to call it)."""
    text = str(exc).strip()
    node = op_type = None
    for pattern in _NODE_PATTERNS:
        found = pattern.search(text)
        if found is not None:
            node, op_type = found.group("name") or None, found.group("type")
            break
    plain = _SOURCE_LOCATION.sub("", _PREFIX.sub("", text))
    lines = [line.strip() for line in plain.splitlines() if line.strip()]
    reason = " ".join(lines[:3])[:_MAX_REASON] or type(exc).__name__
    return RuntimeFailure(path, stage, reason, node, op_type, subject)


_FATAL_ONLY = 4
"""onnxruntime's log severity that keeps it from writing its errors to stderr itself (they are
raised as exceptions too, which become one ``error:`` line)."""


def quiet_run(ort: Any) -> Any:
    """``RunOptions`` under which onnxruntime logs nothing but fatal errors."""
    options = ort.RunOptions()
    options.log_severity_level = _FATAL_ONLY
    return options


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise GraphToolsError(
            "running ONNX models needs onnxruntime: pip install onnxruntime"
        ) from exc
    return onnxruntime


def _with_outputs(model: Model, names: Sequence[str]) -> Model:
    """``model``, or a copy declaring ``names`` as graph outputs too (to fetch them)."""
    declared = model.predict_net.external_outputs
    extra = [name for name in names if name not in declared]
    if not extra:
        return model
    copy = model.copy()
    copy.predict_net.set_external_outputs([*declared, *extra])
    return copy


def run_model(
    model: Model,
    feeds: Mapping[str, Any],
    outputs: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Run an ONNX-dialect ``model`` on ``feeds``; ``{name: value}`` of ``outputs`` (default:
    the graph outputs; other values of the main graph may be named).

    Feeds the graph does not take are ignored.

    Raises:
        RuntimeFailure: onnxruntime cannot load the model or fails running it.
        SerdeError: the model cannot be written for onnxruntime (an external data file
            cannot be read).
    """
    if model.dialect != ONNX:
        raise GraphToolsError(f"onnxruntime runs ONNX models, not a {model.dialect} model")
    ort = _onnxruntime()
    # a model edited since it was loaded is not the file its path names
    edited = model.predict_path is not None and any(net.revision for net in model.nets())
    subject = "the model (changed in memory since it was read)" if edited else "the model"
    wanted = list(model.predict_net.external_outputs if outputs is None else outputs)
    runnable = _with_outputs(model, wanted)
    options = ort.SessionOptions()
    options.log_severity_level = _FATAL_ONLY  # its errors reach the caller as exceptions
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    missing = missing_required_input(model)
    if missing is not None:  # onnxruntime 1.32 crashes the process on Max(x, "")
        raise RuntimeFailure(model.predict_path, "load", missing, None, None)
    with tempfile.TemporaryDirectory(prefix="graphtools-ort-") as folder:
        source = _source(runnable, Path(folder))
        try:
            session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise runtime_failure(exc, model.predict_path, "load", subject) from exc
        taken = {i.name for i in session.get_inputs()}
        arrays = {name: np.asarray(value) for name, value in feeds.items() if name in taken}
        problem = feed_type_problem(model, arrays)
        if problem is not None:
            raise RuntimeFailure(model.predict_path, "run", problem, None, None)
        try:
            values = session.run(wanted, arrays, quiet_run(ort))
        except Exception as exc:  # onnxruntime raises its own exception types
            raise runtime_failure(exc, model.predict_path, "run", subject) from exc
    return {
        name: _as_array(name, value, model.predict_path)
        for name, value in zip(wanted, values, strict=True)
    }


def feed_type_problem(model: Model, arrays: Mapping[str, np.ndarray]) -> str | None:
    """What is wrong with a feed whose element type is not its input's, naming the input
    (onnxruntime's own message names neither it nor the file); ``None`` when all fit."""
    for spec in graph_inputs(model):
        value = arrays.get(spec.name)
        if value is None or spec.type is None or spec.type.kind != "tensor":
            continue
        wanted = numpy_dtype(spec.type.elem_type)
        if wanted is None or wanted.kind == "O" or value.dtype == wanted:
            continue
        return (
            f"input {spec.name!r} is fed {value.dtype} values, and the model takes {wanted}: "
            "cast the values (or feed the ones it was recorded with)"
        )
    return None


def _as_array(name: str, value: Any, path: Path | None) -> np.ndarray:
    """An output as one array; a sequence of tensors of different shapes has none."""
    try:
        return np.asarray(value)
    except ValueError as exc:  # numpy: "inhomogeneous shape"
        raise RuntimeFailure(
            path,
            "run",
            f"its output {name!r} is a sequence of tensors of different shapes, which "
            "graphtools does not compare or save (choose tensor outputs: the CLI's "
            "--outputs, run_model's outputs=)",
            None,
            None,
        ) from exc


def _source(model: Model, folder: Path) -> bytes | str:
    """What onnxruntime loads: the model's bytes, or the path of a copy written to
    ``folder`` with its external data beside it."""
    if not external_tensors(model):
        data = model_to_onnx_bytes(model)
        if len(data) <= PROTOBUF_LIMIT:
            return data
    path = folder / "model.onnx"
    external = not external_tensors(model)  # only too big: move the weights out
    files = onnx_model_files(model, path, external_data=external)
    for target, _ in files:
        if not target.resolve().is_relative_to(folder.resolve()):
            raise SerdeError(target, "external data would be written outside the model's folder")
    write_onnx_files(files)
    return str(path)


# -- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputSpec:
    """A graph input the model needs fed: its declared type (``None`` when undeclared)."""

    name: str
    type: ValueType | None


def graph_inputs(model: Model) -> list[InputSpec]:
    """The graph inputs that are not initializers (IR 4+ lets an initializer be an input
    whose value a feed may override: it keeps its value here)."""
    net = model.predict_net
    held = net.initializers
    return [
        InputSpec(name, net.types.get(name)) for name in net.external_inputs if name not in held
    ]


def feeds_for(model: Model, feeds: Mapping[str, Any], fed_inputs: Sequence[str]) -> dict[str, Any]:
    """``feeds`` for another model whose inputs are ``fed_inputs``, keyed for ``model``: by
    position when the input names differ but their count does not (inputs renamed, as the
    model's callers still feed them in order), else as they are."""
    inputs = [spec.name for spec in graph_inputs(model)]
    if set(inputs) == set(fed_inputs) or len(inputs) != len(fed_inputs):
        return dict(feeds)
    return {new: feeds[old] for old, new in zip(fed_inputs, inputs, strict=True) if old in feeds}


TRIP_COUNT = 3
"""The value made up for an input a ``Loop`` reads as its trip count."""


def numpy_dtype(elem_type: int) -> np.dtype[Any] | None:
    """The numpy dtype of an ONNX element type (``None`` when numpy has none)."""
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        return None


def seeded_inputs(
    model: Model,
    shapes: Mapping[str, Sequence[int]],
    seed: int,
    *,
    given: Mapping[str, Any] | None = None,
) -> tuple[dict[str, np.ndarray], list[MadeInput]]:
    """Seeded values for the graph inputs, from their declared types; ``shapes`` gives whole
    shapes by input name, ``given`` arrays fed as they are (their shapes checked against the
    declared ones; the element type is checked when the model runs). Floats are standard
    normal, integers 0 or 1 (safe as indices and sizes), booleans either, strings ``"a"``; a
    ``Loop``'s trip count is 3 (with 0 or 1 a body computing from its iteration number is
    never checked past its first).

    Raises:
        GraphToolsError: an input whose type says too little (no element type, an unknown
            rank without ``shapes``) or is not a tensor; ``shapes`` or ``given`` naming a value
            that is not an input the model is fed, or both naming one; a given array whose
            shape is not the declared one.
    """
    given = given or {}
    specs = graph_inputs(model)
    names = [spec.name for spec in specs]
    refuse_unknown_inputs((("a shape is", shapes), ("values are", given)), names, "the model")
    both = [name for name in given if name in shapes]
    if both:
        raise GraphToolsError(f"input {both[0]!r} is given both a shape and values: give one")
    sizes = _symbol_sizes(specs, shapes, given)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    made: list[MadeInput] = []
    counts = {op.inputs[0] for op in model.predict_net if op.type == "Loop" and op.inputs}
    for spec in specs:
        value_type = spec.type
        if spec.name in given:
            value = np.asarray(given[spec.name])
            if value_type is not None and value_type.kind == "tensor":
                _shape(spec.name, value_type, {spec.name: value.shape}, sizes)
            feeds[spec.name] = value
            made.append(MadeInput(spec.name, value.shape, str(value.dtype), "given", "--feeds"))
            continue
        if value_type is None or value_type.kind != "tensor":
            if value_type is None:
                kind = "no declared type"
            else:
                article = "an" if value_type.kind[:1] in ("a", "e", "i", "o", "u") else "a"
                kind = f"{article} {value_type.kind} type"
            raise GraphToolsError(
                f"input {spec.name!r} has {kind}: values cannot be made up for it; feed "
                "recorded data instead (--feeds)"
            )
        dtype = numpy_dtype(value_type.elem_type)
        if dtype is None or value_type.elem_type == 0:
            raise GraphToolsError(
                f"input {spec.name!r} has element type {value_type.elem_type}, which numpy "
                "cannot hold: values cannot be made up for it"
            )
        shape, origin, reason = _shape(spec.name, value_type, shapes, sizes)
        size = math.prod(shape) * max(dtype.itemsize, 1)
        if size > MAX_MADE_BYTES:
            raise GraphToolsError(
                f"input {spec.name!r} would hold {size} bytes ({dtype}[{_dims(shape)}]): too "
                "much to make up; give a smaller shape with --shapes"
            )
        feeds[spec.name] = _values(rng, dtype, shape)
        if spec.name in counts and dtype.kind in "iu":
            feeds[spec.name] = np.full(shape, TRIP_COUNT, dtype)
            reason += f"; {TRIP_COUNT}, a Loop's trip count"
        made.append(MadeInput(spec.name, shape, str(dtype), origin, reason))
    return feeds, made


def _symbol_sizes(
    specs: Sequence[Any], shapes: Mapping[str, Sequence[int]], given: Mapping[str, Any]
) -> dict[str, tuple[int, str]]:
    """``{symbolic dim: (size, the input whose given shape or values say so)}``: an input
    made up takes a size given for the same symbol of another (``a`` and ``b`` both
    ``[N, 4]``, ``--shapes a=5x4``: ``b`` is ``5x4``, not ``1x4``, which a ``Concat`` of the
    two refuses). Two inputs giving one symbol two sizes are refused: the model says they
    are one size."""
    sizes: dict[str, tuple[int, str]] = {}
    for spec in specs:
        declared = spec.type.shape if spec.type is not None else None
        if spec.name in shapes:
            sized = tuple(int(d) for d in shapes[spec.name])
        elif spec.name in given:
            sized = tuple(np.shape(given[spec.name]))
        else:
            continue
        if declared is None or len(declared) != len(sized):
            continue  # the checks of _shape say what is wrong
        for symbol, size in zip(declared, sized, strict=True):
            if not isinstance(symbol, str) or not symbol:
                continue
            known = sizes.setdefault(symbol, (size, spec.name))
            if known[0] != size:
                raise GraphToolsError(
                    f"inputs {known[1]!r} and {spec.name!r} are given {known[0]} and {size} for "
                    f"the dim the model names {symbol!r} in both: give one size"
                )
    return sizes


def _shape(
    name: str,
    value_type: ValueType,
    shapes: Mapping[str, Sequence[int]],
    sizes: Mapping[str, tuple[int, str]],
) -> tuple[tuple[int, ...], str, str]:
    if name in shapes:
        given = tuple(int(d) for d in shapes[name])
        declared = value_type.shape
        if declared is not None:
            if len(declared) != len(given):
                raise GraphToolsError(
                    f"the shape given for input {name!r} has {len(given)} dims; the model declares "
                    f"{len(declared)} ({_dims(declared)})"
                )
            for position, (want, got) in enumerate(zip(declared, given, strict=True)):
                if isinstance(want, int) and want != got:
                    raise GraphToolsError(
                        f"the shape given for input {name!r} has size {got} at dim {position}; the "
                        f"model declares {want} ({_dims(declared)})"
                    )
        return given, "given", "--shapes"
    declared = value_type.shape
    if declared is None:
        raise GraphToolsError(
            f"input {name!r} has no declared shape (unknown rank): give it with --shapes "
            f"{name}=1x3x224x224"
        )
    bound = [(i, d) for i, d in enumerate(declared) if isinstance(d, str) and d in sizes]
    free = [
        (i, d)
        for i, d in enumerate(declared)
        if (not isinstance(d, int) or d < 0) and (i, d) not in bound
    ]
    bound_sizes = {i: sizes[d][0] for i, d in bound}
    shape = tuple(
        d if isinstance(d, int) and d >= 0 else bound_sizes.get(i, 1)
        for i, d in enumerate(declared)
    )
    said = [f"dim {i} ({d!r}) {sizes[d][0]}, as given for {sizes[d][1]!r}" for i, d in bound]
    if free:
        taken = ", ".join(f"dim {i} ({d!r})" if d else f"dim {i} (unknown)" for i, d in free)
        said.append(f"{taken} taken as 1; --shapes {name}=... for others")
    return shape, "declared", "; ".join(said) or "the model's type"


def _dims(shape: Sequence[Any]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def _values(rng: np.random.Generator, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "OUS":
        return np.full(shape, "a", dtype=object)
    return np.zeros(shape, dtype=dtype)

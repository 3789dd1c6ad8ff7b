"""The onnx package's generated node test cases, for every op the importer claims.

For each claimed op, the single-node cases of its module in ``onnx.backend.test.case.node`` are
generated (importing the module runs its exporters), imported, and run by our executor on the
cases' inputs; outputs must equal the cases' reference outputs (dtype and shape included) at
the cases' tolerances. A case the importer refuses must raise ``UnsupportedOpError`` naming the
node and the opset, and the refused cases are listed in ``fixtures/onnx/node_refusals.txt``
(rewrite it with ``--update-goldens`` and review the diff): a case that starts or stops being
refused fails the test. Caffe2 ops whose executor kernels another branch is still writing
would be listed in ``PENDING_KERNELS`` (none now); their cases must fail exactly that way.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from graphtools.errors import GraphToolsError, UnsupportedOpError
from graphtools.executor import run_model
from graphtools.onnx import import_onnx, run_onnxruntime, supported_ops
from graphtools.testing import compare_outputs

REFUSALS = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "node_refusals.txt"

#: Caffe2 op types the importer emits whose executor kernels another branch is writing.
PENDING_KERNELS: dict[str, str] = {}

#: Claimed ops the onnx package generates no node cases for: its random generators, whose
#: outputs are random (tests/test_onnx_export_random.py imports them).
NO_NODE_CASES = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)

_MODULES = {
    "BatchNormalization": "batch_normalization",
    "If": "if_",
    "InstanceNormalization": "instance_normalization",
}


def _cases(op_type: str) -> list:
    from onnx.backend.test.case import node as node_cases

    node_cases._TargetOpType = None
    module = f"onnx.backend.test.case.node.{_MODULES.get(op_type, op_type.lower())}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module(module)
    return [
        case
        for case in node_cases._NodeTestCases
        if len(case.model.graph.node) == 1
        and case.model.graph.node[0].op_type == op_type
        and not case.name.endswith(("_expanded", "_expanded_ver18"))
    ]


def _read_refusals() -> dict[str, str]:
    if not REFUSALS.exists():
        return {}
    entries = {}
    for line in REFUSALS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, reason = line.partition(": ")
            entries[name] = reason
    return entries


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _array(value: object) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def _frozen(model: onnx.ModelProto, names: list[str], inputs: list[object]) -> onnx.ModelProto:
    """``model`` with every graph input but the first turned into an initializer."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    values = dict(zip(names, inputs, strict=False))
    keep = [i for i in frozen.graph.input if i.name == names[0] or i.name not in values]
    for name in names[1:]:
        if name in values:
            frozen.graph.initializer.append(
                onnx.numpy_helper.from_array(_array(values[name]), name)
            )
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    return frozen


def _run_case(case: object, *, onnxruntime_reference: bool = False) -> tuple[str, str]:
    """``("pass" | "refused" | "pending" | "fail", detail)`` for one case.

    ONNX's cases feed operands such as axes, pads, slice bounds and resize scales as graph
    inputs; Caffe2 takes them as arguments, so when the importer refuses a computed operand
    the case is run again with every input but the data frozen into initializers (torch and
    other exporters write them as constants). ``onnxruntime_reference`` compares with
    onnxruntime on the model instead of the case's outputs.
    """
    model = case.model  # type: ignore[attr-defined]
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    for inputs, expected in case.data_sets:  # type: ignore[attr-defined]
        source = model
        try:
            pair = import_onnx(model)
            feeds = dict(zip(names, map(_array, inputs), strict=False))
        except UnsupportedOpError as exc:
            message = str(exc)
            if "opset" not in message:
                return "fail", f"refusal does not name the opset: {message}"
            if "computed at run time" not in message or len(names) < 2:
                return "refused", message
            source = _frozen(model, names, inputs)
            try:
                pair = import_onnx(source)
            except UnsupportedOpError as again:
                return "refused", str(again)
            feeds = {names[0]: _array(inputs[0])}
        try:
            ours = run_model(pair, feeds)
        except UnsupportedOpError as exc:
            missing = [op for op in PENDING_KERNELS if f"op type {op!r}" in str(exc)]
            if missing:
                return "pending", missing[0]
            return "fail", f"executor: {exc}"
        except GraphToolsError as exc:
            return "fail", f"executor: {exc}"
        if onnxruntime_reference:
            try:
                expected = list(run_onnxruntime(source, feeds).values())
            except Exception as exc:  # onnxruntime cannot take some converted cases' types
                return "unrunnable", str(exc)
        reference = {name: _array(v) for name, v in zip(outputs, expected, strict=True)}
        diffs = compare_outputs(
            reference,
            ours,
            rtol=case.rtol,  # type: ignore[attr-defined]
            atol=case.atol,  # type: ignore[attr-defined]
        )
        bad = [d for d in diffs if not d.ok]
        if bad:
            return "fail", "; ".join(
                f"{d.name}: max_abs {d.max_abs:.3g} {d.reason} {d.shape_before}->{d.shape_after}"
                for d in bad
            )
    return "pass", ""


@pytest.fixture(scope="module")
def refusals_seen() -> dict[str, str]:
    return {}


@pytest.mark.parametrize("op_type", sorted(set(supported_ops()) - NO_NODE_CASES))
def test_node_cases(op_type: str, update_goldens: bool) -> None:
    cases = _cases(op_type)
    assert cases, f"no generated node cases for {op_type}"
    results = {case.name: (_opset(case.model), *_run_case(case)) for case in cases}
    failures = [f"{n} (opset {o}): {d}" for n, (o, s, d) in results.items() if s == "fail"]
    assert not failures, "\n".join(failures)
    assert any(s in ("pass", "pending") for _, s, _ in results.values()), (
        f"no {op_type} case passes: {results}"
    )
    refused = {n: d.split(": ", 1)[-1] for n, (_, s, d) in results.items() if s == "refused"}
    recorded = {n: r for n, r in _read_refusals().items() if n in results}
    if update_goldens:
        _write_refusals(op_type, refused)
        return
    assert sorted(refused) == sorted(recorded), (
        f"refused {op_type} cases changed; new: {sorted(set(refused) - set(recorded))}, "
        f"no longer refused: {sorted(set(recorded) - set(refused))}"
    )


OLDER_OPSETS = (7, 9, 11, 13)


@dataclass(frozen=True)
class _Converted:
    name: str
    model: onnx.ModelProto
    data_sets: list
    rtol: float
    atol: float


@pytest.mark.parametrize("op_type", sorted(set(supported_ops()) - NO_NODE_CASES))
def test_node_cases_at_older_opsets(op_type: str) -> None:
    """The same cases converted down to older opsets by ``onnx.version_converter`` (where it
    can), so the converters' older-version paths run; the reference is onnxruntime on the
    converted model (the converter does not always keep semantics, e.g. Softmax before 13)."""
    from onnx import version_converter

    ran: list[str] = []
    failures = []
    for case in _cases(op_type):
        for target in OLDER_OPSETS:
            if target >= _opset(case.model):
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = version_converter.convert_version(case.model, target)
                onnx.checker.check_model(model)
            except Exception:  # the converter has no adapter for this op or version
                continue
            converted = _Converted(case.name, model, case.data_sets, case.rtol, case.atol)
            status, detail = _run_case(converted, onnxruntime_reference=True)
            ran.append(f"{case.name}@{target}: {status}")
            if status == "fail":
                failures.append(f"{case.name} (opset {target}): {detail}")
    assert not failures, "\n".join(failures)
    statuses = {entry.rsplit(": ", 1)[1] for entry in ran}
    assert not ran or statuses & {"pass", "refused", "pending"}, ran


def test_only_the_random_generators_lack_node_cases() -> None:
    assert set(supported_ops()) >= NO_NODE_CASES
    for op_type in NO_NODE_CASES:
        module = f"onnx.backend.test.case.node.{op_type.lower()}"
        assert importlib.util.find_spec(module) is None, f"onnx now has {module}: use it"


def _write_refusals(op_type: str, refused: dict[str, str]) -> None:
    entries = _read_refusals()
    cases = {case.name for case in _cases(op_type)}
    entries = {n: r for n, r in entries.items() if n not in cases}
    entries.update(refused)
    lines = [
        "# Generated node cases the importer refuses (case: reason); tests/test_onnx_node_cases.py"
    ]
    lines += [f"{name}: {reason}" for name, reason in sorted(entries.items())]
    REFUSALS.write_text("\n".join(lines) + "\n")

"""verify's flat-net check: exactly the findings of a plain walk over the ops, in the same order.

``_check_flat_net`` does not build the union of external inputs and init_net outputs and skips
the walk for nets declaring no inputs, and a pass manager's verify reads the findings off the
SSA view instead; these tests hold both to the straightforward algorithm, in both dialects,
with the empty name (no value) among the names.
"""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools._core import CAFFE2, ONNX
from graphtools.ir import Model, Net, Op
from graphtools.serde.codec import model_from_netdefs
from graphtools.values import ArrayTensor
from graphtools.wellformed import MISSING_OUTPUT, REWRITTEN_VALUE, UNDEFINED_BLOB, Finding, verify

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)

_INIT_NOTE = " nor an init_net output"

Key = tuple[str, str, int | None, str | None, str, bool]


def _note_writes(
    op: Op, index: int, path: str, onnx: bool, written: set[str], held: set[str], into: list[Key]
) -> None:
    """Add ``op``'s outputs to ``written`` (the empty name writes nothing); in ONNX, a value
    written already or held by the graph is a rewritten-value key, appended ``into``."""
    for name in op.outputs:
        if not name:
            continue
        if onnx and (name in written or name in held):
            into.append((REWRITTEN_VALUE, path, index, op.type, name, False))
        written.add(name)


def _reference(net: Net, path: str, outer: set[str]) -> tuple[list[Key], set[str]]:
    """The plain walk: each read neither written before nor defined, then missing outputs,
    then (ONNX) values written twice.

    A Caffe2 net declaring no external inputs declares every blob it reads; an ONNX graph
    declares only its inputs. The empty name is no value (``NO_VALUE``): reading it reads
    nothing, an op listing it writes nothing, and an external output so named is never
    produced. A key ends with whether the message should mention the init_net (exactly when
    init_net outputs are in scope).
    """
    onnx = net.dialect == ONNX
    declares = bool(net.external_inputs) or onnx
    held = (set(net.external_inputs) | set(net.initializers)) - {""}
    defined = held | outer
    written: set[str] = set()
    read: set[str] = set()
    keys: list[Key] = []
    rewrites: list[Key] = []
    for index, op in enumerate(net):
        for name in op.inputs:
            if not name:
                continue
            if declares and name not in written and name not in defined:
                keys.append((UNDEFINED_BLOB, path, index, op.type, name, False))
            read.add(name)
        _note_writes(op, index, path, onnx, written, held, rewrites)
    keys = [(*key[:5], bool(outer)) for key in keys]
    for name in net.external_outputs:
        if name not in written and name not in defined and (declares or name not in read):
            keys.append((MISSING_OUTPUT, path, None, None, name, bool(outer)))
    return keys + rewrites, written


def _reference_model(model: Model) -> list[Key]:
    keys: list[Key] = []
    init_outputs: set[str] = set()
    if model.init_net is not None:
        keys, init_outputs = _reference(model.init_net, "init_net", set())
    return keys + _reference(model.predict_net, "predict_net", init_outputs)[0]


def _keys(findings: list[Finding]) -> list[Key]:
    return [
        (f.kind, f.net, f.op_index, f.op_type, f.blob, _INIT_NOTE in f.message) for f in findings
    ]


# A small pool makes in-place ops, repeated reads and outputs listed twice common; "ghost" and
# "phantom" are only ever declared, never read or written by an op.
_NAMES = st.sampled_from(["a", "b", "c", "d", "e", "w", "x", ""])
_DECLARED = st.sampled_from(["a", "b", "c", "d", "e", "w", "x", "", "ghost", "phantom"])


@st.composite
def _ops(draw: st.DrawFn, max_ops: int = 8) -> list[Op]:
    ops = []
    for _ in range(draw(st.integers(0, max_ops))):
        inputs = draw(st.lists(_NAMES, max_size=3))
        outputs = draw(st.lists(_NAMES, max_size=2))
        if inputs and draw(st.booleans()):
            outputs = [inputs[0], *outputs]  # in place
        if inputs and draw(st.booleans()):
            inputs = [*inputs, inputs[-1]]  # the same blob read twice
        if outputs and draw(st.booleans()):
            outputs = [*outputs, outputs[0]]  # the same blob listed twice
        ops.append(Op(draw(st.sampled_from(["Relu", "Add", "Copy"])), inputs, outputs))
    return ops


@st.composite
def _flat_nets(draw: st.DrawFn, dialects: tuple[str, ...] = (CAFFE2,)) -> Net:
    external_inputs = draw(st.one_of(st.just([]), st.lists(_DECLARED, min_size=1, max_size=4)))
    external_outputs = draw(st.lists(_DECLARED, max_size=4))
    dialect = draw(st.sampled_from(dialects))
    initializers = {}
    if dialect == ONNX:  # constants the graph holds: defined, and never to be written
        held = draw(st.lists(_NAMES.filter(bool), max_size=2, unique=True))
        initializers = {name: ArrayTensor(np.zeros(1, np.float32)) for name in held}
    return Net(
        draw(_ops()), external_inputs, external_outputs, dialect=dialect, initializers=initializers
    )


@st.composite
def _fill_nets(draw: st.DrawFn) -> Net:
    """init_nets as exporters write them: ops without inputs, external_output listing their
    outputs in order (verify answers these without building the set of outputs)."""
    outputs = draw(st.lists(st.lists(_NAMES, max_size=2), max_size=5))
    ops = [Op("GivenTensorFill", [], names) for names in outputs]
    return Net(ops, [], [name for names in outputs for name in names])


_INIT_NETS = st.one_of(st.none(), _flat_nets(), _fill_nets())


@settings(max_examples=400, deadline=None)
@given(_flat_nets())
def test_flat_net_findings_match_the_plain_walk(net: Net) -> None:
    assert _keys(verify(net)) == _reference(net, "net", set())[0]


@settings(max_examples=400, deadline=None)
@given(_flat_nets(), _INIT_NETS)
def test_model_findings_match_the_plain_walk(predict: Net, init: Net | None) -> None:
    model = Model(predict, init)
    assert _keys(verify(model)) == _reference_model(model)


@settings(max_examples=400, deadline=None)
@given(_flat_nets(dialects=(ONNX,)))
def test_onnx_graph_findings_match_the_plain_walk(net: Net) -> None:
    assert _keys(verify(Model(net))) == _reference(net, "predict_net", set())[0]


@settings(max_examples=400, deadline=None)
@given(_flat_nets(dialects=(CAFFE2, ONNX)), st.booleans())
def test_onnx_and_caffe2_findings_from_the_ssa_view_match_the_plain_walk(
    predict: Net, derived: bool
) -> None:
    predict.ssa()
    if derived and len(predict):
        predict.remove_ops([len(predict) - 1])
    assert predict.ssa_is_cheap()
    assert _keys(verify(Model(predict))) == _reference(predict, "predict_net", set())[0]


@settings(max_examples=400, deadline=None)
@given(_flat_nets(), _INIT_NETS, st.booleans())
def test_findings_from_the_ssa_view_match_the_plain_walk(
    predict: Net, init: Net | None, derived: bool
) -> None:
    # In a pipeline the predict_net's view is current (or derived from an edit), and verify
    # reads the findings off it instead of walking the ops.
    predict.ssa()
    if derived and len(predict):
        predict.remove_ops([len(predict) - 1])
    assert predict.ssa_is_cheap()
    model = Model(predict, init)
    assert _keys(verify(model)) == _reference_model(model)


def test_read_before_write_in_the_same_op_is_undefined() -> None:
    net = Net([Op("Relu", ["x"], ["a"]), Op("Add", ["t", "a", "t"], ["t"])], ["x"], ["t"])
    assert [(f.kind, f.op_index, f.blob) for f in verify(net)] == [
        (UNDEFINED_BLOB, 1, "t"),
        (UNDEFINED_BLOB, 1, "t"),
    ]


def test_blob_written_then_read_is_fine() -> None:
    net = Net(
        [Op("Relu", ["x"], ["a"]), Op("Relu", ["a"], ["a"]), Op("Add", ["a", "a"], ["y"])],
        ["x"],
        ["y", "a"],
    )
    assert verify(net) == []


def test_external_input_the_init_net_does_not_produce_is_declared() -> None:
    # With an init_net, reads are checked against its outputs first and the external inputs last.
    init = Net([Op("GivenTensorFill", [], ["w"])], [], ["w"])
    predict = Net(
        [Op("FC", ["data", "w", "b"], ["y"]), Op("Relu", ["late"], ["late"])],
        ["data"],
        ["y", "data", "ghost"],
    )
    findings = verify(Model(predict, init))
    assert [(f.kind, f.op_index, f.blob) for f in findings] == [
        (UNDEFINED_BLOB, 0, "b"),
        (UNDEFINED_BLOB, 1, "late"),
        (MISSING_OUTPUT, None, "ghost"),
    ]
    assert str(findings[0]) == (
        "predict_net op[0:FC]: reads 'b', which no earlier op writes and which is not an "
        "external input nor an init_net output; declare it in external_input or produce it "
        "before this op [undefined-blob]"
    )


def test_implicit_net_output_that_is_only_read_is_declared() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Relu", ["y"], ["z"])], [], ["x", "y", "ghost"])
    assert [(f.kind, f.blob) for f in verify(net)] == [(MISSING_OUTPUT, "ghost")]
    model = Model(net.copy(), Net([Op("GivenTensorFill", [], ["ghost"])]))
    assert verify(model) == []


def _broken(net: Net) -> Net:
    """``net`` with a few reads moved before their writes and an output never produced."""
    ops = list(net)
    for index in (3, len(ops) // 2, len(ops) - 1):
        op = ops[index]
        ops[index] = op.replace(inputs=[*op.inputs, f"undeclared_{index}", *op.outputs])
    return Net(ops, net.external_inputs, [*net.external_outputs, "never_made"])


def test_synthetic_benchmark_pair_matches_the_plain_walk() -> None:
    predict_def, init_def = synth.make_synthetic_pair(2000, seed=5)
    model = model_from_netdefs(predict_def, init_def)
    assert not model.predict_net.nested_op_indices()  # the flat path
    assert verify(model) == [] == _reference_model(model)
    broken = Model(_broken(model.predict_net), model.init_net)
    keys = _reference_model(broken)
    assert len(keys) >= 4
    assert _keys(verify(broken)) == keys
    alone = _broken(model.predict_net)
    assert _keys(verify(alone)) == _reference(alone, "net", set())[0]


# -- nets holding nets -----------------------------------------------------------------------


def _nested_reference(
    net: Net, path: str, outer: set[str], visible: Callable[[str], bool], keys: list[Key]
) -> set[str]:
    """The module docstring's rules over a net that holds nets: a nested net held by op ``i``
    sees what its enclosing net sees just before op ``i``; a Caffe2 nested net's writes count
    as op ``i``'s, an ONNX sub-graph's stay its own. Appends the findings in op order (a
    net's missing outputs after its ops); returns the blobs ``net`` writes."""
    onnx = net.dialect == ONNX
    implicit = not net.external_inputs and not onnx
    held = (set(net.external_inputs) | set(net.initializers)) - {""}
    defined = held | outer
    written: set[str] = set()
    read: set[str] = set()
    for index, op in enumerate(net):
        for name in op.inputs:
            if not name:
                continue
            if implicit:
                read.add(name)
            elif not (name in written or name in defined or visible(name)):
                keys.append((UNDEFINED_BLOB, path, index, op.type, name, bool(outer)))
        before = set(written)

        def sees(name: str, before: set[str] = before) -> bool:
            return implicit or name in before or name in defined or visible(name)

        nested_writes: set[str] = set()
        labels = Counter(label for label, _ in op.nested_nets())
        seen: Counter[str | None] = Counter()
        for label, nested in op.nested_nets():
            shown = label or "arg"
            if labels[label] > 1:
                shown, seen[label] = f"{shown}[{seen[label]}]", seen[label] + 1
            inner = _nested_reference(
                nested, f"{path}/op[{index}:{op.type}]/{shown}", set(), sees, keys
            )
            if nested.dialect != ONNX:
                nested_writes |= inner
        written |= nested_writes
        _note_writes(op, index, path, onnx, written, held, keys)
    for name in net.external_outputs:
        if name and (name in written or name in defined or name in read or visible(name)):
            continue
        keys.append((MISSING_OUTPUT, path, None, None, name, bool(outer)))
    return written


_POOL = ["a", "b", "c", "w", ""]


def _random_net(rng: random.Random, dialect: str, depth: int = 0) -> Net:
    """A small net of ``dialect`` whose ops may hold nets (If's branches; ONNX's Loop body)."""

    def names(most: int) -> list[str]:
        return [rng.choice(_POOL) for _ in range(rng.randint(0, most))]

    ops = []
    for _ in range(rng.randint(0, 5)):
        if depth < 2 and rng.random() < 0.25:
            if dialect == CAFFE2:
                branches = {"then_net": _random_net(rng, dialect, depth + 1)}
                if rng.random() < 0.5:
                    branches["else_net"] = _random_net(rng, dialect, depth + 1)
                ops.append(Op("If", names(1), names(2), args=branches))
            elif rng.random() < 0.5:
                branches = {
                    "then_branch": _random_net(rng, dialect, depth + 1),
                    "else_branch": _random_net(rng, dialect, depth + 1),
                }
                ops.append(Op("If", names(1), names(2), args=branches))
            else:
                body = {"body": _random_net(rng, dialect, depth + 1)}
                ops.append(Op("Loop", names(2), names(2), args=body))
        else:
            ops.append(Op(rng.choice(["Relu", "Add"]), names(3), names(2)))
    initializers = {}
    if dialect == ONNX and rng.random() < 0.4:
        held = {name for name in names(2) if name}
        initializers = {name: ArrayTensor(np.zeros(1, np.float32)) for name in held}
    inputs = [] if rng.random() < 0.4 else names(3)
    return Net(ops, inputs, names(3), dialect=dialect, initializers=initializers)


@pytest.mark.parametrize("dialect", [CAFFE2, ONNX])
def test_nets_holding_nets_match_the_scoping_rules(dialect: str) -> None:
    """verify's walk of nested nets (If, Loop, with the empty name among the names) against
    the rules as the module docstring states them, over 1,500 random nets per dialect."""
    rng = random.Random(2026)
    checked = 0
    for _ in range(1500):
        net = _random_net(rng, dialect)
        if not net.nested_op_indices():
            continue  # the flat path: the tests above
        keys: list[Key] = []
        _nested_reference(net, "net", set(), lambda name: False, keys)
        assert _keys(verify(net)) == keys, net
        checked += 1
    assert checked > 300


def test_init_nets_holding_nets_define_what_they_write() -> None:
    """An init_net's writes (its nested nets' included, the empty name never) count as
    defined for the predict_net, whichever path checks either net."""
    rng = random.Random(7)
    checked = 0
    for _ in range(1500):
        init, predict = _random_net(rng, CAFFE2), _random_net(rng, CAFFE2)
        if not init.nested_op_indices():
            continue
        keys: list[Key] = []
        written = _nested_reference(init, "init_net", set(), lambda name: False, keys)
        _nested_reference(predict, "predict_net", written, lambda name: False, keys)
        assert _keys(verify(Model(predict, init))) == keys, (init, predict)
        checked += 1
    assert checked > 300

"""verify's flat-net check: exactly the findings of a plain walk over the ops, in the same order.

``_check_flat_net`` does not build the union of external inputs and init_net outputs and skips
the walk for nets declaring no inputs, and a pass manager's verify reads the findings off the
SSA view instead; these tests hold both to the straightforward algorithm, in both dialects,
with the empty name (no value) among the names.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools._core import CAFFE2, ONNX
from graphtools.ir import Model, Net, Op
from graphtools.serde.codec import model_from_netdefs
from graphtools.verify import MISSING_OUTPUT, REWRITTEN_VALUE, UNDEFINED_BLOB, Finding, verify

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)

_INIT_NOTE = " nor an init_net output"

Key = tuple[str, str, int | None, str | None, str, bool]


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
    defined = set(net.external_inputs) | outer
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
        for name in op.outputs:
            if not name:
                continue
            if onnx and (name in written or name in net.external_inputs):
                rewrites.append((REWRITTEN_VALUE, path, index, op.type, name, False))
            written.add(name)
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
    return Net(draw(_ops()), external_inputs, external_outputs, dialect=dialect)


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

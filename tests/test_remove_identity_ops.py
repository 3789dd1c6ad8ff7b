"""remove-identity-ops: every value read stays the same, the interface keeps its names, and
the analysis never proposes an edit the rewriter refuses (which would fail the pass)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.analysis.identities import find_identity_ops
from graphtools.dialects.caffe2 import CAFFE2_TABLE
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import DEFAULT_PIPELINE
from graphtools.passes.remove_identity_ops import RemoveIdentityOps
from graphtools.ssa_view import SSAView

NAMES = ["a", "b", "c", "d"]
PASS_THROUGH = {"Identity", "Alias", "AliasWithName"}


@st.composite
def identity_nets(draw: st.DrawFn) -> Net:
    ops = []
    for index in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["Identity", "Alias", "Dropout", "F", "G"]))
        if kind == "Dropout":
            outputs = [draw(st.sampled_from(NAMES))]
            if draw(st.booleans()):
                outputs.append(draw(st.sampled_from(NAMES)))
            op = Op(kind, [draw(st.sampled_from(NAMES))], outputs, args={"is_test": 1})
        elif kind in PASS_THROUGH:
            op = Op(kind, [draw(st.sampled_from(NAMES))], [draw(st.sampled_from(NAMES))])
        else:
            inputs = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2))
            op = Op(kind, inputs, [draw(st.sampled_from(NAMES))])
        ops.append(op.replace(name=f"op{index}"))
    inputs = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    outputs = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))
    return Net(ops, inputs, outputs)


def _values(net: Net) -> tuple[list[Any], dict[str, list[Any]]]:
    """Symbolic run: identities pass their input through; the final output values and what
    each surviving named op read."""
    values: dict[str, Any] = {}
    reads: dict[str, list[Any]] = {}
    for op in net:
        args = [values.get(name, ("in", name)) for name in op.inputs]
        reads[op.name or ""] = args
        for slot, name in enumerate(op.outputs):
            through = op.type in PASS_THROUGH or (op.type == "Dropout" and slot == 0)
            values[name] = args[0] if through else (op.name, slot, *args)
    return [values.get(name, ("in", name)) for name in net.external_outputs], reads


@settings(max_examples=300, deadline=None)
@given(identity_nets())
def test_values_interface_and_fixpoint(net: Net) -> None:
    _check_values_interface_and_fixpoint(net)


def _check_values_interface_and_fixpoint(net: Net) -> None:
    outputs, reads = _values(net)
    interface = (list(net.external_inputs), list(net.external_outputs))
    model = Model(net)
    for _ in range(len(net) + 1):  # to the fixpoint: a removal can unblock another
        ops_before = len(model.predict_net)
        result = RemoveIdentityOps()(model)  # never refused: the analysis only proposes safe edits
        after_outputs, after_reads = _values(model.predict_net)
        assert after_outputs == outputs
        assert (list(net.external_inputs), list(net.external_outputs)) == interface
        for name, values in after_reads.items():
            assert values == reads[name]
        assert result.stats["ops_removed"] == ops_before - len(model.predict_net)
        if not result.modified:
            break
    assert not find_identity_ops(
        model.predict_net,
        CAFFE2_TABLE.identity_types(),
        lambda op: CAFFE2_TABLE.passes_through(op, model.predict_net),
        shares_storage=CAFFE2_TABLE.shares_storage,
    ).removed


def test_a_real_run_gives_the_same_outputs() -> None:
    net = Net(
        [
            Op("FC", ["x", "w", "b"], ["h"]),
            Op("Dropout", ["h"], ["d", "mask"], args={"is_test": 1, "ratio": 0.3}),
            Op("Relu", ["d"], ["r"]),
            Op("Alias", ["r"], ["y"]),
        ],
        ["x", "w", "b"],
        ["y"],
    )
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 4)), "w": rng.standard_normal((3, 4)), "b": np.ones(3)}
    model = Model(net)
    before = run_model(model.copy(), feeds)
    assert RemoveIdentityOps()(model).stats == {"ops_removed": 2, "values_renamed": 1}
    assert [op.type for op in model.predict_net] == ["FC", "Relu"]
    np.testing.assert_array_equal(run_model(model, feeds)["y"], before["y"])


def test_the_default_pipeline_removes_identities() -> None:
    assert DEFAULT_PIPELINE.split(",")[0] == "remove-identity-ops"


@st.composite
def mostly_ssa_nets(draw: st.DrawFn) -> Net:
    """Nets as exporters write them, each value a new name, with now and then a name written
    again: chains of identities, unread and read dropout masks, external outputs."""
    written: list[str] = []
    ops = []
    for index in range(draw(st.integers(1, 14))):
        readable = ["x", *written]
        kind = draw(st.sampled_from(["Identity", "Alias", "Dropout", "F", "F"]))
        reuse = written and draw(st.integers(0, 6)) == 0
        outputs = [draw(st.sampled_from(written)) if reuse else f"v{index}"]
        if kind == "F":
            inputs = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=2))
            op = Op(kind, inputs, outputs)
        else:
            if kind == "Dropout" and draw(st.booleans()):
                outputs.append(f"mask{index}")
            args = {"is_test": 1} if kind == "Dropout" else {}
            op = Op(kind, [draw(st.sampled_from(readable))], outputs, args=args)
        written.extend(name for name in op.outputs if name not in written)
        ops.append(op.replace(name=f"op{index}"))
    outputs = draw(st.lists(st.sampled_from(written), min_size=1, max_size=3, unique=True))
    return Net(ops, ["x"], outputs)


def _found(net: Net) -> Any:
    return find_identity_ops(
        net,
        CAFFE2_TABLE.identity_types(),
        lambda op: CAFFE2_TABLE.passes_through(op, net),
        shares_storage=CAFFE2_TABLE.shares_storage,
    )


@settings(max_examples=300, deadline=None)
@given(mostly_ssa_nets())
def test_plain_identities_are_dropped_as_the_full_checks_would(net: Net) -> None:
    """The fast path for plain identities (the common case of an export) changes nothing:
    forcing every identity through the one-by-one checks finds the very same removal."""
    fast = _found(net)
    with pytest.MonkeyPatch.context() as patch:
        keys = SSAView.pass_through_keys

        def nothing_plain(view: SSAView, indices: Any) -> Any:
            reads, outputs, plain = keys(view, indices)
            return reads, outputs, [False] * len(plain)

        patch.setattr(SSAView, "pass_through_keys", nothing_plain)
        checked = _found(net.copy())
    assert fast == checked
    _check_values_interface_and_fixpoint(net)


def test_a_net_declaring_no_outputs_keeps_the_identities_writing_what_it_is_fetched_from() -> None:
    """Its users fetch the blobs it never reads (verify compares those): a trailing Identity
    or test-mode Dropout writes one; an Identity in the middle still goes."""
    net = Net(
        [
            Op("Relu", ["x"], ["a"]),
            Op("Identity", ["a"], ["b"]),
            Op("Sigmoid", ["b"], ["c"]),
            Op("Dropout", ["c"], ["out", "mask"], args={"is_test": 1}),
        ],
        ["x"],
        [],
    )
    model = Model(net)
    assert RemoveIdentityOps()(model).modified
    assert [op.type for op in model.predict_net] == ["Relu", "Sigmoid", "Dropout"]
    assert model.predict_net[1].inputs == ("a",)
    assert model.predict_net[2].outputs == ("out", "mask")


def test_an_alias_whose_names_are_written_after_it_stays() -> None:
    """Caffe2's Alias shares its input's storage: after ``Relu(a) -> a`` in place, ``x`` holds
    the Relu's values too, so dropping the Alias (Add then reads the x it had) changes ``y``.
    An alias whose names nobody writes again goes, as an Identity does."""
    shared = Net(
        [
            Op("Alias", ["x"], ["a"]),
            Op("Relu", ["a"], ["a"]),
            Op("Add", ["x", "a"], ["y"]),
        ],
        ["x"],
        ["y"],
    )
    for net in (shared, shared.copy()):
        model = Model(net)
        result = RemoveIdentityOps()(model)
        assert not result.modified and model.predict_net[0].type == "Alias"
    written_input = Net(
        [Op("AliasWithName", ["x"], ["a"]), Op("Relu", ["x"], ["x"]), Op("Add", ["x", "a"], ["y"])],
        ["x"],
        ["y"],
    )
    assert not RemoveIdentityOps()(Model(written_input)).modified
    plain = Net([Op("Alias", ["x"], ["a"]), Op("Relu", ["a"], ["y"])], ["x"], ["y"])
    model = Model(plain)
    assert RemoveIdentityOps()(model).stats["ops_removed"] == 1
    assert [(op.type, op.inputs) for op in model.predict_net] == [("Relu", ("x",))]

"""verify: undefined reads, outputs never produced, implicit inputs, init outputs, nested nets."""

from __future__ import annotations

import dataclasses

import pytest

from graphtools.ir import Model, Net, Op
from graphtools.wellformed import MISSING_OUTPUT, UNDEFINED_BLOB, Finding, verify


def test_well_formed_net_has_no_findings() -> None:
    net = Net([Op("Relu", ["x"], ["y"]), Op("Relu", ["y"], ["y"])], ["x"], ["y"])
    assert verify(net) == []


def test_undefined_read_names_net_op_and_blob() -> None:
    net = Net([Op("Relu", ["x"], ["a"]), Op("Add", ["a", "w"], ["y"])], ["x"], ["y"])
    [finding] = verify(Model(net))
    assert finding.kind == UNDEFINED_BLOB
    assert (finding.net, finding.op_index, finding.op_type, finding.blob) == (
        "predict_net",
        1,
        "Add",
        "w",
    )
    text = str(finding)
    assert text.startswith("predict_net op[1:Add]: reads 'w'")
    assert UNDEFINED_BLOB in text


def test_read_before_a_later_write_is_undefined() -> None:
    net = Net([Op("Relu", ["a"], ["y"]), Op("Relu", ["x"], ["a"])], ["x"], ["y"])
    assert [(f.kind, f.op_index, f.blob) for f in verify(net)] == [(UNDEFINED_BLOB, 0, "a")]


def test_in_place_op_reads_before_it_writes() -> None:
    net = Net([Op("Relu", ["t"], ["t"])], ["x"], ["t"])
    assert [(f.kind, f.blob) for f in verify(net)] == [(UNDEFINED_BLOB, "t")]


def test_net_without_external_inputs_declares_them_implicitly() -> None:
    net = Net([Op("Add", ["a", "b"], ["y"])], [], ["y"])
    assert verify(net) == []


def test_init_net_outputs_count_as_defined_for_predict_net() -> None:
    init = Net([Op("GivenTensorFill", [], ["w"])])
    predict = Net([Op("FC", ["x", "w"], ["y"])], ["x"], ["y", "w"])
    assert verify(Model(predict, init)) == []
    assert [f.blob for f in verify(Model(predict))] == ["w", "w"]


def test_missing_output_kinds() -> None:
    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y", "x", "ghost"])
    [finding] = verify(net)
    assert (finding.kind, finding.net, finding.op_index, finding.blob) == (
        MISSING_OUTPUT,
        "net",
        None,
        "ghost",
    )
    assert str(finding).startswith("net: external output 'ghost' is never produced")


def test_missing_output_in_implicit_net() -> None:
    # An implicitly declared input may be an output; a name nothing mentions may not.
    net = Net([Op("Relu", ["x"], ["y"])], [], ["x", "ghost"])
    assert [(f.kind, f.blob) for f in verify(net)] == [(MISSING_OUTPUT, "ghost")]


def test_init_net_is_checked_too() -> None:
    init = Net([Op("Copy", ["a"], ["w"])], ["b"], [])
    model = Model(Net([Op("Relu", ["w"], ["y"])], ["x"], ["y"]), init)
    [finding] = verify(model)
    assert (finding.net, finding.blob) == ("init_net", "a")


def _if(then_net: Net, else_net: Net | None = None) -> Op:
    args = (
        {"then_net": then_net} if else_net is None else {"then_net": then_net, "else_net": else_net}
    )
    return Op("If", ["cond"], [], args=args)


def test_nested_net_sees_enclosing_blobs_written_before_the_op() -> None:
    then_net = Net([Op("Add", ["a", "b"], ["y"])], ["a"], ["y"])
    net = Net(
        [Op("Relu", ["x"], ["b"]), _if(then_net), Op("Relu", ["x"], ["late"])],
        ["x", "cond"],
        ["y"],
    )
    assert verify(net) == []


def test_nested_net_findings_carry_their_path() -> None:
    then_net = Net([Op("Add", ["a", "late"], ["z"])], ["a"], ["z", "nowhere"])
    net = Net([_if(then_net), Op("Relu", ["x"], ["late"])], ["x", "cond"], ["late"])
    findings = verify(Model(net))
    assert [(f.kind, f.net, f.op_index, f.op_type, f.blob) for f in findings] == [
        (UNDEFINED_BLOB, "predict_net/op[0:If]/then_net", 0, "Add", "late"),
        (MISSING_OUTPUT, "predict_net/op[0:If]/then_net", None, None, "nowhere"),
    ]


def test_nested_net_without_external_inputs_is_implicit() -> None:
    then_net = Net([Op("Add", ["anything", "else"], ["z"])])
    net = Net([_if(then_net)], ["cond"], [])
    assert verify(net) == []


def test_nested_nets_of_an_implicit_net_see_everything() -> None:
    then_net = Net([Op("Relu", ["anything"], ["z"])], ["a"], ["z"])
    net = Net([_if(then_net)], [], [])
    assert verify(net) == []


def test_several_nets_in_one_argument_are_numbered() -> None:
    step = Net([Op("Relu", ["undefined"], ["z"])], ["a"], [])
    op = Op("Loop", ["x"], ["y"], args={"nets": [step, step.copy()]})
    net = Net([op], ["x"], ["y"])
    assert [f.net for f in verify(net)] == ["net/op[0:Loop]/nets[0]", "net/op[0:Loop]/nets[1]"]


def test_finding_is_frozen() -> None:
    finding = Finding(UNDEFINED_BLOB, "net", 0, "Relu", "x", "reads 'x'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.blob = "y"  # type: ignore[misc]


def test_blobs_written_in_a_nested_net_count_as_written_by_its_op() -> None:
    # Exported If ops often list no outputs although their branches write enclosing blobs.
    then_net = Net([Op("Relu", ["x"], ["mask"])], ["x"], [])
    net = Net([_if(then_net), Op("Sigmoid", ["mask"], ["probs"])], ["x", "cond"], ["probs", "mask"])
    assert verify(net) == []
    early = Net([Op("Sigmoid", ["mask"], ["probs"]), _if(then_net.copy())], ["x", "cond"], [])
    assert [(f.op_index, f.blob) for f in verify(early)] == [(0, "mask")]


def test_sibling_nested_nets_do_not_see_each_others_writes() -> None:
    then_net = Net([Op("Relu", ["x"], ["only_then"])], ["x"], ["only_then"])
    else_net = Net([Op("Relu", ["only_then"], ["y"])], ["x"], ["y"])
    outer = Net(
        [Op("If", ["c", "x"], [], args={"then_net": then_net, "else_net": else_net})],
        ["c", "x"],
        [],
    )
    assert [(f.kind, f.blob) for f in verify(outer)] == [("undefined-blob", "only_then")]


def test_verify_does_not_reuse_findings_for_a_swapped_init_net() -> None:
    predict = Net([Op("FC", ["data", "w"], ["y"])], ["data"], ["y"])
    model = Model(predict, Net([Op("GivenTensorFill", [], ["w"])], [], ["w"]))
    assert verify(model) == []
    model.init_net = Net([Op("GivenTensorFill", [], ["other"])], [], ["other"])
    assert [f.blob for f in verify(model)] == ["w"]


def test_nested_writes_of_the_init_net_count_as_init_outputs() -> None:
    fill = Net([Op("GivenTensorFill", [], ["w"])], [], ["w"])
    init = Net([Op("If", ["c"], [], args={"then_net": fill})], [], [])
    predict = Net([Op("FC", ["data", "w"], ["y"])], ["data"], ["y"])
    assert [f.blob for f in verify(Model(predict, init))] == []

"""Shape inference through control flow (``shape_rules_control``): If branches that disagree,
blobs nested nets write besides the op's outputs, While loops to a fixed point, Do bindings
and workspace locals, nets built by Caffe2's builders, a training net with gradient If/Do
ops, and Mask R-CNN2Go's real If. Every inferred type is checked against executor runs: equal
where complete, and never contradicting the real value where incomplete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphtools.analysis.shapes import ShapeInfo, TensorType, infer_shapes
from graphtools.errors import InvalidNetError
from graphtools.executor import Int8Tensor, Workspace, run_net
from graphtools.gradients import add_gradient_operators, add_if_op, add_while_op
from graphtools.ir import Net, Op
from graphtools.serde import load_model
from graphtools.testing import random_params

RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def type_of(value: Any) -> TensorType:
    if isinstance(value, Int8Tensor):
        return TensorType(value.values.dtype, value.values.shape, quantized=True)
    array = np.asarray(value)
    return TensorType(array.dtype, array.shape)


def fits(inferred: TensorType, actual: TensorType) -> bool:
    """Whether ``actual`` is one of the values ``inferred`` allows (a symbol allows any size)."""
    if inferred.dtype is not None and inferred.dtype != actual.dtype:
        return False
    if inferred.shape is None or actual.shape is None:
        return True
    return len(inferred.shape) == len(actual.shape) and all(
        d is None or isinstance(d, str) or d == a
        for d, a in zip(inferred.shape, actual.shape, strict=True)
    )


def run(net: Net, feeds: dict[str, Any]) -> Workspace:
    ws = Workspace(seed=0)
    for name, value in feeds.items():
        ws.feed(name, value)
    run_net(net, ws)
    return ws


def check_against_run(net: Net, feeds: dict[str, Any], info: ShapeInfo) -> None:
    """Every blob the run left at the top level has the inferred final type (or fits it)."""
    ws = run(net, feeds)
    for name in ws.local_blobs():
        if name not in info.versions:
            continue
        inferred, actual = info.final(name), type_of(ws.fetch(name))
        if inferred.complete:
            assert inferred == actual, (name, str(inferred), str(actual))
        else:
            assert fits(inferred, actual), (name, str(inferred), str(actual), info.why(name))


def infer_and_check(net: Net, runs: list[dict[str, Any]]) -> ShapeInfo:
    info = infer_shapes(net, {name: type_of(value) for name, value in runs[0].items()})
    for feeds in runs:
        check_against_run(net, feeds, info)
    return info


def test_if_branches_that_disagree_give_what_they_share_and_why() -> None:
    then = Net([Op("Relu", ["x"], ["y"]), Op("Copy", ["x"], ["k"])], name="then")
    other = Net([Op("Relu", ["z"], ["y"]), Op("Cast", ["x"], ["k"], args={"to": 10})], name="else")
    net = Net([Op("If", ["c", "x", "z"], ["y", "k"], args={"then_net": then, "else_net": other})])
    feeds = {"c": np.array([True]), "x": f32(2, 3), "z": f32(4, 3)}
    info = infer_and_check(net, [feeds, {**feeds, "c": np.array([False])}])
    assert info.final("y") == TensorType(np.float32, (None, 3))
    assert "the branches give float32[2, 3] and float32[4, 3]" in str(info.why("y"))
    assert info.final("k") == TensorType(None, (2, 3))
    assert "op #0 (If)" in str(info.why("k"))


def test_if_whose_branches_agree_on_symbolic_types_gives_that_type() -> None:
    then = Net([Op("Relu", ["x"], ["y"])])
    other = Net([Op("Sigmoid", ["x"], ["y"])])
    net = Net([Op("If", ["c", "x"], ["y"], args={"then_net": then, "else_net": other})])
    info = infer_shapes(net, {"c": TensorType(np.bool_, (1,)), "x": ("batch", 3)})
    assert info.final("y") == TensorType(np.float32, ("batch", 3)) and info.why("y") is None


def test_if_writes_blobs_that_are_not_its_outputs() -> None:
    """As Mask R-CNN2Go's If does: no outputs; the branch writes a new blob and rescales
    another in place; the blob whose shape a branch changes keeps what both share."""
    then = Net(
        [
            Op("Relu", ["x"], ["m"]),
            Op("Scale", ["b"], ["b"], args={"scale": 2.0}),
            Op("Concat", ["g", "g"], ["g", "split"], args={"axis": 0}),
        ],
        name="then",
    )
    net = Net([Op("If", ["c"], [], args={"then_net": then}), Op("Sigmoid", ["m"], ["out"])])
    feeds = {"c": np.array([True]), "x": f32(2, 3), "b": f32(5, 4), "g": f32(3, 2)}
    info = infer_and_check(net, [feeds])
    assert info.final("out") == TensorType(np.float32, (2, 3))
    assert info.final("b") == TensorType(np.float32, (5, 4)) and info.why("b") is None
    assert info.final("g") == TensorType(np.float32, (None, 2))
    assert "the branches give float32[6, 2] and float32[3, 2]" in str(info.why("g"))
    check_against_run(Net(net.ops[:1]), {**feeds, "c": np.array([False])}, info)


def test_while_keeps_a_counter_and_loses_the_dim_a_loop_grows() -> None:
    body = Net(
        [
            Op("Concat", ["acc", "row"], ["acc", "split"], args={"axis": 0}),
            Op("Add", ["i", "one"], ["i"]),
        ],
        name="body",
    )
    cond = Net([Op("LT", ["i", "n"], ["go"])], name="cond")
    net = Net([Op("While", ["go"], ["acc", "i"], args={"loop_net": body, "cond_net": cond})])
    feeds = {
        "go": np.array([True]),
        "acc": f32(1, 3),
        "row": f32(1, 3),
        "i": np.array([0], np.int64),
        "one": np.array([1], np.int64),
        "n": np.array([3], np.int64),
    }
    info = infer_and_check(net, [feeds, {**feeds, "n": np.array([0], np.int64)}])
    assert info.final("i") == TensorType(np.int64, (1,)) and info.why("i") is None
    assert info.final("go") == TensorType(np.bool_, (1,))
    assert info.final("acc") == TensorType(np.float32, (None, 3))
    assert "op #0 (While): the loop's iterations give float32[1, 3] and float32[2, 3]" in str(
        info.why("acc")
    )


def test_while_whose_types_do_not_settle_leaves_them_unknown() -> None:
    """Each round the growing dim reaches one more copy: ten copies need more rounds than the
    analysis runs, so the blobs the loop writes are given up as unknown (still sound)."""
    copies = [Op("Copy", [f"a{k}"], [f"a{k + 1}"]) for k in reversed(range(10))]
    body = Net([*copies, Op("Concat", ["a0", "a0"], ["a0", "split"], args={"axis": 0})])
    net = Net([Op("While", ["go"], ["a10"], args={"loop_net": body})])
    feeds = {"go": np.array([False]), **{f"a{k}": f32(1, 2) for k in range(11)}}
    info = infer_and_check(net, [feeds])
    assert info.final("a10") == TensorType()
    assert "did not settle" in str(info.why("a10"))


def test_do_binds_names_and_leaves_workspace_locals_unknown() -> None:
    const = {"shape": [2], "value": 1.0}
    init = Net([Op("ConstantFill", [], ["X"], args=const)], name="init")
    body = Net([Op("Add", ["X", "a"], ["Z"])], name="body")
    net = Net(
        [
            Op("CreateScope", [], ["W"]),
            Op("Do", ["W"], ["W"], args={"net": init, "inner_blobs": [], "outer_blobs_idx": []}),
            Op(
                "Do",
                ["x", "W"],
                ["z", "W"],
                args={
                    "net": body,
                    "inner_blobs": ["a", "Z"],
                    "outer_blobs_idx": [0, 1],
                    "reuse_workspace": 1,
                },
            ),
            Op("Do", ["x", "W"], ["y", "W"], args={"net": body, **_bound(["a", "Z"])}),
        ]
    )
    info = infer_shapes(net, {"x": (2,)})
    assert info.final("W") == TensorType(np.dtype(object), ())
    assert info.final("z").dtype is None
    assert "reads 'X', a local of an earlier run of its workspace" in str(info.why("z"))
    assert "reads 'X', bound to nothing" in str(info.why("y"))
    check_against_run(Net(net.ops[:3]), {"x": f32(2)}, info)


def _bound(inner: list[str]) -> dict[str, Any]:
    return {"inner_blobs": inner, "outer_blobs_idx": list(range(len(inner)))}


def test_do_writing_a_bound_input_changes_it_outside() -> None:
    body = Net([Op("Concat", ["a", "a"], ["a", "s"], args={"axis": 1}), Op("Copy", ["a"], ["b"])])
    net = Net([Op("CreateScope", [], ["W"]), Op("Do", ["x", "W"], ["y", "W"], args={
        "net": body, **_bound(["a", "b"])})])  # fmt: skip
    info = infer_and_check(net, [{"x": f32(2, 3)}])
    assert info.final("y") == TensorType(np.float32, (2, 6))
    assert info.final("x") == TensorType(np.float32, (2, None))


def test_nets_built_by_caffe2s_if_and_while_builders() -> None:
    """The nested If of Caffe2's net_builder test (branch-local blobs in Do workspaces) and a
    While with a condition net, as ``add_if_op``/``add_while_op`` build them."""
    const = {"shape": [1], "value": 2.0}
    net = Net([Op("ConstantFill", [], [n], args=const) for n in ("x", "y", "r")], name="n")
    scope = {"x", "y", "r", "c"}
    inner = Net(
        [
            Op("ConstantFill", [], ["local"], args={"shape": [3], "value": 1.0}),
            Op("Sum", ["local", "local"], ["twice"]),
            Op("ReduceSum", ["twice"], ["r"], args={"keepdims": 0}),
        ],
        name="then",
    )
    add_if_op(net, "c", scope, inner, Net([Op("Copy", ["x"], ["r"])], name="else"))
    cond = Net([Op("Add", ["x", "y"], ["x"]), Op("LT", ["x", "r"], ["go"])], name="cond")
    add_while_op(net, "go", scope, Net([Op("Mul", ["y", "y"], ["y"])], name="body"), cond)
    runs = [{"c": np.array([c])} for c in (True, False)]
    info = infer_and_check(net, runs)
    assert info.final("r") == TensorType(np.float32, None)
    assert "the branches give float32[] and float32[1]" in str(info.why("r"))
    for name in ("x", "y"):
        assert info.final(name) == TensorType(np.float32, (1,))
    assert info.final("go") == TensorType(np.bool_, None)
    assert "reads r@" in str(info.why("go"))


def test_training_net_with_gradient_if_and_do_ops() -> None:
    """One SGD step through an If (the gradient If runs gradient Dos): the gradients have the
    weights' types, the loss is a scalar."""
    net = Net([], name="train")
    add_if_op(
        net,
        "c",
        {"x", "w1", "w2", "y", "c"},
        Net([Op("Mul", ["x", "w1"], ["y"])], name="then"),
        Net([Op("Mul", ["x", "w2"], ["y"])], name="else"),
    )
    net.append_op(Op("SquaredL2Distance", ["y", "target"], ["dist"]))
    net.append_op(Op("AveragedLoss", ["dist"], ["loss"]))
    grads = add_gradient_operators(net, ["loss"])
    net.append_op(Op("LearningRate", ["iter"], ["lr"], args={"base_lr": -0.2}))
    for w in ("w1", "w2"):
        net.append_op(Op("WeightedSum", [w, "ONE", grads[w], "lr"], [w]))
    feeds = {
        "w1": np.zeros((1, 1), np.float32),
        "w2": np.zeros((1, 1), np.float32),
        "y": np.zeros((4, 1), np.float32),
        "ONE": np.ones(1, np.float32),
        "x": f32(4, 1),
        "target": f32(4, 1),
        "iter": np.array([0], np.int64),
    }
    runs = [{**feeds, "c": np.array([c])} for c in (True, False)]
    info = infer_and_check(net, runs)
    for name in ("loss", grads["w1"], grads["w2"], "w1", "lr"):
        assert info.why(name) is None, (name, info.why(name))
    assert info.final(grads["w1"]) == TensorType(np.float32, (1, 1))
    assert info.final("loss") == TensorType(np.float32, ())


def test_a_contradiction_inside_a_branch_names_the_op_and_its_holder() -> None:
    bad = Net([Op("FC", ["x", "w"], ["y"])], name="then")
    net = Net([Op("If", ["c", "x", "w"], ["y"], args={"then_net": bad})], name="main")
    with pytest.raises(InvalidNetError, match=r"op #0 \(FC\) in net 'then'") as caught:
        infer_shapes(net, {"c": TensorType(np.bool_, (1,)), "x": (2, 3), "w": (4, 5)})
    assert "in a nested net of op #0 (If) in net 'main'" in "\n".join(caught.value.__notes__)


def test_a_condition_that_is_no_bool_is_refused() -> None:
    net = Net([Op("If", ["c"], [], args={"then_net": Net([])})])
    with pytest.raises(InvalidNetError, match="must hold one bool value"):
        infer_shapes(net, {"c": (1,)})


def test_mask_rcnn_2go_if_gives_the_mask_head_types(real_fixtures: Path) -> None:
    """The real If has no outputs: its else branch writes the masks and rescales the boxes."""
    model = load_model(real_fixtures / "caffe2-models" / "mask_rcnn_2go" / "fp32" / "model.pbtxt")
    if_op = next(op for op in model.predict_net if op.type == "If")
    mask_net = if_op.arg("else_net")
    head = Net([op for op in list(mask_net.ops)[1:] if op.type not in ("Slice", "Div")])
    params = random_params(head, {mask_net[0].outputs[0]: (2, 8, 6, 6)}, seed=2, channels=8)
    net = Net([if_op], ["is_bbox_rois_empty", "xif3_6", "bbox_nms", "im_info", *params])
    feeds = {
        "is_bbox_rois_empty": np.array(False),
        "xif3_6": f32(1, 8, 4, 4),
        "bbox_nms": np.array([[0, 2, 2, 30, 40], [0, 10, 5, 50, 60]], np.float32),
        "im_info": np.array([[64, 64, 0.5]], np.float32),
        **params,
    }
    inputs = {name: type_of(value) for name, value in feeds.items()}
    inputs["bbox_nms"] = TensorType(np.float32, ("rois", 5))
    info = infer_shapes(net, inputs)
    ws = run(net, feeds)
    probs = info.final("mask_fcn_probs")
    assert probs.complete and probs.shape is not None and probs.shape[0] == "rois"
    assert fits(probs, type_of(ws.fetch("mask_fcn_probs")))
    assert probs.shape[1:] == ws.fetch("mask_fcn_probs").shape[1:]
    assert info.final("bbox_nms") == TensorType(np.float32, ("rois", 5))

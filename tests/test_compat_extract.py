"""The extraction drop-ins: Caffe2's ``Net.ClonePartial`` (upstream's ``testPartialClone``,
as it states it) and detectron2's ``fuse_alias_placeholder`` (both ``is_backward`` forms)."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import AliasPlaceholderError, IllegalRewriteError
from graphtools.executor import run_model
from graphtools.gradients import add_gradient_operators
from graphtools.ir import Model, Net, Op
from graphtools.passes import ClonePartial, clone_partial, fuse_alias_placeholder
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net, net_to_netdef


def _original() -> caffe2_pb2.NetDef:
    """upstream's ``testPartialClone`` net: a Concat, Sums, a backward pass (ignored when
    cloning), then in-place Sums."""
    net = Net(
        [
            Op("Concat", ["a1", "a2"], ["b1", "b2"], args={"axis": 0}),
            Op("Sum", ["b1", "p1"], ["c1"]),
            Op("Sum", ["b2"], ["c2"]),
            Op("Sum", ["c1", "c2"], ["d"]),
        ],
        ["a1", "a2"],
        name="original",
    )
    add_gradient_operators(net, ["d"])
    for op in (
        Op("Sum", ["p1"], ["k"]),
        Op("Sum", ["d"], ["e"]),
        Op("Sum", ["e", "k"], ["e"]),
        Op("Sum", ["e"], ["e"]),
        Op("Sum", ["e"], ["f"]),
    ):
        net.append_op(op)
    return net_to_netdef(net)


def _check(
    net: caffe2_pb2.NetDef,
    ops: int,
    inputs: set[str],
    outputs: set[str],
    internals: set[str],
) -> None:
    assert len(net.op) == ops
    assert set(net.external_input) == inputs
    assert set(net.external_output) == outputs
    blobs = set(net.external_input) | set(net.external_output)
    for op in net.op:
        blobs |= set(op.input) | set(op.output)
    assert blobs == inputs | outputs | internals


def test_clone_partial_as_upstreams_test_states_it() -> None:
    n = _original()
    n2, (d22,) = clone_partial(n, "f1", {"a1": "a11", "a2": "a22"}, ["d"])
    _check(n2, 4, {"p1", "a11", "a22"}, {"f1/d"}, {"f1/b1", "f1/b2", "f1/c1", "f1/c2", "p1"})
    assert d22 == "f1/d"
    n3, (d33,) = clone_partial(n, "f2", ["b1", "b2"], ["d"])
    _check(n3, 3, {"p1", "b1", "b2"}, {"f2/d"}, {"f2/c1", "f2/c2", "p1"})
    assert d33 == "f2/d"
    n4, outputs = clone_partial(n, "f3", ["b1"], ["c1"])
    _check(n4, 1, {"p1", "b1"}, {"f3/c1"}, {"p1"})
    assert outputs == ["f3/c1"]
    n5, outputs = clone_partial(n, "f4", [("b1", "b1"), ("b2", "b2")], ["c1", "c2"])
    _check(n5, 2, {"p1", "b1", "b2"}, {"f4/c1", "f4/c2"}, {"p1"})
    assert outputs == ["f4/c1", "f4/c2"]
    with pytest.raises(AssertionError, match="would generate the given input"):
        clone_partial(n, "f4", ["a1", "a2", "c2"], ["d"])
    n6, (e22,) = clone_partial(n, "f5", ["d"], ["e"])
    _check(n6, 4, {"p1", "d"}, {"f5/e"}, {"f5/k", "p1"})
    assert e22 == "f5/e"
    n8, (e22, f22) = ClonePartial(n, "f7", ["d"], ["e", "f"])
    _check(n8, 5, {"p1", "d"}, {"f7/e", "f7/f"}, {"p1", "f7/k"})
    assert (e22, f22) == ("f7/e", "f7/f")
    with pytest.raises(AssertionError, match="nope is not defined"):
        clone_partial(n, "f8", ["d"], ["nope"])


def test_clone_partial_computes_what_the_original_does_and_remaps_nested_nets() -> None:
    then = Net([Op("Relu", ["t"], ["u"])], ["t"], ["u"], name="then")
    net = Net(
        [
            Op("Sigmoid", ["x"], ["t"]),
            Op("If", ["c", "t"], ["u"], args={"then_net": then}),
            Op("Tanh", ["u"], ["y"]),
        ],
        ["x", "c"],
        ["y"],
        name="n",
    )
    clone, (y,) = clone_partial(net, "part", ["t", "c"], ["y"])
    assert isinstance(clone, Net) and y == "part/y"
    (nested,) = [n for _, n in clone[0].nested_nets()]
    assert [(op.inputs, op.outputs) for op in nested] == [(("t",), ("part/u",))]
    t = np.array([-1.0, 2.0], np.float32)
    got = run_model(Model(clone), {"t": t, "c": np.array(True)})["part/y"]
    np.testing.assert_allclose(got, np.tanh(np.maximum(t, 0)))


def _with_placeholders(backward: int) -> tuple[caffe2_pb2.NetDef, caffe2_pb2.NetDef]:
    ops = [
        Op("AliasWithName", ["x"], ["x_alias"], args={"name": "data", "is_backward": 0}),
        Op("FC", ["x_alias", "w", "b"], ["fc"]),
        Op("AliasWithName", ["fc"], ["fc_alias"], args={"name": "scores", "is_backward": backward}),
        Op("Relu", ["fc_alias"], ["y"]),
    ]
    if backward:
        ops.insert(3, Op("Sigmoid", ["fc"], ["other"]))
    predict = Net(ops, ["x", "w", "b"], ["y"], name="p")
    init = Net(
        [
            Op("GivenTensorFill", [], ["w"], args={"shape": [3, 2], "values": [0.5] * 6}),
            Op("GivenTensorFill", [], ["b"], args={"shape": [3], "values": [0.1, -0.2, 0.3]}),
        ],
        name="i",
    )
    return net_to_netdef(predict), net_to_netdef(init)


@pytest.mark.parametrize("backward", [0, 1])
def test_fuse_alias_placeholder_folds_both_forms(backward: int) -> None:
    """``is_backward=0`` renames the input at the placeholder (its only reader);
    ``is_backward=1`` renames the value at its producer, for every reader."""
    predict, init = _with_placeholders(backward)
    x = np.array([[1.0, -2.0]], np.float32)
    before = run_model(Model(as_net(predict), as_net(init)), {"x": x})["y"]
    fuse_alias_placeholder(predict, init)
    types = [op.type for op in predict.op]
    assert types == (["FC", "Sigmoid", "Relu"] if backward else ["FC", "Relu"])
    fc = predict.op[0]
    assert fc.input[0] == "data" and list(fc.output) == ["scores"]
    assert all(list(op.input) == ["scores"] for op in predict.op[1:])  # every reader
    assert "data" in predict.external_input
    after = run_model(Model(as_net(predict), as_net(init)), {"data": x})["y"]
    np.testing.assert_array_equal(after, before)


def test_fuse_alias_placeholder_refusals() -> None:
    predict, init = _with_placeholders(0)
    reader = predict.op.add()  # x is read by another op: is_backward=0 cannot rename it
    reader.CopyFrom(net_to_netdef(Net([Op("Relu", ["x"], ["z"])])).op[0])
    with pytest.raises(IllegalRewriteError):
        fuse_alias_placeholder(predict, init)
    bad = net_to_netdef(Net([Op("AliasWithName", ["x"], ["y"])], ["x"], ["y"]))
    with pytest.raises(AssertionError, match="no 'name'"):
        fuse_alias_placeholder(bad, caffe2_pb2.NetDef())
    assert issubclass(AliasPlaceholderError, AssertionError)


def test_a_refused_placeholder_leaves_both_nets_as_they_were() -> None:
    """The first placeholder fuses, the second is refused (its input has another reader):
    neither net keeps the first one's fusion."""
    predict, init = _with_placeholders(0)
    reader = predict.op.add()  # fc is read by another op: is_backward=0 cannot rename it
    reader.CopyFrom(net_to_netdef(Net([Op("Sigmoid", ["fc"], ["other"])])).op[0])
    before = (predict.SerializeToString(), init.SerializeToString())
    with pytest.raises(IllegalRewriteError, match="also read by"):
        fuse_alias_placeholder(predict, init)
    assert (predict.SerializeToString(), init.SerializeToString()) == before

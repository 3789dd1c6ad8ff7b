"""The structural diff matches ops by what they compute, not by position, and the DOT picture
shows every op and external blob, with a diff's marks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from graphtools import load_model, save_model
from graphtools.analysis.model_diff import diff_models, diff_nets
from graphtools.dot import model_to_dot, net_to_dot
from graphtools.ir import Argument, DeviceOption, Model, Net, Op


def _net(*ops: Op) -> Net:
    return Net(list(ops), ["x"], ["y"], name="n")


BASE = (
    Op("Relu", ["x"], ["a"]),
    Op("Sigmoid", ["a"], ["b"]),
    Op("Add", ["a", "b"], ["y"]),
)


def test_an_inserted_op_shifts_no_match() -> None:
    after = _net(Op("Copy", ["x"], ["x2"]), *BASE)
    change = diff_nets(_net(*BASE), after)
    assert [(r.index, r.type) for r in change.added] == [(0, "Copy")]
    assert change.removed == [] and change.changed == []
    assert change.matched == {0: 1, 1: 2, 2: 3}


def test_removed_ops_rewired_readers_renamed_outputs_and_args() -> None:
    after = _net(
        Op("Relu", ["x"], ["a2"], args={"alpha": 1}),
        Op("Add", ["a2", "a2"], ["y"]),
    )
    change = diff_nets(_net(*BASE), after)
    assert [(r.index, r.type) for r in change.removed] == [(1, "Sigmoid")]
    relu, add = change.changed
    assert relu.renamed == [(0, "a", "a2")] and relu.args[0].name == "alpha"
    assert add.rewired == [(1, "b@1", "a2@1")]
    assert change.renamed_blobs == [("a", "a2")]


def test_devices_engines_and_interfaces() -> None:
    gpu = DeviceOption(device_type=1, device_id=0)
    after = Net(
        [BASE[0].replace(device_option=gpu, engine="CUDNN"), *BASE[1:]], ["x", "z"], ["y", "b"]
    )
    change = diff_nets(_net(*BASE), after)
    (relu,) = change.changed
    assert relu.device == ("-", "CUDA:0") and relu.engine == ("-", "CUDNN")
    assert change.inputs_added == ["z"] and change.outputs_added == ["b"]


def test_an_op_of_another_domain_is_a_change() -> None:
    """An ONNX ``Relu`` and a model's own ``my::Relu`` compute other things: the diff says so
    (it said 'same structure'); ONNX's own domain, named or not, is one domain."""
    before = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"], dialect="onnx")
    mine = Net([Op("Relu", ["x"], ["y"], domain="my")], ["x"], ["y"], dialect="onnx")
    (relu,) = diff_nets(before, mine).changed
    assert relu.domain == ("-", "my")
    named = Net([Op("Relu", ["x"], ["y"], domain="ai.onnx")], ["x"], ["y"], dialect="onnx")
    assert diff_nets(before, named).changed == []


def test_fills_match_by_the_names_they_write() -> None:
    fill = {"shape": [2], "values": [1.0, 2.0]}
    init = Net([Op("GivenTensorFill", [], [n], args=fill) for n in ("w1", "w2", "w3")])
    fewer = Net([Op("GivenTensorFill", [], [n], args=fill) for n in ("w1", "w3")])
    predict = _net(*BASE)
    change = diff_models(Model(predict, init), Model(predict.copy(), fewer))
    assert change.init is not None
    assert [r.outputs for r in change.init.removed] == [("w2",)]
    assert change.init.changed == [] and change.params_removed == ["w2"]
    assert not change.same and diff_models(Model(predict), Model(predict.copy())).same


def test_many_ops_reading_the_same_values_match_by_their_arguments() -> None:
    # 40 Scales of x (more than a bucket holds before it is split by arguments): renaming
    # every output and reversing the order still matches each op to its own scale.
    scales = [Op("Scale", ["x"], [f"s{i}"], args={"scale": float(i)}) for i in range(40)]
    renamed = [Op("Scale", ["x"], [f"t{i}"], args={"scale": float(i)}) for i in range(40)]
    before = Net(scales, ["x"], [f"s{i}" for i in range(40)])
    after = Net(renamed[::-1], ["x"], [f"t{i}" for i in range(40)])
    change = diff_nets(before, after)
    assert change.matched == {i: 39 - i for i in range(40)}
    assert all(
        op.args == [] and op.renamed == [(0, f"s{op.before}", f"t{op.before}")]
        for op in change.changed
    )


def test_fills_of_one_type_match_their_names_among_many() -> None:
    fills = [Op("ConstantFill", [], [f"w{i}"], args={"value": float(i)}) for i in range(50)]
    before = Net(fills)
    after = Net(
        [fills[i] if i != 7 else fills[i].with_arg("value", -1.0) for i in range(50) if i != 20]
    )
    change = diff_nets(before, after)
    assert [r.outputs for r in change.removed] == [("w20",)] and change.added == []
    (changed,) = change.changed
    assert (changed.before, changed.after) == (7, 7) and changed.args[0].name == "value"


def test_ops_loaded_from_equal_bytes_are_the_same_without_decoding(tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    nodes = [
        onnx.helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.5),
        onnx.helper.make_node("LeakyRelu", ["a"], ["y"], alpha=0.25),
    ]
    graph = onnx.helper.make_graph(nodes, "g", [x], [y])
    path = tmp_path / "m.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    before, after = load_model(path), load_model(path)
    change = diff_models(before, after)
    assert change.same
    decoded = [op for net in (before, after) for op in net.predict_net if op._lazy is not None]
    assert decoded == []
    nodes[1] = onnx.helper.make_node("LeakyRelu", ["a"], ["y"], alpha=0.75)
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph(nodes, "g", [x], [y])), str(path))
    (changed,) = diff_models(before, load_model(path)).predict.changed
    assert (changed.before, [a.name for a in changed.args]) == (1, ["alpha"])


def test_an_if_whose_branch_reads_external_data_is_compared_by_that_data(
    tmp_path: Path,
) -> None:
    # Byte-identical model files whose If branch's weight lies in w.bin beside each: the
    # node's bytes are equal, the branch computes with other values.
    weight = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[2])
    weight.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", "8")):
        weight.external_data.add(key=key, value=value)
    out = onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2])
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["w"], ["z"])], "then", [], [out], [weight]
    )
    cond = onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    node = onnx.helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [cond], [y]))
    paths = []
    for folder, values in (("a", [1.0, 2.0]), ("b", [1.0, 3.0])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "w.bin").write_bytes(np.array(values, np.float32).tobytes())
        paths.append(tmp_path / folder / "m.onnx")
        paths[-1].write_bytes(model.SerializeToString())
    change = diff_models(load_model(paths[0]), load_model(paths[1]))
    assert not change.same
    (changed,) = change.predict.changed
    assert {a.name for a in changed.args} == {"then_branch", "else_branch"}


@pytest.mark.parametrize("others", [1, 17])  # a bucket scanned, and one split by arguments
def test_an_op_loaded_as_the_same_bytes_matches_itself_even_with_a_nan(
    tmp_path: Path, others: int
) -> None:
    scales = [Op("Scale", ["x"], ["y"], args={"scale": 1.0}) for _ in range(others)]
    nan = Op("Scale", ["x"], ["y"], args={"scale": float("nan")})
    save_model(Model(Net([*scales, nan], ["x"], ["y"])), tmp_path / "before")
    save_model(Model(Net([nan], ["x"], ["y"])), tmp_path / "after")
    before, after = load_model(tmp_path / "before"), load_model(tmp_path / "after")
    assert diff_nets(before.predict_net, after.predict_net).matched == {others: 0}


def test_arguments_built_with_lists_match_in_a_long_bucket() -> None:
    ops = [Op("Scale", ["x"], [f"s{i}"], args=[Argument("k", floats=[1.0])]) for i in range(20)]
    renamed = [op.replace(outputs=[f"t{i}"]) for i, op in enumerate(ops)]
    change = diff_nets(Net(ops, ["x"]), Net(renamed, ["x"]))
    assert change.matched == {i: i for i in range(20)} and change.removed == []


def test_dot_draws_ops_blobs_clusters_and_slices() -> None:
    branch = Net([Op("Relu", ["a"], ["c"])], name="then")
    net = _net(*BASE, Op("If", ["b"], [], args={"then_net": branch}))
    text = net_to_dot(net)
    assert text.startswith('digraph "n" {')
    for index, op in enumerate(net):
        assert f'label="%{index} {op.type}"' in text
    assert 'label="in: x@0"' in text and 'label="out: y@1"' in text
    assert "subgraph cluster_op3_then_net {" in text and 'label="%3 If: then_net (then)"' in text
    sliced = net_to_dot(net, ops=slice(1, 2))
    assert 'label="%1 Sigmoid"' in sliced and "%0 Relu" not in sliced


def test_dot_diff_marks_removed_added_and_renamed() -> None:
    after = _net(
        Op("Relu", ["x"], ["a2"]), Op("Tanh", ["a2"], ["t"]), Op("Add", ["a2", "t"], ["y"])
    )
    text = model_to_dot(Model(_net(*BASE)), diff_with=Model(after))
    assert 'style="filled,dashed", fillcolor="#ffcdd2", label="%1 Sigmoid"' in text
    assert 'fillcolor="#c8e6c9", label="+%1 Tanh"' in text
    assert "a@1\\n-> a2" in text
    assert "removed (red): 1, added (green): 1, changed (orange): 2" in text


def test_removed_identities_are_blamed_not_the_op_that_stays() -> None:
    """Issue 21 item 4: removing ``Scale(scale=1.0) a->b`` and an in-place ``Scale c->c``
    reports those two as removed and the kept ``Scale(scale=2.0)`` as rewired, never as an
    argument change (which would read as a change of meaning)."""
    before = _net(
        Op("Relu", ["x"], ["a"]),
        Op("Scale", ["a"], ["b"], args={"scale": 1.0}),
        Op("Scale", ["b"], ["c"], args={"scale": 2.0}),
        Op("Scale", ["c"], ["c"], args={"scale": 1.0}),
        Op("Sigmoid", ["c"], ["y"]),
    )
    after = _net(
        Op("Relu", ["x"], ["a"]),
        Op("Scale", ["a"], ["c"], args={"scale": 2.0}),
        Op("Sigmoid", ["c"], ["y"]),
    )
    change = diff_nets(before, after)
    assert [(r.index, r.type, r.outputs) for r in change.removed] == [
        (1, "Scale", ("b",)),
        (3, "Scale", ("c",)),
    ]
    assert change.matched == {0: 0, 2: 1, 4: 2}
    scale, sigmoid = change.changed
    assert (scale.before, scale.rewired, scale.args) == (2, [(0, "b@1", "a@1")], [])
    assert (sigmoid.before, sigmoid.rewired, sigmoid.args) == (4, [(0, "c@2", "c@1")], [])


def test_a_list_argument_differing_after_the_items_shown_is_a_change() -> None:
    """Lists are shown cut after 8 items: a weight changed after them was taken for equal;
    a NaN, not equal to itself, stays no change."""
    values = [0.5] * 18
    changed = [*values[:11], 9.0, *values[12:]]
    fill = "GivenTensorFill"
    before = _net(Op(fill, [], ["w"], args={"values": values, "shape": [18]}))
    after = _net(Op(fill, [], ["w"], args={"values": changed, "shape": [18]}))
    (op,) = diff_nets(before, after).changed
    (arg,) = op.args
    assert arg.name == "values" and arg.before != arg.after and "#" in arg.before
    nan = _net(Op(fill, [], ["w"], args={"values": [float("nan")] * 9, "shape": [9]}))
    assert not diff_nets(nan, nan.copy()).changed


def test_onnx_models_differing_in_a_function_or_a_sparse_initializer_differ() -> None:
    """onnxruntime computes other outputs from them: diff said 'same structure', exit 0."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from graphtools.serde.onnx_codec import model_from_onnx_bytes

    def model(constant: float, sparse_value: float) -> Model:
        body = [helper.make_node("Constant", [], ["c"], value_float=constant)]
        body.append(helper.make_node("Add", ["x", "c"], ["y"]))
        function = helper.make_function("local", "F", ["x"], ["y"], body, [])
        values = numpy_helper.from_array(np.float32([sparse_value]), "s")
        sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.int64([1])), [4])
        graph = helper.make_graph(
            [
                helper.make_node("F", ["x"], ["f"], domain="local"),
                helper.make_node("Identity", ["f"], ["y"]),
            ],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
            sparse_initializer=[sparse],
        )
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
        made = helper.make_model(graph, opset_imports=opsets, functions=[function])
        return model_from_onnx_bytes(made.SerializeToString())

    assert diff_models(model(2.0, 1.0), model(2.0, 1.0)).same
    functions = diff_models(model(2.0, 1.0), model(5.0, 1.0))
    assert not functions.same and functions.functions == [("~", "local:F")]
    sparse = diff_models(model(2.0, 1.0), model(2.0, 9.0))
    assert not sparse.same and sparse.sparse == [("~", "s")]


def test_an_op_listing_an_output_twice_is_read_at_its_first_position() -> None:
    """Caffe2 gives both outputs of Foo -> [x, x] one version: a reader of x reads the first
    (as the matcher always did); taking the last reported a rewire of Relu that is none."""
    before = Net([Op("Foo", ["in"], ["x", "x"]), Op("Relu", ["x"], ["y"])], ["in"], ["y"])
    after = Net([Op("Foo", ["in"], ["x", "z"]), Op("Relu", ["x"], ["y"])], ["in"], ["y"])
    changed = diff_nets(before, after).changed
    assert [(c.type, c.rewired, c.renamed) for c in changed] == [("Foo", [], [(1, "x", "z")])]

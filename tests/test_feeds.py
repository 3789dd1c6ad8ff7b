"""graphtools.feeds: made-up inputs and parameters fit the ops that read them, and every
guess, placeholder, skipped op and replaced parameter is reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphtools.errors import ExecutionError, InvalidNetError
from graphtools.executor import Int8Tensor, run_model
from graphtools.feeds import ROLES, synthesize, without_init_ops
from graphtools.feeds.state import Attempt, Retry, WalkState
from graphtools.feeds.walk import feed_data, run_init, run_predict
from graphtools.ir import Model, Net, Op


def _net(*ops: Op, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()) -> Net:
    return Net(list(ops), list(inputs), list(outputs), name="t")


def test_a_predict_only_conv_net_gets_a_guessed_image_and_made_up_weights() -> None:
    net = _net(
        Op("Conv", ["data", "w", "b"], ["y"], args={"kernel": 3}),
        Op("Relu", ["y"], ["y"]),
        inputs=("data", "w", "b"),
        outputs=("y",),
    )
    made = synthesize(Model(net), seed=1)
    (data,) = made.inputs
    assert data.name == "data" and data.origin == "guessed" and len(data.shape) == 4
    assert "Conv" in data.reason and "3 channels" in data.reason
    assert set(made.params) == {"w", "b"}
    assert made.params["w"][1] == data.shape[1]
    again = run_model(Model(net), made.feeds)
    np.testing.assert_array_equal(again["y"], made.outputs["y"])


def test_given_shapes_win_and_are_drawn_as_make_feeds_draws() -> None:
    net = _net(Op("Relu", ["x"], ["y"]), inputs=("x",), outputs=("y",))
    made = synthesize(Model(net), {"x": (2, 5)}, seed=3)
    assert made.inputs[0].origin == "given" and made.inputs[0].shape == (2, 5)
    expected = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_array_equal(made.feeds["x"], expected)


def test_indices_and_lengths_fit_the_rows_they_index() -> None:
    net = _net(
        Op("LengthsSum", ["data", "lengths"], ["sums"]),
        Op("Gather", ["data", "idx"], ["rows"]),
        inputs=("data", "lengths", "idx"),
        outputs=("sums", "rows"),
    )
    made = synthesize(Model(net), {"data": (7, 3)})
    lengths, idx = made.feeds["lengths"], made.feeds["idx"]
    assert lengths.dtype == np.int32 and int(lengths.sum()) == 7
    assert idx.dtype == np.int64 and idx.min() >= 0 and idx.max() < 7
    origins = {m.name: m.origin for m in made.inputs}
    # How many indices is a guess --shapes could have given; the lengths follow the rows.
    assert origins == {"data": "given", "lengths": "role", "idx": "guessed"}
    shaped = synthesize(Model(net), {"data": (7, 3), "idx": (2, 2)})
    assert {m.name: m.origin for m in shaped.inputs}["idx"] == "role"  # "the shape given"


def test_indices_take_the_shape_given_and_lengths_follow_them() -> None:
    """A Gather's indices of the rank ``--shapes`` gives (an ``nn.Embedding`` reads a batch
    of sequences), and a sparse lengths sum's as many as given, lengths summing to them."""
    net = _net(
        Op("Gather", ["table", "idx"], ["rows"]),
        Op("SparseLengthsSumFused8BitRowwise", ["fused", "ids", "lengths"], ["sums"]),
        inputs=("table", "idx", "fused", "ids", "lengths"),
        outputs=("rows", "sums"),
    )
    made = synthesize(Model(net), {"table": (5, 2), "idx": (3, 4), "ids": (9,)})
    idx, ids = made.feeds["idx"], made.feeds["ids"]
    assert idx.shape == (3, 4) and idx.dtype == np.int64 and 0 <= idx.min() <= idx.max() < 5
    assert ids.shape == (9,) and int(made.feeds["lengths"].sum()) == 9
    assert made.outputs["rows"].shape == (3, 4, 2)
    reasons = {m.name: m.reason for m in made.inputs}
    assert reasons["idx"].endswith("the shape given")


def test_a_role_whose_shape_follows_the_image_does_not_claim_a_given_shape() -> None:
    """im_info is [height, width, scale] of the image whatever --shapes says of it."""
    net = _net(
        Op("BBoxTransform", ["rois", "deltas", "im_info"], ["boxes", "splits"]),
        inputs=("rois", "deltas", "im_info"),
        outputs=("boxes",),
    )
    made = synthesize(Model(net), {"rois": (4, 5), "deltas": (4, 4), "im_info": (2, 5)})
    (im_info,) = (m for m in made.inputs if m.name == "im_info")
    assert im_info.shape == (1, 3) and not im_info.reason.endswith("the shape given")


def test_weighted_sparse_lengths_sum_on_fused_rows() -> None:
    op = Op(
        "SparseLengthsWeightedSumFused8BitRowwise",
        ["data", "weights", "indices", "lengths"],
        ["out"],
    )
    made = synthesize(Model(_net(op, inputs=tuple(op.inputs), outputs=("out",))))
    assert made.feeds["data"].dtype == np.uint8
    count = made.feeds["indices"].size
    assert made.feeds["weights"].shape == (count,)
    assert int(made.feeds["lengths"].sum()) == count
    assert made.outputs["out"].shape[0] == made.feeds["lengths"].size


def test_detection_inputs_match_the_image_and_the_scores() -> None:
    """im_info carries the image size, anchors one box per score channel, and the RPN's
    deltas get 4 channels per anchor."""
    net = _net(
        Op("Conv", ["data", "w0", "b0"], ["feat"], args={"kernel": 3, "pad": 1}),
        Op("Conv", ["feat", "w1", "b1"], ["scores_raw"], args={"kernel": 1}),
        Op("Sigmoid", ["scores_raw"], ["scores"]),
        Op("Conv", ["feat", "w2", "b2"], ["deltas"], args={"kernel": 1}),
        Op(
            "GenerateProposals",
            ["scores", "deltas", "im_info", "anchors"],
            ["rois", "probs"],
            args={"spatial_scale": 0.25, "min_size": 0.0},
        ),
        inputs=("data", "w0", "b0", "w1", "b1", "w2", "b2", "im_info", "anchors"),
        outputs=("rois", "probs"),
    )
    made = synthesize(Model(net), {"data": (1, 3, 16, 20)})
    np.testing.assert_array_equal(made.feeds["im_info"], [[16, 20, 1.0]])
    channels = made.params["w1"][0]
    assert made.feeds["anchors"].shape == (channels, 4)
    assert made.params["w2"][0] == 4 * channels
    assert made.outputs["rois"].shape[1] == 5


def test_a_fixed_reshape_target_sets_the_made_up_channel_count() -> None:
    net = _net(
        Op("Conv", ["data", "w", "b"], ["y"], args={"kernel": 1}),
        Op("AveragePool", ["y"], ["p"], args={"global_pooling": 1}),
        Op("Reshape", ["p"], ["flat", "old"], args={"shape": [1, 10]}),
        inputs=("data", "w", "b"),
        outputs=("flat",),
    )
    made = synthesize(Model(net), {"data": (1, 3, 4, 4)})
    assert made.params["w"][0] == 10
    assert made.outputs["flat"].shape == (1, 10)
    # the first walk planned another count: it returned the retry, it did not raise it
    first = WalkState(Model(net), {"data": (1, 3, 4, 4)}, {}, 0, None, Attempt())
    run_init(first)
    feed_data(first)
    assert run_predict(first) == Retry(layer=0, count=10)
    second = WalkState(Model(net), {"data": (1, 3, 4, 4)}, {}, 0, None, Attempt({0: 10}))
    run_init(second)
    feed_data(second)
    assert run_predict(second) is None


def test_parameters_are_not_made_up_for_a_pair_unless_asked() -> None:
    predict = _net(Op("FC", ["x", "w", "b"], ["y"]), inputs=("x", "w", "b"), outputs=("y",))
    init = _net(Op("ConstantFill", [], ["w"], args={"shape": [4, 3], "value": 1.0}))
    model = Model(predict, init)
    with pytest.raises(InvalidNetError, match=r"'b'.*--random-params"):
        synthesize(model, {"x": (2, 3)})
    made = synthesize(model, {"x": (2, 3)}, random_params=True)
    assert made.params == {"b": (4,)}


def test_an_init_op_that_cannot_run_is_skipped_and_its_blobs_made_up(tmp_path: Path) -> None:
    predict = _net(Op("FC", ["data", "w", "b"], ["y"]), inputs=("data", "w", "b"), outputs=("y",))
    init = _net(
        Op("ConstantFill", [], ["data"], args={"shape": [1], "value": 0.0}),
        Op("Load", [], ["w", "b"], args={"db": str(tmp_path / "absent"), "db_type": "lmdb"}),
    )
    model = Model(predict, init)
    made = synthesize(model)
    (skipped,) = made.skipped_ops
    assert (skipped.net, skipped.index, skipped.type) == ("init_net", 1, "Load")
    assert "does not exist" in skipped.reason
    assert set(made.params) == {"w", "b"}
    assert made.placeholders == {"data": "ConstantFill of shape 1"}
    assert made.inputs[0].shape[0] >= 1 and len(made.inputs[0].shape) == 2
    stripped = without_init_ops(model, [skipped.index])
    np.testing.assert_array_equal(run_model(stripped, made.feeds)["y"], made.outputs["y"])
    with pytest.raises(InvalidNetError):
        synthesize(model, random_params=False)


def test_an_init_parameter_that_does_not_fit_is_replaced_and_said_so() -> None:
    predict = _net(
        Op("Conv", ["x", "w", "b"], ["y"], args={"kernel": 2, "order": "NHWC"}),
        outputs=("y",),
    )
    init = _net(
        Op("GivenTensorFill", [], ["w"], args={"shape": [1, 1, 2, 2], "values": [1.0] * 4}),
        Op("GivenTensorFill", [], ["b"], args={"shape": [1], "values": [0.0]}),
    )
    model = Model(predict, init)
    made = synthesize(model)
    assert "w" in made.replaced and "kernel [2, 2]" in made.replaced["w"]
    assert made.params["w"][1:3] == (2, 2)
    with pytest.raises(ExecutionError, match="kernel"):  # the user's data: their error
        synthesize(model, {"x": (1, 5, 5, 2)})
    assert "w" in synthesize(model, {"x": (1, 5, 5, 2)}, random_params=True).replaced


def test_quantized_readers_get_int8_data() -> None:
    net = _net(
        Op("Int8FC", ["x", "w", "b"], ["y"], args={"Y_scale": 0.1, "Y_zero_point": 128}),
        inputs=("x", "w", "b"),
        outputs=("y",),
    )
    made = synthesize(Model(net))
    assert isinstance(made.feeds["x"], Int8Tensor)
    assert isinstance(made.feeds["w"], Int8Tensor) and isinstance(made.feeds["b"], Int8Tensor)
    assert made.feeds["b"].values.dtype == np.int32
    assert isinstance(made.outputs["y"], Int8Tensor)
    # reported as its values' dtype, which an ONNX export's input takes (it said float32)
    (x,) = made.inputs
    assert x.dtype == "uint8"


def test_inputs_shaped_by_the_net_are_retried_until_it_runs() -> None:
    """A Reshape to the input's own dims picked in another order fits only a shape whose dims
    multiply right: the generic shapes are tried in turn."""
    net = _net(
        Op("Shape", ["data"], ["shape"]),
        Op("GivenTensorInt64Fill", [], ["pick"], args={"shape": [3], "values": [0, 0, 1]}),
        Op("Gather", ["shape", "pick"], ["dims"]),
        Op("Reshape", ["data", "dims"], ["out", "old"]),
        inputs=("data",),
        outputs=("out",),
    )
    made = synthesize(Model(net))
    assert made.outputs["out"].size == made.feeds["data"].size


def test_missing_outputs_are_reported_not_raised() -> None:
    made = synthesize(Model(_net(outputs=("never",))))
    assert made.missing_outputs == ["never"] and made.outputs == {}


def test_role_makers_cover_the_readers_the_real_files_have() -> None:
    for key in [("SparseLengthsSum", 1), ("GenerateProposals", 3), ("GatherRanges", 1)]:
        assert key in ROLES

"""graphtools.testing: feeds, model comparison and its failure table, random parameters."""

from __future__ import annotations

import numpy as np
import pytest

from graphtools.errors import InvalidNetError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.testing import (
    assert_models_equivalent,
    compare_models,
    compare_outputs,
    make_feeds,
    model_inputs,
    random_params,
)


def _model(scale: float = 2.0, extra_output: bool = False) -> Model:
    init = Net([Op("GivenTensorFill", [], ["w"], args={"shape": (3,), "values": [1.0, 2.0, 3.0]})])
    ops = [Op("Mul", ["x", "w"], ["y"]), Op("Scale", ["y"], ["z"], args={"scale": scale})]
    outputs = ["z"]
    if extra_output:
        ops.append(Op("Relu", ["z"], ["r"]))
        outputs.append("r")
    return Model(Net(ops, ["x", "w"], outputs, name="m"), init)


def test_make_feeds_covers_inputs_not_produced_by_init_net() -> None:
    model = _model()
    assert model_inputs(model) == ["x"]
    feeds = make_feeds(model, {"x": (2, 3)}, seed=4)
    assert list(feeds) == ["x"] and feeds["x"].dtype == np.float32 and feeds["x"].shape == (2, 3)
    np.testing.assert_array_equal(feeds["x"], make_feeds(model, {"x": (2, 3)}, seed=4)["x"])
    with pytest.raises(InvalidNetError, match=r"no shape given for model inputs \['x'\]"):
        make_feeds(model, {})


def test_equivalent_models_pass_and_report_zero_difference() -> None:
    assert_models_equivalent(_model(), _model(), shapes={"x": (2, 3)})
    diffs = compare_models(_model(), _model(), shapes={"x": (2, 3)})
    assert [(d.name, d.ok, d.max_abs) for d in diffs] == [("z", True, 0.0)]


def test_different_values_fail_with_a_table() -> None:
    with pytest.raises(AssertionError) as info:
        assert_models_equivalent(_model(2.0), _model(2.001), shapes={"x": (2, 3)})
    text = str(info.value)
    assert "output  ok  max_abs" in text and "\nz       NO" in text
    (diff,) = compare_models(_model(2.0), _model(2.001), shapes={"x": (2, 3)})
    assert diff.max_rel == pytest.approx(0.0005, rel=1e-3)
    assert_models_equivalent(_model(2.0), _model(2.001), shapes={"x": (2, 3)}, rtol=1e-3)


def test_output_name_mismatch_is_a_failure() -> None:
    feeds = {"x": np.ones((1, 3), np.float32)}
    diffs = compare_models(_model(), _model(extra_output=True), feeds)
    assert [(d.name, d.ok, d.reason) for d in diffs] == [
        ("z", True, ""),
        ("r", False, "missing before"),
    ]
    with pytest.raises(AssertionError, match="missing after"):
        assert_models_equivalent(_model(extra_output=True), _model(), feeds)


def _two_outputs(order: list[str], *, swapped: bool = False) -> Model:
    first, second = ("b", "a") if swapped else ("a", "b")
    ops = [Op("Relu", ["x"], [first]), Op("Sigmoid", ["x"], [second])]
    return Model(Net(ops, ["x"], order, name="n"))


def test_outputs_of_the_same_names_are_matched_by_name_in_any_order() -> None:
    """Declaring the same outputs in another order changes nothing; swapping what two
    outputs compute is a difference, even when their declared order is swapped too."""
    shapes = {"x": (2, 3)}
    assert_models_equivalent(_two_outputs(["a", "b"]), _two_outputs(["b", "a"]), shapes=shapes)
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(
            _two_outputs(["a", "b"]), _two_outputs(["b", "a"], swapped=True), shapes=shapes
        )
    renamed = Model(Net([Op("Relu", ["x"], ["p"]), Op("Sigmoid", ["x"], ["q"])], ["x"], ["p", "q"]))
    assert_models_equivalent(_two_outputs(["a", "b"]), renamed, shapes=shapes)  # by position


def test_shape_and_dtype_differences_are_failures() -> None:
    before = Model(Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"]))
    reshaped = Model(Net([Op("Reshape", ["x"], ["y", "old"], args={"shape": (-1,)})], ["x"], ["y"]))
    cast = Model(Net([Op("Cast", ["x"], ["y"], args={"to": 13})], ["x"], ["y"]))
    feeds = {"x": np.abs(np.ones((2, 2), np.float32))}
    assert compare_models(before, reshaped, feeds)[0].reason == "shape differs"
    assert compare_models(before, cast, feeds)[0].reason == "dtype float32 != float64"


def test_random_params_make_a_runnable_conv_bn_fc_net() -> None:
    net = Net(
        [
            Op("Conv", ["data", "c1_w", "c1_b"], ["c1"], args={"kernel": 3, "pad": 1}),
            Op("SpatialBN", ["c1", "s", "b", "m", "v"], ["bn"], args={"is_test": 1}),
            Op("Relu", ["bn"], ["bn"]),
            Op("Conv", ["bn", "dw_w"], ["dw"], args={"kernel": 3, "group": 6, "order": "NCHW"}),
            Op("Mul", ["dw", "mul_b"], ["mul"], args={"broadcast": 1, "axis": 1}),
            Op("FC", ["mul", "fc_w", "fc_b"], ["fc"]),
            Op("Softmax", ["fc"], ["prob"]),
        ],
        external_inputs=["data"],
        external_outputs=["prob"],
        name="tiny",
    )
    params = random_params(net, {"data": (2, 3, 8, 8)}, seed=1, channels=6)
    assert params["c1_w"].shape == (6, 3, 3, 3) and params["c1_b"].shape == (6,)
    assert params["dw_w"].shape == (6, 1, 3, 3) and params["mul_b"].shape == (6,)
    assert params["fc_w"].shape == (6, 6 * 6 * 6) and (params["v"] > 0).all()
    out = run_model(Model(net), {"data": np.ones((2, 3, 8, 8), np.float32), **params})
    np.testing.assert_allclose(out["prob"].sum(axis=1), 1.0, rtol=1e-5)
    again = random_params(net, {"data": (2, 3, 8, 8)}, seed=1, channels=6)
    np.testing.assert_array_equal(params["fc_w"], again["fc_w"])


def test_random_params_names_what_it_cannot_derive() -> None:
    net = Net([Op("Gather", ["table", "idx"], ["y"])], name="g")
    with pytest.raises(InvalidNetError, match=r"op #0 \(Gather\).*'idx'.*param_shapes"):
        random_params(net, {"table": (4, 2)})


def test_random_params_honours_param_shapes() -> None:
    net = Net([Op("FC", ["x", "w", "b"], ["y"])])
    params = random_params(net, {"x": (2, 5)}, param_shapes={"w": (3, 5), "b": (3,)})
    assert params["w"].shape == (3, 5) and params["b"].shape == (3,)
    assert random_params(net, {"x": (2, 5)}, param_shapes={"w": (3, 5)})["b"].shape == (3,)


def _conv(x: str, name: str, kernel: int = 1, **args: int) -> Op:
    return Op("Conv", [x, f"{name}_w", f"{name}_b"], [name], args={"kernel": kernel, **args})


def _run(net: Net, params: dict[str, np.ndarray], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return run_model(Model(net), {"data": np.ones(shape, np.float32), **params})


def test_random_params_size_a_conv_for_the_grouped_ops_after_it() -> None:
    """A conv feeding a ChannelShuffle (group 4) then a grouped conv (group 6) outputs a
    multiple of lcm(4, 6) = 12, the least one at least ``channels``; the grouped conv's own
    output is a multiple of its group too."""
    net = Net(
        [
            _conv("data", "c1", kernel=3, pad=1),
            Op("ChannelShuffle", ["c1"], ["sh"], args={"group": 4, "kernel": 1}),
            _conv("sh", "g", group=6),
        ],
        ["data"],
        ["g"],
    )
    params = random_params(net, {"data": (1, 3, 4, 4)}, channels=8)
    assert params["c1_w"].shape == (12, 3, 3, 3) and params["c1_b"].shape == (12,)
    assert params["g_w"].shape == (12, 2, 1, 1)
    wider = random_params(net, {"data": (1, 3, 4, 4)}, channels=16)
    assert wider["c1_w"].shape == (24, 3, 3, 3)
    assert _run(net, params, (1, 3, 4, 4))["g"].shape == (1, 12, 4, 4)


def test_random_params_size_a_conv_from_a_forced_spatial_bn_scale() -> None:
    net = Net(
        [
            _conv("data", "c1"),
            Op("Relu", ["c1"], ["c1"]),
            Op("SpatialBN", ["c1", "s", "b", "m", "v"], ["bn"], args={"is_test": 1}),
        ],
        ["data"],
        ["bn"],
    )
    params = random_params(net, {"data": (1, 3, 2, 2)}, channels=8, param_shapes={"s": (5,)})
    assert params["c1_w"].shape == (5, 3, 1, 1)
    assert {params[k].shape for k in ("s", "b", "m", "v")} == {(5,)}
    assert _run(net, params, (1, 3, 2, 2))["bn"].shape == (1, 5, 2, 2)


def test_random_params_make_summed_convs_agree() -> None:
    """Sum(a, Concat(b, c)) makes a's count the sum of b's and c's; Sum(d, e) with d's weight
    forced gives e d's count."""
    net = Net(
        [
            _conv("data", "a"),
            _conv("data", "b"),
            _conv("data", "c", group=3),
            Op("Concat", ["b", "c"], ["bc", "split"]),
            Op("Sum", ["a", "bc"], ["s1"]),
            _conv("data", "d"),
            _conv("data", "e"),
            Op("Sum", ["e", "d"], ["s2"]),
        ],
        ["data"],
        ["s1", "s2"],
    )
    params = random_params(
        net, {"data": (1, 3, 2, 2)}, channels=8, param_shapes={"d_w": (10, 3, 1, 1)}
    )
    assert params["b_w"].shape == (8, 3, 1, 1) and params["c_w"].shape == (9, 1, 1, 1)
    assert params["a_w"].shape == (17, 3, 1, 1) and params["a_b"].shape == (17,)
    assert params["e_w"].shape == (10, 3, 1, 1) and params["d_b"].shape == (10,)
    out = _run(net, params, (1, 3, 2, 2))
    assert out["s1"].shape == (1, 17, 2, 2) and out["s2"].shape == (1, 10, 2, 2)


def test_random_params_name_the_op_whose_constraints_cannot_be_met() -> None:
    grouped = Net([_conv("data", "g", group=2)], ["data"], ["g"], name="n")
    with pytest.raises(InvalidNetError, match=r"op #0 \(Conv\) in net 'n': group 2 .* 3 channels"):
        random_params(grouped, {"data": (1, 3, 2, 2)})
    summed = Net(
        [_conv("data", "a"), _conv("data", "b"), Op("Sum", ["a", "b"], ["s"])], ["data"], ["s"]
    )
    shapes = {"a_w": (4, 3, 1, 1), "b_w": (5, 3, 1, 1)}
    with pytest.raises(InvalidNetError, match=r"op #2 \(Sum\).*4 and 5 cannot be made equal"):
        random_params(summed, {"data": (1, 3, 2, 2)}, param_shapes=shapes)
    # Mul broadcasts, so unequal channel counts are left to numpy.
    scaled = Net([Op("Mul", ["data", "gate"], ["y"])], ["data", "gate"], ["y"])
    assert random_params(scaled, {"data": (1, 3, 2, 2), "gate": (1, 1, 2, 2)}) == {}


@pytest.mark.parametrize(
    ("before", "after", "atol", "equal"),
    [
        (np.int64([2**60]), np.int64([2**60 + 1]), 0.0, False),  # float64 rounds them equal
        (np.int64([1_000_000]), np.int64([1_000_010]), 1e-6, False),  # rtol does not apply
        (np.int64([-(2**63)]), np.int64([2**63 - 1]), 0.0, False),  # no overflow
        (np.uint64([2**64 - 1]), np.uint64([0]), 0.0, False),
        (np.int32([5, -7]), np.int32([5, -7]), 0.0, True),
        (np.uint8([10, 200]), np.uint8([11, 199]), 1.0, True),  # within one whole unit
        (np.uint8([10, 200]), np.uint8([12, 200]), 1.0, False),
        (np.bool_([True, False]), np.bool_([True, True]), 1e-6, False),
    ],
)
def test_integer_outputs_compare_exactly_in_whole_units(
    before: np.ndarray, after: np.ndarray, atol: float, equal: bool
) -> None:
    (diff,) = compare_outputs({"y": before}, {"y": after}, rtol=1e-5, atol=atol)
    assert diff.ok is equal, diff
    assert (diff.mismatches == 0) is equal


def test_the_statistics_of_an_output_that_differs_say_so() -> None:
    """A zero turned non-zero, a NaN turned a number and inf turned -inf showed max rel 0
    (and max abs 0 for the NaN) beside a verdict of 'different'; equal infinities and NaNs
    differ by nothing."""
    before = np.float32([0.0, np.nan, np.inf, np.inf, np.nan, 1.0])
    cases = {
        "zero": (np.float32([0.0]), np.float32([2.0]), 2.0, np.inf),
        "nan": (np.float32([np.nan]), np.float32([1.0]), np.inf, np.inf),
        "infinity": (np.float32([np.inf]), np.float32([-np.inf]), np.inf, np.inf),
        "same": (before, before.copy(), 0.0, 0.0),
    }
    for name, (a, b, max_abs, max_rel) in cases.items():
        (diff,) = compare_outputs({name: a}, {name: b})
        assert diff.ok is (name == "same"), name
        assert (diff.max_abs, diff.max_rel) == (max_abs, max_rel), name
    import json

    from graphtools.cli.common import diff_json

    (zero,) = compare_outputs({"zero": cases["zero"][0]}, {"zero": cases["zero"][1]})
    data = json.loads(json.dumps(diff_json(zero), allow_nan=False))  # valid JSON
    assert data["max_abs"] == 2.0 and data["max_rel"] is None


def test_nans_in_both_outputs_are_counted() -> None:
    """A NaN on both sides counts as equal: how many is said (verify notes it), so that a
    made-up input outside an op's domain does not pass for a comparison."""
    before = np.float32([np.nan, 1.0, np.nan, 2.0])
    (diff,) = compare_outputs({"y": before}, {"y": before.copy()})
    assert diff.ok and diff.nan_both == 2
    (same,) = compare_outputs({"y": before}, {"y": before})  # one array: the fast path
    assert same.ok and same.nan_both == 2
    (ints,) = compare_outputs({"i": np.int64([1, 2])}, {"i": np.int64([1, 2])})
    assert ints.nan_both == 0


def test_a_zero_within_atol_has_no_infinite_relative_error_and_atol_may_be_infinite() -> None:
    (relu,) = compare_outputs({"r": np.float32([0.0, 1.0])}, {"r": np.float32([1e-9, 1.0])})
    assert relu.ok and relu.max_rel == 0.0
    ints = {"i": np.int64([1, 2**62])}, {"i": np.int64([5, 0])}
    assert compare_outputs(*ints, atol=float("inf"))[0].ok
    assert not compare_outputs(*ints, atol=float("nan"))[0].ok


def test_the_histogram_of_equal_differences_starts_at_zero() -> None:
    """With every |difference| 0, numpy centred its bins on 0: bins of an absolute value
    from -0.5 (verify -v printed them); spread differences keep their own range."""
    from graphtools.testing import compare_outputs

    same = compare_outputs({"y": np.ones(4)}, {"y": np.ones(4)})[0]
    counts, edges = same.histogram
    assert edges[0] == 0.0 and edges[-1] == 1.0 and counts[0] == 4
    spread = compare_outputs({"y": np.ones(4)}, {"y": np.array([3.0, 3.5, 3.0, 3.0])})[0]
    assert (spread.histogram[1][0], spread.histogram[1][-1]) == (2.0, 2.5)


def test_a_shape_given_for_an_init_net_placeholder_feeds_it() -> None:
    """The init_net fills ``data`` with a one-element placeholder: a shape given for it was
    ignored (the input counted as a parameter), and the Conv ran on the placeholder."""
    from graphtools.testing import assert_models_equivalent, make_feeds

    w = np.random.default_rng(0).standard_normal((2, 3, 3, 3)).astype(np.float32)
    init = Net(
        [
            Op("ConstantFill", [], ["data"], args={"shape": [1], "value": 0.0}),
            Op("GivenTensorFill", [], ["w"], args={"shape": list(w.shape), "values": w.ravel()}),
        ]
    )
    predict = Net([Op("Conv", ["data", "w"], ["y"], args={"kernel": 3})], ["data", "w"], ["y"])
    model = Model(predict, init)
    assert make_feeds(model, {"data": (1, 3, 5, 5)})["data"].shape == (1, 3, 5, 5)
    assert_models_equivalent(model, model.copy(), shapes={"data": (1, 3, 5, 5)})


def test_a_net_declaring_no_outputs_is_compared_after_a_rename_of_them() -> None:
    """Both declare no outputs, and a pass renamed the blob nothing reads: the check said
    'external output softmax was never written' (of a net declaring none); the renamed
    output is compared by position, and a changed value still fails."""
    before = Model(Net([Op("Relu", ["x"], ["r"]), Op("Softmax", ["r"], ["prob"])], ["x"], []))
    renamed = Model(Net([Op("Relu", ["x"], ["r"]), Op("Softmax", ["r"], ["p_prob"])], ["x"], []))
    feeds = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}
    assert_models_equivalent(before, renamed, feeds)
    broken = Model(Net([Op("Sigmoid", ["x"], ["r"]), Op("Softmax", ["r"], ["p_prob"])], ["x"], []))
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(before, broken, feeds)

"""Input shapes guessed from the first reader, checked against the whole net by the shape
analysis; placeholders; the model summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from graphtools.analysis.input_shapes import (
    GENERIC_SHAPE,
    guess_generic,
    guess_input_shapes,
    placeholder_inputs,
)
from graphtools.analysis.shapes import infer_model_shapes
from graphtools.analysis.summary import summarize
from graphtools.errors import InvalidNetError
from graphtools.ir import Model, Net, Op
from graphtools.serde import load_model, load_model_dir, save_model


def _classifier(fc_features: int) -> Model:
    """Conv 3x3 (8 from 3 channels) -> 2x2 pool -> FC whose weight pins the image size."""
    predict = Net(
        [
            Op("Conv", ["data", "w", "b"], ["c"], args={"kernel": 3, "pad": 1}),
            Op("MaxPool", ["c"], ["p"], args={"kernel": 2, "stride": 2}),
            Op("FC", ["p", "fw", "fb"], ["y"]),
        ],
        ["data", "w", "b", "fw", "fb"],
        ["y"],
        name="cls",
    )
    init = Net(
        [
            Op("ConstantFill", [], ["data"], args={"shape": [1], "value": 0.0}),
            Op("XavierFill", [], ["w"], args={"shape": [8, 3, 3, 3]}),
            Op("ConstantFill", [], ["b"], args={"shape": [8]}),
            Op("XavierFill", [], ["fw"], args={"shape": [10, fc_features]}),
            Op("ConstantFill", [], ["fb"], args={"shape": [10]}),
        ]
    )
    return Model(predict, init)


def test_an_fc_weight_pins_the_image_size() -> None:
    model = _classifier(8 * 16 * 16)
    (guess,) = guess_input_shapes(model, ["data"], {}).values()
    assert guess.shape == (1, 3, 32, 32)
    assert "3 channels from the w weight" in guess.reason
    skipped = guess_input_shapes(model, ["data"], {}, skip={"data": 2})["data"]
    assert skipped.shape[2] not in (28, 32)


def test_a_placeholder_fill_is_found_and_a_bad_hint_is_not_taken() -> None:
    model = _classifier(8 * 14 * 14)
    assert placeholder_inputs(model) == {"data": ((1,), "ConstantFill of shape 1")}
    hint = {"data": ((1,), "placeholder")}
    assert guess_input_shapes(model, ["data"], {}, hint)["data"].shape == (1, 3, 28, 28)


def test_show_types_a_placeholder_input_as_verify_feeds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` of a pair whose init_net fills the data blob with a placeholder listed no input
    and typed the output ``?[?]``, counting the placeholder as a parameter, while verify fed
    it as an input: both now take it as an input, at the same guessed shape."""
    save_model(_classifier(8 * 16 * 16), tmp_path / "pair")
    code, out, err = run_cli(capsys, "show", str(tmp_path / "pair"), "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert [(b["name"], b["type"]) for b in shown["inputs"]] == [("data", "float32[1, 3, 32, 32]")]
    assert [(b["name"], b["type"]) for b in shown["outputs"]] == [("y", "float32[1, 10]")]
    assert "data" not in [b["name"] for b in shown["params"]]
    assert "input 'data': the init_net fills it with a placeholder (ConstantFill" in err
    code, out, _ = run_cli(capsys, "verify", str(tmp_path / "pair"))
    assert code == 0 and "input data: float32[1, 3, 32, 32] (guessed" in out


def test_the_init_nets_small_integer_fills_are_followed_to_the_reshape_before_an_fc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiny export flattens with Reshape(x, Concat(ExpandDims(Gather(Shape(x), idx)),
    minus_one)), idx and minus_one filled by the init_net: their values were not followed, so
    the analysis took 28x28 though the FC takes 6x6 only (show and extract guessed 28x28,
    verify 6x6, and prob was typed [?, 3]). With the fills' values the Reshape is static."""
    model = load_model_dir(FIXTURES / "models" / "tiny_export")
    info = infer_model_shapes(model, {"data": (1, 1, 6, 6)})
    assert str(info.final("flat")) == "float32[1, 8]" and str(info.final("prob")) == "float32[1, 3]"
    with pytest.raises(InvalidNetError, match="FC"):
        infer_model_shapes(model, {"data": (1, 1, 28, 28)})
    assert guess_input_shapes(model, ["data"], {})["data"].shape == (1, 1, 6, 6)
    source = tmp_path / "tiny"
    source.mkdir()
    for name in ("predict_net.pbtxt", "init_net.pbtxt"):  # no shapes.txt: guessed
        (source / name).write_bytes((FIXTURES / "models" / "tiny_export" / name).read_bytes())
    code, out, _ = run_cli(capsys, "show", str(source), "--json")
    shown = json.loads(out)
    assert code == 0 and shown["inputs"][0]["type"] == "float32[1, 1, 6, 6]"
    code, out, _ = run_cli(capsys, "verify", str(source))
    assert code == 0 and "input data: float32[1, 1, 6, 6] (guessed" in out


def test_fc_data_and_generic_inputs() -> None:
    net = Net(
        [Op("FC", ["x", "w", "b"], ["y"], args={"axis": 2}), Op("Sigmoid", ["z"], ["s"])],
        ["x", "z"],
        ["y", "s"],
    )
    init = Net([Op("XavierFill", [], ["w"], args={"shape": [4, 6]})])
    guesses = guess_input_shapes(Model(net, init), ["x", "z"], {})
    assert guesses["x"].shape == (1, 1, 6)
    assert guesses["z"].shape == GENERIC_SHAPE
    assert guess_generic(Model(net, init), "z", {"x": (1, 1, 6)}).shape == GENERIC_SHAPE


def test_show_lists_the_inputs_verify_feeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Weights read only inside an If's branch were listed as inputs of unknown type, a
    detector's im_info (read at position 2) as a missing parameter, and an input declared
    twice twice: show now says what verify feeds (data, im_info) and makes up (the weights)."""
    branch = Net([Op("Conv", ["x", "branch_w"], ["z"], args={"kernel": 1})], name="else")
    ops = [
        Op("Conv", ["data", "w"], ["x"], args={"kernel": 1}),
        Op(
            "If",
            ["cond"],
            ["z"],
            args={"then_net": Net([Op("Copy", ["x"], ["z"])]), "else_net": branch},
        ),
        Op("GenerateProposals", ["scores", "deltas", "im_info", "anchors"], ["rois", "probs"]),
    ]
    net = Net(
        ops,
        ["data", "data", "w", "cond", "branch_w", "scores", "deltas", "im_info", "anchors"],
        ["z", "rois"],
    )
    save_model(Model(net), tmp_path / "pair")
    code, out, err = run_cli(capsys, "show", str(tmp_path / "pair"), "--json")
    assert code == 0, err
    document = json.loads(out)
    inputs = [blob["name"] for blob in document["inputs"]]
    assert inputs == ["data", "cond", "scores", "im_info", "anchors"]
    assert sorted(document["missing_params"]) == ["branch_w", "deltas", "w"]


def test_summary_of_a_real_pair(real_fixtures: Path) -> None:
    folder = real_fixtures / "HungMingWu-pytorch_caffe2_cpp_binding"
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    summary = summarize(model, {"1": (1, 1, 28, 28)})
    assert summary.ops == len(model.predict_net)
    assert sum(count for _, count in summary.op_types) == summary.ops
    assert [b.name for b in summary.inputs] == ["1"]
    assert summary.outputs[0].type.startswith("float32[1, ")
    assert summary.param_values > 0 and summary.missing_params == []
    assert summary.devices == [("CPU:0", summary.ops)]  # the net's own DeviceOption

"""Which init_net goes with a predict_net file, and which models a folder holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli

from graphtools.errors import SerdeError
from graphtools.ir import Model, Net, Op
from graphtools.serde import load_model, save_model
from graphtools.serde.pairing import (
    discover_models,
    find_init_beside,
    inits_in_two_formats,
    nets_left_beside,
)


def _touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("name: 'x'\n")


@pytest.mark.parametrize(
    ("predict", "init"),
    [
        ("predict_net.pb", "init_net.pb"),
        ("mobilenet_pred_net.pb", "mobilenet_init_net.pb"),
        ("mobileNetPredict.pb", "mobileNetInit.pb"),
        ("fc_3d_predict.pbtxt", "fc_3d_init.pbtxt"),
        ("concat.pbtxt", "concat_init.pbtxt"),
        ("model.pb", "model_init.pb"),
        ("lstm_predict_net.pbtxt", "lstm_init_net.pbtxt"),
    ],
)
def test_the_usual_spellings_pair(tmp_path: Path, predict: str, init: str) -> None:
    _touch(tmp_path, predict, init, "unrelated.pb")
    assert find_init_beside(tmp_path / predict) == tmp_path / init


def test_no_partner_ambiguity_or_an_init_file_itself(tmp_path: Path) -> None:
    _touch(tmp_path, "predict_net.pb", "squeeze_predict_net.pb", "init_net.pb", "init_net.pbtxt")
    assert find_init_beside(tmp_path / "squeeze_predict_net.pb") is None
    assert find_init_beside(tmp_path / "predict_net.pb") is None  # two spellings: ask
    assert find_init_beside(tmp_path / "init_net.pb") is None
    both = [tmp_path / "init_net.pb", tmp_path / "init_net.pbtxt"]
    assert inits_in_two_formats(tmp_path / "predict_net.pb") == both
    assert inits_in_two_formats(tmp_path / "squeeze_predict_net.pb") == []
    assert inits_in_two_formats(tmp_path / "init_net.pb") == []


def test_a_folder_of_both_formats_runs_no_init_net_as_a_model(tmp_path: Path) -> None:
    """A folder holding a pair in both formats (predict_net and init_net, .pb and .pbtxt) is
    ambiguous as one model; as a batch it holds the two predict_nets, never an init_net run
    as if it were a model."""
    _touch(tmp_path, "predict_net.pb", "predict_net.pbtxt", "init_net.pb", "init_net.pbtxt")
    _touch(tmp_path, "orphan_init_net.pbtxt", "glow.pbtxt", "glow_init.pbtxt")
    refs = discover_models([tmp_path])
    found = {(r.path.name, r.init and r.init.name) for r in refs}
    assert found == {
        ("predict_net.pb", None),
        ("predict_net.pbtxt", None),
        ("glow.pbtxt", "glow_init.pbtxt"),
    }


def test_discovery_finds_model_folders_and_loose_pairs(tmp_path: Path) -> None:
    _touch(tmp_path / "zoo" / "resnet", "predict_net.pb", "init_net.pb")
    _touch(tmp_path / "zoo" / "vgg", "predict_net.pbtxt")
    _touch(tmp_path / "loose", "a_predict_net.pb", "a_init_net.pb", "c_pred_net.pb", "b.pbtxt")
    (tmp_path / "loose" / "notes.txt").write_text("not a net")
    refs = discover_models([tmp_path / "zoo", tmp_path / "loose"])
    found = {(r.path.relative_to(tmp_path).as_posix(), r.init and r.init.name) for r in refs}
    assert found == {
        ("zoo/resnet", None),
        ("zoo/vgg", None),
        ("loose/a_predict_net.pb", "a_init_net.pb"),
        ("loose/b.pbtxt", None),
        ("loose/c_pred_net.pb", None),
    }
    names = [r.name for r in refs]
    assert len(set(names)) == len(names) and "resnet" in names
    model_folder = discover_models([tmp_path / "zoo" / "resnet"])
    assert [(r.path, r.init) for r in model_folder] == [(tmp_path / "zoo" / "resnet", None)]
    with pytest.raises(SerdeError, match="no such file"):
        discover_models([tmp_path / "absent"])


def test_a_pipe_in_a_batch_is_named_for_what_it_is(tmp_path: Path) -> None:
    pipe = tmp_path / "piped.onnx"
    os.mkfifo(pipe)
    with pytest.raises(SerdeError, match="neither a file nor a folder"):
        discover_models([pipe])


def test_the_real_fixtures_pair_as_published(real_fixtures: Path) -> None:
    glow = real_fixtures / "glow" / "caffe2Models"
    assert find_init_beside(glow / "fc_predict_net.pbtxt") == glow / "fc_init_net.pbtxt"
    assert find_init_beside(glow / "convtranspose.pbtxt") == glow / "convtranspose_init.pbtxt"
    mask = real_fixtures / "caffe2-models" / "mask_rcnn_2go" / "2018-12" / "int8"
    assert find_init_beside(mask / "model.pb") == mask / "model_init.pb"


def test_batch_names_are_the_paths_under_the_folder_given(tmp_path: Path) -> None:
    """Issue 21 item 10: every model of a folder is named by its path under that folder (the
    names used to differ in shape: ``2018-12_fp32`` beside ``mask_rcnn_2go_fp32``), and two
    files of the same name in different folders get different names."""
    root = tmp_path / "mask_rcnn_2go"
    _touch(root / "2018-12" / "fp32", "model.pb")
    _touch(root / "2018-12" / "int8", "model.pb", "model_init.pb")
    _touch(root / "fp32", "model.pbtxt")
    _touch(root / "int8", "model.pbtxt")
    names = [r.name for r in discover_models([root])]
    assert names == ["2018-12_fp32", "2018-12_int8", "fp32", "int8"]
    files = [root / "fp32" / "model.pbtxt", root / "2018-12" / "fp32" / "model.pb"]
    assert [r.name for r in discover_models(files)] == ["fp32_model", "2018-12_fp32_model"]
    twins = [root / "fp32" / "model.pbtxt", root / "fp32" / "model.pbtxt"]
    assert [r.name for r in discover_models(twins)] == ["model", "model_2"]


def test_a_folder_holding_no_model_is_refused_and_links_back_are_not_followed(
    tmp_path: Path,
) -> None:
    """A batch over a folder with nothing to check passed as an empty success; a link to a
    folder above ran its models again and again; ``MODEL.ONNX`` was skipped."""
    (tmp_path / "empty").mkdir()
    _touch(tmp_path / "other", "notes.txt", ".predict_net.pb.1234.graphtools-tmp")
    for folder in ("empty", "other"):
        with pytest.raises(SerdeError, match="no model found in this folder"):
            discover_models([tmp_path / folder])
    _touch(tmp_path / "zoo", "a.onnx", "B.ONNX")
    (tmp_path / "zoo" / "sub").mkdir()
    (tmp_path / "zoo" / "sub" / "up").symlink_to(tmp_path / "zoo")
    refs = discover_models([tmp_path / "zoo"])
    assert sorted(r.path.name for r in refs) == ["B.ONNX", "a.onnx"]


def test_a_folder_without_a_pair_says_what_it_lacks_onnx_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty folder: `run -o X.onnx` said several models go to a folder, `show` and
    load_model named only predict_net files; a folder holding .onnx files names the file to
    load."""
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "run", str(tmp_path / "empty"), "-o", str(tmp_path / "x.onnx"))
    assert code == 2 and "no model found in this folder" in err
    code, _, err = run_cli(capsys, "show", str(tmp_path / "empty"))
    assert code == 2 and "no .onnx model either" in err
    _touch(tmp_path / "zoo", "a.onnx", "b.onnx")
    with pytest.raises(SerdeError, match=r"an ONNX model loads from its file: .*a\.onnx"):
        load_model(tmp_path / "zoo")


def test_a_folder_of_several_models_is_one_batch_to_run_and_refused_by_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pair with fc_predict_net/fc_init_net beside it (glow's folder): show read the pair
    and verify ran both; show now refuses, naming both models, and run takes the batch."""
    model = Model(Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"]))
    folder = tmp_path / "two"
    save_model(model, folder)
    save_model(model, tmp_path / "other")
    (tmp_path / "other" / "predict_net.pb").rename(folder / "fc_predict_net.pb")
    code, _, err = run_cli(capsys, "show", str(folder))
    assert code == 2 and "holds 2 models (fc_predict_net.pb, predict_net.pb)" in err
    code, _, err = run_cli(capsys, "run", str(folder), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fc_predict_net", "predict_net"]
    code, out, err = run_cli(capsys, "show", str(folder / "fc_predict_net.pb"))
    assert code == 0 and "1 ops" in out, err


def test_a_batch_name_fits_a_file_name(tmp_path: Path) -> None:
    """Names joined from nested folders passed 255 bytes and failed as an internal error."""
    deep = tmp_path / "zoo" / ("a" * 90) / ("b" * 90) / ("c" * 90)
    _touch(deep, "model.onnx")
    _touch(tmp_path / "zoo", "short.onnx")
    refs = discover_models([tmp_path / "zoo"])
    names = sorted(r.name for r in refs)
    assert names[-1] == "short" and len(names[0].encode()) <= 200
    assert names[0].startswith("a" * 90 + "_" + "b" * 90)
    out = tmp_path / "out" / names[0]
    out.mkdir(parents=True)  # a folder of that name can be made


def test_a_folder_holding_more_than_its_pair_is_a_batch(tmp_path: Path) -> None:
    """A folder whose pair find_model_files finds was one model to a batch, whatever else it
    held: a folder of model folders with a loose tinyPredict.pb ran tinyPredict alone, and
    glow's folder of 139 pairs (one of them predict_net.pbtxt) ran as one 1-op model, exit 0."""
    _touch(tmp_path / "zoo", "tinyPredict.pb")
    _touch(tmp_path / "zoo" / "resnet", "predict_net.pb", "init_net.pb")
    _touch(tmp_path / "glow", "predict_net.pbtxt", "init_net.pbtxt")
    _touch(tmp_path / "glow", "fc_predict_net.pbtxt", "fc_init_net.pbtxt", "relu.pbtxt")
    _touch(tmp_path / "plain", "predict_net.pb", "init_net.pb", "labels.txt")
    refs = discover_models([tmp_path / "zoo", tmp_path / "glow", tmp_path / "plain"])
    found = {(r.path.relative_to(tmp_path).as_posix(), r.init and r.init.name) for r in refs}
    assert found == {
        ("zoo/tinyPredict.pb", None),
        ("zoo/resnet", None),
        ("glow/predict_net.pbtxt", "init_net.pbtxt"),
        ("glow/fc_predict_net.pbtxt", "fc_init_net.pbtxt"),
        ("glow/relu.pbtxt", None),
        ("plain", None),
    }


def test_the_nets_a_model_folder_leaves_out_are_said(
    real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AICamera's history/ holds shufflenet_predict.pb and two versioned
    squeeze_predict_net_NNNN.pb: show and a batch read shufflenet alone, without a word of
    the others. Now both name what they leave out."""
    from conftest import run_cli

    aicamera = real_fixtures / "facebookarchive-AICamera"
    history = aicamera / "history"
    predict, others = nets_left_beside(history)
    assert predict.name == "shufflenet_predict.pb"
    assert [p.name for p in others] == [
        "squeeze_predict_net_5301.pb",
        "squeeze_predict_net_6185.pb",
    ]
    said = "the model is shufflenet_predict.pb; squeeze_predict_net_5301.pb, "
    code, _, err = run_cli(capsys, "show", str(history))
    assert code == 0 and said in err, err
    code, _, err = run_cli(capsys, "run", str(aicamera), "-o", str(tmp_path / "out"))
    assert code == 0 and said in err, err
    _touch(tmp_path / "plain", "predict_net.pb", "init_net.pb", "labels.txt")
    assert nets_left_beside(tmp_path / "plain")[1] == []  # a label file is no net

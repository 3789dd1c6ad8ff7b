"""A text net written back unchanged is the file it was loaded from, byte for byte
(``graphtools.serde.loaded_text``): a hand-written text pair keeps its tabs, comments, field
order and an old Caffe2's ``cuda_gpu_id``; an edited net is printed from the IR, its unchanged
partner still as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from graphtools.cli import main
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model, mapped_file, save_model

_PREDICT = """# written by hand: the comment, the tabs and the field order are the author's
name: "tiny"
op {
\toutput: "y"
\tinput: "x"
\tinput: "w"
\ttype: "Mul"
\tdevice_option { device_type: 1 cuda_gpu_id: 0 }
}
op { input: "y" output: "dead" type: "Relu" }
external_input: "x"
external_input: "w"
external_output: "y"
"""
_INIT = """op {
\ttype: "GivenTensorFill"   # the weight
\toutput: "w"
\targ { name: "shape" ints: 2 }
\targ { name: "values" floats: [1.5, -2] }
}
"""


@pytest.fixture
def pair(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "predict_net.pbtxt").write_text(_PREDICT)
    (folder / "init_net.pbtxt").write_text(_INIT)
    return folder


def _parsed(path: Path) -> caffe2_pb2.NetDef:
    return text_format.Parse(
        path.read_text().replace("cuda_gpu_id", "device_id"), caffe2_pb2.NetDef()
    )


def test_an_unchanged_text_pair_is_written_as_it_was_loaded(pair: Path, tmp_path: Path) -> None:
    save_model(load_model(pair), tmp_path / "out")
    for name in ("predict_net.pbtxt", "init_net.pbtxt"):
        assert (tmp_path / "out" / name).read_bytes() == (pair / name).read_bytes()
    assert main(["run", "-q", "-p", "", str(pair), "-o", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "init_net.pbtxt").read_text() == _INIT


def test_an_edited_net_is_printed_from_the_ir_and_its_partner_stays(
    pair: Path, tmp_path: Path
) -> None:
    model = load_model(pair)
    model.predict_net.remove_ops([1])
    save_model(model, tmp_path / "out")
    written = (tmp_path / "out" / "predict_net.pbtxt").read_text()
    assert written != _PREDICT and "#" not in written and "device_id: 0" in written
    expected = _parsed(pair / "predict_net.pbtxt")
    del expected.op[1]
    assert _parsed(tmp_path / "out" / "predict_net.pbtxt") == expected
    assert (tmp_path / "out" / "init_net.pbtxt").read_text() == _INIT
    assert list(load_model(tmp_path / "out").predict_net) == list(model.predict_net)


def test_a_text_net_written_as_binary_is_printed_from_the_ir(pair: Path, tmp_path: Path) -> None:
    save_model(load_model(pair), tmp_path / "out", text=False)
    written = caffe2_pb2.NetDef.FromString((tmp_path / "out" / "predict_net.pb").read_bytes())
    assert written == _parsed(pair / "predict_net.pbtxt")


@pytest.mark.parametrize("mapped", [False, True], ids=["kept", "mapped"])
def test_a_file_changed_on_disk_after_loading_is_not_what_is_written(
    pair: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: bool
) -> None:
    """The net loaded is written, whether its text was kept in memory or mapped (a large
    file, here every file): a map of a file changed since is not read, the IR is printed."""
    monkeypatch.setattr(mapped_file, "MAP_AT_LEAST", 1 if mapped else 1 << 40)
    model = load_model(pair)
    with (pair / "predict_net.pbtxt").open("r+") as handle:  # in place: same inode
        handle.write(_PREDICT.replace('"tiny"', '"evil"').replace("# written", "#  written"))
    save_model(model, tmp_path / "out")
    written = (tmp_path / "out" / "predict_net.pbtxt").read_text()
    assert "evil" not in written and '"tiny"' in written
    assert (written == _PREDICT) is not mapped

"""A large binary net keeps a map of its file, not a copy of its bytes
(``graphtools.serde.mapped_file``): it decodes and saves exactly as a net holding the bytes,
refuses to read a file changed on disk since, and survives the file being replaced by an
atomic write (``save_model`` over its own folder)."""

from __future__ import annotations

import importlib.util
from array import array
from pathlib import Path

import pytest

from graphtools.errors import SerdeError
from graphtools.ir import Op
from graphtools.serde import load_model, mapped_file, op_bytes, save_model, save_model_in_place

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A synthetic pair on disk, every file counting as large enough to map."""
    monkeypatch.setattr(mapped_file, "MAP_AT_LEAST", 1)
    folder = tmp_path / "model"
    folder.mkdir()
    synth.write_pair(*synth.make_synthetic_pair(300, seed=7), folder)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.pb"))}


def _with_args(op: Op) -> Op:
    """``op`` with a field the IR decodes from the file on first access (its arguments)."""
    return op.replace(args=op.args)


def test_a_mapped_net_saves_byte_for_byte_also_a_step_at_a_time(
    pair: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(op_bytes, "_WRITE_STEP", 7)  # runs of loaded ops cut mid-op
    model = load_model(pair)
    save_model(model, tmp_path / "out")
    assert _files(tmp_path / "out") == _files(pair)


def test_a_mapped_net_decodes_and_saves_edits_as_one_holding_its_bytes(
    pair: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapped = load_model(pair)
    monkeypatch.setattr(mapped_file, "MAP_AT_LEAST", 1 << 40)
    held = load_model(pair)
    for model in (mapped, held):
        net = model.predict_net
        net.replace_op(5, _with_args(net[5]).replace(name="renamed"))
    assert [op.args for op in mapped.predict_net] == [op.args for op in held.predict_net]
    save_model(mapped, tmp_path / "mapped")
    save_model(held, tmp_path / "held")
    assert _files(tmp_path / "mapped") == _files(tmp_path / "held") != _files(pair)


def test_a_file_changed_on_disk_after_loading_is_refused(pair: Path, tmp_path: Path) -> None:
    model = load_model(pair)
    changed = pair / "predict_net.pb"
    changed.write_bytes(changed.read_bytes() + b"\x3a\x01x")  # in place: same inode
    with pytest.raises(SerdeError, match="changed on disk") as caught:
        save_model(model, tmp_path / "out")
    assert caught.value.path == changed
    with pytest.raises(SerdeError, match="changed on disk"):
        [op.args for op in model.predict_net]
    assert not list(tmp_path.glob("out/*.pb"))


def test_a_file_replaced_by_an_atomic_write_keeps_the_loaded_net_readable(pair: Path) -> None:
    model = load_model(pair)
    before = _files(pair)
    net = model.predict_net
    net.replace_op(0, net[0].replace(name="first"))
    save_model_in_place(model)  # renames new files over the mapped ones
    assert _files(pair) != before
    args = [op.args for op in model.predict_net]
    save_model_in_place(model)
    reloaded = load_model(pair)
    assert [op.args for op in reloaded.predict_net] == args
    assert reloaded.predict_net[0].name == "first"


def test_a_small_file_is_kept_as_read(
    pair: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_file, "MAP_AT_LEAST", 1 << 40)
    before = _files(pair)
    model = load_model(pair)
    (pair / "predict_net.pb").write_bytes(b"\x0a\x01x")  # the file no longer matters
    save_model(model, tmp_path / "out")
    assert _files(tmp_path / "out") == before


def test_op_offsets_take_four_bytes_below_2_gb_and_eight_past_it() -> None:
    """The offset of each loaded op is 4 bytes while the file is below 2 GB; a file past it
    (an op starting at 2^31) keeps 8-byte offsets, exact."""
    lengths = array("q", [10, 200, 70000])
    small = op_bytes._starts(5, lengths)
    assert small.typecode == "i" and list(small) == [5, 17, 220, 70224]
    big = op_bytes._starts(1 << 31, lengths)
    assert big.typecode == "q" and list(big) == [(1 << 31) + d for d in (0, 12, 215, 70219)]

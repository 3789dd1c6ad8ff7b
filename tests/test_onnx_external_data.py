"""External data the IR does not hold as initializers, and unusual spellings of it, written
back so that onnxruntime loads the result and computes what the input computed: a Constant's
value and a sparse initializer's parts in a data file (copied whole, never compacted), a
tensor without a ``length`` entry, one file named ``w.bin`` and ``./w.bin``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model


def _outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _rewritten(source: Path, target: Path, pipeline: str = "default") -> Path:
    """``source`` loaded, run through ``pipeline`` and saved to ``target``."""
    model = load_onnx_model(source)
    PassManager.parse(pipeline)(model)
    target.parent.mkdir(exist_ok=True)
    return save_onnx_model(model, target, replace_data=target == source)


def _model(nodes: list, initializers: list, size: int, **graph: object) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size])]
    made = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers, **graph)
    return helper.make_model(made, opset_imports=[helper.make_opsetid("", 13)])


def _constant_model(folder: Path, *, with_dead_weight: bool) -> Path:
    """``y = (x + c) * w`` with the Constant ``c`` (and ``w``, and a weight nobody reads)
    in ``m.bin``, as ``onnx.save(convert_attribute=True)`` writes them."""
    constant = numpy_helper.from_array(np.full(300, 3.0, np.float32), "cv")
    nodes = [
        helper.make_node("Constant", [], ["c"], value=constant),
        helper.make_node("Add", ["x", "c"], ["s"]),
        helper.make_node("Mul", ["s", "w"], ["y"]),
    ]
    weights = [numpy_helper.from_array(np.arange(300, dtype=np.float32), "w")]
    if with_dead_weight:
        weights.insert(0, numpy_helper.from_array(np.ones(1000, np.float32), "unused"))
    folder.mkdir()
    onnx.save(
        _model(nodes, weights, 300),
        folder / "m.onnx",
        save_as_external_data=True,
        location="m.bin",
        size_threshold=100,
        convert_attribute=True,
    )
    return folder / "m.onnx"


X300 = {"x": np.linspace(-1, 1, 300, dtype=np.float32)}


@pytest.mark.parametrize("where", ["other-folder", "in-place"])
def test_a_constants_external_data_survives_a_removed_weight_in_its_file(
    tmp_path: Path, where: str
) -> None:
    source = _constant_model(tmp_path / "in", with_dead_weight=True)
    expected = _outputs(source, X300)
    target = tmp_path / "out" / "m.onnx" if where == "other-folder" else source
    written = _rewritten(source, target)
    onnx.checker.check_model(str(written), full_check=True)
    assert [
        i.name for i in onnx.load(str(written), load_external_data=False).graph.initializer
    ] == ["w"]
    np.testing.assert_array_equal(_outputs(written, X300)[0], expected[0])


def test_a_file_only_a_constant_points_into_is_written_beside_the_output(tmp_path: Path) -> None:
    source = _constant_model(tmp_path / "in", with_dead_weight=False)
    model = onnx.load(str(source), load_external_data=False)
    for tensor in model.graph.initializer:  # w inline: only the Constant's data is external
        external_data_helper.load_external_data_for_tensor(tensor, str(source.parent))
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
    onnx.save(model, str(source))
    written = _rewritten(source, tmp_path / "out" / "m.onnx", pipeline="")
    assert (written.parent / "m.bin").read_bytes() == (source.parent / "m.bin").read_bytes()
    np.testing.assert_array_equal(_outputs(written, X300)[0], _outputs(source, X300)[0])


def test_a_sparse_initializers_external_data_is_written_beside_the_output(tmp_path: Path) -> None:
    values = numpy_helper.from_array(np.arange(1, 129, dtype=np.float32), "sp_values")
    indices = numpy_helper.from_array(np.arange(0, 256, 2, dtype=np.int64), "sp_indices")
    sparse = helper.make_sparse_tensor(values, indices, [256])
    model = _model([helper.make_node("Add", ["x", "sp"], ["y"])], [], 256)
    sparse.values.name = "sp"
    model.graph.sparse_initializer.append(sparse)
    folder = tmp_path / "in"
    folder.mkdir()
    for tensor in (model.graph.sparse_initializer[0].values,):
        external_data_helper.set_external_data(tensor, "sp.bin")
        (folder / "sp.bin").write_bytes(tensor.raw_data)
        tensor.ClearField("raw_data")
    onnx.save(model, str(folder / "m.onnx"))
    x = {"x": np.ones(256, np.float32)}
    written = _rewritten(folder / "m.onnx", tmp_path / "out" / "m.onnx", pipeline="")
    assert (written.parent / "sp.bin").is_file()
    np.testing.assert_array_equal(_outputs(written, x)[0], _outputs(folder / "m.onnx", x)[0])


def _two_weights_in_one_file(folder: Path, locations: tuple[str, str, str], lengths: bool) -> Path:
    """``y = x * a + b`` with ``a``, ``b`` and a dead weight in ``w.bin`` at the given
    spellings of its location, with or without ``length`` entries."""
    arrays = {
        "dead": np.full(256, 7.0, np.float32),
        "a": np.arange(256, dtype=np.float32),
        "b": np.full(256, 0.5, np.float32),
    }
    folder.mkdir()
    tensors, offset = [], 0
    with (folder / "w.bin").open("wb") as handle:
        for (name, array), location in zip(arrays.items(), locations, strict=True):
            tensor = numpy_helper.from_array(array, name)
            handle.write(tensor.raw_data)
            size = len(tensor.raw_data)
            external_data_helper.set_external_data(
                tensor, location, offset=offset, length=size if lengths else None
            )
            tensor.ClearField("raw_data")
            tensors.append(tensor)
            offset += size
    nodes = [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    onnx.save(_model(nodes, tensors, 256), str(folder / "m.onnx"))
    return folder / "m.onnx"


@pytest.mark.parametrize(
    ("locations", "lengths"),
    [
        (("w.bin", "w.bin", "w.bin"), False),
        (("w.bin", "./w.bin", "w.bin"), True),
        (("./w.bin", "w.bin", "./w.bin"), False),
    ],
    ids=["no-length", "two-spellings", "both"],
)
def test_a_compacted_data_file_keeps_every_weights_values(
    tmp_path: Path, locations: tuple[str, str, str], lengths: bool
) -> None:
    source = _two_weights_in_one_file(tmp_path / "in", locations, lengths)
    x = {"x": np.linspace(-2, 2, 256, dtype=np.float32)}
    written = _rewritten(source, tmp_path / "out" / "m.onnx")
    onnx.checker.check_model(str(written), full_check=True)
    assert (written.parent / "w.bin").stat().st_size == 2 * 256 * 4  # the dead weight left
    np.testing.assert_array_equal(_outputs(written, x)[0], _outputs(source, x)[0])


def test_a_constant_in_the_file_external_data_true_writes_is_refused(tmp_path: Path) -> None:
    """The new ``m.onnx.data`` replaced the file a Constant reads, which then read the
    initializers' bytes: silently other outputs."""
    from graphtools.errors import SerdeError

    source = _constant_model(tmp_path / "in", with_dead_weight=False)
    model = onnx.load(str(source), load_external_data=False)
    for tensor in (*model.graph.initializer, model.graph.node[0].attribute[0].t):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "m.onnx.data"
    (source.parent / "m.bin").rename(source.parent / "m.onnx.data")
    onnx.save(model, str(source))
    loaded = load_onnx_model(source)
    (tmp_path / "out").mkdir()
    with pytest.raises(SerdeError, match="external_data=True"):
        save_onnx_model(loaded, tmp_path / "out" / "m.onnx", external_data=True)
    (tmp_path / "other").mkdir()
    written = save_onnx_model(loaded, tmp_path / "other" / "m.onnx")
    np.testing.assert_array_equal(_outputs(written, X300)[0], _outputs(source, X300)[0])


def test_external_data_true_keeps_small_tensors_inline_as_onnx_save_does(tmp_path: Path) -> None:
    """A model saved with every tensor outside (``size_threshold=0``) comes back with its
    tensors under the threshold inline, the others in the model's own data file, its outputs
    unchanged: what ``onnx.save_model(..., size_threshold=1024)`` of the loaded model gives."""
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Mul", ["s", "w"], ["y"])]
    weights = [
        numpy_helper.from_array(np.full(300, 0.5, np.float32), "w"),  # 1200 bytes
        numpy_helper.from_array(np.linspace(0, 1, 300, dtype=np.float32)[:4], "small"),
        numpy_helper.from_array(np.arange(300, dtype=np.float32), "b"),
    ]
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(
        _model(nodes, weights, 300),
        source,
        save_as_external_data=True,
        location="m.bin",
        size_threshold=0,
    )
    loaded = load_onnx_model(source)
    target = tmp_path / "out" / "n.onnx"
    target.parent.mkdir()
    save_onnx_model(loaded, target, external_data=True)
    written = onnx.load(str(target), load_external_data=False)
    outside = {t.name for t in written.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert outside == {"w", "b"}
    assert {entry.value for t in written.graph.initializer for entry in t.external_data} >= {
        "n.onnx.data"
    }
    assert numpy_helper.to_array(
        next(t for t in written.graph.initializer if t.name == "small")
    ).tolist() == pytest.approx(np.linspace(0, 1, 300, dtype=np.float32)[:4].tolist())
    expected = (X300["x"] + np.arange(300, dtype=np.float32)) * np.float32(0.5)
    np.testing.assert_array_equal(_outputs(target, X300)[0], expected)


@pytest.mark.parametrize(
    ("damage", "words"),
    [("remove", "No such file or directory"), ("truncate", "which holds 1000 (truncated?)")],
)
def test_missing_or_short_external_data_is_one_error_naming_the_file_for_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, words: str
) -> None:
    """The same load error whichever command or pass first reads the data (fold-constants
    let onnx's reader say "not regular file" of a file that does not exist; import-onnx
    passed onnx's own message on)."""
    from conftest import assert_one_error_line, run_cli

    weights = [numpy_helper.from_array(np.ones((32, 32), np.float32), "w")]
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], weights, 32)
    source = tmp_path / "m.onnx"
    onnx.save_model(
        model, str(source), save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    data = tmp_path / "weights.bin"
    if damage == "remove":
        data.unlink()
    else:
        data.write_bytes(data.read_bytes()[:1000])
    for argv in (
        ["run", str(source), "-p", "fold-constants", "-o", str(tmp_path / "out.onnx")],
        ["run", str(source), "-p", "optimize", "-o", str(tmp_path / "out.onnx")],
        ["import-onnx", str(source), "-o", str(tmp_path / "pair")],
        ["extract", str(source), "--inputs", "x", "--outputs", "y", "-o", str(tmp_path / "c")],
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2
        assert_one_error_line(err.splitlines()[-1], str(data), words)
        assert "not regular file" not in err


@pytest.mark.parametrize(("key", "value"), [("offset", "abc"), ("offset", "1.5"), ("length", "-4")])
def test_an_offset_or_length_that_is_no_byte_count_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str
) -> None:
    """int() of the value raised ValueError from deep inside the codec, a traceback."""
    from conftest import assert_one_error_line, run_cli

    weights = [numpy_helper.from_array(np.ones((32, 32), np.float32), "w")]
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], weights, 32)
    source = tmp_path / "m.onnx"
    onnx.save_model(
        model, str(source), save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    saved = onnx.load(str(source), load_external_data=False)
    entry = next(e for e in saved.graph.initializer[0].external_data if e.key == key)
    entry.value = value
    onnx.save(saved, str(source))
    for argv in (
        ["show", str(source)],
        ["run", str(source), "-o", str(tmp_path / "out.onnx")],
        ["diff", str(source), str(source)],
        ["import-onnx", str(source), "-o", str(tmp_path / "pair")],
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, argv
        assert_one_error_line(err, f"external data {key} {value!r} is not a number of bytes")

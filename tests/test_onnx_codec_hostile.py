"""What the ONNX fuzz campaign (benchmarks/fuzz_onnx.py) found in the codec, each kept fixed:
the file is refused with a ``SerdeError`` naming it, never an untyped exception."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphtools.errors import SerdeError
from graphtools.serde.onnx_io import load_onnx_model


def _external_model(path: Path, location: str) -> Path:
    weight = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


def test_an_external_location_with_a_nul_byte_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "m.onnx", "a\x00b.data")
    with pytest.raises(SerdeError, match="NUL character") as caught:
        load_onnx_model(path)
    assert caught.value.path == path


@pytest.mark.parametrize("location", ["../outside.data", "/etc/hostname", "", "sub/../../x"])
def test_an_external_location_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = _external_model(folder / "m.onnx", location)
    with pytest.raises(SerdeError, match="lies outside the model's folder") as caught:
        load_onnx_model(path)
    assert caught.value.path == path

"""The public entry points given what a user holds instead of a graphtools Model or a path
(an onnx.ModelProto, NetDefs, a Net, bytes): a typed error that says how to get what they
take, not an AttributeError from deep inside."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from graphtools import load_model, load_model_dir, save_model
from graphtools.errors import InvalidArgumentError
from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.onnx import export_onnx
from graphtools.proto import caffe2_pb2
from graphtools.pytest_plugin import assert_models_equivalent as assert_equivalent_anywhere
from graphtools.serde.onnx_codec import model_from_onnx_bytes
from graphtools.testing import assert_models_equivalent, compare_models

_TINY = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny_export"


def _onnx_proto() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _net() -> Net:
    return Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])


TAKING_A_MODEL: dict[str, Callable[[Any], Any]] = {
    "save_model": lambda m: save_model(m, "unused-folder"),
    "export_onnx": export_onnx,
    "run_model": lambda m: run_model(m, {}),
    "compare_models": lambda m: compare_models(m, m),
    "assert_models_equivalent": lambda m: assert_models_equivalent(m, m),
    "pytest_plugin.assert_models_equivalent": lambda m: assert_equivalent_anywhere(m, m),
}


@pytest.mark.parametrize("entry", sorted(TAKING_A_MODEL))
@pytest.mark.parametrize(
    ("given", "advice"),
    [
        (_onnx_proto, "model_from_onnx_bytes"),
        (lambda: caffe2_pb2.NetDef(), "model_from_netdefs"),
        (_net, "Model(net)"),
        (lambda: "model.onnx", "load_model"),
    ],
    ids=["ModelProto", "NetDef", "Net", "path"],
)
def test_what_is_not_a_model_is_refused_with_the_way_to_make_one(
    entry: str, given: Callable[[], Any], advice: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    value = given()
    with pytest.raises(
        InvalidArgumentError, match=f"takes a graphtools Model, not a {type(value).__name__}"
    ) as caught:
        TAKING_A_MODEL[entry](value)
    assert advice in str(caught.value)
    assert not (tmp_path / "unused-folder").exists()


def test_the_advice_given_for_a_model_proto_works() -> None:
    model = model_from_onnx_bytes(_onnx_proto().SerializeToString())
    x = np.array([-1.0, 2.0], np.float32)
    assert_equivalent_anywhere(model, model, {"x": x})
    assert isinstance(model, Model)


@pytest.mark.parametrize(
    ("given", "advice"),
    [
        (_onnx_proto, "model_from_onnx_bytes"),
        (lambda: b"\x0a\x01n", "net_from_bytes"),
        (lambda: None, ""),
    ],
    ids=["ModelProto", "bytes", "None"],
)
def test_load_model_takes_a_path(given: Callable[[], Any], advice: str) -> None:
    value = given()
    with pytest.raises(
        InvalidArgumentError, match="load_model's predict_path is a file path"
    ) as caught:
        load_model(value)
    assert advice in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="init_path is a file path"):
        load_model("predict_net.pb", value if value is not None else 3)


@pytest.mark.parametrize("directory", [None, 3, b"out"], ids=["None", "int", "bytes"])
def test_save_model_takes_a_path(directory: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    model = load_model_dir(_TINY)
    with pytest.raises(InvalidArgumentError, match="save_model's directory is a path, not a"):
        save_model(model, directory)
    assert not list(tmp_path.iterdir())

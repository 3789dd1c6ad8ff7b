"""The onnx package's own test models as files: the generated backend node cases with their
data (the ``onnx_backend_node_cases`` fixture) and the models the wheel ships."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx_testdata import NodeCase, onnx_package_models, read_data_set


def _session(path: Path) -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def test_backend_node_cases_are_files_with_their_data(
    onnx_backend_node_cases: list[NodeCase],
) -> None:
    cases = onnx_backend_node_cases
    assert len(cases) > 1500
    assert len({case.name for case in cases}) == len(cases)
    ops: set[str] = set()
    for case in cases:
        graph = onnx.load(case.path).graph
        assert list(case.inputs) == [v.name for v in graph.input], case.name
        assert list(case.outputs) == [v.name for v in graph.output], case.name
        ops.update(node.op_type for node in graph.node)
    assert {"Conv", "LSTM", "GRU", "Loop", "If", "Scan", "Resize", "LayerNormalization"} <= ops


@pytest.mark.parametrize(
    "name", ["test_conv_with_strides_padding", "test_lstm_with_initial_bias", "test_loop11"]
)
def test_node_case_data_is_what_onnxruntime_computes(
    onnx_backend_node_cases: list[NodeCase], name: str
) -> None:
    case = next(c for c in onnx_backend_node_cases if c.name == name)
    got = _session(case.path).run(None, case.inputs)
    for actual, expected in zip(got, case.outputs.values(), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=case.rtol, atol=max(case.atol, 1e-6))


def test_onnx_package_models_are_listed_with_their_data() -> None:
    models = onnx_package_models()
    groups = {model.group for model in models}
    assert groups == {"light", "pytorch-converted", "pytorch-operator", "simple"}
    assert "light/resnet50" in {model.name for model in models}
    for model in models:
        assert model.path.is_file(), model.name
        assert (model.data_set is None) == (model.group == "light"), model.name
    sample = next(m for m in models if m.name == "pytorch-converted/test_Conv2d")
    assert sample.data_set is not None
    inputs, outputs = read_data_set(sample.data_set)
    session = _session(sample.path)
    got = session.run(None, {session.get_inputs()[0].name: inputs[0]})
    np.testing.assert_allclose(got[0], outputs[0], rtol=1e-3, atol=1e-5)

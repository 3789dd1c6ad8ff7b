"""PyTorch exports through the bridge: import, default pipeline, export, checked against torch
and onnxruntime.

A small CNN ends in ``x.view(x.size(0), -1)`` before ``nn.Linear``: the classic exporter with
``dynamic_axes`` writes the Shape/Gather/Unsqueeze/Concat/Reshape chain, the default (dynamo)
exporter a Reshape with a baked ``[2, -1]`` initializer and its weights as external data. After
import and the default pipeline the Reshape chains must be gone, FC must read the 4-D pooled
blob, the shape params must have left the init_net, and the outputs must equal torch's and
onnxruntime's; the pair exported again must run in onnxruntime at a new batch size.

torch is an optional extra (``pip install graphtools-caffe2[torch]``); without it these tests
skip.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
import onnx  # noqa: E402

from graphtools.executor import run_model  # noqa: E402
from graphtools.onnx import (  # noqa: E402
    compare_with_onnxruntime,
    export_onnx,
    import_onnx,
    run_onnxruntime,
)
from graphtools.pass_infra import PassManager  # noqa: E402
from graphtools.testing import compare_outputs  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


class _CNN(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.drop = torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.c1(x)))
        x = self.pool(torch.relu(self.c2(x)))
        x = x.view(x.size(0), -1)
        return self.fc(self.drop(x))


@pytest.fixture(scope="module")
def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    model = _CNN()
    with torch.no_grad():  # non-trivial running statistics for the folded batch norm
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    return model.eval()


def _export(model: torch.nn.Module, path: Path, dynamo: bool) -> Path:
    x = torch.randn(2, 3, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
            torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"])
        else:
            torch.onnx.export(
                model,
                (x,),
                str(path),
                dynamo=False,
                input_names=["x"],
                output_names=["y"],
                dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
            )
    return path


def _torch(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("dynamo", [False, True], ids=["classic-dynamic-axes", "dynamo"])
def test_cnn_export_imports_cleans_and_round_trips(
    cnn: torch.nn.Module, tmp_path: Path, dynamo: bool
) -> None:
    path = _export(cnn, tmp_path / "cnn.onnx", dynamo)
    original = onnx.load(str(path), load_external_data=False)
    if dynamo:
        assert any(
            t.data_location == onnx.TensorProto.EXTERNAL for t in original.graph.initializer
        ), "the dynamo exporter was expected to write external data"
        reshape = next(n for n in original.graph.node if n.op_type == "Reshape")
        assert reshape.input[1] in {t.name for t in original.graph.initializer}
    else:
        kinds = {n.op_type for n in original.graph.node}
        assert {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape"} <= kinds

    pair = import_onnx(path)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16), dtype=np.float32)
    expected = _torch(cnn, x)
    before_pipeline = run_model(pair, {"x": x})
    np.testing.assert_allclose(before_pipeline["y"], expected, rtol=RTOL, atol=ATOL)

    shape_params = {op.outputs[0] for op in pair.init_net if op.type == "GivenTensorInt64Fill"}
    PassManager.parse("default")(pair)
    types = [op.type for op in pair.predict_net]
    assert "Reshape" not in types and "Shape" not in types and "Concat" not in types, types
    fc = next(op for op in pair.predict_net if op.type == "FC")
    pool = next(op for op in pair.predict_net if op.type == "MaxPool")
    assert fc.inputs[0] == pool.outputs[0]  # FC reads the 4-D pooled blob
    remaining = {name for op in pair.init_net for name in op.outputs}
    assert shape_params and not (shape_params & remaining), shape_params & remaining
    assert not (shape_params & set(pair.predict_net.external_inputs))

    ours = run_model(pair, {"x": x})
    np.testing.assert_allclose(ours["y"], expected, rtol=RTOL, atol=ATOL)
    diffs = compare_with_onnxruntime(path, pair, {"x": x}, rtol=RTOL, atol=ATOL)
    assert len(diffs) == 1 and diffs[0].ok, diffs

    x3 = np.random.default_rng(1).standard_normal((3, 3, 16, 16), dtype=np.float32)
    for exported in (
        export_onnx(pair, value_info={"x": (onnx.TensorProto.FLOAT, [3, 3, 16, 16])}),
        export_onnx(
            pair, value_info={"x": (onnx.TensorProto.FLOAT, [2, 3, 16, 16])}, dynamic_batch=True
        ),
    ):
        kinds = [n.op_type for n in exported.graph.node]
        assert "Reshape" not in kinds and kinds.count("Flatten") == 1, kinds
        got = run_onnxruntime(exported, {"x": x3})
        diffs = compare_outputs({"y": _torch(cnn, x3)}, got, rtol=RTOL, atol=ATOL)
        assert diffs[0].ok, diffs
    dims = exported.graph.output[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and dims[1].dim_value == 10

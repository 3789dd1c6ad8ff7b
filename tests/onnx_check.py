"""Checking an ONNX rewrite the way the issue asks: onnx's checker, the opset, and onnxruntime's
outputs on the same inputs (fp32 ``rtol`` 1e-4, ``atol`` 1e-5).

Test support, not a test module: ``graph_model`` writes a small hand-made model, ``rewritten``
runs a pipeline on a model file and proves the result, ``run_model_bytes`` runs an IR model.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_codec import model_to_onnx_bytes
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

RTOL, ATOL = 1e-4, 1e-5


def session(model: str | Path | bytes) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    source = model if isinstance(model, bytes) else str(model)
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def run(model: str | Path | bytes, feeds: Mapping[str, Any]) -> list[np.ndarray]:
    """onnxruntime's outputs of a model file (or bytes) on ``feeds``."""
    return [np.asarray(value) for value in session(model).run(None, dict(feeds))]


def run_model_bytes(model: Model, feeds: Mapping[str, Any]) -> list[np.ndarray]:
    """onnxruntime's outputs of an IR model (external data read from where it lies)."""
    if model.predict_path is not None and any(model.predict_path.parent.glob("*.data")):
        return run(_saved_beside(model), feeds)
    return run(model_to_onnx_bytes(model), feeds)


def _saved_beside(model: Model) -> Path:
    assert model.predict_path is not None
    target = model.predict_path.with_name(f"_run_{model.predict_path.name}")
    save_onnx_model(model, target)
    return target


def assert_same_outputs(want: Sequence[Any], got: Sequence[Any], where: str) -> None:
    assert len(want) == len(got), where
    for a, b in zip(want, got, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.shape, b.shape)
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=where)
        else:
            np.testing.assert_array_equal(b, a, err_msg=where)


def check(path: Path) -> None:
    """onnx's checker, full check, quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx.checker.check_model(str(path), full_check=True)


def graph_model(
    path: Path,
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, Sequence[Any]]],
    outputs: Mapping[str, tuple[int, Sequence[Any] | None]],
    initializers: Mapping[str, np.ndarray] = {},
    opset: int = 17,
) -> Path:
    """Write a one-graph model: ``inputs``/``outputs`` name -> (element type, shape)."""
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if any(shape is None for _, shape in outputs.values()):  # the checker wants output shapes
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        del model.graph.output[:]
        model.graph.output.extend(inferred.graph.output)
    path.write_bytes(model.SerializeToString())
    return path


def rewritten(
    path: Path, pipeline: str, feeds: Mapping[str, Any], tmp_path: Path
) -> tuple[Model, Path]:
    """Run ``pipeline`` on the model at ``path``, save it, and prove it: the checker passes,
    the opsets are the same, onnxruntime gives the original's outputs on ``feeds``."""
    model = load_onnx_model(path)
    opsets = dict(model.opset_imports)
    PassManager.parse(pipeline)(model)
    assert dict(model.opset_imports) == opsets
    target = tmp_path / f"out_{path.name}"
    save_onnx_model(model, target)
    check(target)
    assert_same_outputs(run(path, feeds), run(target, feeds), path.name)
    return model, target


def types(model: Model) -> list[str]:
    return [op.type for op in model.predict_net]


def normal(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

"""Real Caffe2 nets of ../shared/fixtures-real exported to ONNX: every blob onnxruntime computes
on the export equals our executor's on the pair, and the export imports back to the same
outputs. The nets come with random (Xavier) init nets, so the blob-by-blob comparison, not the
near-uniform final softmax, is what discriminates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from graphtools.executor import run_model
from graphtools.onnx import compare_blobs_with_onnxruntime, export_onnx, import_onnx
from graphtools.serde import load_model
from graphtools.testing import compare_outputs

NETS = {
    # legacy Caffe pooling (ceil rule), Conv/SpatialBN/Relu/Sum/FC
    "jolibrain-deepdetect/resnet_18": ("predict_net.pb", "init_net.pbtxt"),
    # LRN, Concat of inception branches, AveragePool, Dropout, FC
    "jolibrain-deepdetect/googlenet": ("predict_net.pb", "init_net.pbtxt"),
}


@pytest.mark.slow
@pytest.mark.parametrize("folder", sorted(NETS))
def test_real_net_exports_equal_blob_by_blob(real_fixtures: Path, folder: str) -> None:
    predict, init = NETS[folder]
    pair = load_model(real_fixtures / folder / predict, real_fixtures / folder / init)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224), dtype=np.float32)
    exported = export_onnx(pair, value_info={"data": (1, [1, 3, 224, 224])}, dynamic_batch=True)
    report = compare_blobs_with_onnxruntime(exported, pair, {"data": x}, rtol=1e-3, atol=1e-5)
    assert report.ok, report.first_divergence
    assert len(report.blobs) > 20
    back = import_onnx(exported)
    diffs = compare_outputs(run_model(pair, {"data": x}), run_model(back, {"data": x}))
    assert all(d.ok for d in diffs), diffs

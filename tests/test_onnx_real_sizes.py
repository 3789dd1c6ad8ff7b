"""Exports of real nets run on several input sizes (issue 20): one export of Mask R-CNN (fp32
and int8) with free image height and width, fed images of two sizes, and one export of each
real sparse-lengths net with free bag and segment counts, fed bags of several sizes; each run
equal to our executor on the same inputs (fp32 rtol 1e-4, Int8 within one step, the sparse
sums rtol 1e-4), detection compared on its final boxes, scores, classes and masks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import SHARED_REAL

from graphtools.ir import Model
from graphtools.onnx import compare_with_onnxruntime, export_onnx
from graphtools.onnx.export_feeds import feed_types, prepare_export
from graphtools.serde import load_model
from graphtools.serde.pairing import find_init_beside

MASK_RCNN = {
    "fp32": "caffe2-models/mask_rcnn_2go/2018-12/fp32/model.pb",
    "int8": "caffe2-models/mask_rcnn_2go/2018-12/int8/model.pb",
}
"""The fp32 net has no init_net (its parameters are made up); the int8 one has its own."""
IMAGE_SIZES = ((1, 3, 64, 64), (1, 3, 96, 128))
SPARSE = (
    "glow/caffe2Models/fused_rowwise_quantized_sparse_lengths_sum_predict_net.pbtxt",
    "glow/caffe2Models/fused_rowwise_quantized_sparse_lengths_weighted_sum_predict_net.pbtxt",
    "glow/caffe2Models/4bit_fused_rowwise_quantized_sparse_lengths_sum_predict_net.pbtxt",
    "glow/caffe2Models/rowwise_quantized_sparse_lengths_sum_predict_net.pbtxt",
    "glow/caffe2Models/rowwise_quantized_sparse_lengths_weighted_sum_predict_net.pbtxt",
)
"""The real sparse-lengths nets with their init_nets (the embedding tables)."""


def _load(relative: str) -> Model:
    path = SHARED_REAL / relative
    return load_model(path, find_init_beside(path), allow_empty=True)


def _free(value_info: dict, name: str, dims: Sequence[int]) -> dict:
    """``value_info`` with dims ``dims`` of input ``name`` free (named ``<name>_<dim>``)."""
    elem, shape = value_info[name]
    free = [f"{name}_{d}" if d in dims else size for d, size in enumerate(shape)]
    return {**value_info, name: (elem, free)}


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(MASK_RCNN))
def test_mask_rcnn_runs_on_two_image_sizes(real_fixtures: Path, form: str) -> None:
    model = _load(MASK_RCNN[form])
    first = prepare_export(model, {"data": IMAGE_SIZES[0]}, random_params=form == "fp32")
    value_info = _free(first.value_info, "data", (2, 3))
    exported = export_onnx(
        first.model, value_info=value_info, input_quantization=first.quantization
    )
    onnx.checker.check_model(exported, full_check=True)
    detections = []
    for size in IMAGE_SIZES:
        feeds = prepare_export(model, {"data": size}, random_params=form == "fp32").feeds
        assert feeds["data"].shape == size
        if model.init_net is not None:  # im_info is a graph input: feed the init_net's
            feeds["im_info"] = _init_value(model, "im_info")  # size, which finds boxes in noise
        diffs = compare_with_onnxruntime(exported, first.model, feeds, rtol=1e-4, atol=1e-5)
        assert all(d.ok for d in diffs), [d for d in diffs if not d.ok]
        assert len(diffs) == 4  # scores, boxes, classes, masks (the If renames some)
        detections.append(diffs[0].shape_before)
    assert all(shape and shape[0] > 0 for shape in detections), detections


def _init_value(model: Model, name: str) -> np.ndarray:
    """The value the init_net's ``GivenTensorFill`` of ``name`` holds."""
    assert model.init_net is not None
    fill = next(op for op in model.init_net if op.outputs == (name,))
    return np.asarray(fill.arg("values"), np.float32).reshape(fill.arg("shape"))


def _bags(rng: np.random.Generator, rows: int, size: int, segments: int) -> dict[str, np.ndarray]:
    """``size`` indices below ``rows`` in ``segments`` bags (some empty), and their weights."""
    lengths = np.zeros(segments, np.int32)
    np.add.at(lengths, rng.integers(0, segments, size), 1)
    return {
        "indices": rng.integers(0, rows, size).astype(np.int64),
        "lengths": lengths,
        "weights": rng.standard_normal(size).astype(np.float32),
    }


@pytest.mark.parametrize("relative", SPARSE)
def test_a_real_sparse_lengths_net_runs_on_several_sizes(
    real_fixtures: Path, relative: str
) -> None:
    """Indices, lengths and (weighted sums) the per-index weights are graph inputs of free
    length; the weights the init_nets of the weighted nets fill (for one bag size) are fed."""
    model = _load(relative)
    (op,) = model.predict_net.ops
    table = next(o for o in model.init_net if o.outputs[0] == op.inputs[0])
    rows = int(table.arg("shape")[0])
    rng = np.random.default_rng(0)
    fed = [name for name in ("weights", "indices", "lengths") if name in op.inputs]
    value_info, _ = feed_types(_bags(rng, rows, 1, 1))
    value_info = {name: (value_info[name][0], [f"{name}_0"]) for name in fed}
    exported = export_onnx(model, value_info=value_info)
    onnx.checker.check_model(exported, full_check=True)
    assert [i.name for i in exported.graph.input] == sorted(fed, key=op.inputs.index)
    for size, segments in ((1, 1), (7, 3), (0, 2), (40, 40), (100, 6)):
        made = _bags(rng, rows, size, segments)
        feeds = {name: made[name] for name in fed}
        (diff,) = compare_with_onnxruntime(exported, model, feeds, rtol=1e-4, atol=1e-5)
        assert diff.ok and diff.shape_before == (segments, *diff.shape_before[1:]), diff

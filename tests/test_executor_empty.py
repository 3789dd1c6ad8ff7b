"""Kernels run on empty batches: a detector that finds nothing (no proposal, no detection)
still runs to the end, as Caffe2 does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphtools.executor import Int8Tensor, Workspace, run_op
from graphtools.feeds import synthesize
from graphtools.ir import Net, Op
from graphtools.serde import load_model
from graphtools.serde.pairing import find_init_beside


def _run(op: Op, **inputs: object) -> list[object]:
    ws = Workspace()
    for name, value in inputs.items():
        ws.feed(name, value)
    run_op(op, ws)
    return [ws.fetch(name) for name in op.outputs]


def _q(shape: tuple[int, ...], dtype: type = np.uint8) -> Int8Tensor:
    return Int8Tensor(np.zeros(shape, dtype), 0.1, 0 if dtype is np.int32 else 128)


def test_softmax_of_no_rows() -> None:
    (y,) = _run(Op("Softmax", ["x"], ["y"]), x=np.zeros((0, 8), np.float32))
    assert y.shape == (0, 8) and y.dtype == np.float32


def test_int8_fc_flatten_and_conv_transpose_of_no_rois() -> None:
    fc = Op("Int8FC", ["x", "w", "b"], ["y"], args={"Y_scale": 0.1, "Y_zero_point": 128})
    (y,) = _run(fc, x=_q((0, 1, 1, 8)), w=_q((5, 8)), b=_q((5,), np.int32))
    assert y.shape == (0, 5)
    (flat,) = _run(Op("Int8Flatten", ["x"], ["y"]), x=_q((0, 1, 1, 8)))
    assert flat.shape == (0, 8)
    deconv = Op(
        "Int8ConvTranspose",
        ["x", "w", "b"],
        ["y"],
        args={"kernel": 2, "stride": 2, "order": "NHWC", "Y_scale": 0.1, "Y_zero_point": 128},
    )
    (up,) = _run(deconv, x=_q((0, 6, 6, 4)), w=_q((4, 2, 2, 3)), b=_q((3,), np.int32))
    assert up.shape == (0, 12, 12, 3)


def test_losses_of_no_rows() -> None:
    x = np.zeros((0, 3), np.float32)
    (d,) = _run(Op("SquaredL2Distance", ["x", "y"], ["d"]), x=x, y=x)
    (p,) = _run(Op("DotProduct", ["x", "y"], ["p"]), x=x, y=x)
    assert d.shape == (0,) and p.shape == (0,)


def _emptied(net: Net, what: str) -> Net:
    ops = []
    for op in net:
        if what == "detections" and op.type == "BoxWithNMSLimit":
            op = op.with_arg("score_thresh", 2.0)
        if what == "proposals" and op.type.startswith("GenerateProposals"):
            op = op.with_arg("min_size", 1e9)
        ops.append(op)
    return Net(ops, net.external_inputs, net.external_outputs, name=net.name)


@pytest.mark.parametrize("what", ["detections", "proposals"])
@pytest.mark.parametrize(
    "relative",
    [
        "caffe2-models/detectron/e2e_faster_rcnn_R-50-C4_1x/predict_net.pbtxt",
        "caffe2-models/mask_rcnn_2go/2018-12/int8/model.pb",
    ],
)
def test_detectors_that_find_nothing_run_to_the_end(
    real_fixtures: Path, relative: str, what: str
) -> None:
    path = real_fixtures / relative
    model = load_model(path, find_init_beside(path))
    model.predict_net = _emptied(model.predict_net, what)
    made = synthesize(model, seed=0)
    assert made.outputs["score_nms"].shape == (0,)
    assert made.outputs["bbox_nms"].shape == (0, 4)
    assert made.outputs["class_nms"].shape == (0,)

"""Mask R-CNN2Go (fp32, with its If op) loads, verifies, and runs on random weights: the backbone
and RPN up to its first detection op (GenerateProposals needs the real anchors and weights,
which are not published), then its If, both branches, on fed boxes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphtools.executor import KERNELS, Workspace, run_net, run_op
from graphtools.ir import Net
from graphtools.serde import load_model
from graphtools.testing import random_params
from graphtools.wellformed import verify

DETECTION = {"GenerateProposals", "RoIAlign", "BBoxTransform", "BoxWithNMSLimit", "IsEmpty"}


@pytest.fixture(scope="module")
def mask_rcnn(real_fixtures: Path):
    model = load_model(real_fixtures / "caffe2-models" / "mask_rcnn_2go" / "fp32" / "model.pbtxt")
    ops = model.predict_net.ops
    stop = next(i for i, op in enumerate(ops) if op.type in DETECTION)
    prefix = Net(ops[:stop], name="prefix")
    shape = (1, 3, 64, 64)
    params = random_params(prefix, {"data": shape}, seed=0, channels=8)
    ws = Workspace()
    ws.feed("data", np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    for name, value in params.items():
        ws.feed(name, value)
    run_net(prefix, ws)
    return model, stop, ws


def test_loads_verifies_and_stops_at_a_detection_op(mask_rcnn):
    model, stop, ws = mask_rcnn
    assert verify(model) == []
    assert model.predict_net[stop].type in DETECTION
    assert ws.fetch("xif3_6").shape == (1, 8, 4, 4)


def test_if_runs_its_branches(mask_rcnn):
    model, _, ws = mask_rcnn
    if_op = next(op for op in model.predict_net if op.type == "If")
    mask_net = if_op.arg("else_net")
    assert [name for name, _ in if_op.nested_nets()] == ["then_net", "else_net"]
    ws.feed("is_bbox_rois_empty", np.array(True))
    run_op(if_op, ws)  # then_net: the empty net
    ws.feed("is_bbox_rois_empty", np.array(False))
    ws.feed("bbox_nms", np.array([[0, 2, 2, 30, 40], [0, 10, 5, 50, 60]], dtype=np.float32))
    ws.feed("im_info", np.array([[64, 64, 0.5]], dtype=np.float32))
    assert mask_net[0].type == "RoIAlign" and "RoIAlign" in KERNELS
    head = Net(
        [op for op in list(mask_net.ops)[1:] if op.type not in ("Slice", "Div")], name="head"
    )
    params = random_params(head, {mask_net[0].outputs[0]: (2, 8, 6, 6)}, seed=2, channels=8)
    for name, value in params.items():
        ws.feed(name, value)
    run_op(if_op, ws)  # else_net: RoIAlign on xif3_6, the mask head, boxes back to the image scale
    probs = ws.fetch("mask_fcn_probs")
    assert probs.shape[0] == 2 and ((probs > 0) & (probs < 1)).all() and probs.std() > 0
    np.testing.assert_allclose(ws.fetch("bbox_nms")[1], [0, 20, 10, 100, 120])
    assert ws.has("_[mask]_pool5")  # If runs its nets in its own workspace: no isolation

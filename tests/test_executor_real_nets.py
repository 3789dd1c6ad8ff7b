"""Every op type of every real network file has an executor kernel, and the nets that only
lacked detection, YOLO or stylizer kernels now run end to end.

"Network file" means every ``.pb``/``.pbtxt`` under ../shared/fixtures-real that loads as a
NetDef (PlanDefs, empty files and the TensorProtos negative case do not); nested nets count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_REAL, real_net_files

from graphtools.executor import KERNELS, run_model
from graphtools.ir import Net
from graphtools.serde import load_ir_net, load_model


def _network_files() -> list[str]:
    if not SHARED_REAL.is_dir():
        return ["<real fixtures absent>"]
    return [str(path.relative_to(SHARED_REAL)) for path in real_net_files()]


def _op_types(net: Net, found: set[str]) -> set[str]:
    for op in net:
        found.add(op.type)
        for _, nested in op.nested_nets():
            _op_types(nested, found)
    return found


@pytest.mark.parametrize("relative", _network_files())
def test_every_op_type_of_a_real_network_file_has_a_kernel(
    real_fixtures: Path, relative: str
) -> None:
    net, _ = load_ir_net(real_fixtures / relative)
    types = _op_types(net, set())
    missing = sorted(t for t in types if t not in KERNELS)
    assert not missing, f"{relative}: no kernel for {missing}"


def test_the_scan_sees_the_real_files(real_fixtures: Path) -> None:
    files = _network_files()
    assert len(files) > 150
    assert "dongfangduoshou123-Caffe2-yolo-v3/predict_net.pb" in files


MASK_INT8 = "caffe2-models/mask_rcnn_2go/2018-12/int8"


@pytest.mark.slow
def test_mask_rcnn_2go_int8_pair_runs_end_to_end(real_fixtures: Path) -> None:
    """The real int8 weights through RPN, GenerateProposals, RoIAlign, BBoxTransform,
    BoxWithNMSLimit and the mask head: detections inside the image, valid classes, scores
    above the threshold, one mask per detection."""
    folder = real_fixtures / MASK_INT8
    model = load_model(folder / "model.pb", folder / "model_init.pb")
    image = np.random.default_rng(1).uniform(-100, 100, (1, 3, 96, 128)).astype(np.float32)
    out = run_model(model, {"data": image})
    scores, boxes, classes = out["score_nms"], out["bbox_nms"], out["class_nms"]
    count = scores.shape[0]
    assert boxes.shape == (count, 4) and classes.shape == (count,)
    assert out["mask_fcn_probs"].shape == (count, 81, 24, 24)
    assert (scores > 0.05).all() and ((classes >= 1) & (classes <= 80)).all()
    assert (boxes >= 0).all() and (boxes[:, 2] >= boxes[:, 0]).all()


def test_crayon_style_transfer_pair_runs_end_to_end(real_fixtures: Path) -> None:
    folder = real_fixtures / "caffe2-models" / "style_transfer" / "crayon"
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    image = np.random.default_rng(2).integers(0, 256, (1, 40, 48, 4)).astype(np.uint8)
    first = run_model(model, {"data_int8_bgra": image}, seed=3)["styled_int8_bgra"]
    second = run_model(model, {"data_int8_bgra": image}, seed=3)["styled_int8_bgra"]
    assert first.shape == (1, 40, 48, 4) and first.dtype == np.uint8
    assert (first[..., 3] == 255).all() and first[..., :3].std() > 0
    np.testing.assert_array_equal(first, second)


def test_yolo_v3_runs_end_to_end_on_its_param_init_net(real_fixtures: Path) -> None:
    """Xavier/constant weights from the shipped training init net on a 64x64 image: the three
    YOLO heads give their grid-sized outputs and probabilities in (0, 1)."""
    folder = real_fixtures / "dongfangduoshou123-Caffe2-yolo-v3"
    model = load_model(folder / "predict_net.pb", folder / "param_init_net.pbtxt")
    image = np.random.default_rng(4).standard_normal((1, 3, 64, 64)).astype(np.float32)
    out = run_model(model, {"gpu_0/data": image})
    for head, grid in (("1", 2), ("2", 4), ("3", 8)):
        probs = out[f"gpu_0/class_prob_{head}"]
        assert probs.shape == (3, 80, grid * grid)
        assert ((probs > 0) & (probs < 1)).all()
        assert out[f"gpu_0/tw_{head}"].shape == (3 * grid * grid,)

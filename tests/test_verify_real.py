"""``graphtools verify -p default FILE`` reaches a verdict (exit 0 or 1, never 2) on every
network file of ../shared/fixtures-real, as a user would run it: no shapes, no flags (a few
nets whose own weights cannot run are refused, and verified with ``--random-params``; a net
writing none of its outputs is refused: nothing to compare).

"Network file" is what tests/test_executor_real_nets.py scans: every ``.pb``/``.pbtxt`` that
loads as a NetDef (PlanDefs, TensorProtos and the empty negative case do not). A predict_net
file gets the init_net beside it; an init_net file runs as a net of its own. Files whose
net is identical to another's (jolibrain's ``predict_net.pb`` and ``.pbtxt`` twins) are
verified once, and a test checks that they are identical. Whole runs of real weights at
their pinned sizes take seconds: those are marked slow (CI still runs them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_REAL, real_net_files, run_cli

from graphtools.printer import print_net
from graphtools.serde import load_ir_net

#: Files whose run takes more than a few seconds on 2 cores (real weights at 224-299 px, the
#: Mask R-CNN heads over 100 made-up detections, init_nets filling 100M-value weights).
SLOW = frozenset(
    {
        "jolibrain-deepdetect/vgg_16/predict_net.pb",
        "jolibrain-deepdetect/vgg_19/predict_net.pb",
        "jolibrain-deepdetect/wrn_50/predict_net.pb",
        "jolibrain-deepdetect/xception/predict_net.pb",
        "jolibrain-deepdetect/inception_bn/predict_net.pb",
        "jolibrain-deepdetect/googlenet/predict_net.pb",
        "jolibrain-deepdetect/resnet_50/predict_net.pbtxt",
        "jolibrain-deepdetect/alexnet/predict_net.pbtxt",
        "jolibrain-deepdetect/vgg_16/init_net.pbtxt",
        "jolibrain-deepdetect/vgg_19/init_net.pbtxt",
        "jolibrain-deepdetect/wrn_50/init_net.pbtxt",
        "jolibrain-deepdetect/alexnet/init_net.pbtxt",
        "jolibrain-deepdetect/xception/init_net.pbtxt",
        "jolibrain-deepdetect/inception_bn/init_net.pbtxt",
        "caffe2-models/mask_rcnn_2go/fp32/model.pbtxt",
        "caffe2-models/mask_rcnn_2go/int8/model.pbtxt",
        "caffe2-models/mask_rcnn_2go/2019-01/int8/model.pbtxt",
        "caffe2-models/mask_rcnn_2go/2018-12/fp32/model.pb",
        "gredx-caffe2-maskrcnn-qt/mask_rcnn_2go_fp32_model.pb",
        "dongfangduoshou123-Caffe2-yolo-v3/param_init_net.pbtxt",
        "hmc-neural_nets_research/super_resolution/predict_net.pb",
    }
)


def _network_files() -> list[str]:
    return [str(path.relative_to(SHARED_REAL)) for path in real_net_files()]


FILES = _network_files()
TWINS = {
    f.replace(".pbtxt", ".pb"): f
    for f in FILES
    if f.endswith("predict_net.pbtxt") and f.replace(".pbtxt", ".pb") in FILES
}
"""``predict_net.pb`` -> its ``predict_net.pbtxt`` twin holding the same net."""


def _params() -> list[object]:
    if not FILES:
        return [pytest.param("<real fixtures absent>", id="absent")]
    chosen = [f for f in FILES if f not in TWINS.values()]
    return [pytest.param(f, marks=[pytest.mark.slow] if f in SLOW else [], id=f) for f in chosen]


#: Glow's test nets whose own weights Caffe2's kernels refuse at the shapes verify guesses
#: (NHWC filters laid out as NCHW ones, a kernel argument unlike the filter, a float bias of
#: an Int8Conv, an addend whose shape no guessed image has): verify refuses them, naming
#: --shapes and --random-params, and reaches a verdict on made-up weights with the latter.
UNFIT = frozenset(
    f"glow/caffe2Models/{name}"
    for name in (
        "conv_group_quantized_pred_net.pbtxt",
        "conv_nhwc_predict_net.pbtxt",
        "convtranspose_net.pbtxt",
        "convtranspose_nhwc.pbtxt",
        "dce_test_predict_net.pbtxt",
        "int8sumrelu_large_range_pred_net.pbtxt",
    )
)


#: A net declaring an output that no op writes: there is nothing to compare.
NOTHING_TO_COMPARE = frozenset({"glow/caffe2Models/empty_predict_net.pbtxt"})


@pytest.mark.parametrize("relative", _params())
def test_verify_default_reaches_a_verdict(
    real_fixtures: Path, relative: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "-q", "-p", "default", str(real_fixtures / relative)]
    code, out, err = run_cli(capsys, *argv)
    if relative in NOTHING_TO_COMPARE:
        assert code == 2 and "nothing to compare" in err, err
        return
    if relative in UNFIT:
        assert code == 2 and "do not fit the net" in err and "--random-params" in err, err
        code, out, err = run_cli(capsys, *argv, "--random-params")
    assert code in (0, 1), err
    assert "outputs equal" in out or "outputs differ" in out


def test_twins_hold_the_same_net(real_fixtures: Path) -> None:
    assert len(TWINS) == 7
    for binary, text in TWINS.items():
        left = load_ir_net(real_fixtures / binary)[0]
        right = load_ir_net(real_fixtures / text)[0]
        assert print_net(left) == print_net(right), binary


def test_the_scan_sees_the_real_files(real_fixtures: Path) -> None:
    assert len(FILES) > 200
    assert "glow/caffe2Models/fc_predict_net.pbtxt" in FILES
    assert "facebookarchive-caffe2/negative/mnist_lenet_TensorProtos.pb" not in FILES

"""The add-gradients pass: appends the backward pass once, numerically right, refuses bad ys."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES

from graphtools.errors import PassError
from graphtools.executor import Workspace, run_model, run_net
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.serde import load_model_dir
from graphtools.testing import check_gradients


def _model():
    return Model(
        Net(
            [
                Op("FC", ["x", "w", "b"], ["h"]),
                Op("Tanh", ["h"], ["h"]),
                Op("AveragedLoss", ["h"], ["loss"]),
            ],
            ["x", "w", "b"],
            ["loss"],
            name="net",
        )
    )


def test_appends_backward_pass_once_and_it_is_right():
    model = _model()
    records = PassManager.parse("add-gradients{ys=loss}")(model)
    ran = [r for r in records if not r.skipped]
    assert ran[0].stats == {"gradient_ops": 4, "gradients": 5}  # loss, h, x, w, b
    assert [op.type for op in model.predict_net] == [
        "FC",
        "Tanh",
        "AveragedLoss",
        "ConstantFill",
        "AveragedLossGradient",
        "TanhGradient",
        "FCGradient",
    ]
    assert list(model.predict_net.external_outputs) == ["loss"]
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((2, 4)), rng.standard_normal(2)
    ws = Workspace()
    for k, v in {"x": x, "w": w, "b": b}.items():
        ws.feed(k, v)
    run_net(model.predict_net, ws)
    t = np.tanh(x @ w.T + b)
    expected_b = ((1 - t * t) / t.size).sum(axis=0)
    np.testing.assert_allclose(ws.fetch("b_grad"), expected_b, rtol=1e-6)
    again = PassManager.parse("add-gradients{ys=loss}")(model)
    assert not any(r.modified for r in again) and len(model.predict_net) == 7


@pytest.mark.parametrize(
    "spec, message", [("add-gradients", "needs ys"), ("add-gradients{ys=nope}", "nope")]
)
def test_refuses_bad_ys(spec, message):
    model = _model()
    with pytest.raises(PassError, match=message):
        PassManager.parse(spec)(model)
    assert len(model.predict_net) == 3


def test_failure_leaves_model_unchanged():
    model = Model(Net([Op("Frob", ["x"], ["y"])], ["x"], ["y"]))
    with pytest.raises(PassError, match="Frob") as raised:
        PassManager.parse("add-gradients{ys=y}")(model)
    assert len(model.predict_net) == 1
    # one line saying what to do, not Caffe2's dump of the op
    assert "\n" not in str(raised.value) and "RegisterGradient" in str(raised.value)


def test_the_bundled_cnn_gets_its_backward_pass(tmp_path):
    """Conv, MaxPool and the device copies had no gradient maker: the README's pair failed.
    Its backward pass now runs, and gives the gradients central differences give."""
    model = load_model_dir(FIXTURES / "models" / "tiny_export")
    PassManager.parse("add-gradients{ys=prob}")(model)
    types = [op.type for op in model.predict_net]
    assert {"ConvGradient", "MaxPoolGradient", "CopyCPUToGPU"} <= set(types)
    forward = load_model_dir(FIXTURES / "models" / "tiny_export")
    params = run_model(Model(forward.init_net), {})
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6))
    floats = {k: np.asarray(v) for k, v in params.items() if np.asarray(v).dtype.kind == "f"}
    inputs = {**params, **{k: v.astype(np.float64) for k, v in floats.items()}, "data": x}
    results = check_gradients(forward.predict_net, inputs, ["prob"], wrt=["data", "conv1_w"])
    assert results and all(r.ok for r in results)

"""kernels_misc against onnxruntime where ONNX has the op (Gelu, Sign, Mod, TopK,
LayerNormalization, Mean, Neg, Cast, ReduceSum/Mean, Gemm, Conv+Relu) and against loop-by-loop
numpy references elsewhere, plus argument variants and typed errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from graphtools.errors import ExecutionError
from graphtools.executor import Workspace, run_op
from graphtools.ir import Op

helper = onnx.helper


def run(op: Op, *values: Any) -> list[Any]:
    ws = Workspace()
    for name, value in zip(op.inputs, values, strict=True):
        ws.feed(name, value)
    run_op(op, ws)
    return [ws.fetch(name) for name in op.outputs]


def run_onnx(
    nodes: list[Any],
    feeds: dict[str, np.ndarray],
    outputs: list[str],
    opset: int = 18,
    consts: dict[str, np.ndarray] | None = None,
) -> list[np.ndarray]:
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in (consts or {}).items()]
    graph = helper.make_graph(
        nodes, "case", inputs, [onnx.ValueInfoProto(name=n) for n in outputs], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fast", [0, 1])
def test_gelu_matches_onnxruntime(fast: int) -> None:
    x = randn(3, 17, seed=1) * 3
    (ours,) = run(Op("Gelu", ["x"], ["y"], args={"fast_gelu": fast}), x)
    approx = "tanh" if fast else "none"
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approx)
    (expected,) = run_onnx([node], {"x": x}, ["y"], opset=20)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_sign_negative_mean_half_to_float_match_onnxruntime() -> None:
    x = np.concatenate([randn(10, seed=2), np.zeros(2, np.float32)])
    (sign,) = run(Op("Sign", ["x"], ["y"]), x)
    np.testing.assert_array_equal(
        sign, run_onnx([helper.make_node("Sign", ["x"], ["y"])], {"x": x}, ["y"])[0]
    )
    (neg,) = run(Op("Negative", ["x"], ["y"]), x)
    np.testing.assert_array_equal(
        neg, run_onnx([helper.make_node("Neg", ["x"], ["y"])], {"x": x}, ["y"])[0]
    )
    a, b, c = randn(2, 3, seed=3), randn(2, 3, seed=4), randn(2, 3, seed=5)
    (mean,) = run(Op("Mean", ["a", "b", "c"], ["y"]), a, b, c)
    node = helper.make_node("Mean", ["a", "b", "c"], ["y"])
    np.testing.assert_allclose(
        mean, run_onnx([node], {"a": a, "b": b, "c": c}, ["y"])[0], rtol=1e-6
    )
    half = x.astype(np.float16)
    (full,) = run(Op("HalfToFloat", ["x"], ["y"]), half)
    cast = helper.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.FLOAT)
    np.testing.assert_array_equal(full, run_onnx([cast], {"x": half}, ["y"])[0])
    with pytest.raises(ExecutionError, match="float16"):
        run(Op("HalfToFloat", ["x"], ["y"]), x)
    with pytest.raises(ExecutionError, match="equal shapes"):
        run(Op("Mean", ["a", "b"], ["y"]), a, randn(3, 2))


@pytest.mark.parametrize("follow", [0, 1])
@pytest.mark.parametrize("divisor", [3, -4])
def test_mod_matches_onnxruntime(follow: int, divisor: int) -> None:
    x = np.random.default_rng(6).integers(-20, 20, 30).astype(np.int64)
    args = {"divisor": divisor, "sign_follow_divisor": follow}
    (ours,) = run(Op("Mod", ["x"], ["y"], args=args), x)
    node = helper.make_node("Mod", ["x", "d"], ["y"], fmod=0 if follow else 1)
    d = np.array(divisor, np.int64)
    (expected,) = run_onnx([node], {"x": x}, ["y"], consts={"d": d})
    np.testing.assert_array_equal(ours, expected)
    with pytest.raises(ExecutionError, match="divisor"):
        run(Op("Mod", ["x"], ["y"]), x)


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_top_k_matches_onnxruntime(axis: int) -> None:
    x = np.round(randn(4, 6, 5, seed=7), 1)  # rounding makes ties
    op = Op("TopK", ["x"], ["v", "i", "f"], args={"k": 3, "axis": axis})
    values, indices, flat = run(op, x)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis)
    ev, ei = run_onnx([node], {"x": x}, ["v", "i"], consts={"k": np.array([3], np.int64)})
    np.testing.assert_array_equal(values, ev)
    np.testing.assert_array_equal(indices, ei)
    np.testing.assert_array_equal(x.reshape(-1)[flat], values.reshape(-1))
    with pytest.raises(ExecutionError, match="k=9"):
        run(Op("TopK", ["x"], ["v", "i"], args={"k": 9}), x)


@pytest.mark.parametrize(("axis", "eps"), [(1, 1e-5), (-2, 0.05), (2, 1e-3)])
def test_layer_norm_matches_onnxruntime(axis: int, eps: float) -> None:
    x = randn(2, 3, 4, 5, seed=8)
    op = Op("LayerNorm", ["x"], ["y", "mean", "std"], args={"axis": axis, "epsilon": eps})
    y, mean, std = run(op, x)
    node = helper.make_node(
        "LayerNormalization", ["x", "g", "b"], ["y", "m", "inv"], axis=axis, epsilon=eps
    )
    norm_shape = x.shape[axis:]
    consts = {"g": np.ones(norm_shape, np.float32), "b": np.zeros(norm_shape, np.float32)}
    ey, em, inv = run_onnx([node], {"x": x}, ["y", "m", "inv"], opset=17, consts=consts)
    np.testing.assert_allclose(y, ey, rtol=1e-4, atol=1e-5)
    lead = x.shape[: axis % 4]
    np.testing.assert_allclose(mean, em.reshape(*lead, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, 1 / inv.reshape(*lead, 1), rtol=1e-4)


def test_layer_norm_affine_only_when_asked() -> None:
    x = randn(3, 4, seed=9)
    gamma, beta = randn(4, seed=10), randn(4, seed=11)
    (plain,) = run(Op("LayerNorm", ["x", "g", "b"], ["y"]), x, gamma, beta)
    (bare,) = run(Op("LayerNorm", ["x"], ["y"]), x)
    np.testing.assert_array_equal(plain, bare)
    op = Op("LayerNorm", ["x", "g", "b"], ["y"], args={"elementwise_affine": 1})
    (affine,) = run(op, x, gamma, beta)
    np.testing.assert_allclose(affine, bare * gamma + beta, rtol=1e-5, atol=1e-6)
    with pytest.raises(ExecutionError, match="gamma and beta"):
        run(Op("LayerNorm", ["x"], ["y"], args={"elementwise_affine": 1}), x)


def test_rms_norm_against_loops() -> None:
    x, gamma, beta = randn(2, 3, 4, seed=12), randn(12, seed=13), randn(12, seed=14)
    op = Op("RMSNorm", ["x", "g", "b"], ["y", "rrms"], args={"eps": 0.5})
    y, rrms = run(op, x, gamma, beta)
    rows = x.reshape(2, 12)
    for i in range(2):
        r = 1 / math.sqrt(sum(float(v) ** 2 for v in rows[i]) / 12 + 0.5)
        assert rrms[i] == pytest.approx(r, rel=1e-6)
        for j in range(12):
            expected = r * rows[i, j] * gamma[j] + beta[j]
            assert y.reshape(2, 12)[i, j] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert rrms.shape == (2,)


@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("count", [1, 2])
def test_reduce_back_matches_onnxruntime(mean: bool, count: int) -> None:
    x = randn(2, 3, 4, seed=15)
    op_type = "ReduceBackMean" if mean else "ReduceBackSum"
    (ours,) = run(Op(op_type, ["x"], ["y"], args={"num_reduce_dim": count}), x)
    axes = np.arange(3 - count, 3, dtype=np.int64)
    node = helper.make_node("ReduceMean" if mean else "ReduceSum", ["x", "a"], ["y"], keepdims=0)
    (expected,) = run_onnx([node], {"x": x}, ["y"], consts={"a": axes})
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_reduce_back_with_lengths_against_loops() -> None:
    x = randn(3, 5, seed=16)
    lengths = np.array([5, 2, 0], np.int32)
    (sums,) = run(Op("ReduceBackSum", ["x", "l"], ["y"]), x, lengths)
    (means,) = run(Op("ReduceBackMean", ["x", "l"], ["y"]), x, np.array([5, 2, 1], np.int32))
    for i, n in enumerate(lengths):
        assert sums[i] == pytest.approx(sum(float(v) for v in x[i, :n]), abs=1e-6)
    for i, n in enumerate([5, 2, 1]):
        assert means[i] == pytest.approx(sum(float(v) for v in x[i, :n]) / n, rel=1e-6)
    with pytest.raises(ExecutionError, match="lengths"):
        run(Op("ReduceBackSum", ["x", "l"], ["y"]), x, np.array([6, 0, 0], np.int32))


def test_fb_fc_packed_matches_gemm_on_fp16_rounded_weights() -> None:
    x, w, b = randn(2, 3, 4, seed=17), randn(5, 4, seed=18) * 3, randn(5, seed=19)
    (ours,) = run(Op("FbFCPacked", ["x", "w", "b"], ["y"], args={"axis": 2}), x, w, b)
    rounded = w.astype(np.float16).astype(np.float32)
    node = helper.make_node("Gemm", ["x2", "w", "b"], ["y"], transB=1)
    (expected,) = run_onnx([node], {"x2": x.reshape(6, 4), "w": rounded, "b": b}, ["y"])
    np.testing.assert_allclose(ours, expected.reshape(2, 3, 5), rtol=1e-5, atol=1e-5)
    assert not np.allclose(rounded, w, rtol=0, atol=1e-6)


def test_conv_relu_matches_onnxruntime() -> None:
    x, w, b = randn(1, 2, 5, 5, seed=20), randn(3, 2, 2, 2, seed=21), randn(3, seed=22)
    args = {"kernel": 2, "pad": 1, "stride": 1}
    (ours,) = run(Op("ConvRelu", ["x", "w", "b"], ["y"], args=args), x, w, b)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    (expected,) = run_onnx(nodes, {"x": x, "w": w, "b": b}, ["y"])
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_pointwise_ops_against_loops() -> None:
    x = np.random.default_rng(23).uniform(-0.2, 1.2, 20).astype(np.float32)
    (log1p,) = run(Op("Log1p", ["x"], ["y"]), np.abs(x))
    (swish,) = run(Op("Swish", ["x"], ["y"]), x)
    (logit,) = run(Op("Logit", ["x"], ["y"], args={"eps": 0.01}), x)
    for i, v in enumerate(x.tolist()):
        assert log1p[i] == pytest.approx(math.log(1 + abs(v)), rel=1e-6)
        assert swish[i] == pytest.approx(v / (1 + math.exp(-v)), rel=1e-5, abs=1e-7)
        c = min(max(v, 0.01), 0.99)
        assert logit[i] == pytest.approx(math.log(c / (1 - c)), rel=1e-5)
    nan = np.array([1.0, np.nan, -2.0], np.float32)
    (replaced,) = run(Op("ReplaceNaN", ["x"], ["y"], args={"value": 7.0}), nan)
    np.testing.assert_array_equal(replaced, [1.0, 7.0, -2.0])


@pytest.mark.parametrize(("p", "average"), [(1, 0), (2, 0), (2, 1)])
def test_lp_norm_against_loops(p: int, average: int) -> None:
    x = randn(3, 4, seed=24)
    (ours,) = run(Op("LpNorm", ["x"], ["y"], args={"p": p, "average": average}), x)
    total = sum(abs(float(v)) ** p for v in x.reshape(-1))
    assert ours.shape == (1,)
    assert ours[0] == pytest.approx(total / (x.size if average else 1), rel=1e-5)
    with pytest.raises(ExecutionError, match="p=1 or p=2"):
        run(Op("LpNorm", ["x"], ["y"], args={"p": 3}), x)


def test_batch_box_cox_and_elementwise_linear_against_loops() -> None:
    rng = np.random.default_rng(25)
    data = rng.uniform(-1, 3, (4, 3)).astype(np.float32)
    lambda1 = np.array([0.0, 0.5, -1.5], np.float32)
    lambda2 = np.array([2.0, 1.5, 1.0], np.float32)
    (box_cox,) = run(Op("BatchBoxCox", ["d", "l1", "l2"], ["y"]), data, lambda1, lambda2)
    for i in range(4):
        for j in range(3):
            t = max(float(data[i, j]) + float(lambda2[j]), 1e-6)
            lam = float(lambda1[j])
            expected = math.log(t) if lam == 0 else (t**lam - 1) / lam
            assert box_cox[i, j] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    x, w, b = randn(2, 3, 2, seed=26), randn(6, seed=27), randn(6, seed=28)
    (linear,) = run(Op("ElementwiseLinear", ["x", "w", "b"], ["y"]), x, w, b)
    flat = x.reshape(2, 6)
    for i in range(2):
        for j in range(6):
            assert linear.reshape(2, 6)[i, j] == pytest.approx(flat[i, j] * w[j] + b[j], rel=1e-6)
    w0, b0 = randn(12, seed=29), randn(12, seed=30)
    (whole,) = run(Op("ElementwiseLinear", ["x", "w", "b"], ["y"], args={"axis": 0}), x, w0, b0)
    np.testing.assert_allclose(whole.reshape(-1), x.reshape(-1) * w0 + b0, rtol=1e-6)
    with pytest.raises(ExecutionError, match="need 6 values"):
        run(Op("ElementwiseLinear", ["x", "w", "b"], ["y"]), x, w0, b0)


def test_is_empty() -> None:
    (empty,) = run(Op("IsEmpty", ["x"], ["y"]), np.zeros((0, 4), np.float32))
    (full,) = run(Op("IsEmpty", ["x"], ["y"]), np.zeros((1,), np.float32))
    assert empty.shape == () and empty.dtype == np.bool_ and bool(empty) and not bool(full)

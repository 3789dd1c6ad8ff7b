"""The ONNX optimisation passes, rule by rule and refusal by refusal, each proven by onnxruntime.

Every case writes a small model, runs one pass (or the pipeline it needs), and checks through
``onnx_check.rewritten`` that onnx's checker accepts the result, the opset is unchanged and
onnxruntime gives the original's outputs; then what the pass did (or refused) is asserted.
Weights are random, so a fusion along the wrong axis shows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_check import graph_model, normal, rewritten, run, types

from graphtools.errors import PassError
from graphtools.pass_infra import PassManager
from graphtools.serde.onnx_io import load_onnx_model, save_onnx_model

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _norm(name: str, x: str, y: str, channels: int, **attrs: object) -> tuple[object, dict]:
    rng = np.random.default_rng(len(name))
    params = {
        f"{name}_s": rng.uniform(0.5, 1.5, channels).astype(np.float32),
        f"{name}_b": rng.uniform(-0.5, 0.5, channels).astype(np.float32),
        f"{name}_m": rng.uniform(-0.5, 0.5, channels).astype(np.float32),
        f"{name}_v": rng.uniform(0.5, 1.5, channels).astype(np.float32),
    }
    node = helper.make_node("BatchNormalization", [x, *params], [y], **attrs)
    return node, params


# -- fuse-batchnorm ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Conv", "Conv-no-bias", "ConvTranspose", "Gemm", "Gemm-transB"])
def test_a_batch_norm_folds_into_the_layer_before_it(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(3)
    if kind.startswith("Gemm"):
        trans = kind.endswith("transB")
        weight = rng.standard_normal((5, 4) if trans else (4, 5)).astype(np.float32)
        layer = helper.make_node(
            "Gemm", ["x", "w", "c"], ["h"], alpha=0.5, beta=2.0, transB=int(trans)
        )
        params = {"w": weight, "c": rng.standard_normal(5).astype(np.float32)}
        shape_in, shape_out, feeds = [3, 4], [3, 5], {"x": normal(3, 4)}
    else:
        transpose = kind == "ConvTranspose"
        weight = rng.standard_normal((3, 5, 3, 3) if transpose else (5, 3, 3, 3)).astype(np.float32)
        inputs = ["x", "w"] if kind == "Conv-no-bias" else ["x", "w", "c"]
        layer = helper.make_node(kind.split("-")[0], inputs, ["h"], pads=[1, 1, 1, 1])
        params = {"w": weight, "c": rng.standard_normal(5).astype(np.float32)}
        if kind == "Conv-no-bias":
            del params["c"]
        shape_in, shape_out, feeds = [1, 3, 6, 6], [1, 5, 6, 6], {"x": normal(1, 3, 6, 6)}
    norm, norm_params = _norm("bn", "h", "y", 5, epsilon=1e-3)
    path = graph_model(
        tmp_path / "m.onnx",
        [layer, norm],
        {"x": (F, shape_in)},
        {"y": (F, shape_out)},
        {**params, **norm_params},
    )
    model, _ = rewritten(path, "fuse-batchnorm,remove-unused-params", feeds, tmp_path)
    assert types(model) == [layer.op_type]
    assert not (set(norm_params) & set(model.predict_net.initializers))


def test_a_training_mode_batch_norm_and_a_shared_conv_output_stay(tmp_path: Path) -> None:
    """Training mode normalises with the batch's statistics: no weight can hold them
    (onnxscript's optimizer folds it anyway); a conv output read twice must stay computed."""
    conv = helper.make_node("Conv", ["x", "w"], ["h"])
    training, params = _norm("bn", "h", "y", 2, training_mode=1)
    training.output.extend(["mean_out", "var_out"])
    weights = {"w": normal(2, 3, 1, 1), **params}
    path = graph_model(
        tmp_path / "t.onnx",
        [conv, training],
        {"x": (F, [2, 3, 4, 4])},
        {"y": (F, [2, 2, 4, 4])},
        weights,
    )
    model, _ = rewritten(path, "fuse-batchnorm", {"x": normal(2, 3, 4, 4)}, tmp_path)
    assert types(model) == ["Conv", "BatchNormalization"]
    shared, params = _norm("bn", "h", "y", 2)
    path = graph_model(
        tmp_path / "s.onnx",
        [conv, shared],
        {"x": (F, [1, 3, 4, 4])},
        {"y": (F, [1, 2, 4, 4]), "h": (F, [1, 2, 4, 4])},
        {"w": normal(2, 3, 1, 1), **params},
    )
    model, _ = rewritten(path, "fuse-batchnorm", {"x": normal(1, 3, 4, 4)}, tmp_path)
    assert types(model) == ["Conv", "BatchNormalization"]


# -- fuse-affine ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["Mul", "Add"])
def test_a_per_channel_scale_or_shift_folds_into_conv_batchnorm_and_gemm(
    tmp_path: Path, op_type: str
) -> None:
    rng = np.random.default_rng(5)
    norm, params = _norm("bn", "x", "n", 3)
    nodes = [
        norm,
        helper.make_node(op_type, ["n", "k1"], ["a"]),  # into the BatchNormalization
        helper.make_node("Conv", ["a", "w", "c"], ["h"]),
        helper.make_node(op_type, ["k2", "h"], ["b"]),  # constant first: into the Conv
        helper.make_node("Flatten", ["b"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["o"], transB=1),
        helper.make_node(op_type, ["o", "k3"], ["y"]),  # into the Gemm (C added)
    ]
    weights = {
        **params,
        "k1": rng.uniform(0.5, 1.5, (1, 3, 1, 1)).astype(np.float32),
        "w": normal(4, 3, 1, 1),
        "c": normal(4),
        "k2": rng.uniform(0.5, 1.5, (4, 1, 1)).astype(np.float32),
        "g": normal(6, 64),
        "k3": rng.uniform(0.5, 1.5, (6,)).astype(np.float32),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 3, 4, 4])}, {"y": (F, [2, 6])}, weights
    )
    model, _ = rewritten(path, "fuse-affine", {"x": normal(2, 3, 4, 4)}, tmp_path)
    assert types(model) == ["BatchNormalization", "Conv", "Flatten", "Gemm"]


def test_a_per_channel_scale_of_a_conv_input_folds_into_its_weights(tmp_path: Path) -> None:
    """conv(x * k) with k per input channel (a normalising layer before the stem, onnxsim
    folds it) is conv(x) with the weights scaled along their input channels, per group, the
    bias and the zero padding unchanged; a scale along another axis, a non-finite one, and one
    whose product is read elsewhere stay."""
    rng = np.random.default_rng(7)
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["a"]),
        helper.make_node("Conv", ["a", "w", "c"], ["b"], pads=[1, 1, 1, 1]),  # folds
        helper.make_node("Relu", ["b"], ["br"]),  # (a Mul after a Conv goes into it)
        helper.make_node("Mul", ["kg", "br"], ["d"]),
        helper.make_node("Conv", ["d", "wg"], ["e"], group=2, pads=[1, 1, 1, 1]),  # folds
        helper.make_node("Relu", ["e"], ["er"]),
        helper.make_node("Mul", ["er", "k_row"], ["f"]),
        helper.make_node("Conv", ["f", "w2"], ["g"]),  # along the width: stays
        helper.make_node("Relu", ["g"], ["gr"]),
        helper.make_node("Mul", ["gr", "k_inf"], ["h"]),
        helper.make_node("Conv", ["h", "w2"], ["i"]),  # an infinite factor: stays
        helper.make_node("Relu", ["i"], ["ir"]),
        helper.make_node("Mul", ["ir", "k4"], ["j"]),
        helper.make_node("Conv", ["j", "w2"], ["l"]),  # j is read twice: stays
        helper.make_node("Add", ["l", "j"], ["y"]),
    ]
    weights = {
        "k": rng.uniform(0.5, 1.5, (1, 3, 1, 1)).astype(np.float32),
        "w": normal(4, 3, 3, 3),
        "c": normal(4),
        "kg": rng.uniform(0.5, 1.5, (4, 1, 1)).astype(np.float32),
        "wg": normal(4, 2, 3, 3),
        "k_row": rng.uniform(0.5, 1.5, (1, 1, 1, 4)).astype(np.float32),
        "w2": normal(4, 4, 1, 1),
        "k_inf": np.array([1.0, np.inf, 1.0, 1.0], np.float32).reshape(1, 4, 1, 1),
        "k4": rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 3, 4, 4])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "fuse-affine", {"x": normal(2, 3, 4, 4)}, tmp_path)
    kept = ["Relu", "Mul", "Conv"]
    assert types(model) == ["Conv", "Relu", "Conv", *kept, *kept, *kept, "Add"]
    assert model.predict_net[0].inputs[0] == "x" and model.predict_net[0].inputs[2] == "c"


@pytest.mark.parametrize(
    ("shape", "weight_scale"),
    [([1, 1, 5, 5], 1.0), ([4, 5, 5], 1.0), ([1, 4, 5, 5], 1e3)],
    ids=["one-channel-broadcast", "rank-raised", "float16-overflow"],
)
def test_an_input_scale_that_broadcasts_or_overflows_stays(
    tmp_path: Path, shape: list[int], weight_scale: float
) -> None:
    """A Mul that broadcasts the Conv's data up (one channel to four, rank 3 to 4) is not a
    scale of its input channels, and weights that the scale would push out of float16 stay
    (found by review)."""
    dtype = TensorProto.FLOAT16 if weight_scale > 1 else F
    numpy_type = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["a"]),
        helper.make_node("Conv", ["a", "w"], ["y"]),
    ]
    weights = {
        "k": np.linspace(0.5, 1.5, 4).reshape(1, 4, 1, 1).astype(numpy_type) * weight_scale,
        "w": (normal(6, 4, 3, 3) * 100).astype(numpy_type),  # times 1e3: past float16's max
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (dtype, shape)}, {"y": (dtype, None)}, weights
    )
    x = (normal(*shape) / weight_scale).astype(numpy_type)
    model, _ = rewritten(path, "fuse-affine", {"x": x}, tmp_path)
    assert types(model) == ["Mul", "Conv"]


def test_a_scale_that_would_push_the_layers_weights_past_float16_stays(tmp_path: Path) -> None:
    """Conv(x, w) * 1000 in float16 with weights near 100: each step stays finite for a small
    x, but w * 1000 is past float16's 65504, so folding would give inf."""
    f16 = np.float16
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Mul", ["c", "k"], ["y"]),
    ]
    weights = {
        "w": (normal(2, 3, 3, 3) * 100).astype(f16),
        "k": np.full((1, 2, 1, 1), 1000, f16),
    }
    float16 = TensorProto.FLOAT16
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (float16, [1, 3, 4, 4])}, {"y": (float16, None)}, weights
    )
    x = (normal(1, 3, 4, 4) * 1e-3).astype(f16)
    model, _ = rewritten(path, "fuse-affine", {"x": x}, tmp_path)
    assert types(model) == ["Conv", "Mul"]


def test_a_scale_that_is_not_per_channel_stays(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["h"]),
        helper.make_node("Mul", ["h", "k"], ["y"]),
    ]
    weights = {"w": normal(2, 3, 1, 1), "k": normal(1, 2, 4, 1)}  # varies along H too
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, 3, 4, 4])}, {"y": (F, [1, 2, 4, 4])}, weights
    )
    model, _ = rewritten(path, "fuse-affine", {"x": normal(1, 3, 4, 4)}, tmp_path)
    assert types(model) == ["Conv", "Mul"]


# -- fuse-pad ------------------------------------------------------------------------------------


def test_a_zero_pad_folds_into_conv_and_average_pools(tmp_path: Path) -> None:
    """A pooling window padded by its own size or more is refused by onnxruntime: that Pad
    stays. An average leaving its own padding out counts the Pad's zeros: with no padding of
    its own it takes the Pad as padding it counts; with some, the Pad stays."""
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    small = np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64)
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"]),
        helper.make_node("Conv", ["a", "w"], ["b"], pads=[1, 0, 0, 1]),
        helper.make_node("Pad", ["b", "small"], ["c"]),
        helper.make_node("AveragePool", ["c"], ["d"], kernel_shape=[3, 3], count_include_pad=1),
        helper.make_node("Pad", ["d", "p"], ["e"]),
        helper.make_node("AveragePool", ["e"], ["f"], kernel_shape=[2, 2], count_include_pad=1),
        helper.make_node("Pad", ["f", "small"], ["g"]),
        helper.make_node("AveragePool", ["g"], ["h"], kernel_shape=[3, 3]),
        helper.make_node("Pad", ["h", "small"], ["i"]),
        helper.make_node("AveragePool", ["i"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [1, 3, 5, 5])},
        {"y": (F, None)},
        {"p": pads, "small": small, "w": normal(2, 3, 3, 3)},
    )
    model, _ = rewritten(path, "fuse-pad", {"x": normal(1, 3, 5, 5)}, tmp_path)
    kinds = ["Conv", "AveragePool", "Pad", "AveragePool", "AveragePool", "Pad", "AveragePool"]
    assert types(model) == kinds
    assert list(model.predict_net[0].arg("pads")) == [2, 2, 2, 2]
    assert list(model.predict_net[1].arg("pads")) == [1, 0, 0, 1]
    assert list(model.predict_net[4].arg("pads")) == [1, 0, 0, 1]
    assert model.predict_net[4].arg("count_include_pad") == 1


def test_a_pad_before_an_average_pool_of_opset_6_stays(tmp_path: Path) -> None:
    """AveragePool takes count_include_pad from opset 7 on (onnxruntime has no kernel for
    AveragePool-1, so the checker is the proof here)."""
    nodes = [
        helper.make_node("Pad", ["x"], ["a"], pads=[0, 0, 1, 1, 0, 0, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3]),
    ]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, 2, 6, 7])}, {"y": (F, None)}, opset=6
    )
    model = load_onnx_model(path)
    PassManager.parse("fuse-pad")(model)
    assert types(model) == ["Pad", "AveragePool"]


def test_a_reflecting_or_nonzero_pad_stays(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"], mode="reflect"),
        helper.make_node("Conv", ["a", "w"], ["b"]),
        helper.make_node("Pad", ["b", "p", "v"], ["c"]),
        helper.make_node("Conv", ["c", "w2"], ["y"]),
    ]
    weights = {
        "p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "v": np.array(0.5, np.float32),
        "w": normal(2, 3, 3, 3),
        "w2": normal(2, 2, 3, 3),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, 3, 5, 5])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "fuse-pad", {"x": normal(1, 3, 5, 5)}, tmp_path)
    assert types(model) == ["Pad", "Conv", "Pad", "Conv"]


@pytest.mark.parametrize("pool", ["AveragePool", "MaxPool"])
def test_a_pad_before_a_ceiled_pool_stays(tmp_path: Path, pool: str) -> None:
    """5x5 padded to 7x7, pooled 2x2 by 2 with ceil_mode: 4x4. Folded into the pool's own
    pads, onnxruntime drops the window starting in the end padding: 3x3 (the model still
    declared 4x4). rewritten() compares the outputs, shapes included."""
    extra = {"count_include_pad": 1} if pool == "AveragePool" else {}
    value = [] if pool == "AveragePool" else ["v"]
    nodes = [
        helper.make_node("Pad", ["x", "p", *value], ["a"]),
        helper.make_node(
            pool, ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, **extra
        ),
    ]
    weights = {
        "p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "v": np.array(-np.inf, np.float32),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, 1, 5, 5])}, {"y": (F, [1, 1, 4, 4])}, weights
    )
    model, _ = rewritten(path, "fuse-pad", {"x": normal(1, 1, 5, 5)}, tmp_path)
    assert types(model) == ["Pad", pool]


# -- fuse-matmul-add -----------------------------------------------------------------------------


def test_matmul_add_on_matrices_becomes_gemm_and_on_a_batch_of_rows_stays(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["b", "m"], ["h"]),
        helper.make_node("MatMul", ["z", "w"], ["m3"]),
        helper.make_node("Add", ["m3", "b"], ["y3"]),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2, 4]), "z": (F, [2, 3, 4])},
        {"y": (F, [2, 5]), "y3": (F, [2, 3, 5])},
        {"w": normal(4, 5), "b": normal(5)},
    )
    feeds = {"x": normal(2, 4), "z": normal(2, 3, 4, seed=1)}
    model, _ = rewritten(path, "fuse-matmul-add", feeds, tmp_path)
    assert types(model) == ["Gemm", "MatMul", "Add", "Relu"]


# -- merge-consecutive-ops -----------------------------------------------------------------------


def test_a_static_chain_of_moves_becomes_the_fewest_ops(tmp_path: Path) -> None:
    """The transformer's split into heads: Reshape, Unsqueeze, Transpose, Squeeze moving a dim
    of size 1 around is Reshape + Transpose; Reshape, Transpose, Reshape is Reshape, Transpose."""
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["v"]),
        helper.make_node("Unsqueeze", ["v", "zero"], ["u"]),
        helper.make_node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4]),
        helper.make_node("Squeeze", ["t", "minus2"], ["q"]),
        helper.make_node("Gather", ["q", "index"], ["g"], axis=0),
        helper.make_node("Reshape", ["g", "s2"], ["r"]),
        helper.make_node("Transpose", ["r"], ["rt"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["rt", "s3"], ["y"]),
    ]
    weights = {
        "s1": np.array([8, 2, 3, 32], np.int64),
        "zero": np.array([0], np.int64),
        "minus2": np.array([-2], np.int64),
        "index": np.array(1, np.int64),
        "s2": np.array([8, 8, 8], np.int64),
        "s3": np.array([2, 4, 8, 8], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [8, 2, 96])}, {"y": (F, [2, 4, 8, 8])}, weights
    )
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": normal(8, 2, 96)}, tmp_path)
    assert types(model) == ["Reshape", "Transpose", "Gather", "Reshape", "Transpose"]


@pytest.mark.parametrize(
    ("squeezed", "unsqueezed", "left"),
    [([0], [0], ["Relu", "Neg"]), ([-3], [0], ["Relu", "Neg"]), ([0], [1], None)],
    ids=["same-axis", "same-axis-from-the-end", "another-axis"],
)
def test_a_squeeze_undone_on_a_symbolic_shape_goes(
    tmp_path: Path, squeezed: list[int], unsqueezed: list[int], left: list[str] | None
) -> None:
    """Squeeze(axis k) then Unsqueeze(axis k) gives its input back (Squeeze takes dims of
    size 1 only); on [1, B, 5] both stayed (a dynamo LSTM export keeps two such pairs).
    Putting the dim back elsewhere is no identity and stays a move."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Squeeze", ["r", "s_axes"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "u_axes"], ["u"]),
        helper.make_node("Neg", ["u"], ["y"]),
    ]
    weights = {"s_axes": np.array(squeezed, np.int64), "u_axes": np.array(unsqueezed, np.int64)}
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [1, "B", 5])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(
        path, "merge-consecutive-ops,remove-identity-ops", {"x": normal(1, 3, 5)}, tmp_path
    )
    if left is not None:
        assert types(model) == left
    else:
        assert "Neg" in types(model) and len(types(model)) > 2


def test_moves_on_a_symbolic_batch_merge_by_rank(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
        helper.make_node("Unsqueeze", ["a", "one"], ["b"]),
        helper.make_node("Transpose", ["b"], ["c"], perm=[0, 2, 1, 3]),
        helper.make_node("Squeeze", ["c", "two"], ["d"]),
        helper.make_node("Unsqueeze", ["d", "zero"], ["e"]),
        helper.make_node("Reshape", ["e", "target"], ["y"]),
    ]
    weights = {
        "one": np.array([1], np.int64),
        "two": np.array([2], np.int64),
        "zero": np.array([0], np.int64),
        "target": np.array([-1, 12], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, ["N", 3, 4])}, {"y": (F, ["M", 12])}, weights
    )
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": normal(5, 3, 4)}, tmp_path)
    assert types(model) == ["Transpose", "Reshape"]
    assert run(path, {"x": normal(2, 3, 4)})[0].shape == (2, 12)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_a_reduce_dropping_axes_of_size_one_moves_as_a_squeeze(tmp_path: Path, opset: int) -> None:
    """x.unsqueeze(1).mean(1) is x: a reduce over axes of size 1 that drops them is a Squeeze
    in a chain of moves (on a symbolic batch and on a static shape, axes as attributes or
    inputs), exactly; over an axis of size 3, or keeping its dims, it stays a reduce."""

    def axes_node(op_type: str, x: str, y: str, axes: list[int], **attrs: int) -> onnx.NodeProto:
        since = 13 if op_type in ("ReduceSum", "Unsqueeze", "Squeeze") else 18
        if opset >= since:
            weights[f"axes_{y}"] = np.array(axes, np.int64)
            return helper.make_node(op_type, [x, f"axes_{y}"], [y], **attrs)
        return helper.make_node(op_type, [x], [y], axes=axes, **attrs)

    weights: dict[str, np.ndarray] = {}
    nodes = [
        axes_node("Unsqueeze", "x", "u", [1]),
        axes_node("ReduceMean", "u", "m", [1], keepdims=0),  # x again: goes
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Neg", ["s"], ["n"]),
        axes_node("ReduceSum", "n", "t", [-2], keepdims=0),  # [4, 3, 1, 5] -> [4, 3, 5]
        axes_node("Unsqueeze", "t", "y2", [2]),  # back: goes
        axes_node("ReduceMax", "s", "k", [1], keepdims=0),  # size 3: stays
        axes_node("Unsqueeze", "k", "y3", [1]),
        axes_node("ReduceProd", "s", "p", [2], keepdims=1),  # keeps its dims: not a move
        axes_node("Squeeze", "p", "y4", [2]),
    ]
    outputs = {"r": (F, None), "y2": (F, None), "y3": (F, None), "y4": (F, None)}
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, ["B", 6]), "s": (F, [4, 3, 1, 5])},
        outputs,
        weights,
        opset,
    )
    feeds = {"x": normal(2, 6), "s": normal(4, 3, 1, 5)}
    model, target = rewritten(path, "merge-consecutive-ops,remove-identity-ops", feeds, tmp_path)
    kept = ["Neg", "ReduceMax", "ReduceProd", "Relu", "Squeeze", "Unsqueeze"]
    assert sorted(types(model)) == kept
    merged = {op.outputs[0]: op for op in model.predict_net}
    assert merged["r"].inputs == ("x",) and merged["y2"].type == "Neg"
    feeds = {"x": normal(5, 6), "s": normal(4, 3, 1, 5)}
    for before, after in zip(run(path, feeds), run(target, feeds), strict=True):
        np.testing.assert_array_equal(before, after)


def test_reshapes_on_a_symbolic_batch_merge_where_the_dims_they_copy_stay(
    tmp_path: Path,
) -> None:
    """A dynamo GroupNorm export of x.unsqueeze(-1) on a dynamic batch: Unsqueeze then a
    Reshape copying dim 0 (``[0, 2, -1]``) is the Reshape alone (dim 0 is N either way), and
    a Reshape to ``[0, 4, 16, 1]`` then Squeeze(-1) is one Reshape to ``[0, 4, 16]``; onnxsim
    left 3 nodes where these left 5. Where the copied dim would change (an Unsqueeze at the
    front) both stay."""
    weights = {
        "last": np.array([-1], np.int64),
        "first": np.array([0], np.int64),
        "groups": np.array([0, 2, -1], np.int64),
        "back": np.array([0, 4, 16, 1], np.int64),
        "copy0": np.array([0, -1], np.int64),
        "flat": np.array([0, 64], np.int64),
    }
    nodes = [
        helper.make_node("Unsqueeze", ["x", "last"], ["u"]),
        helper.make_node("Reshape", ["u", "groups"], ["g"]),  # reads x
        helper.make_node("Relu", ["g"], ["r"]),
        helper.make_node("Reshape", ["r", "back"], ["b"]),
        helper.make_node("Squeeze", ["b", "last"], ["y"]),  # one Reshape with b
        helper.make_node("Unsqueeze", ["x", "first"], ["f"]),  # [1, N, 4, 16]
        helper.make_node("Reshape", ["f", "copy0"], ["y2"]),  # copies the 1: stays
        helper.make_node("Neg", ["x"], ["n"]),
        helper.make_node("Reshape", ["n", "flat"], ["m"]),
        helper.make_node("Unsqueeze", ["m", "first"], ["y3"]),  # the 0 would move: stays
    ]
    outputs = {"y": (F, ["N", 4, 16]), "y2": (F, None), "y3": (F, None)}
    path = graph_model(tmp_path / "m.onnx", nodes, {"x": (F, ["N", 4, 16])}, outputs, weights, 18)
    model, target = rewritten(path, "merge-consecutive-ops", {"x": normal(2, 4, 16)}, tmp_path)
    made = {op.outputs[0]: op for op in model.predict_net}
    assert made["g"].inputs[0] == "x" and "u" not in made
    assert made["y"].type == "Reshape" and made["y"].inputs[0] == "r" and "b" not in made
    assert made["y2"].inputs[0] == "f" and made["y3"].inputs[0] == "m"
    assert len(model.predict_net) == len(nodes) - 2
    feeds = {"x": normal(5, 4, 16, seed=1)}
    for before, after in zip(run(path, feeds), run(target, feeds), strict=True):
        np.testing.assert_array_equal(before, after)


def test_casts_merge_only_through_a_type_holding_every_value(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["a"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["a"], ["b"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [40])},
        {"b": (TensorProto.FLOAT16, [40]), "y": (F, [40])},
    )
    feeds = {"x": (normal(40) * 1000).astype(np.float32)}
    model, _ = rewritten(path, "merge-consecutive-ops", feeds, tmp_path)
    assert types(model) == ["Cast", "Cast", "Cast"]  # float32 -> float16 -> float32 rounds


def test_concats_and_slices_merge(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Concat", ["x", "x"], ["a"], axis=1),
        helper.make_node("Concat", ["a", "x"], ["b"], axis=-1),
        helper.make_node("Slice", ["b", "s0", "e0", "ax0"], ["c"]),
        helper.make_node("Slice", ["c", "s1", "e1", "ax1", "st1"], ["y"]),
    ]
    weights = {
        "s0": np.array([1], np.int64),
        "e0": np.array([3], np.int64),
        "ax0": np.array([0], np.int64),
        "s1": np.array([5], np.int64),
        "e1": np.array([0], np.int64),
        "ax1": np.array([-1], np.int64),
        "st1": np.array([-2], np.int64),
    }
    path = graph_model(tmp_path / "m.onnx", nodes, {"x": (F, [4, 2])}, {"y": (F, None)}, weights)
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": normal(4, 2)}, tmp_path)
    assert types(model) == ["Concat", "Slice"]


@pytest.mark.parametrize("opset", [13, 18])
def test_consecutive_reduces_of_one_kind_merge(tmp_path: Path, opset: int) -> None:
    """x.mean(3).mean(2) is one ReduceMean over (2, 3), and two reduces keeping their dims are
    one; one dropping its dims and one keeping them (either way round), two kinds of reduce,
    and a first result read twice stay. Axes as attributes or inputs."""

    def reduce(op_type: str, x: str, y: str, axes: list[int], keepdims: int) -> onnx.NodeProto:
        if opset >= (13 if op_type == "ReduceSum" else 18):
            weights[f"axes_{y}"] = np.array(axes, np.int64)
            return helper.make_node(op_type, [x, f"axes_{y}"], [y], keepdims=keepdims)
        return helper.make_node(op_type, [x], [y], axes=axes, keepdims=keepdims)

    weights: dict[str, np.ndarray] = {}
    nodes = [
        reduce("ReduceMean", "x", "m1", [3], 0),
        reduce("ReduceMean", "m1", "m2", [2], 0),  # merges: mean over (2, 3)
        reduce("ReduceMax", "x", "x1", [1], 1),
        reduce("ReduceMax", "x1", "x2", [-1], 1),  # merges: max over (1, 3), kept
        reduce("ReduceMax", "x", "k1", [1], 1),
        reduce("ReduceMax", "k1", "k2", [0], 0),  # kept, then dropped: stays
        reduce("ReduceSum", "x", "s1", [0], 0),
        reduce("ReduceSum", "s1", "s2", [0], 1),  # dropped, then kept: stays
        reduce("ReduceMin", "x", "n1", [2], 1),
        reduce("ReduceMax", "n1", "n2", [2], 1),  # another kind: stays
        reduce("ReduceProd", "x", "p1", [1], 1),
        reduce("ReduceProd", "p1", "p2", [3], 1),  # p1 is read twice: stays
        helper.make_node("Neg", ["p1"], ["p3"]),
    ]
    outputs = {name: (F, None) for name in ("m2", "x2", "k2", "s2", "n2", "p2", "p3")}
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 3, 4, 5])}, outputs, weights, opset
    )
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": normal(2, 3, 4, 5)}, tmp_path)
    assert types(model).count("ReduceMean") == types(model).count("ReduceMax") - 3 == 1
    assert len(model.predict_net) == len(nodes) - 2
    merged = {op.outputs[0]: op for op in model.predict_net}
    assert merged["m2"].inputs[0] == merged["x2"].inputs[0] == "x"


def test_a_mul_or_add_by_a_constant_of_one_by_a_constant_is_one(tmp_path: Path) -> None:
    """x * k * 0.5 (a layer scale) is x * (k * 0.5), and (1 + x) + c one Add, the constant
    computed by onnxruntime; a Mul after an Add, constants that broadcast into a bigger one,
    and a Mul by a computed value stay."""
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["a"]),
        helper.make_node("Mul", ["half", "a"], ["b"]),  # merges (the constant first)
        helper.make_node("Add", ["one", "b"], ["c"]),
        helper.make_node("Add", ["c", "bias"], ["d"]),  # merges
        helper.make_node("Mul", ["d", "col"], ["e"]),  # after an Add: stays
        helper.make_node("Mul", ["e", "row"], ["f"]),  # col * row grows: stays
        helper.make_node("Mul", ["f", "x"], ["y"]),  # by a computed value: stays
    ]
    weights = {
        "k": np.arange(3, dtype=np.float32).reshape(3, 1, 1) + 0.25,
        "half": np.float32(0.5),
        "one": np.ones((1, 1), np.float32),
        "bias": np.linspace(-1, 1, 4, dtype=np.float32),
        "col": np.linspace(1, 2, 4, dtype=np.float32).reshape(4, 1),
        "row": np.linspace(2, 3, 4, dtype=np.float32),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 3, 4, 4])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": normal(2, 3, 4, 4)}, tmp_path)
    assert types(model) == ["Mul", "Add", "Mul", "Mul", "Mul"]
    assert model.predict_net[0].inputs[0] == "x" and model.predict_net[1].inputs[0] == "b"


def _layer_norm(x: str, out: str, axes: list[int], square: str = "Pow") -> list[onnx.NodeProto]:
    """A layer norm written out as a hand-written module exports it (opset 17: axes as an
    attribute), ending in ``{out}_n`` (the normalised value)."""
    p = f"{out}_"
    return [
        helper.make_node("ReduceMean", [x], [p + "m"], axes=axes),
        helper.make_node("Sub", [x, p + "m"], [p + "d"]),
        helper.make_node("Pow", [p + "d", "two"], [p + "sq"])
        if square == "Pow"
        else helper.make_node("Mul", [p + "d", p + "d"], [p + "sq"]),
        helper.make_node("ReduceMean", [p + "sq"], [p + "v"], axes=axes),
        helper.make_node("Add", [p + "v", "eps"], [p + "e"]),
        helper.make_node("Sqrt", [p + "e"], [p + "s"]),
        helper.make_node("Div", [p + "d", p + "s"], [p + "n"]),
    ]


def test_a_layer_norm_written_out_becomes_layer_normalization(tmp_path: Path) -> None:
    """Mean, centre, variance, divide, scale and shift over the last dims (a hand-written
    LayerNorm module; onnxsim fuses it) become one LayerNormalization, with ones for a missing
    scale; one over a middle axis, one whose centred value is read elsewhere, and one with
    a scale of another shape (fused up to the division) keep what LayerNormalization cannot
    take."""
    nodes = [
        *_layer_norm("x", "a", [-1]),
        helper.make_node("Mul", ["a_n", "gamma"], ["a_y"]),
        helper.make_node("Add", ["beta", "a_y"], ["a_z"]),  # fused: 9 ops into 1
        *_layer_norm("a_z", "b", [1, 2], square="Mul"),  # no scale: ones; Mul(d, d)
        *_layer_norm("b_n", "c", [1]),  # a middle axis: stays
        *_layer_norm("c_n", "d", [-1]),
        helper.make_node("Mul", ["d_n", "scalar"], ["d_y"]),  # a scalar scale: stays apart
        helper.make_node("Relu", ["d_y"], ["r"]),
        *_layer_norm("r", "e", [-1]),
        helper.make_node("Add", ["e_n", "e_d"], ["y"]),  # e_d read outside: stays
    ]
    weights = {
        "two": np.float32(2.0),
        "eps": np.float32(1e-5),
        "gamma": np.linspace(0.5, 1.5, 8, dtype=np.float32),
        "beta": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8),
        "scalar": np.float32(1.5),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, ["N", 3, 8])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "fuse-layer-norm", {"x": normal(2, 3, 8)}, tmp_path)
    kinds = types(model)
    assert kinds[:2] == ["LayerNormalization", "LayerNormalization"]
    assert kinds.count("LayerNormalization") == 3 and len(kinds) == 2 + 7 + 1 + 1 + 1 + 7 + 1
    first, second = model.predict_net[0], model.predict_net[1]
    assert first.inputs == ("x", "gamma", "beta") and first.outputs == ("a_z",)
    assert (first.arg("axis"), second.arg("axis")) == (2, 1)
    assert first.arg("epsilon") == pytest.approx(1e-5)
    ones = model.predict_net.initializers[second.inputs[1]].numpy()
    assert ones.shape == (3, 8) and np.all(ones == 1)


def test_a_layer_norm_constant_raising_the_rank_stays_apart(tmp_path: Path) -> None:
    """A scale of more dims than x broadcasts the result up a rank, which LayerNormalization
    cannot (found by review): the norm fuses, the Mul stays; an eps of more dims keeps it
    all."""
    nodes = [
        *_layer_norm("x", "a", [-1]),
        helper.make_node("Mul", ["a_n", "gamma4"], ["a_y"]),
        helper.make_node("Squeeze", ["a_y", "zero"], ["s"]),
        *_layer_norm("s", "b", [-1]),
    ]
    nodes[-3] = helper.make_node("Add", ["b_v", "eps4"], ["b_e"])
    weights = {
        "two": np.float32(2.0),
        "eps": np.float32(1e-5),
        "eps4": np.full((1, 1, 1, 1), 1e-5, np.float32),
        "gamma4": np.linspace(0.5, 1.5, 8, dtype=np.float32).reshape(1, 1, 1, 8),
        "zero": np.array([0], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 3, 8])}, {"b_n": (F, None)}, weights
    )
    model, _ = rewritten(path, "fuse-layer-norm", {"x": normal(2, 3, 8)}, tmp_path)
    assert types(model)[:3] == ["LayerNormalization", "Mul", "Squeeze"]
    assert types(model).count("LayerNormalization") == 1


def test_a_layer_norm_before_opset_17_stays(tmp_path: Path) -> None:
    nodes = _layer_norm("x", "a", [-1])
    weights = {"two": np.float32(2.0), "eps": np.float32(1e-5)}
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 8])}, {"a_n": (F, None)}, weights, opset=16
    )
    model, _ = rewritten(path, "fuse-layer-norm", {"x": normal(2, 8)}, tmp_path)
    assert "LayerNormalization" not in types(model)


@pytest.mark.parametrize(
    ("dtype", "first", "second"),
    [(TensorProto.FLOAT16, 1024.0, 1024.0), (TensorProto.FLOAT16, 2**-12, 2**-13), (F, 1e30, 1e30)],
    ids=["float16-overflow", "float16-underflow", "float32-overflow"],
)
def test_constants_whose_product_leaves_the_type_stay_apart(
    tmp_path: Path, dtype: int, first: float, second: float
) -> None:
    """x * c1 * c2 where c1 * c2 overflows (or flushes to zero) in the type while each step
    gave a number (found by review): merged, the output would be inf or 0."""
    numpy_type = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [
        helper.make_node("Mul", ["x", "c1"], ["a"]),
        helper.make_node("Mul", ["a", "c2"], ["y"]),
    ]
    weights = {"c1": np.array(first, numpy_type), "c2": np.array(second, numpy_type)}
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (dtype, [3])}, {"y": (dtype, [3])}, weights
    )
    x = (np.array([1e-3, 1e-2, 2e-2]) / (first * second) ** 0.5).astype(numpy_type)
    model, _ = rewritten(path, "merge-consecutive-ops", {"x": x}, tmp_path)
    assert types(model) == ["Mul", "Mul"]


# -- remove-noop-ops -----------------------------------------------------------------------------


def test_ops_that_give_back_their_input_go(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 1, 2]),
        helper.make_node("Reshape", ["a", "same"], ["b"]),
        helper.make_node("Cast", ["b"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Pad", ["c", "nopad"], ["d"]),
        helper.make_node("Slice", ["d", "zero", "big", "one"], ["e"]),
        helper.make_node("Expand", ["e", "ones"], ["f"]),
        helper.make_node("Dropout", ["f"], ["g"]),
        helper.make_node("Concat", ["g"], ["h"], axis=0),
        helper.make_node("MaxPool", ["h"], ["i"], kernel_shape=[1]),
        helper.make_node("Tile", ["i", "repeats"], ["j"]),
        helper.make_node("Relu", ["j"], ["y"]),
        helper.make_node("Reshape", ["y", "rows"], ["flat"]),
        helper.make_node("Flatten", ["flat"], ["z"], axis=1),  # [N*3, 4] stays [N*3, 4]
    ]
    weights = {
        "same": np.array([0, -1, 4], np.int64),
        "nopad": np.zeros(6, np.int64),
        "zero": np.array([0], np.int64),
        "big": np.array([2**62], np.int64),
        "one": np.array([1], np.int64),
        "ones": np.array([1, 1], np.int64),
        "repeats": np.array([1, 1, 1], np.int64),
        "rows": np.array([-1, 4], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, ["N", 3, 4])},
        {"y": (F, ["N", 3, 4]), "z": (F, None)},
        weights,
    )
    model, _ = rewritten(path, "remove-noop-ops", {"x": normal(2, 3, 4)}, tmp_path)
    assert types(model) == ["Relu", "Reshape"]


def test_ops_that_change_something_stay(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
        helper.make_node("Cast", ["a"], ["b"], to=TensorProto.FLOAT16),
        helper.make_node("Slice", ["b", "one", "big", "one"], ["c"]),
        helper.make_node("Expand", ["c", "wide"], ["e"]),
        helper.make_node("Tile", ["e", "twice"], ["t"]),
        helper.make_node("Flatten", ["t"], ["y"], axis=1),  # rank 4: it folds dims
    ]
    weights = {
        "one": np.array([1], np.int64),
        "big": np.array([2**62], np.int64),
        "wide": np.array([2, 1, 3, 3], np.int64),
        "twice": np.array([1, 1, 2, 1], np.int64),
    }
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2, 3, 4])},
        {"y": (TensorProto.FLOAT16, None)},
        weights,
    )
    model, _ = rewritten(path, "remove-noop-ops", {"x": normal(2, 3, 4)}, tmp_path)
    assert types(model) == ["Transpose", "Cast", "Slice", "Expand", "Tile", "Flatten"]


def test_an_idempotent_op_applied_again_goes_exactly(tmp_path: Path) -> None:
    """f(f(x)) is f(x) for Relu, Abs, Floor, Ceil, Round, Sign and Clip to the same bounds
    (onnxsim drops these; it kept us bigger on hand-written activations): the repeats go,
    bit for bit on NaN, -0.0 and halves; a Clip to other bounds, a Relu of an Abs, and a
    repeat whose first result is a graph output too (both names answered) stay."""
    unary = ["Relu", "Abs", "Floor", "Ceil", "Round", "Sign"]
    nodes = []
    last = "x"
    for op_type in unary:
        for step in (1, 2, 3):
            nodes.append(helper.make_node(op_type, [last], [f"{op_type}{step}"]))
            last = f"{op_type}{step}"
    nodes += [
        helper.make_node("Clip", [last, "lo", "hi"], ["c1"]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["c2"]),  # goes
        helper.make_node("Clip", ["c2", "lo", "wider"], ["c3"]),  # other bounds: stays
        helper.make_node("Neg", ["c3"], ["n"]),
        helper.make_node("Abs", ["n"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),  # a Relu of an Abs: stays
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Relu", ["r"], ["z"]),  # r is an output too: stays
    ]
    weights = {"lo": np.float32(-0.25), "hi": np.float32(0.75), "wider": np.float32(2.0)}
    outputs = {"y": (F, [2, 4]), "r": (F, [2, 4]), "z": (F, [2, 4])}
    path = graph_model(tmp_path / "m.onnx", nodes, {"x": (F, [2, 4])}, outputs, weights)
    x = np.array([[np.nan, -0.0, 0.5, -1.5], [2.5, -2.5, 0.0, 7.25]], np.float32)
    model, target = rewritten(path, "remove-noop-ops", {"x": x}, tmp_path)
    assert types(model) == [*unary, "Clip", "Clip", "Neg", "Abs", "Relu", "Relu", "Relu"]
    for before, after in zip(run(path, {"x": x}), run(target, {"x": x}), strict=True):
        assert before.tobytes() == after.tobytes()


@pytest.mark.parametrize("opset", [11, 18])
def test_a_reduce_keeping_dims_over_axes_of_size_one_goes(tmp_path: Path, opset: int) -> None:
    """ReduceSum/Mean/Max/Min/Prod over axes that are all of size 1 give back their input
    (onnxsim drops them); over an axis of another size, a symbolic one, dropping the axis
    (keepdims=0), or as an L2 norm (|x|), they stay. Axes are an attribute before opset 13
    (ReduceSum) or 18 (the others), an input since."""

    def reduce(op_type: str, x: str, y: str, axes: list[int], **attrs: int) -> onnx.NodeProto:
        as_input = opset >= (13 if op_type == "ReduceSum" else 18)
        if as_input:
            name = f"axes_{y}"
            weights[name] = np.array(axes, np.int64)
            return helper.make_node(op_type, [x, name], [y], **attrs)
        return helper.make_node(op_type, [x], [y], axes=axes, **attrs)

    weights: dict[str, np.ndarray] = {}
    nodes = [
        reduce("ReduceSum", "x", "a", [1]),
        reduce("ReduceMean", "a", "b", [1, -1]),
        reduce("ReduceMax", "b", "c", [3]),
        reduce("ReduceMin", "c", "d", [-1]),
        reduce("ReduceProd", "d", "e", [1]),
        reduce("ReduceSum", "e", "f", [2]),  # size 4: stays
        reduce("ReduceMax", "f", "g", [0]),  # symbolic batch: stays
        reduce("ReduceMean", "g", "h", [1], keepdims=0),  # a Squeeze: stays
        reduce("ReduceL2", "h", "y", [2]),  # |x|: stays
    ]
    outputs = {"y": (F, None)}
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, ["N", 1, 4, 1])}, outputs, weights, opset
    )
    model, _ = rewritten(path, "remove-noop-ops", {"x": normal(2, 1, 4, 1)}, tmp_path)
    assert types(model) == ["ReduceSum", "ReduceMax", "ReduceMean", "ReduceL2"]


def test_arithmetic_by_a_neutral_constant_goes_unless_it_broadcasts_wider(tmp_path: Path) -> None:
    """x + 0, x - 0, x * 1, x / 1 (a dynamo GroupNorm's default zero bias kept an Add that
    onnxsim drops) go when the constant broadcasts to x without growing it; a constant that
    widens x, that is not neutral, or that is first (0 - x) stays."""
    nodes = [
        helper.make_node("Add", ["x", "zeros_c11"], ["a"]),
        helper.make_node("Sub", ["a", "zero"], ["b"]),
        helper.make_node("Mul", ["b", "ones_4"], ["c"]),
        helper.make_node("Div", ["c", "one"], ["d"]),
        helper.make_node("Add", ["d", "zeros_wide"], ["e"]),  # [N,3,4] + [2,1,1,1]: rank 4, wider
        helper.make_node("Mul", ["e", "twos"], ["f"]),
        helper.make_node("Sub", ["zero", "f"], ["y"]),
    ]
    weights = {
        "zeros_c11": np.zeros((3, 1), np.float32),
        "zero": np.zeros((), np.float32),
        "ones_4": np.ones(4, np.float32),
        "one": np.ones((1, 1, 1), np.float32),
        "zeros_wide": np.zeros((2, 1, 1, 1), np.float32),
        "twos": np.full((4,), 2.0, np.float32),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, ["N", 3, 4])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "remove-noop-ops", {"x": normal(2, 3, 4)}, tmp_path)
    assert types(model) == ["Add", "Mul", "Sub"]
    assert model.predict_net[0].inputs == ("x", "zeros_wide")


@pytest.mark.parametrize("sliced", [False, True], ids=["zeros", "a-slice-of-zeros"])
def test_zero_initial_states_of_a_recurrent_op_are_left_out(tmp_path: Path, sliced: bool) -> None:
    """The legacy exporter's zero state, and one layer's slice of it (a 2-layer LSTM)."""
    hidden = 4
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"]),
        helper.make_node("Concat", ["dirs", "n", "h"], ["state_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["state_shape"], ["all"]),
        helper.make_node("Slice", ["all", "start", "one"] if sliced else ["all"], ["zeros"])
        if sliced
        else helper.make_node("Identity", ["all"], ["zeros"]),
        helper.make_node(
            "LSTM", ["x", "w", "r", "", "", "zeros", "zeros"], ["y"], hidden_size=hidden
        ),
    ]
    weights = {
        "one": np.array([1], np.int64),
        "start": np.array([0], np.int64),
        "dirs": np.array([2 if sliced else 1], np.int64),
        "h": np.array([hidden], np.int64),
        "w": normal(1, 4 * hidden, 3),
        "r": normal(1, 4 * hidden, hidden, seed=1),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [5, "N", 3])}, {"y": (F, None)}, weights
    )
    model, _ = rewritten(path, "remove-noop-ops,remove-dead-ends", {"x": normal(5, 2, 3)}, tmp_path)
    assert types(model) == ["LSTM"]
    assert model.predict_net[0].inputs == ("x", "w", "r")


# -- dedupe-initializers, merge-common-subexpressions ----------------------------------------------


def test_equal_initializers_and_the_ops_reading_them_merge(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Mul", ["x", "a"], ["p"]),
        helper.make_node("Mul", ["b", "x"], ["q"]),
        helper.make_node("Add", ["p", "q"], ["y"]),
        helper.make_node("RandomNormalLike", ["x"], ["r1"]),
        helper.make_node("RandomNormalLike", ["x"], ["r2"]),
        helper.make_node("Sub", ["r1", "r2"], ["noise"]),
        helper.make_node("Relu", ["x"], ["twice"]),
    ]
    weights = {"a": np.arange(3, dtype=np.float32), "b": np.arange(3, dtype=np.float32)}
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2, 3])},
        {"y": (F, [2, 3]), "noise": (F, [2, 3]), "twice": (F, [2, 3])},
        weights,
    )
    model = load_onnx_model(path)
    PassManager.parse("dedupe-initializers,merge-common-subexpressions")(model)
    assert list(model.predict_net.initializers) == ["a"]
    assert types(model) == ["Mul", "Add", "RandomNormalLike", "RandomNormalLike", "Sub", "Relu"]
    deterministic = graph_model(
        tmp_path / "d.onnx",
        [nodes[0], nodes[1], nodes[2]],
        {"x": (F, [2, 3])},
        {"y": (F, [2, 3])},
        weights,
    )
    rewritten(
        deterministic,
        "dedupe-initializers,merge-common-subexpressions",
        {"x": normal(2, 3)},
        tmp_path,
    )


def test_an_initializer_that_is_also_a_graph_input_is_not_merged(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    weights = {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)}
    path = graph_model(tmp_path / "m.onnx", nodes, {"b": (F, [3])}, {"y": (F, [3])}, weights)
    model = load_onnx_model(path)
    PassManager.parse("dedupe-initializers")(model)
    assert set(model.predict_net.initializers) == {"a", "b"}


# -- convert-opset --------------------------------------------------------------------------------


def test_convert_opset_uses_the_version_converter_and_refuses_by_name(tmp_path: Path) -> None:
    nodes = [helper.make_node("Squeeze", ["x"], ["y"], axes=[1])]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 1, 3])}, {"y": (F, [2, 3])}, opset=11
    )
    model = load_onnx_model(path)
    PassManager.parse("convert-opset{opset=13}")(model)
    assert model.opset_imports[""] == 13
    (squeeze,) = (op for op in model.predict_net if op.type == "Squeeze")
    assert len(squeeze.inputs) == 2 and not squeeze.has_arg("axes")
    relu = graph_model(
        tmp_path / "r.onnx",
        [helper.make_node("Relu", ["x"], ["y"])],
        {"x": (F, [2])},
        {"y": (F, [2])},
        opset=20,
    )
    model = load_onnx_model(relu)
    with pytest.raises(PassError, match="version converter cannot take this model from opset 20"):
        PassManager.parse("convert-opset{opset=13}")(model)
    assert model.opset_imports[""] == 20


def _converted(path: Path, opset: int, target: Path) -> onnx.ModelProto:
    """The model at ``path`` taken to ``opset`` by ``convert-opset``, written to ``target``
    and read back, checked by onnx's full checker."""
    model = load_onnx_model(path)
    PassManager.parse(f"convert-opset{{opset={opset}}}")(model)
    save_onnx_model(model, target)
    converted = onnx.load(str(target))
    onnx.checker.check_model(converted, full_check=True)
    return converted


def test_convert_opset_keeps_metadata_and_value_info_and_raises_the_ir_version(
    tmp_path: Path,
) -> None:
    """onnx's converter kept IR 8 for opset 21 (which needs 10), dropped the nodes' and
    values' metadata_props and added value_info for every value: put back as they were."""
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="relu"),
        helper.make_node("Squeeze", ["h"], ["y"], axes=[1], name="squeeze"),
    ]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 1, 3])}, {"y": (F, [2, 3])}, opset=11
    )
    proto = onnx.load(str(path))
    proto.ir_version = 8
    helper.set_metadata_props(proto.graph.node[0], {"pkg.torch.stack": "relu@m.py:3"})
    helper.set_metadata_props(proto.graph.input[0], {"origin": "image"})
    onnx.save(proto, str(path))
    converted = _converted(path, 21, tmp_path / "c.onnx")
    assert converted.ir_version >= 10
    relu = next(n for n in converted.graph.node if n.name == "relu")
    assert {p.key: p.value for p in relu.metadata_props} == {"pkg.torch.stack": "relu@m.py:3"}
    assert {p.key: p.value for p in converted.graph.input[0].metadata_props} == {"origin": "image"}
    assert not converted.graph.value_info


def test_convert_opset_down_drops_an_attribute_left_at_its_default(tmp_path: Path) -> None:
    """A dynamo export's ReduceMean(x, axes) carries noop_with_empty_axes=0 (opset 18); onnx's
    converter kept it going down to 14, the checker refused the result and run blamed 'a pass
    broke the model'. At its default it is dropped; set otherwise, refused by name."""

    def reduce_mean(noop: int, name: str) -> Path:
        node = helper.make_node(
            "ReduceMean", ["x", "axes"], ["y"], keepdims=0, noop_with_empty_axes=noop
        )
        weights = {"axes": np.array([1, 2], np.int64)}
        return graph_model(
            tmp_path / name, [node], {"x": (F, ["N", 3, 4])}, {"y": (F, ["N"])}, weights, opset=18
        )

    target = tmp_path / "c.onnx"
    converted = _converted(reduce_mean(0, "m.onnx"), 14, target)
    (node,) = converted.graph.node
    assert sorted(a.name for a in node.attribute) == ["axes", "keepdims"]
    x = normal(2, 3, 4)
    np.testing.assert_allclose(run(target, {"x": x})[0], x.mean(axis=(1, 2)), rtol=1e-6)
    model = load_onnx_model(reduce_mean(1, "set.onnx"))
    with pytest.raises(PassError, match=r"sets noop_with_empty_axes, which ReduceMean does not"):
        PassManager.parse("convert-opset{opset=14}")(model)


def _with_function(path: Path, body_op: onnx.NodeProto, opset: int) -> Path:
    """A model whose graph calls a local function ``local::F`` of one node ``body_op``."""
    function = helper.make_function(
        "local", "F", ["a"], ["b"], [body_op], [helper.make_opsetid("", opset)]
    )
    graph = helper.make_graph(
        [helper.make_node("F", ["x"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("local", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets, functions=[function]), path)
    return path


def test_convert_opset_keeps_local_functions_or_refuses_them_by_name(tmp_path: Path) -> None:
    """onnx's converter drops the model's functions: the converted model called an op
    nobody defines, and was written with exit 0. A function whose ops read the same at both
    opsets is kept at its own; one whose ops changed is refused, saying how to go on."""
    path = _with_function(tmp_path / "m.onnx", helper.make_node("Relu", ["a"], ["b"]), 17)
    target = tmp_path / "c.onnx"
    converted = _converted(path, 18, target)
    assert [f.name for f in converted.functions] == ["F"]
    x = normal(2, 3)
    np.testing.assert_array_equal(run(target, {"x": x})[0], np.maximum(x, 0))
    changed = helper.make_node("ReduceSum", ["a"], ["b"], axes=[1])  # axes: an input from 13
    path = _with_function(tmp_path / "r.onnx", changed, 12)
    model = load_onnx_model(path)
    with pytest.raises(PassError, match=r"does not convert local functions.*inline_local"):
        PassManager.parse("convert-opset{opset=13}")(model)
    assert model.opset_imports[""] == 12


def test_a_quantized_weight_stays_quantized(tmp_path: Path) -> None:
    """``optimize`` folded the ``DequantizeLinear`` of a QDQ model's int8 weight into a float
    initializer: the integer weight a back-end runs was gone, though the outputs matched."""
    weight = np.arange(-12, 12, dtype=np.int8).reshape(4, 6)
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    constants = {
        "w_q": weight,
        "w_scale": np.asarray(0.05, np.float32),
        "w_zero": np.asarray(0, np.int8),
    }
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2, 4])}, {"y": (F, [2, 6])}, constants
    )
    model = load_onnx_model(path)
    PassManager.parse("optimize")(model)
    target = tmp_path / "o.onnx"
    save_onnx_model(model, target)
    optimized = onnx.load(str(target))
    assert [n.op_type for n in optimized.graph.node] == ["DequantizeLinear", "MatMul"]
    stored = {t.name: t.data_type for t in optimized.graph.initializer}
    assert stored["w_q"] == TensorProto.INT8
    x = normal(2, 4)
    np.testing.assert_allclose(run(target, {"x": x})[0], run(path, {"x": x})[0])


# -- inline-constant-if --------------------------------------------------------------------------


def _branch(name: str, nodes: list, outputs: list[str], **initializers: np.ndarray) -> object:
    return helper.make_graph(
        nodes,
        name,
        [],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )


@pytest.mark.parametrize("condition", [True, False])
def test_an_if_on_a_constant_becomes_the_branch_it_takes(tmp_path: Path, condition: bool) -> None:
    """Both branches name their values alike (``t``): the branch taken gives the If's outputs
    their names; a value returned as it is (a branch initializer) is copied, and goes."""
    then = _branch(
        "then",
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Mul", ["t", "k"], ["u"])],
        ["u", "k"],
        k=np.float32([2.0, 3.0]),
    )
    other = _branch(
        "else", [helper.make_node("Neg", ["x"], ["t"])], ["t", "b"], b=np.float32([5.0, 6.0])
    )
    nodes = [
        helper.make_node("If", ["c"], ["y1", "y2"], then_branch=then, else_branch=other),
        helper.make_node("Add", ["y1", "y2"], ["z"]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2])},
        {"z": (F, [2]), "y1": (F, [2])},
        {"c": np.array(condition)},
    )
    model, _ = rewritten(path, "inline-constant-if,remove-identity-ops", {"x": normal(2)}, tmp_path)
    expected = ["Relu", "Mul", "Add"] if condition else ["Neg", "Add"]
    assert types(model) == expected
    assert model.predict_net.external_outputs == ("z", "y1")
    held = set(model.predict_net.initializers)
    assert held >= ({"k"} if condition else {"b"}) and "c" in held


def test_an_if_on_a_fed_condition_stays(tmp_path: Path) -> None:
    """A condition a user may feed (an initializer that is also an input) decides nothing."""
    branch = _branch("then", [helper.make_node("Relu", ["x"], ["t"])], ["t"])
    other = _branch("else", [helper.make_node("Neg", ["x"], ["e"])], ["e"])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2]), "c": (TensorProto.BOOL, [])},
        {"y": (F, [2])},
        {"c": np.array(True)},
    )
    model, _ = rewritten(path, "inline-constant-if", {"x": normal(2)}, tmp_path)
    assert types(model) == ["If"]


def test_a_branch_value_named_as_another_graph_names_one_gets_a_fresh_name(
    tmp_path: Path,
) -> None:
    """The model names each value once: two Ifs whose branches both compute ``tmp`` are
    inlined, each ``tmp`` under a fresh name, as onnxsim inlines them."""

    def branchy(output: str) -> object:
        then = _branch(
            "then",
            [helper.make_node("Relu", ["x"], ["tmp"]), helper.make_node("Neg", ["tmp"], ["r"])],
            ["r"],
        )
        other = _branch("else", [helper.make_node("Sigmoid", ["x"], ["s"])], ["s"])
        return helper.make_node("If", ["c"], [output], then_branch=then, else_branch=other)

    nodes = [branchy("y1"), branchy("y2"), helper.make_node("Add", ["y1", "y2"], ["z"])]
    path = graph_model(
        tmp_path / "m.onnx", nodes, {"x": (F, [2])}, {"z": (F, [2])}, {"c": np.array(True)}
    )
    model, _ = rewritten(path, "inline-constant-if", {"x": normal(2)}, tmp_path)
    assert types(model) == ["Relu", "Neg", "Relu", "Neg", "Add"]
    written = [name for op in model.predict_net for name in op.outputs]
    assert len(set(written)) == len(written) and {"tmp_1", "tmp_2"} <= set(written)


def test_an_if_whose_branch_shadows_a_value_of_its_graph_stays(tmp_path: Path) -> None:
    """The branch holds an initializer ``k`` while the graph holds its own ``k`` and reads it
    after the If: the checker takes the model, and onnxruntime reads the outer ``k`` in the
    branch (inlined, the branch's ``k`` was read, and the output changed)."""
    then = _branch(
        "then", [helper.make_node("Add", ["x", "k"], ["t"])], ["t"], k=np.float32([10, 20])
    )
    other = _branch("else", [helper.make_node("Sub", ["x", "k"], ["e"])], ["e"])
    nodes = [
        helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other),
        helper.make_node("Add", ["r", "k"], ["y"]),
    ]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2])},
        {"y": (F, [2])},
        {"k": np.float32([1, 2]), "c": np.array(True)},
    )
    onnx.checker.check_model(str(path), full_check=True)
    model, _ = rewritten(path, "inline-constant-if", {"x": normal(2)}, tmp_path)
    assert types(model) == ["If", "Add"]


def test_an_if_in_a_loop_body_on_a_main_graph_constant_is_inlined(tmp_path: Path) -> None:
    """A body reads the main graph's constants: its If on one goes, inside the body, and the
    optimize pipeline leaves the loop computing what it did."""
    then = _branch("then", [helper.make_node("Relu", ["v"], ["r"])], ["r"])
    other = _branch("else", [helper.make_node("Neg", ["v"], ["neg"])], ["neg"])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v"]),
            helper.make_node("If", ["flag"], ["v_out"], then_branch=then, else_branch=other),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", F, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", F, [2]),
        ],
    )
    nodes = [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2])},
        {"y": (F, [2])},
        {"n": np.array(3, np.int64), "flag": np.array(False), "one": np.float32([1.0, -1.0])},
    )
    model, _ = rewritten(path, "optimize", {"x": normal(2)}, tmp_path)
    (loop,) = model.predict_net
    ((_, inner),) = loop.nested_nets()
    assert [op.type for op in inner][-2:] == ["Add", "Neg"]
    assert "If" not in [op.type for op in inner]


@pytest.mark.parametrize("ir_version", [3, 8])
def test_an_identity_returning_an_initializer_goes_and_the_initializer_takes_its_name(
    tmp_path: Path, ir_version: int
) -> None:
    """A graph output copied from an initializer: the initializer is renamed to the output
    (its other readers follow), as onnxsim does, and the Identity goes. In IR 3 every
    initializer is also an input, whose name is the model's interface: the Identity stays."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["r"]), helper.make_node("Identity", ["w"], ["c"])]
    path = graph_model(
        tmp_path / "m.onnx",
        nodes,
        {"x": (F, [2])},
        {"r": (F, [2]), "c": (F, [2])},
        {"w": np.float32([2.0, 3.0])},
    )
    proto = onnx.load(str(path))
    proto.ir_version = ir_version
    if ir_version == 3:
        proto.graph.input.append(helper.make_tensor_value_info("w", F, [2]))
    onnx.save(proto, str(path))
    model, _ = rewritten(path, "remove-identity-ops", {"x": normal(2)}, tmp_path)
    if ir_version == 3:
        assert types(model) == ["Mul", "Identity"]
    else:
        assert types(model) == ["Mul"]
        assert list(model.predict_net.initializers) == ["c"]
        assert model.predict_net[0].inputs == ("x", "c")

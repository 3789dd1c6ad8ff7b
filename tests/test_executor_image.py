"""kernels_image, kernels_aten and kernels_io: Upsample and ATen grid_sampler against
onnxruntime (Resize, GridSample), the YOLO head, stylizer ops and Int8ResizeNearest against
element-by-element loops written from their C++/CUDA sources, and Load over a minidb file."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from graphtools.errors import ExecutionError, UnsupportedOpError
from graphtools.executor import Int8Tensor, Workspace, run_op
from graphtools.executor.kernels_image import STYLIZER_NOISE_BLOB
from graphtools.ir import Op
from graphtools.proto import caffe2_pb2

helper = onnx.helper


def run(op: Op, *values: Any, ws: Workspace | None = None) -> list[Any]:
    ws = ws or Workspace()
    for name, value in zip(op.inputs, values, strict=True):
        ws.feed(name, value)
    run_op(op, ws)
    return [ws.fetch(name) for name in op.outputs]


def run_onnx(
    node: Any, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], opset: int
) -> np.ndarray:
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in consts.items()]
    graph = helper.make_graph([node], "case", inputs, [onnx.ValueInfoProto(name="y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], feeds)[0]


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("scale", [1, 2, 3])
def test_upsample_matches_onnx_resize(scale: int) -> None:
    x = randn(1, 2, 3, 4, seed=1)
    (ours,) = run(Op("Upsample", ["x"], ["y"], args={"scale": scale}), x)
    node = helper.make_node(
        "Resize", ["x", "", "s"], ["y"], mode="nearest",
        coordinate_transformation_mode="asymmetric", nearest_mode="floor",
    )  # fmt: skip
    consts = {"s": np.array([1, 1, scale, scale], np.float32)}
    np.testing.assert_array_equal(ours, run_onnx(node, {"x": x}, consts, 13))


def test_int8_resize_nearest_against_loops_and_checks_quantization() -> None:
    values = np.random.default_rng(2).integers(0, 256, (1, 3, 5, 2)).astype(np.uint8)
    x = Int8Tensor(values, 0.5, 3)
    args = {
        "height_scale": 2.0,
        "width_scale": 1.5,
        "Y_scale": 0.5,
        "Y_zero_point": 3,
        "order": "NHWC",
    }
    (y,) = run(Op("Int8ResizeNearest", ["x"], ["y"], args=args), x)
    assert y.values.shape == (1, 6, 7, 2) and (y.scale, y.zero_point) == (0.5, 3)
    for r in range(6):
        for c in range(7):
            src = values[0, min(int(r / 2.0), 2), min(int(c / 1.5), 4)]
            np.testing.assert_array_equal(y.values[0, r, c], src)
    with pytest.raises(ExecutionError, match="Y_scale"):
        run(Op("Int8ResizeNearest", ["x"], ["y"], args={"height_scale": 2.0}), x)


def yolo_reference(
    x: np.ndarray, anchors: list[int], mask: list[int], classes: int, stride: int
) -> list[np.ndarray]:
    _, _, h, w = x.shape
    per = 5 + classes
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    y = x.astype(np.float64).copy()
    tx, ty, tw, th, conf = [], [], [], [], []
    probs = np.zeros((len(mask), classes, h * w))
    for n, m in enumerate(mask):
        for e in list(range(2)) + list(range(4, per)):
            for r in range(h):
                for q in range(w):
                    y[0, n * per + e, r, q] = sig(float(x[0, n * per + e, r, q]))
        for j in range(h * w):
            r, q = divmod(j, w)
            tx.append(y[0, n * per, r, q] + q)
            ty.append(y[0, n * per + 1, r, q] + j // h)
            tw.append(math.exp(float(x[0, n * per + 2, r, q])) * anchors[2 * m] / stride)
            th.append(math.exp(float(x[0, n * per + 3, r, q])) * anchors[2 * m + 1] / stride)
            conf.append(y[0, n * per + 4, r, q])
            for k in range(classes):
                probs[n, k, j] = y[0, n * per + 5 + k, r, q]
    return [
        y,
        np.array(tx).reshape(1, len(mask), h, w),
        np.array(ty),
        np.array(tw),
        np.array(th),
        np.array(conf),
        probs,
    ]


def test_yolo_head_against_loops() -> None:
    anchors = [10, 13, 16, 30, 33, 23, 30, 61]
    mask, classes = [1, 3], 2
    x = randn(1, 2 * 7 + 1, 3, 3, seed=3)
    args = {
        "anchors": tuple(anchors),
        "anchor_mask": tuple(mask),
        "numclass": classes,
        "numanchors": 4,
        "stride": 8,
    }
    outputs = ["Y", "tx", "ty", "tw", "th", "conf", "prob", "tmp"]
    got = run(Op("Yolo", ["x"], outputs, args=args), x)
    expected = yolo_reference(x, anchors, mask, classes, 8)
    for name, ours, ref in zip(outputs, got, expected, strict=False):
        assert ours.shape == ref.shape, name
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(got[7], [30 / 8, 61 / 8])
    with pytest.raises(UnsupportedOpError, match="batch of 2"):
        run(Op("Yolo", ["x"], outputs, args=args), np.concatenate([x, x]))
    with pytest.raises(UnsupportedOpError, match="is_train"):
        run(Op("Yolo", ["x"], outputs, args={**args, "is_train": 1}), x)
    with pytest.raises(ExecutionError, match="channels"):
        run(Op("Yolo", ["x"], outputs, args={**args, "numclass": 5}), x)


def test_stylizer_preprocess_and_deprocess_against_loops() -> None:
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (2, 3, 4, 4)).astype(np.uint8)
    mean = np.array([100.0, 110.0, 120.0], np.float32)
    ws = Workspace(seed=5)
    op = Op(
        "PackedInt8BGRANHWCToNCHWCStylizerPreprocess",
        ["x", "m"],
        ["y"],
        args={"noise_std": 5.0, "noise_size": 7},
    )
    (pre,) = run(op, image, mean, ws=ws)
    noise = ws.fetch(STYLIZER_NOISE_BLOB)
    assert noise.shape == (7,) and 0 < noise.std() < 15
    for n in range(2):
        k = 0
        for r in range(3):
            for c in range(4):
                for ch in range(3):
                    expected = float(image[n, r, c, ch]) - mean[ch] + noise[k % 7]
                    assert pre[n, ch, r, c] == pytest.approx(expected, rel=1e-6)
                    k += 1
    (again,) = run(op, image, mean, ws=ws)
    np.testing.assert_array_equal(pre, again)
    styled = rng.uniform(-150, 200, (2, 3, 3, 4)).astype(np.float32)
    deprocess = Op("BRGNCHWCToPackedInt8BGRAStylizerDeprocess", ["x", "m"], ["y"])
    (post,) = run(deprocess, styled, mean)
    assert post.shape == (2, 3, 4, 4) and post.dtype == np.uint8
    for n in range(2):
        for r in range(3):
            for c in range(4):
                for ch in range(3):
                    v = float(styled[n, ch, r, c]) + float(mean[ch])
                    assert post[n, r, c, ch] == (255 if v >= 255 else 0 if v <= 0 else int(v))
                assert post[n, r, c, 3] == 255
    with pytest.raises(ExecutionError, match="BGRA"):
        run(op, image[..., :3], mean)


@pytest.mark.parametrize("padding", [0, 1])
def test_aten_grid_sampler_matches_onnx_grid_sample(padding: int) -> None:
    x = randn(2, 3, 5, 6, seed=6)
    grid = np.random.default_rng(7).uniform(-1.3, 1.3, (2, 4, 3, 2)).astype(np.float32)
    op = Op("ATen", ["x", "g"], ["y"], args={"operator": "grid_sampler", "padding_mode": padding})
    (ours,) = run(op, x, grid)
    node = helper.make_node(
        "GridSample", ["x", "g"], ["y"], mode="linear", align_corners=1,
        padding_mode="border" if padding else "zeros",
    )  # fmt: skip
    np.testing.assert_allclose(
        ours, run_onnx(node, {"x": x, "g": grid}, {}, 20), rtol=1e-5, atol=1e-5
    )


def test_aten_max_unsqueeze_and_unknown_operator() -> None:
    x = np.round(randn(3, 4, seed=8), 1)
    values, indices = run(
        Op("ATen", ["x"], ["v", "i"], args={"operator": "max", "dim": 1, "keepdim": 0}), x
    )
    for r in range(3):
        row = x[r].tolist()
        assert values[r] == max(row) and indices[r] == row.index(max(row))
    (whole,) = run(Op("ATen", ["x"], ["v"], args={"operator": "max"}), x)
    assert whole == x.max()
    (unsq,) = run(Op("ATen", ["x"], ["y"], args={"operator": "unsqueeze", "dim": 1}), x)
    assert unsq.shape == (3, 1, 4)
    with pytest.raises(UnsupportedOpError, match="'addmm'"):
        run(Op("ATen", ["x"], ["y"], args={"operator": "addmm"}), x)


def write_minidb(path: Path, blobs: dict[str, np.ndarray]) -> None:
    records = b""
    for key, value in blobs.items():
        blob = caffe2_pb2.BlobProto(name=key, type="Tensor")
        blob.tensor.dims.extend(value.shape)
        if value.dtype == np.float32:
            blob.tensor.data_type = caffe2_pb2.TensorProto.FLOAT
            blob.tensor.float_data.extend(value.reshape(-1).tolist())
        else:
            blob.tensor.data_type = caffe2_pb2.TensorProto.INT64
            blob.tensor.int64_data.extend(value.reshape(-1).tolist())
        payload = blob.SerializeToString()
        records += struct.pack("<ii", len(key), len(payload)) + key.encode() + payload
    path.write_bytes(records)


def test_load_reads_minidb_and_refuses_missing_or_other_dbs(tmp_path: Path) -> None:
    w, b = randn(2, 3, seed=9), np.array([4, 5], np.int64)
    db = tmp_path / "params.minidb"
    write_minidb(db, {"w": w, "b": b})
    op = Op("Load", [], ["w", "b"], args={"db": str(db), "db_type": "minidb"})
    got_w, got_b = run(op)
    np.testing.assert_array_equal(got_w, w)
    np.testing.assert_array_equal(got_b, b)
    prefixed = Op(
        "Load", [], ["m/w"], args={"db": str(db), "db_type": "minidb", "add_prefix": "m/"}
    )
    np.testing.assert_array_equal(run(prefixed)[0], w)
    missing = Op("Load", [], ["w"], args={"db": str(tmp_path / "LeNet_params"), "db_type": "lmdb"})
    with pytest.raises(ExecutionError, match="does not exist"):
        run(missing)
    other = Op("Load", [], ["w"], args={"db": str(db), "db_type": "lmdb"})
    with pytest.raises(UnsupportedOpError, match="'lmdb'"):
        run(other)
    absent_blob = Op("Load", [], ["zz"], args={"db": str(db), "db_type": "minidb"})
    with pytest.raises(ExecutionError, match="no blobs"):
        run(absent_blob)

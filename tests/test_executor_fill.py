"""Fill kernels: given tensors of every dtype, ConstantFill's shape and dtype rules, RangeFill,
int8 fills, random fills, and the op-type sets ``graphtools.compat.params`` relies on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graphtools.errors import UnsupportedOpError
from graphtools.executor import KERNELS, ExecutionError, Int8Tensor, Workspace, run_net
from graphtools.executor.kernels_fill import FILL_OPS, RANDOM_FILLS
from graphtools.ir import Net, Op


def run(op: Op, feeds: dict[str, Any] | None = None) -> list[Any]:
    ws = Workspace(seed=5)
    for name, value in (feeds or {}).items():
        ws.feed(name, value)
    run_net(Net([op]), ws)
    return [ws.fetch(name) for name in op.outputs]


@pytest.mark.parametrize(
    ("op_type", "values", "dtype"),
    [
        ("GivenTensorFill", [1.5, -2.0, 3.0, 4.0], np.float32),
        ("GivenTensorDoubleFill", [1.5, -2.0, 3.0, 4.0], np.float64),
        ("GivenTensorFp16Fill", [1.5, -2.0, 65504.0, 4.0], np.float16),
        ("GivenTensorIntFill", [1, -2, 3, 4], np.int32),
        ("GivenTensorInt64Fill", [1, -2, 3, 2**40], np.int64),
        ("GivenTensorInt16Fill", [1, -2, 3, 4], np.int16),
        ("GivenTensorBoolFill", [1, 0, 0, 1], np.bool_),
    ],
)
def test_given_tensor_fills_keep_values_shape_and_dtype(
    op_type: str, values: list[Any], dtype: Any
) -> None:
    (y,) = run(Op(op_type, [], ["y"], args={"shape": (2, 2), "values": values}))
    assert y.dtype == dtype and y.shape == (2, 2)
    np.testing.assert_array_equal(y.reshape(-1), np.asarray(values, dtype))


def test_given_string_and_byte_fills() -> None:
    (s,) = run(
        Op("GivenTensorStringFill", [], ["s"], args={"shape": (2,), "values": [b"a", b"bc"]})
    )
    assert s.dtype == object and s.tolist() == [b"a", b"bc"]
    op = Op(
        "GivenTensorByteStringToUInt8Fill",
        [],
        ["u"],
        args={"shape": (3,), "values": b"\x01\xff\x07"},
    )
    (u,) = run(op)
    assert u.dtype == np.uint8 and u.tolist() == [1, 255, 7]


def test_given_tensor_fill_rejects_wrong_value_count() -> None:
    with pytest.raises(ExecutionError, match="3 values do not fill shape"):
        run(Op("GivenTensorFill", [], ["y"], args={"shape": (2, 2), "values": [1.0, 2.0, 3.0]}))


def test_constant_fill_shape_value_dtype() -> None:
    (y,) = run(Op("ConstantFill", [], ["y"], args={"shape": (2, 3), "value": 2.5}))
    assert y.dtype == np.float32 and y.shape == (2, 3) and (y == 2.5).all()
    (z,) = run(Op("ConstantFill", [], ["z"], args={"shape": (4,), "value": 7, "dtype": 10}))
    assert z.dtype == np.int64 and z.tolist() == [7] * 4
    (b,) = run(Op("ConstantFill", [], ["b"], args={"shape": (2,), "value": 1, "dtype": 5}))
    assert b.dtype == np.bool_ and b.all()
    (e,) = run(Op("ConstantFill", [], ["e"]))
    assert e.dtype == np.float32 and e.shape == () and e == 0.0


def test_constant_fill_infers_int64_from_an_integer_value_without_dtype() -> None:
    (i,) = run(Op("ConstantFill", [], ["i"], args={"shape": (3,), "value": 7}))
    assert i.dtype == np.int64 and i.tolist() == [7, 7, 7]
    (f,) = run(Op("ConstantFill", [], ["f"], args={"shape": (1,), "value": 7.0}))
    assert f.dtype == np.float32


def test_fill_dtype_outside_tensorproto_is_unsupported_and_named() -> None:
    for op_type, args in (("ConstantFill", {"value": 1.0}), ("GivenTensorFill", {"values": [1]})):
        op = Op(op_type, [], ["y"], args={**args, "shape": (1,), "dtype": 11})
        with pytest.raises(UnsupportedOpError, match=rf"op #0 \({op_type}\).*data type 11"):
            run(op)


def test_range_fill_counts_in_row_major_order() -> None:
    (r,) = run(Op("RangeFill", [], ["r"], args={"shape": (2, 3)}))
    assert r.dtype == np.float32 and r.tolist() == [[0, 1, 2], [3, 4, 5]]
    shape = np.asarray([2, 2], np.int64)
    (s,) = run(Op("RangeFill", ["s"], ["y"], args={"input_as_shape": 1}), {"s": shape})
    assert s.tolist() == [[0, 1], [2, 3]]


def test_string_fill_with_one_string_in_s() -> None:
    (s,) = run(Op("GivenTensorStringFill", [], ["s"], args={"values": b"\x01\x02"}))
    assert s.dtype == object and s.tolist() == [b"\x01\x02"]


def test_constant_fill_from_input_shape_and_extra_shape() -> None:
    x = np.zeros((2, 5), np.float32)
    (y,) = run(Op("ConstantFill", ["x"], ["y"], args={"value": 1.0, "extra_shape": (3,)}), {"x": x})
    assert y.shape == (2, 5, 3)
    shape = np.asarray([4, 1, 2], np.int64)
    (z,) = run(Op("ConstantFill", ["s"], ["z"], args={"input_as_shape": 1}), {"s": shape})
    assert z.shape == (4, 1, 2)


def test_constant_fill_rejects_shape_and_input_together() -> None:
    op = Op("ConstantFill", ["x"], ["y"], args={"shape": (2,)})
    with pytest.raises(ExecutionError, match="both a 'shape' argument and an input"):
        run(op, {"x": np.zeros(3)})


def test_int8_given_fills_carry_scale_and_zero_point() -> None:
    args = {"shape": (2, 2), "values": b"\x00\x10\x80\xff", "Y_scale": 0.5, "Y_zero_point": 128}
    (w,) = run(Op("Int8GivenTensorFill", [], ["w"], args=args))
    assert isinstance(w, Int8Tensor)
    assert w.values.dtype == np.uint8 and w.values.tolist() == [[0, 16], [128, 255]]
    assert (w.scale, w.zero_point) == (0.5, 128)
    np.testing.assert_allclose(w.dequantize(), [[-64.0, -56.0], [0.0, 63.5]])
    args = {"shape": (3,), "values": [-5, 0, 70000], "Y_scale": 0.25, "Y_zero_point": 0}
    (b,) = run(Op("Int8GivenIntTensorFill", [], ["b"], args=args))
    assert b.values.dtype == np.int32 and b.values.tolist() == [-5, 0, 70000]
    assert b.data is b.values  # detectron2's spelling


def test_int8_given_tensor_fill_reads_bytes_held_in_strings() -> None:
    args = {"shape": (3,), "values": [b"\x05\x80\xff"], "Y_scale": 2.0, "Y_zero_point": 1}
    (w,) = run(Op("Int8GivenTensorFill", [], ["w"], args=args))
    assert w.values.dtype == np.uint8 and w.values.tolist() == [5, 128, 255]
    assert (w.scale, w.zero_point) == (2.0, 1)


def test_int8_tensors_compare_by_identity_and_hash() -> None:
    a = Int8Tensor(np.arange(4, dtype=np.uint8), 0.5, 3)
    b = Int8Tensor(a.values, 0.5, 3)
    assert a == a and a != b and len({a, b}) == 2


def test_random_fill_distributions_follow_caffe2_rules() -> None:
    (x,) = run(Op("XavierFill", [], ["x"], args={"shape": (50, 40, 2)}))
    bound = np.sqrt(3.0 / 80)
    assert x.dtype == np.float32 and np.abs(x).max() <= bound and np.abs(x).max() > 0.9 * bound
    (m,) = run(Op("MSRAFill", [], ["m"], args={"shape": (64, 50, 3)}))
    assert abs(m.std() - np.sqrt(2.0 / (64 * 3))) < 0.01
    (g,) = run(Op("GaussianFill", [], ["g"], args={"shape": (20000,), "mean": 3.0, "std": 0.5}))
    assert abs(g.mean() - 3.0) < 0.02 and abs(g.std() - 0.5) < 0.02
    (u,) = run(Op("UniformFill", [], ["u"], args={"shape": (1000,), "min": 2.0, "max": 3.0}))
    assert u.min() >= 2.0 and u.max() <= 3.0
    (i,) = run(Op("UniformIntFill", [], ["i"], args={"shape": (1000,), "min": -2, "max": 2}))
    assert i.dtype == np.int32 and set(i.tolist()) == {-2, -1, 0, 1, 2}


def test_fill_op_sets_match_the_registered_kernels() -> None:
    """``params`` accepts ``FILL_OPS`` and gates ``RANDOM_FILLS`` on a seed: keep them exact."""
    assert {name for name in FILL_OPS if KERNELS[name].needs_context} == RANDOM_FILLS
    assert {"ConstantFill", "RangeFill", "Int8GivenTensorFill", "GivenTensorFp16Fill"} <= FILL_OPS
    assert not FILL_OPS & {"Copy", "Cast", "FC"}

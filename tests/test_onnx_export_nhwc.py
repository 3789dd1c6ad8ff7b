"""NHWC ops in ONNX: the NCHW op between Transposes, and the Transposes between two NHWC ops
(element-wise ops in between included) cancel and leave the graph."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_round_trip import pair, round_trip

from graphtools.ir import Op

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
W1 = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
W2 = RNG.standard_normal((4, 3, 3, 4)).astype(np.float32)
NHWC = {"order": "NHWC"}


def test_a_chain_of_nhwc_ops_keeps_one_transpose_at_each_end() -> None:
    ops = [
        Op("Conv", ["x", "w1"], ["c"], args={"kernel": 3, "pad": 1, **NHWC}),
        Op("Relu", ["c"], ["r"]),
        Op("ConvRelu", ["r", "w2"], ["c2"], args={"kernel": 3, "pad": 1, **NHWC}),
        Op("MaxPool", ["c2"], ["p"], args={"kernel": 2, "stride": 2, **NHWC}),
        Op("ResizeNearest", ["p"], ["y"], args={"height_scale": 2.0, "width_scale": 2.0, **NHWC}),
    ]
    exported = round_trip(pair(ops, ["x"], ["y"], {"w1": W1, "w2": W2}), {"x": X})
    kinds = [n.op_type for n in exported.graph.node]
    # the input, the two filters and the output: nothing between the ops
    assert kinds == [
        "Transpose", "Transpose", "Conv", "Relu", "Transpose", "Conv", "Relu", "MaxPool",
        "Resize", "Transpose",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "op",
    [
        Op("AveragePool", ["x"], ["y"], args={"kernel": 3, "stride": 2, "pad": 1, **NHWC}),
        Op("MaxPool", ["x"], ["y"], args={"global_pooling": 1, **NHWC}),
        Op("ConvTranspose", ["x", "wt"], ["y"], args={"kernel": 2, "stride": 2, **NHWC}),
        Op("NCHW2NHWC", ["x"], ["y"]),
        Op("NHWC2NCHW", ["x"], ["y"]),
    ],
    ids=lambda op: op.type,
)
def test_nhwc_op_round_trips(op: Op) -> None:
    params = {"wt": RNG.standard_normal((3, 2, 2, 5)).astype(np.float32)}
    used = {k: v for k, v in params.items() if k in op.inputs}
    round_trip(pair([op], ["x"], ["y"], used), {"x": X}, dynamic_batch=True)


def test_layout_ops_around_nchw_ops_cancel() -> None:
    ops = [
        Op("NHWC2NCHW", ["x"], ["a"]),
        Op("Sigmoid", ["a"], ["b"]),
        Op("NCHW2NHWC", ["b"], ["c"]),
        Op("Conv", ["c", "w1"], ["y"], args={"kernel": 3, **NHWC}),
    ]
    exported = round_trip(pair(ops, ["x"], ["y"], {"w1": W1}), {"x": X})
    # Sigmoid runs on the NHWC input: the layout pair around it cancels with the Conv's
    assert [n.op_type for n in exported.graph.node] == [
        "Sigmoid", "Transpose", "Transpose", "Conv", "Transpose",
    ]  # fmt: skip
    assert {v.name for v in exported.graph.value_info} <= {
        o for n in exported.graph.node for o in n.output
    }

"""Synthetic ONNX models for benchmarks: the ONNX counterpart of ``synth.py``.

``make_synthetic_onnx(num_nodes, seed)`` builds a well-formed model of exactly ``num_nodes``
nodes with the patterns exports hold and the default pipeline looks at:

* ``Conv -> BatchNormalization -> Relu`` chains with their weights as initializers (one weight
  or statistics initializer per node, or nearly), residual ``Add`` blocks, ``MaxPool``;
* ``Identity`` and inference ``Dropout`` nodes (what ``remove-identity-ops`` removes);
* dead ends: nodes whose outputs no node reads and that are no graph output;
* every node carries the attributes exporters write (``kernel_shape``, ``pads``, ``strides``,
  ``epsilon``, ...), and names like an exporter's (``/layer12/conv/Conv_output_0``).

The trunk keeps the shape ``(1, 2, 2, 2)``, so the models run in onnxruntime; initializers are
tiny (this is about graph size). Generation is linear in ``num_nodes`` and deterministic for a
seed: nodes and tensors are stamped from templates with one C-level copy each.

Run ``python benchmarks/synth_onnx.py N OUT.onnx [--seed S]`` to write a model.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHANNELS = 2
OPSET = 17

_CONV = helper.make_node(
    "Conv", [], [], kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1], dilations=[1, 1]
)
_BN = helper.make_node("BatchNormalization", [], [], epsilon=1e-5, momentum=0.9)
_RELU = helper.make_node("Relu", [], [])
_IDENTITY = helper.make_node("Identity", [], [])
_DROPOUT = helper.make_node("Dropout", [], [])
_ADD = helper.make_node("Add", [], [])
_SIGMOID = helper.make_node("Sigmoid", [], [])
_POOL = helper.make_node("MaxPool", [], [], kernel_shape=[1, 1], strides=[1, 1], pads=[0] * 4)

_BLOCK = (_CONV, _BN, _RELU, _IDENTITY, _DROPOUT, _ADD, _SIGMOID, _POOL)
"""One block: 8 nodes, 7 initializers."""


def _tensor(template: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(template, "template")


_WEIGHT = _tensor(np.full((CHANNELS, CHANNELS, 1, 1), 0.5, np.float32))
_VECTOR = _tensor(np.full((CHANNELS,), 0.1, np.float32))
_VARIANCE = _tensor(np.full((CHANNELS,), 1.0, np.float32))
_BIAS = _tensor(np.full((1, CHANNELS, 1, 1), 0.01, np.float32))


def make_synthetic_onnx(num_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """A model of exactly ``num_nodes`` nodes (see the module docstring)."""
    rng = random.Random(seed)
    graph = onnx.GraphProto(name="synthetic")
    nodes, inits = graph.node, graph.initializer
    trunk = "input"
    made = 0

    def node(template: onnx.NodeProto, inputs: list[str], output: str, name: str) -> None:
        new = nodes.add()
        new.CopyFrom(template)
        new.input.extend(inputs)
        new.output.append(output)
        new.name = name

    def init(template: TensorProto, name: str) -> str:
        new = inits.add()
        new.CopyFrom(template)
        new.name = name
        return name

    block = 0
    while made + len(_BLOCK) <= num_nodes - 1:
        p = f"/layer{block}"
        w = init(_WEIGHT, f"layer{block}.conv.weight")
        b = init(_VECTOR, f"layer{block}.conv.bias")
        scale = init(_VECTOR, f"layer{block}.bn.weight")
        shift = init(_VECTOR, f"layer{block}.bn.bias")
        mean = init(_VECTOR, f"layer{block}.bn.running_mean")
        var = init(_VARIANCE, f"layer{block}.bn.running_var")
        bias = init(_BIAS, f"layer{block}.residual.bias")
        node(_CONV, [trunk, w, b], f"{p}/conv/Conv_output_0", f"{p}/conv/Conv")
        node(_BN, [f"{p}/conv/Conv_output_0", scale, shift, mean, var], f"{p}/bn/out", f"{p}/bn/BN")
        node(_RELU, [f"{p}/bn/out"], f"{p}/relu/out", f"{p}/relu/Relu")
        node(_IDENTITY, [f"{p}/relu/out"], f"{p}/id/out", f"{p}/id/Identity")
        node(_DROPOUT, [f"{p}/id/out"], f"{p}/drop/out", f"{p}/drop/Dropout")
        residual = trunk if rng.random() < 0.5 else bias
        node(_ADD, [f"{p}/drop/out", residual], f"{p}/add/out", f"{p}/add/Add")
        node(_SIGMOID, [f"{p}/add/out"], f"{p}/dead/out", f"{p}/dead/Sigmoid")
        node(_POOL, [f"{p}/add/out"], f"{p}/pool/out", f"{p}/pool/MaxPool")
        trunk = f"{p}/pool/out"
        made += len(_BLOCK)
        block += 1
    while made < num_nodes:
        node(_RELU, [trunk], f"/tail{made}/out", f"/tail{made}/Relu")
        trunk = f"/tail{made}/out"
        made += 1
    shape = [1, CHANNELS, 2, 2]
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, shape))
    graph.output.append(helper.make_tensor_value_info(trunk, TensorProto.FLOAT, shape))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="synth_onnx"
    )
    model.ir_version = 8
    return model


def write_model(model: onnx.ModelProto, path: Path) -> Path:
    """Write ``model`` to ``path`` (folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("num_nodes", type=int)
    parser.add_argument("output", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    write_model(make_synthetic_onnx(options.num_nodes, options.seed), options.output)


if __name__ == "__main__":
    main()

"""The nine light zoo models shipped inside the onnx package, imported and run by our executor.

Their weights are ``ConstantOfShape`` placeholders (0.02 everywhere), and their shipped outputs
are constants, so neither can tell a wrong import from a right one. Each placeholder is
replaced, from a fixed seed, by a value chosen by its role (batch-norm variances positive,
scales small, He-normal filters): small ones become initializers (imported as init_net fills),
large ones graph inputs fed to both engines (keeping the multi-million-value FC weights out of
protobuf argument lists). The outputs and the pre-softmax logits of our executor on the imported
pair must equal onnxruntime's on the original, and so must onnxruntime's on the re-exported
model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from graphtools.executor import run_model
from graphtools.onnx import export_onnx, import_onnx, run_onnxruntime
from graphtools.testing import compare_outputs

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]
LARGE = 100_000  # values; larger placeholders are fed as inputs instead of initializers
RTOL, ATOL = 1e-3, 1e-5


def _role_value(
    rng: np.random.Generator, shape: tuple[int, ...], consumer: onnx.NodeProto, position: int
) -> np.ndarray:
    kind = consumer.op_type
    if kind == "BatchNormalization" and position == 4:
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if (kind == "BatchNormalization" and position == 1) or (kind == "Mul" and len(shape) == 1):
        return rng.uniform(0.1, 0.3, shape).astype(np.float32)
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape, dtype=np.float32) * np.sqrt(2.0 / fan_in)).astype(
            np.float32
        )
    return (rng.standard_normal(shape, dtype=np.float32) * 0.1).astype(np.float32)


def _with_weights(
    model: onnx.ModelProto, seed: int
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """The model with role-aware weights, the weights fed as inputs, and the logits' name
    (the Softmax input, made a graph output)."""
    rng = np.random.default_rng(seed)
    graph = model.graph
    shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    consumers: dict[str, tuple[onnx.NodeProto, int]] = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, (node, position))
    feeds: dict[str, np.ndarray] = {}
    kept, used_shapes = [], set()
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        used_shapes.add(node.input[0])
        shape = tuple(int(v) for v in shapes[node.input[0]])
        value = _role_value(rng, shape, *consumers[node.output[0]])
        name = node.output[0]
        if value.size >= LARGE:
            feeds[name] = value
            graph.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))
        else:
            graph.initializer.append(numpy_helper.from_array(value, name))
    del graph.node[:]
    graph.node.extend(kept)
    for field in (graph.initializer, graph.input):
        dropped = [item for item in field if item.name in used_shapes]
        for item in dropped:
            field.remove(item)
    softmax = [n for n in graph.node if n.op_type == "Softmax"]
    if not softmax:  # densenet121 ends at its logits
        return model, feeds, graph.output[0].name
    logits = softmax[0].input[0]
    graph.output.append(onnx.ValueInfoProto(name=logits))
    return model, feeds, logits


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_light_zoo_model_matches_onnxruntime(name: str) -> None:
    model = onnx.load(str(LIGHT / f"light_{name}.onnx"))
    model, weights, logits = _with_weights(model, seed=0)
    initializers = {t.name for t in model.graph.initializer}
    (data,) = [i for i in model.graph.input if i.name not in initializers and i.name not in weights]
    dims = [d.dim_value for d in data.type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(dims, dtype=np.float32)
    feeds = {data.name: x, **weights}

    pair = import_onnx(model)
    assert pair.init_net is not None and len(pair.init_net) > 0
    assert data.name in pair.predict_net.external_inputs
    assert not set(pair.predict_net.external_inputs).isdisjoint(initializers)  # params declared
    reference = run_onnxruntime(model, feeds)
    ours = run_model(pair, feeds)
    assert set(ours) == set(reference)
    assert logits in ours
    diffs = compare_outputs(reference, ours, rtol=RTOL, atol=ATOL)
    assert all(d.ok for d in diffs), diffs
    spread = float(np.std(reference[logits]))
    assert spread > 1e-2, f"logits std {spread}: the comparison would be vacuous"

    exported = export_onnx(pair)  # the pair keeps the graph inputs' types
    assert {i.name: i.type for i in exported.graph.input} == {
        i.name: i.type for i in model.graph.input if i.name not in initializers
    }
    assert exported.ir_version == 8 and exported.opset_import[0].version == 17
    diffs = compare_outputs(ours, run_onnxruntime(exported, feeds), rtol=RTOL, atol=ATOL)
    assert [d.name for d in diffs] == list(reference)
    assert all(d.ok for d in diffs), diffs

"""The ONNX corpus holds what it claims: valid models that compute what torch computes.

Every exported model passes onnx's full checker and runs in onnxruntime on its seeded inputs
with the outputs of the torch model it came from; the dynamic-batch models also at batch 3. Each
model writes the op types it is in the corpus for (HardSwish, LSTM's Expand chains, a Loop, the
unfolded export's Identity, ...), and each exporter contributes at least ten models.

Needs the ``torch`` extra; without it these tests skip.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
import onnxruntime as ort
from onnx_corpus import CORPUS, CorpusModel, build_corpus, seeded_inputs, torch_outputs
from onnx_peers import node_count, onnxsim_node_count

RTOL, ATOL = 1e-4, 1e-5
NAMES = [entry.name for entry in CORPUS]
DYNAMIC = [entry.name for entry in CORPUS if entry.dynamic_batch]

#: Op types each model is in the corpus to show (subgraphs included), as torch 2.13 writes them.
EXPECTED_OPS = {
    "resnet18_legacy": {"Conv", "Add", "GlobalAveragePool", "Flatten", "Gemm"},
    "resnet18_dynamo": {"Conv", "Add", "ReduceMean", "Gemm"},
    "resnet18_dynamo_dynbatch": {"Conv", "Add", "ReduceMean", "Reshape", "Gemm"},
    "mobilenetv3_legacy": {"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul"},
    "mobilenetv3_dynamo": {"HardSwish", "HardSigmoid", "Mul"},
    "mobilenetv3_legacy_opset11": {"HardSigmoid", "Mul"},  # HardSwish decomposed before 14
    "efficientnet_legacy": {"Sigmoid", "Mul", "Conv"},  # SiLU is Sigmoid * x
    "efficientnet_dynamo": {"Sigmoid", "Mul", "Conv"},
    "vgg_legacy": {"MaxPool", "AveragePool", "Reshape", "Gemm"},
    "vgg_dynamo": {"MaxPool", "AveragePool", "Reshape", "Gemm"},
    "vgg_legacy_dynbatch": {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape"},
    "densenet_legacy": {"Concat", "BatchNormalization", "AveragePool"},
    "densenet_dynamo": {"Concat", "BatchNormalization", "AveragePool"},
    "transformer_encoder_legacy": {"LayerNormalization", "Softmax", "MatMul", "Identity"},
    "transformer_encoder_dynamo": {"LayerNormalization", "Softmax", "MatMul"},
    "transformer_encoder_legacy_opset14": {"ReduceMean", "Sqrt", "Erf", "Softmax"},
    "gpt_block_legacy": {"Range", "Greater", "Where", "Mod", "Gather", "Gelu", "Split"},
    "gpt_block_dynamo": {"Range", "Greater", "Where", "Mod", "Gather", "Gelu", "Split"},
    "lstm2_legacy": {"LSTM", "Shape", "Gather", "Concat", "Expand"},
    "lstm2_dynamo": {"LSTM"},
    "bilstm_legacy": {"LSTM", "Expand", "Transpose", "Reshape"},
    "gru_legacy": {"GRU", "ConstantOfShape"},
    "gru_dynamo": {"GRU", "Expand"},
    "scripted_loop_legacy": {"Loop", "Less", "Tanh", "Gemm"},
    "scripted_if_legacy": {"If", "Greater", "Relu", "Sigmoid"},
    "cond_dynamo": {"If", "Greater"},
    "smallcnn_legacy_unfolded": {"BatchNormalization", "Identity", "Unsqueeze", "Concat"},
    "smallcnn_dynamo_unoptimized": {"BatchNormalization", "Identity"},
    "traincnn_legacy_training": {"BatchNormalization"},
    "upsample_pad_legacy": {"Resize", "Pad", "ConvTranspose", "BatchNormalization", "Clip"},
    "upsample_pad_dynamo": {"Resize", "Pad", "ConvTranspose", "Clip"},
    "ops_mix_legacy": {"Split", "Softmax", "LogSoftmax", "Clip", "Slice", "Gather", "Where"},
    "ops_mix_dynamo": {"Split", "Softmax", "LogSoftmax", "Clip", "Slice", "Gather", "Where"},
    "detect_head_legacy_dynbatch": {"Range", "Expand", "Sigmoid", "Transpose", "Pow"},
    "lstm_last_step_legacy": {"LSTM", "Squeeze", "Transpose", "Gather", "Gemm"},
    "transformer_encoder_legacy_dynbatch": {"LayerNormalization", "Softmax", "Add", "Reshape"},
    "detect_head_dynamo": {"Sigmoid", "Transpose", "Pow", "Slice"},
    # what optimize fuses: a written-out LayerNorm, Pad before AveragePool, Mul before Conv
    "hand_written_legacy": {"ReduceMean", "Pow", "Sqrt", "Div", "Pad", "AveragePool", "Mul"},
    "hand_written_dynamo": {"ReduceMean", "Pow", "Sqrt", "Div", "Pad", "AveragePool", "Mul"},
}


@pytest.fixture(scope="module")
def corpus(onnx_corpus: list[CorpusModel]) -> dict[str, CorpusModel]:
    return {model.name: model for model in onnx_corpus}


def _session(path: Path) -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attribute.g)
            for subgraph in attribute.graphs:
                yield from _nodes(subgraph)


def _op_types(model: CorpusModel) -> set[str]:
    return {node.op_type for node in _nodes(onnx.load(model.path, load_external_data=False).graph)}


def _assert_matches_torch(model: CorpusModel, batch: int | None) -> None:
    feeds = seeded_inputs(model, batch)
    session = _session(model.path)
    assert [i.name for i in session.get_inputs()] == list(feeds)
    assert [o.name for o in session.get_outputs()] == list(model.outputs)
    got = session.run(None, feeds)
    want = torch_outputs(model, feeds)
    assert len(got) == len(want)
    for name, actual, expected in zip(model.outputs, got, want, strict=True):
        assert actual.dtype == expected.dtype, name
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=name)


def test_registry_is_what_the_issues_need() -> None:
    assert len(CORPUS) >= 24
    assert len(set(NAMES)) == len(NAMES)
    for exporter in ("legacy", "dynamo"):
        assert sum(entry.exporter == exporter for entry in CORPUS) >= 10, exporter
    assert {entry.exporter for entry in CORPUS if entry.dynamic_batch} == {"legacy", "dynamo"}
    assert set(EXPECTED_OPS) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_full_checker_accepts(corpus: dict[str, CorpusModel], name: str) -> None:
    onnx.checker.check_model(str(corpus[name].path), full_check=True)


@pytest.mark.parametrize("name", NAMES)
def test_onnxruntime_equals_torch(corpus: dict[str, CorpusModel], name: str) -> None:
    _assert_matches_torch(corpus[name], None)


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_batch_runs_at_three(corpus: dict[str, CorpusModel], name: str) -> None:
    model = corpus[name]
    graph = onnx.load(model.path, load_external_data=False).graph
    first = graph.input[0].type.tensor_type.shape.dim
    axis = model.entry.batch_axes()[graph.input[0].name]
    assert first[axis].dim_param and not first[axis].HasField("dim_value")
    _assert_matches_torch(model, 3)
    assert seeded_inputs(model, 3)[graph.input[0].name].shape[axis] == 3


@pytest.mark.parametrize("name", NAMES)
def test_writes_the_op_types_it_is_here_for(corpus: dict[str, CorpusModel], name: str) -> None:
    missing = EXPECTED_OPS[name] - _op_types(corpus[name])
    assert not missing, f"{name} has no {sorted(missing)}"


def test_issue_op_types_are_covered(corpus: dict[str, CorpusModel]) -> None:
    found = set().union(*(_op_types(model) for model in corpus.values()))
    wanted = {"HardSwish", "HardSigmoid", "LayerNormalization", "Mod", "Expand", "Greater"}
    wanted |= {"Loop", "If", "LSTM", "GRU", "Identity", "Resize", "Pad", "Where", "Range"}
    assert wanted <= found, sorted(wanted - found)


def test_variants_keep_their_export_options(corpus: dict[str, CorpusModel]) -> None:
    def opset(name: str) -> int:
        model = onnx.load(corpus[name].path, load_external_data=False)
        return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))

    assert opset("mobilenetv3_legacy_opset11") == 11
    assert opset("transformer_encoder_legacy_opset14") == 14
    assert opset("mobilenetv3_legacy") == 20
    assert "HardSwish" not in _op_types(corpus["mobilenetv3_legacy_opset11"])
    training = onnx.load(corpus["traincnn_legacy_training"].path).graph.node
    modes = [
        a.i
        for n in training
        if n.op_type == "BatchNormalization"
        for a in n.attribute
        if a.name == "training_mode"
    ]
    assert modes == [1, 1]  # batch statistics, as torch's train mode


def test_dynamo_exports_keep_weights_as_external_data(corpus: dict[str, CorpusModel]) -> None:
    with_data = 0
    for model in corpus.values():
        proto = onnx.load(model.path, load_external_data=False)
        external = [
            t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
        ]
        if model.exporter == "legacy":
            assert model.data_path is None and not external, model.name
            continue
        locations = {e.value for t in external for e in t.external_data if e.key == "location"}
        assert locations <= {f"{model.path.name}.data"}, model.name
        with_data += bool(locations) and model.data_path is not None
    assert with_data >= 10  # all but the tiniest: the exporter keeps small tensors inline


def test_seeded_inputs_are_deterministic() -> None:
    static = next(entry for entry in CORPUS if not entry.dynamic_batch)
    dynamic = next(entry for entry in CORPUS if entry.dynamic_batch)
    for entry in (static, dynamic):
        first, second = seeded_inputs(entry), seeded_inputs(entry)
        assert list(first) == [spec.name for spec in entry.inputs]
        for name, array in first.items():
            np.testing.assert_array_equal(array, second[name])
            spec = next(s for s in entry.inputs if s.name == name)
            assert array.shape == spec.shape and array.dtype == np.dtype(spec.dtype)
    with pytest.raises(ValueError, match="static batch"):
        seeded_inputs(static, 3)


def test_a_second_build_reuses_files_and_a_stale_stamp_rebuilds(tmp_path: Path) -> None:
    (model,) = build_corpus(tmp_path, ["scripted_if_legacy"])
    written = model.path.stat().st_mtime_ns
    stamp = tmp_path / "scripted_if_legacy.key"
    key = stamp.read_text()
    assert build_corpus(tmp_path, ["scripted_if_legacy"]) == [model]
    assert model.path.stat().st_mtime_ns == written
    stamp.write_text("stale")
    model.path.write_bytes(b"not a model")
    build_corpus(tmp_path, ["scripted_if_legacy"])
    assert stamp.read_text() == key
    onnx.checker.check_model(str(model.path), full_check=True)


def test_node_count_includes_nested_bodies() -> None:
    def graph(*nodes: onnx.NodeProto) -> onnx.GraphProto:
        return onnx.helper.make_graph(list(nodes), "g", [], [])

    def branch(then: onnx.GraphProto, other: onnx.GraphProto) -> onnx.NodeProto:
        return onnx.helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)

    identity = onnx.helper.make_node("Identity", ["x"], ["y"])
    inner = branch(graph(identity), graph(identity))
    outer = graph(identity, branch(graph(identity), graph(identity, inner)))
    assert node_count(outer) == 2 + 1 + 2 + 2
    assert node_count(onnx.helper.make_model(outer)) == 7


def test_onnxsim_node_count_is_none_only_without_onnxsim(corpus: dict[str, CorpusModel]) -> None:
    path = corpus["lstm2_legacy"].path  # the legacy exporter's initial-state chains fold away
    count = onnxsim_node_count(path)
    if importlib.util.find_spec("onnxsim") is None:
        assert count is None
    else:
        assert count is not None and count < node_count(onnx.load(path))

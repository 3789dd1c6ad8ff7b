"""The passes keep what nets compute, checked with the reference executor.

(a) Whole real nets: the super-resolution pair, the Mask R-CNN2Go int8 pair up to its first
detection op, the crayon style-transfer pair between its mobile pre/deprocess ops, zoo predict
nets (ShuffleNet and GoogLeNet among them, and the Faster R-CNN and Mask R-CNN2Go fp32 nets up
to their first detection op) with ``random_params`` weights in a generated init_net, and
``fixtures/models/tiny_export``. Published nets give the default pipeline nothing to do, so
each is also run in an *export-like* variant that adds what exporters leave behind: a
CPU->GPU->CPU round trip on the data input read by every former reader, a dead debug branch,
and PyTorch's Shape/Gather/ExpandDims/Concat/Reshape chain before every FC. Every pass of the
default pipeline alone, and the whole pipeline, must keep the outputs (rtol 1e-4, atol 1e-5).

(b) Hypothesis: random nets from the kernel vocabulary (in-place ops, copy round trips with
several readers, reshape heads before FC, dead branches, Add/Mul/Sum) keep their outputs
through every pass and the whole pipeline, and ``verify`` finds nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.executor import run_model
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import DEFAULT_PIPELINE, PassManager
from graphtools.serde import load_model, load_model_dir
from graphtools.serde.codec import serialize_net
from graphtools.testing import (
    compare_outputs,
    format_diffs,
    make_feeds,
    model_inputs,
    random_params,
)
from graphtools.wellformed import verify

RTOL, ATOL = 1e-4, 1e-5
PIPELINES = [*DEFAULT_PIPELINE.split(","), "default"]


def _fill(name: str, array: np.ndarray) -> Op:
    kind = "GivenTensorInt64Fill" if array.dtype == np.int64 else "GivenTensorFill"
    return Op(kind, [], [name], args={"shape": list(array.shape), "values": array.ravel()})


def _with_init(net: Net, params: dict[str, np.ndarray]) -> Model:
    """``net`` with an init_net filling ``params`` (which become external inputs)."""
    init = Net([_fill(k, v) for k, v in params.items()], [], list(params), name="init")
    inputs = [*net.external_inputs, *(k for k in params if k not in net.external_inputs)]
    return Model(Net(net.ops, inputs, net.external_outputs, name=net.name), init)


def _export_like(model: Model, data: str) -> Model:
    """``model`` with an exporter's leftovers (see the module docstring); same outputs."""
    net = model.predict_net
    gpu, cpu = f"{data}__gpu", f"{data}__cpu"
    ops = [
        Op("CopyCPUToGPU", [data], [gpu]),
        Op("CopyGPUToCPU", [gpu], [cpu]),
        Op("Sigmoid", [cpu], [f"{data}__debug"]),
    ]
    seen_data_write = False
    for index, op in enumerate(net):
        if not seen_data_write:
            op = op.replace(inputs=[cpu if name == data else name for name in op.inputs])
        seen_data_write = seen_data_write or data in op.outputs
        if op.type == "FC" and op.arg("axis", 1) == 1 and len(op.inputs) == 3:
            x = op.inputs[0]
            tag = f"__head{index}"
            ops += [
                Op("Shape", [x], [f"s{tag}"]),
                Op("Gather", [f"s{tag}", "head_idx"], [f"n{tag}"]),
                Op("ExpandDims", [f"n{tag}"], [f"n1{tag}"], args={"dims": [0]}),
                Op(
                    "Concat",
                    [f"n1{tag}", "head_minus_one"],
                    [f"shape{tag}", f"split{tag}"],
                    args={"axis": 0},
                ),
                Op("Reshape", [x, f"shape{tag}"], [f"flat{tag}", f"old{tag}"]),
            ]
            op = op.replace(inputs=[f"flat{tag}", *op.inputs[1:]])
        ops.append(op)
    heads = {
        "head_idx": np.array(0, np.int64),
        "head_minus_one": np.array([-1], np.int64),
    }
    init_ops = [*(model.init_net.ops if model.init_net is not None else ())]
    init_ops += [_fill(k, v) for k, v in heads.items()]
    init_outputs = [*(model.init_net.external_outputs if model.init_net is not None else ())]
    init = Net(init_ops, [], [*init_outputs, *heads], name="init")
    inputs = [*net.external_inputs, *heads]
    return Model(Net(ops, inputs, net.external_outputs, name=net.name), init)


def _check_every_pass(model: Model, feeds: dict[str, Any]) -> None:
    """Each pass of the default pipeline, and the pipeline, keep ``model``'s outputs."""
    reference = run_model(model, feeds)
    findings = {(f.kind, f.blob) for f in verify(model)}
    failures = []
    modified_by = []
    for spec in PIPELINES:
        after = model.copy()
        records = PassManager.parse(spec)(after)
        assert {(f.kind, f.blob) for f in verify(after)} <= findings, spec
        if not any(r.modified for r in records):
            assert serialize_net(after.predict_net) == serialize_net(model.predict_net)
            continue
        modified_by.append(spec)
        declared = set(after.predict_net.external_inputs)
        outputs = run_model(after, {k: v for k, v in feeds.items() if k in declared})
        diffs = compare_outputs(reference, outputs, rtol=RTOL, atol=ATOL)
        if not all(d.ok for d in diffs):
            failures.append(f"after {spec}:\n{format_diffs(diffs)}")
    assert not failures, "\n".join(failures)


# -- (a) whole real nets ----------------------------------------------------------------------


@dataclass(frozen=True)
class RealNet:
    """How to load one real net and feed it."""

    id: str
    load: Callable[[Path], tuple[Model, str, tuple[int, ...]]]
    slow: bool = False


def _super_resolution(real: Path) -> tuple[Model, str, tuple[int, ...]]:
    folder = real / "hmc-neural_nets_research" / "super_resolution"
    # Its Reshape has the 224x224 spatial size in its shape argument.
    return load_model(folder / "predict_net.pb", folder / "init_net.pb"), "1", (1, 1, 224, 224)


# Ops with no kernel in the executor (and the If around the Mask R-CNN2Go fp32 mask head).
DETECTION = frozenset({"GenerateProposals", "RoIAlign", "BBoxTransform", "BoxWithNMSLimit", "If"})


def _detection_prefix(model: Model) -> Model:
    """The ops before the first detection op, with the blobs the cut-off part reads as outputs."""
    net = model.predict_net
    ops = net.ops
    stop = next(i for i, op in enumerate(ops) if op.type in DETECTION)
    written = {name for op in ops[:stop] for name in op.outputs}
    cut = list(dict.fromkeys(n for op in ops[stop:] for n in op.inputs if n in written))
    return Model(Net(ops[:stop], net.external_inputs, cut, name=net.name), model.init_net)


def _with_random_params(net: Net, size: tuple[int, ...]) -> tuple[Model, str, tuple[int, ...]]:
    """``net`` fed at its first op's input, with ``random_params`` weights in an init_net."""
    data = net[0].inputs[0]
    return _with_init(net, random_params(net, {data: size}, seed=0, channels=8)), data, size


def _mask_rcnn_int8_backbone(real: Path) -> tuple[Model, str, tuple[int, ...]]:
    folder = real / "caffe2-models" / "mask_rcnn_2go" / "2018-12" / "int8"
    model = load_model(folder / "model.pb", folder / "model_init.pb")
    return _detection_prefix(model), "data", (1, 3, 96, 128)


def _backbone(relative: str, size: int) -> Callable[[Path], tuple[Model, str, tuple[int, ...]]]:
    """A detection net without weights, up to its first detection op."""

    def load(real: Path) -> tuple[Model, str, tuple[int, ...]]:
        prefix = _detection_prefix(load_model(real / "caffe2-models" / relative)).predict_net
        return _with_random_params(prefix, (1, 3, size, size))

    return load


def _zoo(
    relative: str, size: int, root: str = "caffe2-models"
) -> Callable[[Path], tuple[Model, str, tuple[int, ...]]]:
    def load(real: Path) -> tuple[Model, str, tuple[int, ...]]:
        net = load_model(real / root / relative).predict_net
        return _with_random_params(net, (1, 3, size, size))

    return load


def _crayon_body(real: Path) -> tuple[Model, str, tuple[int, ...]]:
    """The style-transfer pair between its mobile pre/deprocess ops (no kernels): the
    preprocess op's output (NCHW float, 3 channels) is fed, the deprocess op's input is the
    output. 48x48 keeps the reflect padding of the 4x-pooled image valid."""
    folder = real / "caffe2-models" / "style_transfer" / "crayon"
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    net = model.predict_net
    first, last = net[0], net[len(net) - 1]
    assert first.type == "PackedInt8BGRANHWCToNCHWCStylizerPreprocess"
    assert last.type == "BRGNCHWCToPackedInt8BGRAStylizerDeprocess"
    data = first.outputs[0]
    inputs = [data, *(name for name in net.external_inputs if name != first.inputs[0])]
    body = Net(net.ops[1:-1], inputs, [last.inputs[0]], name=net.name)
    return Model(body, model.init_net), data, (1, 3, 48, 48)


REAL_NETS = [
    RealNet("super_resolution", _super_resolution, slow=True),
    RealNet("mask_rcnn_2go_int8_backbone", _mask_rcnn_int8_backbone, slow=True),
    # Fully convolutional or FC after pools with fixed kernels: small inputs are valid.
    RealNet("squeezenet", _zoo("squeezenet/predict_net.pb", 64)),
    RealNet("bvlc_alexnet", _zoo("bvlc_alexnet/predict_net.pbtxt", 67)),
    RealNet("vgg16_zf", _zoo("vgg16/predict_net.pbtxt", 64)),
    RealNet("vgg19", _zoo("vgg19/predict_net.pbtxt", 64)),
    RealNet("zfnet512", _zoo("zfnet512/predict_net.pbtxt", 64)),
    RealNet(
        "arm_squeezenet", _zoo("arm-compute/squeezenet_predict.pb", 64, "facebookarchive-caffe2")
    ),
    RealNet("densenet121", _zoo("densenet121/predict_net.pbtxt", 64), slow=True),
    # A 7x7 AveragePool before the FC: only the real 224x224 input reaches it at 7x7.
    RealNet("resnet50", _zoo("resnet50/predict_net.pbtxt", 224)),
    RealNet("inception_v1", _zoo("inception_v1/predict_net.pbtxt", 224)),
    RealNet("inception_v2", _zoo("inception_v2/predict_net.pbtxt", 224), slow=True),
    RealNet("bvlc_googlenet", _zoo("bvlc_googlenet/predict_net.pb", 224)),
    # Grouped 1x1 convs change the channel count; depthwise groups of 112 to 544.
    RealNet("shufflenet", _zoo("shufflenet/predict_net.pbtxt", 224), slow=True),
    # Stride 16 at the cut: 64x64 gives 4x4 features.
    RealNet(
        "faster_rcnn_r50_c4_backbone",
        _backbone("detectron/e2e_faster_rcnn_R-50-C4_1x/predict_net.pbtxt", 64),
    ),
    RealNet("mask_rcnn_2go_fp32_backbone", _backbone("mask_rcnn_2go/2018-12/fp32/model.pb", 64)),
    RealNet("crayon_style_transfer", _crayon_body),
]


def _real_params() -> list[Any]:
    params = []
    for real_net in REAL_NETS:
        marks = [pytest.mark.slow] if real_net.slow else []
        for variant in ("published", "export_like"):
            params.append(
                pytest.param(real_net, variant, id=f"{real_net.id}-{variant}", marks=marks)
            )
    return params


@pytest.mark.parametrize(("real_net", "variant"), _real_params())
def test_real_net_outputs_survive_every_pass(
    real_fixtures: Path, real_net: RealNet, variant: str
) -> None:
    model, data, shape = real_net.load(real_fixtures)
    if variant == "export_like":
        model = _export_like(model, data)
    # Some zoo nets declare inputs no op reads (vgg16's data queue): feed them a placeholder.
    read = {name for op in model.predict_net for name in op.inputs}
    shapes = {name: (1,) for name in model_inputs(model) if name not in read}
    _check_every_pass(model, make_feeds(model, {**shapes, data: shape}, seed=1))


def test_tiny_export_outputs_survive_every_pass() -> None:
    model = load_model_dir(FIXTURES / "models" / "tiny_export")
    _check_every_pass(model, make_feeds(model, {"data": (2, 1, 6, 6)}, seed=1))


def test_export_like_variant_gives_every_pass_work(real_fixtures: Path) -> None:
    """The export-like leftovers are really removed, so the checks above are not vacuous."""
    model, data, _ = _zoo("bvlc_alexnet/predict_net.pbtxt", 67)(real_fixtures)
    wrapped = _export_like(model, data)
    counts = {}
    for spec in PIPELINES:
        after = wrapped.copy()
        records = PassManager.parse(spec)(after)
        assert any(r.modified for r in records), spec
        counts[spec] = len(after.predict_net)
    # default also drops the net's own test-mode Dropouts (remove-identity-ops).
    undone = model.copy()
    PassManager.parse("remove-identity-ops")(undone)
    assert counts["default"] == len(undone.predict_net) < len(model.predict_net)


# -- (b) random nets --------------------------------------------------------------------------

SHAPE = (2, 3, 2, 2)
HEAD_OUT = 4


@dataclass
class _Builder:
    ops: list[Op]
    pool: list[str]
    params: dict[str, np.ndarray]
    copied: list[str]
    counter: int = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"


def _head(b: _Builder, a: str, rng: np.random.Generator, overwrite: bool) -> list[Op]:
    """PyTorch's flatten before a Linear, optionally overwriting ``a`` before the FC."""
    tag = b.fresh("_h")
    w, bias = f"w{tag}", f"b{tag}"
    b.params[w] = rng.standard_normal((HEAD_OUT, int(np.prod(SHAPE[1:])))).astype(np.float32)
    b.params[bias] = rng.standard_normal(HEAD_OUT).astype(np.float32)
    ops = [
        Op("Shape", [a], [f"s{tag}"]),
        Op("Gather", [f"s{tag}", "idx"], [f"n{tag}"]),
        Op("ExpandDims", [f"n{tag}"], [f"n1{tag}"], args={"dims": [0]}),
        Op("Concat", [f"n1{tag}", "minus_one"], [f"shape{tag}", f"split{tag}"], args={"axis": 0}),
        Op("Reshape", [a, f"shape{tag}"], [f"flat{tag}", f"old{tag}"]),
    ]
    if overwrite:
        ops.append(Op("Tanh", [a], [a]))
    return [*ops, Op("FC", [f"flat{tag}", w, bias], [f"y{tag}"])]


KINDS = ["unary", "in_place", "binary", "sum", "copies", "gpu_reader", "head", "head_overwrite"]


@st.composite
def random_models(draw: st.DrawFn) -> Model:
    """A random model over activations of one shape; FC heads give (2, 4) outputs.

    Operands favour recent blobs and in-place ops favour copied blobs, so that readers of a
    round trip's result often come after its source was overwritten.
    """
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    b = _Builder([], ["x", "z"], {}, [])
    heads: list[str] = []
    pick = st.sampled_from

    def operand() -> str:
        return draw(st.one_of(pick(b.pool[-3:]), pick(b.pool)))

    for _ in range(draw(st.integers(1, 12))):
        kind = draw(pick(KINDS))
        a = operand()
        if kind == "unary":
            out = b.fresh("u")
            b.ops.append(Op(draw(pick(["Relu", "Sigmoid", "Tanh", "Neg"])), [a], [out]))
            b.pool.append(out)
        elif kind == "in_place":
            if b.copied and draw(st.booleans()):
                a = draw(pick(b.copied))
            b.ops.append(Op(draw(pick(["Relu", "Sigmoid", "Tanh"])), [a], [a]))
        elif kind == "binary":
            out = b.fresh("e")
            b.ops.append(Op(draw(pick(["Add", "Mul"])), [a, operand()], [out]))
            b.pool.append(out)
        elif kind == "sum":
            others = [operand() for _ in range(draw(st.integers(1, 3)))]
            out = b.fresh("s")
            b.ops.append(Op("Sum", [a, *others], [out]))
            b.pool.append(out)
        elif kind in ("copies", "gpu_reader"):
            gpu = b.fresh("g")
            b.ops.append(Op("CopyCPUToGPU", [a], [gpu]))
            b.copied.append(a)
            for _ in range(draw(st.integers(1, 2))):
                back = b.fresh("c")
                b.ops.append(Op("CopyGPUToCPU", [gpu], [back]))
                b.pool.append(back)
            if kind == "gpu_reader":
                b.pool.append(gpu)
        else:
            b.ops += _head(b, a, rng, overwrite=kind == "head_overwrite")
            heads.append(b.ops[-1].outputs[0])
    written = list(dict.fromkeys(o for op in b.ops for o in op.outputs if o in b.pool))
    written += heads
    if not written:
        out = b.fresh("u")
        b.ops.append(Op("Relu", ["x"], [out]))
        written = [out]
    last = next(o for op in reversed(b.ops) for o in op.outputs if o in written)
    outputs = [last, *draw(st.lists(pick(written), max_size=3, unique=True))]
    b.params["idx"] = np.array(0, np.int64)
    b.params["minus_one"] = np.array([-1], np.int64)
    net = Net(b.ops, ["x", "z"], list(dict.fromkeys(outputs)), name="random")
    return _with_init(net, b.params)


@settings(max_examples=100, deadline=None)
@given(model=random_models(), seed=st.integers(0, 1000))
def test_random_nets_keep_outputs_through_every_pass(model: Model, seed: int) -> None:
    _check_every_pass(model, make_feeds(model, {"x": SHAPE, "z": SHAPE}, seed=seed))

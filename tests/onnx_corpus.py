"""A corpus of real ONNX models: small PyTorch models exported by torch's two ONNX exporters.

Test support, not a test module: the ``onnx_corpus`` fixture (``tests/conftest.py``) builds it once
per session, ``benchmarks/onnx_peers.py`` runs the ONNX optimisers users compare with on it.

The models are what users of onnxsim and friends feed them, written by hand in plain ``torch.nn``
(torchvision does not install beside this torch): torchvision-style CNNs (ResNet-18, MobileNetV3,
EfficientNet, VGG, DenseNet), a transformer encoder and a GPT block, LSTM/GRU stacks, control
flow (``torch.cond``, scripted loops and branches), the odd ops (Resize, Pad, grouped and
transposed convolutions, slicing, Split, Softmax, Clip), and what model code writes by hand
where one op would do (a LayerNorm, a layer scale, two means for a global pool). Each is
exported with the legacy TorchScript exporter (``dynamo=False``) or the default dynamo
exporter, or both, some with a dynamic batch, without constant folding, in training mode or
at an older opset. The sizes are
small (the whole corpus builds in well under a minute on two cores) but the structure is the
real one: a model's ONNX graph has the nodes the full-size model's graph has, fewer times.

Every model is deterministic: weights from a fixed seed (batch-norm statistics made non-trivial
so that a wrong fold shows), inputs from ``seeded_inputs``. ``build_corpus`` writes
``<name>.onnx`` (and the dynamo exporter's ``<name>.onnx.data`` beside it, kept as written) and
a ``<name>.key`` stamp; a model whose stamp matches the content key (this file, the versions of
torch, onnx and onnxscript) is not exported again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import logging
import math
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

Exporter = Literal["legacy", "dynamo"]
SEED = 0
_SOURCE = Path(__file__)


@dataclass(frozen=True)
class InputSpec:
    """One graph input: its name (also the forward argument's), shape as exported, dtype.

    Integer inputs are drawn from ``[low, high)``; floats are standard normal.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    low: int = 0
    high: int = 2


@dataclass(frozen=True)
class CorpusEntry:
    """How to make one corpus model.

    ``builder`` returns the freshly initialised ``nn.Module``; ``module()`` seeds, builds, sets
    the mode and scripts it. ``dynamic_axes`` is in the legacy exporter's form (graph input and
    output name -> axis -> symbolic name) and means the same for both exporters; the axis named
    ``"batch"`` is the batch. ``options`` go to ``torch.onnx.export`` as they are.
    ``fresh_norms`` keeps batch norms as constructed (zero mean, unit variance) instead of
    giving them random statistics.
    """

    name: str
    exporter: Exporter
    inputs: tuple[InputSpec, ...]
    builder: Callable[[], nn.Module]
    outputs: tuple[str, ...] = ("y",)
    dynamic_axes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    script: bool = False
    training: bool = False
    fresh_norms: bool = False

    @property
    def dynamic_batch(self) -> bool:
        """Whether the exported graph's batch dimension is symbolic."""
        return any("batch" in axes.values() for axes in self.dynamic_axes.values())

    def batch_axes(self) -> dict[str, int]:
        """Input name -> its batch axis, for the inputs that have a symbolic batch."""
        found = {}
        for spec in self.inputs:
            for axis, label in self.dynamic_axes.get(spec.name, {}).items():
                if label == "batch":
                    found[spec.name] = axis
        return found

    def module(self) -> nn.Module:
        """The model as exported: seeded weights, eval mode (train mode for ``training``)."""
        torch.manual_seed(SEED)
        module = self.builder()
        if not self.fresh_norms:
            _settle_batch_norms(module)
        module.train(self.training)
        if self.script:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated
                return torch.jit.script(module)
        return module


@dataclass(frozen=True)
class CorpusModel:
    """A corpus entry exported to ``path`` (and ``data_path`` for external data, if any)."""

    entry: CorpusEntry
    path: Path

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def exporter(self) -> Exporter:
        return self.entry.exporter

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return self.entry.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.entry.outputs

    @property
    def dynamic_batch(self) -> bool:
        return self.entry.dynamic_batch

    @property
    def data_path(self) -> Path | None:
        """The external data file the dynamo exporter wrote beside the model, if any."""
        data = self.path.with_name(self.path.name + ".data")
        return data if data.exists() else None

    def module(self) -> nn.Module:
        """The torch model the file was exported from (see ``CorpusEntry.module``)."""
        return self.entry.module()


def seeded_inputs(model: CorpusEntry | CorpusModel, batch: int | None = None) -> dict[str, Any]:
    """Deterministic inputs for ``model``, keyed by graph input name, in graph order.

    ``batch`` resizes the batch axis of a dynamic-batch model; a static model only takes its
    exported shapes. The same model and batch always give the same arrays.
    """
    entry = model.entry if isinstance(model, CorpusModel) else model
    axes = entry.batch_axes()
    if batch is not None and not axes:
        raise ValueError(f"{entry.name} has a static batch; it only runs at its exported shapes")
    rng = np.random.default_rng(zlib.crc32(f"{entry.name}/{batch}".encode()))
    arrays: dict[str, Any] = {}
    for spec in entry.inputs:
        shape = list(spec.shape)
        if batch is not None and spec.name in axes:
            shape[axes[spec.name]] = batch
        if spec.dtype.startswith("float"):
            arrays[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        else:
            arrays[spec.name] = rng.integers(spec.low, spec.high, shape).astype(spec.dtype)
    return arrays


def torch_outputs(model: CorpusEntry | CorpusModel, inputs: Mapping[str, Any]) -> list[Any]:
    """The torch model's outputs on ``inputs`` (a ``seeded_inputs`` dict), flattened to arrays."""
    module = model.module()
    args = [torch.from_numpy(np.asarray(value)) for value in inputs.values()]
    with torch.no_grad():
        result = module(*args)
    flat = list(result) if isinstance(result, tuple | list) else [result]
    return [value.numpy() for value in flat]


def content_key(entry: CorpusEntry) -> str:
    """What an exported file depends on: this module's source and the exporting packages."""
    digest = hashlib.sha256(_SOURCE.read_bytes())
    for package in ("torch", "onnx", "onnxscript"):
        digest.update(f"{package}={_version(package)};".encode())
    digest.update(entry.name.encode())
    return digest.hexdigest()


def build_corpus(folder: Path, names: Sequence[str] | None = None) -> list[CorpusModel]:
    """Export every corpus model (or those ``names``) into ``folder``; returns them in order.

    A model whose ``<name>.key`` stamp holds its current ``content_key`` is kept as it is, so a
    second call on the same folder costs a few file reads.
    """
    folder.mkdir(parents=True, exist_ok=True)
    chosen = CORPUS if names is None else tuple(entry_named(name) for name in names)
    built = []
    for entry in chosen:
        path = folder / f"{entry.name}.onnx"
        stamp = folder / f"{entry.name}.key"
        key = content_key(entry)
        if not (path.exists() and stamp.exists() and stamp.read_text() == key):
            stamp.unlink(missing_ok=True)
            path.with_name(path.name + ".data").unlink(missing_ok=True)
            export(entry, path)
            stamp.write_text(key)
        built.append(CorpusModel(entry, path))
    return built


def entry_named(name: str) -> CorpusEntry:
    """The corpus entry called ``name``."""
    for entry in CORPUS:
        if entry.name == name:
            return entry
    raise KeyError(f"no corpus model named {name!r}")


def export(entry: CorpusEntry, path: Path) -> None:
    """Export ``entry`` to ``path`` with its exporter and options (quietly)."""
    module = entry.module()
    args = tuple(torch.from_numpy(np.asarray(value)) for value in seeded_inputs(entry).values())
    inputs = [spec.name for spec in entry.inputs]
    outputs = list(entry.outputs)
    with _quiet():
        if entry.exporter == "legacy":
            legacy: dict[str, Any] = dict(entry.options)
            if entry.dynamic_axes:
                legacy["dynamic_axes"] = {k: dict(v) for k, v in entry.dynamic_axes.items()}
            if entry.training:
                legacy["training"] = torch.onnx.TrainingMode.TRAINING
            torch.onnx.export(
                module,
                args,
                str(path),
                input_names=inputs,
                output_names=outputs,
                dynamo=False,
                **legacy,
            )
        else:
            dynamo: dict[str, Any] = dict(entry.options)
            if entry.dynamic_axes:
                dynamo["dynamic_shapes"] = _dynamic_shapes(entry)
            torch.onnx.export(
                module,
                args,
                str(path),
                input_names=inputs,
                output_names=outputs,
                dynamo=True,
                **dynamo,
            )


def _dynamic_shapes(entry: CorpusEntry) -> dict[str, dict[int, Any]]:
    dims: dict[str, Any] = {}
    shapes: dict[str, dict[int, Any]] = {}
    for spec in entry.inputs:
        axes = entry.dynamic_axes.get(spec.name, {})
        shapes[spec.name] = {
            axis: dims.setdefault(label, torch.export.Dim(label, max=1024))
            for axis, label in axes.items()
        }
    return shapes


@contextlib.contextmanager
def _quiet() -> Any:
    """Silence the exporters' progress lines, warnings and the torchvision notice."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _settle_batch_norms(module: nn.Module) -> None:
    """Give every batch norm non-trivial statistics and affine parameters, so folds matter."""
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for norm in module.modules():
            if not isinstance(norm, nn.modules.batchnorm._BatchNorm):
                continue
            size = norm.num_features
            for tensor, low in (
                (norm.running_mean, -0.5),
                (norm.running_var, 0.5),
                (norm.weight, 0.5),
                (norm.bias, -0.5),
            ):
                if tensor is not None:
                    tensor.copy_(torch.rand(size, generator=generator) + low)


# --- torchvision-style CNNs -------------------------------------------------------------------


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


class BasicBlock(nn.Module):
    """ResNet's BasicBlock: two 3x3 conv-BN, a projection shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, cout, 3, stride)
        self.conv2, self.bn2 = _conv_bn(cout, cout, 3)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = (
            nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else None
        )

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18's layout (7x7 stem, max pool, 4 stages of 2 BasicBlocks) at widths 8..64."""

    def __init__(self, widths: Sequence[int] = (8, 16, 32, 64), classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        cin = widths[0]
        for i, width in enumerate(widths):
            stride = 1 if i == 0 else 2
            stages.append(
                nn.Sequential(BasicBlock(cin, width, stride), BasicBlock(width, width, 1))
            )
            cin = width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SqueezeExcitation(nn.Module):
    """torchvision's SE block: pool, reduce, activate, expand, gate, scale."""

    def __init__(self, channels: int, squeeze: int, gate: type[nn.Module], act: type[nn.Module]):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = act()
        self.scale_activation = gate()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return x * self.scale_activation(scale)


class InvertedResidual(nn.Module):
    """MobileNetV3's block: expand 1x1, depthwise kxk, optional SE, project 1x1, residual."""

    def __init__(
        self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int
    ) -> None:
        super().__init__()
        act: type[nn.Module] = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [*_conv_bn(cin, exp, 1), act()]
        layers += [*_conv_bn(exp, exp, k, stride, groups=exp), act()]
        if se:
            layers.append(SqueezeExcitation(exp, _divisible(exp // 4), nn.Hardsigmoid, nn.ReLU))
        layers += _conv_bn(exp, cout, 1)
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return out + x if self.use_res else out


def _divisible(value: float, divisor: int = 8) -> int:
    return max(divisor, int(value + divisor / 2) // divisor * divisor)


class MobileNetV3(nn.Module):
    """MobileNetV3-Small's layout at a quarter of its widths: HardSwish, SE with HardSigmoid."""

    # kernel, expanded, out, SE, HardSwish, stride (mobilenet_v3_small's first six rows, narrower)
    CONFIG = (
        (3, 16, 16, True, False, 2),
        (3, 24, 16, False, False, 2),
        (3, 32, 16, False, False, 1),
        (5, 32, 24, True, True, 2),
        (5, 64, 24, True, True, 1),
        (5, 48, 32, True, True, 1),
    )

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 16, 3, 2), nn.Hardswish()]
        cin = 16
        for k, exp, cout, se, hs, stride in self.CONFIG:
            layers.append(InvertedResidual(cin, k, exp, cout, se, hs, stride))
            cin = cout
        layers += [*_conv_bn(cin, 96, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(96, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)


class MBConv(nn.Module):
    """EfficientNet's block: expand, depthwise, SE (SiLU, Sigmoid), project, residual."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        exp = cin * expand
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [*_conv_bn(cin, exp, 1), nn.SiLU()]
        layers += [*_conv_bn(exp, exp, k, stride, groups=exp), nn.SiLU()]
        layers.append(SqueezeExcitation(exp, max(1, cin // 4), nn.Sigmoid, nn.SiLU))
        layers += _conv_bn(exp, cout, 1)
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        return out + x if self.use_res else out


class EfficientNet(nn.Module):
    """EfficientNet-B0's layout (one block per stage, narrower): SiLU, depthwise convs, SE."""

    # expand ratio, kernel, stride, in, out (efficientnet_b0's stages, a few of them narrower)
    STAGES = (
        (1, 3, 1, 16, 8),
        (6, 3, 2, 8, 12),
        (6, 5, 2, 12, 16),
        (6, 3, 2, 16, 24),
        (6, 5, 1, 24, 24),
        (6, 5, 2, 24, 32),
        (6, 3, 1, 32, 40),
    )

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 16, 3, 2), nn.SiLU()]
        for expand, k, stride, cin, cout in self.STAGES:
            layers.append(MBConv(cin, cout, k, stride, expand))
        layers += [*_conv_bn(40, 128, 1), nn.SiLU()]
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class VGG(nn.Module):
    """A small VGG: conv-ReLU stacks and max pools, a 2x2 adaptive pool, ``x.view(x.size(0),
    -1)`` and the classifier's Linear-ReLU-Dropout pairs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in (8, None, 16, 16, None, 32, 32, None):  # None: a max pool
            if item is None:
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, item, 3, padding=1), nn.ReLU(inplace=True)]
                cin = item
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(cin * 4, 64),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(64, 64),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(64, classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        x = x.view(x.size(0), -1)
        return self.classifier(x)


class DenseLayer(nn.Module):
    """DenseNet's pre-activation bottleneck: BN-ReLU-Conv1x1-BN-ReLU-Conv3x3."""

    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[Tensor]) -> Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseBlock(nn.ModuleList):
    """Each layer reads the concatenation of every feature map before it."""

    def __init__(self, layers: int, cin: int, growth: int) -> None:
        super().__init__([DenseLayer(cin + i * growth, growth) for i in range(layers)])

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    """DenseNet-121's layout with 3 short blocks: concat, BN before conv, transitions."""

    def __init__(self, growth: int = 8, blocks: Sequence[int] = (3, 3, 3), classes: int = 10):
        super().__init__()
        width = 2 * growth
        layers: list[nn.Module] = [
            nn.Conv2d(3, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
        for i, count in enumerate(blocks):
            layers.append(DenseBlock(count, width, growth))
            width += count * growth
            if i != len(blocks) - 1:
                layers += [
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(width, width // 2, 1, bias=False),
                    nn.AvgPool2d(2, 2),
                ]
                width //= 2
        layers.append(nn.BatchNorm2d(width))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, classes)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.features(x))
        out = torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


class SmallCNN(nn.Module):
    """The plain CNN of the bridge tests: Conv-BN-ReLU, strided Conv, max pool, view, Dropout,
    Linear; BN stays a node when constant folding is off."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(256, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.relu(self.bn(self.c1(x)))
        x = self.pool(torch.relu(self.c2(x)))
        x = x.view(x.size(0), -1)
        return self.fc(self.drop(x))


class TrainCNN(nn.Module):
    """Conv-BN-ReLU twice, pool, Linear: exported in training mode, BN uses batch statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(3, 8, 3), nn.ReLU(), *_conv_bn(8, 16, 3, 2), nn.ReLU())
        self.fc = nn.Linear(16, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.body(x), 1), 1))


# --- sequence models -------------------------------------------------------------------------


class Encoder(nn.Module):
    """``nn.TransformerEncoder``: 2 post-norm layers (attention, LayerNorm, GELU feed-forward)
    and a final LayerNorm, then a Linear head."""

    def __init__(self, d_model: int = 32, heads: int = 4, classes: int = 8) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model, heads, 2 * d_model, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, 2, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder(x))


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one qkv Linear, heads by view/transpose, a causal mask built from
    positions and applied with ``masked_fill``."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        positions = torch.arange(t, device=x.device)
        future = positions.unsqueeze(0) > positions.unsqueeze(1)
        scores = scores.masked_fill(future, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GPT(nn.Module):
    """A one-block GPT: token and (cyclic) position embeddings, pre-norm attention and MLP
    residuals, final LayerNorm, LM head."""

    def __init__(self, vocab: int = 50, d_model: int = 32, heads: int = 4, context: int = 16):
        super().__init__()
        self.context = context
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device) % self.context
        x = self.wte(ids) + self.wpe(positions)
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


class LSTMHead(nn.Module):
    """A 2-layer LSTM (sequence first, as nn.LSTM's default) and a Linear on every step."""

    def __init__(self, bidirectional: bool = False) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=bidirectional)
        self.fc = nn.Linear(24 if bidirectional else 12, 4)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(x)
        return self.fc(out)


class GRUHead(nn.Module):
    """A batch-first GRU; returns a Linear on its outputs and its final hidden state."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        out, hidden = self.gru(x)
        return self.fc(out), hidden


class LSTMLastStep(nn.Module):
    """A batch-first LSTM classifying its last step (``y[:, -1]``): the export squeezes the
    direction axis and transposes the batch back to the front."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


# --- control flow ----------------------------------------------------------------------------


class ScriptedLoops(nn.Module):
    """A counted loop (trip count from an input) and a data-dependent while loop, for
    ``torch.jit.script``: the legacy exporter writes two ONNX Loops."""

    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Linear(8, 8)
        self.grow = nn.Linear(8, 8)

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        for _ in range(int(n)):
            x = torch.tanh(self.step(x))
        i = 0
        while bool(x.abs().sum() < 50.0) and i < 6:
            x = self.grow(x) * 1.5
            i += 1
        return x


class ScriptedBranch(nn.Module):
    """A data-dependent ``if`` for ``torch.jit.script``: the legacy exporter writes an If."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.relu(self.a(x)) if bool(x.mean() > 0.0) else torch.sigmoid(self.b(x)) * 2.0
        return y + x


class CondBranch(nn.Module):
    """``torch.cond`` on the data: the dynamo exporter writes an If with two subgraphs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cond(x.mean() > 0.0, self._then, self._else, (x,))

    def _then(self, x: Tensor) -> Tensor:
        return torch.relu(self.a(x)) + x

    def _else(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.b(x)) * 2.0 + x


# --- the odd ops ------------------------------------------------------------------------------


class UpsamplePad(nn.Module):
    """A small encoder-decoder: strided and grouped convs, nearest and bilinear Resize, Pad
    (reflect and constant), ConvTranspose followed by a BN (not folded), a skip concat."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(*_conv_bn(3, 16, 3, 2), nn.ReLU())
        self.grouped = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.fuse = nn.Conv2d(19, 8, 3)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.up_bn = nn.BatchNorm2d(8)
        self.out = nn.Conv2d(8, 4, 1)

    def forward(self, x: Tensor) -> Tensor:
        d = self.grouped(self.down(x))
        u = F.interpolate(d, scale_factor=2.0, mode="nearest")
        u = F.pad(torch.cat([u, x], 1), (1, 1, 1, 1), mode="reflect")
        u = torch.relu(self.fuse(u))
        u = F.relu6(self.up_bn(self.up(u)))
        u = F.interpolate(u, size=(20, 20), mode="bilinear", align_corners=False)
        return self.out(F.pad(u, (0, 1, 0, 1), value=0.5))


class OpsMix(nn.Module):
    """Elementwise chains, slicing, Gather indexing, Split, Softmax/LogSoftmax, Clip/ReLU6,
    reductions, Transpose and Flatten: the small ops between the big ones."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(6, 6, 1)
        self.fc = nn.Linear(6, 5)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        x = self.conv(x)
        a, b, c = torch.split(x, [2, 2, 2], dim=1)
        a = F.softmax(a, dim=1) + F.log_softmax(b, dim=1)
        c = torch.clamp(c, -0.5, 0.5) + F.relu6(c * 3.0)
        chain = torch.sqrt(torch.abs(x * 0.5 + 1.0)) - torch.exp(-x.abs()) / (x.pow(2) + 1.0)
        chain = torch.where(x > 0, chain, 0.1 * chain)
        sliced = x[:, 1:5, ::2, 1:-1].flatten(2)
        picked = x[:, 0] + x[:, -1, 3].unsqueeze(1)
        pooled = chain.mean(dim=(2, 3)) + chain.amax(dim=(2, 3))
        scores = self.fc(pooled.permute(1, 0).t())
        return torch.cat([a, c], 1), sliced, picked.transpose(1, 2), torch.tanh(scores)


class DetectHead(nn.Module):
    """A YOLO-style head: conv, view to anchors x (5 + classes), permute, sigmoid, a grid from
    ``meshgrid(arange(H), arange(W))`` and anchor scaling, flattened predictions."""

    anchor_grid: Tensor

    def __init__(self, anchors: int = 3, classes: int = 4, stride: float = 8.0) -> None:
        super().__init__()
        self.anchors, self.outputs, self.stride = anchors, 5 + classes, stride
        self.backbone = nn.Sequential(*_conv_bn(3, 16, 3, 2), nn.SiLU(), *_conv_bn(16, 16, 3, 2))
        self.head = nn.Conv2d(16, anchors * self.outputs, 1)
        self.register_buffer(
            "anchor_grid", torch.tensor([[10.0, 13.0], [16.0, 30.0], [33.0, 23.0]])
        )

    def forward(self, x: Tensor) -> Tensor:
        p = self.head(F.silu(self.backbone(x)))
        b, _, h, w = p.shape
        p = p.view(b, self.anchors, self.outputs, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((xs, ys), 2).view(1, 1, h, w, 2).float()
        xy = (p[..., :2] * 2.0 - 0.5 + grid) * self.stride
        wh = (p[..., 2:4] * 2.0) ** 2 * self.anchor_grid.view(1, self.anchors, 1, 1, 2)
        return torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.outputs)


class HandWritten(nn.Module):
    """What model code writes by hand where one op would do: the input normalised by a
    per-channel scale before the stem conv, ``F.pad`` before an average pool that leaves
    padding out, a layer scale times a constant, an activation applied twice, a global average
    pool as two means, and a LayerNorm written out over the last dim (as custom modules do)."""

    inv_std: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_std", torch.tensor([4.0, 4.5, 5.0]).view(1, 3, 1, 1))
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(8, 1, 1) + 0.5)
        self.fc = nn.Linear(8, 16)
        self.gamma = nn.Parameter(torch.rand(16) + 0.5)
        self.beta = nn.Parameter(torch.rand(16) - 0.5)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x * self.inv_std)
        x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1)), 3, 1, count_include_pad=False)
        x = F.relu(F.relu(x * self.scale * 0.5))
        x = self.fc(x.mean(3).mean(2))
        mean = x.mean(-1, keepdim=True)
        centred = x - mean
        variance = centred.pow(2).mean(-1, keepdim=True)
        return centred / torch.sqrt(variance + 1e-5) * self.gamma + self.beta


# --- the registry -----------------------------------------------------------------------------

_IMAGE = (InputSpec("x", (1, 3, 64, 64)),)
_IMAGE32 = (InputSpec("x", (1, 3, 32, 32)),)
_BATCH = {"x": {0: "batch"}, "y": {0: "batch"}}


def _pair(
    name: str, builder: Callable[[], nn.Module], inputs: tuple[InputSpec, ...], **kwargs: Any
) -> tuple[CorpusEntry, CorpusEntry]:
    """The same model exported by both exporters, named ``<name>_legacy`` and ``<name>_dynamo``."""
    return (
        CorpusEntry(f"{name}_legacy", "legacy", inputs, builder, **kwargs),
        CorpusEntry(f"{name}_dynamo", "dynamo", inputs, builder, **kwargs),
    )


CORPUS: tuple[CorpusEntry, ...] = (
    *_pair("resnet18", ResNet18, _IMAGE),
    *_pair("mobilenetv3", MobileNetV3, _IMAGE),
    *_pair("efficientnet", EfficientNet, _IMAGE),
    *_pair("vgg", VGG, _IMAGE32),
    *_pair("densenet", DenseNet, _IMAGE),
    *_pair("transformer_encoder", Encoder, (InputSpec("x", (2, 8, 32)),)),
    *_pair(
        "gpt_block",
        GPT,
        (InputSpec("ids", (2, 8), "int64", high=50),),
        dynamic_axes={"ids": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
    ),
    *_pair("lstm2", LSTMHead, (InputSpec("x", (5, 2, 8)),)),
    *_pair(
        "gru",
        GRUHead,
        (InputSpec("x", (2, 5, 8)),),
        outputs=("y", "h"),
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}, "h": {1: "batch"}},
    ),
    CorpusEntry("bilstm_legacy", "legacy", (InputSpec("x", (5, 2, 8)),), lambda: LSTMHead(True)),
    CorpusEntry(
        "scripted_loop_legacy",
        "legacy",
        (InputSpec("x", (2, 8)), InputSpec("n", (), "int64", low=1, high=5)),
        ScriptedLoops,
        script=True,
    ),
    CorpusEntry(
        "scripted_if_legacy", "legacy", (InputSpec("x", (2, 8)),), ScriptedBranch, script=True
    ),
    CorpusEntry("cond_dynamo", "dynamo", (InputSpec("x", (2, 8)),), CondBranch),
    CorpusEntry(
        "vgg_legacy_dynbatch",
        "legacy",
        (InputSpec("x", (2, 3, 32, 32)),),
        VGG,
        dynamic_axes=_BATCH,
    ),
    CorpusEntry(
        "resnet18_dynamo_dynbatch",
        "dynamo",
        (InputSpec("x", (2, 3, 64, 64)),),
        ResNet18,
        dynamic_axes=_BATCH,
    ),
    CorpusEntry(
        "smallcnn_legacy_unfolded",
        "legacy",
        (InputSpec("x", (1, 3, 16, 16)),),
        SmallCNN,
        options={"do_constant_folding": False},
        # A batch norm as constructed: the exporter writes its equal initializers once and
        # the others as Identity nodes of it, as in an export straight after construction.
        fresh_norms=True,
    ),
    CorpusEntry(
        "smallcnn_dynamo_unoptimized",
        "dynamo",
        (InputSpec("x", (1, 3, 16, 16)),),
        SmallCNN,
        options={"optimize": False},
    ),
    CorpusEntry(
        "traincnn_legacy_training",
        "legacy",
        (InputSpec("x", (2, 3, 16, 16)),),
        TrainCNN,
        training=True,
    ),
    CorpusEntry(
        "mobilenetv3_legacy_opset11", "legacy", _IMAGE, MobileNetV3, options={"opset_version": 11}
    ),
    CorpusEntry(
        "transformer_encoder_legacy_opset14",
        "legacy",
        (InputSpec("x", (2, 8, 32)),),
        Encoder,
        options={"opset_version": 14},
    ),
    *_pair("upsample_pad", UpsamplePad, (InputSpec("x", (1, 3, 20, 20)),)),
    *_pair(
        "ops_mix",
        OpsMix,
        (InputSpec("x", (1, 6, 8, 8)),),
        outputs=("y", "sliced", "picked", "scores"),
    ),
    CorpusEntry("lstm_last_step_legacy", "legacy", (InputSpec("x", (1, 5, 8)),), LSTMLastStep),
    CorpusEntry(
        "transformer_encoder_legacy_dynbatch",
        "legacy",
        (InputSpec("x", (2, 8, 32)),),
        Encoder,
        dynamic_axes=_BATCH,
    ),
    CorpusEntry(
        "detect_head_legacy_dynbatch",
        "legacy",
        (InputSpec("x", (2, 3, 32, 32)),),
        DetectHead,
        dynamic_axes=_BATCH,
    ),
    CorpusEntry("detect_head_dynamo", "dynamo", _IMAGE32, DetectHead),
    *_pair("hand_written", HandWritten, (InputSpec("x", (1, 3, 16, 16)),)),
)

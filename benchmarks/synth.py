"""Synthetic Caffe2 net pairs (predict_net, init_net) for benchmarks and property tests.

``make_synthetic_pair(num_ops, seed)`` builds a well-formed predict_net of exactly ``num_ops``
ops and the init_net that fills its parameters, with the patterns the export passes look at:

* Conv -> SpatialBN -> Relu chains (Relu in place), residual blocks (``Sum`` of two branches),
  inception-like blocks (``Concat`` of two convolutions), max pooling;
* ``CopyCPUToGPU -> CopyGPUToCPU`` round trips whose reverse copy feeds one or two consumers,
  and some whose forward copy also feeds a GPU op (not fusable);
* reshape-before-FC heads as PyTorch's ONNX export writes ``x.view(x.size(0), -1)``:
  ``Shape -> Gather(indices param) -> ExpandDims -> Concat(with a [-1] param) -> Reshape -> FC``;
  the head outputs are summed (in place) into ``head_sum``;
* dead branches: ops whose outputs no live op reads.

Every block keeps the trunk tensor at shape ``(1, 2, 2, 2)``, so the nets also run on a
numeric executor; parameter tensors are tiny (this is about graph size). Ops carry the args
Caffe2 exports write (``order``, ``kernel``, ``stride``, ``pad``, ...), about 90 bytes per op.
Nets of at least 40 ops contain every feature: the first blocks go through each kind once,
later blocks are drawn at random. Generation is linear in ``num_ops`` and deterministic for a
seed.

Run ``python benchmarks/synth.py N OUTDIR [--seed S]`` to write ``predict_net.pb`` and
``init_net.pb``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from graphtools.proto import caffe2_pb2

CHANNELS = 2
SPATIAL = 2
HEAD_CLASSES = 2
DATA = "data"
OUTPUT = "prob"
HEAD_SUM = "head_sum"

_CUDA = caffe2_pb2.DeviceOption(device_type=1, device_id=0)
_POOL_SIZE = 4096


def _arg(name: str, value: int | float | str | Sequence[int]) -> caffe2_pb2.Argument:
    if isinstance(value, str):
        return caffe2_pb2.Argument(name=name, s=value.encode())
    if isinstance(value, float):
        return caffe2_pb2.Argument(name=name, f=value)
    if isinstance(value, int):
        return caffe2_pb2.Argument(name=name, i=value)
    return caffe2_pb2.Argument(name=name, ints=list(value))


def _template(
    op_type: str, args: Sequence[caffe2_pb2.Argument] = (), *, gpu: bool = False
) -> caffe2_pb2.OperatorDef:
    """An op without inputs and outputs; ops are stamped from these (one C-level copy each)."""
    op = caffe2_pb2.OperatorDef(type=op_type, arg=args)
    if gpu:
        op.device_option.CopyFrom(_CUDA)
    return op


_NCHW = _arg("order", "NCHW")
_CONV = {
    kernel: _template(
        "Conv", [_NCHW, _arg("kernel", kernel), _arg("stride", 1), _arg("pad", kernel // 2)]
    )
    for kernel in (1, 3)
}
_SPATIAL_BN = _template("SpatialBN", [_arg("is_test", 1), _arg("epsilon", 1e-5), _NCHW])
_RELU = _template("Relu")
_RELU_GPU = _template("Relu", gpu=True)
_SUM = _template("Sum")
_MAX_POOL = _template("MaxPool", [_NCHW, _arg("kernel", 3), _arg("stride", 1), _arg("pad", 1)])
_CONCAT_CHANNELS = _template("Concat", [_arg("axis", 1), _NCHW])
_CONCAT_AXIS0 = _template("Concat", [_arg("axis", 0)])
_TO_GPU = _template("CopyCPUToGPU", gpu=True)
_TO_CPU = _template("CopyGPUToCPU", gpu=True)
_SHAPE = _template("Shape")
_GATHER = _template("Gather")
_EXPAND_DIMS = _template("ExpandDims", [_arg("dims", [0])])
_RESHAPE = _template("Reshape")
_FC = _template("FC", [_arg("axis", 1)])
_SIGMOID = _template("Sigmoid")
_MUL = _template("Mul")
_SOFTMAX = _template("Softmax", [_arg("axis", 1)])
_SCALAR_ZERO = _template(
    "GivenTensorInt64Fill", [_arg("shape", []), caffe2_pb2.Argument(name="values", ints=[0])]
)
_MINUS_ONE = _template(
    "GivenTensorInt64Fill", [_arg("shape", [1]), caffe2_pb2.Argument(name="values", ints=[-1])]
)


class _Builder:
    """Appends blocks to a predict_net and the fills of their parameters to an init_net."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.predict = caffe2_pb2.NetDef(name="synthetic_predict")
        self.init = caffe2_pb2.NetDef(name="synthetic_init")
        self.predict.external_input.append(DATA)
        self.pool = [round(rng.uniform(-1.0, 1.0), 3) for _ in range(_POOL_SIZE)]
        self.pool_at = 0
        # Fills repeat (few shapes, values cut from a fixed pool): build each template once.
        self.fills: dict[tuple[tuple[int, ...], int, bool], caffe2_pb2.OperatorDef] = {}
        self.layer = 0
        self.head_sum: str | None = None

    # -- primitives -----------------------------------------------------------------------

    def op(
        self, template: caffe2_pb2.OperatorDef, inputs: Sequence[str], outputs: Sequence[str]
    ) -> None:
        op = self.predict.op.add()
        op.CopyFrom(template)
        op.input.extend(inputs)
        op.output.extend(outputs)

    def param(self, name: str, shape: tuple[int, ...], *, positive: bool = False) -> str:
        start = self.pool_at
        count = math.prod(shape)
        self.pool_at = (start + count) % _POOL_SIZE
        key = (shape, start, positive)
        template = self.fills.get(key)
        if template is None:
            values = (self.pool + self.pool[:count])[start : start + count]
            if positive:
                values = [abs(v) + 0.5 for v in values]
            values_arg = caffe2_pb2.Argument(name="values", floats=values)
            template = _template("GivenTensorFill", [_arg("shape", shape), values_arg])
            self.fills[key] = template
        return self.filled(name, template)

    def filled(self, name: str, template: caffe2_pb2.OperatorDef) -> str:
        fill = self.init.op.add()
        fill.CopyFrom(template)
        fill.output.append(name)
        self.predict.external_input.append(name)
        self.init.external_output.append(name)
        return name

    def new_layer(self, prefix: str) -> str:
        self.layer += 1
        return f"{prefix}{self.layer}"

    def conv(self, x: str, out: str, kernel: int, in_channels: int = CHANNELS) -> None:
        w = self.param(f"{out}_w", (CHANNELS, in_channels, kernel, kernel))
        b = self.param(f"{out}_b", (CHANNELS,))
        self.op(_CONV[kernel], [x, w, b], [out])

    def bn(self, x: str, out: str) -> None:
        scale = self.param(f"{x}_bn_s", (CHANNELS,))
        bias = self.param(f"{x}_bn_b", (CHANNELS,))
        mean = self.param(f"{x}_bn_rm", (CHANNELS,))
        var = self.param(f"{x}_bn_riv", (CHANNELS,), positive=True)
        self.op(_SPATIAL_BN, [x, scale, bias, mean, var], [out])

    def kernel(self) -> int:
        return 3 if self.rng.random() < 0.25 else 1

    # -- blocks: each takes the trunk blob and returns the new one --------------------------

    def conv_bn_relu(self, x: str) -> str:
        name = self.new_layer("conv")
        self.conv(x, name, self.kernel())
        self.bn(name, f"{name}_bn")
        self.op(_RELU, [f"{name}_bn"], [f"{name}_bn"])
        return f"{name}_bn"

    def residual(self, x: str) -> str:
        name = self.new_layer("res")
        self.conv(x, name, self.kernel())
        self.bn(name, name)
        self.op(_SUM, [name, x], [f"{name}_sum"])
        self.op(_RELU, [f"{name}_sum"], [f"{name}_sum"])
        return f"{name}_sum"

    def inception(self, x: str) -> str:
        name = self.new_layer("inc")
        self.conv(x, f"{name}_1x1", 1)
        self.conv(x, f"{name}_3x3", 3)
        self.op(
            _CONCAT_CHANNELS,
            [f"{name}_1x1", f"{name}_3x3"],
            [f"{name}_cat", f"{name}_cat_split"],
        )
        self.conv(f"{name}_cat", f"{name}_proj", 1, in_channels=2 * CHANNELS)
        self.op(_RELU, [f"{name}_proj"], [f"{name}_proj"])
        return f"{name}_proj"

    def pool(self, x: str) -> str:
        name = self.new_layer("pool")
        self.op(_MAX_POOL, [x], [name])
        return name

    def copy_round_trip(self, x: str) -> str:
        """Fusable pair; the reverse copy feeds one consumer."""
        name = self.new_layer("copy")
        self.op(_TO_GPU, [x], [f"{name}_gpu"])
        self.op(_TO_CPU, [f"{name}_gpu"], [f"{name}_cpu"])
        self.op(_RELU, [f"{name}_cpu"], [f"{name}_relu"])
        return f"{name}_relu"

    def copy_round_trip_two_consumers(self, x: str) -> str:
        """Fusable pair; the reverse copy's output is read by two ops."""
        name = self.new_layer("copy")
        self.op(_TO_GPU, [x], [f"{name}_gpu"])
        self.op(_TO_CPU, [f"{name}_gpu"], [f"{name}_cpu"])
        self.op(_RELU, [f"{name}_cpu"], [f"{name}_relu"])
        self.op(_SUM, [f"{name}_relu", f"{name}_cpu"], [f"{name}_sum"])
        return f"{name}_sum"

    def copy_with_gpu_consumer(self, x: str) -> str:
        """A pair whose forward copy also feeds a GPU op, so it must not be fused."""
        name = self.new_layer("copy")
        self.op(_TO_GPU, [x], [f"{name}_gpu"])
        self.op(_TO_CPU, [f"{name}_gpu"], [f"{name}_cpu"])
        self.op(_RELU_GPU, [f"{name}_gpu"], [f"{name}_gpu_relu"])
        self.op(_TO_CPU, [f"{name}_gpu_relu"], [f"{name}_relu_cpu"])
        self.op(_SUM, [f"{name}_cpu", f"{name}_relu_cpu"], [f"{name}_sum"])
        return f"{name}_sum"

    def reshape_head(self, x: str) -> str:
        """``FC(x.view(x.size(0), -1))`` as exported through ONNX; the trunk goes on unchanged."""
        name = self.new_layer("head")
        index = self.filled(f"{name}_index", _SCALAR_ZERO)
        minus_one = self.filled(f"{name}_minus1", _MINUS_ONE)
        self.op(_SHAPE, [x], [f"{name}_shape"])
        self.op(_GATHER, [f"{name}_shape", index], [f"{name}_dim0"])
        self.op(_EXPAND_DIMS, [f"{name}_dim0"], [f"{name}_dim0_1d"])
        self.op(
            _CONCAT_AXIS0,
            [f"{name}_dim0_1d", minus_one],
            [f"{name}_new_shape", f"{name}_split"],
        )
        self.op(_RESHAPE, [x, f"{name}_new_shape"], [f"{name}_flat", f"{name}_old_shape"])
        w = self.param(f"{name}_fc_w", (HEAD_CLASSES, CHANNELS * SPATIAL * SPATIAL))
        b = self.param(f"{name}_fc_b", (HEAD_CLASSES,))
        self.op(_FC, [f"{name}_flat", w, b], [f"{name}_fc"])
        if self.head_sum is None:
            self.head_sum = f"{name}_fc"
        else:
            self.op(_SUM, [self.head_sum, f"{name}_fc"], [HEAD_SUM])
            self.head_sum = HEAD_SUM
        return x

    def dead_sigmoid_mul(self, x: str) -> str:
        name = self.new_layer("dead")
        self.op(_SIGMOID, [x], [f"{name}_sig"])
        self.op(_MUL, [f"{name}_sig", x], [f"{name}_gated"])
        return x

    def dead_shape(self, x: str) -> str:
        name = self.new_layer("dead")
        self.op(_SHAPE, [x], [f"{name}_shape"])
        return x

    def dead_conv_relu(self, x: str) -> str:
        name = self.new_layer("dead")
        self.conv(x, name, 1)
        self.op(_RELU, [name], [name])
        return x


_Block = Callable[[_Builder, str], str]

# (block, number of ops it adds, weight in the random draw). Heads add one op less the first
# time (no Sum yet); the size below is the upper bound the budget reserves.
_BLOCKS: list[tuple[_Block, int, float]] = [
    (_Builder.conv_bn_relu, 3, 30.0),
    (_Builder.residual, 4, 15.0),
    (_Builder.copy_round_trip, 3, 1.0),
    (_Builder.copy_round_trip_two_consumers, 4, 1.0),
    (_Builder.copy_with_gpu_consumer, 5, 1.0),
    (_Builder.reshape_head, 7, 1.5),
    (_Builder.dead_sigmoid_mul, 2, 1.0),
    (_Builder.dead_shape, 1, 1.0),
    (_Builder.dead_conv_relu, 2, 1.0),
    (_Builder.inception, 5, 5.0),
    (_Builder.pool, 1, 5.0),
]


def make_synthetic_pair(num_ops: int, seed: int = 0) -> tuple[caffe2_pb2.NetDef, caffe2_pb2.NetDef]:
    """Build ``(predict_net, init_net)`` with exactly ``num_ops`` predict ops.

    The predict_net reads ``data`` (shape ``(1, 2, 2, 2)``) and the parameters, all declared as
    external inputs and filled by the init_net (whose external outputs list them); its external
    outputs are ``prob`` (a Softmax of the trunk) and ``head_sum`` when the net has a head.

    Raises:
        ValueError: when ``num_ops`` is less than 1.
    """
    if num_ops < 1:
        raise ValueError(f"num_ops must be at least 1, got {num_ops}")
    rng = random.Random(seed)
    builder = _Builder(rng)
    blocks = [block for block, _, _ in _BLOCKS]
    sizes = {block: size for block, size, _ in _BLOCKS}
    cumulative = list(itertools.accumulate(weight for _, _, weight in _BLOCKS))
    trunk = DATA
    budget = num_ops - 1  # the final Softmax
    first_round = iter(blocks)
    while True:
        block = next(first_round, None) or rng.choices(blocks, cum_weights=cumulative)[0]
        if sizes[block] > budget - len(builder.predict.op):
            break
        trunk = block(builder, trunk)
    while len(builder.predict.op) < budget:
        builder.op(_RELU, [trunk], [trunk])
    builder.op(_SOFTMAX, [trunk], [OUTPUT])
    builder.predict.external_output.append(OUTPUT)
    if builder.head_sum is not None:
        builder.predict.external_output.append(builder.head_sum)
    return builder.predict, builder.init


def write_pair(
    predict_net: caffe2_pb2.NetDef, init_net: caffe2_pb2.NetDef, outdir: str | Path
) -> tuple[Path, Path]:
    """Write ``predict_net.pb`` and ``init_net.pb`` (binary) into ``outdir``; returns the paths."""
    folder = Path(outdir)
    folder.mkdir(parents=True, exist_ok=True)
    predict_path = folder / "predict_net.pb"
    init_path = folder / "init_net.pb"
    predict_path.write_bytes(predict_net.SerializeToString())
    init_path.write_bytes(init_net.SerializeToString())
    return predict_path, init_path


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: ``synth.py N OUTDIR [--seed S]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("num_ops", type=int, help="number of ops in the predict_net")
    parser.add_argument("outdir", type=Path, help="folder for predict_net.pb and init_net.pb")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    predict_net, init_net = make_synthetic_pair(options.num_ops, options.seed)
    for path in write_pair(predict_net, init_net, options.outdir):
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

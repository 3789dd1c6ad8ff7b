"""Made-up parameters: random values of the shapes ``analysis.channels.param_spec`` gives, and
the float view of a net that spells quantized and fused ops as the float ops they plan as."""

from __future__ import annotations

from collections.abc import Mapping
from math import sqrt

import numpy as np

from graphtools.analysis.channels import ParamSpec, param_spec
from graphtools.feeds.values import check_size
from graphtools.ir import Net, Op

__all__ = ["FLOAT_TYPES", "ParamMaker", "float_view"]

#: Quantized and fused op types planned and given parameters as their float op.
FLOAT_TYPES: dict[str, str] = {
    "ConvRelu": "Conv",
    "Int8Conv": "Conv",
    "Int8ConvRelu": "Conv",
    "Int8ConvTranspose": "ConvTranspose",
    "Int8FC": "FC",
    "FbFCPacked": "FC",
    "Int8Sum": "Sum",
    "Int8SumRelu": "Sum",
    "Int8Add": "Add",
    "Int8Relu": "Relu",
    "Int8MaxPool": "MaxPool",
    "Int8AveragePool": "AveragePool",
    "Int8Softmax": "Softmax",
    "Int8ResizeNearest": "ResizeNearest",
    "Int8Quantize": "Copy",
    "Int8Dequantize": "Copy",
}


def float_view(net: Net) -> Net:
    """``net`` with its quantized and fused op types spelt as their float ops (for planning
    channel counts and parameter shapes); ``net`` itself when it has none."""
    if not any(op.type in FLOAT_TYPES for op in net):
        return net
    ops = [op.replace(type=FLOAT_TYPES[op.type]) if op.type in FLOAT_TYPES else op for op in net]
    return Net(ops, net.external_inputs, net.external_outputs, name=net.name)


class ParamMaker:
    """Random values for the parameter shapes of ``analysis.channels.param_spec``."""

    def __init__(self, rng: np.random.Generator, counts: Mapping[int, int], channels: int) -> None:
        self.rng = rng
        self.counts = counts
        self.channels = channels

    def weight(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        """Normal values with std ``1/sqrt(fan_in)``."""
        std = 1.0 / sqrt(max(fan_in, 1))
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def value(self, spec: ParamSpec) -> np.ndarray:
        """Random values of the shape and kind ``spec`` says."""
        if spec.init == "weight":
            return self.weight(spec.shape, spec.fan_in)
        if spec.init == "positive":
            return self.rng.uniform(0.5, 1.5, spec.shape).astype(np.float32)
        if spec.init == "slope":
            return self.rng.uniform(0.0, 0.3, spec.shape).astype(np.float32)
        return (self.rng.standard_normal(spec.shape) * 0.1).astype(np.float32)

    def make(self, index: int, op: Op, position: int, x: np.ndarray) -> np.ndarray | None:
        """The value of input ``position`` of op #``index``, or ``None`` when no rule applies.

        Raises:
            MadeUpDataTooLargeError: the shape is over ``values.MAX_MADE_VALUES``.
        """
        spec = param_spec(op, index, position, tuple(x.shape), self.counts, self.channels)
        if spec is None:
            return None
        check_size(op.inputs[position], spec.shape, f"a parameter of op #{index} ({op.type})")
        return self.value(spec)

"""The kernel registry: op type -> numpy function, filled by ``@kernel`` in the family modules."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.executor.workspace import Workspace
from graphtools.ir import DeviceOption, Op

__all__ = ["KERNELS", "Kernel", "OpContext", "kernel"]

KernelFn = Callable[..., Sequence[Any]]


@dataclass(frozen=True)
class Kernel:
    """A registered kernel; ``needs_context`` kernels are called ``fn(op, inputs, ctx)``;
    ``floats``: Caffe2 registers the op for float tensors only, and refuses another first
    input (numpy would compute something else on integers: a Softmax of zeros)."""

    fn: KernelFn
    needs_context: bool = False
    floats: bool = False


KERNELS: dict[str, Kernel] = {}


def kernel(
    *op_types: str, context: bool = False, floats: bool = False
) -> Callable[[KernelFn], KernelFn]:
    """Register the decorated function as the kernel of every type in ``op_types``.

    The function gets the IR ``Op`` and the list of input values (plus an ``OpContext`` when
    ``context`` is true) and returns the list of output values, at least one per op output.
    ``floats``: the interpreter refuses a first input that is not floating point, as Caffe2
    does for ops it registers for ``float`` only.
    """

    def register(fn: KernelFn) -> KernelFn:
        for op_type in op_types:
            if op_type in KERNELS:
                raise ValueError(f"a kernel for {op_type!r} is already registered")
            KERNELS[op_type] = Kernel(fn, context, floats)
        return fn

    return register


@dataclass(frozen=True)
class OpContext:
    """What a context kernel may use besides its inputs: where it runs and how to seed."""

    workspace: Workspace
    op_index: int
    net_name: str | None
    device_option: DeviceOption | None

    def rng(self, op: Op, key: str | None = None) -> np.random.Generator:
        """A generator seeded by the op's ``random_seed`` (else the workspace seed) and ``key``,
        by default its output's name.

        Mixing in the output name keeps two fills with one seed different, and makes each fill
        independent of the order in which ops run. A draw Caffe2 makes once per workspace,
        whatever op makes it, passes its own ``key`` (the blob it is cached in): renaming the
        op's output (as the ONNX export's SSA names do) then draws the same values.
        """
        device = self.device_option
        seed = self.workspace.seed
        if device is not None and device.random_seed is not None:
            seed = device.random_seed
        if key is None:
            key = op.outputs[0] if op.outputs else op.type
        return np.random.default_rng([seed, zlib.crc32(key.encode())])

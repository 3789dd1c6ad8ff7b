"""The interpreter: runs a Net op by op over a Workspace, the way jax's ``eval_jaxpr`` does.

For each op it reads the inputs from the workspace, binds the registered kernel to the op and
the input values, and writes the outputs back by name (Caffe2 nets overwrite blobs in place).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphtools._core import CAFFE2, DIALECT_NAMES
from graphtools.errors import (
    ExecutionError,
    GraphToolsError,
    InvalidNetError,
    PreconditionError,
    UnsupportedOpError,
)
from graphtools.executor.registry import KERNELS, OpContext
from graphtools.executor.workspace import Int8Tensor, Workspace
from graphtools.ir import Model, Net, Op, expect_model
from graphtools.printer import describe_net

__all__ = ["ExecutionError", "run_model", "run_net", "run_op"]

# Errors numpy and the kernels raise on bad shapes or arguments; wrapped with the op's location.
_KERNEL_FAILURES = (ValueError, IndexError, TypeError, ArithmeticError, KeyError)


def _where(index: int, op: Op, net_name: str | None) -> str:
    net = f" in net {net_name!r}" if net_name else ""
    return f"op #{index} ({op.type}){net}"


def _shape(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, Int8Tensor | np.ndarray):
        return tuple(value.shape)
    return None


def _describe_inputs(op: Op, values: list[Any]) -> str:
    parts = []
    for name, value in zip(op.inputs, values, strict=False):
        if isinstance(value, Int8Tensor):
            parts.append(f"{name}: int8{list(value.shape)}")
        elif isinstance(value, np.ndarray):
            parts.append(f"{name}: {value.dtype}{list(value.shape)}")
        else:
            parts.append(f"{name}: {type(value).__name__}")
    return ", ".join(parts)


def run_op(op: Op, workspace: Workspace, *, index: int = 0, net: Net | None = None) -> None:
    """Run one op: read its inputs from ``workspace``, call its kernel, write its outputs.

    Args:
        op: the op.
        workspace: where the inputs are read and the outputs written.
        index: the op's position in ``net`` (used in error messages).
        net: the net holding the op (its name goes in error messages, its DeviceOption
            applies to ops without their own).

    Raises:
        UnsupportedOpError: no kernel is registered for ``op.type``, or the kernel does not
            handle the op's arguments.
        ExecutionError: an input blob is missing, or the kernel failed on the inputs.
    """
    net_name = None if net is None else net.name
    entry = KERNELS.get(op.type)
    if entry is None:
        raise UnsupportedOpError(
            f"{_where(index, op, net_name)}: no executor kernel for op type {op.type!r}; "
            "register one with @graphtools.executor.kernel"
        )
    values: list[Any] = []
    for name in op.inputs:
        if not workspace.has(name):
            raise ExecutionError(
                f"{_where(index, op, net_name)} reads blob {name!r}, which no earlier op wrote "
                "and no feed provided",
                op_index=index,
                op_type=op.type,
                net_name=net_name,
            )
        values.append(workspace.fetch(name))
    if entry.floats and values:
        dtype = getattr(values[0], "dtype", None)
        if dtype is not None and dtype.kind != "f":
            raise ExecutionError(
                f"{_where(index, op, net_name)}: Caffe2 runs {op.type} on float tensors only; "
                f"input {op.inputs[0]!r} holds {dtype}",
                op_index=index,
                op_type=op.type,
                net_name=net_name,
            )
    try:
        if entry.needs_context:
            device = op.device_option if net is None else net.op_device(op)
            ctx = OpContext(workspace, index, net_name, device)
            results = entry.fn(op, values, ctx)
        else:
            results = entry.fn(op, values)
    except UnsupportedOpError as exc:
        raise UnsupportedOpError(f"{_where(index, op, net_name)}: {exc}") from exc
    except (*_KERNEL_FAILURES, GraphToolsError) as exc:
        shapes = {name: _shape(v) for name, v in zip(op.inputs, values, strict=False)}
        described = f" (inputs: {_describe_inputs(op, values)})" if op.inputs else ""
        if isinstance(exc, IndexError) and not isinstance(exc, np.exceptions.AxisError):
            # a kernel reading an input or output the op lacks (an axis out of range is not)
            counted = f"{len(op.inputs)} input(s) and {len(op.outputs)} output(s)"
            described += f"; the op lists {counted}: does {op.type} take more?"
        raise ExecutionError(
            f"{_where(index, op, net_name)} failed: {exc}{described}",
            op_index=index,
            op_type=op.type,
            net_name=net_name,
            input_shapes=shapes,
        ) from exc
    if len(results) < len(op.outputs):
        raise ExecutionError(
            f"{_where(index, op, net_name)}: the kernel produced {len(results)} outputs, "
            f"the op names {len(op.outputs)}",
            op_index=index,
            op_type=op.type,
            net_name=net_name,
        )
    for name, value in zip(op.outputs, results, strict=False):
        workspace.feed(name, value)


def run_net(net: Net, workspace: Workspace) -> None:
    """Run every op of ``net`` in order over ``workspace`` (inputs must already be there).

    Raises:
        PreconditionError: ``net`` is an ONNX graph (this executor runs Caffe2's ops).
    """
    _refuse_onnx(net)
    for index, op in enumerate(net):
        run_op(op, workspace, index=index, net=net)


def _refuse_onnx(net: Net) -> None:
    if net.dialect != CAFFE2:
        raise PreconditionError(
            f"the reference executor runs Caffe2 nets, and {describe_net(net, 'graph')} is "
            f"{DIALECT_NAMES[net.dialect]}: run it on onnxruntime "
            "(graphtools.onnx.runtime.run_model; compare models with "
            "graphtools.onnx.compare_with_onnxruntime or the pytest plugin)"
        )


def _free_inputs(net: Net) -> list[str]:
    """Blobs ``net`` reads before any of its ops writes them, in first-read order."""
    written: set[str] = set()
    free: dict[str, None] = {}
    for op in net:
        for name in op.inputs:
            if name not in written:
                free[name] = None
        written.update(op.outputs)
    return list(free)


def run_model(
    model: Model,
    feeds: Mapping[str, Any],
    *,
    workspace: Workspace | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Run ``model`` the way a Caffe2 predictor does and return its external outputs.

    The init_net (when present) runs first, then ``feeds`` are written (overriding any blob
    of the same name), then the predict_net runs, all in one workspace.

    Args:
        model: the init_net/predict_net pair.
        feeds: input arrays by blob name.
        workspace: run in this workspace (e.g. a child of another) instead of a new one.
        seed: workspace seed for random fills without their own ``random_seed``.

    Returns:
        ``{external_output: value}`` in the predict_net's declared order.

    Raises:
        PreconditionError: an ONNX model (see ``run_net``).
        InvalidNetError: a feed is neither an external input of the predict_net nor read
            by it, a blob the
            predict_net reads is neither fed nor produced by the init_net (checked before
            running), or an external output is never written.
    """
    _refuse_onnx(expect_model(model, "run_model").predict_net)
    ws = Workspace(seed=seed) if workspace is None else workspace
    predict = model.predict_net
    described = describe_net(predict, "predict_net", model.predict_path)
    declared = set(predict.external_inputs)
    if declared:
        read = set(_free_inputs(predict))
        unexpected = sorted(name for name in feeds if name not in declared and name not in read)
        if unexpected:
            raise InvalidNetError(
                f"feeds {unexpected} are neither external inputs of {described} nor read by it"
            )
    if model.init_net is not None:
        run_net(model.init_net, ws)
    for name, value in feeds.items():
        ws.feed(name, value)
    missing = [name for name in _free_inputs(predict) if not ws.has(name)]
    if missing:
        raise InvalidNetError(
            f"blobs {missing} read by {described} are neither fed nor produced "
            "by the init_net; pass them in feeds"
        )
    run_net(predict, ws)
    outputs: dict[str, Any] = {}
    for name in predict.external_outputs:
        if not ws.has(name):
            raise InvalidNetError(f"external output {name!r} of {described} was never written")
        outputs[name] = ws.fetch(name)
    return outputs

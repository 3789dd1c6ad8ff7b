"""The one place where the gradient code converts between OperatorDef messages and the IR.

Gradient makers take and return ``caffe2_pb2.OperatorDef`` messages, as Caffe2's do; nets and
ops from users may be IR values. Every conversion goes through these functions, over
``graphtools.serde.codec``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graphtools.ir import Net, Op, make_arg
from graphtools.proto import caffe2_pb2
from graphtools.serde import codec

OperatorDef = caffe2_pb2.OperatorDef
NetDef = caffe2_pb2.NetDef


def op_from_proto(msg: OperatorDef) -> Op:
    """An IR op holding a private copy of ``msg`` (later edits of ``msg`` do not leak in)."""
    copy = OperatorDef()
    copy.CopyFrom(msg)
    return codec.op_from_proto(copy)


def op_to_proto(op: Op) -> OperatorDef:
    """A new OperatorDef for ``op`` (never the op's own source message)."""
    msg = OperatorDef()
    msg.CopyFrom(codec.op_to_proto(op))
    return msg


def net_from_netdef(netdef: NetDef) -> Net:
    """An IR net built from a private copy of ``netdef``."""
    copy = NetDef()
    copy.CopyFrom(netdef)
    return codec.net_from_netdef(copy)


def net_to_netdef(net: Net) -> NetDef:
    """A new NetDef for ``net``."""
    return codec.net_to_netdef(net)


def as_operator_def(op: OperatorDef | Op) -> OperatorDef:
    """``op`` as an OperatorDef message: a copy of a message, or an IR op converted."""
    if isinstance(op, Op):
        return op_to_proto(op)
    if isinstance(op, OperatorDef):
        copy = OperatorDef()
        copy.CopyFrom(op)
        return copy
    raise TypeError(f"expected an OperatorDef or a graphtools Op, got {type(op).__name__}")


def create_operator(
    op_type: str,
    inputs: Iterable[str] | str,
    outputs: Iterable[str] | str,
    *,
    name: str | None = None,
    device_option: caffe2_pb2.DeviceOption | None = None,
    **kwargs: Any,
) -> OperatorDef:
    """Caffe2's ``core.CreateOperator``: an OperatorDef with arguments from keyword values.

    A bare string for ``inputs``/``outputs`` is one blob name; ``None`` values are skipped;
    arguments keep keyword order and are encoded by ``graphtools.ir.make_arg`` (Caffe2's
    ``MakeArgument`` rules).
    """
    msg = OperatorDef()
    msg.type = op_type
    msg.input.extend([inputs] if isinstance(inputs, str) else list(inputs))
    msg.output.extend([outputs] if isinstance(outputs, str) else list(outputs))
    if name:
        msg.name = name
    if device_option is not None:
        msg.device_option.CopyFrom(device_option)
    for key, value in kwargs.items():
        if value is None:
            continue
        if isinstance(value, NetDef):  # copied as is, not through the IR
            arg = msg.arg.add()
            arg.name = key
            arg.n.CopyFrom(value)
        else:
            codec.argument_to_proto(make_arg(key, value), msg.arg.add())
    return msg


def get_arg(op: OperatorDef, name: str) -> caffe2_pb2.Argument | None:
    """The first argument of ``op`` called ``name`` (Caffe2's rule), or ``None``."""
    for arg in op.arg:
        if arg.name == name:
            return arg
    return None

"""What every drop-in function does at its edge: NetDef messages in, the same machinery as the
passes in the middle, the NetDef messages updated in place (as upstream did) at the end."""

from __future__ import annotations

from typing import Any

from graphtools.ir import Model, Net
from graphtools.pass_infra.registry import get_pass
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net, net_to_netdef

__all__ = ["run_pass", "to_ir", "write_back"]


def to_ir(net: Net | caffe2_pb2.NetDef | Any) -> Net:
    """The IR of what a drop-in function was given (a NetDef, an IR net, a ``core.Net``)."""
    return as_net(net)


def write_back(original: Any, net: Net) -> None:
    """Copy ``net`` into ``original`` when the caller gave a NetDef (upstream's helpers
    rewrote their arguments in place); an IR net was rewritten through its own methods."""
    if isinstance(original, caffe2_pb2.NetDef) and original is not net:
        original.CopyFrom(net_to_netdef(net))


def run_pass(name: str, model: Model, **options: Any) -> Any:
    """Run the built-in pass ``name`` (with its checks) on ``model``; its ``PassResult``."""
    return get_pass(name)(**options)(model)

"""Caffe2's ``Caffe2Frontend.ssa_rewrite``, over the analysis the ``ssa-rewrite`` pass uses
(``graphtools.analysis.ssa_names``)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from graphtools.analysis.ssa_names import SSANames, plan_ssa_names
from graphtools.compat._convert import to_ir, write_back
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2

__all__ = ["ssa_rewrite"]


def ssa_rewrite(
    net: Net | caffe2_pb2.NetDef,
    init_net: Net | caffe2_pb2.NetDef | None = None,
    value_info: MutableMapping[str, Any] | None = None,
    style: str = "multi",
) -> None:
    """Caffe2's ``Caffe2Frontend.ssa_rewrite``: rename blobs to SSA form, in place.

    Args:
        net: the predict net (NetDef rewritten in place, or an IR net through its methods).
        init_net: optional; every op must be a ``GivenTensor*Fill`` with one output. Only
            renamed with ``style="all"``.
        value_info: optional ``{blob name: info}``; its keys are renamed with ``style="all"``.
        style: ``"multi"`` or ``"all"`` (``graphtools.analysis.ssa_names``).

    Raises:
        UnsupportedOpError: an init_net op that is not a ``GivenTensor*Fill`` (named).
        InvalidNetError: an init_net op with several outputs.
        MissingBlobError: an external output that is neither written nor an external input
            (a ``KeyError``, as upstream).
        InvalidArgumentError: an unknown style.

    Nothing is changed when it raises.
    """
    net_ir = to_ir(net)
    init_ir = None if init_net is None else to_ir(init_net)
    names = plan_ssa_names(net_ir, init_ir, value_info or (), style)
    _rename(net_ir, names)
    write_back(net, net_ir)
    if init_ir is not None and names.init_external_outputs is not None:
        _rename_init(init_ir, names)
        write_back(init_net, init_ir)
    if value_info and style == "all":
        renamed = {names.new_name((name, 0)): value for name, value in value_info.items()}
        value_info.clear()
        value_info.update(renamed)


def _rename(net: Net, names: SSANames) -> None:
    with net.edit() as edit:
        for index, (inputs, outputs) in names.ops.items():
            edit.set_op(index, net[index].replace(inputs=inputs, outputs=outputs))
        edit.set_external_inputs(names.external_inputs)
        edit.set_external_outputs(names.external_outputs)


def _rename_init(init: Net, names: SSANames) -> None:
    with init.edit() as edit:
        for index, outputs in names.init_ops.items():
            edit.set_op(index, init[index].replace(outputs=outputs))
        edit.set_external_inputs(names.init_external_inputs or ())
        edit.set_external_outputs(names.init_external_outputs or ())

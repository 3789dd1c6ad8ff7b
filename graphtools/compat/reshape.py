"""detectron2's ``identify_reshape_sub_graph`` and ``remove_reshape_for_fc``, over the
analysis the ``remove-reshape-for-fc`` pass uses (``graphtools.analysis.reshape``)."""

from __future__ import annotations

import logging
from typing import Any

from graphtools.analysis.reshape import find_reshape_removal, reshape_sub_graphs
from graphtools.compat._convert import to_ir
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_to_netdef

__all__ = ["identify_reshape_sub_graph", "remove_reshape_for_fc"]

logger = logging.getLogger(__name__)


def identify_reshape_sub_graph(predict_net: caffe2_pb2.NetDef) -> list[list[int]]:
    """detectron2's helper: ``[*shape chain ops, reshape]`` for every Reshape, in op order.

    The chain is every op the shape input depends on back to the data blob and to blobs no op
    produces (detectron2 keeps only ops on a path from the data blob, found in a 15-op window).
    A Reshape with a ``shape`` argument and one input gives ``[reshape]`` (detectron2 asserts
    two inputs); an op shared by two chains is listed under the first Reshape only.
    """
    return reshape_sub_graphs(to_ir(predict_net))


def remove_reshape_for_fc(
    predict_net: caffe2_pb2.NetDef, params: dict[str, Any]
) -> tuple[caffe2_pb2.NetDef, dict[str, Any]]:
    """detectron2's helper: remove Reshape sub-graphs before FC ops.

    Returns a new NetDef (``predict_net`` is not changed, unlike detectron2) and ``params``
    itself with the dropped params deleted (in place, as detectron2 does). A param is a key of
    ``params``.
    """
    net = to_ir(predict_net).copy()
    removal = find_reshape_removal(net, lambda names: {name for name in names if name in params})
    dropped = set(removal.params)
    with net.edit() as edit:
        for reshaped, data in removal.rewires:
            edit.replace_all_uses_with(reshaped, data)
        for index in removal.removed:
            edit.remove(index)
        edit.set_external_inputs(name for name in net.external_inputs if name not in dropped)
    for name in removal.params:
        logger.info("remove-reshape-for-fc: dropping param %s", name)
        params.pop(name, None)
    return net_to_netdef(net), params

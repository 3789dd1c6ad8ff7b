"""detectron2's graph helpers on NetDefs, over ``graphtools.graph``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from graphtools import graph
from graphtools.compat._convert import to_ir
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2
from graphtools.ssa import VersionedBlob

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["get_sub_graph_external_input_output", "to_networkx"]


def get_sub_graph_external_input_output(
    net: Net | caffe2_pb2.NetDef, op_indices: Iterable[int]
) -> tuple[list[VersionedBlob], list[VersionedBlob]]:
    """detectron2's helper (``graphtools.graph.get_sub_graph_external_input_output``)."""
    return graph.get_sub_graph_external_input_output(to_ir(net), op_indices)


def to_networkx(net: Net | caffe2_pb2.NetDef) -> nx.MultiDiGraph:
    """``graphtools.graph.to_networkx`` on a NetDef or IR net."""
    return graph.to_networkx(to_ir(net))

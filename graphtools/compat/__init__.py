"""Caffe2's and detectron2's helpers with their names, signatures, return types and exception
classes, on NetDef messages: thin functions over the analyses and passes, so users' export
scripts port over unchanged. ``graphtools.passes`` re-exports them, where users import them.
"""

from graphtools.compat.copies import fuse_copy_between_cpu_and_gpu
from graphtools.compat.dead_ends import remove_dead_end_ops
from graphtools.compat.devices import (
    assign_device_option,
    get_external_blob_names,
    infer_device_type,
    infer_status,
)
from graphtools.compat.graph import get_sub_graph_external_input_output, to_networkx
from graphtools.compat.params import (
    Int8Tensor,
    construct_init_net_from_params,
    export_pair,
    get_params_from_init_net,
)
from graphtools.compat.partial import ClonePartial, clone_partial
from graphtools.compat.placeholders import fuse_alias_placeholder
from graphtools.compat.rename import rename_op_input, rename_op_output
from graphtools.compat.reshape import identify_reshape_sub_graph, remove_reshape_for_fc
from graphtools.compat.ssa_rewrite import ssa_rewrite

__all__ = [
    "ClonePartial",
    "Int8Tensor",
    "assign_device_option",
    "clone_partial",
    "construct_init_net_from_params",
    "export_pair",
    "fuse_alias_placeholder",
    "fuse_copy_between_cpu_and_gpu",
    "get_external_blob_names",
    "get_params_from_init_net",
    "get_sub_graph_external_input_output",
    "identify_reshape_sub_graph",
    "infer_device_type",
    "infer_status",
    "remove_dead_end_ops",
    "remove_reshape_for_fc",
    "rename_op_input",
    "rename_op_output",
    "ssa_rewrite",
    "to_networkx",
]

"""Rewrite passes, one per module, installed as ``graphtools.passes``.

Each module holds one ``Pass`` for pipelines (registered under its kebab-case name) and, where
users know the transformation from Caffe2 or detectron2, the drop-in function with the upstream
name and signature, which takes and returns ``NetDef`` messages as upstream did.
"""

from graphtools.passes.fold_constants import FoldConstants
from graphtools.passes.fuse_copy_ops import FuseCopyOps, fuse_copy_between_cpu_and_gpu
from graphtools.passes.in_branches import InBranches
from graphtools.passes.infer_devices import InferDevices, assign_device_option
from graphtools.passes.params import (
    Int8Tensor,
    construct_init_net_from_params,
    export_pair,
    get_params_from_init_net,
)
from graphtools.passes.remove_dead_ends import RemoveDeadEnds, remove_dead_end_ops
from graphtools.passes.remove_reshape_for_fc import (
    RemoveReshapeForFC,
    identify_reshape_sub_graph,
    remove_reshape_for_fc,
)
from graphtools.passes.remove_unused_params import RemoveUnusedParams, unused_params
from graphtools.passes.rename import Rename, rename_op_input, rename_op_output
from graphtools.passes.ssa_rewrite import SSARewrite, ssa_rewrite

__all__ = [
    "FoldConstants",
    "FuseCopyOps",
    "InBranches",
    "InferDevices",
    "Int8Tensor",
    "RemoveDeadEnds",
    "RemoveReshapeForFC",
    "RemoveUnusedParams",
    "Rename",
    "SSARewrite",
    "assign_device_option",
    "construct_init_net_from_params",
    "export_pair",
    "fuse_copy_between_cpu_and_gpu",
    "get_params_from_init_net",
    "identify_reshape_sub_graph",
    "remove_dead_end_ops",
    "remove_reshape_for_fc",
    "rename_op_input",
    "rename_op_output",
    "ssa_rewrite",
    "unused_params",
]

"""Rewrite passes, one per module, installed as ``graphtools.passes``.

Each module holds one ``Pass`` (published as an entry point under its kebab-case name, see
``pyproject.toml``). Pass modules see the IR, the analyses and the pass infrastructure only.
This package also re-exports every Caffe2/detectron2 drop-in function of
``graphtools.compat``, since that is where users' scripts import them from.
"""

from graphtools.passes.add_gradients import AddGradients
from graphtools.passes.fold_constants import FoldConstants
from graphtools.passes.fuse_copy_ops import FuseCopyOps
from graphtools.passes.in_branches import InBranches
from graphtools.passes.infer_devices import InferDevices
from graphtools.passes.remove_dead_ends import RemoveDeadEnds
from graphtools.passes.remove_identity_ops import RemoveIdentityOps
from graphtools.passes.remove_reshape_for_fc import RemoveReshapeForFC
from graphtools.passes.remove_unused_params import RemoveUnusedParams
from graphtools.passes.rename import Rename
from graphtools.passes.ssa_rewrite import SSARewrite

# isort: split
# After the pass modules: `ssa_rewrite` names a module and, for users, this function.
from graphtools.compat import (
    ClonePartial,
    Int8Tensor,
    assign_device_option,
    clone_partial,
    construct_init_net_from_params,
    export_pair,
    fuse_alias_placeholder,
    fuse_copy_between_cpu_and_gpu,
    get_external_blob_names,
    get_params_from_init_net,
    get_sub_graph_external_input_output,
    identify_reshape_sub_graph,
    infer_device_type,
    infer_status,
    remove_dead_end_ops,
    remove_reshape_for_fc,
    rename_op_input,
    rename_op_output,
    ssa_rewrite,
    to_networkx,
)

__all__ = [
    "AddGradients",
    "ClonePartial",
    "FoldConstants",
    "FuseCopyOps",
    "InBranches",
    "InferDevices",
    "Int8Tensor",
    "RemoveDeadEnds",
    "RemoveIdentityOps",
    "RemoveReshapeForFC",
    "RemoveUnusedParams",
    "Rename",
    "SSARewrite",
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

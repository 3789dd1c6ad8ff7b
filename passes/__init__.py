"""Rewrite passes, one per module, installed as ``graphtools.passes``.

Each module holds one ``Pass`` (published as an entry point under its kebab-case name, see
``pyproject.toml``). Pass modules see the IR, the analyses and the pass infrastructure only.
This package also gives every Caffe2/detectron2 drop-in function of ``graphtools.compat``,
since that is where users' scripts import them from; they load on first use, so importing a
pass never loads the NetDef codec or the executor they work with.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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

_DROP_INS = frozenset(
    (
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
    )
)
"""The names of ``graphtools.compat`` this package gives, loaded on first access."""

# Importing a pass module set the package attribute of its name; two of them are also the
# names of drop-in functions (``ssa_rewrite``, ``remove_reshape_for_fc``). Unset those, so
# that ``from graphtools.passes import ssa_rewrite`` gives the function (``__getattr__``);
# the modules stay importable by their full names.
for _name in _DROP_INS & globals().keys():
    del globals()[_name]


def __getattr__(name: str) -> Any:
    if name in _DROP_INS:
        value = getattr(importlib.import_module("graphtools.compat"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


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

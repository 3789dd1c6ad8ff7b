"""graphtools: read, analyse, rewrite and verify exported models: Caffe2 NetDef pairs and ONNX
models, one IR for both.

The public API: the IR (``Model``, ``Net``, ``Op``), file IO, the versioned-blob SSA helpers with
Caffe2's and detectron2's names, graph views, the pass machinery and the canonical printer. Passes
themselves live in ``graphtools.passes``. Each name loads its module on first use, so that
``import graphtools`` (and every command of the CLI) pays only for what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphtools.compat.graph import get_sub_graph_external_input_output, to_networkx
    from graphtools.errors import (
        GraphToolsError,
        IllegalRewriteError,
        InvalidNetError,
        PassError,
        PostconditionError,
        PreconditionError,
        SerdeError,
        UnsupportedOpError,
    )
    from graphtools.ir import Argument, DeviceOption, Model, Net, Op, make_arg
    from graphtools.pass_infra import (
        DEFAULT_PIPELINE,
        Pass,
        PassManager,
        PassRecord,
        PassResult,
        PipelineSpecError,
        available_passes,
        register_pass,
    )
    from graphtools.printer import print_model, print_net
    from graphtools.serde import (
        extract_metanet_net,
        list_metanet_nets,
        load_metanet,
        load_model,
        load_model_dir,
        load_net,
        save_model,
        save_net,
    )
    from graphtools.ssa import (
        get_consumer_map,
        get_op_ids_in_path,
        get_output_producers,
        get_producer_map,
        get_ssa,
        get_undefined_blobs,
    )
    from graphtools.ssa_view import SSAView
    from graphtools.wellformed import Finding, verify

_EXPORTS = {
    "Argument": "graphtools.ir",
    "DEFAULT_PIPELINE": "graphtools.pass_infra",
    "DeviceOption": "graphtools.ir",
    "Finding": "graphtools.wellformed",
    "GraphToolsError": "graphtools.errors",
    "IllegalRewriteError": "graphtools.errors",
    "InvalidNetError": "graphtools.errors",
    "Model": "graphtools.ir",
    "Net": "graphtools.ir",
    "Op": "graphtools.ir",
    "Pass": "graphtools.pass_infra",
    "PassError": "graphtools.errors",
    "PassManager": "graphtools.pass_infra",
    "PassRecord": "graphtools.pass_infra",
    "PassResult": "graphtools.pass_infra",
    "PipelineSpecError": "graphtools.pass_infra",
    "PostconditionError": "graphtools.errors",
    "PreconditionError": "graphtools.errors",
    "SSAView": "graphtools.ssa_view",
    "SerdeError": "graphtools.errors",
    "UnsupportedOpError": "graphtools.errors",
    "available_passes": "graphtools.pass_infra",
    "extract_metanet_net": "graphtools.serde",
    "get_consumer_map": "graphtools.ssa",
    "get_op_ids_in_path": "graphtools.ssa",
    "get_output_producers": "graphtools.ssa",
    "get_producer_map": "graphtools.ssa",
    "get_ssa": "graphtools.ssa",
    "get_sub_graph_external_input_output": "graphtools.compat.graph",
    "get_undefined_blobs": "graphtools.ssa",
    "list_metanet_nets": "graphtools.serde",
    "load_metanet": "graphtools.serde",
    "load_model": "graphtools.serde",
    "load_model_dir": "graphtools.serde",
    "load_net": "graphtools.serde",
    "make_arg": "graphtools.ir",
    "print_model": "graphtools.printer",
    "print_net": "graphtools.printer",
    "register_pass": "graphtools.pass_infra",
    "save_model": "graphtools.serde",
    "save_net": "graphtools.serde",
    "to_networkx": "graphtools.compat.graph",
    "verify": "graphtools.wellformed",
}
"""Public name -> the module defining it."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_PIPELINE",
    "Argument",
    "DeviceOption",
    "Finding",
    "GraphToolsError",
    "IllegalRewriteError",
    "InvalidNetError",
    "Model",
    "Net",
    "Op",
    "Pass",
    "PassError",
    "PassManager",
    "PassRecord",
    "PassResult",
    "PipelineSpecError",
    "PostconditionError",
    "PreconditionError",
    "SSAView",
    "SerdeError",
    "UnsupportedOpError",
    "available_passes",
    "extract_metanet_net",
    "get_consumer_map",
    "get_op_ids_in_path",
    "get_output_producers",
    "get_producer_map",
    "get_ssa",
    "get_sub_graph_external_input_output",
    "get_undefined_blobs",
    "list_metanet_nets",
    "load_metanet",
    "load_model",
    "load_model_dir",
    "load_net",
    "make_arg",
    "print_model",
    "print_net",
    "register_pass",
    "save_model",
    "save_net",
    "to_networkx",
    "verify",
]

"""graphtools: read, analyse, rewrite and verify exported Caffe2 NetDef pairs.

The public API: the IR (``Model``, ``Net``, ``Op``), file IO, the versioned-blob SSA helpers with
Caffe2's and detectron2's names, graph views, the pass machinery and the canonical printer. Passes
themselves live in ``graphtools.passes``.
"""

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
from graphtools.verify import Finding, verify

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

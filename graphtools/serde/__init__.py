"""Files: format sniffing, NetDef and model load/save, MetaNetDef access."""

from graphtools.serde.metanet import (
    extract_metanet_net,
    list_metanet_nets,
    load_metanet,
    model_from_metanet,
)
from graphtools.serde.model_io import (
    check_output_folder,
    find_model_files,
    load_ir_net,
    load_model,
    load_model_dir,
    model_output_paths,
    save_model,
    save_model_in_place,
)
from graphtools.serde.netdef_io import load_net, load_plan, netdef_bytes, parse_netdef, save_net

__all__ = [
    "check_output_folder",
    "extract_metanet_net",
    "find_model_files",
    "list_metanet_nets",
    "load_ir_net",
    "load_metanet",
    "load_model",
    "load_model_dir",
    "load_net",
    "load_plan",
    "model_from_metanet",
    "model_output_paths",
    "netdef_bytes",
    "parse_netdef",
    "save_model",
    "save_model_in_place",
    "save_net",
]

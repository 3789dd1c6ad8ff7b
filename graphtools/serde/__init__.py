"""Files: format sniffing, NetDef and model load/save, MetaNetDef access."""

from graphtools.serde.metanet import (
    extract_metanet_net,
    list_metanet_nets,
    load_metanet,
    model_from_metanet,
)
from graphtools.serde.model_io import (
    find_model_files,
    load_ir_net,
    load_model,
    load_model_dir,
    save_model,
)
from graphtools.serde.netdef_io import load_net, load_plan, netdef_bytes, parse_netdef, save_net

__all__ = [
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
    "netdef_bytes",
    "parse_netdef",
    "save_model",
    "save_net",
]

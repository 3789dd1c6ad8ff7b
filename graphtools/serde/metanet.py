"""MetaNetDef files (Caffe2's predictor exporter): list and extract the nets they hold."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import message, text_format

from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.proto import caffe2_pb2, metanet_pb2
from graphtools.serde.codec import net_from_netdef
from graphtools.serde.netdef_io import read_bytes
from graphtools.serde.sniff import looks_like_text

# Keys the predictor exporter uses (caffe2/proto/predictor_consts.proto).
PREDICT_NET_TYPE = "PREDICT_NET_TYPE"
PREDICT_INIT_NET_TYPE = "PREDICT_INIT_NET_TYPE"
GLOBAL_INIT_NET_TYPE = "GLOBAL_INIT_NET_TYPE"


def load_metanet(path: str | Path) -> metanet_pb2.MetaNetDef:
    """Load a MetaNetDef from a binary or text file."""
    data = read_bytes(path)
    meta = metanet_pb2.MetaNetDef()
    try:
        if looks_like_text(data):
            text_format.Parse(data.decode("utf-8-sig"), meta)
        else:
            meta.ParseFromString(data)
    except (text_format.ParseError, message.DecodeError, RecursionError) as exc:
        raise SerdeError(path, f"not a MetaNetDef: {exc}") from exc
    if not (meta.nets or meta.plans or meta.blobs):
        raise SerdeError(path, "not a MetaNetDef: it holds no nets, plans or blobs")
    return meta


def list_metanet_nets(meta: metanet_pb2.MetaNetDef) -> list[str]:
    """Keys of the nets a MetaNetDef holds, in file order."""
    return [entry.key for entry in meta.nets]


def extract_metanet_net(meta: metanet_pb2.MetaNetDef, key: str) -> caffe2_pb2.NetDef:
    """The net stored under ``key``; ``SerdeError`` listing the keys when it is absent."""
    for entry in meta.nets:
        if entry.key == key:
            netdef = caffe2_pb2.NetDef()
            netdef.CopyFrom(entry.value)
            return netdef
    known = ", ".join(list_metanet_nets(meta)) or "none"
    raise SerdeError(None, f"MetaNetDef has no net {key!r} (nets: {known})")


def model_from_metanet(meta: metanet_pb2.MetaNetDef) -> Model:
    """The predictor's ``Model``: PREDICT_NET_TYPE with PREDICT_INIT_NET_TYPE or the global init."""
    keys = set(list_metanet_nets(meta))
    predict = extract_metanet_net(meta, PREDICT_NET_TYPE)
    init_key = next((k for k in (PREDICT_INIT_NET_TYPE, GLOBAL_INIT_NET_TYPE) if k in keys), None)
    init = None if init_key is None else net_from_netdef(extract_metanet_net(meta, init_key))
    return Model(net_from_netdef(predict), init)

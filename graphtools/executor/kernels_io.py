"""``Load``: blobs read from a Caffe2 DB file, as deployment init_nets ship their weights.

The ``minidb`` format (Caffe2's own: records of int32 key length, int32 value length, key,
serialized ``BlobProto``) is read; other DB back-ends (lmdb, leveldb, rocksdb) are refused
with ``UnsupportedOpError``. A missing DB file is a ``SerdeError`` naming the path: models
such as the breadbread1984 demos ship their init_net without the database it loads.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from graphtools.errors import SerdeError, UnsupportedOpError
from graphtools.executor.kernels_tensor import dtype_of
from graphtools.executor.registry import OpContext, kernel
from graphtools.ir import Op
from graphtools.proto import caffe2_pb2

_FIELDS = {
    1: "float_data",
    2: "int32_data",
    5: "int32_data",
    6: "int32_data",
    7: "int32_data",
    8: "int32_data",
    9: "int32_data",
    10: "int64_data",
    13: "double_data",
}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def tensor_to_array(tensor: caffe2_pb2.TensorProto, path: Path) -> np.ndarray:
    """A ``TensorProto``'s values as a numpy array of its data type and dims."""
    if tensor.HasField("segment"):
        raise SerdeError(path, f"blob {tensor.name!r} is stored in chunks, which is not supported")
    kind = tensor.data_type
    shape = tuple(tensor.dims)
    if kind == caffe2_pb2.TensorProto.BYTE:
        return np.frombuffer(tensor.byte_data, dtype=np.uint8).reshape(shape).copy()
    if kind == caffe2_pb2.TensorProto.STRING:
        return np.asarray(list(tensor.string_data), dtype=object).reshape(shape)
    if kind == caffe2_pb2.TensorProto.FLOAT16:
        bits = np.asarray(tensor.int32_data, dtype=np.uint16)
        return bits.view(np.float16).reshape(shape)
    field = _FIELDS.get(kind)
    if field is None:
        raise SerdeError(path, f"blob {tensor.name!r} has unsupported data type {kind}")
    values = np.asarray(getattr(tensor, field), dtype=dtype_of(kind))
    if values.size != int(np.prod(shape)):
        raise SerdeError(path, f"blob {tensor.name!r} has {values.size} values for dims {shape}")
    return values.reshape(shape)


def read_minidb(path: Path) -> dict[str, np.ndarray]:
    """Every tensor blob of a Caffe2 minidb file, by key."""
    data = path.read_bytes()
    blobs: dict[str, np.ndarray] = {}
    at = 0
    while at < len(data):
        if at + 8 > len(data):
            raise SerdeError(path, f"truncated minidb record header at byte {at}")
        key_len, value_len = struct.unpack_from("<ii", data, at)
        at += 8
        if key_len < 0 or value_len < 0 or at + key_len + value_len > len(data):
            raise SerdeError(path, f"corrupt minidb record at byte {at - 8}")
        key = data[at : at + key_len].decode()
        blob = caffe2_pb2.BlobProto()
        blob.ParseFromString(data[at + key_len : at + key_len + value_len])
        at += key_len + value_len
        if not blob.HasField("tensor"):
            raise SerdeError(path, f"record {key!r} is a {blob.type!r} blob, not a tensor")
        blobs[key] = tensor_to_array(blob.tensor, path)
    return blobs


@kernel("Load", context=True)
def _load(op: Op, inputs: list[Any], ctx: OpContext) -> list[Any]:
    """Caffe2 ``Load`` from the ``db`` file (relative paths from the current directory, the
    workspace root folder of a default Caffe2 run). ``source_blob_names``, ``strip_prefix``
    and ``add_prefix`` map DB keys to outputs; ``allow_incomplete`` is not supported since
    unnamed outputs would stay undefined."""
    if inputs or op.has_arg("dbs"):
        raise UnsupportedOpError("Load from DB reader inputs or several 'dbs' is not supported")
    if op.arg("load_all", 0):
        raise UnsupportedOpError("Load with load_all=1 (outputs chosen by the DB) is not supported")
    db = op.arg("db")
    if db is None:
        raise ValueError("Load needs a 'db' argument")
    path = Path(_text(db))
    db_type = _text(op.arg("db_type", b""))
    if not path.exists():
        raise SerdeError(
            path.resolve(),
            f"Load reads blobs {list(op.outputs)} from this {db_type or 'DB'} database, "
            "which does not exist (a relative path is read from the working directory, as "
            "Caffe2 reads it); run from where the DB lies, or replace Load with fills",
        )
    if db_type != "minidb":
        raise UnsupportedOpError(f"Load from a {db_type!r} DB is not supported (only minidb)")
    blobs = read_minidb(path)
    strip, add = _text(op.arg("strip_prefix", b"")), _text(op.arg("add_prefix", b""))
    renamed = {}
    for key, value in blobs.items():
        name = key[len(strip) :] if strip and key.startswith(strip) else key
        renamed[add + name] = value
    sources = [_text(v) for v in op.arg("source_blob_names", ())] or list(op.outputs)
    if len(sources) != len(op.outputs):
        raise ValueError(f"{len(sources)} source_blob_names for {len(op.outputs)} outputs")
    missing = [name for name in sources if name not in renamed]
    if missing:
        raise SerdeError(path, f"the DB has no blobs {missing} (it has {sorted(renamed)})")
    return [renamed[name] for name in sources]

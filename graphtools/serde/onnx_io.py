"""Loading and saving ONNX models as IR ``Model`` objects, external data included.

A model is read from its file; the data of external tensors stays in their files until a
tensor's values are asked for. Saving writes the model file and the external data files it
refers to as one unit (``atomic.write_files``): a data file whose tensors are all still in the
model, unchanged, is copied as it is (same locations, offsets and lengths, so an unchanged model
keeps its layout); one that lost tensors is written again with only those kept, unless
tensors the IR does not hold as initializers lie in it too (a Constant's value, a sparse
initializer's parts, a function's tensors): then it is copied whole, as is a file only those
point into. A model written over itself never rewrites the data file it reads: another model
may read the same file (two models cut from one export), so the tensors it dropped leave
their bytes there and the others keep their offsets. Locations are one file however spelled
(``w.bin``, ``./w.bin``). With ``external_data=True`` every initializer of at least
``size_threshold`` bytes goes to ``<model file>.data`` instead. A location that would lie
outside the output's folder is never written; a model over protobuf's 2 GB limit is refused
with what to do.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.serde.atomic import write_files
from graphtools.serde.netdef_io import read_bytes
from graphtools.serde.onnx_codec import (
    ExternalFile,
    OnnxTensor,
    external_extent,
    external_file,
    external_tensors,
    model_from_onnx_bytes,
    model_to_onnx_bytes,
    tensor_bytes,
    tensor_to_proto,
)
from graphtools.values import Tensor

__all__ = [
    "PROTOBUF_LIMIT",
    "data_files_read",
    "load_onnx_model",
    "onnx_model_files",
    "save_onnx_model",
    "write_onnx_files",
]

PROTOBUF_LIMIT = 2**31 - 1
"""Protobuf refuses to serialise a message larger than this."""


def load_onnx_model(path: str | Path) -> Model:
    """Load an ONNX model file into the IR (dialect ``onnx``).

    Raises:
        SerdeError: the file cannot be read or is not a valid ONNX model (see
            ``onnx_codec.model_from_onnx_bytes``).
    """
    return model_from_onnx_bytes(read_bytes(path), Path(path))


def save_onnx_model(
    model: Model,
    path: str | Path,
    *,
    external_data: bool = False,
    size_threshold: int = 1024,
    replace_data: bool = False,
) -> Path:
    """Write an ONNX-dialect ``model`` to ``path`` with its external data (see the module
    docstring), all files as one unit.

    A data file already in the output's folder with other content is another model's (two
    models cut from one export share their data file's name): it is not overwritten unless
    ``replace_data`` says so (a model written over itself).

    Raises:
        SerdeError: the model cannot be written as ONNX, an external data file cannot be read,
            one would overwrite another's, the model is over protobuf's limit, or the folder
            cannot be written.
    """
    path = Path(path)
    files = onnx_model_files(
        model, path, external_data=external_data, size_threshold=size_threshold
    )
    if not replace_data:
        for target, data in files[1:]:
            if target.exists() and _differs(target, data):
                raise SerdeError(
                    target,
                    f"writing {path.name} would overwrite this external data file, which holds "
                    "other data (another model's, written from the same export?); write to "
                    "another folder, or save with its tensors in a file of its own "
                    "(save_onnx_model or graphtools.onnx.save_onnx with external_data=True; "
                    "the CLI's --external-data)",
                )
    write_onnx_files(files)
    return path


def write_onnx_files(files: list[tuple[Path, bytes]]) -> list[Path]:
    """Write a model file and its external data files (``onnx_model_files``) as one unit,
    making the folders a data location names inside the model's folder (``weights/m.data``);
    the model's folder itself must exist. Folders made for a write that fails are removed.

    Raises:
        SerdeError: as ``atomic.write_files``, or a folder cannot be made.
    """
    top = files[0][0].parent
    made: list[Path] = []
    try:
        for path, _ in files[1:]:
            inside = [folder for folder in path.parents if folder.is_relative_to(top)]
            for folder in reversed(inside[:-1]):  # outermost first, the model's folder aside
                if not folder.exists():
                    try:
                        folder.mkdir()
                    except OSError as exc:
                        raise SerdeError(
                            folder, f"cannot create the folder: {exc.strerror or exc}"
                        ) from exc
                    made.append(folder)
        return write_files(files)
    except BaseException:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _differs(target: Path, data: bytes) -> bool:
    """Whether the file at ``target`` holds other bytes than ``data``."""
    try:
        return target.stat().st_size != len(data) or target.read_bytes() != data
    except OSError:
        return True


def onnx_model_files(
    model: Model,
    path: str | Path,
    *,
    external_data: bool = False,
    size_threshold: int = 1024,
    data_location: str | None = None,
) -> list[tuple[Path, bytes]]:
    """``(path, bytes)`` of every file ``save_onnx_model`` writes: the model file first.
    ``data_location``: the file ``external_data`` writes the tensors to, relative to the
    model's folder (default: the model file's name with ``.data`` added)."""
    path = Path(path)
    if external_data:
        writer = _AllExternal(data_location or path.name + ".data", size_threshold)
        data = model_to_onnx_bytes(model, writer)
        extra = writer.files(path.parent)
        pinned = _untracked_external(data, writer.external)
        clash = [location for location in pinned if path.parent / location in dict(extra)]
        if clash:
            raise SerdeError(
                path.parent / clash[0],
                "a tensor the model holds outside its initializers (a Constant's value, a "
                "sparse initializer) lies in this file, the one external_data=True (the CLI's "
                "--external-data) writes the initializers to: save without it, or to a model "
                "of another name",
            )
        extra += _copied_whole(pinned, model, path.parent, set())
    else:
        writer_fn, extra = _kept_external(model, path.parent)
        data = model_to_onnx_bytes(model, writer_fn)
        pinned = _untracked_external(data, len(external_tensors(model)))
        if pinned:
            writer_fn, extra = _kept_external(model, path.parent, pinned.keys())
            data = model_to_onnx_bytes(model, writer_fn)
            copied = {target for target, _ in extra}
            extra += _copied_whole(pinned, model, path.parent, copied)
    if len(data) > PROTOBUF_LIMIT:
        raise SerdeError(
            path,
            f"the model is {len(data)} bytes, over protobuf's 2 GB limit: save it with its "
            "tensors as external data (external_data=True; the CLI's --external-data)",
        )
    return [(path, data), *extra]


def _check_extents(file: ExternalFile, tensors: list[OnnxTensor], size: int) -> None:
    """Refuse data that ``file`` (``size`` bytes) is too short to hold: copied as it is, it
    would give a model onnxruntime cannot load."""
    for tensor in tensors:
        offset, length, needed = external_extent(tensor.proto)
        wanted = length if length is not None else needed
        if offset + (wanted or 0) > size:
            raise SerdeError(
                file.path,
                f"the external data of initializer {tensor.name!r} lies at bytes {offset} to "
                f"{offset + (wanted or 0)} of this file, which holds {size} (truncated?)",
            )


def _read_range(file: ExternalFile, tensor: OnnxTensor) -> bytes:
    """The bytes of ``tensor`` in ``file``, as its offset and length say (no length: what its
    type and shape need, the rest of the file only when that is not known)."""
    offset, length, needed = external_extent(tensor.proto)
    wanted = length if length is not None else needed
    try:
        with file.path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read(-1 if wanted is None else wanted)
    except OSError as exc:
        raise SerdeError(file.path, f"cannot read external data: {exc.strerror or exc}") from exc
    if wanted is not None and len(chunk) < wanted:
        raise SerdeError(
            file.path,
            f"external data of initializer {tensor.name!r} is {len(chunk)} bytes, the "
            f"model says {wanted} (truncated?)",
        )
    return chunk


def _kept_external(
    model: Model, folder: Path, pinned: Set[str] = frozenset()
) -> tuple[Callable[[str, Tensor], onnx.TensorProto | bytes], list[tuple[Path, bytes]]]:
    """How to write the initializers of ``model`` into ``folder`` keeping their data where it
    is, and the external data files to write. A file at a ``pinned`` location (normalised)
    holds tensors the IR does not track: it is copied whole, never compacted."""
    by_file: dict[int, list[OnnxTensor]] = defaultdict(list)
    files: dict[int, ExternalFile] = {}
    for _, _, tensor in external_tensors(model):
        assert isinstance(tensor, OnnxTensor) and tensor.external is not None
        by_file[id(tensor.external)].append(tensor)
        files[id(tensor.external)] = tensor.external
    written: list[tuple[Path, bytes]] = []
    moved: dict[int, onnx.TensorProto] = {}
    for key, tensors in by_file.items():
        file = files[key]
        target = folder / file.location
        unique = {id(t): t for t in tensors}
        over_itself = target.resolve() == file.path.resolve()
        if len(unique) == file.count or over_itself or os.path.normpath(file.location) in pinned:
            if not over_itself:
                data = read_bytes(file.path)
                _check_extents(file, list(unique.values()), len(data))
                written.append((target, data))
            else:
                _check_extents(file, list(unique.values()), _size_of(file))
            continue
        chunks: list[bytes] = []
        offset = 0
        for tensor in unique.values():
            chunk = _read_range(file, tensor)
            proto = onnx.TensorProto()
            proto.CopyFrom(tensor.proto)
            _set_location(proto, file.location, offset, len(chunk))
            moved[id(tensor)] = proto
            chunks.append(chunk)
            offset += len(chunk)
        written.append((target, b"".join(chunks)))

    if not moved:
        return tensor_bytes, written

    def write(name: str, tensor: Tensor) -> onnx.TensorProto | bytes:
        proto = moved.get(id(tensor))
        if proto is None:
            return tensor_bytes(name, tensor)
        if proto.name != name:
            renamed = onnx.TensorProto()
            renamed.CopyFrom(proto)
            renamed.name = name
            return renamed
        return proto

    return write, written


_LOCATION_KEY = b"\x0a\x08location"
"""The serialised key of an external tensor's ``location`` entry: a model whose bytes hold
none has no external tensor."""


def _untracked_external(data: bytes, tracked: int) -> dict[str, onnx.TensorProto]:
    """External tensors of the serialised model ``data`` the IR does not hold as initializers
    (a Constant's value, a sparse initializer's parts, tensors of functions and training_info),
    one per data file, by normalised location. Their offsets are only ever copied, so the files
    they lie in are written whole. ``tracked``: how many external initializers ``data`` holds;
    a byte count of location entries no higher skips the parse (every model but these)."""
    if data.count(_LOCATION_KEY) <= tracked:
        return {}
    found: dict[str, onnx.TensorProto] = {}
    for tensor in _untracked_tensors(onnx.ModelProto.FromString(data)):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entries = {entry.key: entry.value for entry in tensor.external_data}
            location = entries.get("location", "")
            found.setdefault(os.path.normpath(location) if location else location, tensor)
    return found


def _untracked_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``model`` but the dense initializers of its graph and of the graphs
    nested in its nodes (those the IR holds)."""
    return _model_tensors(model, graph_initializers=False)


def _model_tensors(
    model: onnx.ModelProto, *, graph_initializers: bool
) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``model``; with ``graph_initializers`` false, not the dense
    initializers of its graph and of the graphs nested in its nodes."""
    yield from _graph_tensors(model.graph, initializers=graph_initializers)
    for function in model.functions:
        yield from _node_tensors(function.node, initializers=graph_initializers)
    for info in model.training_info:
        yield from _graph_tensors(info.algorithm, initializers=True)
        yield from _graph_tensors(info.initialization, initializers=True)


def _graph_tensors(graph: onnx.GraphProto, *, initializers: bool) -> Iterator[onnx.TensorProto]:
    """The tensors of ``graph`` and of the graphs nested in its nodes; their dense
    initializers only with ``initializers``."""
    if initializers:
        yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    yield from _node_tensors(graph.node, initializers=initializers)


def _node_tensors(
    nodes: Iterable[onnx.NodeProto], *, initializers: bool
) -> Iterator[onnx.TensorProto]:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sparse in (
                *([attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []),
                *attribute.sparse_tensors,
            ):
                yield from (sparse.values, sparse.indices)
            for graph in (
                *([attribute.g] if attribute.HasField("g") else []),
                *attribute.graphs,
            ):
                yield from _graph_tensors(graph, initializers=initializers)


def data_files_read(path: Path) -> set[Path]:
    """The external data files the ONNX model file at ``path`` reads (resolved); none when
    it cannot be read or parsed as a model. Parses the model file, reads no data file."""
    try:
        proto = onnx.ModelProto.FromString(read_bytes(path))
    except (OSError, SerdeError, DecodeError):
        return set()
    found: set[Path] = set()
    for tensor in _model_tensors(proto, graph_initializers=True):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value:
                    found.add((path.parent / entry.value).resolve())
    return found


def _copied_whole(
    pinned: Mapping[str, onnx.TensorProto], model: Model, folder: Path, written: Set[Path]
) -> list[tuple[Path, bytes]]:
    """The data files at ``pinned`` locations not ``written`` yet, copied whole from beside
    the loaded model into ``folder`` (none when that is where they are)."""
    copies: list[tuple[Path, bytes]] = []
    source = model.predict_path
    for location, tensor in pinned.items():
        target = folder / location
        if target in written:
            continue
        file = external_file(tensor, {}, None if source is None else source.parent, source)
        if target.resolve() != file.path.resolve():
            copies.append((target, read_bytes(file.path)))
    return copies


def _size_of(file: ExternalFile) -> int:
    try:
        return file.path.stat().st_size
    except OSError as exc:
        raise SerdeError(file.path, f"cannot read external data: {exc.strerror or exc}") from exc


def _set_location(proto: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    del proto.external_data[:]
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        proto.external_data.add(key=key, value=str(value))
    proto.data_location = onnx.TensorProto.EXTERNAL
    proto.ClearField("raw_data")


class _AllExternal:
    """Writes every initializer of at least ``threshold`` bytes into one data file, and the
    smaller ones inline (as onnx's ``save_model`` with a ``size_threshold`` does: a model
    saved with every tiny tensor outside, which onnxruntime may refuse, comes out loadable)."""

    def __init__(self, location: str, threshold: int) -> None:
        self.location = location
        self.threshold = threshold
        self.chunks: list[bytes] = []
        self.offset = 0
        self.external = 0  # initializers written with external data

    def __call__(self, name: str, tensor: Tensor) -> onnx.TensorProto:
        self.external += 1
        if tensor.nbytes < self.threshold or tensor.dtype == object:
            proto = tensor_to_proto(name, tensor)
            if proto.data_location == onnx.TensorProto.EXTERNAL and tensor.dtype != object:
                inline = onnx.numpy_helper.from_array(tensor.numpy(), name)
                inline.doc_string = proto.doc_string
                proto = inline
            if proto.data_location != onnx.TensorProto.EXTERNAL:
                self.external -= 1
                return proto
        array = tensor.numpy()
        proto = onnx.numpy_helper.from_array(array, name)
        chunk = proto.raw_data
        _set_location(proto, self.location, self.offset, len(chunk))
        self.chunks.append(chunk)
        self.offset += len(chunk)
        return proto

    def files(self, folder: Path) -> list[tuple[Path, bytes]]:
        return [(folder / self.location, b"".join(self.chunks))] if self.chunks else []

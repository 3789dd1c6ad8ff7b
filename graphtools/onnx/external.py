"""Reading and writing ONNX files, external data included.

torch's default exporter writes weights to ``<model>.onnx.data`` even for tiny models, so a
model is always read with its external tensors (resolved against the model file's folder, or a
``base_dir`` given for an in-memory model) and can be written with them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
from onnx import ModelProto, external_data_helper

from graphtools._core import ONNX
from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.serde.atomic import atomic_write_bytes, write_files
from graphtools.serde.onnx_io import save_onnx_model

__all__ = ["ModelSource", "load_onnx", "save_onnx"]

ModelSource = ModelProto | str | Path | bytes
"""What ``import_onnx`` accepts: a ModelProto, a path to a ``.onnx`` file, or its bytes."""


def _external_tensors(model: ModelProto) -> list[onnx.TensorProto]:
    return [
        t
        for t in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(t)
    ]


def load_onnx(source: ModelSource, *, base_dir: str | Path | None = None) -> ModelProto:
    """The ModelProto of ``source`` with every external tensor loaded into it.

    Args:
        source: a ModelProto (not modified: a copy is loaded when it refers to external
            data), a path to an ``.onnx`` file, or the file's bytes.
        base_dir: folder the external data locations are relative to, for a ModelProto or
            bytes (a path uses its own folder).

    Raises:
        SerdeError: the file is missing or not an ONNX model, or an external data file is
            missing or too short (naming the tensor and the file).
    """
    path: Path | None = None
    if isinstance(source, ModelProto):
        model = source
    elif isinstance(source, bytes):
        model = _parse(source, None)
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SerdeError(path, f"cannot read ONNX model: {exc.strerror or exc}") from exc
        model = _parse(data, path)
        base_dir = path.parent if base_dir is None else base_dir
    external = _external_tensors(model)
    if not external:
        return model
    if base_dir is None:
        names = ", ".join(repr(t.name) for t in external[:3])
        raise SerdeError(
            path,
            f"tensors {names} are stored as external data; pass base_dir (the folder of the "
            "model file) or load the model from its path",
        )
    if model is source:
        copy = ModelProto()
        copy.CopyFrom(model)
        model = copy
    base = Path(base_dir)
    for tensor in _external_tensors(model):
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = base / entries.get("location", "")
        try:
            info = external_data_helper.ExternalDataInfo(tensor)  # int() of offset and length
            external_data_helper.load_external_data_for_tensor(tensor, str(base))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:
            # onnx's reader says "not regular file" of a missing one, with no name
            raise SerdeError(
                location, f"cannot load external data of tensor {tensor.name!r}: {exc}"
            ) from exc
        expected = info.length
        if expected is not None and len(tensor.raw_data) != expected:
            raise SerdeError(
                location,
                f"external data of tensor {tensor.name!r} is {len(tensor.raw_data)} bytes, "
                f"its header says {expected}",
            )
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return model


def _parse(data: bytes, path: Path | None) -> ModelProto:
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError or RuntimeWarning subclasses
        raise SerdeError(path, f"not an ONNX model: {exc}") from exc
    if not model.HasField("graph"):
        raise SerdeError(path, "not an ONNX model: no graph")
    return model


def save_onnx(
    model: ModelProto | Model,
    path: str | Path,
    *,
    external_data: bool = False,
    size_threshold: int = 1024,
) -> Path:
    """Write ``model`` to ``path``; with ``external_data`` tensors of at least
    ``size_threshold`` bytes go to ``<path>.data`` beside it (``model`` is not modified).
    An ONNX-dialect ``Model`` (what ``load_model`` gives for an ``.onnx`` file) is written
    by ``graphtools.serde.onnx_io.save_onnx_model``, its external data kept as loaded.

    The model and its data file are written as a unit (``graphtools.serde.atomic``): a failed
    or interrupted export leaves the old files as they were. Models over protobuf's 2 GB limit
    need ``external_data=True``.

    Raises:
        SerdeError: the model cannot be serialised, or the folder cannot be written.
    """
    if isinstance(model, Model):
        if model.dialect != ONNX:
            raise SerdeError(
                path,
                f"this is a {model.dialect} model: export it to ONNX first (export_onnx)",
            )
        return save_onnx_model(
            model, path, external_data=external_data, size_threshold=size_threshold
        )
    path = Path(path)
    data_path = path.with_name(path.name + ".data")
    try:
        if not external_data:
            return atomic_write_bytes(path, model.SerializeToString())
        with tempfile.TemporaryDirectory() as staging:
            staged = Path(staging) / path.name
            copy = ModelProto()
            copy.CopyFrom(model)
            onnx.save_model(
                copy,
                str(staged),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=data_path.name,
                size_threshold=size_threshold,
            )
            files = [(path, staged.read_bytes())]
            staged_data = staged.with_name(data_path.name)
            if staged_data.exists():
                files.append((data_path, staged_data.read_bytes()))
    except ValueError as exc:  # protobuf's size limit, among others
        raise SerdeError(path, f"cannot serialise the model: {exc}") from exc
    stale = [] if len(files) > 1 or not data_path.exists() else [data_path]
    write_files(files, remove=stale)
    return path

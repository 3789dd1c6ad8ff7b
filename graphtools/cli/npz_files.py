"""The ``.npz`` files of the command line: input arrays (``--feeds``) and the inputs and
outputs ``verify --save-outputs`` records, read and written as numpy does, names kept as
given (any blob name, an Int8 blob with its scale and zero point)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from graphtools.errors import SerdeError, UsageError
from graphtools.serde.streams import read_stream_once


def load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name (``numpy.savez(path, data=x)``); a pipe
    (``--feeds <(...)``) is read once, as a model file from a pipe is."""
    if path.is_dir():
        raise SerdeError(path, f"cannot read {what}: a folder, not an .npz file")
    if not path.exists():
        raise SerdeError(path, f"cannot read {what}: no such file")
    source: Path | io.BytesIO = path
    if not path.is_file():
        try:
            source = io.BytesIO(read_stream_once(path))
        except OSError as exc:
            raise SerdeError(path, f"cannot read {what}: {exc.strerror or exc}") from exc
    if not zipfile.is_zipfile(source):
        raise SerdeError(path, "not an .npz archive of named arrays (write it with numpy.savez)")
    if isinstance(source, io.BytesIO):
        source.seek(0)  # is_zipfile read from its end
    try:
        with np.load(source, allow_pickle=False) as archive:
            return {name: _as_loaded(archive[name]) for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise SerdeError(path, f"cannot read {what}: {exc}") from exc


def _as_loaded(array: np.ndarray) -> np.ndarray:
    """A loaded array; numpy strings as an array of Python strings, as onnxruntime and our
    executor give string tensors (``npz_bytes`` saved them as numpy strings)."""
    return array.astype(object) if array.dtype.kind in "US" else array


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """What ``numpy.savez`` writes, built in memory; any blob name is fine (``savez(**arrays)``
    would take a blob named ``file`` or ``allow_pickle`` for its own argument). Strings (an
    ONNX STRING tensor is an array of Python strings) are saved as numpy strings.

    Raises:
        UsageError: an array holds other Python objects, which an ``.npz`` cannot keep.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _storable(name, array), allow_pickle=False)
    return buffer.getvalue()


def _storable(name: str, array: np.ndarray) -> np.ndarray:
    """``array``, with an array of Python strings (or bytes) as numpy's fixed-width kind."""
    array = np.asarray(array)
    if array.dtype != object:
        return array
    items = array.reshape(-1).tolist()
    for kind, nul in ((str, "\0"), (bytes, b"\0")):
        if all(isinstance(item, kind) for item in items):
            if any(item.endswith(nul) for item in items):  # numpy strings drop them
                raise UsageError(f"{name!r} holds strings ending in NUL: an .npz cannot keep them")
            return array.astype(kind)
    shown = sorted({type(item).__name__ for item in items})
    raise UsageError(f"{name!r} holds Python objects ({', '.join(shown)}): an .npz keeps arrays")


_INT8 = "int8/"
"""Prefix of the ``[scale, zero_point]`` of an Int8 input in a ``--save-outputs`` file."""


def saved_inputs(feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The ``inputs/NAME`` arrays of a ``--save-outputs`` file; an Int8 blob is its quantized
    values, with its ``int8/NAME`` = ``[scale, zero_point]``, so feeding it back gives the
    same Int8 blob (dequantized, an Int8 op would refuse it)."""
    from graphtools.executor import Int8Tensor

    arrays: dict[str, np.ndarray] = {}
    for name, value in feeds.items():
        if isinstance(value, Int8Tensor):
            arrays[f"inputs/{name}"] = value.values
            arrays[f"{_INT8}{name}"] = np.array([value.scale, value.zero_point], np.float64)
        else:
            arrays[f"inputs/{name}"] = np.asarray(value)
    return arrays


def feeds_of(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The feeds of an ``.npz`` file: its arrays, or the inputs of a file that
    ``verify --save-outputs`` wrote (``saved_inputs``: Int8 blobs rebuilt)."""
    if not (arrays and all(k.startswith(("inputs/", "outputs/", _INT8)) for k in arrays)):
        return dict(arrays)
    from graphtools.executor import Int8Tensor

    feeds: dict[str, Any] = {}
    for key, value in arrays.items():
        if key.startswith("inputs/"):
            name = key.removeprefix("inputs/")
            quantization = arrays.get(f"{_INT8}{name}")
            if quantization is not None and quantization.shape == (2,):
                scale, zero_point = quantization.tolist()
                feeds[name] = Int8Tensor(value, float(scale), int(zero_point))
            else:
                feeds[name] = value
    return feeds

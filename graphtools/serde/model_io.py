"""Loading and saving init_net/predict_net pairs as ``graphtools.ir.Model``.

Each file of a pair keeps its own format (binary or text) unless the caller asks for one, and a
pair is written as a unit (``atomic.write_files``: both files or neither, the folders locked
meanwhile). A write that would leave its folder ambiguous is refused before anything is
written: two candidate nets side by side (``predict_net.pb`` beside ``predict_net.pbtxt``), or
another model's init_net beside a predict-only model, which the next load would pair with it.
Replacing a file in place in the other format renames it (``predict_net.pbtxt`` becomes
``predict_net.pb``) and removes the old file in the same unit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from graphtools._core import ONNX
from graphtools.errors import InvalidArgumentError, SerdeError
from graphtools.ir import Model, Net, expect_model
from graphtools.serde.atomic import folder_for_write, recover_interrupted_write, write_files
from graphtools.serde.codec import net_from_netdef
from graphtools.serde.loaded_text import remember_text
from graphtools.serde.netdef_io import (
    TEXT_SUFFIXES,
    binary_net,
    netdef_bytes,
    parse_and_probe,
    read_bytes,
)
from graphtools.serde.sniff import ONNX_SUFFIX, is_blank_data, is_onnx_bytes

# Spellings seen in the wild, most specific first: predict_net.pb, squeeze_predict_net.pb,
# mobilenet_pred_net.pb, mobileNetPredict.pb, model.pb (mask_rcnn_2go), and their inits.
_PREDICT_PATTERNS = (
    re.compile(r"^predict_net\.pb(txt)?$"),
    re.compile(r"^.*pred(ict)?(_net)?\.pb(txt)?$", re.IGNORECASE),
    re.compile(r"^model\.pb(txt)?$"),
)
_INIT_PATTERNS = (
    re.compile(r"^init_net\.pb(txt)?$"),
    re.compile(r"^.*init(_net)?\.pb(txt)?$", re.IGNORECASE),
)


def load_model(
    predict_path: str | Path, init_path: str | Path | None = None, *, allow_empty: bool = False
) -> Model:
    """Load a predict_net file and, optionally, its init_net file into a ``Model``; an ONNX
    model file given alone loads as an ONNX-dialect model (``onnx_io.load_onnx_model``), a
    model folder given alone as ``load_model_dir`` loads it.

    ``allow_empty`` lets an empty init_net file through (a few published nets ship one).

    Raises:
        InvalidArgumentError: a path is neither a ``str`` nor a ``PathLike`` (a ModelProto,
            bytes: the message says how to load those).
        SerdeError: a file cannot be read or is not a model.
    """
    _expect_path(predict_path, "predict_path")
    if init_path is not None:
        _expect_path(init_path, "init_path")
    if init_path is None and Path(predict_path).is_dir():
        return load_model_dir(predict_path, allow_empty=allow_empty)
    data = read_bytes(predict_path)
    if init_path is None and is_onnx_bytes(data):
        from graphtools.serde.onnx_codec import model_from_onnx_bytes  # imports onnx

        return model_from_onnx_bytes(data, Path(predict_path))
    init_net = init_text = None
    if init_path is not None:
        init_net, init_text = load_ir_net(init_path, allow_empty=allow_empty)
    shared = () if init_net is None else init_net.external_outputs
    predict_net, was_text = _ir_net(data, predict_path, names_of=shared)
    if init_net is not None and init_path is not None:
        _refuse_swapped(predict_net, init_net, Path(predict_path), Path(init_path))
    return Model(
        predict_net,
        init_net,
        predict_path=Path(predict_path),
        init_path=None if init_path is None else Path(init_path),
        text=was_text,
        init_text=init_text,
    )


def _refuse_swapped(predict: Net, init: Net, predict_path: Path, init_path: Path) -> None:
    """Refuse a pair given the wrong way round: a "predict_net" of fills alone (no op reads a
    blob) with an "init_net" reading blobs it does not make (an init_net may derive one
    param from another). Usually one op tells (the first predict op with an input)."""
    if not len(predict) or any(op.inputs for op in predict):
        return
    written: set[str] = set()
    reader = None
    for op in init:  # an op reading what no earlier init op wrote: a predict_net's op
        if any(name not in written for name in op.inputs):
            reader = op
            break
        written.update(op.outputs)
    if reader is not None:
        raise SerdeError(
            predict_path,
            f"no op of this predict_net reads a blob (it fills {len(predict)} of them) while "
            f"the init_net {init_path} computes ({reader.type} reads {reader.inputs[0]!r}): "
            "the two files look swapped; give the predict_net first, its init_net second",
        )


def load_ir_net(path: str | Path, *, allow_empty: bool = False) -> tuple[Net, bool]:
    """Load one NetDef file straight into the IR; returns ``(net, was_text)``."""
    return _ir_net(read_bytes(path), path, allow_empty=allow_empty)


def _ir_net(
    data: bytes, path: str | Path, *, allow_empty: bool = False, names_of: Sequence[str] = ()
) -> tuple[Net, bool]:
    net = binary_net(data, path, names_of)
    if net is not None:
        return net, False
    netdef, was_text, probe = parse_and_probe(data, path, allow_empty=allow_empty)
    serialized = None if was_text else data
    net = net_from_netdef(netdef, serialized=serialized, probe=probe)
    if was_text:
        remember_text(net, data, path)
    return net, was_text


def is_predict_name(name: str) -> bool:
    """Whether a file name reads as a predict_net's (``predict_net.pb``, ``x_pred.pbtxt``)."""
    return any(pattern.match(name) for pattern in _PREDICT_PATTERNS)


def _first_matches(names: Iterable[str], patterns: tuple[re.Pattern[str], ...]) -> list[str]:
    """The names the most specific matching pattern accepts (empty when none matches)."""
    for pattern in patterns:
        matches = sorted(name for name in names if pattern.match(name))
        if matches:
            return matches
    return []


def _resolve(names: set[str]) -> tuple[list[str], list[str]]:
    """Candidate predict and init file names in a folder holding ``names`` (one of each, or
    none, when the folder is unambiguous)."""
    inits = _first_matches(names, _INIT_PATTERNS)
    predicts = _first_matches(names - set(inits) if len(inits) == 1 else names, _PREDICT_PATTERNS)
    return predicts, inits


def _file_names(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir() if p.is_file()}
    except OSError as exc:
        raise SerdeError(folder, f"cannot list the folder: {exc.strerror or exc}") from exc


def find_model_files(directory: str | Path) -> tuple[Path, Path | None]:
    """Locate ``(predict_net, init_net or None)`` in a model folder by the usual spellings."""
    folder = Path(directory)
    if not folder.is_dir():
        raise SerdeError(folder, "not a directory")
    recover_interrupted_write(folder)
    predicts, inits = _resolve(_file_names(folder))
    for found in (inits, predicts):
        if len(found) > 1:
            raise SerdeError(
                folder, f"several candidate nets ({', '.join(found)}): name the files instead"
            )
    if not predicts:
        onnx_files = sorted(name for name in _file_names(folder) if name.endswith(ONNX_SUFFIX))
        raise SerdeError(
            folder,
            "no predict net found (expected predict_net.pb or predict_net.pbtxt)"
            + (
                f"; an ONNX model loads from its file: {folder / onnx_files[0]}"
                if onnx_files
                else "; no .onnx model either"
            ),
        )
    return folder / predicts[0], folder / inits[0] if inits else None


def _expect_path(value: object, what: str, function: str = "load_model") -> None:
    if isinstance(value, str | os.PathLike):
        return
    kind = type(value).__name__
    if function != "load_model":
        raise InvalidArgumentError(f"{function}'s {what} is a path, not a {kind}")
    if kind == "ModelProto":
        how = "; an onnx.ModelProto in memory loads with graphtools.serde.onnx_codec."
        how += "model_from_onnx_bytes(proto.SerializeToString())"
    elif isinstance(value, bytes | bytearray | memoryview):
        how = "; bytes in memory load with graphtools.serde.codec.net_from_bytes (a binary "
        how += "NetDef) or graphtools.serde.onnx_codec.model_from_onnx_bytes (an ONNX model)"
    else:
        how = ""
    raise InvalidArgumentError(f"load_model's {what} is a file path, not a {kind}{how}")


def load_model_dir(directory: str | Path, *, allow_empty: bool = False) -> Model:
    """Load the model in ``directory`` (``predict_net.pb(txt)``, ``init_net.pb(txt)``, ...)."""
    predict, init = find_model_files(directory)
    return load_model(predict, init, allow_empty=allow_empty)


# -- saving -------------------------------------------------------------------------------------


def _formats(model: Model, text: bool | None) -> tuple[bool, bool]:
    """The format (``True``: text) each file is written in: as loaded unless ``text`` says."""
    if text is not None:
        return text, text
    return model.text, model.text if model.init_text is None else model.init_text


def model_output_paths(
    model: Model, directory: str | Path, *, text: bool | None = None
) -> list[Path]:
    """The files ``save_model(model, directory, text=text)`` writes, predict_net first."""
    folder = Path(directory)
    predict_text, init_text = _formats(model, text)
    paths = [folder / f"predict_net{'.pbtxt' if predict_text else '.pb'}"]
    if model.init_net is not None:
        paths.append(folder / f"init_net{'.pbtxt' if init_text else '.pb'}")
    return paths


def _pair_bytes(model: Model, paths: list[Path], formats: tuple[bool, bool]) -> list[bytes]:
    """Both files' contents, made (and checked) before anything touches the disk."""
    if model.dialect == ONNX:
        raise SerdeError(
            paths[0],
            "this is an ONNX model (loaded from .onnx, or a pipeline converted it): a Caffe2 "
            "pair cannot hold its nodes; write it to an .onnx file (-o OUT.onnx)",
        )
    data = [netdef_bytes(model.predict_net, text=formats[0], path=paths[0])]
    if is_blank_data(data[0]):
        raise SerdeError(
            paths[0],
            "refusing to write an empty predict_net (no ops, no name, no external inputs or "
            "outputs): an empty file is what a failed download looks like, and loaders refuse it",
        )
    if model.init_net is not None:
        data.append(netdef_bytes(model.init_net, text=formats[1], path=paths[1]))
    return data


def _refuse_ambiguous(folder: Path, written: list[Path], removed: Iterable[Path] = ()) -> None:
    """Refuse a write after which loading ``folder`` would not find exactly ``written``."""
    if not folder.is_dir():
        return
    ours = [p.name for p in written]
    after = (_file_names(folder) - {p.name for p in removed}) | set(ours)
    predicts, inits = _resolve(after)
    for found in (predicts, inits):
        if len(found) > 1:
            others = ", ".join(name for name in found if name not in ours)
            raise SerdeError(
                folder,
                f"writing {', '.join(ours)} here would leave {', '.join(found)} side by side, "
                f"and loading the folder could not tell which to use: remove {others} or write "
                "into another folder",
            )
    if inits and inits[0] not in ours:
        raise SerdeError(
            folder,
            f"the folder holds {inits[0]}, which loading it would pair with the predict-only "
            f"model written here; remove it or write into another folder",
        )
    if predicts[:1] != ours[:1]:
        raise SerdeError(
            folder,
            f"loading the folder after writing {', '.join(ours)} would find the predict net "
            f"{predicts[0] if predicts else 'none'}; remove it or write into another folder",
        )


def check_output_folder(model: Model, directory: str | Path, *, text: bool | None = None) -> None:
    """Refuse (``SerdeError``) up front what ``save_model`` would refuse for leaving
    ``directory`` ambiguous, before any work is spent on the model."""
    _refuse_ambiguous(Path(directory), model_output_paths(model, directory, text=text))


def save_model(model: Model, directory: str | Path, *, text: bool | None = None) -> list[Path]:
    """Write ``predict_net`` and ``init_net`` into ``directory`` as one unit; an ONNX-dialect
    model is one file, which ``directory`` names (``onnx_io.save_onnx_model``, its external
    data beside it).

    Files are named ``predict_net``/``init_net`` with ``.pb`` for binary and ``.pbtxt`` for text;
    each keeps the format it was loaded in unless ``text`` asks for one. The folder is created
    when missing (and removed again when the write fails).

    Raises:
        SerdeError: the folder would be left ambiguous, is being written by another process
            or cannot be written; the nets cannot be written so that they load again; an
            ONNX model given a folder, or a Caffe2 pair given an ``.onnx`` path.
        InvalidArgumentError: ``model`` is not a graphtools ``Model``, or ``directory`` not
            a path.
    """
    model = expect_model(model, "save_model")
    _expect_path(directory, "directory", "save_model")
    folder = Path(directory)
    if model.dialect == ONNX:
        if os.fspath(directory).endswith(("/", os.sep)):  # a folder meant, missing or not
            raise SerdeError(
                folder,
                f"an ONNX model is one file: name it (say {folder / 'model.onnx'}), not a folder",
            )
        return [_save_onnx(model, folder, text)]
    if folder.suffix.lower() == ONNX_SUFFIX:
        raise SerdeError(
            folder,
            "this names an ONNX file, but the model is a Caffe2 pair, which is written to a "
            "folder: convert it first (graphtools.onnx.export_onnx; the CLI's export-onnx)",
        )
    paths = model_output_paths(model, folder, text=text)
    data = _pair_bytes(model, paths, _formats(model, text))
    _refuse_ambiguous(folder, paths)
    with folder_for_write(folder):
        return write_files(list(zip(paths, data, strict=True)))


def _save_onnx(model: Model, path: Path, text: bool | None, *, replace_data: bool = False) -> Path:
    """Write an ONNX-dialect model to the file ``path`` (binary: ONNX has no text format that
    loads back), creating its folder as a pair's is created."""
    if text:
        raise SerdeError(path, "an ONNX model is written in its binary format only (text=True)")
    if path.is_dir():
        raise SerdeError(
            path, f"an ONNX model is one file: name it (say {path / 'model.onnx'}), not a folder"
        )
    from graphtools.serde.onnx_io import save_onnx_model  # imports onnx

    with folder_for_write(path.parent):
        return save_onnx_model(model, path, replace_data=replace_data)


def _renamed_for(path: Path, text: bool) -> Path:
    """``path`` with the suffix of the format ``text`` asks for, when its suffix names one."""
    suffix = path.suffix.lower()
    if text and suffix == ".pb":
        return path.with_suffix(".pbtxt")
    if not text and suffix in TEXT_SUFFIXES:
        return path.with_suffix(".pb")
    return path


def save_model_in_place(model: Model, *, text: bool | None = None) -> tuple[list[Path], list[Path]]:
    """Write the model back over the files it was loaded from, as one unit.

    Each file keeps its format unless ``text`` asks for one; a file whose format changes is
    renamed to match (``predict_net.pbtxt`` -> ``predict_net.pb``) and the old file removed.
    The model's paths and formats are updated. Returns ``(written, removed)``.

    Raises:
        SerdeError: the model has no files to write back to, a renamed file would replace
            another file, or the write fails (nothing is changed then).
    """
    if model.predict_path is None:
        raise SerdeError(None, "the model was not loaded from a file: there is nothing to replace")
    if model.dialect == ONNX:  # its data files too: they are the model's own
        return [_save_onnx(model, model.predict_path, text, replace_data=True)], []
    if model.init_net is not None and model.init_path is None:
        raise SerdeError(
            model.predict_path, "the init_net was not loaded from a file: save the model elsewhere"
        )
    sources = [model.predict_path]
    if model.init_net is not None and model.init_path is not None:
        sources.append(model.init_path)
    formats = _formats(model, text)
    targets = [p if text is None else _renamed_for(p, text) for p in sources]
    removed = [s for s, t in zip(sources, targets, strict=True) if s != t]
    for source, target in zip(sources, targets, strict=True):
        if target != source and target.exists() and target.resolve() not in _resolved(sources):
            raise SerdeError(
                target,
                f"replacing {source.name} in the other format would overwrite this file, which "
                "is not one of the model's files: remove it first",
            )
    data = _pair_bytes(model, targets, formats)
    folder = targets[0].parent
    if _resolves_to(folder, sources):
        _refuse_ambiguous(folder, targets, removed)
    written = write_files(list(zip(targets, data, strict=True)), remove=removed)
    model.predict_path, model.text = targets[0], formats[0]
    if model.init_net is not None:
        model.init_path, model.init_text = targets[1], formats[1]
    return written, removed


def _resolved(paths: Iterable[Path]) -> set[Path]:
    return {p.resolve() for p in paths}


def _resolves_to(folder: Path, sources: list[Path]) -> bool:
    """Whether loading ``folder`` finds exactly the model's files (it was loaded as a folder)."""
    try:
        predict, init = find_model_files(folder)
    except SerdeError:
        return False
    found = [predict] + ([init] if init is not None else [])
    return _resolved(found) == _resolved(sources) and len(found) == len(sources)

"""Which init_net goes with a predict_net file, and which models a folder holds.

Netron opens ``predict_net.pb`` with the ``init_net.pb`` beside it; graphtools does the same
for a predict_net file given alone. The partner is looked up by name: the predict file's stem
with its ``predict``/``pred`` part (``predict_net``, ``_pred_net``, ``Predict``, ``_predict``)
replaced by the matching ``init`` spelling, or with ``_init``/``_init_net`` appended (glow's
``concat.pbtxt`` + ``concat_init.pbtxt``), in either extension. A name that fits several
files finds none (the caller then says so and asks for ``--init``).

``discover_models`` expands folders for batch runs: a model folder (``find_model_files``
succeeds) is one model; any other folder yields its model sub-folders, every NetDef-named
file in it that is neither the init partner of another nor named as an init_net (each with its
partner) and every ``.onnx`` file (alone: an ONNX model has no partner), recursively.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from graphtools.errors import SerdeError
from graphtools.serde.model_io import find_model_files, is_predict_name

__all__ = [
    "ModelRef",
    "discover_models",
    "find_init_beside",
    "init_candidates",
    "inits_in_two_formats",
    "is_one_model_folder",
    "left_out_note",
    "nets_left_beside",
]

_EXTENSIONS = (".pb", ".pbtxt")
_ONNX = ".onnx"
# (pattern on the stem, replacement), most specific first.
_RENAMES = (
    (re.compile(r"predict_net$"), "init_net"),
    (re.compile(r"pred_net$"), "init_net"),
    (re.compile(r"Predict$"), "Init"),
    (re.compile(r"predict$"), "init"),
    (re.compile(r"_net$"), "_init"),
)
_INIT_NAME = re.compile(r"(^|_)init(_net)?$|Init$", re.IGNORECASE)


def init_candidates(predict: Path) -> list[Path]:
    """The init_net names tried for ``predict``, in order (existing or not)."""
    stem = predict.stem
    stems: list[str] = []
    for pattern, replacement in _RENAMES:
        if pattern.search(stem):
            stems.append(pattern.sub(replacement, stem))
    stems += [f"{stem}_init_net", f"{stem}_init"]
    if stem == "model":
        stems.append("model_init")
    seen: list[Path] = []
    for candidate in stems:
        for extension in _EXTENSIONS:
            path = predict.with_name(candidate + extension)
            if path not in seen and path != predict:
                seen.append(path)
    return seen


def find_init_beside(predict: str | Path) -> Path | None:
    """The init_net file beside ``predict`` by the naming rules, or ``None`` (no file, or
    several spellings exist)."""
    path = Path(predict)
    if _INIT_NAME.search(path.stem) or path.suffix.lower() == _ONNX:
        return None  # an init_net file itself has no partner, nor has an ONNX model
    for candidate in init_candidates(path):
        if candidate.is_file():
            other = candidate.with_suffix(".pbtxt" if candidate.suffix == ".pb" else ".pb")
            return None if other.is_file() else candidate
    return None


def inits_in_two_formats(predict: str | Path) -> list[Path]:
    """The two files of the init_net name ``find_init_beside`` stops at because it exists in
    both formats (``init_net.pb`` and ``init_net.pbtxt``), ``[]`` when it found one or none: the
    caller asks which (``--init``) rather than load ``predict`` without parameters."""
    path = Path(predict)
    if _INIT_NAME.search(path.stem) or path.suffix.lower() == _ONNX:
        return []
    for candidate in init_candidates(path):
        if candidate.is_file():
            other = candidate.with_suffix(".pbtxt" if candidate.suffix == ".pb" else ".pb")
            return sorted((candidate, other)) if other.is_file() else []
    return []


@dataclass(frozen=True)
class ModelRef:
    """One model found for a batch run: a folder, or a predict_net file and its init_net.

    Attributes:
        path: the model folder or predict_net file, as the user will see it.
        init: the init_net file for a predict_net file (``None`` for a folder or none found).
        name: a unique short name (for output folders and the summary table).
    """

    path: Path
    init: Path | None
    name: str


def _is_model_folder(folder: Path) -> bool:
    try:
        find_model_files(folder)
    except SerdeError:
        return False
    return True


def is_one_model_folder(folder: Path) -> bool:
    """Whether a folder is one model to a batch: ``find_model_files`` finds its pair, and it
    holds no other model: no other file named as a predict_net, no ``.onnx`` file, no
    sub-folder holding a model (glow's folder of 139 pairs holds a ``predict_net.pbtxt`` too;
    a folder of model folders may hold a loose predict file): such a folder is a batch."""
    try:
        predict, _ = find_model_files(folder)
    except SerdeError:
        return False
    for entry in folder.iterdir():
        if entry.is_dir():
            if _is_model_folder(entry) or _walk(entry, set()):
                return False
        elif entry.suffix.lower() == _ONNX or (
            entry != predict and entry.suffix in _EXTENSIONS and is_predict_name(entry.name)
        ):
            return False
    return True


def nets_left_beside(folder: Path) -> tuple[Path, list[Path]]:
    """The predict_net file ``find_model_files`` takes from a model folder, and the other
    NetDef-named files in it, which loading the folder leaves out (AICamera's ``history/``
    holds ``shufflenet_predict.pb`` and two versioned ``squeeze_predict_net_NNNN.pb``)."""
    predict, init = find_model_files(folder)
    taken = {p.resolve() for p in (predict, init) if p is not None}  # a link's target is it
    others = [p for p in folder.iterdir() if p.suffix in _EXTENSIONS and p.resolve() not in taken]
    return predict, sorted(p for p in others if p.is_file())


def left_out_note(folder: Path) -> str | None:
    """The note naming the nets ``nets_left_beside`` finds (``None`` when there are none):
    the commands say it rather than let a user believe every net of the folder was read."""
    predict, others = nets_left_beside(folder)
    if not others:
        return None
    shown = ", ".join(p.name for p in others[:3]) + (", ..." if len(others) > 3 else "")
    verb = "is" if len(others) == 1 else "are"
    return (
        f"{folder}: the model is {predict.name}; {shown} beside it {verb} not read (name a "
        "file to read it)"
    )


def discover_models(paths: Iterable[str | Path]) -> list[ModelRef]:
    """The models under ``paths`` (files and folders), in order, with unique names.

    A model is named by its path under the folder given (``2018-12_fp32`` for
    ``zoo/2018-12/fp32`` found under ``zoo``), a model given itself by its own name (a file's
    stem); models whose names would clash are named by their paths under the folder they
    share (an extension kept only for twins in two formats, ``_2`` for a model given twice).

    Raises:
        SerdeError: a path does not exist, is neither a file nor a folder, or is a folder
            holding no model.
    """
    found: list[tuple[Path, Path | None, Path]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append((path, find_init_beside(path), path))
        elif path.is_dir() and is_one_model_folder(path):
            found.append((path, None, path))
        elif path.is_dir():
            under = _walk(path, set())
            if not under:
                raise SerdeError(
                    path,
                    "no model found in this folder (a model is a .pb, .pbtxt or .onnx file, or "
                    "a folder holding predict_net.pb or .pbtxt)",
                )
            found += [(model, init, path) for model, init in under]
        elif path.exists():  # a pipe, a device
            raise SerdeError(
                path, "neither a file nor a folder (a pipe?): a batch reads model files"
            )
        else:
            raise SerdeError(path, "no such file or folder")
    return _named(found)


def _walk(folder: Path, seen: set[Path]) -> list[tuple[Path, Path | None]]:
    """The models under a folder that is not a model folder itself: its model sub-folders,
    and its NetDef-named files that are neither another's init_net nor named as one (an init_net
    whose partner is ambiguous is no model to run), each with its partner (``.onnx`` in any
    case). A folder met again through a link (``seen``) is skipped."""
    real = folder.resolve()
    if real in seen:
        return []
    seen.add(real)
    found: list[tuple[Path, Path | None]] = []
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in _EXTENSIONS)
    partners = {find_init_beside(p) for p in files} - {None}
    found += [
        (p, find_init_beside(p))
        for p in files
        if p not in partners and not _INIT_NAME.search(p.stem)
    ]
    found += [
        (p, None) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix.lower() == _ONNX
    ]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        found += [(sub, None)] if is_one_model_folder(sub) else _walk(sub, seen)
    return found


def _label(path: Path, under: Path, keep_suffix: bool = False) -> str:
    """``path``'s parts below ``under`` joined by ``_`` (its own name when it is ``under``);
    a file's extension is dropped unless ``keep_suffix``."""
    parts = list(path.relative_to(under).parts) if path != under else [path.name]
    if path.is_file():
        parts[-1] = parts[-1].replace(".", "_") if keep_suffix else Path(parts[-1]).stem
    return "_".join(parts)


def _named(found: list[tuple[Path, Path | None, Path]]) -> list[ModelRef]:
    """Name each model (see ``discover_models``)."""
    names = [_label(path, root) for path, _, root in found]
    groups: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        groups.setdefault(name, []).append(index)
    for members in groups.values():
        if len(members) < 2:
            continue
        paths = [found[i][0].resolve() for i in members]
        shared = Path(os.path.commonpath([p.parent for p in paths]))
        stems = {p: _label(p, shared) for p in paths}
        for i, path in zip(members, paths, strict=True):
            twin = any(o != path and stem == stems[path] for o, stem in stems.items())
            if shared == path.parent:  # one folder: twins in two formats keep their prefix
                names[i] = _label(found[i][0], found[i][2], keep_suffix=twin)
            else:
                names[i] = _label(path, shared, keep_suffix=twin)
    seen: dict[str, int] = {}
    refs = []
    for (path, init, _), name in zip(found, names, strict=True):
        name = _fitting(name)
        seen[name] = seen.get(name, 0) + 1
        refs.append(ModelRef(path, init, name if seen[name] == 1 else f"{name}_{seen[name]}"))
    return refs


_NAME_BYTES = 200
"""The longest model name kept whole: a name is a file or folder name of the output (255
bytes at most on common file systems), with room for a ``_2`` or a file's suffix."""


def _fitting(name: str) -> str:
    """``name``, or when too long for a file name its start and a digest of the whole."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) <= _NAME_BYTES:
        return name
    import hashlib

    digest = hashlib.sha256(encoded).hexdigest()[:12]
    start = encoded[: _NAME_BYTES - len(digest) - 1].decode("utf-8", "ignore")
    return f"{start}_{digest}"

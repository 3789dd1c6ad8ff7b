"""Loading and saving init_net/predict_net pairs as ``graphtools.ir.Model``."""

from __future__ import annotations

import re
from pathlib import Path

from graphtools.errors import SerdeError
from graphtools.ir import Model, Net
from graphtools.serde.codec import net_from_netdef
from graphtools.serde.netdef_io import parse_netdef, read_bytes, save_net

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
    """Load a predict_net file and, optionally, its init_net file into a ``Model``.

    ``allow_empty`` lets an empty init_net file through (a few published nets ship one).
    """
    init_net = None
    if init_path is not None:
        init_net = load_ir_net(init_path, allow_empty=allow_empty)[0]
    predict_net, was_text = load_ir_net(predict_path)
    return Model(
        predict_net,
        init_net,
        predict_path=Path(predict_path),
        init_path=None if init_path is None else Path(init_path),
        text=was_text,
    )


def load_ir_net(path: str | Path, *, allow_empty: bool = False) -> tuple[Net, bool]:
    """Load one NetDef file straight into the IR; returns ``(net, was_text)``."""
    data = read_bytes(path)
    netdef, was_text = parse_netdef(data, path, allow_empty=allow_empty)
    return net_from_netdef(netdef, serialized=None if was_text else data), was_text


def _find(
    directory: Path, patterns: tuple[re.Pattern[str], ...], exclude: set[Path]
) -> Path | None:
    files = sorted(p for p in directory.iterdir() if p.is_file() and p not in exclude)
    for pattern in patterns:
        matches = [p for p in files if pattern.match(p.name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(p.name for p in matches)
            raise SerdeError(directory, f"several candidate nets ({names}): name the files instead")
    return None


def find_model_files(directory: str | Path) -> tuple[Path, Path | None]:
    """Locate ``(predict_net, init_net or None)`` in a model folder by the usual spellings."""
    folder = Path(directory)
    if not folder.is_dir():
        raise SerdeError(folder, "not a directory")
    init = _find(folder, _INIT_PATTERNS, set())
    predict = _find(folder, _PREDICT_PATTERNS, {init} if init else set())
    if predict is None:
        raise SerdeError(
            folder, "no predict net found (expected predict_net.pb or predict_net.pbtxt)"
        )
    return predict, init


def load_model_dir(directory: str | Path, *, allow_empty: bool = False) -> Model:
    """Load the model in ``directory`` (``predict_net.pb(txt)``, ``init_net.pb(txt)``, ...)."""
    predict, init = find_model_files(directory)
    return load_model(predict, init, allow_empty=allow_empty)


def save_model(model: Model, directory: str | Path, *, text: bool | None = None) -> list[Path]:
    """Write ``predict_net`` and ``init_net`` into ``directory``, each atomically.

    Binary files are named ``predict_net.pb``/``init_net.pb``; text files (``text=True``, or a
    model loaded from text when ``text`` is ``None``) ``predict_net.pbtxt``/``init_net.pbtxt``.
    """
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SerdeError(folder, f"cannot create output folder: {exc.strerror or exc}") from exc
    use_text = model.text if text is None else text
    suffix = ".pbtxt" if use_text else ".pb"
    written = [save_net(model.predict_net, folder / f"predict_net{suffix}", text=use_text)]
    if model.init_net is not None:
        written.append(save_net(model.init_net, folder / f"init_net{suffix}", text=use_text))
    return written

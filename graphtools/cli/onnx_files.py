"""ONNX model files on the command line: telling one by its content, the files a model is
made of, what onnx's checker says about a file, and writing a model with its external data.

A file is an ONNX model when its name ends in ``.onnx`` (the fast path) or when its bytes are
a ModelProto (``graphtools.serde.sniff.looks_like_onnx``); anything else goes to the NetDef
loader, which says what a file is when it is neither. Telling costs no import of onnx: the
ONNX codec is imported by the functions that read or write a model, so that ``show`` of a
Caffe2 pair never loads it.

onnx's checker (``onnx.checker.check_model(full_check=True)``) is a second opinion: graphtools
loads and rewrites models it rejects (an op of a domain the checker does not know, a type the
exporter left out), so its verdict on an input is a warning; on an output it is an error only
when the input passed it (a rewrite must not break a valid model).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.serde.netdef_io import is_stream, read_bytes
from graphtools.serde.sniff import ONNX_FIRST_BYTE, ONNX_SUFFIX, is_blank_data, is_onnx_bytes
from graphtools.values import ValueType

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

_T = TypeVar("_T")

__all__ = [
    "ONNX_SUFFIX",
    "InputCheck",
    "Pending",
    "checker_problem",
    "inferred_types",
    "is_onnx_file",
    "isolated",
    "load_onnx_file",
    "model_files",
    "output_files",
]


_MODEL_SUFFIXES = frozenset({ONNX_SUFFIX, ".pb", ".pbtxt"})


def one_onnx_model(folder: Path) -> Path | None:
    """The ONNX model a folder stands for: its one ``.onnx`` file, when nothing else in it
    could be a model (no NetDef file, no sub-folder holding a model file; a sub-folder of
    external data is fine); ``None`` otherwise. Every command takes such a folder as that
    model, and only a folder of several models as a batch."""
    models: list[Path] = []
    for entry in folder.iterdir():
        suffix = entry.suffix.lower()
        if entry.is_dir():
            if any(p.suffix.lower() in _MODEL_SUFFIXES for p in entry.rglob("*")):
                return None
        elif suffix == ONNX_SUFFIX:
            models.append(entry)
        elif suffix in _MODEL_SUFFIXES:
            return None
    return models[0] if len(models) == 1 else None


def is_onnx_file(path: str | Path) -> bool:
    """Whether ``path`` names an ONNX model: by its suffix, else (for an existing file) by
    its content."""
    source = Path(path)
    if source.suffix.lower() == ONNX_SUFFIX:
        return not source.is_dir()
    if is_stream(source):  # read whole (and kept): a pipe gives its bytes once
        try:
            data = read_bytes(source)
        except SerdeError:
            return False  # the NetDef loader says why it cannot read it
        return is_onnx_bytes(data)
    if not source.is_file():
        return False
    try:
        with source.open("rb") as handle:
            first = handle.read(1)
    except OSError:
        return False  # the NetDef loader says why it cannot read it
    return first == bytes([ONNX_FIRST_BYTE]) and is_onnx_bytes(read_bytes(source))


def load_onnx_file(path: str | Path, data: bytes | None = None) -> Model:
    """Load an ONNX model file (external data stays in its files until read); ``data``: its
    bytes, when they were read already (from a pipe, which reads once).

    Raises:
        SerdeError: the file cannot be read, is empty or is not a valid ONNX model; a model
            read from a pipe keeps external data that is not beside the pipe.
    """
    from graphtools.serde.onnx_codec import external_tensors, model_from_onnx_bytes

    source = Path(path)
    piped = is_stream(source)
    if data is None:
        data = read_bytes(source)
    if is_blank_data(data):
        raise SerdeError(source, "the file is empty; an ONNX model file must hold a model")
    model = model_from_onnx_bytes(data, source)
    if piped:  # its external data is looked for beside the pipe (/dev/fd for <(...))
        for _, name, tensor in external_tensors(model):
            location = tensor.external.location  # type: ignore[attr-defined]
            if not (source.parent / location).is_file():
                raise SerdeError(
                    source,
                    f"read from a pipe, the model keeps initializer {name!r} in {location}, "
                    f"which is not in {source.parent}: give the model file's path instead",
                )
    return model


def model_files(model: Model) -> list[Path]:
    """The files an ONNX model was loaded from: the model file and its external data files
    (resolved)."""
    from graphtools.serde.onnx_codec import external_tensors

    found: dict[Path, None] = {}
    if model.predict_path is not None:
        found[model.predict_path.resolve()] = None
    for _, _, tensor in external_tensors(model):
        external = getattr(tensor, "external", None)
        if external is not None:
            found[external.path.resolve()] = None
    return list(found)


def output_files(
    model: Model, target: Path, *, external_data: bool = False, data_location: str | None = None
) -> list[tuple[Path, bytes]]:
    """``(path, bytes)`` of what writing ``model`` to ``target`` writes (model file first):
    external data as loaded beside it, or with ``external_data`` every initializer of 1 KB
    or more in ``<target>.data`` (or ``data_location``, beside ``target``).

    Raises:
        SerdeError: the model cannot be written as ONNX or a data file would lie outside the
            target's folder.
    """
    from graphtools.serde.onnx_io import onnx_model_files

    files = onnx_model_files(
        model, target, external_data=external_data, data_location=data_location
    )
    folder = target.parent.resolve()
    for path, _ in files[1:]:
        if not path.resolve().is_relative_to(folder):
            raise SerdeError(path, f"external data would be written outside {folder}; refused")
    return files


def checker_problem(
    files: Sequence[tuple[Path, bytes]] | Path, model: Model | None = None
) -> str | None:
    """What ``onnx.checker.check_model(full_check=True)`` rejects in a model file (``Path``)
    or in the files about to be written for ``model``, or ``None`` when it accepts it.

    Files to be written are checked in a temporary folder, beside the external data files
    they refer to (the checker reads them, and refuses symbolic and hard links): those
    written with them, and copies of those already in the target folder that the write keeps
    (an unchanged data file is not written again). The checker runs in a child process (see
    ``isolated``); a crash is its verdict.
    """
    import tempfile

    from graphtools.serde.onnx_codec import external_tensors

    if isinstance(files, Path):
        return InputCheck(files).problem()
    if len(files) == 1 and (model is None or not external_tensors(model)):
        return _verdict(isolated(_check, files[0][1]))
    with tempfile.TemporaryDirectory(prefix="graphtools-check-") as folder:
        return checker_problem(_staged(files, model, Path(folder)))


class InputCheck:
    """onnx's checker on a model file, started at once in a child process (``Pending``):
    started before the file is loaded, it runs while graphtools loads and rewrites the model
    (the checker's full check is about as long as load and pipeline together), and costs
    only the wait for what is left of it when ``problem`` is asked. Use it as a context
    manager, so that a run that fails stops the child.

    A path that is not a regular file (a named pipe: ``run <(...)``) can be read only once:
    its bytes are read here, the checker gets them, and ``data`` hands them to the load.
    """

    def __init__(self, path: Path) -> None:
        self.data: bytes | None = None
        source: str | bytes = str(path)
        if path.exists() and not path.is_file():
            self.data = source = read_bytes(path)
        self._pending = Pending(_check, source)

    def problem(self) -> str | None:
        """The checker's verdict, as ``checker_problem`` gives it; waits for the child."""
        return _verdict(self._pending.result())

    def __enter__(self) -> InputCheck:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pending.cancel()


def _verdict(outcome: tuple[str | None, str | None]) -> str | None:
    crashed, verdict = outcome
    return f"onnx's checker crashed on the model ({crashed})" if crashed else verdict


def _check(source: str | bytes) -> str | None:
    import onnx

    try:
        onnx.checker.check_model(source, full_check=True)
    except Exception as exc:  # the checker raises ValidationError, InferenceError and others
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return " ".join(lines[:2])[:300] or type(exc).__name__
    return None


def inferred_types(model: Model, names: Sequence[str]) -> dict[str, ValueType]:
    """The types ``onnx.shape_inference`` gives the values ``names`` of the main graph (those
    it can type), inferred in a child process (see ``isolated``)."""
    from graphtools.serde.onnx_codec import model_to_onnx_bytes, value_type_from_proto

    data = model_to_onnx_bytes(model)
    crashed, found = isolated(_infer, data, tuple(names))
    if crashed or not found:
        return {}
    return {name: value_type_from_proto(_value_info(raw)) for name, raw in found.items()}


def _value_info(raw: bytes) -> Any:
    import onnx

    return onnx.ValueInfoProto.FromString(raw)


def _infer(data: bytes, names: tuple[str, ...]) -> dict[str, bytes]:
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(onnx.ModelProto.FromString(data))
    except Exception:  # inference refusing leaves the values untyped
        return {}
    graph = inferred.graph
    wanted = set(names)
    return {
        info.name: info.SerializeToString()
        for info in (*graph.value_info, *graph.output, *graph.input)
        if info.name in wanted and info.type.HasField("tensor_type")
    }


def _child(fn: Callable[..., Any], args: tuple[Any, ...], writer: Connection) -> None:
    # The parent answers for signals (it stops this child when it stops): Ctrl-C reaches the
    # whole process group, and the handlers inherited from the parent, which raise, would
    # have the child print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    writer.send(fn(*args))
    writer.close()


class Pending(Generic[_T]):
    """``fn(*args)`` at work in a forked child (where fork exists; else computed here when
    asked): started now, so that it runs beside what this process does meanwhile (the
    machine's other core), and collected by ``result``.

    ``cancel`` (or leaving its ``with`` block without having asked for the result) kills a
    child still at work: a command that fails does not leave it running, nor does one
    interrupted while it waits for the result. When no child can be started (no fork, or
    the system refuses one), ``fn`` runs here when the result is asked for.
    """

    def __init__(self, fn: Callable[..., _T], *args: Any) -> None:
        import multiprocessing  # here: a command that checks no ONNX file does not load it

        self._fn, self._args = fn, args
        self._outcome: tuple[str | None, _T | None] | None = None
        self._child: Any = None
        self._reader: Connection | None = None
        if "fork" not in multiprocessing.get_all_start_methods():
            return
        context = multiprocessing.get_context("fork")
        reader, writer = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(fn, args, writer), daemon=True)
        try:
            child.start()
        except OSError:  # no process to spare (EAGAIN, ENOMEM): computed here when asked
            reader.close()
            return
        finally:
            writer.close()
        self._child, self._reader = child, reader

    def result(self) -> tuple[str | None, _T | None]:
        """``(None, fn(*args))``, or ``(how the child crashed, None)``; waits for the child."""
        if self._outcome is None:
            self._outcome = self._collect()
        return self._outcome

    def _collect(self) -> tuple[str | None, _T | None]:
        if self._child is None:
            return None, self._fn(*self._args)
        assert self._reader is not None
        try:
            result: _T | None = self._reader.recv()
        except EOFError:  # the child died before it could answer
            result = None
        except BaseException:  # interrupted while waiting: the answer is no longer wanted
            self._outcome = ("cancelled", None)
            self._child.kill()
            raise
        finally:
            self._reader.close()
            self._child.join()
        code = self._child.exitcode or 0
        if code != 0:
            return (f"signal {-code}" if code < 0 else f"exit status {code}"), None
        return None, result

    def cancel(self) -> None:
        """Stop the child if it is still at work (its result is no longer wanted)."""
        if self._outcome is not None or self._child is None:
            return
        self._outcome = ("cancelled", None)
        self._child.kill()
        self._child.join()
        assert self._reader is not None
        self._reader.close()

    def __enter__(self) -> Pending[_T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()


def isolated(fn: Callable[..., _T], *args: Any) -> tuple[str | None, _T | None]:
    """``(None, fn(*args))`` computed in a forked child (where fork exists; else here), or
    ``(how it crashed, None)``.

    onnx's C++ code (the checker's shape inference) dies with a segmentation fault on some
    damaged models; that is not an exception, and it must not take the command down.
    """
    return Pending(fn, *args).result()


def _staged(files: Sequence[tuple[Path, bytes]], model: Model | None, folder: Path) -> Path:
    """Write ``files`` into ``folder`` as they would lie in their own, link the kept data
    files beside them; the staged model file."""
    import shutil

    from graphtools.serde.onnx_codec import external_tensors
    from graphtools.serde.onnx_io import write_onnx_files

    base = files[0][0].parent
    staged = [(folder / path.relative_to(base), data) for path, data in files]
    write_onnx_files(staged)
    written = {path for path, _ in staged}
    for _, _, tensor in external_tensors(model) if model is not None else ():
        external = getattr(tensor, "external", None)
        if external is None:
            continue
        link = folder / external.location
        kept = base / external.location
        if link not in written and not link.exists() and kept.is_file():
            link.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(kept, link)  # the checker refuses symbolic and hard links
    return staged[0][0]

"""What every command shares: loading models the one way, console output (``Output`` and
``new_table``, from ``graphtools.cli.output``) and the usage error (the options that mean the
same everywhere are in ``graphtools.cli.grammar``).

One rule for files across commands: a file is an ONNX model or a NetDef by its content
(``graphtools.cli.onnx_files``; ``.onnx`` is the fast path), and an ONNX model loads alone
(a folder holding one ONNX model and no pair is that model).
A predict_net file (or a file to show) that is empty is an error; an empty init_net file is
an init_net without ops (a few published pairs ship one), said in a warning. A predict_net
file given alone gets the init_net beside it (``graphtools.serde.pairing``), said in a note;
``--init FILE`` picks another and ``--no-init`` none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphtools._core import MAIN_NET
from graphtools.cli.onnx_files import is_onnx_file, load_onnx_file, model_files, one_onnx_model
from graphtools.cli.output import Output, TextTable, new_table
from graphtools.errors import SerdeError, UsageError, did_you_mean
from graphtools.ir import Model
from graphtools.serde import find_model_files, load_model
from graphtools.serde.netdef_io import TEXT_SUFFIXES, is_blank
from graphtools.serde.pairing import (
    discover_models,
    find_init_beside,
    inits_in_two_formats,
    is_one_model_folder,
    left_out_note,
)

if TYPE_CHECKING:  # types only: show and friends import neither the passes nor the executor
    from graphtools.pass_infra import PassManager, PassRecord
    from graphtools.testing import OutputDiff

__all__ = [
    "SHAPES_FILE",
    "Output",
    "RecordView",
    "Shape",
    "UsageError",
    "check_input_names",
    "did_you_mean",
    "diff_json",
    "diff_table",
    "load_input",
    "model_input_names",
    "new_table",
    "output_file",
    "output_folder",
    "parse_name_list",
    "parse_shape_items",
    "parse_shape_specs",
    "read_shape_specs",
    "read_shapes",
    "record_data",
    "refuse_dump_in_json",
    "refuse_overwriting_input",
    "report_records",
    "set_outputs",
    "shapes_file",
    "shapes_text",
    "symbolic_dims",
    "tolerances_by_name",
    "typing_shapes",
    "vacuous_notes",
    "writable_symbol",
]

SHAPES_FILE = "shapes.txt"
"""The case file beside a model that gives its input shapes, one ``name=1x3x8x8`` a line."""


def diff_json(diff: OutputDiff) -> dict[str, Any]:
    """An output's comparison as JSON data: its histogram as two lists, and a statistic that
    is no finite number (NaN, an infinite relative error against a zero) as ``null``."""
    data = asdict(diff)
    counts, edges = diff.histogram
    data["histogram"] = {"counts": list(counts), "edges": list(edges)}
    for key in ("max_abs", "max_rel", "mean_abs", "mean_rel"):
        data[key] = data[key] if math.isfinite(data[key]) else None  # JSON has neither
    return data


def _number(value: float) -> str:
    return "-" if value != value else f"{value:.3g}"


def vacuous_notes(
    diffs: Sequence[OutputDiff],
    advice: str = "--feeds with recorded ones, or other --shapes",
) -> list[str]:
    """A note when every output compared is empty (a detector finding nothing in made-up
    data): 'equal' then compared no value, whatever the models compute. ``advice``: how
    this command compares on inputs that give values."""
    if not diffs or any(d.size for d in diffs) or not all(d.ok for d in diffs):
        return []
    return [
        "every output compared is empty on these inputs (0 values), so 'equal' proves "
        f"nothing here: compare on inputs that give values ({advice})"
    ]


def diff_table(diffs: Iterable[OutputDiff], first: str = "output") -> TextTable:
    """The one table of compared values (``verify``'s outputs, ``verify --onnx``'s outputs and
    blobs): max/mean absolute and relative error, mismatches, shape, tolerances."""
    table = new_table(
        first,
        "ok",
        "max abs",
        "mean abs",
        "max rel",
        "mean rel",
        "mismatches",
        "shape",
        "rtol/atol",
        "reason",
    )
    for d in diffs:
        table.add_row(
            d.name,
            "yes" if d.ok else "NO",
            _number(d.max_abs),
            _number(d.mean_abs),
            _number(d.max_rel),
            _number(d.mean_rel),
            f"{d.mismatches}/{d.size}",
            _shapes(d),
            f"{d.rtol:g}/{d.atol:g}",
            d.reason,
        )
    return table


def _shapes(diff: OutputDiff) -> str:
    """The compared shape; both sides' when they differ (``[2] vs [0]``)."""
    before, after = diff.shape_before, diff.shape_after
    if before is None or after is None or tuple(before) == tuple(after):
        shape = before if before is not None else after
        return "-" if shape is None else str(list(shape))
    return f"{list(before)} vs {list(after)}"


def tolerances_by_name(
    settings: Any,
) -> tuple[float, float, dict[str, tuple[float, float]]]:
    """``(rtol, atol, {name: (rtol, atol)})`` from the parsed ``--rtol``/``--atol`` settings."""
    rtol, per_rtol = settings["rtol"]
    atol, per_atol = settings["atol"]
    per = {
        name: (per_rtol.get(name, rtol), per_atol.get(name, atol))
        for name in set(per_rtol) | set(per_atol)
    }
    return rtol, atol, per


# -- loading -----------------------------------------------------------------------------------


def _check_not_empty(path: Path, role: str) -> bool:
    """Whether ``path`` is empty; raises for an empty predict_net (the one rule)."""
    if not is_blank(path):
        return False
    if role == "predict_net":
        raise UsageError(f"{path}: the file is empty; a predict_net file must hold a net")
    return True


def _refuse_several_models(folder: Path) -> None:
    """A folder holding a pair and other models (a second ``*predict_net`` file, an
    ``.onnx`` model) is no model folder: ``run`` and ``verify`` take it as a batch, so a
    command of one model refuses it rather than pick the pair.

    Raises:
        UsageError: the folder holds several models, listed.
    """
    if is_one_model_folder(folder):
        return
    models = [ref.path for ref in discover_models([folder])]
    if len(models) < 2:
        return
    shown = ", ".join(str(p.relative_to(folder)) for p in models[:4])
    more = ", ..." if len(models) > 4 else ""
    raise UsageError(
        f"{folder} holds {len(models)} models ({shown}{more}), not one model: name one (a "
        "folder holds one pair, or its predict_net file); run and verify take such a folder "
        "as a batch"
    )


def load_input(
    path: str | Path,
    init: str | None = None,
    *,
    no_init: bool = False,
    out: Output | None = None,
    init_option: str = "--init",
) -> Model:
    """Load a model folder, or a predict_net file with its init_net, by the one rule (see the
    module docstring); notes go to ``out``, errors name ``init`` as ``init_option``."""
    source = Path(path)
    if is_onnx_file(source):
        if init is not None:
            raise UsageError(f"{init_option} is for a predict_net file; {source} is an ONNX model")
        return load_onnx_file(source)
    if source.is_dir():
        if init is not None:
            raise UsageError(f"{init_option} is only for a predict_net file, not a model folder")
        try:
            predict, found = find_model_files(source)
        except SerdeError:
            models = sorted(p for p in source.glob("*") if p.suffix.lower() == ".onnx")
            if not models or any(source.glob("predict_net*")):
                raise  # no ONNX model, or a pair the folder holds ambiguously: said as such
            single = one_onnx_model(source)
            if single is not None:
                return load_onnx_file(single)  # the folder of one ONNX model is that model
            names = [model.name for model in models]
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise UsageError(
                f"{source} holds no Caffe2 pair (predict_net.pb or .pbtxt) but {len(names)} "
                f"ONNX models ({shown}): give one of them"
            ) from None
        _refuse_several_models(source)
        if no_init:
            found = None
        note = left_out_note(source)
        if note is not None and out is not None:
            out.note(note)
    else:
        if not source.exists():
            raise SerdeError(source, "cannot read: no such file or folder")
        predict, found = source, None
        if init is not None:
            found = Path(init)
        elif not no_init:
            found = find_init_beside(source)
            both = inits_in_two_formats(source)
            if both:
                raise UsageError(
                    f"two init_nets fit {source.name}: {both[0].name} and {both[1].name}; name "
                    f"one with {init_option} FILE, or --no-init to load it without parameters"
                )
            if found is not None and out is not None:
                out.note(
                    f"init_net {found} found beside {source.name} "
                    f"({init_option} FILE for another, --no-init for none)"
                )
    _check_not_empty(predict, "predict_net")
    if found is not None and _check_not_empty(found, "init_net") and out is not None:
        out.warn(f"init_net {found} is empty: the model gets no parameters from it")
    return load_model(predict, found, allow_empty=True)


def refuse_links_in_place(paths: Iterable[Path]) -> None:
    """Refuse ``--in-place`` on a model file that is a symbolic link: the atomic write would
    replace the link with a file and leave the file it points to as it was (a
    ``current.onnx -> v3.onnx`` set-up would silently stop pointing at the versions)."""
    for path in paths:
        if path.is_symlink():
            raise UsageError(
                f"{path} is a symbolic link (to {path.resolve()}): --in-place would replace "
                "the link with a file and leave that one as it was; run on the file it points "
                "to, or write elsewhere with -o"
            )


def refuse_dump_in_json(options: Any) -> None:
    """``--print-after-each`` prints dumps, which ``--json`` output has no place for: refuse
    the pair rather than drop one without a word."""
    if getattr(options, "print_after_each", False) and getattr(options, "json", False):
        raise UsageError("--print-after-each prints text dumps: give it without --json")


def refuse_overwriting_input(model: Model, targets: Iterable[Path], instead: str) -> None:
    """Refuse (``UsageError``) to write any of ``targets`` over a file ``model`` was loaded
    from: its predict_net and init_net, an ONNX model's external data; ``instead`` says
    what to do (``name another -o file``)."""
    inputs = set(model_files(model))
    inputs.update(p.resolve() for p in (model.predict_path, model.init_path) if p is not None)
    for target in targets:
        if Path(target).resolve() in inputs:
            raise UsageError(f"refusing to overwrite the input {target}; {instead}")


def output_file(value: str) -> Path:
    """The file an option names to write (``draw -o``, ``exec -o``, ``--save-outputs``), its
    folder made now, before any work, as ``run -o`` makes its folder.

    Raises:
        UsageError: the folder cannot be made.
    """
    path = Path(value)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make the folder of {value}: {exc.strerror or exc}") from exc
    return path


def output_folder(value: str) -> Path:
    """The folder ``-o`` names for a pair.

    Raises:
        UsageError: ``value`` is named like a net file (``x.pb``, ``x.pbtxt``) and is not an
            existing folder: a pair is two files, written into a folder (``-o out/x.pb``
            would otherwise make a folder named ``x.pb``).
    """
    path = Path(value)
    if path.suffix.lower() in {".pb", *TEXT_SUFFIXES} and not path.is_dir():
        raise UsageError(
            f"-o {value} is named like a net file, but a pair (predict_net + init_net) is "
            f"written into a folder: give a folder, e.g. -o {path.with_suffix('')}"
        )
    return path


# -- names and shapes ---------------------------------------------------------------------------


def parse_name_list(values: Sequence[str] | None) -> list[str]:
    """``--outputs a,b --outputs c`` -> ``["a", "b", "c"]``."""
    names: list[str] = []
    for value in values or ():
        names += [part.strip() for part in value.split(",") if part.strip()]
    return names


Shape = tuple[int | str, ...]
"""An input shape as ``--shapes`` and ``shapes.txt`` give it: sizes, and symbolic dims by
name (``{N}x3x224x224``: a batch the model takes at any size, as import-onnx writes it)."""

_SYMBOL = r"[^{},=\n]+"
_DIM = re.compile(rf"[0-9]+|\{{{_SYMBOL}\}}")
_DIMS = re.compile(rf"(?:(?:{_DIM.pattern})(?:x(?:{_DIM.pattern}))*)?")


def writable_symbol(dim: str) -> bool:
    """Whether a symbolic dim's name can be written in a shape (``{name}``) and read back:
    no braces, comma, ``=`` or anything ``str.splitlines`` breaks a line at."""
    return re.fullmatch(_SYMBOL, dim) is not None and len(f"{dim}.".splitlines()) == 1


def shapes_text(shapes: Mapping[str, Sequence[int | str]]) -> str:
    """The case file's text for ``shapes``: ``name=1x3x8x8`` a line (``name=`` for a scalar,
    ``{N}`` for a symbolic dim), as ``parse_shape_items`` reads it back."""
    return "".join(
        f"{name}={'x'.join(str(d) if isinstance(d, int) else f'{{{d}}}' for d in shape)}\n"
        for name, shape in shapes.items()
    )


def parse_shape_items(items: Sequence[str], where: str) -> dict[str, tuple[int, ...]]:
    """``["data=1x3x8x8", "im_info=1x3"]`` -> ``{"data": (1, 3, 8, 8), "im_info": (1, 3)}``;
    an item may hold several, separated by commas. A symbolic dim (``{N}``) is taken as 1:
    the sizes to run or type a model at (``symbolic_dims`` says which were symbolic)."""
    return {name: _sizes(shape) for name, shape in parse_shape_specs(items, where).items()}


def parse_shape_specs(items: Sequence[str], where: str) -> dict[str, Shape]:
    """``parse_shape_items`` keeping symbolic dims by name: ``{N}x4`` -> ``("N", 4)``."""
    shapes: dict[str, Shape] = {}
    for raw in items:
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            name, sep, dims = item.rpartition("=")
            if sep and name and (dims.startswith("-") or "x-" in dims):
                raise UsageError(
                    f"{where}: shape {item!r} has a negative dimension (a dim of any size is "
                    "written by name: {N}x3x224x224)"
                )
            if not sep or not name or not _DIMS.fullmatch(dims):
                raise UsageError(
                    f"{where}: shape {item!r} is not of the form name=1x3x224x224 (a symbolic "
                    "dim: name={N}x3x224x224)"
                )
            if name in shapes:
                raise UsageError(f"{where}: input {name!r} is given a shape twice")
            shapes[name] = tuple(
                int(dim) if dim.isdigit() else dim[1:-1] for dim in _DIM.findall(dims)
            )
    return shapes


def _sizes(shape: Shape) -> tuple[int, ...]:
    return tuple(dim if isinstance(dim, int) else 1 for dim in shape)


def symbolic_dims(shapes: Mapping[str, Shape]) -> dict[str, dict[int, str]]:
    """``{input: {position: symbol}}`` of the symbolic dims of ``shapes``."""
    found = {
        name: {i: dim for i, dim in enumerate(shape) if isinstance(dim, str)}
        for name, shape in shapes.items()
    }
    return {name: dims for name, dims in found.items() if dims}


def _case_items(line: str) -> list[str]:
    """The shape items of a case-file line: the whole line when it gives one shape (a name
    may hold spaces, ``in put:0=4x3``, as ``shapes_text`` writes it), else its words."""
    name, sep, dims = line.rpartition("=")
    if sep and name and "=" not in name and _DIMS.fullmatch(dims):
        return [line]
    return line.split()


def shapes_file(path: str | Path) -> Path:
    """Where the case file of a model folder or a predict_net file is (beside the file)."""
    source = Path(path)
    return (source if source.is_dir() else source.parent) / SHAPES_FILE


def read_shapes(
    model: Model, path: str | Path, items: Sequence[str] | None
) -> tuple[dict[str, tuple[int, ...]], str]:
    """Input shapes from ``--shapes``, else from ``shapes.txt`` beside the model, and where
    they came from (a symbolic dim taken as 1: ``read_shape_specs`` keeps it); every name
    must be an input the model reads. A ``shapes.txt`` naming no input at all, beside a net
    file named on the command line, belongs to another net of its folder and is ignored; in
    the folder named (which holds one model) it is this model's, and a misspelt name is
    refused as ``--shapes`` refuses it, not ignored for a guess.

    Raises:
        UsageError: a malformed item, or a name the model has no input of.
    """
    specs, where = read_shape_specs(model, path, items)
    return {name: _sizes(shape) for name, shape in specs.items()}, where


def read_shape_specs(
    model: Model, path: str | Path, items: Sequence[str] | None
) -> tuple[dict[str, Shape], str]:
    """``read_shapes`` keeping symbolic dims by name."""
    where = "--shapes"
    if items:
        shapes = parse_shape_specs(items, where)
    else:
        case_file = shapes_file(path)
        if not case_file.is_file():
            return {}, ""
        where = str(case_file)
        try:
            text = case_file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SerdeError(case_file, f"cannot read: {exc}") from exc
        kept = [line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")]
        shapes = parse_shape_specs([item for line in kept for item in _case_items(line)], where)
        if not shapes:  # a case file saying no shape
            return {}, ""
        data, params = model_input_names(model)
        if not set(shapes) & (set(data) | set(params)) and not Path(path).is_dir():
            return {}, ""  # the case file of another net beside the file named
    check_input_names(model, shapes, where)
    return shapes, where


def typing_shapes(
    model: Model, path: str | Path, items: Sequence[str] | None
) -> tuple[dict[str, tuple[int, ...]], str]:
    """Input shapes to type a model with (``show``, ``extract``): ``--shapes`` or
    ``shapes.txt``, the data inputs left (read first at position 0 by a top-level op) guessed
    (cheap, static); and where they came from. A blob only nested nets read is not guessed:
    nothing says what it is (an If branch's weights, as often as data). An init_net
    placeholder of a data input is guessed as ``verify`` does, its fill's shape tried first."""
    from graphtools.analysis.input_shapes import (
        first_readers,
        guess_input_shapes,
        placeholder_hints,
        placeholder_inputs,
    )

    shapes, where = read_shapes(model, path, items)
    data, _ = model_input_names(model)
    placeholders = placeholder_inputs(model)
    readers = first_readers(model.predict_net)
    missing = [
        name
        for name in [*data, *placeholders]
        if name not in shapes and name in readers and readers[name][2] == 0
    ]
    if not missing:
        return shapes, where
    hints = placeholder_hints(placeholders)
    guesses = guess_input_shapes(model, missing, shapes, hints)
    shapes.update({name: guess.shape for name, guess in guesses.items()})
    return shapes, (where + " and " if where else "") + "guessed"


def model_input_names(model: Model) -> tuple[list[str], list[str]]:
    """``(data inputs, parameters)``: blobs the predict_net reads before writing them or
    declares as inputs, split by whether the init_net fills them."""
    from graphtools.analysis.input_shapes import first_readers

    net = model.predict_net
    declared = net.external_input_set()
    names = list(dict.fromkeys(net.external_inputs))  # a name listed twice is one input
    names += [name for name in first_readers(net) if name not in declared]
    produced = set() if model.init_net is None else {n for op in model.init_net for n in op.outputs}
    return [n for n in names if n not in produced], [n for n in names if n in produced]


def check_input_names(model: Model, names: Iterable[str], where: str) -> None:
    """Refuse names that are not inputs of the model, listing the real ones."""
    data, params = model_input_names(model)
    known = set(data) | set(params)
    for name in names:
        if name not in known:
            listed = ", ".join(data[:8]) + (f", ... ({len(data)} in all)" if len(data) > 8 else "")
            more = f" and {len(params)} parameters the init_net fills" if params else ""
            raise UsageError(
                f"{where} names {name!r}, which is not an input of the model"
                f"{did_you_mean(name, known)}; its inputs are: {listed or 'none'}{more}"
            )


def set_outputs(model: Model, names: Sequence[str]) -> None:
    """Declare ``names`` as the predict_net's external outputs (``--outputs``).

    Raises:
        UsageError: a name the predict_net neither writes nor reads.
    """
    net = model.predict_net
    known = {name for op in net for name in (*op.outputs, *op.inputs)}
    known |= set(net.external_inputs)
    for name in names:
        if name not in known:
            raise UsageError(
                f"--outputs names {name!r}, which the {MAIN_NET[model.dialect]} never writes"
                f"{did_you_mean(name, known)}"
            )
    net.set_external_outputs(names)


# -- pipelines ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordView:
    """A ``PassRecord`` as the CLI prints and writes it."""

    record: PassRecord

    def text(self) -> str:
        r = self.record
        state = "skipped" if r.skipped else "modified" if r.modified else "unchanged"
        stats = f" {r.stats}" if r.stats else ""
        init = ""
        if r.init_ops_before != r.init_ops_after:
            init = f" (init_net {r.init_ops_before} -> {r.init_ops_after})"
        return (
            f"round {r.round} {r.name}: {r.ops_before} -> {r.ops_after} ops{init}, {state}, "
            f"{r.seconds:.3f}s{stats}"
        )

    def data(self) -> dict[str, Any]:
        r = self.record
        return {
            "round": r.round,
            "pass": r.name,
            "ops_before": r.ops_before,
            "ops_after": r.ops_after,
            "init_ops_before": r.init_ops_before,
            "init_ops_after": r.init_ops_after,
            "modified": r.modified,
            "skipped": r.skipped,
            "seconds": round(r.seconds, 6),
            "stats": dict(r.stats),
        }


def report_records(
    out: Output, manager: PassManager, records: Sequence[PassRecord], time_passes: bool
) -> None:
    """Print the rounds (those that changed nothing only with ``-v``), the convergence
    warning, and with ``--time-passes`` the time per pass."""
    for record in records:
        out.line(RecordView(record).text(), level=1 if record.modified else 2)
    if (
        records
        and records[-1].round >= manager.steps
        and any(r.modified for r in records if r.round == records[-1].round)
    ):
        out.warn(
            f"pipeline {manager} did not reach a fixpoint in {manager.steps} rounds "
            "(the last round still changed the model); raise --steps to run more"
        )
    if time_passes and not out.json_mode:
        totals: dict[str, list[float]] = {}
        for record in records:
            totals.setdefault(record.name, []).append(record.seconds)
        table = new_table("pass", "runs", "seconds", title="time per pass")
        for name, times in totals.items():
            table.add_row(name, str(len(times)), f"{sum(times):.4f}")
        table.add_row("total", str(len(records)), f"{sum(r.seconds for r in records):.4f}")
        out.table(table, level=0)


def record_data(records: Sequence[PassRecord]) -> list[dict[str, Any]]:
    """The records as JSON-ready data."""
    return [RecordView(r).data() for r in records]

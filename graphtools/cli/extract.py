"""``extract MODEL --inputs a,b --outputs y -o OUT``: the sub-net computing the outputs from the
inputs (``graphtools.extract``).

A pair (a model folder, or a predict_net file with its init_net) is written as a pair into the
folder OUT, with a ``shapes.txt`` giving the new inputs' shapes where the shape analysis knows
them from given input shapes (so ``verify OUT`` runs as is; none resting on a guess); an
``.onnx`` model is written to ``OUT.onnx``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from graphtools.cli.common import (
    SHAPES_FILE,
    Output,
    UsageError,
    load_input,
    output_folder,
    parse_name_list,
    read_shape_specs,
    refuse_overwriting_input,
    shapes_text,
    typing_shapes,
)
from graphtools.cli.onnx_files import is_onnx_file, load_onnx_file
from graphtools.errors import SerdeError
from graphtools.serde import model_output_paths, save_model
from graphtools.serde.atomic import atomic_write_bytes

__all__ = ["HANDLERS"]


def _names(values: list[str] | None, flag: str) -> list[str]:
    names = parse_name_list(values)
    if not names:
        raise UsageError(f"{flag} needs at least one blob name (comma-separated)")
    return names


def _cmd_extract(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    inputs = _names(options.inputs, "--inputs")
    outputs = _names(options.outputs, "--outputs")
    source, target = str(options.input), str(options.output)
    if is_onnx_file(source):
        if not target.lower().endswith(".onnx"):  # a folder: the model keeps its file name
            name = Path(source).name
            target = str(
                Path(target) / (name if name.lower().endswith(".onnx") else name + ".onnx")
            )
        return _extract_onnx(options, source, target, inputs, outputs, out)
    if target.lower().endswith(".onnx"):
        raise UsageError(
            "extract writes an ONNX model as ONNX and a pair as a pair: give MODEL.onnx with "
            "-o OUT.onnx, or a pair with -o OUTDIR"
        )
    return _extract_pair(options, source, target, inputs, outputs, out)


def _extract_pair(
    options: argparse.Namespace,
    source: str,
    target: str,
    inputs: list[str],
    outputs: list[str],
    out: Output,
) -> int:
    from graphtools.extract import extract_pair

    folder = output_folder(target)
    model = load_input(source, options.init, no_init=options.no_init, out=out)
    planned = model_output_paths(model, folder, text=options.text)
    refuse_overwriting_input(model, planned, "name another -o folder")
    shapes, where = typing_shapes(model, source, options.shapes)
    specs, _ = read_shape_specs(model, source, options.shapes)
    # a symbolic dim is run at 1: a shape resting on it is no more given than a guess
    given = {name for name, shape in specs.items() if all(isinstance(d, int) for d in shape)}
    guessed = {name: shape for name, shape in shapes.items() if name not in given}
    result = extract_pair(model, inputs, outputs, shapes)
    plan = result.plan
    for name in plan.unused_inputs:
        out.warn(f"input {name!r} is read by no op the outputs need; it stays declared")
    known: dict[str, tuple[int, ...]] = {}
    for name in plan.inputs:
        t = result.input_types[name]
        reason = result.why_unknown.get(name)
        out.line(f"input {name}: {t}" + (f" ({reason})" if reason else ""))
        if reason is None and t.shape is not None and all(isinstance(d, int) for d in t.shape):
            known[name] = tuple(int(d) for d in t.shape)  # type: ignore[arg-type]
    unsure = _from_guesses(known, given, guessed, out)
    if where:
        out.note(f"input types inferred with the source's input shapes ({where})")
    kept = len(plan.ops)
    out.line(
        f"kept {kept} of {len(model.predict_net)} ops and {len(plan.params)} parameters "
        f"for outputs {', '.join(plan.outputs)}"
    )
    for path in save_model(result.model, folder, text=options.text):
        out.line(f"wrote {path}")
    written = {name: shape for name, shape in known.items() if name not in unsure}
    if written:
        text = shapes_text(written)
        out.line(f"wrote {atomic_write_bytes(folder / SHAPES_FILE, text.encode())}")
    return 0


def _from_guesses(
    known: dict[str, tuple[int, ...]],
    given: set[str],
    guessed: dict[str, tuple[int, ...]],
    out: Output,
) -> set[str]:
    """The cut's inputs whose shapes rest on guessed input shapes or on symbolic dims run at
    1 (every one but a source input given sizes, once any was not), said so: written to the
    cut's shapes.txt they would read as given, and every later command (an export) would take
    them as the truth."""
    if not guessed:
        return set()
    unsure = {name for name in known if name not in given}
    if unsure:
        listed = ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in guessed.items())
        out.note(
            f"no shape written for {', '.join(sorted(unsure))}: inferred from guessed or "
            f"symbolic input shapes ({listed}); give the source's sizes with --shapes to "
            "have them written"
        )
    return unsure


def _extract_onnx(
    options: argparse.Namespace,
    source: str,
    target: str,
    inputs: list[str],
    outputs: list[str],
    out: Output,
) -> int:
    from graphtools.extract import extract_onnx
    from graphtools.onnx import save_onnx

    if options.shapes or options.init or options.no_init or options.text is not None:
        raise UsageError(
            "--shapes, --init, --no-init, --text and --binary are for pairs, not ONNX models"
        )
    from graphtools.serde.onnx_codec import check_external_data

    model = load_onnx_file(source)
    refuse_overwriting_input(model, [Path(target)], "name another -o file")  # data files too
    check_external_data(model)  # onnx's reader would say "not regular file", naming nothing
    extracted = extract_onnx(source, inputs, outputs)
    for value in extracted.graph.input:
        dims = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in value.type.tensor_type.shape.dim
        ]
        out.line(f"input {value.name}: {dims}")
    out.line(f"kept {len(extracted.graph.node)} nodes for outputs {', '.join(outputs)}")
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = save_onnx(extracted, path, external_data=options.external_data)
    except OSError as exc:
        raise SerdeError(path, f"cannot write: {exc.strerror or exc}") from exc
    out.line(f"wrote {written}")
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"extract": _cmd_extract}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

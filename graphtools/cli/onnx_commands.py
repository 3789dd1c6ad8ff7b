"""The ONNX bridge on the command line: ``import-onnx``, ``export-onnx``, ``run`` of a pair
with an ``.onnx`` output (pipeline, then export), and ``verify --onnx`` (onnxruntime against
the executor). ONNX models themselves run natively: ``graphtools.cli.onnx_run``.

``export-onnx`` and ``verify --onnx`` take a model's inputs the way ``verify`` does
(``graphtools.onnx.export_feeds``): shapes from ``--shapes``, ``shapes.txt`` beside the model,
for ``verify --onnx`` the ONNX model's declared ones, else guessed from how the net reads each
input, and said so; an init_net placeholder of a data input becomes a graph input. Parameters
are made up only with ``--random-params``: a pair without its weights is refused with an error
naming the option. ``verify --onnx`` feeds every input the ONNX graph takes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from graphtools._core import ONNX
from graphtools.analysis.liveness import unread_outputs
from graphtools.cli.common import (
    SHAPES_FILE,
    Output,
    Shape,
    UsageError,
    diff_json,
    diff_table,
    load_input,
    model_input_names,
    output_folder,
    parse_name_list,
    read_shape_specs,
    read_shapes,
    record_data,
    refuse_overwriting_input,
    report_records,
    set_outputs,
    shapes_file,
    shapes_text,
    symbolic_dims,
    vacuous_notes,
    writable_symbol,
)
from graphtools.cli.npz_files import feeds_of, load_npz
from graphtools.cli.onnx_files import is_onnx_file, load_onnx_file
from graphtools.cli.pass_shapes import with_input_shapes
from graphtools.errors import (
    GraphToolsError,
    InvalidNetError,
    PreconditionError,
    SerdeError,
    UnsupportedOpError,
)
from graphtools.ir import Model, Net
from graphtools.pass_infra import PassManager
from graphtools.serde import save_model
from graphtools.serde.atomic import atomic_write_bytes

if TYPE_CHECKING:  # a type only: run and export-onnx do not load the executor for it
    pass

__all__ = ["HANDLERS", "required_shapes", "run_onnx", "verify_onnx", "wants_export"]


def required_shapes(
    model: Model, path: str, items: Sequence[str] | None
) -> dict[str, tuple[int, ...]]:
    """Input shapes that must all be given (``--shapes`` or ``shapes.txt``): an export types
    its inputs with them, so nothing is guessed.

    Raises:
        UsageError: a predict_net without its init_net (it reads blobs at a parameter
            position, as ``show`` counts them: values, not shapes to give), or an input
            without a shape.
    """
    from graphtools.analysis.input_shapes import guess_input_shapes

    shapes, _ = read_shapes(model, path, items)
    data, _ = model_input_names(model)
    _refuse_missing_weights(model, data, shapes, made_up="export-onnx --random-params")
    missing = [
        name for name in data if name not in shapes and name in model.predict_net.external_inputs
    ]
    if missing:
        guess = guess_input_shapes(model, missing[:1], shapes).get(missing[0])
        example = "1x3x224x224" if guess is None else "x".join(map(str, guess.shape))
        raise UsageError(
            f"inputs {missing} need shapes: pass --shapes {missing[0]}={example} ... (the "
            f"shapes the model is used at; this one a guess that fits the net) or write them "
            f"in {shapes_file(path)}"
        )
    return shapes


def _placeholder_shapes(
    model: Model, shapes: Mapping[str, Sequence[int]], out: Output
) -> dict[str, tuple[int, ...]]:
    """Shapes of the init_net placeholders of data inputs that ``shapes`` does not give, a
    detector's per-image ``im_info`` included (``per_image_fills``): their fills' (the size
    the pair was exported at) where the shape analysis accepts it, said so. Declared so, each
    is a graph input of the export, as ``export-onnx`` makes it; left out, the fill's values
    would be exported as a constant, and the model would ignore its input (or clip every box
    to the exported image size).

    Raises:
        UsageError: a placeholder whose fill gives no shape the net accepts (a dummy of shape
            1), with a guess to pass as ``--shapes``.
    """
    from graphtools.analysis.input_shapes import (
        guess_input_shapes,
        per_image_fills,
        placeholder_hints,
        placeholder_inputs,
    )

    per_image = {n: (shape, fill) for n, (shape, fill, _, _) in per_image_fills(model).items()}
    found = {**placeholder_inputs(model), **per_image}
    placeholders = {n: p for n, p in found.items() if n not in shapes}
    if not placeholders:
        return {}
    guesses = guess_input_shapes(model, list(placeholders), shapes, placeholder_hints(placeholders))
    taken: dict[str, tuple[int, ...]] = {}
    for name, (shape, fill) in placeholders.items():
        guess = guesses.get(name)
        if shape is None or guess is None or tuple(guess.shape) != shape:
            suggested = "x".join(map(str, guess.shape)) if guess is not None else "..."
            raise UsageError(
                f"input {name!r} is an init_net placeholder ({fill}) whose shape the net does "
                f"not take: pass --shapes {name}={suggested} (a guess: give the shape the "
                "model is used at)"
            )
        taken[name] = shape
        out.note(
            f"input {name!r}: a graph input instead of the init_net's placeholder ({fill}), "
            f"at its shape {'x'.join(map(str, shape))} (--shapes gives another)"
        )
    return taken


def _refuse_missing_weights(
    model: Model,
    data: Sequence[str],
    shapes: Mapping[str, Any],
    made_up: str = "--random-params",
) -> None:
    """A predict_net without its init_net reads blobs at a parameter position (as ``show``
    counts them): those are values to give, not shapes; refuse saying so. ``made_up``: the
    option (or command) that makes up weights for the caller."""
    from graphtools.analysis.input_shapes import first_readers

    readers = first_readers(model.predict_net)
    weights = [
        name for name in data if name not in shapes and name in readers and readers[name][2] >= 1
    ]
    if weights and model.init_net is None:
        listed = ", ".join(repr(n) for n in weights[:4]) + (", ..." if len(weights) > 4 else "")
        raise UsageError(
            f"the weights are missing: the pair has no init_net, and its ops read {len(weights)} "
            f"parameters ({listed}); give its init_net with --init FILE (or put init_net.pb "
            f"beside the predict_net), or use {made_up} for made-up ones"
        )


def _export_inputs(
    model: Model, shapes: Mapping[str, tuple[int, ...]], options: argparse.Namespace
) -> Any:
    """The inputs ``run PAIR -o OUT.onnx`` exports, typed as ``export-onnx`` types them: the
    feeds made to fit their readers at ``shapes`` (a stylizer's uint8 image, an Int8 input
    with its scale, integer indices), not all float. ``run`` has no ``--random-params``: its
    export never makes up parameters."""
    from graphtools.onnx.export_feeds import prepare_export

    try:
        return prepare_export(
            model,
            shapes,
            random_params=False,
            outputs=parse_name_list(options.outputs) or None,
            test_mode=options.test_mode,
        )
    except GraphToolsError as exc:
        _raise_with_guess(exc)


def _shapes_from_onnx(
    model: Model,
    path: str,
    items: Sequence[str] | None,
    onnx_path: str,
    *,
    made_up: bool = False,
) -> tuple[dict[str, tuple[int, ...]], dict[str, str], list[str]]:
    """Input shapes for ``verify --onnx``: ``--shapes`` or ``shapes.txt`` first, then the
    ONNX model's declared input shapes (a symbolic dim taken as 1, said so); an input the
    ONNX model does not shape is left to ``verify``'s guess. Returns the shapes, where each
    came from and notes. A pair without its weights is refused (``_refuse_missing_weights``)
    unless ``made_up`` (``--random-params``: the ONNX model was exported with made-up ones)."""
    shapes, where = read_shapes(model, path, items)
    origins = dict.fromkeys(shapes, where)
    data, _ = model_input_names(model)
    if not made_up:
        _refuse_missing_weights(model, data, shapes)
    declared = set(model.predict_net.external_inputs)
    # Data inputs, declared or not (jolibrain's lenet declares its params, not data); a net
    # declaring no input at all leaves them to verify's guess, made to fit their readers.
    missing = [name for name in data if name not in shapes] if declared else []
    onnx_graph = load_onnx_file(onnx_path).predict_net
    # An init_net placeholder of a data input is a graph input of the export: its shape too.
    missing += [
        name
        for name in onnx_graph.external_inputs
        if name in declared
        and name not in shapes
        and name not in onnx_graph.initializers
        and name not in missing
    ]
    notes: list[str] = []
    types = onnx_graph.types
    for name in missing:
        value_type = types.get(name)
        if value_type is None or value_type.shape is None:
            continue
        free = [i for i, d in enumerate(value_type.shape) if not isinstance(d, int) or d < 0]
        shapes[name] = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in value_type.shape)
        origins[name] = onnx_path
        said = f" (dims {free} symbolic: taken as 1)" if free else ""
        notes.append(f"input {name!r}: shape {list(shapes[name])} from {onnx_path}{said}")
    return shapes, origins, notes


def _export(
    model: Model,
    options: argparse.Namespace,
    value_info: Mapping[str, Any],
    out: Output,
    quantization: Mapping[str, tuple[float, int]] | None = None,
    feeds: Mapping[str, Any] | None = None,
    batch: Mapping[str, str] | None = None,
) -> Path:
    """Export ``model`` and write it (returns the path). ``batch`` names the inputs whose
    dim 0 is symbolic (``_symbolic_batch``): declared so, their sizes in ``value_info``
    aside. With ``--dynamic-batch`` or such a batch the result must run at twice the batch of
    ``feeds`` (the inputs it was exported with, else made up from its types)."""
    from graphtools.onnx import export_onnx

    batch = batch or {}
    declared = {
        name: (elem_type, [batch[name], *shape[1:]] if name in batch and shape else shape)
        for name, (elem_type, shape) in value_info.items()
    }
    exported = export_onnx(
        model,
        opset=options.opset,
        value_info=declared,
        dynamic_batch=options.dynamic_batch,
        input_quantization=quantization,
        test_mode=getattr(options, "test_mode", False),
    )
    if options.dynamic_batch:
        _check_free_batch(exported, feeds, "--dynamic-batch", "export without it")
    elif batch:
        listed = ", ".join(f"{name}={{{symbol}}}" for name, symbol in batch.items())
        _check_free_batch(exported, feeds, f"the symbolic batch ({listed})", "give dim 0 a size")
    return _save(exported, options, out)


def _symbolic_batch(
    model: Model, path: str, options: argparse.Namespace, out: Output, inputs: Set[str]
) -> dict[str, str]:
    """``{input: symbol}`` of the export's graph ``inputs`` (an init_net placeholder a
    feed replaces included) whose dim 0 ``--shapes`` or ``shapes.txt`` gives by name
    (import-onnx writes ``{batch_size}`` for a model taking any batch): the export declares
    them so, and the model imported and exported back still takes any batch. Any other
    symbolic dim is exported at 1, said so."""
    specs, where = read_shape_specs(model, path, options.shapes)
    batch: dict[str, str] = {}
    for name, dims in symbolic_dims(specs).items():
        if name not in inputs:  # a parameter's shape types nothing in the export
            continue
        others = {position: symbol for position, symbol in dims.items() if position}
        if others:
            listed = ", ".join(f"{position} ({symbol!r})" for position, symbol in others.items())
            out.warn(
                f"input {name!r}: dims {listed} are symbolic in {where}; the ONNX export fixes "
                "them at 1 (only a batch, dim 0, stays free)"
            )
        if 0 in dims:
            batch[name] = dims[0]
    if batch and not options.dynamic_batch:
        listed = ", ".join(f"{name}={{{symbol}}}" for name, symbol in batch.items())
        out.note(f"{where} gives a symbolic batch ({listed}): the export takes any batch")
    return batch


def _check_free_batch(
    exported: Any, feeds: Mapping[str, Any] | None, asked_by: str, instead: str
) -> None:
    from graphtools.executor import Int8Tensor
    from graphtools.onnx.batch_check import check_free_batch
    from graphtools.serde.onnx_codec import model_from_onnx_bytes

    plain = None
    if feeds is not None:
        plain = {n: v.values if isinstance(v, Int8Tensor) else v for n, v in feeds.items()}
    try:
        check_free_batch(model_from_onnx_bytes(exported.SerializeToString()), plain)
    except PreconditionError as exc:
        raise PreconditionError(
            f"{asked_by}: {exc}; {instead} for the batch the net was made for"
        ) from exc


def _save(exported: Any, options: argparse.Namespace, out: Output) -> Path:
    """Write the exported ``ModelProto`` to ``-o`` (external data with ``--external-data``);
    returns the path written."""
    from graphtools.onnx import save_onnx

    target = Path(options.output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        path = save_onnx(exported, target, external_data=options.external_data)
    except OSError as exc:
        raise SerdeError(target, f"cannot write: {exc.strerror or exc}") from exc
    out.line(f"wrote {path} (opset {exported.opset_import[0].version}, IR {exported.ir_version})")
    return Path(path)


def wants_export(options: argparse.Namespace) -> bool:
    """Whether ``run`` on a pair writes an ``.onnx`` file (pipeline, then export)."""
    return (options.output or "").lower().endswith(".onnx")


def run_onnx(options: argparse.Namespace, manager: PassManager, out: Output) -> int:
    """``run`` of a pair with an ``.onnx`` output: the pipeline, then the export (unless the
    pipeline converted the model itself: ``convert-to-onnx``, whose options then rule)."""
    from graphtools.onnx.convert import declare_types

    source = options.inputs[0]
    model = load_input(source, options.init, no_init=options.no_init, out=out)
    _outputs(model, options.outputs, out)
    shapes = required_shapes(model, source, options.shapes)
    inputs = _export_inputs(model, {**_placeholder_shapes(model, shapes, out), **shapes}, options)
    declare_types(model.predict_net, inputs.value_info)  # for a convert-to-onnx in the pipeline
    manager = with_input_shapes(manager, shapes)
    records = manager(model)
    report_records(out, manager, records, options.time_passes)
    if model.dialect != ONNX:
        batch = _symbolic_batch(model, source, options, out, inputs.value_info.keys())
        written = _export(
            model, options, inputs.value_info, out, inputs.quantization, inputs.feeds, batch
        )
    elif options.dynamic_batch or options.opset is not None:
        raise UsageError(
            "the pipeline converted the model (convert-to-onnx): give --opset and "
            "--dynamic-batch as its options, convert-to-onnx{opset=13,dynamic_batch=true}"
        )
    else:
        import onnx

        from graphtools.serde.onnx_codec import model_to_onnx_bytes

        written = _save(onnx.ModelProto.FromString(model_to_onnx_bytes(model)), options, out)
    if options.json:
        out.json(
            {
                "model": source,
                "pipeline": manager.spec,
                "rounds": record_data(records),
                "written": [str(written)],
            }
        )
    return 0


def _outputs(model: Model, items: Sequence[str] | None, out: Output) -> list[str]:
    """``--outputs`` declared; else the declared outputs, else the blobs the net writes and
    never reads (as ``verify`` compares them), said so."""
    if items:
        set_outputs(model, parse_name_list(items))
    names = list(model.predict_net.external_outputs)
    if not names:
        names = unread_outputs(model.predict_net)
        shown = ", ".join(names[:6]) + (f", ... ({len(names)})" if len(names) > 6 else "")
        out.note(
            "the predict_net declares no external outputs: taking the blobs it writes and "
            f"never reads ({shown or 'none'}); choose others with --outputs A,B"
        )
        set_outputs(model, names)
    return names


def _prepared(
    model: Model,
    path: str,
    options: argparse.Namespace,
    out: Output,
    *,
    export: bool = False,
    shapes: dict[str, tuple[int, ...]] | None = None,
    origins: Mapping[str, str] | None = None,
    noted: list[str] | None = None,
    values: Mapping[str, Any] | None = None,
) -> Any:
    """The pair made whole and its feeds (``export_feeds.prepare_export``), reported (each
    note also appended to ``noted``, for a ``--json`` document). For an
    export, parameters are made up only with ``--random-params``: without it a pair whose
    weights are missing (no init_net, a ``Load`` from a missing database, a blob nothing
    fills) or do not fit the net is refused, naming the option. ``shapes``: input shapes the
    caller found (else ``--shapes`` and ``shapes.txt``), ``origins`` where each came from;
    ``values``: input arrays given (``--feeds``), fed as they are."""
    from graphtools.feeds.report import guessed_shapes
    from graphtools.onnx.export_feeds import prepare_export

    names = _outputs(model, options.outputs, out)
    if shapes is None:
        shapes, where = read_shapes(model, path, options.shapes)
        origins = dict.fromkeys(shapes, where)
    random_params = (options.random_params or None) if export else options.random_params
    try:
        prepared = prepare_export(
            model,
            shapes,
            seed=options.seed,
            random_params=random_params,
            outputs=names,
            test_mode=options.test_mode,
            values=values,
        )
    except InvalidNetError as exc:
        if "--random-params" in str(exc):
            raise UsageError(f"the weights are missing: {exc}") from exc
        _raise_with_guess(exc)
    except GraphToolsError as exc:
        _raise_with_guess(exc)
    synthesis = prepared.synthesis
    if export and not options.random_params and synthesis.params:
        hint = "" if shapes else " (or, if they are right, give the input shapes: --shapes)"
        raise UsageError(
            f"{_missing_weights(model, synthesis)}; pass --random-params to export with "
            f"made-up ones{hint if synthesis.replaced else ''}"
        )
    origins = origins or {}
    for made in synthesis.inputs:
        dims = ", ".join(map(str, made.shape))
        reason = origins.get(made.name, made.reason) if made.reason == "--shapes" else made.reason
        out.line(f"input {made.name}: {made.dtype}[{dims}] ({made.origin}: {reason})")
    guessed = guessed_shapes(synthesis.inputs)
    if export and guessed:
        _warn_guessed_shapes(guessed, path, options.dynamic_batch, out)
    notes = [
        f"input {name!r}: a graph input instead of the init_net's placeholder ({fill})"
        for name, fill in synthesis.placeholders.items()
    ]
    notes += [
        f"{skipped.net} op #{skipped.index} ({skipped.type}) cannot run here and is left "
        f"out; its blobs {', '.join(skipped.outputs)} get made-up values ({skipped.reason})"
        for skipped in synthesis.skipped_ops
    ]
    notes += [
        f"parameter {name!r} replaced by a made-up one: {reason}"
        for name, reason in synthesis.replaced.items()
    ]
    if synthesis.params:
        notes.append(
            f"made up {len(synthesis.params)} parameters ({synthesis.param_values} values) "
            "that nothing provides (--random-params)"
        )
    for note in notes:
        out.note(note)
    if noted is not None:
        noted += notes
    return prepared


def _warn_guessed_shapes(listed: str, path: str, free_batch: bool, out: Output) -> None:
    """An exported model takes its inputs only at the shapes it was exported with: a guessed
    one (say 28x28 for an ImageNet net) would make it refuse real inputs."""
    batch = "" if free_batch else "; --dynamic-batch frees the batch"
    out.warn(
        f"the ONNX model takes its inputs only at the shapes guessed here ({listed}), and "
        f"onnxruntime refuses any other: give the shapes it is used at with --shapes (or in "
        f"{shapes_file(path)}){batch}"
    )


def _raise_with_guess(exc: GraphToolsError) -> NoReturn:
    """Raise ``exc`` again, as a usage error naming ``--shapes`` when the inputs it ran on
    were guessed (the note ``synthesize`` adds then): the guess may be what failed."""
    guessed = [note for note in getattr(exc, "__notes__", []) if "guessed" in note]
    if guessed:
        raise UsageError(f"{exc}; {guessed[0]}") from exc
    raise exc


def _missing_weights(model: Model, synthesis: Any) -> str:
    """Why the pair's weights would be made up: no init_net, ops of it that cannot run here,
    blobs that do not fit the net."""
    made = list(synthesis.params)
    shown = ", ".join(repr(n) for n in made[:4]) + (f", ... ({len(made)})" if len(made) > 4 else "")
    if model.init_net is None:
        return f"the weights are missing: the pair has no init_net to fill {shown}"
    if synthesis.skipped_ops:
        first = synthesis.skipped_ops[0]
        return (
            f"the weights are missing: init_net op #{first.index} ({first.type}) cannot run "
            f"here ({first.reason})"
        )
    from graphtools.feeds.report import unfit_weights

    return unfit_weights(synthesis) or f"the weights are missing: nothing provides {shown}"


def verify_onnx(options: argparse.Namespace, settings: Mapping[str, Any], out: Output) -> int:
    """onnxruntime on the ONNX model against our executor on the pair (``--per-blob``: also
    every blob both name, and the first op whose output is outside the tolerances), on the
    inputs ``verify`` makes, every input of the ONNX graph fed. One verdict, the outputs';
    blobs are compared with the same statistics and tolerances. Default tolerances: rtol
    1e-4, atol 1e-5 (onnxruntime and numpy round differently); Int8 blobs within one
    quantization step."""
    from graphtools.onnx import compare_blobs_with_onnxruntime, compare_with_onnxruntime
    from graphtools.testing import HALF_TOLERANCES

    if len(options.inputs) != 1:
        raise UsageError("verify --onnx takes one model")
    if options.save_outputs or options.load_outputs:
        raise UsageError(
            "--save-outputs and --load-outputs belong to a pipeline's reference run; verify "
            "--onnx runs both models on the inputs it makes, or on yours (--feeds)"
        )
    path = options.inputs[0]
    model = load_input(path, options.init, no_init=options.no_init, out=out)
    if model.dialect == ONNX:
        raise UsageError(
            f"verify --onnx compares an ONNX model with a Caffe2 pair, and {path} is an ONNX "
            "model; to prove a pipeline on it: verify MODEL.onnx -p PIPELINE"
        )
    if not is_onnx_file(options.onnx):
        raise UsageError(f"--onnx {options.onnx} is not an ONNX model")
    if not options.test_mode:
        _note_training_ops(model, out)
    shapes, origins, notes = _shapes_from_onnx(
        model, path, options.shapes, options.onnx, made_up=options.random_params is True
    )
    made: list[str] = []
    given = feeds_of(load_npz(Path(options.feeds), "feeds")) if options.feeds else None
    prepared = _prepared(
        model, path, options, out, shapes=shapes, origins=origins, noted=made, values=given
    )
    exported = load_onnx_file(options.onnx).predict_net
    _check_graph_inputs(options.onnx, exported, prepared.feeds)
    rtol, per_rtol = settings["rtol"] if options.rtol else (1e-4, {})
    atol, per_atol = settings["atol"] if options.atol else (1e-5, {})
    per = {n: (per_rtol.get(n, rtol), per_atol.get(n, atol)) for n in {*per_rtol, *per_atol}}
    if not options.rtol and not options.atol:
        half = _half_precision_outputs(exported)
        per.update((name, HALF_TOLERANCES) for name in half if name not in per)
        if half:
            notes.append(
                f"half-precision outputs {', '.join(half)} compared with rtol "
                f"{HALF_TOLERANCES[0]:g}, atol {HALF_TOLERANCES[1]:g} (--rtol/--atol to choose)"
            )
    tolerance = f"rtol={rtol:g}, atol={atol:g}, seed={options.seed}"
    pair, feeds = prepared.model, prepared.feeds
    data: dict[str, Any] = {
        "onnx": options.onnx,
        "model": path,
        "inputs": {made.name: list(made.shape) for made in prepared.synthesis.inputs},
        "tolerance": {"rtol": rtol, "atol": atol, "seed": options.seed},
    }
    if not options.per_blob:
        diffs = compare_with_onnxruntime(
            options.onnx, pair, feeds, rtol=rtol, atol=atol, per_output=per
        )
        equal = all(d.ok for d in diffs)
    else:
        report = compare_blobs_with_onnxruntime(
            options.onnx, pair, feeds, rtol=rtol, atol=atol, per_output=per
        )
        diffs, equal = report.outputs, report.outputs_equal
        found = report.first_divergence
        data.update(
            blobs=[diff_json(d) for d in report.blobs],
            first_divergence=None
            if found is None
            else {"op_index": found.op_index, "op_type": found.op_type, **diff_json(found.diff)},
        )
    data.update(verdict="equal" if equal else "differ", outputs=[diff_json(d) for d in diffs])
    notes += vacuous_notes(diffs, "other --shapes, or --feeds with real inputs")
    for note in notes:  # after the runs: an error stays the one line printed
        out.note(note)
    data["notes"] = made + notes  # a script reading the verdict reads what qualifies it
    if options.json:
        out.json(data)
        return 0 if equal else 1
    verdict = "outputs equal" if equal else "outputs differ"
    out.line(f"onnxruntime vs executor: {verdict} ({tolerance})", level=0)
    out.table(diff_table(diffs))
    if options.per_blob:
        _render_blobs(out, report, equal)
    return 0 if equal else 1


def _half_precision_outputs(graph: Net) -> list[str]:
    """The outputs an ONNX graph declares float16 or bfloat16 (compared as ``verify``
    compares half precision when no tolerance is given)."""
    declared = graph.types
    return [
        name
        for name in graph.external_outputs
        if name in declared and declared[name].elem_type in _HALF_ELEM_TYPES
    ]


_HALF_ELEM_TYPES = frozenset({10, 16})
"""ONNX's FLOAT16 and BFLOAT16 element types."""


def _render_blobs(out: Output, report: Any, equal: bool) -> None:
    """The per-blob part of ``verify --onnx``: how many blobs are outside the tolerances, and
    the first of them in the outputs' table."""
    outside = report.blobs_outside
    found = report.first_divergence
    out.line(
        f"compared {len(report.blobs)} intermediate blobs: {len(outside)} outside the tolerances"
    )
    if found is None:
        out.line("no blob outside the tolerances", level=0)
        return
    out.line(
        f"first blob outside the tolerances: op #{found.op_index} ({found.op_type}) "
        f"writing {found.diff.name!r}",
        level=0,
    )
    out.table(diff_table([found.diff], "blob"), level=0)
    if equal:
        out.line(
            "the outputs are equal: these differences do not reach them (float rounding in "
            "big reductions, most often); --rtol/--atol NAME:value loosen one blob",
            level=0,
        )


def _note_training_ops(model: Model, out: Output) -> None:
    """Say so when the pair has ops in training mode (``is_test=0``), which the executor runs
    as such while their export (``export-onnx --test-mode``) is their inference form."""
    from graphtools.convert.caffe2_to_onnx.nn import in_test_mode

    found = [
        f"op #{i} ({op.type})"
        for i, op in enumerate(model.predict_net)
        if in_test_mode(op) is not op
    ]
    if found:
        out.note(
            f"{', '.join(found[:3])} run in training mode (is_test=0); pass --test-mode to "
            "compare their inference form, which export-onnx --test-mode exports"
        )


def _check_graph_inputs(path: str, graph: Net, feeds: Mapping[str, Any]) -> None:
    """Refuse an ONNX model (``graph``, read from ``path``) taking inputs the pair is not fed
    (another model's export)."""
    held = graph.initializers
    missing = [name for name in graph.external_inputs if name not in held and name not in feeds]
    if missing:
        raise UsageError(
            f"{path} takes inputs {missing} that the pair does not read as data inputs (fed: "
            f"{sorted(feeds)}); is it the export of this pair?"
        )


def _converts_once_optimized(path: str) -> bool:
    """Whether the ONNX ``optimize`` pipeline leaves ``path`` in a form import converts (it
    folds constant sub-graphs and fuses ops the Caffe2 side has no mapping for)."""
    from graphtools.onnx import import_onnx

    try:
        model = load_onnx_file(path)
        PassManager.parse("optimize")(model)
        import_onnx(model)
    except GraphToolsError:
        return False
    return True


def _cmd_import_onnx(options: argparse.Namespace) -> int:
    from graphtools.onnx import import_onnx

    out = Output(options.verbosity, False)
    output_folder(options.output)
    manager = PassManager.parse(options.pipeline, steps=options.steps)
    try:
        model = import_onnx(options.input)
    except UnsupportedOpError as exc:
        # -p runs on the pair; what the ONNX pipeline folds or fuses may not need a mapping
        if not _converts_once_optimized(options.input):
            raise
        raise UnsupportedOpError(
            f"{exc}; 'graphtools run {options.input} -p optimize -o OUT.onnx' folds or fuses "
            "it away, after which 'import-onnx OUT.onnx' converts the model"
        ) from exc
    report_records(out, manager, manager(model), False)
    for path in save_model(model, options.output, text=options.text):
        out.line(f"wrote {path}")
    # A pair holds no types: the case file keeps the inputs' shapes (as the pipeline left
    # them), and replaces one an earlier import left there.
    text = f"# input shapes of {options.input}, written by import-onnx\n"
    text += shapes_text(_declared_input_shapes(model))
    case_file = atomic_write_bytes(Path(options.output) / SHAPES_FILE, text.encode())
    out.line(f"wrote {case_file}")
    return 0


def _declared_input_shapes(model: Model) -> dict[str, Shape]:
    """The declared shapes of the imported pair's data inputs, a symbolic batch (dim 0) by
    name. An input with any other dim of no size (a symbolic height, a sequence length) is
    left for ``--shapes``, or for the guess: every command would run that dim at 1."""
    net = model.predict_net
    filled = set() if model.init_net is None else {n for op in model.init_net for n in op.outputs}
    shapes: dict[str, Shape] = {}
    for name in net.external_inputs:
        value_type = net.types.get(name)
        if name in filled or value_type is None or value_type.shape is None:
            continue
        dims = value_type.shape
        batch_ok = (
            not dims
            or isinstance(dims[0], int)
            or (isinstance(dims[0], str) and writable_symbol(dims[0]))
        )
        if batch_ok and all(isinstance(d, int) for d in dims[1:]):
            shapes[name] = tuple(d for d in dims if d is not None)
    return shapes


def _cmd_export_onnx(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, False)
    model = load_input(options.input, options.init, no_init=options.no_init, out=out)
    if model.dialect == ONNX:
        raise UsageError(
            f"{options.input} is an ONNX model already: export-onnx converts a Caffe2 pair "
            "(to rewrite an ONNX model: run MODEL.onnx -o OUT.onnx)"
        )
    refuse_overwriting_input(model, [Path(options.output)], "name another -o file")
    if not options.random_params:
        shapes, _ = read_shapes(model, options.input, options.shapes)
        _refuse_missing_weights(model, model_input_names(model)[0], shapes)
    prepared = _prepared(model, options.input, options, out, export=True)
    batch = _symbolic_batch(model, options.input, options, out, prepared.value_info.keys())
    try:
        _export(
            prepared.model,
            options,
            prepared.value_info,
            out,
            prepared.quantization,
            prepared.feeds,
            batch,
        )
    except UnsupportedOpError as exc:  # an export refused at the shapes guessed: say so
        from graphtools.feeds.report import guessed_note

        note = guessed_note(prepared.synthesis.inputs)
        if note is None:
            raise
        raise UsageError(f"{exc}; {note}") from exc
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "import-onnx": _cmd_import_onnx,
    "export-onnx": _cmd_export_onnx,
}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

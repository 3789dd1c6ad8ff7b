"""``show`` (a summary by default, dumps on request), ``ssa`` and ``list-passes``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from graphtools._core import ONNX
from graphtools.analysis.input_shapes import per_image_fills, placeholder_inputs
from graphtools.analysis.summary import ModelSummary, dtype_bytes, summarize
from graphtools.cli.common import (
    Output,
    UsageError,
    load_input,
    new_table,
    typing_shapes,
)
from graphtools.cli.onnx_show import initializer_rows, onnx_summary, print_onnx_summary
from graphtools.errors import GraphToolsError
from graphtools.ir import Model, Net
from graphtools.printer import format_op, print_model, print_net

__all__ = ["HANDLERS", "ops_of", "parse_slice"]

_VALUE_CHARS = 64
"""Argument values longer than this are cut in ``--ops`` dumps (``--full`` keeps them)."""


def ops_of(text: str | None, count: int) -> slice | None:
    """``parse_slice`` of ``--ops``, refused when it selects none of a net's ``count`` ops
    (``100:200`` of a 15-op net printed nothing, exit 0)."""
    chosen = parse_slice(text)
    if chosen is not None and not range(count)[chosen]:
        raise UsageError(f"--ops {text!r} selects no op: the net has {count} (0 to {count - 1})")
    return chosen


def parse_slice(text: str | None) -> slice | None:
    """``"3:10"`` -> ``slice(3, 10)``; ``"5"`` -> ``slice(5, 6)``; ``"-1"`` -> the last op;
    ``None`` -> ``None``."""
    if text is None or text == "all":
        return None
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            index = int(start)
            return slice(index, index + 1 if index != -1 else None)  # -1: the last op
        found = slice(int(start) if start else None, int(stop) if stop else None)
    except ValueError:
        raise UsageError(f"--ops {text!r} is not a range like 10:20, :50 or 7") from None
    first, end = found.start, found.stop
    if first is not None and end is not None and (first < 0) == (end < 0) and end <= first:
        raise UsageError(f"--ops {text!r} selects no op: A:B is ops A to B-1, B after A")
    return found


def _dims(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _human(count: float) -> str:
    for unit in ("", "K", "M", "G"):
        if abs(count) < 1000:
            return f"{count:.3g}{unit}"
        count /= 1000
    return f"{count:.3g}T"


def _fed_as_input(op_type: str, position: int) -> bool:
    """Whether ``verify`` feeds the blob op ``op_type`` reads at ``position`` as an input
    (asked only of a blob nothing provides: the roles load the executor)."""
    from graphtools.feeds.roles import ROLES

    return (op_type, position) in ROLES


def _summary_data(summary: ModelSummary, path: str, model: Model) -> dict[str, Any]:
    return {
        "path": path,
        "predict_net": str(model.predict_path) if model.predict_path else None,
        "init_net": str(model.init_path) if model.init_path else None,
        "name": summary.name,
        "ops": summary.ops,
        "init_ops": summary.init_ops,
        "op_types": dict(summary.op_types),
        "inputs": [{"name": b.name, "type": b.type} for b in summary.inputs],
        "input_shapes": {k: list(v) for k, v in summary.input_shapes.items()},
        "outputs": [{"name": b.name, "type": b.type} for b in summary.outputs],
        "params": [{"name": b.name, "type": b.type, "size": b.size} for b in summary.params],
        "param_values": summary.param_values,
        "missing_params": summary.missing_params,
        "contradiction": summary.contradiction,
        "devices": dict(summary.devices),
        "nested": [vars(n) for n in summary.nested],
    }


def _print_summary(out: Output, summary: ModelSummary, model: Model, where: str) -> None:
    files = " + ".join(str(p) for p in (model.predict_path, model.init_path) if p is not None)
    out.line(
        f"net {summary.name or '(unnamed)'}: {summary.ops} ops" + (f" ({files})" if files else "")
    )
    if summary.init_ops is not None:
        out.line(f"init_net: {summary.init_ops} ops")
    table = new_table("", "blob", "type")
    for blob in summary.inputs:
        table.add_row("input", blob.name, blob.type)
    for blob in summary.outputs:
        table.add_row("output", blob.name, blob.type)
    if not summary.outputs:
        table.add_row("output", "(none declared)", "name some with --outputs in run/verify/exec")
    out.table(table)
    if where and summary.input_shapes:
        shapes = ", ".join(f"{n}={_dims(s)}" for n, s in summary.input_shapes.items())
        out.line(f"types inferred with input shapes {shapes} ({where})")
    if summary.contradiction is not None:
        out.warn(
            f"the shape analysis refuses these input shapes ({summary.contradiction}); the "
            "types shown follow the parameters' types alone"
        )
    if summary.params:
        values = summary.param_values
        size = sum((p.size or 0) * dtype_bytes(p.type) for p in summary.params)
        out.line(
            f"parameters: {len(summary.params)} blobs, {_human(values)} values, {_human(size)}B"
        )
    if summary.missing_params:
        why = (
            "the init_net fills none of them; verify --random-params makes them up"
            if model.init_net is not None
            else "a predict_net without its init_net; verify makes them up"
        )
        out.line(f"parameters nothing provides: {len(summary.missing_params)} ({why})")
    types = new_table("op type", "count")
    for name, count in summary.op_types:
        types.add_row(name, str(count))
    out.table(types)
    out.line("devices: " + ", ".join(f"{name} {count}" for name, count in summary.devices))
    for nested in summary.nested:
        out.line(
            f"nested net: op #{nested.op_index} ({nested.op_type}) {nested.argument} "
            f"{nested.name!r}: {nested.ops} ops"
        )
    out.line("(--ops [A:B] lists the ops, --params the parameters, --full the whole dump)", level=2)


def _ops_text(net: Net, chosen: slice | None, full: bool) -> list[str]:
    view = net.ssa()
    indices = range(len(net))[chosen] if chosen is not None else range(len(net))
    max_chars = None if full else _VALUE_CHARS
    lines = []
    for index in indices:
        ins, outs = view.ssa[index]
        lines.append(format_op(net[index], index, ins, outs, full=full, max_chars=max_chars))
        for argument, nested in net[index].nested_nets():
            text = print_net(nested, str(argument), indent=1, full=full, max_chars=max_chars)
            lines.append(text)
    return lines


def _ops_data(net: Net, chosen: slice | None) -> list[dict[str, Any]]:
    view = net.ssa()
    indices = range(len(net))[chosen] if chosen is not None else range(len(net))
    data = []
    for index in indices:
        op = net[index]
        ins, outs = view.ssa[index]
        data.append(
            {
                "index": index,
                "type": op.type,
                "inputs": [f"{n}@{v}" for n, v in ins],
                "outputs": [f"{n}@{v}" for n, v in outs],
                "line": format_op(op, index, ins, outs, max_chars=_VALUE_CHARS),
            }
        )
    return data


def _params_rows(model: Model) -> list[tuple[str, str, str]]:
    if model.init_net is None:
        return []
    from graphtools.analysis.shapes import fill_types

    types = fill_types(model.init_net)
    rows = []
    for op in model.init_net:
        for name in op.outputs:
            rows.append((name, str(types.get(name, "?")), op.type))
    return rows


def _cmd_show(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    if len(options.paths) == 1:
        path = options.paths[0]
        model = load_input(path, options.init, no_init=options.no_init, out=out)
        document = _show_one(out, options, path, model)
        if options.json:
            out.json(document)
        return 0
    # Several paths: each model shown, one that cannot be read said as its own error (its
    # entry in --json too), as a batch of run or verify reports each model; exit 2 if any.
    documents: list[Any] = []
    for index, path in enumerate(options.paths):
        out.line(("\n" if index else "") + f"# {path}")
        try:
            model = load_input(path, options.init, no_init=options.no_init, out=out)
            documents.append(_show_one(out, options, path, model))
        except GraphToolsError as exc:
            said = str(exc) if str(path) in str(exc) else f"{path}: {exc}"
            out.error(f"error: {said}")
            documents.append({"path": path, "error": said})
    if options.json:
        out.json(documents)
    return 2 if any("error" in document for document in documents) else 0


def _show_one(out: Output, options: argparse.Namespace, path: str, model: Model) -> Any:
    onnx = model.dialect == ONNX
    dumps = options.ops is not None or options.params
    if options.full and not dumps:  # with --ops: the chosen ops, values not cut
        out.line(print_model(model, full=True).rstrip("\n"), level=0)
        return {"path": path, "dump": print_model(model, full=True)}
    data: dict[str, Any] = {"path": path}
    if options.ops is not None:
        chosen = ops_of(options.ops, len(model.predict_net))
        for line in _ops_text(model.predict_net, chosen, options.full):
            out.line(line, level=0)
        data["ops"] = _ops_data(model.predict_net, chosen)
    if options.params:
        if onnx:
            table = new_table("initializer", "type", "data")
            rows = initializer_rows(model)
        else:
            table = new_table("parameter", "type", "filled by")
            rows = _params_rows(model)
        for row in rows:
            table.add_row(*row)
        if not rows:
            out.line("no init_net: the model has no parameters of its own", level=0)
        out.table(table, level=0)
        key = "data" if onnx else "fill"
        data["params"] = [{"name": n, "type": t, key: f} for n, t, f in rows]
    if dumps:
        return data
    if onnx:
        if options.shapes:
            out.note("--shapes is not used for an ONNX model: its types are the declared ones")
        described = onnx_summary(model, path)
        print_onnx_summary(out, described)
        return described
    shapes, where = typing_shapes(model, path, options.shapes)
    summary = summarize(model, shapes, _fed_as_input)
    _print_summary(out, summary, model, where)
    for name, (_, fill) in placeholder_inputs(model).items():
        out.note(
            f"input {name!r}: the init_net fills it with a placeholder ({fill}); verify and "
            "export-onnx feed it as an input, and so it is typed here"
        )
    for name, (_, _, index, op_type) in per_image_fills(model).items():
        out.note(
            f"{name!r}: the init_net fills it, for the image size the model was exported at; "
            f"op #{index} ({op_type}) reads it as per-image data, so verify and export-onnx "
            "feed it as an input made to fit the image they feed"
        )
    return _summary_data(summary, path, model)


def _ssa_rows(net: Net) -> list[tuple[str, str | None, list[str]]]:
    """``(blob@version, writer, readers)`` per versioned blob: the writer is ``%i``, ``input``
    for a version 0, or ``None`` when nothing writes it."""
    view = net.ssa()
    producers = view.producers
    # the empty name is no value (an optional input left out): not a blob
    blobs = sorted(
        blob for blob in set(producers) | set(view.consumers) | set(view.external_inputs) if blob[0]
    )
    rows = []
    for name, version in blobs:
        writer = producers.get((name, version))
        written = f"%{writer[0]}" if writer else ("input" if version == 0 else None)
        readers = [f"%{i}" for i in view.consumer_ops((name, version))]
        rows.append((f"{name}@{version}", written, readers))
    return rows


def _cmd_ssa(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    model = load_input(options.path, options.init, no_init=options.no_init, out=out)
    rows = _ssa_rows(model.predict_net)
    if options.json:
        out.json([{"blob": b, "written_by": w, "read_by": r} for b, w, r in rows])
        return 0
    table = new_table("blob@version", "written by", "read by")
    for blob, written, readers in rows:
        table.add_row(blob, written or "-", " ".join(readers) or "-")
    out.table(table, level=0)
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "show": _cmd_show,
    "ssa": _cmd_ssa,
}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

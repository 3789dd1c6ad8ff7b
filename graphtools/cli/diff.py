"""``diff A B``: the structural diff of two models (``graphtools.analysis.model_diff``).

Exit code 0 when they are the same, 1 when they differ, 2 on bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from graphtools._core import CAFFE2, MAIN_NET, ONNX
from graphtools.analysis.model_diff import ModelDiff, NetDiff, diff_models
from graphtools.cli.common import Output, load_input
from graphtools.cli.onnx_diff import add_initializer_changes

__all__ = ["HANDLERS", "render_diff"]


def _net_lines(change: NetDiff) -> list[str]:
    label = change.label
    ends = "" if label == MAIN_NET[ONNX] else "external "  # an ONNX graph's inputs and outputs
    lines = []
    for ref in change.removed:
        lines.append(f"- {label} %{ref.index} {ref.type} -> {', '.join(ref.outputs) or '()'}")
    for ref in change.added:
        lines.append(f"+ {label} %{ref.index} {ref.type} -> {', '.join(ref.outputs) or '()'}")
    for op in change.changed:
        where = f"~ {label} %{op.before} -> %{op.after} {op.type}"
        for position, old, new in op.rewired:
            lines.append(f"{where}: input {position} {old} -> {new}")
        for position, old, new in op.renamed:
            lines.append(f"{where}: output {position} renamed {old} -> {new}")
        for arg in op.args:
            lines.append(f"{where}: arg {arg.name} {arg.before or '-'} -> {arg.after or '-'}")
        if op.device is not None:
            lines.append(f"{where}: device {op.device[0]} -> {op.device[1]}")
        if op.engine is not None:
            lines.append(f"{where}: engine {op.engine[0]} -> {op.engine[1]}")
        if op.domain is not None:
            lines.append(f"{where}: domain {op.domain[0]} -> {op.domain[1]}")
    for name in change.inputs_removed:
        lines.append(f"- {label} {ends}input {name}")
    for name in change.inputs_added:
        lines.append(f"+ {label} {ends}input {name}")
    for name in change.outputs_removed:
        lines.append(f"- {label} {ends}output {name}")
    for name in change.outputs_added:
        lines.append(f"+ {label} {ends}output {name}")
    for name, before, after in change.types_changed:
        lines.append(f"~ {label} type of {name}: {before} -> {after}")
    return lines


def render_diff(out: Output, change: ModelDiff) -> None:
    """The diff as lines (``-`` removed, ``+`` added, ``~`` changed) and a count line."""
    lines = []
    if change.opsets is not None:
        lines.append(f"~ opsets {', '.join(change.opsets[0])} -> {', '.join(change.opsets[1])}")
    if change.ir_versions is not None:
        lines.append(f"~ IR version {change.ir_versions[0]} -> {change.ir_versions[1]}")
    lines += _net_lines(change.predict)
    if change.init is not None:
        lines += _net_lines(change.init)
    lines += [f"- {change.params_label} {name}" for name in change.params_removed]
    lines += [f"+ {change.params_label} {name}" for name in change.params_added]
    lines += [f"~ {change.params_label} {name}" for name in change.params_changed]
    if change.init_presence is not None:
        had = change.init_presence[0]
        lines.append(f"{'-' if had else '+'} init_net ({'removed' if had else 'added'})")
    lines += [f"{sign} function {name}" for sign, name in change.functions]
    lines += [f"{sign} sparse initializer {name}" for sign, name in change.sparse]
    for key, before, after in change.metadata:
        lines.append(f"~ metadata {key!r}: {before!r} -> {after!r}")
    for name, before, after in change.model_fields:
        lines.append(f"~ {name}: {before!r} -> {after!r}")
    for line in lines:
        out.line(line)
    p = change.predict
    renamed = len(p.renamed_blobs)
    contract = [f"{len(p.types_changed)} declared types changed"] if p.types_changed else []
    if change.opsets is not None:
        contract.append("opsets changed")
    if change.ir_versions is not None:
        contract.append("IR version changed")
    if change.functions:
        contract.append(f"{len(change.functions)} functions changed")
    if change.sparse:
        contract.append(f"{len(change.sparse)} sparse initializers changed")
    said = [f"metadata differs: {len(change.metadata)} keys"] if change.metadata else []
    said += [f"{len(change.model_fields)} descriptive fields differ"] if change.model_fields else []
    metadata = f" ({'; '.join(said)})" if said else ""
    out.line(
        f"same structure{metadata}"
        if change.same
        else f"{p.label}: {len(p.removed)} removed, {len(p.added)} added, "
        f"{len(p.changed)} changed ({renamed} renamed blobs); {change.params_label}s: "
        f"{len(change.params_removed)} removed, {len(change.params_added)} added"
        + (f", {len(change.params_changed)} changed" if change.params_changed else "")
        + "".join(f"; {part}" for part in contract),
        level=0,
    )


def _cmd_diff(options: argparse.Namespace) -> int:
    out = Output(options.verbosity, options.json)
    first = load_input(options.first, options.init, no_init=options.no_init, out=out)
    second = load_input(
        options.second,
        options.other_init,
        no_init=options.no_init,
        out=out,
        init_option="--other-init",
    )
    if first.dialect != second.dialect:
        kinds = {ONNX: "an ONNX model", CAFFE2: "a Caffe2 pair"}
        out.note(
            f"{options.first} is {kinds[first.dialect]} and {options.second} "
            f"{kinds[second.dialect]}: op types, argument names and parameters are each "
            "dialect's, so a conversion shows as changes; to compare their outputs, "
            "verify --onnx X.onnx PAIR"
        )
    change = diff_models(first, second)
    if ONNX in (first.dialect, second.dialect):
        add_initializer_changes(change, first, second)
    if options.json:
        out.json(change.to_dict())
    else:
        render_diff(out, change)
    return 0 if change.same else 1


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {"diff": _cmd_diff}
"""The commands this module runs, by name (their options: ``graphtools.cli.grammar``)."""

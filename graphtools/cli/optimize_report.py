"""``run`` on an ONNX model the way users run onnxsim: the pipeline on the ONNX graph itself,
with ``--opset N`` converting first (onnx's version converter, pass ``convert-opset``) and
``--dynamic-batch`` making the batch symbolic once the pipeline reached its fixpoint (pass
``make-dynamic-batch``), then the before/after table of op types (control-flow bodies
included) and file sizes that onnxsim prints.

``onnx_stages`` and ``census``/``census_table`` are what a native ONNX ``run`` calls;
``run_onnx`` is that ``run`` for one ``.onnx`` file written to an ``.onnx`` file (or in
place): load, stages, write atomically with the external data beside it, report.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from graphtools.cli.common import (
    Output,
    UsageError,
    new_table,
    parse_name_list,
    record_data,
    report_records,
    set_outputs,
)
from graphtools.ir import Model, Net
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.passes.convert_opset import ConvertOpset
from graphtools.passes.make_dynamic_batch import MakeDynamicBatch
from graphtools.serde.atomic import write_files
from graphtools.serde.onnx_codec import external_tensors
from graphtools.serde.onnx_io import load_onnx_model, onnx_model_files

__all__ = ["Census", "census", "census_data", "census_table", "handles", "onnx_stages", "run_onnx"]

_SUFFIX = ".onnx"


def handles(options: argparse.Namespace) -> bool:
    """Whether ``run`` got one ONNX model file, to write as an ONNX file (or in place)."""
    inputs = getattr(options, "inputs", [])
    if len(inputs) != 1 or not str(inputs[0]).lower().endswith(_SUFFIX):
        return False
    output = options.output
    return Path(inputs[0]).is_file() and (
        (output is None and options.in_place) or str(output or "").lower().endswith(_SUFFIX)
    )


def onnx_stages(
    pipeline: str, steps: int, *, opset: int | None = None, dynamic_batch: bool = False
) -> list[PassManager]:
    """The managers ``run`` applies to an ONNX model, in order: ``convert-opset`` when an
    opset is asked for, the pipeline, ``make-dynamic-batch`` after it (on the fixpoint the
    pipeline reached: targets folded to constants are what it rewrites). Both are idempotent:
    the second round of their stage only confirms the fixpoint."""
    stages = []
    if opset is not None:
        stages.append(PassManager([ConvertOpset(opset=opset)], steps=2))
    stages.append(PassManager.parse(pipeline, steps=steps))
    if dynamic_batch:
        stages.append(PassManager([MakeDynamicBatch()], steps=2))
    return stages


@dataclass(frozen=True)
class Census:
    """What the table shows of one model: its op types (bodies included) and its files' size."""

    ops: Counter[str]
    size: int

    @property
    def nodes(self) -> int:
        return sum(self.ops.values())


def _count(net: Net, ops: Counter[str]) -> None:
    for op in net:
        ops[op.type] += 1
    for index in net.nested_op_indices():
        for _, nested in net[index].nested_nets():
            _count(nested, ops)


def census(model: Model, sizes: Iterable[int]) -> Census:
    """The census of ``model`` whose files are ``sizes`` bytes long."""
    ops: Counter[str] = Counter()
    _count(model.predict_net, ops)
    return Census(ops, sum(sizes))


def input_sizes(model: Model) -> list[int]:
    """The sizes of the files a loaded model lies in: its file and its external data files."""
    paths = {model.predict_path} if model.predict_path is not None else set()
    paths.update(
        tensor.external.path  # type: ignore[attr-defined]
        for _, _, tensor in external_tensors(model)
    )
    return [path.stat().st_size for path in paths if path is not None and path.is_file()]


def _size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024  # type: ignore[assignment]
    return str(value)


def census_table(before: Census, after: Census) -> Table:
    """The op types before and after (those present in either), then nodes and file size."""
    table = new_table("", "before", "after")
    for op_type in sorted(before.ops.keys() | after.ops.keys()):
        table.add_row(op_type, str(before.ops[op_type]), str(after.ops[op_type]))
    table.add_row("nodes", str(before.nodes), str(after.nodes))
    table.add_row("file size", _size(before.size), _size(after.size))
    return table


def census_data(before: Census, after: Census) -> dict[str, Any]:
    """The table as JSON-ready data."""
    types = sorted(before.ops.keys() | after.ops.keys())
    return {
        "ops": {t: {"before": before.ops[t], "after": after.ops[t]} for t in types},
        "nodes": {"before": before.nodes, "after": after.nodes},
        "bytes": {"before": before.size, "after": after.size},
    }


def _refuse_options(options: argparse.Namespace) -> None:
    for flag, given in (
        ("--text/--binary", getattr(options, "text", None) is not None),
        ("--shapes", bool(getattr(options, "shapes", None))),
        ("--device", bool(getattr(options, "device", None))),
    ):
        if given:
            raise UsageError(f"{flag} is not for an ONNX model (its inputs are typed in it)")


def run_onnx(options: argparse.Namespace, out: Output) -> int:
    """``run`` on one ONNX model file (see the module docstring)."""
    _refuse_options(options)
    source = Path(options.inputs[0])
    target = source if options.in_place else Path(options.output)
    if options.in_place and options.output is not None:
        raise UsageError("give -o or --in-place, not both")
    if not options.in_place and target.resolve() == source.resolve():
        raise UsageError(f"refusing to overwrite the input {target}; pass --in-place to do that")
    model = load_onnx_model(source)
    outputs = parse_name_list(options.outputs)
    if outputs:
        set_outputs(model, outputs)
    before = census(model, input_sizes(model))
    stages = onnx_stages(
        options.pipeline, options.steps, opset=options.opset, dynamic_batch=options.dynamic_batch
    )
    records: list[PassRecord] = []
    for stage in stages:
        done = stage(model)
        report_records(out, stage, done, options.time_passes)
        records.extend(done)
    files = onnx_model_files(model, target, external_data=options.external_data)
    written = write_files(files)
    after = census(model, (len(data) for _, data in files))
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in model.opset_imports.items())
    ir_version = getattr(model.header, "ir_version", 0)
    for number, path in enumerate(written):
        what = f" (opsets {opsets}; IR {ir_version})" if number == 0 else " (external data)"
        out.line(f"wrote {path}{what}")
    out.table(census_table(before, after))
    if options.json:
        out.json(
            {
                "model": str(source),
                "format": "onnx",
                "stages": [stage.spec for stage in stages],
                "rounds": record_data(records),
                "written": [str(p) for p in written],
                "census": census_data(before, after),
            }
        )
    return 0

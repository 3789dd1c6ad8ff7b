"""What ``run`` adds for ONNX models optimised the way users run onnxsim: the stages
(``--opset N`` converting first with onnx's version converter, pass ``convert-opset``; the
pipeline; ``--dynamic-batch`` making the batch symbolic once the pipeline reached its fixpoint,
pass ``make-dynamic-batch``), and the before/after table of op types (control-flow bodies
included) and file sizes that onnxsim prints. ``graphtools.cli.onnx_run`` calls them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graphtools.cli.common import new_table
from graphtools.cli.output import TextTable
from graphtools.errors import PassError
from graphtools.ir import Model, Net
from graphtools.pass_infra import PassManager, PassRecord
from graphtools.passes.convert_opset import ConvertOpset
from graphtools.passes.make_dynamic_batch import MakeDynamicBatch

__all__ = [
    "Census",
    "census",
    "census_data",
    "census_table",
    "input_sizes",
    "run_stages",
]


def run_stages(
    model: Model,
    manager: PassManager,
    *,
    opset: int | None = None,
    dynamic_batch: bool = False,
    after_pass: Callable[[PassRecord, Model], None] | None = None,
) -> list[tuple[PassManager, list[PassRecord]]]:
    """Run on ``model``, in order: ``convert-opset`` when an ``opset`` is asked for, the
    pipeline of ``manager``, ``make-dynamic-batch`` with ``dynamic_batch`` (after the
    pipeline's fixpoint: the dead ends are gone and the targets folded to constants are what
    it rewrites); each manager with its records. The two passes are idempotent: the second
    round of their stage only confirms the fixpoint.

    When ``make-dynamic-batch`` refuses the pipeline's result, the run starts again from the
    model as it came, with the batch made symbolic before the pipeline (and checked again
    after it): a pipeline run on the exported batch may rewrite what holds at that batch only
    (a Squeeze and a Transpose of an LSTM's output merged into a Reshape right at batch 1),
    which no later pass can take back. If that refuses too, the first refusal is raised.
    """
    stages = [] if opset is None else [PassManager([ConvertOpset(opset=opset)], steps=2)]
    if not dynamic_batch:
        return _ran(model, [*stages, manager], after_pass)
    start = model.snapshot()
    try:
        return _ran(model, [*stages, manager, _dynamic()], after_pass)
    except PassError as refused:
        if refused.pass_name != MakeDynamicBatch.name:
            raise
        first = refused
    model.restore(start)
    try:
        return _ran(model, [*stages, _dynamic(), manager, _dynamic()], after_pass)
    except PassError:
        pass  # the first refusal says more: raised below, with its own cause (--traceback)
    raise first


def _dynamic() -> PassManager:
    return PassManager([MakeDynamicBatch()], steps=2)


def _ran(
    model: Model,
    stages: list[PassManager],
    after_pass: Callable[[PassRecord, Model], None] | None,
) -> list[tuple[PassManager, list[PassRecord]]]:
    return [(stage, stage(model, after_pass=after_pass)) for stage in stages]


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


def input_sizes(model: Model, piped: bytes | None = None) -> list[int]:
    """The sizes of the files a loaded model lies in: its file and its external data files;
    ``piped``: the model's bytes when its file is a pipe (which has no size to ask)."""
    from graphtools.serde.onnx_codec import external_tensors  # not for run of a Caffe2 pair

    paths = {model.predict_path} if model.predict_path is not None else set()
    paths.update(
        tensor.external.path  # type: ignore[attr-defined]
        for _, _, tensor in external_tensors(model)
    )
    sizes = [path.stat().st_size for path in paths if path is not None and path.is_file()]
    return sizes if piped is None else [len(piped), *sizes]


def _size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024  # type: ignore[assignment]
    return str(value)


def census_table(before: Census, after: Census) -> TextTable:
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

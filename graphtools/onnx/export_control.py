"""Exporter for Caffe2's ``If``: its ``then_net``/``else_net`` become ONNX sub-graphs.

Caffe2 branches run in the If's workspace and write the If's output names (and may overwrite
a blob several times); ONNX branches are SSA graphs whose outputs the If returns. So every
value a branch writes gets a fresh name, reads follow the latest write (else the outer blob),
and the branch's outputs are the last values written to the If's output names. A branch that
does not write one of them, or that writes a blob of the enclosing net (a side effect ONNX
cannot express), is refused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from graphtools.ir import Net, Op
from graphtools.onnx.export_context import EXPORTERS, ExportContext, exporter

__all__: list[str] = []


def _branch(cx: ExportContext, net: Net, outputs: tuple[str, ...], label: str) -> onnx.GraphProto:
    latest: dict[str, str] = {}
    renamed: list[Op] = []
    for op in net.ops:
        if op.has_nested_nets():
            raise cx.refuse(f"{label} holds nested nets (nested control flow)")
        for name in op.inputs:
            if name not in latest and name in cx.rewritten:
                raise cx.refuse(
                    f"{label} reads {name!r}, which the enclosing net writes more than once "
                    "(its exported versions have new names the branch cannot follow)"
                )
        inputs = [latest.get(name, name) for name in op.inputs]
        written = []
        for name in op.outputs:
            if name not in outputs and name in cx.outer_names:
                raise cx.refuse(f"{label} overwrites blob {name!r} of the enclosing net")
            latest[name] = cx.fresh(f"{name}_{label}")
            written.append(latest[name])
        renamed.append(op.replace(inputs=inputs, outputs=written))
    missing = [name for name in outputs if name not in latest]
    if missing:
        raise cx.refuse(f"{label} does not write If outputs {missing}")
    read = {n for op in renamed for n in op.inputs} | {latest[o] for o in outputs}
    sub = cx.child(read, f"{cx.net_label}, {label}")
    for index, op in enumerate(renamed):
        fn = EXPORTERS.get(op.type)
        sub.op, sub.index = op, index
        if fn is None:
            raise sub.refuse(f"no ONNX mapping for Caffe2 op type {op.type!r}")
        fn(sub, op)
    cx.missing_rank = cx.missing_rank or sub.missing_rank
    results = []
    for name in outputs:
        value = latest[name]
        if value in results:  # one value returned twice: ONNX outputs need distinct names
            copy = cx.fresh(f"{value}_copy")
            sub.nodes.append(helper.make_node("Identity", [value], [copy]))
            value = copy
        results.append(value)
    return helper.make_graph(
        sub.nodes,
        f"{net.name or 'branch'}_{label}",
        [],
        [onnx.ValueInfoProto(name=n) for n in results],
    )


@exporter("If")
def _if(cx: ExportContext, op: Op) -> None:
    then_net, else_net = op.arg("then_net"), op.arg("else_net")
    if not isinstance(then_net, Net) or not isinstance(else_net, Net):
        raise cx.refuse(
            "If without an else_net (its outputs keep their old values) has no ONNX form"
        )
    branches = {
        "then_branch": _branch(cx, then_net, op.outputs, "then"),
        "else_branch": _branch(cx, else_net, op.outputs, "else"),
    }
    cx.node("If", op.inputs[:1], op.outputs, **branches)

"""Exporter for Caffe2's ``If``: its ``then_net``/``else_net`` become ONNX sub-graphs.

Caffe2 branches run in the If's workspace: they read the enclosing net's blobs and write the
If's outputs, and may write other blobs of the enclosing net (Mask R-CNN's mask head writes its
masks and rescales the boxes in its ``else_net``). ``explicit_if_effects`` makes those effects
explicit before the SSA renaming: the blobs the branches read become the If's inputs and the
blobs they write that the net reads later (or returns) its outputs, so the renaming gives each
its version, and the export maps the branches' names to them.

ONNX branches are SSA graphs whose outputs the If returns. So every value a branch writes gets a
fresh name, reads follow the latest write (else the outer version), and a branch's outputs are
the last values written to the If's outputs. A branch that does not write one returns the
outer value the name held before the If; a name without one (Caffe2 leaves it unset) is an
empty tensor (0 rows) of the type the other branch gives it. ONNX fixes the rank of a graph's
values, Caffe2 does not: when the outer value's rank differs from the one the other branch
writes (Mask R-CNN2Go fills ``mask_fcn_probs`` with a ``[0]`` placeholder, replaced by the
``(R, K, M, M)`` masks when there are boxes), the branch returns an empty tensor of the written
type instead (no masks for no boxes). The branches' types come from our shape analysis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from graphtools.analysis.shapes import ShapeInfo, TensorType, infer_shapes
from graphtools.errors import GraphToolsError
from graphtools.ir import Net, Op
from graphtools.nested import nested_access
from graphtools.onnx.export_context import EXPORTERS, ExportContext, TypeInfo, exporter

__all__ = ["explicit_if_effects"]

BranchNames = tuple[tuple[str, ...], tuple[str, ...]]


def _free_reads(net: Net) -> list[str]:
    written: set[str] = set()
    free: dict[str, None] = {}
    for op in net.ops:
        for name in (*op.inputs, *nested_access(op).reads):
            if name not in written:
                free[name] = None
        written.update(op.outputs)
    return list(free)


def explicit_if_effects(net: Net) -> tuple[Net, dict[int, BranchNames]]:
    """``net`` with the effects of its top-level ``If`` ops explicit: the outer blobs a branch
    reads become inputs (after the condition), with the blobs a branch writes that ``net``
    reads later or returns, which then become outputs; and ``{op index: (inputs, outputs)}``
    as the branches spell them (SSA renaming changes the op's, not the branches'). ``net``
    itself is returned when it holds no such If."""
    later: set[str] = set(net.external_outputs)
    after: dict[int, set[str]] = {}
    for index in range(len(net) - 1, -1, -1):
        op = net[index]
        if op.type == "If":
            after[index] = set(later)
        later.update(op.inputs)
        later.update(nested_access(op).reads)
    known: set[str] = set(net.external_inputs)
    found: dict[int, BranchNames] = {}
    ops = []
    for index, op in enumerate(net.ops):
        branches = [n for name, n in op.nested_nets() if name in ("then_net", "else_net")]
        if index in after and branches:
            written = dict.fromkeys(n for branch in branches for o in branch for n in o.outputs)
            side = [n for n in written if n in after[index] and n not in op.outputs]
            reads = dict.fromkeys(n for branch in branches for n in _free_reads(branch))
            reads.update((n, None) for n in (*op.outputs, *side) if n in known)
            inputs = [*op.inputs[:1], *(n for n in reads if n not in op.inputs[:1])]
            op = op.replace(inputs=inputs, outputs=[*op.outputs, *side])
            found[index] = (tuple(op.inputs), tuple(op.outputs))
        known.update(op.outputs)
        ops.append(op)
    if not found:
        return net, found
    return Net(ops, net.external_inputs, net.external_outputs, name=net.name), found


def _analysis(cx: ExportContext, net: Net, outer: Mapping[str, str]) -> ShapeInfo | None:
    """Our shape analysis of a branch, from the types of the outer values it reads."""
    given = {}
    for name in {*net.external_inputs, *_free_reads(net)}:
        version = outer.get(name, name)
        info = cx.info(version)
        if info is not None and info.dtype is not None:
            given[name] = TensorType(info.dtype, info.shape, quantized=version in cx.quant)
    try:
        return infer_shapes(net, given)
    except GraphToolsError:
        return None


def _written_types(net: Net, found: ShapeInfo | None) -> dict[str, TypeInfo]:
    """The final types of the blobs a branch writes (those the analysis knows)."""
    types: dict[str, TypeInfo] = {}
    if found is None:
        return types
    for name in {n for op in net for n in op.outputs}:
        t = found.final(name)
        if t.dtype is not None:
            types[name] = TypeInfo(t.dtype, t.shape)
    return types


def _empty(cx: ExportContext, name: str, info: TypeInfo | None, label: str) -> str:
    """An empty tensor (0 rows) of type ``info`` standing for ``name`` in a branch (``cx``
    that of the branch, the If op naming the refusal)."""
    dims = None if info is None or info.shape is None else info.shape[1:]
    if (
        info is None
        or info.dtype is None
        or dims is None
        or not all(isinstance(d, int) for d in dims)
    ):
        raise cx.refuse(
            f"{label} leaves {name!r} unset (or of another rank than the other branch gives "
            "it) and the other branch's type of it is not known statically"
        )
    value = cx.fresh(f"{name}_{label}_empty")
    shape = cx.const(np.asarray([0, *dims], np.int64), f"{value}_shape")
    filler = numpy_helper.from_array(np.zeros(1, dtype=info.dtype))
    cx.node("ConstantOfShape", [shape], [value], value=filler)
    return value


def _branch(
    cx: ExportContext,
    net: Net,
    outputs: Sequence[tuple[str, str]],
    outer: Mapping[str, str],
    empties: Mapping[str, TypeInfo | None],
    found: ShapeInfo | None,
    label: str,
) -> onnx.GraphProto:
    """``net`` as a sub-graph returning, for each ``(branch name, If output)``, the branch's
    last write of the name, else an empty tensor of the type ``empties`` gives it, else its
    outer value; ``outer`` maps the names the branch reads from the enclosing net to their
    versions there; ``found`` the branch's shape analysis (types for the values it writes)."""
    latest: dict[str, str] = {}
    version: dict[str, int] = {}
    renamed: list[Op] = []
    for op in net.ops:
        if op.has_nested_nets():
            raise cx.refuse(f"{label} holds nested nets (nested control flow)")
        inputs = []
        for name in op.inputs:
            if name not in latest and name not in outer and name in cx.rewritten:
                raise cx.refuse(
                    f"{label} reads {name!r}, which the enclosing net writes more than once "
                    "(its exported versions have new names the branch cannot follow)"
                )
            inputs.append(latest.get(name, outer.get(name, name)))
        written = []
        for name in op.outputs:
            latest[name] = cx.fresh(f"{name}_{label}")
            written.append(latest[name])
            version[name] = version.get(name, 0) + 1
            t = None if found is None else found.types.get((name, version[name]))
            if t is not None and t.dtype is not None:
                cx.types[latest[name]] = TypeInfo(t.dtype, t.shape)
        renamed.append(op.replace(inputs=inputs, outputs=written))
    read = {n for op in renamed for n in op.inputs} | set(latest.values())
    sub = cx.child(read, f"{cx.net_label}, {label}")
    for index, op in enumerate(renamed):
        fn = EXPORTERS.get(op.type)
        sub.op, sub.index = op, index
        if fn is None:
            raise sub.refuse(f"no ONNX mapping for Caffe2 op type {op.type!r}")
        fn(sub, op)
    cx.missing_rank = cx.missing_rank or sub.missing_rank
    sub.op, sub.index, sub.net_label = cx.op, cx.index, cx.net_label
    results = []
    for name, _ in outputs:
        if name in latest:
            results.append(latest[name])
        elif name in outer and name not in empties:
            results.append(outer[name])
        else:
            results.append(_empty(sub, name, empties.get(name), label))
    return sub.graph(f"{net.name or 'branch'}_{label}", results)


@exporter("If")
def _if(cx: ExportContext, op: Op) -> None:
    then_net, else_net = op.arg("then_net"), op.arg("else_net")
    if not isinstance(then_net, Net) or not isinstance(else_net, Net):
        raise cx.refuse(
            "If without an else_net (its outputs keep their old values) has no ONNX form"
        )
    inputs, outputs = cx.nested_names.get(cx.index, (tuple(op.inputs), tuple(op.outputs)))
    outer = dict(zip(inputs[1:], op.inputs[1:], strict=True))
    pairs = list(zip(outputs, op.outputs, strict=True))
    nets = {"then": then_net, "else": else_net}
    written = {k: {n for o in net for n in o.outputs} for k, net in nets.items()}
    analyses = {k: _analysis(cx, net, outer) for k, net in nets.items()}
    types = {k: _written_types(nets[k], analyses[k]) for k in nets}
    empties: dict[str, dict[str, TypeInfo | None]] = {"then": {}, "else": {}}
    for name, output in pairs:
        for this, other in (("then", "else"), ("else", "then")):
            if name in written[this] or name not in written[other]:
                continue
            given = types[other].get(name)
            before = cx.info(outer[name]) if name in outer else None
            if name not in outer or _rank(before) != _rank(given):
                empties[this][name] = given
            if given is not None:
                cx.declare(output, given.dtype, given.shape or ())
    branches = {
        f"{k}_branch": _branch(cx, net, pairs, outer, empties[k], analyses[k], k)
        for k, net in nets.items()
    }
    cx.node("If", op.inputs[:1], op.outputs, **branches)


def _rank(info: TypeInfo | None) -> int | None:
    return None if info is None or info.shape is None else len(info.shape)

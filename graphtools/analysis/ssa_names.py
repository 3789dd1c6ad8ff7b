"""SSA names for a net (every name written once), as Caffe2's ONNX frontend chose them.

ONNX graphs are SSA: a value has one producer. Caffe2 nets overwrite blobs in place, so the
frontend's ``_ssa_rewrite`` renamed versioned blobs (``get_ssa`` numbering) with one of two
rules, both offered here:

* ``style="multi"`` (Caffe2 since November 2018, the default): only a blob with more than one
  version in the ops is renamed, ``name_version`` for its versions >= 1; version 0 and
  single-version blobs keep their names; external outputs take their final version's name.
  External inputs, init_net and ``value_info`` are unchanged.
* ``style="all"`` (2018): every blob becomes ``name_version``, version 0 included, and so do
  init_net outputs and external lists, predict_net external inputs and ``value_info`` keys.

Upstream never checked that a new name was free. Here a generated name that is already a blob
name kept by the rewrite gets ``_1``, ``_2``, ... appended (the first free one; candidates are
tried in op order), e.g. ``x`` version 1 becomes ``x_1_1`` when a blob ``x_1`` exists. A name
that collides with nothing is exactly upstream's, and in ``style="all"`` nothing can collide
(``name_version`` splits back uniquely at its last ``_``). Nested nets (``If``/``While``/
``RecurrentNetwork`` step nets) are not renamed, as upstream. Linear in the size of the nets.

Example (style ``multi``, external input and output ``X``)::

    before                          after
      #0 X@1 = Relu(X@0)              #0 X_1@1 = Relu(X@0)
      #1 X@2 = Relu(X@1)              #1 X_2@1 = Relu(X_1@0)
    external_output: X              external_output: X_2
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graphtools.errors import (
    InvalidArgumentError,
    InvalidNetError,
    MissingBlobError,
    UnsupportedOpError,
)
from graphtools.ir import Net, Op
from graphtools.nested import names_in_nested_nets, nested_access
from graphtools.ssa import VersionedBlob

__all__ = ["STYLES", "SSANames", "check_init_net", "plan_ssa_names", "renamed_for_export"]

STYLES = ("multi", "all")
"""The naming rules: ``multi`` (Caffe2 since Nov 2018) and ``all`` (2018)."""

_INIT_OP = re.compile("GivenTensor.*Fill")


def check_init_net(init_net: Net) -> None:
    """Refuse an init_net that is not one ``GivenTensor*Fill`` per param (as upstream)."""
    for index, op in enumerate(init_net.ops):
        if not _INIT_OP.match(op.type):
            raise UnsupportedOpError(
                f"init_net op {index} ({op.type}) writing {list(op.outputs)}: only "
                "GivenTensor*Fill ops can precede an ONNX export (run the init_net and rebuild "
                "it with construct_init_net_from_params first)"
            )
        if len(op.outputs) != 1:
            raise InvalidNetError(
                f"init_net op {index} ({op.type}) writes {len(op.outputs)} blobs; "
                "a GivenTensor*Fill writes exactly one"
            )


def _multi_names(
    net: Net, init_net: Net | None, value_info: Iterable[str]
) -> dict[VersionedBlob, str]:
    """New names of the versioned blobs ``style="multi"`` renames (the others keep theirs).

    Plain ``name_version`` names cannot collide with each other (the version splits back off
    at the last ``_``), only with names the rewrite keeps; those few get the first free
    ``_1``, ``_2``, ... suffix, in op order, after every plain name has been reserved.
    """
    blobs = dict.fromkeys(blob for ins, outs in net.ssa().ssa for blob in (*ins, *outs))
    version_sets: dict[str, set[int]] = {}
    for name, version in blobs:
        version_sets.setdefault(name, set()).add(version)
    renamed = [(n, v) for n, v in blobs if v != 0 and len(version_sets[n]) > 1]
    kept = {n for n, versions in version_sets.items() if 0 in versions or len(versions) == 1}
    kept.update(net.external_inputs, value_info, names_in_nested_nets(net))
    if init_net is not None:
        kept.update(init_net.external_inputs, init_net.external_outputs)
        kept.update(name for op in init_net.ops for name in op.outputs)
    names: dict[VersionedBlob, str] = {}
    clashing = []
    taken = set(kept)
    for name, version in renamed:
        base = f"{name}_{version}"
        if base in kept:
            clashing.append((name, version))
        else:
            names[(name, version)] = base
            taken.add(base)
    for name, version in clashing:
        base = f"{name}_{version}"
        suffix = 1
        while f"{base}_{suffix}" in taken:
            suffix += 1
        names[(name, version)] = f"{base}_{suffix}"
        taken.add(names[(name, version)])
    return names


@dataclass(frozen=True)
class SSANames:
    """What ``plan_ssa_names`` decided: the new names, op by op.

    Attributes:
        renamed: how many versioned blobs get a new name.
        ops: ``{predict op index: (new inputs, new outputs)}`` for the ops that change.
        external_inputs / external_outputs: the predict_net's new external lists.
        init_ops: ``{init op index: new outputs}`` (``all`` only).
        init_external_inputs / init_external_outputs: the init_net's (``all`` only; else
            ``None``).
        new_name: the name of a versioned blob; version 0 for init_net blobs and
            ``value_info`` keys.
    """

    renamed: int
    ops: dict[int, tuple[tuple[str, ...], tuple[str, ...]]]
    external_inputs: list[str]
    external_outputs: list[str]
    init_ops: dict[int, tuple[str, ...]]
    init_external_inputs: list[str] | None
    init_external_outputs: list[str] | None
    new_name: Callable[[VersionedBlob], str]


def plan_ssa_names(
    net: Net, init_net: Net | None, value_info: Iterable[str] = (), style: str = "multi"
) -> SSANames:
    """The SSA names of ``net`` under ``style`` (see the module docstring), checked.

    ``value_info``: names the exporter describes (kept by ``multi``).

    Raises:
        InvalidArgumentError: an unknown style.
        UnsupportedOpError / InvalidNetError: from ``check_init_net``.
        MissingBlobError: an external output that is neither written nor an external input
            (upstream's ``KeyError``; ours is one too).
    """
    if style not in STYLES:
        raise InvalidArgumentError(f"unknown ssa_rewrite style {style!r}; expected one of {STYLES}")
    if init_net is not None:
        check_init_net(init_net)
    view = net.ssa()
    for name in net.external_outputs:
        if name not in view.versions:
            raise MissingBlobError(
                f"external output {name!r} is neither written by an op nor an external input"
            )
    if style == "multi":
        names = _multi_names(net, init_net, value_info)

        def new_name(blob: VersionedBlob) -> str:
            return names.get(blob, blob[0])

        renamed = len(names)
    else:

        def new_name(blob: VersionedBlob) -> str:
            return f"{blob[0]}_{blob[1]}"

        renamed = len(
            {b for ins, outs in view.ssa for b in (*ins, *outs)}.union(
                view.external_inputs, view.external_outputs
            )
        )
    ops = {}
    for index, (ins, outs) in enumerate(view.ssa):
        op = net[index]
        new_ins = tuple(new_name(b) for b in ins)
        new_outs = tuple(new_name(b) for b in outs)
        if new_ins != op.inputs or new_outs != op.outputs:
            ops[index] = (new_ins, new_outs)
    external_inputs = list(net.external_inputs)
    if style == "all":
        external_inputs = [new_name((n, 0)) for n in external_inputs]
    init_ops: dict[int, tuple[str, ...]] = {}
    init_inputs = init_outputs = None
    if style == "all" and init_net is not None:
        init_ops = {i: (new_name((op.outputs[0], 0)),) for i, op in enumerate(init_net)}
        init_inputs = [new_name((n, 0)) for n in init_net.external_inputs]
        init_outputs = [new_name((n, 0)) for n in init_net.external_outputs]
    return SSANames(
        renamed,
        ops,
        external_inputs,
        [new_name(blob) for blob in view.external_outputs],
        init_ops,
        init_inputs,
        init_outputs,
        new_name,
    )


def renamed_for_export(net: Net, params: Iterable[str]) -> Net:
    """``net`` under the names an ONNX export gives its values, built anew (op indices kept):
    ``style="multi"``'s, except that an external output the rule renamed (``fc_2`` for an
    ``fc`` written in place) gets its own name back, as Caffe2's C++ exporter gives it, so a
    caller fetches the outputs it always fetched; unless the name is still taken (an external
    input written in place and returned keeps the versioned name: ONNX names a value once).

    ``params`` are the names the init_net fills. Names inside an If's branches do not count
    as taken: the If exporter gives every value a branch writes a fresh name (and the rewriter's
    refusal of renames around such an If does not apply to a net built anew).
    """
    names = plan_ssa_names(net, None, params)
    ops = [
        op.replace(inputs=names.ops[i][0], outputs=names.ops[i][1]) if i in names.ops else op
        for i, op in enumerate(net.ops)
    ]
    if names.external_outputs == list(net.external_outputs):
        return Net(ops, names.external_inputs, names.external_outputs, name=net.name)
    taken = {n for op in ops for n in (*op.inputs, *op.outputs)}
    taken.update(names.external_inputs, params)
    for index in net.nested_op_indices():
        if ops[index].type != "If":
            taken.update(nested_access(ops[index]).names)
    plain: dict[str, str] = {}
    for own, renamed in zip(net.external_outputs, names.external_outputs, strict=True):
        if renamed != own and own not in taken and renamed not in plain:
            plain[renamed] = own
            taken.add(own)
    if plain:
        ops = [_with_names(op, plain) for op in ops]
    outputs = [plain.get(n, n) for n in names.external_outputs]
    return Net(ops, names.external_inputs, outputs, name=net.name)


def _with_names(op: Op, new: dict[str, str]) -> Op:
    if not any(n in new for n in (*op.inputs, *op.outputs)):
        return op
    return op.replace(
        inputs=[new.get(n, n) for n in op.inputs], outputs=[new.get(n, n) for n in op.outputs]
    )

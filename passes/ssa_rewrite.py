"""Rename blobs so every name is written once, as Caffe2's ONNX frontend did before export.

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
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

from graphtools.errors import InvalidArgumentError, InvalidNetError, UnsupportedOpError
from graphtools.ir import Model, Net
from graphtools.pass_infra import Pass, PassResult
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.ssa import VersionedBlob

__all__ = ["STYLES", "SSARewrite", "ssa_rewrite"]

STYLES = ("multi", "all")
"""The naming rules: ``multi`` (Caffe2 since Nov 2018) and ``all`` (2018)."""

_INIT_OP = re.compile("GivenTensor.*Fill")


def _check_init_net(init_net: Net) -> None:
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


def _nested_names(net: Net) -> Iterable[str]:
    """Every blob name used inside the nets held by ``net``'s ops, recursively."""
    for op in net.ops:
        if op.has_nested_nets():
            for _, nested in op.nested_nets():
                yield from nested.external_inputs
                yield from nested.external_outputs
                for inner in nested.ops:
                    yield from inner.inputs
                    yield from inner.outputs
                yield from _nested_names(nested)


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
    kept.update(net.external_inputs, value_info, _nested_names(net))
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


def _rewrite(
    net: Net, init_net: Net | None, value_info: MutableMapping[str, Any] | None, style: str
) -> int:
    """Rename in place; returns how many versioned blobs got a new name."""
    if style not in STYLES:
        raise InvalidArgumentError(f"unknown ssa_rewrite style {style!r}; expected one of {STYLES}")
    if init_net is not None:
        _check_init_net(init_net)
    view = net.ssa()
    for name in net.external_outputs:
        if name not in view.versions:
            raise InvalidNetError(
                f"external output {name!r} is neither written by an op nor an external input"
            )
    if style == "multi":
        names = _multi_names(net, init_net, value_info or ())

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

    ops = list(net.ops)
    changed = False
    for index, (ins, outs) in enumerate(view.ssa):
        op = ops[index]
        new_ins = tuple(new_name(b) for b in ins)
        new_outs = tuple(new_name(b) for b in outs)
        if new_ins != op.inputs or new_outs != op.outputs:
            ops[index] = op.replace(inputs=new_ins, outputs=new_outs)
            changed = True
    external_outputs = [new_name(blob) for blob in view.external_outputs]
    if changed:
        net.set_ops(ops)
    if style == "all" and net.external_inputs:
        net.set_external_inputs(new_name((n, 0)) for n in net.external_inputs)
    if external_outputs != list(net.external_outputs):
        net.set_external_outputs(external_outputs)
    if style == "multi":
        return renamed

    if init_net is not None and (
        init_net.ops or init_net.external_inputs or init_net.external_outputs
    ):
        init_net.set_ops(op.replace(outputs=[new_name((op.outputs[0], 0))]) for op in init_net.ops)
        init_net.set_external_inputs(new_name((n, 0)) for n in init_net.external_inputs)
        init_net.set_external_outputs(new_name((n, 0)) for n in init_net.external_outputs)
    if value_info:
        renamed_info = {new_name((name, 0)): value for name, value in value_info.items()}
        value_info.clear()
        value_info.update(renamed_info)
    return renamed


def ssa_rewrite(
    net: Net | caffe2_pb2.NetDef,
    init_net: Net | caffe2_pb2.NetDef | None = None,
    value_info: MutableMapping[str, Any] | None = None,
    style: str = "multi",
) -> None:
    """Caffe2's ``Caffe2Frontend.ssa_rewrite``: rename blobs to SSA form, in place.

    Args:
        net: the predict net (NetDef rewritten in place, or an IR net through its methods).
        init_net: optional; every op must be a ``GivenTensor*Fill`` with one output. Only
            renamed with ``style="all"``.
        value_info: optional ``{blob name: info}``; its keys are renamed with ``style="all"``.
        style: ``"multi"`` or ``"all"`` (see the module docstring).

    Raises:
        UnsupportedOpError: an init_net op that is not a ``GivenTensor*Fill`` (named).
        InvalidNetError: an init_net op with several outputs, or an external output that is
            neither written nor an external input (upstream's ``KeyError``).
        InvalidArgumentError: an unknown style.

    Nothing is changed when it raises.
    """
    net_ir = net if isinstance(net, Net) else net_from_netdef(net)
    init_ir = (
        init_net if init_net is None or isinstance(init_net, Net) else net_from_netdef(init_net)
    )
    _rewrite(net_ir, init_ir, value_info, style)
    if isinstance(net, caffe2_pb2.NetDef):
        net.CopyFrom(net_to_netdef(net_ir))
    if isinstance(init_net, caffe2_pb2.NetDef) and init_ir is not None and style == "all":
        init_net.CopyFrom(net_to_netdef(init_ir))


@dataclass(frozen=True)
class SSARewrite(Pass):
    """Rename predict_net blobs so each name is written once (ONNX export preparation).

    Options:
        style: ``multi`` (rename only multi-version blobs; default) or ``all`` (every blob
            becomes ``name_version``, init_net included).

    Renames external outputs (and, with ``all``, external inputs), hence
    ``changes_interface``. Stats: ``blobs_renamed``, the versioned blobs given a new name.

    Upstream's ``all`` rule is not idempotent (``X_0`` becomes ``X_0_0``), which a pipeline
    run to its fixpoint cannot use; so with ``all`` the pass leaves a model alone when it is
    already SSA and every blob name of both nets ends in ``_<number>`` (what the rule
    produces). ``ssa_rewrite`` itself renames unconditionally, as upstream.
    """

    name: ClassVar[str] = "ssa-rewrite"
    reads_ssa: ClassVar[bool] = True
    changes_interface: ClassVar[bool] = True
    style: str = "multi"

    def call(self, model: Model) -> PassResult:
        """Rename in place; the init_net must hold only ``GivenTensor*Fill`` ops."""
        if self.style == "all" and _already_all_style(model):
            return PassResult(model, False, {"blobs_renamed": 0})
        before = model.revision
        renamed = _rewrite(model.predict_net, model.init_net, None, self.style)
        return PassResult(model, model.revision != before, {"blobs_renamed": renamed})


_VERSIONED_NAME = re.compile(r".*_[0-9]+")


def _already_all_style(model: Model) -> bool:
    """Whether ``model`` looks like the output of ``style="all"``: SSA, names ``x_<n>``."""
    net = model.predict_net
    versions: dict[str, int] = {}
    for ins, outs in net.ssa().ssa:
        for name, version in (*ins, *outs):
            if versions.setdefault(name, version) != version:
                return False
    names = set(versions).union(net.external_inputs, net.external_outputs)
    init = model.init_net
    if init is not None:
        names.update(init.external_inputs, init.external_outputs)
        names.update(name for op in init.ops for name in op.outputs)
    return all(_VERSIONED_NAME.fullmatch(name) for name in names)

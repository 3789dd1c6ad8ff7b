"""Caffe2's ``Net.ClonePartial`` on NetDefs: the ops computing ``outputs`` from ``inputs``,
cloned with their internal blobs renamed under ``<name>/``.

As upstream: ``inputs`` is a list of names (kept), a list of ``(old, new)`` pairs or a
``{old: new}`` map (renamed); both are taken at their last version; blobs the kept ops read
that neither an input nor a kept op provides become inputs of the clone under their own names;
an output nothing defines, or a cut whose ops would also generate an input (they would run
twice), is refused (``PartialCloneError``, an ``AssertionError`` as upstream's). The default
remapping of nested nets and recurrent arguments (upstream's ``DEFAULT_REMAP_FUNCS``) applies,
and ``remap_funcs`` adds or replaces functions ``fn(op, prefix, blob_remap)`` by op type.

Differences: the clone is a ``NetDef`` (an IR ``Net`` when given one), not a ``core.Net``, and
its outputs are names, not ``BlobReference``s; the inputs made from undefined blobs come in the
order the kept ops first read them (upstream: set order). For the graphtools way to cut a pair
(parameters and types included), see ``graphtools.extract``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf import text_format

from graphtools.compat._convert import to_ir
from graphtools.errors import PartialCloneError
from graphtools.ir import Net
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net, net_to_netdef
from graphtools.ssa import get_op_ids_in_path, get_ssa, get_undefined_blobs

__all__ = ["DEFAULT_REMAP_FUNCS", "ClonePartial", "RemapFunc", "clone_partial"]

RemapFunc = Callable[[caffe2_pb2.OperatorDef, str, Mapping[str, str]], None]
"""``fn(op, prefix, blob_remap)``: rename what an op holds beyond its inputs and outputs."""


def _remap_net(net: caffe2_pb2.NetDef, blob_remap: Mapping[str, str], name: str) -> None:
    """Caffe2's ``Net.Clone`` of a nested net with ``blob_remap``, in place."""
    net.name = name
    for op in net.op:
        _remap_op(op, "", blob_remap, DEFAULT_REMAP_FUNCS)
    _remap_list(net.external_input, blob_remap)
    _remap_list(net.external_output, blob_remap)


def _remap_list(names: Any, blob_remap: Mapping[str, str]) -> None:
    new = [blob_remap.get(name, name) for name in names]
    del names[:]
    names.extend(new)


def _control_op_remap(
    op: caffe2_pb2.OperatorDef, prefix: str, blob_remap: Mapping[str, str]
) -> None:
    """Upstream's ``_control_op_remap``: the branch or loop nets, renamed as the op."""
    names = ("then_net", "else_net") if op.type in ("If", "AsyncIf") else ("loop_net", "cond_net")
    for argument in op.arg:
        if argument.name in names and argument.HasField("n"):
            _remap_net(argument.n, blob_remap, (argument.n.name or "") + "_remapped")


def _recurrent_network_op_remap(
    op: caffe2_pb2.OperatorDef, prefix: str, blob_remap: Mapping[str, str]
) -> None:
    """Upstream's ``_recurrent_network_op_remap``: string arguments (links, aliases, states),
    the timestep and the step nets."""
    for argument in op.arg:
        if len(argument.strings):
            renamed = [blob_remap.get(s.decode(), s.decode()).encode() for s in argument.strings]
            del argument.strings[:]
            argument.strings.extend(renamed)
        elif argument.name == "timestep" and argument.HasField("s"):
            argument.s = blob_remap.get(argument.s.decode(), argument.s.decode()).encode()
        elif argument.name.endswith("step_net"):
            if argument.HasField("n"):
                _remap_net(argument.n, blob_remap, "cloned_sub_net")
            elif argument.HasField("s"):
                step = text_format.Parse(argument.s.decode(), caffe2_pb2.NetDef())
                _remap_net(step, blob_remap, "cloned_sub_net")
                argument.s = text_format.MessageToString(step).encode()


DEFAULT_REMAP_FUNCS: dict[str, RemapFunc] = {
    "RecurrentNetwork": _recurrent_network_op_remap,
    "RecurrentNetworkGradient": _recurrent_network_op_remap,
    "If": _control_op_remap,
    "While": _control_op_remap,
    "AsyncIf": _control_op_remap,
}
"""Upstream's remapping of what ops hold beyond their inputs and outputs, by op type."""


def _remap_op(
    op: caffe2_pb2.OperatorDef,
    prefix: str,
    blob_remap: Mapping[str, str],
    funcs: Mapping[str, RemapFunc],
) -> None:
    _remap_list(op.input, blob_remap)
    _remap_list(op.output, blob_remap)
    if op.type in funcs:
        funcs[op.type](op, prefix, blob_remap)


def _input_map(inputs: Any) -> dict[str, str]:
    if isinstance(inputs, Mapping):
        return {str(k): str(v) for k, v in inputs.items()}
    items = list(inputs)
    if items and all(isinstance(i, tuple) and len(i) == 2 for i in items):
        return {str(k): str(v) for k, v in items}
    return {str(i): str(i) for i in items}


def clone_partial(
    net: caffe2_pb2.NetDef | Net,
    name: str,
    inputs: Mapping[str, str] | Sequence[str] | Sequence[tuple[str, str]],
    outputs: Sequence[str],
    remap_funcs: Mapping[str, RemapFunc] | None = None,
) -> tuple[caffe2_pb2.NetDef | Net, list[str]]:
    """Caffe2's ``Net.ClonePartial(name, inputs, outputs, remap_funcs)`` (module docstring).

    Returns:
        ``(clone, outputs)``: the clone (a NetDef, or an IR net when ``net`` is one) and the
        names of the outputs in it.

    Raises:
        PartialCloneError: an output is not defined in ``net``, or the ops needed would also
            generate an input.
    """
    proto = net if isinstance(net, caffe2_pb2.NetDef) else net_to_netdef(to_ir(net))
    input_names = _input_map(inputs)
    output_names = [str(o) for o in outputs]
    defined = set(proto.external_input) | {o for op in proto.op for o in op.output}
    for output in output_names:
        if output not in defined:
            raise PartialCloneError(f"{output} is not defined")
    versions = dict.fromkeys(input_names, 0)
    ssa, versions = get_ssa(proto, versions)
    used = get_op_ids_in_path(ssa, versions, input_names, output_names)
    disallowed = get_op_ids_in_path(ssa, versions, [], input_names)
    if set(used) & set(disallowed):
        raise PartialCloneError(
            "Cannot partially clone net: some of the ops required would generate the given "
            f"input (op #{min(set(used) & set(disallowed))} of net {proto.name!r})"
        )
    sub_ssa = [ssa[i] for i in used]
    undefined = get_undefined_blobs(sub_ssa) - set(input_names)
    first_read = [b for ins, _ in sub_ssa for b, _ in ins]
    undefined_ordered = [b for b in dict.fromkeys(first_read) if b in undefined]
    prefix = f"{name}/" if name else ""

    def remap(blob: str) -> str:
        if blob in input_names:
            return input_names[blob]
        if blob in undefined:
            return blob
        return prefix + blob

    blob_mapping = {blob: remap(blob) for blob in versions}
    funcs = {**DEFAULT_REMAP_FUNCS, **(remap_funcs or {})}
    clone = caffe2_pb2.NetDef()
    clone.CopyFrom(proto)
    clone.name = name
    del clone.op[:]
    for index in used:
        op = clone.op.add()
        op.CopyFrom(proto.op[index])
        _remap_op(op, prefix, blob_mapping, funcs)
    new_outputs = [blob_mapping[o] for o in output_names]
    del clone.external_input[:]
    clone.external_input.extend([blob_mapping[i] for i in input_names] + undefined_ordered)
    del clone.external_output[:]
    clone.external_output.extend(new_outputs)
    return (clone if isinstance(net, caffe2_pb2.NetDef) else as_net(clone)), new_outputs


ClonePartial = clone_partial
"""Caffe2's spelling (``Net.ClonePartial`` was a method; here the net is the first argument)."""

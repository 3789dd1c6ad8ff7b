"""``add_if_op`` and ``add_while_op``: Caffe2's builders of If and While ops with Do branches.

Each branch (loop body, condition) runs in a ``Do`` on its own workspace blob: blobs of the
branch whose names are in ``lexical_scope`` (and blobs it reads before writing, which must be
there) are bound to the outer workspace, every other blob stays local to the branch's
workspace. The builders append ``CreateScope`` ops and the If/While op to the net, and the
op's outputs to its external outputs, as ``caffe2.python.control_ops_util`` does.

Differences from upstream: inputs and outputs are listed in first-seen order (upstream iterated
sets, so the order changed between processes); net names are not made unique per process
(``do_then_net`` stays ``do_then_net``); an external output already declared is not repeated.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from graphtools.errors import InvalidArgumentError
from graphtools.gradients._proto import (
    NetDef,
    OperatorDef,
    create_operator,
    net_to_netdef,
    op_from_proto,
)
from graphtools.ir import Net

__all__ = ["add_if_op", "add_while_op", "get_external_blob_names"]

BOOL = 5  # TensorProto.BOOL


def _netdef(net: Net | NetDef | Any) -> NetDef:
    if isinstance(net, NetDef):
        return net
    if isinstance(net, Net):
        return net_to_netdef(net)
    proto = getattr(net, "Proto", None)
    if callable(proto):
        return _netdef(proto())
    raise TypeError(f"expected a graphtools Net or a NetDef, got {type(net).__name__}")


def get_external_blob_names(
    net: Net | NetDef, lexical_scope: Collection[str]
) -> tuple[list[str], list[str]]:
    """Blobs ``net`` reads before writing them (each must be in ``lexical_scope``) and blobs it
    writes that are in ``lexical_scope``, both in first-seen order.

    Raises:
        InvalidArgumentError: a blob read before any write is not in ``lexical_scope``
            (Caffe2: ``AssertionError "Input blob X is undefined"``).
    """
    written: set[str] = set()
    inputs: dict[str, None] = {}
    outputs: dict[str, None] = {}
    for op in _netdef(net).op:
        for name in op.input:
            if name not in written:
                inputs[name] = None
        for name in op.output:
            written.add(name)
            if name in lexical_scope:
                outputs[name] = None
    for name in inputs:
        if name not in lexical_scope:
            raise InvalidArgumentError(f"Input blob {name} is undefined")
    return list(inputs), list(outputs)


class _Target:
    """The net a builder appends to: an IR ``Net`` or a ``NetDef`` message, edited in place."""

    def __init__(self, net: Net | NetDef) -> None:
        if not isinstance(net, Net | NetDef):
            raise TypeError(f"expected a graphtools Net or a NetDef, got {type(net).__name__}")
        self.net = net
        self._registered: set[str] = set()

    @property
    def name(self) -> str:
        return self.net.name or ""

    def _defined(self) -> set[str]:
        ops = self.net.op if isinstance(self.net, NetDef) else list(self.net)
        names = {
            name
            for op in ops
            for name in (op.output if isinstance(op, OperatorDef) else op.outputs)
        }
        inputs = (
            self.net.external_input if isinstance(self.net, NetDef) else self.net.external_inputs
        )
        return names | set(inputs)

    def next_scoped_blob(self, prefix: str) -> str:
        """Caffe2's ``NextScopedBlob``: ``prefix``, else ``prefix_auto_<k>`` when taken."""
        taken = self._defined() | self._registered
        name, index = prefix, 0
        while name in taken:
            name = f"{prefix}_auto_{index}"
            index += 1
        self._registered.add(name)
        return name

    def append(self, op: OperatorDef) -> None:
        if isinstance(self.net, NetDef):
            self.net.op.append(op)
        else:
            self.net.append_op(op_from_proto(op))

    def add_external_outputs(self, names: Iterable[str]) -> None:
        if isinstance(self.net, NetDef):
            present = set(self.net.external_output)
            self.net.external_output.extend(n for n in names if n not in present)
        else:
            current = list(self.net.external_outputs)
            self.net.set_external_outputs(current + [n for n in names if n not in current])


def _do_net(
    name: str, body: NetDef, inputs: list[str], outputs: list[str], workspace: str, **args: Any
) -> NetDef:
    """A one-op net running ``body`` in a Do bound to ``inputs``/``outputs`` by name."""
    ordered = inputs + outputs
    inner = list(dict.fromkeys(ordered))
    net = NetDef()
    net.name = name
    net.op.append(
        create_operator(
            "Do",
            [*inputs, workspace],
            [*outputs, workspace],
            net=body,
            inner_blobs=inner,
            outer_blobs_idx=[ordered.index(b) for b in inner],
            **args,
        )
    )
    net.external_output.extend([*outputs, workspace])
    return net


def add_if_op(
    if_net: Net | NetDef,
    cond_blob: str,
    lexical_scope: Collection[str],
    then_net: Net | NetDef,
    else_net: Net | NetDef | None = None,
) -> None:
    """Append ``CreateScope`` ops and an ``If`` running ``then_net``/``else_net`` in Do ops.

    Args:
        if_net: the net to add to (edited in place).
        cond_blob: the one-element bool blob that picks the branch.
        lexical_scope: the outer blob names the branches may see.
        then_net / else_net: the branches.
    """
    target = _Target(if_net)
    then_def = _netdef(then_net)
    then_in, then_out = get_external_blob_names(then_def, lexical_scope)
    else_def = None if else_net is None else _netdef(else_net)
    else_in, else_out = (
        ([], []) if else_def is None else get_external_blob_names(else_def, lexical_scope)
    )
    if_inputs = [str(cond_blob), *dict.fromkeys(then_in + else_in)]
    if_outputs = list(dict.fromkeys(then_out + else_out))
    ws_then = target.next_scoped_blob(target.name + "/workspace_if_then")
    args: dict[str, Any] = {
        "then_net": _do_net("do_then_net", then_def, then_in, then_out, ws_then)
    }
    if_inputs.append(ws_then)
    if_outputs.append(ws_then)
    ws_else = None
    if else_def is not None:
        ws_else = target.next_scoped_blob(target.name + "/workspace_if_else")
        args["else_net"] = _do_net("do_else_net", else_def, else_in, else_out, ws_else)
        if_inputs.append(ws_else)
        if_outputs.append(ws_else)
    target.append(create_operator("CreateScope", [], [ws_then]))
    if ws_else is not None:
        target.append(create_operator("CreateScope", [], [ws_else]))
    target.append(create_operator("If", if_inputs, if_outputs, **args))
    target.add_external_outputs(if_outputs)


def add_while_op(
    while_net: Net | NetDef,
    cond_blob: str,
    lexical_scope: Collection[str],
    loop_body_net: Net | NetDef,
    condition_body_net: Net | NetDef | None = None,
) -> None:
    """Append ``CreateScope`` ops and a ``While`` running ``loop_body_net`` in a Do.

    The loop's outputs are also its inputs (it may run zero times). With
    ``condition_body_net``, that net runs in its own Do before every iteration and must write
    ``cond_blob``; a ``ConstantFill`` of ``False`` defines ``cond_blob`` first when it is not in
    ``lexical_scope``.

    Raises:
        InvalidArgumentError: the condition net does not write ``cond_blob``, or a net reads a
            blob outside ``lexical_scope`` before writing it.
    """
    target = _Target(while_net)
    cond_blob = str(cond_blob)
    body = _netdef(loop_body_net)
    body_in, body_out = get_external_blob_names(body, lexical_scope)
    loop_in = list(dict.fromkeys(body_in + body_out))
    while_inputs = [cond_blob, *loop_in]
    while_outputs = list(body_out)
    ws_body = target.next_scoped_blob(target.name + "/workspace_loop_body")
    args: dict[str, Any] = {
        "loop_net": _do_net(
            "do_loop_body_net", body, loop_in, body_out, ws_body, copy_external_blobs=True
        )
    }
    while_inputs.append(ws_body)
    while_outputs.append(ws_body)
    ws_cond = None
    if condition_body_net is not None:
        cond_def = _netdef(condition_body_net)
        cond_in, cond_out = get_external_blob_names(cond_def, lexical_scope)
        if not any(cond_blob in op.output for op in cond_def.op):
            raise InvalidArgumentError("Condition net does not write into condition blob")
        if cond_blob not in cond_out:
            cond_out.append(cond_blob)
        ws_cond = target.next_scoped_blob(target.name + "/workspace_loop_cond")
        args["cond_net"] = _do_net("do_loop_condition_net", cond_def, cond_in, cond_out, ws_cond)
        while_inputs += [b for b in [*cond_in, ws_cond] if b not in loop_in]
        while_outputs += [b for b in [*cond_out, ws_cond] if b not in body_out]
        if cond_blob not in lexical_scope:
            target.append(create_operator("ConstantFill", [], [cond_blob], dtype=BOOL, value=False))
    target.append(create_operator("CreateScope", [], [ws_body]))
    if ws_cond is not None:
        target.append(create_operator("CreateScope", [], [ws_cond]))
    target.append(create_operator("While", while_inputs, while_outputs, **args))
    target.add_external_outputs(while_outputs)

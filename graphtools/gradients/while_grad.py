"""The gradient of a ``While`` loop: the backward pass of its iterations, last one first.

Upstream's ``gen_while_gradient`` builds a gradient While whose condition net asks ``HasScope``
of the loop body's workspace stack and whose loop net is the gradient Do of the body, popping
one saved forward workspace per iteration. It fails ("Reusage of outer blob name ... in Do op")
whenever a loop output is also a loop input, which ``add_while_op`` makes of every output, and
even where it runs, it overwrites (does not sum) the gradients of blobs every iteration reads and
gives a loop-carried blob the gradient of its end value, not its start value.

graphtools keeps upstream's structure (``HasScope`` condition net named
``gradient_loop_cond_net``, condition blob ``gradient_loop_cond_net/cond``, a gradient Do in
the loop net, its ops before the While) and makes it compute the gradient of the unrolled loop:

* every bound blob ``b`` of the body Do with a gradient gets two private blobs,
  ``b/_WHILE_OUTPUT_GRAD_`` (the gradient of its value after the iteration being undone) and
  ``b/_WHILE_INPUT_GRAD_`` (of its value before it); the body's backward pass reads the first
  and writes the second, the condition net copies the second into the first before the next
  iteration, so gradients flow from iteration to iteration and blobs every iteration reads
  (weights) sum their gradients over the iterations;
* the gradient Do recomputes the iteration from the values its bound blobs had when the
  iteration started (the executor's forward Do with ``copy_external_blobs`` keeps them under
  ``<inner>/_DO_ITERATION_START_``), with each re-written blob version renamed
  (``<name>/_WHILE_V<k>_``), so an in-place body differentiates like straight-line code;
* after the loop, ``Copy(b/_WHILE_INPUT_GRAD_) -> <b>_grad`` for every While input ``b``.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphtools.errors import ControlFlowError
from graphtools.gradients._proto import NetDef, OperatorDef, create_operator, get_arg
from graphtools.gradients.control_grad import (
    dedupe_g_output,
    do_op_bindings,
    net_argument,
)
from graphtools.gradients.registry import GradientRegistry

__all__ = ["gen_while_gradient"]

#: Where the executor's forward Do (``copy_external_blobs``) keeps each bound blob's value at
#: the start of an iteration (``graphtools.executor.scopes.ITERATION_START_SUFFIX``).
ITERATION_START_SUFFIX = "/_DO_ITERATION_START_"
OUTPUT_GRAD = "/_WHILE_OUTPUT_GRAD_"
INPUT_GRAD = "/_WHILE_INPUT_GRAD_"
COND_NET = "gradient_loop_cond_net"


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ControlFlowError(message)


class _RenamedBody:
    """The loop body with every blob version after the first under its own name.

    ``ops`` read the value a bound blob had at the start of the iteration under its own name,
    ``final[name]`` is the name of its last version, ``start_reads`` the names read before any
    op writes them.
    """

    def __init__(self, body: NetDef) -> None:
        current: dict[str, str] = {}
        versions: dict[str, int] = {}
        touched: set[str] = set()
        self.start_reads: list[str] = []
        self.ops: list[OperatorDef] = []
        # Workspace pointers (CreateScope's outputs, which Do and If read and write) hold no
        # value a gradient reads: they keep their names.
        scopes = {name for op in body.op if op.type == "CreateScope" for name in op.output}
        for index, op in enumerate(body.op):
            inputs = [current.get(name, name) for name in op.input]
            for name in op.input:
                if name not in current and name not in self.start_reads:
                    self.start_reads.append(name)
            nested = any(arg.HasField("n") or len(arg.nets) for arg in op.arg)
            outputs = []
            for name in op.output:
                # An op holding nested nets (an If built by add_if_op) that is the first to
                # touch a blob may update it in place: its gradient reads its branches' saved
                # workspaces, not the value it overwrote.
                in_place_first = nested and name not in touched
                rewritten = name in touched or (name in op.input and not in_place_first)
                if rewritten and name not in scopes:
                    versions[name] = versions.get(name, 0) + 1
                    new_name = f"{name}/_WHILE_V{versions[name]}_"
                else:
                    new_name = name
                outputs.append(new_name)
            renamed = list(inputs) != list(op.input) or outputs != list(op.output)
            if renamed and nested:
                raise ControlFlowError(
                    f"While gradient: loop body op #{index} ({op.type}) holds nested nets and "
                    "reads or writes a blob the body writes more than once; write each value "
                    "to a new blob inside the loop body (and copy it at the end)"
                )
            copy = OperatorDef()
            copy.CopyFrom(op)
            del copy.input[:]
            copy.input.extend(inputs)
            del copy.output[:]
            copy.output.extend(outputs)
            self.ops.append(copy)
            touched.update(op.input)
            touched.update(op.output)
            for name, new_name in zip(op.output, outputs, strict=True):
                current[name] = new_name
        self.final = current

    def final_name(self, name: str) -> str:
        return self.final.get(name, name)


def _body_gradient(
    body: _RenamedBody, grads: dict[str, str]
) -> tuple[list[OperatorDef], dict[str, str]]:
    """Backward pass of the renamed body for gradients ``{inner blob: gradient}`` of the
    blobs' end values; the map gives gradients of the start values under the blobs' names."""
    ys = {body.final_name(name): gradient for name, gradient in grads.items()}
    return GradientRegistry.GetBackwardPass(body.ops, ys)


def gen_while_gradient(
    op: OperatorDef, g_output: Sequence[str | None]
) -> tuple[list[OperatorDef], list[str | None]]:
    """The gradient of a While op built by ``add_while_op`` (or of the same form).

    Returns ``(ops, g_input)``: dedup copies, the initialising ops, the gradient While, and
    one ``Copy`` per input gradient; ``g_input[k]`` is ``<input k>_grad`` for every input whose
    value reaches an output with a gradient.

    Raises:
        ControlFlowError: the op is not a While, its ``loop_net`` is not one ``Do`` with
            ``copy_external_blobs`` and without ``reuse_workspace``, or no output has a gradient.
    """
    _check(op.type == "While", "Expected While op")
    _check(len(op.input) > 0, "Expected at least one input in While op")
    _check(
        len(op.output) == len(g_output), "Different number of gradient blobs and While op outputs"
    )
    dedup_ops, g_output = dedupe_g_output(op, g_output)
    downstream = {o: g for o, g in zip(op.output, g_output, strict=True) if g}
    _check(len(downstream) > 0, "Empty initial gradient map for While op")
    loop_net = net_argument(op, "loop_net")
    _check(loop_net is not None, "Expected loop subnet in While op")
    assert loop_net is not None
    _check(
        len(loop_net.op) == 1 and loop_net.op[0].type == "Do",
        "Gradient While op requires single Do op as a loop body",
    )
    do_op = loop_net.op[0]
    reuse = get_arg(do_op, "reuse_workspace")
    _check(
        reuse is None or not reuse.i,
        "Gradient While op requires Do loop body op without reuse_workspace set",
    )
    copy_external = get_arg(do_op, "copy_external_blobs")
    _check(
        copy_external is not None and bool(copy_external.i),
        "Gradient While op requires a Do loop body with copy_external_blobs set (as "
        "add_while_op builds it): the gradient reads the values each iteration started from",
    )
    subnet, outer_to_inner, inner_to_outer, workspace = do_op_bindings(do_op)
    body = _RenamedBody(subnet)
    with_grad = [outer_to_inner[o] for o in downstream if o in outer_to_inner]
    _check(len(with_grad) > 0, "No While output with a gradient is bound by its loop body Do")
    with_grad = _gradient_closure(body, with_grad, inner_to_outer)
    grad_ops, grad_map = _body_gradient(body, {n: n + OUTPUT_GRAD for n in with_grad})
    outer_of = {n: inner_to_outer[n] for n in with_grad}
    loop_grad_do = _gradient_do(
        do_op, subnet, body, grad_ops, grad_map, with_grad, outer_of, workspace
    )
    cond_blob = f"{COND_NET}/cond"
    init_ops: list[OperatorDef] = [create_operator("HasScope", [workspace], [cond_blob])]
    cond_net = NetDef()
    cond_net.name = COND_NET
    cond_net.op.append(create_operator("HasScope", [workspace], [cond_blob]))
    for n in with_grad:
        outer = outer_of[n]
        given = downstream.get(outer)
        if given is None:
            init_ops.append(
                create_operator("ConstantFill", [outer], [outer + OUTPUT_GRAD], value=0.0)
            )
        else:
            init_ops.append(create_operator("Copy", [given], [outer + OUTPUT_GRAD]))
        init_ops.append(create_operator("Copy", [outer + OUTPUT_GRAD], [outer + INPUT_GRAD]))
        cond_net.op.append(create_operator("Copy", [outer + INPUT_GRAD], [outer + OUTPUT_GRAD]))
    gradient_while = _gradient_while(op, loop_net, loop_grad_do, cond_net, cond_blob)
    g_input: list[str | None] = []
    final_ops: list[OperatorDef] = []
    with_grad_outer = {outer_of[n] for n in with_grad}
    for name in op.input:
        if name in with_grad_outer and name != op.input[0]:
            final_ops.append(create_operator("Copy", [name + INPUT_GRAD], [name + "_grad"]))
            g_input.append(name + "_grad")
        else:
            g_input.append(None)
    return [*dedup_ops, *init_ops, gradient_while, *final_ops], g_input


def _gradient_closure(
    body: _RenamedBody, names: list[str], inner_to_outer: dict[str, str]
) -> list[str]:
    """The bound blobs whose start values get a gradient, grown to a fixpoint: a blob whose
    value at the end of an iteration has a gradient passes it to the blobs the iteration read."""
    found = list(dict.fromkeys(names))
    while True:
        _, grad_map = _body_gradient(body, {n: n + OUTPUT_GRAD for n in found})
        new = [
            n for n in inner_to_outer if n in grad_map and n in body.start_reads and n not in found
        ]
        if not new:
            return found
        found += new


def _gradient_do(
    fwd_do: OperatorDef,
    subnet: NetDef,
    body: _RenamedBody,
    grad_ops: list[OperatorDef],
    grad_map: dict[str, str],
    with_grad: list[str],
    outer_of: dict[str, str],
    workspace: str,
) -> OperatorDef:
    restore = [
        create_operator("Copy", [n + ITERATION_START_SUFFIX], [n])
        for n in body.start_reads
        if n in _bound_inner(fwd_do)
    ]
    outs: list[OperatorDef] = []
    written = {name for op in subnet.op for name in op.output}
    for n in with_grad:
        target = outer_of[n] + INPUT_GRAD
        # A blob the body overwrites before reading has no gradient at the iteration's start
        # (its first version shares the start value's name, so the map cannot tell).
        source = grad_map.get(n) if n in body.start_reads or n not in written else None
        if source is None:
            outs.append(create_operator("ConstantFill", [n], [target], value=0.0))
        else:
            outs.append(create_operator("Copy", [source], [target]))
    net = NetDef()
    net.CopyFrom(subnet)
    net.name = (subnet.name or "loop_body") + "_grad"
    del net.op[:]
    net.op.extend([*restore, *body.ops, *grad_ops, *outs])
    del net.external_input[:]
    del net.external_output[:]
    inputs = [outer_of[n] + OUTPUT_GRAD for n in with_grad]
    outputs = [outer_of[n] + INPUT_GRAD for n in with_grad]
    do = OperatorDef()
    do.CopyFrom(fwd_do)
    if do.name:
        do.name += "_grad"
    del do.input[:]
    do.input.extend([*inputs, workspace])
    del do.output[:]
    do.output.extend([*outputs, workspace])
    del do.arg[:]
    net_arg = do.arg.add()
    net_arg.name = "net"
    net_arg.n.CopyFrom(net)
    names = inputs + outputs
    inner = do.arg.add()
    inner.name = "inner_blobs"
    inner.strings.extend([name.encode() for name in names])
    index = do.arg.add()
    index.name = "outer_blobs_idx"
    index.ints.extend(range(len(names)))
    saved = do.arg.add()
    saved.name = "saved_fwd_blobs"
    saved.strings.extend([r.input[0].encode() for r in restore])
    del do.control_input[:]
    do.is_gradient_op = True
    do_op_bindings(do)
    return do


def _bound_inner(do_op: OperatorDef) -> set[str]:
    arg = get_arg(do_op, "inner_blobs")
    return set() if arg is None else {s.decode() for s in arg.strings}


def _gradient_while(
    fwd: OperatorDef, loop_net: NetDef, grad_do: OperatorDef, cond_net: NetDef, cond_blob: str
) -> OperatorDef:
    grad_loop = NetDef()
    grad_loop.CopyFrom(loop_net)
    if grad_loop.name:
        grad_loop.name += "_grad"
    del grad_loop.op[:]
    grad_loop.op.append(grad_do)
    del grad_loop.external_input[:]
    del grad_loop.external_output[:]
    op = OperatorDef()
    op.CopyFrom(fwd)
    if op.name:
        op.name += "_grad"
    del op.arg[:]
    loop_arg = op.arg.add()
    loop_arg.name = "loop_net"
    loop_arg.n.CopyFrom(grad_loop)
    cond_arg = op.arg.add()
    cond_arg.name = "cond_net"
    cond_arg.n.CopyFrom(cond_net)
    del op.control_input[:]
    del op.input[:]
    op.input.extend([cond_blob, *grad_do.input])
    del op.output[:]
    op.output.extend(grad_do.output)
    op.is_gradient_op = True
    return op


GradientRegistry.RegisterGradient("While")(gen_while_gradient)

"""Gradients of ``Do`` and ``If`` (Caffe2's ``control_ops_grad``), and ``dedupe_g_output``.

The gradient of a ``Do`` is a gradient ``Do`` on the same workspace blob: it pops the forward
run's workspace, binds the incoming gradients to ``<inner output>/_DO_OPERATOR_INNER_GRAD_``,
runs the backward pass of the subnet, and copies each input gradient out through
``<inner input>/_DO_OPERATOR_INNER_GRAD_COPY_`` to ``<outer input>_grad``. The gradient of an
``If`` is a gradient ``If`` on the same condition whose branches are the branches' backward
passes, each also defining (zero or copied) the gradients only the other branch computes.

Where graphtools differs from upstream (see ``docs/gradients.md``): a ``Do`` whose outer blob
is both input and output gets a working gradient (upstream's fails with "Reusage of outer blob
name"), computed from the values the subnet read (a bound blob it overwrites is read from the
copy the forward Do keeps); the gradient ``If`` drops the condition blob from its inputs by
name (upstream removed the *characters* of its name) and lists inputs and outputs in
first-seen order (upstream: set order); the branch-merge conflict raises a typed error
(upstream raised a string, a TypeError).
"""

from __future__ import annotations

from collections.abc import Sequence

from graphtools.errors import ControlFlowError
from graphtools.gradients._proto import NetDef, OperatorDef, create_operator, get_arg
from graphtools.gradients.if_rename import disambiguate_grad_if_op_output
from graphtools.gradients.registry import GradientRegistry

__all__ = [
    "dedupe_g_output",
    "disambiguate_grad_if_op_output",
    "do_op_bindings",
    "gen_do_gradient",
    "gen_if_gradient",
    "subnet_gradient",
]

INNER_GRAD = "/_DO_OPERATOR_INNER_GRAD_"
INNER_GRAD_COPY = "/_DO_OPERATOR_INNER_GRAD_COPY_"
#: Where the executor's forward Do keeps each bound blob's value from before its subnet ran
#: (``graphtools.executor.scopes.ITERATION_START_SUFFIX``).
START_SUFFIX = "/_DO_ITERATION_START_"


def _start_value_reads(subnet: NetDef, bound: set[str]) -> tuple[list[OperatorDef], dict[str, str]]:
    """The subnet's ops with every read of a bound blob the subnet later overwrites (an If
    branch computing ``y = f(y)``) made a read of the value it had before the subnet ran, kept
    by the forward Do under ``<name>/_DO_ITERATION_START_``; and ``{name: start name}``.

    The backward pass then reads the value the forward read, not the overwritten one (Caffe2
    computes such gradients from the overwritten value).
    """
    written_later: set[str] = set()
    for op in subnet.op:
        written_later.update(name for name in op.output if name in bound)
    written: set[str] = set()
    starts: dict[str, str] = {}
    ops: list[OperatorDef] = []
    for op in subnet.op:
        reads = [
            name + START_SUFFIX if name in written_later and name not in written else name
            for name in op.input
        ]
        for name, read in zip(op.input, reads, strict=True):
            if read != name:
                starts[name] = read
        copy = OperatorDef()
        copy.CopyFrom(op)
        if reads != list(op.input):
            del copy.input[:]
            copy.input.extend(reads)
        ops.append(copy)
        written.update(op.output)
    return ops, starts


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ControlFlowError(message)


def net_argument(op: OperatorDef, name: str) -> NetDef | None:
    """The net held by argument ``name`` of ``op``, or ``None``."""
    arg = get_arg(op, name)
    return arg.n if arg is not None and arg.HasField("n") else None


def do_op_bindings(op: OperatorDef) -> tuple[NetDef, dict[str, str], dict[str, str], str]:
    """Check a Do op the way Caffe2's ``_do_op_sanity_check_and_process`` does.

    Returns:
        ``(subnet, outer -> inner map, inner -> outer map, workspace blob name)``.

    Raises:
        ControlFlowError: with upstream's messages ("Reusage of outer blob name X in Do op",
            "Not all outer blob names are used in blob bindings in Do op", ...).
    """
    _check(op.type == "Do", "Expected Do op")
    subnet = net_argument(op, "net")
    _check(subnet is not None, "No net argument found in Do op")
    assert subnet is not None  # narrowed by the check above
    inner_arg, index_arg = get_arg(op, "inner_blobs"), get_arg(op, "outer_blobs_idx")
    _check(
        inner_arg is not None and len(inner_arg.strings) > 0,
        "No inner_blobs argument found in Do op",
    )
    _check(
        index_arg is not None and len(index_arg.ints) > 0,
        "No outer_blobs_idx argument found in Do op",
    )
    assert inner_arg is not None and index_arg is not None
    inner_blobs = [s.decode() for s in inner_arg.strings]
    indices = list(index_arg.ints)
    _check(
        len(inner_blobs) == len(indices),
        "Arguments inner_blobs and outer_blobs_idx of different length in Do op",
    )
    _check(len(set(inner_blobs)) == len(inner_blobs), "Found duplicates in inner_blobs in Do op")
    _check(len(op.input) > 0, "Expected at least one input blob")
    _check(len(op.output) > 0, "Expected at least one output blob")
    workspace = op.output[-1]
    _check(op.input[-1] == workspace, "Expected same input/output workspace blob")
    inputs, outputs = list(op.input[:-1]), list(op.output[:-1])
    _check(len(set(inputs)) == len(inputs), "Found duplicates in Do op inputs")
    _check(len(set(outputs)) == len(outputs), "Found duplicates in Do op outputs")
    ordered = inputs + outputs
    bound: list[str] = []
    for index in indices:
        _check(0 <= index < len(ordered), "Outer blob index is out of bounds in Do op")
        name = ordered[index]
        _check(name not in bound, f"Reusage of outer blob name {name} in Do op")
        bound.append(name)
    _check(
        set(bound) == set(ordered), "Not all outer blob names are used in blob bindings in Do op"
    )
    outer_to_inner = dict(zip(bound, inner_blobs, strict=True))
    inner_to_outer = dict(zip(inner_blobs, bound, strict=True))
    return subnet, outer_to_inner, inner_to_outer, workspace


def dedupe_g_output(
    op: OperatorDef, g_output: Sequence[str | None]
) -> tuple[list[OperatorDef], list[str | None]]:
    """Give each output its own gradient blob (Caffe2's ``dedupe_g_output``).

    When a later output receives a gradient blob an earlier one already has, it gets
    ``Copy(g) -> <output>_<g>_DEDUP`` instead. Returns ``(copy ops, new g_output)``.
    """
    ops: list[OperatorDef] = []
    deduped: list[str | None] = []
    seen: dict[str, str] = {}
    for output, gradient in zip(op.output, g_output, strict=False):
        if not gradient:
            deduped.append(gradient)
            continue
        if output in seen:
            deduped.append(seen[output])
        elif gradient not in seen.values():
            seen[output] = gradient
            deduped.append(gradient)
        else:
            new_name = f"{output}_{gradient}_DEDUP"
            _check(new_name not in seen.values(), f"Duplicate deduplicated gradient {new_name}")
            ops.append(create_operator("Copy", [gradient], [new_name]))
            deduped.append(new_name)
            seen[output] = new_name
    return ops, deduped


def subnet_gradient(
    subnet: NetDef, init_grad: dict[str, str]
) -> tuple[NetDef, dict[str, str], list[str], list[str]]:
    """The backward pass of ``subnet`` as a net (Caffe2's ``_gen_subnet_gradient``).

    Returns ``(gradient net, blob -> gradient map, names the gradient ops read before writing
    them, names they write)``, the name lists in first-seen order.
    """
    grad_ops, grad_map = GradientRegistry.GetBackwardPass(list(subnet.op), init_grad)
    written: dict[str, None] = {}
    read: dict[str, None] = {}
    for grad_op in grad_ops:
        for name in grad_op.input:
            if name not in written:
                read[name] = None
        for name in grad_op.output:
            written[name] = None
    return _gradient_net(subnet, grad_ops), grad_map, list(read), list(written)


def _gradient_net(subnet: NetDef, ops: Sequence[OperatorDef]) -> NetDef:
    net = NetDef()
    net.CopyFrom(subnet)
    if net.name:
        net.name += "_grad"
    del net.op[:]
    net.op.extend(ops)
    del net.external_input[:]
    del net.external_output[:]
    return net


def gen_do_gradient(
    op: OperatorDef, g_output: Sequence[str | None]
) -> tuple[list[OperatorDef], list[str | None]]:
    """The gradient Do of a forward Do (Caffe2's ``gen_do_gradient``, ``semantics.md`` 3.3).

    Returns ``(dedup copy ops + [gradient Do], g_input)``, ``g_input`` one entry per Do input
    except the workspace blob; ``([], [])`` when the subnet has no gradient ops.
    """
    subnet, outer_to_inner, inner_to_outer, workspace = do_op_bindings(op)
    _check(len(g_output) == len(op.output), "Different number of gradient blobs and Do op outputs")
    grad_ops, g_output = dedupe_g_output(op, g_output)
    backward_init: dict[str, str] = {}
    initial_grad_map: dict[str, str] = {}
    for output, outer_grad in zip(op.output[:-1], g_output, strict=False):
        if outer_grad:
            inner = outer_to_inner[output] + INNER_GRAD
            backward_init[outer_to_inner[output]] = inner
            initial_grad_map[inner] = outer_grad
    _check(len(initial_grad_map) > 0, "Empty initial gradient map for Do op")
    forward_ops, starts = _start_value_reads(subnet, set(inner_to_outer))
    inner_grad_ops, inner_grad_map = GradientRegistry.GetBackwardPass(forward_ops, backward_init)
    if not inner_grad_ops:
        return [], []
    for name, start in starts.items():  # a bound input's gradient is its start value's
        if start in inner_grad_map:
            inner_grad_map[name] = inner_grad_map[start]
        else:
            inner_grad_map.pop(name, None)
    incoming_inner = {outer: inner for inner, outer in initial_grad_map.items()}
    # (inner gradient, upstream's copy name, the inner name bound to the outer gradient)
    copies: list[tuple[str, str, str]] = []
    g_input: list[str | None] = []
    new_outputs: list[str] = []
    bindings: dict[str, str] = {}
    for outer_input in op.input[:-1]:
        inner_input = outer_to_inner[outer_input]
        if inner_input not in inner_grad_map:
            g_input.append(None)
            continue
        outer_grad = outer_input + "_grad"
        copy_name = inner_input + INNER_GRAD_COPY
        target = incoming_inner.get(outer_grad, copy_name)
        bindings[target] = outer_grad
        copies.append((inner_grad_map[inner_input], copy_name, target))
        new_outputs.append(outer_grad)
        g_input.append(outer_grad)
    new_inputs: list[str] = []
    overwritten: set[str] = set()
    saved: dict[str, None] = {}
    for grad_op in inner_grad_ops:
        for name in grad_op.input:
            if name in overwritten:
                continue
            outer = inner_to_outer.get(name) or initial_grad_map.get(name)
            if outer:
                if outer not in new_inputs:
                    new_inputs.append(outer)
                bindings[name] = outer
            else:
                saved[name] = None
        overwritten.update(grad_op.output)
    gradient_do = _gradient_do(
        op,
        subnet,
        inner_grad_ops + _copy_ops(copies, set(incoming_inner.values())),
        new_inputs,
        new_outputs,
        bindings,
        list(saved),
        workspace,
    )
    do_op_bindings(gradient_do)
    return [*grad_ops, gradient_do], g_input


def _copy_ops(copies: list[tuple[str, str, str]], incoming: set[str]) -> list[OperatorDef]:
    """Copies of the inner input gradients to the names bound outside.

    Upstream copies each to ``<inner input>/_DO_OPERATOR_INNER_GRAD_COPY_``, bound to
    ``<outer input>_grad``. When that outer gradient is also an incoming gradient (a blob both
    input and output of the Do), the copy goes to the incoming gradient's inner name, bound
    once; every source is then first copied to its upstream copy name (unbound, local) so that
    no copy reads a gradient another one already overwrote.
    """
    if not any(target in incoming for _, _, target in copies):
        return [create_operator("Copy", [source], [target]) for source, _, target in copies]
    return [create_operator("Copy", [source], [copy]) for source, copy, _ in copies] + [
        create_operator("Copy", [copy], [target]) for _, copy, target in copies if copy != target
    ]


def _gradient_do(
    fwd_op: OperatorDef,
    fwd_net: NetDef,
    grad_ops: list[OperatorDef],
    inputs: list[str],
    outputs: list[str],
    bindings: dict[str, str],
    saved: list[str],
    workspace: str,
) -> OperatorDef:
    do = OperatorDef()
    do.CopyFrom(fwd_op)
    if do.name:
        do.name += "_grad"
    del do.input[:]
    do.input.extend([*inputs, workspace])
    del do.output[:]
    do.output.extend([*outputs, workspace])
    ordered = inputs + outputs
    del do.arg[:]
    net_arg = do.arg.add()
    net_arg.name = "net"
    net_arg.n.CopyFrom(_gradient_net(fwd_net, grad_ops))
    inner_arg = do.arg.add()
    inner_arg.name = "inner_blobs"
    inner_arg.strings.extend([name.encode() for name in bindings])
    index_arg = do.arg.add()
    index_arg.name = "outer_blobs_idx"
    index_arg.ints.extend([ordered.index(outer) for outer in bindings.values()])
    saved_arg = do.arg.add()
    saved_arg.name = "saved_fwd_blobs"
    saved_arg.strings.extend([name.encode() for name in saved])
    del do.control_input[:]
    do.is_gradient_op = True
    return do


def gen_if_gradient(
    op: OperatorDef, g_output: Sequence[str | None]
) -> tuple[list[OperatorDef], list[str | None]]:
    """The gradient If of a forward If (Caffe2's ``gen_if_gradient``, ``semantics.md`` 3.4)."""
    _check(op.type == "If", "Expected If op")
    _check(len(op.input) > 0, "Expected at least one input in If op")
    _check(len(op.output) == len(g_output), "Different number of gradient blobs and If op outputs")
    grad_ops, g_output = dedupe_g_output(op, g_output)
    init_grad = {o: g for o, g in zip(op.output, g_output, strict=True) if g}
    _check(len(init_grad) > 0, "Empty initial gradient map for If op")
    then_net = net_argument(op, "then_net")
    _check(then_net is not None, "Expected then subnet in If op")
    assert then_net is not None
    then_grad, then_map, then_inputs, then_outputs = subnet_gradient(then_net, init_grad)
    grad_map = dict(then_map)
    else_grad: NetDef | None = None
    else_map: dict[str, str] = {}
    else_inputs: list[str] = []
    else_outputs: list[str] = []
    else_net = net_argument(op, "else_net")
    if else_net is not None:
        else_grad, else_map, else_inputs, else_outputs = subnet_gradient(else_net, init_grad)
        for blob, else_g in else_map.items():
            then_g = then_map.get(blob)
            if then_g is None or then_g == else_g or then_g == init_grad.get(blob):
                grad_map[blob] = else_g
            elif else_g == init_grad.get(blob):
                grad_map[blob] = then_g
            else:
                raise ControlFlowError(
                    f"Unexpected grad blob name {blob}, {else_g}, {then_g}: the branches of "
                    "If give different gradient blobs for it"
                )
    both = set(then_outputs) & set(else_outputs)
    zero_then = _zero_init_ops(
        init_grad, then_map, [o for o in then_outputs if o not in both and o in then_map.values()]
    )
    if else_grad is not None:
        else_grad.op.extend(zero_then)
    elif zero_then:
        else_grad = NetDef()
        else_grad.CopyFrom(then_grad)
        if else_grad.name:
            else_grad.name += "_auto_else_zero_blobs_"
        del else_grad.op[:]
        else_grad.op.extend(zero_then)
    then_grad.op.extend(
        _zero_init_ops(
            init_grad,
            else_map,
            [o for o in else_outputs if o not in both and o in else_map.values()],
        )
    )
    condition = op.input[0]
    inputs = [condition] + [n for n in dict.fromkeys(then_inputs + else_inputs) if n != condition]
    outputs = list(dict.fromkeys(then_outputs + else_outputs))
    gradient_if = OperatorDef()
    gradient_if.CopyFrom(op)
    del gradient_if.input[:]
    gradient_if.input.extend(inputs)
    del gradient_if.output[:]
    gradient_if.output.extend(outputs)
    del gradient_if.arg[:]
    then_arg = gradient_if.arg.add()
    then_arg.name = "then_net"
    then_arg.n.CopyFrom(then_grad)
    if else_grad is not None:
        else_arg = gradient_if.arg.add()
        else_arg.name = "else_net"
        else_arg.n.CopyFrom(else_grad)
    if gradient_if.name:
        gradient_if.name += "_grad"
    del gradient_if.control_input[:]
    gradient_if.is_gradient_op = True
    return [*grad_ops, gradient_if], [grad_map.get(name) for name in op.input]


def _zero_init_ops(
    init_grad: dict[str, str], grad_map: dict[str, str], grad_outputs: list[str]
) -> list[OperatorDef]:
    """Ops defining, in the other branch, gradients only one branch computes."""
    ops: list[OperatorDef] = []
    for grad_output in grad_outputs:
        blob = next((b for b, g in grad_map.items() if g == grad_output), None)
        _check(blob is not None, f"Unknown gradient output {grad_output}")
        assert blob is not None
        if blob in init_grad:
            if init_grad[blob] != grad_output:
                ops.append(create_operator("Copy", [init_grad[blob]], [grad_output]))
        else:
            ops.append(create_operator("ConstantFill", [blob], [grad_output], value=0.0))
    return ops


GradientRegistry.RegisterGradient("Do")(gen_do_gradient)
GradientRegistry.RegisterGradient("If")(gen_if_gradient)

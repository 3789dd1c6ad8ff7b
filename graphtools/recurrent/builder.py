"""``recurrent_net``: append one ``RecurrentNetwork`` op running a cell net over a sequence.

Caffe2's ``caffe2/python/recurrent.py`` (its newest version, with ``forward_only``), rule for
rule: the same inputs, outputs and arguments in the same order, the backward step net built
with the gradient registry (recomputed ops first, scratch blobs added to its inputs, gradients
arriving both from outside the step and from inside it summed through ``<blob>_accum``). Where
upstream asserted, a typed error is raised (``RecurrentNetError``, an ``AssertionError``;
``RecurrentLinkError``, a ``KeyError``, where upstream failed a dict lookup).

Deviations, all for reproducibility: the cell net given is not modified (upstream set its type
to ``simple``); ``recompute_blobs_on_backward`` lists the blobs in the order the cell net writes
them (upstream iterated a set); an automatic scope also skips names an earlier
``recurrent_net`` used as its scope (upstream gave two unscoped ops of one net the same scope).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graphtools.errors import RecurrentLinkError, RecurrentNetError
from graphtools.gradients import GradientRegistry
from graphtools.ir import Net, Op, make_arg
from graphtools.proto import caffe2_pb2
from graphtools.serde import codec
from graphtools.ssa import get_ssa, get_undefined_blobs

__all__ = ["recurrent_net", "set_rnn_executor_config"]

NetDef = caffe2_pb2.NetDef
OperatorDef = caffe2_pb2.OperatorDef
Triple = tuple[str, str, int]


def _netdef_copy(net: Net | NetDef | Any, what: str) -> NetDef:
    copy = NetDef()
    if isinstance(net, Net):
        copy.CopyFrom(codec.net_to_netdef(net))
    elif isinstance(net, NetDef):
        copy.CopyFrom(net)
    elif callable(getattr(net, "Proto", None)):
        copy.CopyFrom(net.Proto())
    else:
        raise TypeError(f"{what} must be a graphtools Net or a NetDef, not {type(net).__name__}")
    return copy


def _blob_names(net: Net | NetDef) -> tuple[set[str], set[str]]:
    """(external inputs and op outputs: Caffe2's "defined" blobs, every name the net uses)."""
    if isinstance(net, NetDef):
        ops = [(list(op.input), list(op.output)) for op in net.op]
        external = list(net.external_input)
    else:
        ops = [(list(op.inputs), list(op.outputs)) for op in net]
        external = list(net.external_inputs)
    defined = set(external)
    used = set(external)
    for inputs, outputs in ops:
        defined.update(outputs)
        used.update(inputs)
        used.update(outputs)
    return defined, used


def _next_name(net: Net | NetDef, prefix: str) -> str:
    """Caffe2's ``Net.NextName(prefix)``: ``<net name>/<prefix>``, then ``_2``, ``_3``, ... while
    the net defines that blob or already uses it as a scope."""
    name = net.name if isinstance(net, NetDef) else net.name or ""
    base = f"{name}/{prefix}" if name else prefix
    defined, used = _blob_names(net)
    scopes = {blob.rsplit("/", 1)[0] for blob in used if "/" in blob}
    candidate, index = base, 2
    while candidate in defined or candidate in scopes:
        candidate = f"{base}_{index}"
        index += 1
    return candidate


def _lookup(mapping: Mapping[str, str], key: str, what: str) -> str:
    try:
        return str(mapping[key])
    except KeyError:
        raise RecurrentLinkError(f"{what}: {key!r}") from None


def _unpack(triples: list[Triple]) -> tuple[list[str], list[str], list[int]]:
    return [a for a, _, _ in triples], [b for _, b, _ in triples], [c for _, _, c in triples]


def _accumulate_outside_gradients(backward: NetDef) -> None:
    """A gradient op output the backward step also receives from outside (a backward external
    input) is written to ``<blob>_accum`` and summed into ``<blob>`` right after, so both
    gradients add up; in-place ops already take the incoming value into account."""
    external = set(backward.external_input)
    ops = list(backward.op)
    del backward.op[:]
    for op in ops:
        added = backward.op.add()
        added.CopyFrom(op)
        for j, output in enumerate(op.output):
            if output in external and output not in op.input:
                accum = output + "_accum"
                added.output[j] = accum
                total = backward.op.add()
                total.type = "Sum"
                total.input.extend([output, accum])
                total.output.append(output)


def _cell_backward_pass(
    cell: NetDef, outputs_map: dict[str, str]
) -> tuple[list[OperatorDef], dict[str, str]]:
    """``GetBackwardPass(cell ops, {output: output_grad})`` as Caffe2's gradient IR gave it.

    Caffe2 dropped a given gradient of an output that cell ops also read, when those readers
    give it a gradient (named ``<output>_grad`` too); the backward step then adds the gradient
    from outside through ``<output>_grad_accum``. graphtools' registry sums a given gradient
    with the readers' instead (and refuses the clash of names), so such outputs are left out
    of ``ys``, unless their readers give them no gradient.
    """
    read = {name for op in cell.op for name in op.input}
    ys = {o: g for o, g in outputs_map.items() if o not in read}
    ops, mapping = GradientRegistry.GetBackwardPass(list(cell.op), ys)
    ungraded = {o: g for o, g in outputs_map.items() if o in read and o not in mapping}
    if ungraded:
        ops, mapping = GradientRegistry.GetBackwardPass(list(cell.op), {**ys, **ungraded})
    return ops, {str(k): str(v) for k, v in mapping.items()}


def _distinct_link_internals(backward: NetDef, links: list[Triple]) -> list[Triple]:
    """Links that bind each internal name once: a name bound to a second window (a gradient a
    ``Sum`` passes to two cell inputs, or the cell output's own gradient passed through) is
    copied at the end of the step into ``<name>_link<k>``, which is linked instead.

    Upstream bound the name twice; the second binding replaced the first, so one of the two
    gradients was never written (silently wrong gradients).
    """
    seen: set[str] = set()
    distinct = []
    for k, (internal, external, offset) in enumerate(links):
        if internal in seen:
            copy = backward.op.add()
            copy.type = "Copy"
            copy.input.append(internal)
            copy.output.append(f"{internal}_link{k}")
            internal = copy.output[0]
        seen.add(internal)
        distinct.append((internal, external, offset))
    return distinct


def _backward_step(
    cell: NetDef, gradient_ops: list[OperatorDef], recompute: list[str] | None
) -> tuple[NetDef, dict[str, int]]:
    """The backward step net (recomputed ops, then the gradient ops, scratch blobs as inputs)
    and the blob versions of its ops before anything else is added."""
    backward = NetDef()
    backward.name = "RecurrentBackwardStep"
    if recompute is not None:
        wanted = set(recompute)
        for op in cell.op:
            outputs = set(op.output)
            if wanted.isdisjoint(outputs):
                continue
            backward.op.add().CopyFrom(op)
            if not outputs <= wanted:
                raise RecurrentNetError(
                    f"Outputs {sorted(outputs - wanted)} are output by op {op.type} but not "
                    f"recomputed: {sorted(wanted)}"
                )
    backward.op.extend(gradient_ops)
    backward_ssa, backward_versions = get_ssa(backward)
    undefined = get_undefined_blobs(backward_ssa)
    _, versions = get_ssa(cell)
    cell_outputs = set(cell.external_output)
    backward.external_input.extend(
        blob
        for blob, version in versions.items()
        if version > 0 and blob in undefined and blob not in cell_outputs
    )
    backward.type = "simple"
    return backward, dict(backward_versions)


def _recompute_order(cell: NetDef, blobs: Iterable[Any] | None) -> list[str] | None:
    if blobs is None:
        return None
    wanted = {str(b) for b in blobs}
    ordered = [name for op in cell.op for name in op.output if name in wanted]
    ordered += sorted(wanted - set(ordered))
    return list(dict.fromkeys(ordered))


def recurrent_net(
    net: Net | NetDef,
    cell_net: Net | NetDef,
    inputs: Sequence[tuple[Any, Any]],
    initial_cell_inputs: Sequence[tuple[Any, Any]],
    links: Mapping[Any, Any],
    timestep: str | Sequence[int] | None = None,
    scope: str | None = None,
    outputs_with_grads: Sequence[int] | str | None = (0,),
    recompute_blobs_on_backward: Iterable[Any] | None = None,
    forward_only: bool = False,
    *,
    scratch_sizes: Sequence[int] | None = None,
) -> list[str]:
    """Append to ``net`` a ``RecurrentNetwork`` op running ``cell_net`` once per timestep.

    Args:
        net: the net the op is appended to (an IR net or a NetDef, edited in place).
        cell_net: the step net (not modified); its external inputs are the sequence slice, the
            recurrent inputs, the timestep and the references (parameters), its external
            outputs the values linked to the next step.
        inputs: exactly one ``(cell input name, sequence blob)``; the sequence is ``T x N x ...``.
        initial_cell_inputs: ``(cell input name, initial value blob)`` per recurrent input.
        links: ``{cell input name: cell output name}``: the output of step ``t`` is that input
            at step ``t + 1``.
        timestep: the name of the timestep blob (default ``timestep``).
        scope: prefix of the state blobs (default ``<net name>/recurrent``, made unique).
        outputs_with_grads: positions of the outputs that receive gradients from outside.
        recompute_blobs_on_backward: blobs the backward step recomputes instead of keeping one
            per step (every output of an op writing one of them must be listed).
        forward_only: no backward step net (and no backward arguments): one workspace is
            reused over the steps.
        scratch_sizes: what the first generation of ``recurrent_net`` took as its sixth
            argument (before ``timestep`` and ``scope``), to preallocate the scratch blobs; a
            list of ints in the ``timestep`` position is read as it, and the arguments after it
            shift back. Accepted and unused: the op sizes every state from its values, as
            later Caffe2 does.

    Returns:
        The op's outputs without the step workspaces: ``<output>_all`` (``T x N x D``) and
        ``<output>_last`` (``1 x N x D``) per recurrent input.

    Raises:
        RecurrentNetError: not exactly one input sequence; a recomputed op has outputs that
            are not to be recomputed.
        RecurrentLinkError: a recurrent input has no link, or the backward step gives a cell
            input no gradient.
        GradientError / GradientMakerError: the cell net cannot be differentiated.
    """
    grads: Sequence[int] = (0,)
    if timestep is not None and not isinstance(timestep, str):
        # (links, scratch_sizes, timestep, scope): the first generation's positions
        old_scope = outputs_with_grads if isinstance(outputs_with_grads, str) else None
        timestep, scope = scope, old_scope
    elif outputs_with_grads is not None and not isinstance(outputs_with_grads, str):
        grads = outputs_with_grads
    if len(inputs) != 1:
        raise RecurrentNetError(
            f"Only one input blob is supported so far (recurrent_net got {len(inputs)})"
        )
    cell = _netdef_copy(cell_net, "cell_net")
    input_blobs = [str(i[0]) for i in inputs]
    initial_input_blobs = [str(x[1]) for x in initial_cell_inputs]
    scope_name = _next_name(net, "recurrent") if scope is None else str(scope)

    def s(name: str) -> str:
        return f"{scope_name}/{name}"

    known = {*input_blobs, *initial_input_blobs, *(str(x[0]) for x in initial_cell_inputs)}
    if timestep is not None:
        known.add(str(timestep))
    references = [b for b in cell.external_input if b not in known]
    inner_outputs_map = {o: o + "_grad" for o in cell.external_output}
    links = {str(k): str(v) for k, v in links.items()}

    backward: NetDef | None = None
    backward_mapping: dict[str, str] = {}
    backward_versions: dict[str, int] = {}
    recompute = _recompute_order(cell, recompute_blobs_on_backward)
    if not forward_only:
        gradient_ops, backward_mapping = _cell_backward_pass(cell, inner_outputs_map)
        backward, backward_versions = _backward_step(cell, gradient_ops, recompute)

    all_inputs = [str(i[1]) for i in inputs] + initial_input_blobs + references
    all_outputs: list[str] = []
    cell.type = "simple"
    forward_links: list[Triple] = []
    backward_links: list[Triple] = []
    aliases: list[Triple] = []
    recurrent_states: list[str] = []
    for cell_input, _ in initial_cell_inputs:
        cell_input = str(cell_input)
        state = s(cell_input + "_states")
        states_grad = state + "_grad"
        cell_output = _lookup(links, cell_input, "no link for the recurrent input")
        forward_links += [(cell_input, state, 0), (cell_output, state, 1)]
        aliases += [(state, cell_output + "_all", 1), (state, cell_output + "_last", -1)]
        all_outputs += [cell_output + "_all", cell_output + "_last"]
        recurrent_states.append(state)
        if backward is not None:
            backward_links.append((cell_output + "_grad", states_grad, 1))
            backward.external_input.append(cell_output + "_grad")
            recurrent_input_grad = cell_input + "_grad"
            if not backward_versions.get(recurrent_input_grad, 0):
                # Nobody writes the recurrent input's gradient (a Sum passes it through):
                # link the blob that holds it instead.
                grad = _lookup(backward_mapping, cell_input, "no gradient for the cell input")
                backward_links.append((grad, states_grad, 0))
            else:
                backward_links.append((recurrent_input_grad, states_grad, 0))
    for input_t, input_blob in inputs:
        forward_links.append((str(input_t), str(input_blob), 0))
    if backward is not None:
        for input_t, input_blob in inputs:
            grad = _lookup(backward_mapping, str(input_t), "no gradient for the cell input")
            backward_links.append((grad, str(input_blob) + "_grad", 0))
        backward.external_input.extend(cell.external_input)
        backward.external_input.extend(cell.external_output)
        _accumulate_outside_gradients(backward)
        backward_links = _distinct_link_internals(backward, backward_links)

    link_internal, link_external, link_offset = _unpack(forward_links)
    alias_src, alias_dst, alias_offset = _unpack(aliases)
    args: dict[str, Any] = {
        "alias_src": alias_src,
        "alias_dst": alias_dst,
        "alias_offset": alias_offset,
        "recurrent_states": recurrent_states,
        "initial_recurrent_state_ids": [all_inputs.index(i) for i in initial_input_blobs],
        "link_internal": link_internal,
        "link_external": link_external,
        "link_offset": link_offset,
        "enable_rnn_executor": 1,
        "step_net": cell,
        "timestep": "timestep" if timestep is None else str(timestep),
    }
    if backward is not None:
        params = [x for x in references if x in backward_mapping]
        backward_link_internal, backward_link_external, backward_link_offset = _unpack(
            backward_links
        )
        args.update(
            param=[all_inputs.index(p) for p in params],
            backward_link_internal=backward_link_internal,
            backward_link_external=backward_link_external,
            backward_link_offset=backward_link_offset,
            outputs_with_grads=[int(i) for i in grads],
            recompute_blobs_on_backward=recompute or [],
            param_grads=[backward_mapping[p] for p in params],
        )
        if len(backward.op):
            args["backward_step_net"] = backward
    op = OperatorDef()
    op.type = "RecurrentNetwork"
    op.input.extend(all_inputs)
    op.output.extend([*all_outputs, s("step_workspaces")])
    for key, value in args.items():
        argument = op.arg.add()
        if isinstance(value, NetDef):
            argument.name = key
            argument.n.CopyFrom(value)
        else:
            codec.argument_to_proto(make_arg(key, value), argument)
    _append(net, op)
    return all_outputs


def _append(net: Net | NetDef, op: OperatorDef) -> None:
    if isinstance(net, NetDef):
        net.op.append(op)
    elif isinstance(net, Net):
        net.append_op(codec.op_from_proto(op))
    else:
        raise TypeError(f"net must be a graphtools Net or a NetDef, not {type(net).__name__}")


def set_rnn_executor_config(
    rnn_op: OperatorDef | Op, num_threads: int | None = None, max_cuda_streams: int | None = None
) -> OperatorDef | Op:
    """Add Caffe2's RNN executor tuning arguments (``rnn_executor.num_threads``,
    ``rnn_executor.max_cuda_streams``) to a RecurrentNetwork or RecurrentNetworkGradient op.

    An ``OperatorDef`` is changed in place (as upstream) and returned; an IR ``Op`` is
    immutable, so the changed copy is returned.

    Raises:
        RecurrentNetError: the op is of another type.
    """
    if rnn_op.type not in {"RecurrentNetwork", "RecurrentNetworkGradient"}:
        raise RecurrentNetError(
            f"set_rnn_executor_config needs a RecurrentNetwork(Gradient) op, not {rnn_op.type}"
        )
    values = {"num_threads": num_threads, "max_cuda_streams": max_cuda_streams}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(rnn_op, OperatorDef):
            argument = rnn_op.arg.add()
            argument.name = "rnn_executor." + key
            argument.i = int(value)
        else:
            rnn_op = rnn_op.replace(args=[*rnn_op.args, make_arg("rnn_executor." + key, value)])
    return rnn_op

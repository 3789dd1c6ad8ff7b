"""What a ``RecurrentNetwork`` / ``RecurrentNetworkGradient`` op says, and the step nets Caffe2
actually runs for it.

Caffe2 does not run the step nets held in the op's arguments as they are. The forward op adds
the timestep blob to the step net's external inputs and prepends one ``rnn_internal_apply_link``
op per link (the first step op that writes a linked name without reading it gets that name as a
control input). The gradient op renames each parameter gradient ``g`` of its backward step net
to ``g_tmpstep``, prepends one ``rnn_internal_accumulate_gradient_input`` op per recurrent state
that receives a gradient from outside, then the apply-link ops of the forward and backward links,
and appends ``Sum(g, g_tmpstep) -> g`` per parameter. ``forward_program`` and
``backward_program`` build those runtime nets and the bookkeeping around them (states, aliases,
gradients), in one place for the executor's kernels, the lowering pass and the ONNX exporter.

Step nets come as nested NetDefs (``Argument.n``) or as protobuf text in ``Argument.s`` (both
occur in real files); text is parsed once per distinct string. Argument names and meanings:
``../shared/reference/semantics.md`` section 4 and ``onnx-facts.md`` section 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from graphtools.errors import InvalidNetError, SerdeError
from graphtools.ir import Argument, Net, Op
from graphtools.serde.codec import net_from_netdef
from graphtools.serde.netdef_io import parse_netdef

__all__ = [
    "Alias",
    "BackwardProgram",
    "ForwardProgram",
    "Link",
    "ParamGradient",
    "RecurrentState",
    "StateGradient",
    "backward_program",
    "forward_program",
    "has_backward_step_net",
    "recurrent_aliases",
    "recurrent_links",
    "recurrent_states",
    "step_net_of",
]

APPLY_LINK = "rnn_internal_apply_link"
ACCUMULATE_INPUT_GRADIENT = "rnn_internal_accumulate_gradient_input"


@dataclass(frozen=True)
class Link:
    """Before each step ``t``: ``internal`` = rows ``t + offset .. t + offset + window - 1`` of
    ``external`` (a view: writing ``internal`` writes those rows)."""

    internal: str
    external: str
    offset: int
    window: int = 1


@dataclass(frozen=True)
class Alias:
    """After the loop: ``dst`` = rows ``offset..`` of ``src`` (``dim0 + offset..`` if negative)."""

    src: str
    dst: str
    offset: int


@dataclass(frozen=True)
class RecurrentState:
    """A ``(T + L) x N x D`` state tensor and the op input holding its first ``L`` rows."""

    state: str
    input: str
    input_index: int


@dataclass(frozen=True)
class ForwardProgram:
    """How a ``RecurrentNetwork`` op runs.

    Attributes:
        timestep: the int32 ``[1]`` blob holding ``t`` in each step workspace.
        links: the forward links, in argument order.
        aliases: the outputs exposed after the loop.
        states: the recurrent states, in argument order.
        recompute_blobs: blobs kept in the shared workspace instead of each step's.
        has_backward: whether a backward step net is given (then one workspace per step is
            kept for the gradient op; otherwise one workspace is reused).
        step_net: the step net as Caffe2 runs it (apply-link ops prepended).
    """

    timestep: str
    links: tuple[Link, ...]
    aliases: tuple[Alias, ...]
    states: tuple[RecurrentState, ...]
    recompute_blobs: tuple[str, ...]
    has_backward: bool
    step_net: Net


@dataclass(frozen=True)
class ParamGradient:
    """A parameter whose gradient accumulates over the steps: the backward step net writes
    ``cell_gradient`` and ``Sum(grad, cell_gradient) -> grad`` adds it to the op's output."""

    param: str
    grad: str
    cell_gradient: str


@dataclass(frozen=True)
class StateGradient:
    """The gradient tensor ``grad`` of a state (shaped like it), and the op inputs holding the
    outside gradients of its ``_all`` (``external_grad``, added at row ``t + offset`` before
    step ``t``) and ``_last`` (``last_external_grad``, added to the last row) aliases."""

    state: str
    grad: str
    external_grad: str | None
    last_external_grad: str | None
    offset: int = 1


@dataclass(frozen=True)
class BackwardProgram:
    """How a ``RecurrentNetworkGradient`` op runs.

    Attributes:
        timestep: as forward.
        links: forward links then backward links (window 1), with ``<name>.rename`` applied.
        params: the parameters whose gradients accumulate, in ``param`` order.
        state_grads: one per recurrent state, in ``recurrent_states`` order.
        recurrent_input_ids: ``initial_recurrent_state_ids`` (forward input positions).
        grad_inputs: ``outputs_with_grads``: the op's first inputs are their gradients.
        input_grad: the gradient blob of the sequence input.
        step_net: the backward step net as Caffe2 runs it.
    """

    timestep: str
    links: tuple[Link, ...]
    params: tuple[ParamGradient, ...]
    state_grads: tuple[StateGradient, ...]
    recurrent_input_ids: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    input_grad: str
    step_net: Net


# -- arguments ----------------------------------------------------------------------------------


def _where(op: Op) -> str:
    return f"{op.type} op ({', '.join(op.outputs[:1]) or 'no outputs'})"


def _argument(op: Op, name: str) -> Argument | None:
    for argument in op.args:
        if argument.name == name:
            return argument
    return None


def _strings(op: Op, name: str) -> list[str]:
    argument = _argument(op, name)
    if argument is None:
        return []
    return [s.decode() for s in argument.strings]


def _ints(op: Op, name: str, default: list[int] | None = None) -> list[int]:
    argument = _argument(op, name)
    if argument is None:
        return [] if default is None else default
    return list(argument.ints)


def _string(op: Op, name: str, default: str) -> str:
    argument = _argument(op, name)
    if argument is None or argument.s is None:
        return default
    return argument.s.decode()


def _remapped(op: Op, name: str) -> str:
    """Caffe2's ``remappedName``: the ``<name>.rename`` argument memonger leaves, else ``name``."""
    return _string(op, name + ".rename", name)


@lru_cache(maxsize=128)
def _parse_step_net(text: bytes) -> Net:
    netdef, _ = parse_netdef(text)
    return net_from_netdef(netdef)


def step_net_of(op: Op, name: str) -> Net | None:
    """The net held by argument ``name``: a nested NetDef, or NetDef text in a string (parsed
    once per distinct text; treat the result as read-only). ``None`` when the argument is
    absent or an empty string.

    Raises:
        InvalidNetError: the string does not parse as a NetDef.
    """
    argument = _argument(op, name)
    if argument is None:
        return None
    if argument.n is not None:
        return argument.n
    if not argument.s:
        return None
    try:
        return _parse_step_net(argument.s)
    except SerdeError as exc:
        raise InvalidNetError(
            f"{_where(op)}: argument {name!r} holds text that is not a NetDef: {exc.reason}"
        ) from exc


def has_backward_step_net(op: Op) -> bool:
    """Whether ``op`` has a ``backward_step_net`` (a NetDef, or a non-empty string): what makes
    a forward ``RecurrentNetwork`` keep one workspace per step, as Caffe2 decides it."""
    argument = _argument(op, "backward_step_net")
    return argument is not None and (argument.n is not None or bool(argument.s))


def _required_net(op: Op, name: str) -> Net:
    net = step_net_of(op, name)
    if net is None:
        raise InvalidNetError(f"{_where(op)} needs a {name!r} argument holding its step net")
    return net


def recurrent_links(
    op: Op, internal: str, external: str, offset: str, window: str | None
) -> list[Link]:
    """The links of ``op`` from four parallel list arguments (Caffe2's ``extractLinks``); a
    missing window argument means windows of 1.

    Raises:
        InvalidNetError: the lists differ in length, or an offset or window is negative.
    """
    internals, externals = _strings(op, internal), _strings(op, external)
    offsets = _ints(op, offset)
    windows = [1] * len(offsets) if window is None else _ints(op, window, [1] * len(offsets))
    if not len(internals) == len(externals) == len(offsets) == len(windows):
        raise InvalidNetError(
            f"{_where(op)}: {internal}/{external}/{offset}"
            f"{'/' + window if window else ''} hold {len(internals)}/{len(externals)}/"
            f"{len(offsets)}/{len(windows)} entries; they must be parallel lists"
        )
    links = []
    for name, ext, off, win in zip(internals, externals, offsets, windows, strict=True):
        if off < 0 or win < 0:
            raise InvalidNetError(
                f"{_where(op)}: link {name!r} -> {ext!r} has offset {off} and window {win}; "
                "both must be >= 0"
            )
        links.append(Link(name, ext, off, win))
    return links


def recurrent_aliases(op: Op) -> list[Alias]:
    """The aliases of ``op`` (``alias_src``/``alias_dst``/``alias_offset``).

    Raises:
        InvalidNetError: the three lists differ in length.
    """
    src, dst, offset = (
        _strings(op, "alias_src"),
        _strings(op, "alias_dst"),
        _ints(op, "alias_offset"),
    )
    if not len(src) == len(dst) == len(offset):
        raise InvalidNetError(
            f"{_where(op)}: alias_src/alias_dst/alias_offset hold {len(src)}/{len(dst)}/"
            f"{len(offset)} entries; they must be parallel lists"
        )
    return [Alias(s, d, o) for s, d, o in zip(src, dst, offset, strict=True)]


def recurrent_states(op: Op, first_input: int = 0) -> list[RecurrentState]:
    """The recurrent states of ``op`` and their initial inputs (``initial_recurrent_state_ids``
    count from input ``first_input``).

    Raises:
        InvalidNetError: the lists differ in length, or an id is not an input position.
    """
    states = _strings(op, "recurrent_states")
    ids = _ints(op, "initial_recurrent_state_ids")
    if len(states) != len(ids):
        raise InvalidNetError(
            f"{_where(op)}: {len(states)} recurrent_states but {len(ids)} "
            "initial_recurrent_state_ids (states/inputs mismatch)"
        )
    found = []
    for state, index in zip(states, ids, strict=True):
        position = index + first_input
        if not 0 <= position < len(op.inputs):
            raise InvalidNetError(
                f"{_where(op)}: initial_recurrent_state_ids entry {index} for state {state!r} "
                f"is not an input position (the op has {len(op.inputs)} inputs)"
            )
        found.append(RecurrentState(state, op.inputs[position], position))
    return found


# -- runtime step nets ------------------------------------------------------------------------


def _apply_link_ops(op: Op, links: list[Link], timestep: str, ops: list[Op]) -> list[Op]:
    """Caffe2's ``AddApplyLinkOps``: one apply-link op per link, and a control input on the
    first op of ``ops`` that writes each linked name without reading it (``ops`` is updated)."""
    apply_ops = []
    for link in links:
        apply_ops.append(
            Op(
                APPLY_LINK,
                [timestep, link.external],
                [link.internal, link.external],
                args={"offset": link.offset, "window": link.window},
                device_option=op.device_option,
            )
        )
        for index, step_op in enumerate(ops):
            if link.internal in step_op.inputs:
                continue
            if link.internal in step_op.outputs:
                control = (*step_op.control_inputs, link.internal)
                ops[index] = step_op.replace(control_inputs=control)
                break
    return apply_ops


def _link_names(links: list[Link]) -> list[str]:
    names = []
    for link in links:
        names += [link.internal, link.external]
    return names


def _runtime_net(template: Net, ops: list[Op], extra_inputs: list[str]) -> Net:
    return Net(
        ops,
        [*template.external_inputs, *extra_inputs],
        template.external_outputs,
        name=template.name,
    )


def forward_program(op: Op) -> ForwardProgram:
    """How the forward ``op`` runs (see ``ForwardProgram``).

    Raises:
        InvalidNetError: a missing or unparsable step net, or list arguments that do not
            match (``semantics.md`` 4.3's checks).
    """
    template = _required_net(op, "step_net")
    timestep = _string(op, "timestep", "timestep")
    links = recurrent_links(op, "link_internal", "link_external", "link_offset", "link_window")
    ops = list(template.copy().ops)
    apply_ops = _apply_link_ops(op, links, timestep, ops)
    step_net = _runtime_net(template, [*apply_ops, *ops], [timestep, *_link_names(links)])
    return ForwardProgram(
        timestep=timestep,
        links=tuple(links),
        aliases=tuple(recurrent_aliases(op)),
        states=tuple(recurrent_states(op)),
        recompute_blobs=tuple(_strings(op, "recompute_blobs_on_backward")),
        has_backward=has_backward_step_net(op),
        step_net=step_net,
    )


def _rename(ops: list[Op], old: str, new: str) -> list[Op]:
    renamed = []
    for step_op in ops:
        if old in step_op.inputs or old in step_op.outputs:
            step_op = step_op.replace(
                inputs=[new if n == old else n for n in step_op.inputs],
                outputs=[new if n == old else n for n in step_op.outputs],
            )
        renamed.append(step_op)
    return renamed


def _param_gradients(op: Op, grad_inputs: int) -> list[ParamGradient]:
    params = _ints(op, "param")
    param_grads = _strings(op, "param_grads")
    if param_grads and len(param_grads) != len(params):
        raise InvalidNetError(
            f"{_where(op)}: {len(params)} param but {len(param_grads)} param_grads "
            "(param_grads must be empty or as long as param)"
        )
    found = []
    for i, index in enumerate(params):
        position = index + grad_inputs
        if not 0 <= position < len(op.inputs) or i + 1 >= len(op.outputs):
            raise InvalidNetError(
                f"{_where(op)}: param entry {index} has no matching input or output "
                f"({len(op.inputs)} inputs, {len(op.outputs)} outputs)"
            )
        grad = op.outputs[i + 1]
        cell = (_remapped(op, param_grads[i]) if param_grads else grad) + "_tmpstep"
        found.append(ParamGradient(op.inputs[position], grad, cell))
    return found


def _state_gradients(op: Op, grad_inputs: list[int]) -> list[StateGradient]:
    aliases = recurrent_aliases(op)
    found = []
    for state in _strings(op, "recurrent_states"):
        external = last = None
        for j, alias in enumerate(aliases):
            if alias.src != state or j not in grad_inputs:
                continue
            k = len(grad_inputs) - 1 - grad_inputs[::-1].index(j)  # the last match, as Caffe2
            if alias.offset == 1:
                external = op.inputs[k]
            elif alias.offset == -1:
                last = op.inputs[k]
            else:
                raise InvalidNetError(
                    f"{_where(op)}: output {j} (alias of state {state!r}) receives a gradient "
                    f"but its alias offset is {alias.offset}; only 1 (_all) and -1 (_last) "
                    "aliases can take gradients"
                )
        found.append(StateGradient(state, _remapped(op, state + "_grad"), external, last))
    return found


def backward_program(op: Op) -> BackwardProgram:
    """How the gradient ``op`` runs (see ``BackwardProgram``; ``semantics.md`` 4.5).

    Raises:
        InvalidNetError: a missing or unparsable backward step net, ``outputs_with_grads``
            empty, or list arguments that do not match.
    """
    template = _required_net(op, "backward_step_net")
    timestep = _string(op, "timestep", "timestep")
    grad_inputs = _ints(op, "outputs_with_grads")
    if not grad_inputs:
        raise InvalidNetError(f"{_where(op)}: outputs_with_grads is empty")
    if len(op.inputs) <= len(grad_inputs):
        raise InvalidNetError(
            f"{_where(op)} has {len(op.inputs)} inputs: fewer than the "
            f"{len(grad_inputs)} output gradients plus the forward inputs"
        )
    links = recurrent_links(op, "link_internal", "link_external", "link_offset", "link_window")
    links += recurrent_links(
        op, "backward_link_internal", "backward_link_external", "backward_link_offset", None
    )
    links = [
        Link(_remapped(op, link.internal), _remapped(op, link.external), link.offset, link.window)
        for link in links
    ]
    ops = list(template.copy().ops)
    params = _param_gradients(op, len(grad_inputs))
    for param in params:
        ops = _rename(ops, param.cell_gradient[: -len("_tmpstep")], param.cell_gradient)
    state_grads = _state_gradients(op, grad_inputs)
    extra = [timestep]
    accumulate = []
    for rg in state_grads:
        if rg.external_grad is None:
            continue
        args: dict[str, object] = {
            f"rnn_dependency.{link.internal}": link.internal
            for link in links
            if link.external == rg.grad
        }
        args["offset"] = rg.offset
        accumulate.append(
            Op(
                ACCUMULATE_INPUT_GRADIENT,
                [timestep, rg.external_grad, rg.grad],
                [rg.grad],
                args=args,
                device_option=op.device_option,
            )
        )
        extra += [rg.external_grad, rg.grad]
    ops = [*accumulate, *ops]
    apply_ops = _apply_link_ops(op, links, timestep, ops)
    extra += _link_names(links)
    sums = [
        Op("Sum", [p.grad, p.cell_gradient], [p.grad], device_option=op.device_option)
        for p in params
    ]
    extra += [p.grad for p in params]
    input_grad = _remapped(op, op.inputs[len(grad_inputs)] + "_grad")
    return BackwardProgram(
        timestep=timestep,
        links=tuple(links),
        params=tuple(params),
        state_grads=tuple(state_grads),
        recurrent_input_ids=tuple(_ints(op, "initial_recurrent_state_ids")),
        grad_inputs=tuple(grad_inputs),
        input_grad=input_grad,
        step_net=_runtime_net(template, [*apply_ops, *ops, *sums], extra),
    )

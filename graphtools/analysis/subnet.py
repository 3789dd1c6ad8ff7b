"""Which ops of a net compute given outputs from given inputs: the plan of a sub-net cut.

``find_sub_net(net, inputs, outputs, params)`` walks back from each output (at its last
version, as Caffe2's ``Net.ClonePartial`` reads names) through the ops that write what it
needs, stopping at the inputs and at ``params`` (blobs an init_net fills). An input stands for
the value the kept ops read under its name (``ClonePartial`` takes its last version instead,
which an op writing the name in place after the cut, or an ``If`` that may write it, would
move past the cut). An op holding nested nets needs what they read from outside as well: for
``If`` and ``While``, whose nets run in the enclosing workspace, the names a net reads before
writing them (branches and loop nets alike); for the others (``Do``, ``RecurrentNetwork``,
which bind names) what ``graphtools.nested`` says; and a name such an op may leave unwritten
(one ``If`` branch writes it, a ``While`` loop net does) needs its value from before the op. It
refuses, by name:

* a name the net neither declares nor reads nor writes;
* an output the inputs do not determine: the walk reaches a blob that is neither an input nor
  a parameter and that no op writes (an input of the whole net the cut does not give);
* an input whose name the kept ops read at two versions (an in-place op between the reads);
* a cut that would run an op twice: an op the outputs need that also leads to an input
  (Caffe2's ``ClonePartial`` refuses it too: a random fill would give the two runs different
  values).

Linear in the ops and blobs it visits (each input adds a walk for the last check).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from graphtools.errors import SubNetError
from graphtools.ir import Net, Op
from graphtools.nested import nested_access

__all__ = ["SubNet", "find_sub_net", "versioned_accesses"]

Versioned = tuple[str, int]


@dataclass(frozen=True)
class SubNet:
    """The plan of a cut.

    Attributes:
        ops: indices of the ops to keep, in net order.
        inputs: the cut's inputs, as given.
        input_versions: the version of each input the cut starts from.
        outputs: the cut's outputs, as given.
        params: the parameters the kept ops read, in the order they are first read.
        unused_inputs: inputs no kept op reads (no output needs them).
    """

    ops: tuple[int, ...]
    inputs: tuple[str, ...]
    input_versions: dict[str, int]
    outputs: tuple[str, ...]
    params: tuple[str, ...]
    unused_inputs: tuple[str, ...]


def versioned_accesses(
    net: Net, carried: dict[Versioned, Versioned] | None = None
) -> tuple[list[list[Versioned]], dict[Versioned, int], dict[str, int]]:
    """Per op the versioned blobs it reads (declared inputs, then what its nested nets read),
    the op writing each versioned blob, and each name's last version; versions as ``get_ssa``
    counts them, an op holding nested nets also writing what its nested nets write.

    ``carried``, when given, receives for each version an ``If`` or ``While`` may leave
    unwritten (one branch writes it, a loop net does) the version before it, which it then
    holds: that value, not the whole op, is what the name's new version needs besides it."""
    versions = dict.fromkeys(net.external_inputs, 0)
    reads: list[list[Versioned]] = []
    producers: dict[Versioned, int] = {}
    for index, op in enumerate(net):
        names = list(op.inputs)
        written = list(op.outputs)
        if op.has_nested_nets():
            access = nested_access(op)
            names += sorted(_outside_reads(op) - set(names))
            if carried is not None:
                maybe = access.writes - _surely_written(op) - set(op.outputs)
                for name in sorted(maybe & versions.keys()):
                    carried[(name, versions[name] + 1)] = (name, versions[name])
            written += sorted(access.writes - set(written))
        reads.append([(name, versions.get(name, 0)) for name in dict.fromkeys(names)])
        for name in dict.fromkeys(written):
            versions[name] = versions.get(name, 0) + 1
            producers[(name, versions[name])] = index
    return reads, producers, versions


#: Ops whose nested nets run in the enclosing workspace, by the arguments holding them (in the
#: order they run: a While's condition net before its loop net).
_SAME_WORKSPACE = {
    "If": ("then_net", "else_net"),
    "AsyncIf": ("then_net", "else_net"),
    "While": ("cond_net", "loop_net"),
}


def _outside_reads(op: Op) -> set[str]:
    """Names ``op``'s nested nets read from the enclosing workspace."""
    arguments = _SAME_WORKSPACE.get(op.type)
    if arguments is None:
        return set(nested_access(op).reads)
    nets = dict(op.nested_nets())
    found: set[str] = set()
    if op.type == "While":
        found |= _read_before_written([nets[a] for a in arguments if a in nets])
    else:
        for argument in arguments:
            if argument in nets:
                found |= _read_before_written([nets[argument]])
    return found


def _surely_written(op: Op) -> frozenset[str]:
    """Names ``op``'s nested nets write whichever way it runs: an ``If`` what both branches
    write, a ``While`` what its condition net writes (the loop net may not run); for the ops
    binding names (``Do``, ``RecurrentNetwork``) everything they write."""
    arguments = _SAME_WORKSPACE.get(op.type)
    if arguments is None:
        return nested_access(op).writes
    nets = dict(op.nested_nets())
    if op.type == "While":
        return _written_by(nets["cond_net"]) if "cond_net" in nets else frozenset()
    if not all(argument in nets for argument in arguments):
        return frozenset()
    then_net, else_net = (nets[argument] for argument in arguments)
    return _written_by(then_net) & _written_by(else_net)


def _written_by(net: Net) -> frozenset[str]:
    """Names every run of ``net`` writes (its ops' outputs and their nets' sure writes)."""
    found: set[str] = set()
    for op in net:
        found.update(op.outputs)
        if op.has_nested_nets():
            found |= _surely_written(op)
    return frozenset(found)


def _read_before_written(nets: Sequence[Net]) -> set[str]:
    """Names the nets, run one after the other, read before writing them."""
    written: set[str] = set()
    found: set[str] = set()
    for net in nets:
        for op in net:
            reads = list(op.inputs)
            if op.has_nested_nets():
                reads += sorted(_outside_reads(op))
            found.update(name for name in reads if name not in written)
            written.update(op.outputs)
            if op.has_nested_nets():
                written.update(_surely_written(op))
    return found


def _known_names(net: Net) -> set[str]:
    names = set(net.external_inputs) | set(net.external_outputs)
    for op in net:
        names.update(op.inputs)
        names.update(op.outputs)
    return names


def _check_names(net: Net, inputs: Sequence[str], outputs: Sequence[str]) -> None:
    if not outputs:
        raise SubNetError("a sub-net needs at least one output")
    known = _known_names(net)
    for kind, names in (("input", inputs), ("output", outputs)):
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        if repeated:
            raise SubNetError(f"{kind} {repeated[0]!r} is named twice")
        for name in names:
            if name not in known:
                raise SubNetError(
                    f"{kind} {name!r} is not a blob of net {net.name or '(unnamed)'}: no op "
                    "reads or writes it and the net does not declare it"
                )


def _walk(
    start: Iterable[Versioned],
    stop: Set[str],
    reads: Sequence[Sequence[Versioned]],
    producers: dict[Versioned, int],
    carried: Mapping[Versioned, Versioned],
) -> tuple[set[int], list[Versioned]]:
    """The ops writing what ``start`` needs, back to blobs named in ``stop``; and the blobs
    reached that no op writes (in the order reached). A version an op may have left as it
    was needs the one before it too (``carried``)."""
    ops: set[int] = set()
    leaves: dict[Versioned, None] = {}
    seen: set[Versioned] = set()
    todo = list(start)
    while todo:
        blob = todo.pop()
        if blob in seen or blob[0] in stop:
            continue
        seen.add(blob)
        producer = producers.get(blob)
        if producer is None:
            leaves[blob] = None
            continue
        if blob in carried:
            todo.append(carried[blob])
        if producer not in ops:
            ops.add(producer)
            todo.extend(reads[producer])
    return ops, list(leaves)


def find_sub_net(
    net: Net, inputs: Sequence[str], outputs: Sequence[str], params: Set[str] = frozenset()
) -> SubNet:
    """Plan the cut of ``net`` computing ``outputs`` from ``inputs`` (see the module docstring).

    Args:
        net: the net to cut.
        inputs: blobs the cut starts from (the value the kept ops read under each name).
        outputs: blobs the cut computes (their last version).
        params: blobs an init_net fills (they come along with the ops reading them).

    Raises:
        SubNetError: an unknown name, an output the inputs do not determine, an input read at
            two versions, or an op the cut would run twice; the message names them.
    """
    _check_names(net, inputs, outputs)
    carried: dict[Versioned, Versioned] = {}
    reads, producers, versions = versioned_accesses(net, carried)
    given = set(inputs)
    kept: set[int] = set()
    needed_leaves: dict[Versioned, None] = {}
    for output in outputs:
        start = [(output, versions.get(output, 0))]
        ops, leaves = _walk(start, given, reads, producers, carried)
        missing = [blob for blob in leaves if not (blob[1] == 0 and blob[0] in params)]
        if missing:
            raise SubNetError(_undetermined(output, missing, given))
        kept |= ops
        needed_leaves.update(dict.fromkeys(leaves))
    order = sorted(kept)
    input_versions = _input_versions(net, inputs, outputs, order, reads, versions)
    _check_single_runs(net, kept, input_versions, reads, producers, carried)
    read_by_kept = [blob for index in order for blob in reads[index]]
    read_by_kept += [before for blob, before in carried.items() if producers[blob] in kept]
    read_names = {name for name, _ in read_by_kept}
    found_params = [name for name, version in read_by_kept if (name, version) in needed_leaves]
    return SubNet(
        ops=tuple(order),
        inputs=tuple(inputs),
        input_versions=input_versions,
        outputs=tuple(outputs),
        params=tuple(dict.fromkeys(found_params)),
        unused_inputs=tuple(n for n in inputs if n not in read_names and n not in outputs),
    )


def _input_versions(
    net: Net,
    inputs: Sequence[str],
    outputs: Sequence[str],
    order: Sequence[int],
    reads: Sequence[Sequence[Versioned]],
    versions: dict[str, int],
) -> dict[str, int]:
    """The one version of each input the kept ops read (an output read as is: its last)."""
    seen: dict[str, dict[int, int]] = {name: {} for name in inputs}
    for index in order:
        for name, version in reads[index]:
            if name in seen:
                seen[name].setdefault(version, index)
    for name in outputs:
        if name in seen:
            seen[name].setdefault(versions.get(name, 0), -1)
    found = {}
    for name, by_version in seen.items():
        if len(by_version) > 1:
            (v1, i1), (v2, i2) = sorted(by_version.items())[:2]
            raise SubNetError(
                f"input {name!r} would stand for two values: op #{i1} ({net[i1].type}) reads "
                f"{name}@{v1} and op #{i2} ({net[i2].type}) reads {name}@{v2} (an op writes "
                "it in place between them); cut at another blob"
            )
        found[name] = next(iter(by_version), versions.get(name, 0))
    return found


def _undetermined(output: str, missing: Sequence[Versioned], given: Set[str]) -> str:
    name = missing[0][0]
    why = f"{name!r}, which no op of the cut writes and the inputs do not give"
    more = f" (and {len(missing) - 1} more blobs)" if len(missing) > 1 else ""
    return (
        f"output {output!r} is not determined by the inputs {sorted(given)}: it needs "
        f"{why}{more}; add {name!r} to the inputs"
    )


def _check_single_runs(
    net: Net,
    kept: set[int],
    input_versions: dict[str, int],
    reads: Sequence[Sequence[Versioned]],
    producers: dict[Versioned, int],
    carried: Mapping[Versioned, Versioned],
) -> None:
    """Refuse a kept op that also leads to an input (it would run twice)."""
    for blob in sorted(input_versions.items()):
        upstream, _ = _walk([blob], frozenset(), reads, producers, carried)
        both = sorted(upstream & kept)
        if both:
            op = net[both[0]]
            raise SubNetError(
                f"the cut would run op #{both[0]} ({op.type}) twice: the outputs need it and "
                f"it also leads to input {blob[0]!r}; cut at blobs after it (or give its "
                "inputs as inputs)"
            )

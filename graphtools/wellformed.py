"""Well-formedness checks over a model: blobs read before anything defines them, outputs never
produced, and in a dialect whose values are single-assignment (ONNX) values written twice.

``verify`` returns findings rather than raising: real exported nets often arrive with some (a
parameter read but not declared, an output left from training), so the pass manager compares
the findings before and after each pass and only refuses a pass that *adds* one.

Rules, in Caffe2's terms:

* **undefined-blob**: an op reads a blob that no earlier op of its net writes and that is
  neither an external input of the net nor (for the predict_net) a blob the init_net produces.
  Only checked in nets that declare ``external_input``: Caffe2 treats a net with an empty
  ``external_input`` as declaring its inputs implicitly (``get_ssa`` seeds every read-before-
  write blob), so such a net has no undefined reads.
* **missing-output**: an external output that no op of the net writes and that is not an
  external input (declared, or implicit as above) nor an init_net output.
* **rewritten-value** (ONNX): a value written twice (by two ops, or twice by one), or written
  by an op although it is a graph input or an initializer. ONNX graphs are single-assignment.

A net's initializers (ONNX) count as defined, like its external inputs. An ONNX graph declares
its inputs even when it has none (its reads are never implicit, nor do they declare an output),
and a sub-graph's writes stay its own. The empty name is no value, in both dialects (as in the
SSA view, ``graphtools.ssa.NO_VALUE``): reading it reads nothing, listing it as an output
writes nothing, listing it as an input declares nothing, and an external output so named is
never produced (onnx's checker refuses it too). The answer is the same whether it is read off
a net's SSA view (in a pass manager) or found by walking the ops.

Nested nets (``If``'s ``then_net``, ``Do``'s ``net``, ``RecurrentNetwork``'s ``step_net``) are
checked too, with one simple scoping rule: a nested net held by op ``i`` sees, besides its own
external inputs and earlier writes, every blob visible in the enclosing net just before op
``i`` (that net's inputs and the writes of ops ``0..i-1``, recursively outwards); and the blobs
a nested net writes count as written by op ``i`` (``If`` and ``While`` run their nets in the
enclosing workspace, and exported ``If`` ops often list no outputs). A net with implicit inputs
makes every blob visible to the nets it holds. Control inputs are scheduling hints, not reads,
and are not checked. One walk over every op: linear in the size of the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import chain, filterfalse
from operator import attrgetter

from graphtools._core import ONNX
from graphtools._gc import paused_gc
from graphtools.ir import Model, Net
from graphtools.ssa import NO_VALUE

__all__ = ["MISSING_OUTPUT", "REWRITTEN_VALUE", "UNDEFINED_BLOB", "Finding", "verify"]

UNDEFINED_BLOB = "undefined-blob"
MISSING_OUTPUT = "missing-output"
REWRITTEN_VALUE = "rewritten-value"

_INPUTS = attrgetter("inputs")
_OUTPUTS = attrgetter("outputs")


@dataclass(frozen=True)
class Finding:
    """One problem ``verify`` found.

    Attributes:
        kind: ``"undefined-blob"``, ``"missing-output"`` or ``"rewritten-value"``.
        net: path of the net: ``predict_net``, ``init_net``, ``net`` (a bare ``Net``), or a
            nested net such as ``predict_net/op[12:If]/then_net``.
        op_index: index of the offending op in that net (``None`` for net-level findings).
        op_type: type of that op (``None`` for net-level findings).
        blob: the blob name concerned.
        message: what is wrong and what to do, without the location.
    """

    kind: str
    net: str
    op_index: int | None
    op_type: str | None
    blob: str
    message: str

    def __str__(self) -> str:
        where = (
            self.net if self.op_index is None else f"{self.net} op[{self.op_index}:{self.op_type}]"
        )
        return f"{where}: {self.message} [{self.kind}]"


class _Scope:
    """Blobs visible in one net while it is being walked, chained to the enclosing net's."""

    __slots__ = ("defined", "implicit", "parent", "written")

    def __init__(self, defined: set[str], implicit: bool, parent: _Scope | None) -> None:
        self.defined = defined
        self.implicit = implicit
        self.parent = parent
        self.written: set[str] = set()

    def visible(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if scope.implicit or name in scope.written or name in scope.defined:
                return True
            scope = scope.parent
        return False


def verify(model: Model | Net) -> list[Finding]:
    """Check ``model`` (or a single ``Net``) and return its findings, in net and op order.

    The init_net is checked before the predict_net; the init_net's produced blobs count as
    defined for the predict_net. An empty list means the model is well formed.
    """
    if isinstance(model, Net):
        return list(model.cached(("verify", "net"), lambda net: _report(net, "net", set())[0]))
    findings: list[Finding] = []
    init = model.init_net
    init_written: AbstractSet[str] | None = frozenset()
    if init is not None:
        init_findings, init_written = init.cached(("verify", "init_net"), _init_report)
        findings += init_findings
    # The predict_net's findings depend on which blobs the init_net writes: reuse them only for
    # the very same init_net object at the same revision.
    init_state = (init, None if init is None else init.revision)
    memo: list[tuple[tuple[Net | None, int | None], list[Finding]]] = model.predict_net.cached(
        ("verify", "predict_net"), lambda net: []
    )
    if not memo or memo[0][0][0] is not init or memo[0][0][1] != init_state[1]:
        init_outputs = _InitOutputs(init, init_written)
        memo[:] = [(init_state, _predict_report(model.predict_net, init_outputs))]
    findings += memo[0][1]
    return findings


class _InitOutputs:
    """The blobs the init_net writes, as the predict_net's checks ask about them.

    A big init_net's set of outputs costs more to build than the rest of its check, and the
    predict_net usually asks about a handful of names or none: those are answered in one
    scan of the init_net's outputs, and the set is built only for the op-by-op walk.
    """

    __slots__ = ("_init", "_written")

    def __init__(self, init: Net | None, written: AbstractSet[str] | None) -> None:
        # ``written``: what the init_net's check found it writes (never the empty name), or
        # ``None`` for an init_net whose outputs are its external outputs, none of them empty
        # (``_init_report``).
        self._init = init
        self._written = written

    def __bool__(self) -> bool:
        if self._written is not None:
            return bool(self._written)
        return self._init is not None and any(map(_OUTPUTS, self._init))

    def written_among(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` that the init_net writes."""
        if self._written is not None:
            return {name for name in names if name in self._written}
        return set() if self._init is None else self._init.written_among(names)

    def as_set(self) -> AbstractSet[str]:
        """Every blob the init_net writes."""
        if self._written is not None:
            return self._written
        return frozenset() if self._init is None else self._init.written_names()


def _predict_report(net: Net, init_outputs: _InitOutputs) -> list[Finding]:
    if net.ssa_is_cheap() and not net.nested_op_indices():
        return _findings_from_view(net, "predict_net", init_outputs)
    return _report(net, "predict_net", init_outputs.as_set())[0]


def _init_report(net: Net) -> tuple[list[Finding], AbstractSet[str] | None]:
    findings: list[Finding] = []
    if net.nested_op_indices():
        return findings, _check_net(net, "init_net", set(), None, findings)
    if not net.external_inputs:
        # The common init_net: fill ops, no inputs, each external output written in order.
        outputs = list(chain.from_iterable(map(_OUTPUTS, net)))
        if outputs == list(net.external_outputs) and NO_VALUE not in outputs:
            return findings, None  # nothing is missing; the outputs' set is left unbuilt
    return findings, _check_flat_net(net, "init_net", set(), findings)


def _report(
    net: Net, path: str, outer_defined: AbstractSet[str]
) -> tuple[list[Finding], AbstractSet[str]]:
    """The findings of one top-level net and every blob it writes (nested nets included)."""
    findings: list[Finding] = []
    if net.nested_op_indices():
        written = _check_net(net, path, outer_defined, None, findings)
    else:
        written = _check_flat_net(net, path, outer_defined, findings)
    return findings, written


def _findings_from_view(net: Net, path: str, init_outputs: _InitOutputs) -> list[Finding]:
    """The findings of a flat net from its SSA view: what ``_check_flat_net`` finds, without
    walking the ops (a pass manager has the view of every revision at hand)."""
    view = net.ssa()
    init_note = " nor an init_net output" if init_outputs else ""
    declares_inputs = bool(net.external_inputs)
    findings = []
    defined = net.defined_names()
    if declares_inputs or net.dialect == ONNX:
        reads = view.undefined_reads(defined, list(net.initializers))
        if reads:
            filled = init_outputs.written_among({name for _, name in reads})
            findings += [
                _undefined(path, index, net[index].type, name, init_note)
                for index, name in reads
                if name not in filled
            ]
    unproduced = [
        name
        for name in net.external_outputs
        if not name or (not view.final_version(name) and name not in defined)
    ]
    if unproduced:
        filled = init_outputs.written_among(unproduced)
        unproduced = [name for name in unproduced if name not in filled]
    if unproduced:
        declared = set(net.external_inputs)
        if not declares_inputs and net.dialect != ONNX:  # a read declares the blob implicitly
            declared = view.read_names(unproduced)
        declared.discard(NO_VALUE)
        findings += [_missing(path, name, init_note) for name in unproduced if name not in declared]
    if net.dialect == ONNX:
        findings += _rewritten_from_view(net, path)
    return findings


def _rewritten_from_view(net: Net, path: str) -> list[Finding]:
    """The ``rewritten-value`` findings of a flat ONNX net, from its view."""
    view = net.ssa()
    names = view.rewritten_names([*net.external_inputs, *net.initializers])
    if not names:
        return []
    return [_rewritten(path, index, net[index].type, name) for index, name in _writers(net, names)]


def _writers(net: Net, names: AbstractSet[str]) -> list[tuple[int, str]]:
    """``(op index, name)`` of the second and later writes of ``names`` (the first, too, for a
    name the net already holds as an input or initializer)."""
    held = set(net.external_inputs).union(net.initializers)
    seen: set[str] = set()
    found = []
    for index, op in enumerate(net):
        for name in op.outputs:
            if name in names:
                if name in seen or name in held:
                    found.append((index, name))
                seen.add(name)
    return found


def _rewritten(path: str, index: int, op_type: str, name: str) -> Finding:
    return Finding(
        REWRITTEN_VALUE,
        path,
        index,
        op_type,
        name,
        f"writes '{name}', which is written already (by an earlier op, or earlier among this "
        "op's outputs) or which the graph holds as an input or initializer; ONNX values are "
        "written once: give this output a fresh name",
    )


def _undefined(path: str, index: int, op_type: str, name: str, init_note: str) -> Finding:
    return Finding(
        UNDEFINED_BLOB,
        path,
        index,
        op_type,
        name,
        f"reads '{name}', which no earlier op writes and which is not an "
        f"external input{init_note}; declare it in external_input or produce it before this op",
    )


def _missing(path: str, name: str, init_note: str) -> Finding:
    return Finding(
        MISSING_OUTPUT,
        path,
        None,
        None,
        name,
        f"external output '{name}' is never produced: no op writes it and it is not "
        f"an external input{init_note}; produce it or drop it from external_output",
    )


def _check_flat_net(
    net: Net, path: str, outer_defined: AbstractSet[str], findings: list[Finding]
) -> AbstractSet[str]:
    """``_check_net`` for a top-level net without nested nets: the same findings, cheaper.

    Cheaper than building the SSA view (which an init_net, say, may never need otherwise), and
    than a plain walk: a net declaring no inputs needs only the set of blobs it writes, built in
    one C-level pass; a net declaring them is walked once, with reads checked against the blobs
    written so far and the init_net's outputs, and the few reads left over checked against the
    external inputs afterwards (building the union of those two sets, each about as large as the
    net in exported models, costs as much as the walk).
    """
    init_note = " nor an init_net output" if outer_defined else ""
    external_inputs = net.external_inputs
    onnx = net.dialect == ONNX
    if not external_inputs and not onnx:
        return _check_implicit_net(net, path, outer_defined, init_note, findings)
    held = net.defined_names()
    declared_inputs = frozenset(external_inputs) if onnx else frozenset()
    check_later = bool(outer_defined)
    known = outer_defined if check_later else set(external_inputs)
    if held:
        known = set(known) | held
    written: set[str] = set()
    suspects: list[tuple[int, str, str]] = []
    rewrites: list[tuple[int, str, str]] = []
    with paused_gc():
        for index, op in enumerate(net):
            for name in op.inputs:
                if name not in written and name not in known and name:  # "": no value
                    suspects.append((index, op.type, name))
            if onnx:
                for name in op.outputs:  # one at a time: an op writing a value twice, too
                    if name and (name in written or name in held or name in declared_inputs):
                        rewrites.append((index, op.type, name))
                    written.add(name)
            else:
                written.update(op.outputs)
    written.discard(NO_VALUE)  # listing the empty name writes no value
    unproduced = [n for n in net.external_outputs if not n or (n not in written and n not in known)]
    if check_later and (suspects or unproduced):
        leftover = {name for _, _, name in suspects}.union(unproduced)
        declared = leftover.intersection(external_inputs)
        declared.discard(NO_VALUE)
        suspects = [suspect for suspect in suspects if suspect[2] not in declared]
        unproduced = [name for name in unproduced if name not in declared]
    findings += [_undefined(path, i, op_type, name, init_note) for i, op_type, name in suspects]
    findings += [_missing(path, name, init_note) for name in unproduced]
    findings += [_rewritten(path, i, op_type, name) for i, op_type, name in rewrites]
    return written


def _check_implicit_net(
    net: Net, path: str, outer_defined: AbstractSet[str], init_note: str, findings: list[Finding]
) -> AbstractSet[str]:
    """``_check_flat_net`` for a net declaring no inputs: only outputs can be missing.

    Every blob it reads counts as declared, so an external output is missing only if no op
    writes or reads it; the reads are scanned only for the outputs nothing writes.
    """
    written = net.written_names()
    if NO_VALUE in written:
        written = written - {NO_VALUE}  # listing the empty name writes no value
    unproduced = [
        name
        for name in filterfalse(written.__contains__, net.external_outputs)
        if name not in outer_defined
    ]
    if unproduced:
        read = set(unproduced).intersection(chain.from_iterable(map(_INPUTS, net)))
        read.discard(NO_VALUE)  # nor does reading it declare one
        findings += [_missing(path, name, init_note) for name in unproduced if name not in read]
    return written


def _check_net(
    net: Net,
    path: str,
    outer_defined: AbstractSet[str],
    parent: _Scope | None,
    findings: list[Finding],
) -> AbstractSet[str]:
    """Append the findings of ``net`` (and its nested nets); return the blobs it writes."""
    onnx = net.dialect == ONNX
    implicit = not net.external_inputs and not onnx
    held = net.defined_names()
    scope = _Scope(set(net.external_inputs) | outer_defined | held, implicit, parent)
    written = scope.written
    read: set[str] = set()
    init_note = " nor an init_net output" if outer_defined else ""
    holders = net.nested_op_indices()
    for index, op in enumerate(net):
        for name in op.inputs:
            if implicit:
                read.add(name)
            elif name and not scope.visible(name):
                findings.append(_undefined(path, index, op.type, name, init_note))
        if index in holders:
            # Sibling nets (then/else) each see the scope before the op, not each other's writes.
            nested_writes: set[str] = set()
            for label, nested in _label_nested(op.nested_nets()):
                nested_path = f"{path}/op[{index}:{op.type}]/{label}"
                inner = _check_net(nested, nested_path, set(), scope, findings)
                if nested.dialect != ONNX:  # an ONNX sub-graph's values are its own
                    nested_writes |= inner
            written |= nested_writes
        if onnx:
            for name in op.outputs:  # one at a time: an op writing a value twice, too
                if name and (name in written or name in scope.defined):
                    findings.append(_rewritten(path, index, op.type, name))
                written.add(name)
        else:
            written.update(op.outputs)
    written.discard(NO_VALUE)  # the empty name is no value: never written, nor declared
    defined = scope.defined
    for name in net.external_outputs:
        if name and (
            name in written
            or name in defined
            or name in read
            or (parent is not None and parent.visible(name))
        ):
            continue
        findings.append(_missing(path, name, init_note))
    return written


def _label_nested(nested: list[tuple[str | None, Net]]) -> list[tuple[str, Net]]:
    """Name each nested net by its argument, with ``[k]`` where an argument holds several."""
    counts = Counter(name for name, _ in nested)
    seen: Counter[str | None] = Counter()
    labelled = []
    for name, net in nested:
        label = name or "arg"
        if counts[name] > 1:
            label = f"{label}[{seen[name]}]"
            seen[name] += 1
        labelled.append((label, net))
    return labelled

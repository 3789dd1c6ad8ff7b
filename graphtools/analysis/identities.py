"""Ops that pass their input through unchanged, and how to drop them without changing a value.

An *identity* here is an op the net's op table says passes its first input through as its first
output (Caffe2's ``Identity``, ``Alias``, ``AliasWithName`` and test-mode ``Dropout``; ONNX's
``Identity`` and inference-mode ``Dropout``) whose other outputs (a dropout mask) nobody reads,
or a one-input, one-output op of a type the caller adds. Dropping one ``x@v -> y@w`` makes every
reader of ``y@w`` read ``x@v``, which needs ``x`` not to be overwritten before those readers.
When ``y@w`` is an external output the net's interface keeps its name: the *value* ``x@v``
takes the name ``y`` instead (its producer writes ``y``, its readers read ``y``), which needs
``x@v`` to have a producer or be an initializer no input declares (an ONNX constant output,
as onnxsim renames it), not to be an output itself, and ``y`` to have no other value in the
net. Chains of identities collapse onto their first input. An identity that cannot go
is kept; names used inside nested nets are left alone. A net declaring no outputs is fetched
from the blobs it never reads (verify compares those): an identity writing one stays.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import compress, count
from typing import TYPE_CHECKING

from graphtools.ir import Net, Op
from graphtools.nested import names_in_nested_nets
from graphtools.ssa import VersionedBlob
from graphtools.ssa_view import SSAView

if TYPE_CHECKING:
    from graphtools.rewriter import Edit

__all__ = ["IdentityRemoval", "find_identity_ops"]

_TYPE = operator.attrgetter("type")


def _written_again(view: SSAView, index: int) -> bool:
    """Whether an op writes op ``index``'s first input or first output after it."""
    keys = (view.input_keys(index)[0], view.output_keys(index)[0])
    return any(view.next_write(key) is not None for key in keys)


@dataclass(frozen=True)
class IdentityRemoval:
    """What ``find_identity_ops`` found.

    Attributes:
        removed: the identity ops to drop.
        rewires: ``(output, source)`` pairs: every read of an identity's output reads the
            value it passes through instead.
        renames: ``(source, name)`` pairs: a value that takes an external output's name.
    """

    removed: frozenset[int]
    rewires: tuple[tuple[VersionedBlob, VersionedBlob], ...]
    renames: tuple[tuple[VersionedBlob, str], ...]

    def apply(self, edit: Edit) -> None:
        """Stage the removal in ``edit``: the renames first (they keep the external
        outputs' names), then the rewires, then the ops dropped."""
        for source, name in self.renames:
            edit.rename(source, name)
        for output, source in self.rewires:
            edit.replace_all_uses_with(output, source)
        for index in self.removed:
            edit.remove(index)


def find_identity_ops(
    net: Net,
    candidates: frozenset[str],
    passes_through: Callable[[Op], bool],
    types: Iterable[str] = (),
    shares_storage: Callable[[Op], bool] | None = None,
) -> IdentityRemoval:
    """The identities of ``net`` that can go (see the module docstring); linear time.

    ``candidates`` are the op types that may be identities and ``passes_through(op)`` says
    whether one is (the op table's ``identity_types`` and ``passes_through``); ``types`` are
    more types taken as identities when they have one input and one output;
    ``shares_storage(op)`` (the op table's) says whether an identity's output shares its
    input's storage, which keeps it when either name is written after it (an in-place write
    to one changes the other: dropped, the other would keep its old value).

    An identity the view calls plain (``SSAView.pass_through_keys``: the common case, a
    value no op overwrites, a mask nobody reads, no external output) in a net without nested
    reads needs none of the checks below, unless it reads an identity that did; the others
    go through them one by one.
    """
    extra = frozenset(types)

    def is_identity(op: Op) -> bool:
        if op.type in extra and len(op.inputs) == 1 and len(op.outputs) == 1:
            return True
        return op.type in candidates and passes_through(op)

    wanted = candidates | extra
    found = [
        index
        for index in compress(count(), map(wanted.__contains__, map(_TYPE, net)))
        if is_identity(net[index])
    ]
    if not found:  # the common case once a pipeline removed them: no view, no sets built
        return IdentityRemoval(frozenset(), (), ())
    view = net.ssa()
    if shares_storage is not None:
        found = [i for i in found if not (shares_storage(net[i]) and _written_again(view, i))]
        if not found:
            return IdentityRemoval(frozenset(), (), ())
    if not net.external_outputs:
        # A net declaring no outputs is fetched from the blobs it never reads (as verify
        # compares it): an identity writing one of those stays, as remove-dead-ends keeps
        # every op of such a net.
        found = [i for i in found if all(map(view.readers, view.output_keys(i)))]
        if not found:
            return IdentityRemoval(frozenset(), (), ())
    if not net.external_inputs and net.external_outputs:
        # A net declaring no inputs takes the blobs it reads before writing as its inputs:
        # an identity reading one the net also outputs keeps it an input (without a reader,
        # verify would call that output never produced).
        declared = set(net.external_outputs)
        found = [
            i for i in found if not (net[i].inputs[0] in declared and view.inputs_of(i)[0][1] == 0)
        ]
        if not found:
            return IdentityRemoval(frozenset(), (), ())
    nested = names_in_nested_nets(net)
    reads, outputs, plain = view.pass_through_keys(found)
    if nested:
        plain = [False] * len(found)
    checked = _Checked(net, view, nested)
    removed: list[int] = []
    rewires: list[tuple[int, int]] = []
    same_as: dict[int, int] = {}  # a dropped identity's output key -> its source's key
    unsure: set[int] = set()  # outputs of identities dropped after the checks
    for index, read, output, simple in zip(found, reads, outputs, plain, strict=True):
        source = same_as.get(read, read)
        if not (simple and read not in unsure):
            if not checked.can_go(index, source, output):
                continue
            unsure.add(output)
        removed.append(index)
        rewires.append((output, source))
        same_as[output] = source
    pairs = view.blobs([key for pair in rewires for key in pair])
    return IdentityRemoval(
        frozenset(removed), tuple(zip(pairs[::2], pairs[1::2], strict=True)), tuple(checked.renames)
    )


class _Checked:
    """The checks of an identity that is not plain (see ``find_identity_ops``), and the
    renames they decide on."""

    def __init__(self, net: Net, view: SSAView, nested: AbstractSet[str]) -> None:
        self.view = view
        self.nested = nested
        self.end = len(net)
        self.external = {key for key in map(view.key, view.external_outputs) if key is not None}
        self.inputs = set(net.external_inputs)
        self.initializers = net.initializers
        self.renames: list[tuple[VersionedBlob, str]] = []
        self.renamed: set[int] = set()

    def can_go(self, index: int, source: int, output: int) -> bool:
        """Whether identity ``index``, reading ``source`` (resolved through the identities
        dropped before it) and writing ``output``, can go; records the rename it needs."""
        view, external = self.view, self.external
        mask = view.output_keys(index)[1:]
        if any(key in external or view.readers(key) for key in mask):
            return False
        names = {view.name_of(source), view.name_of(output), *map(view.name_of, mask)}
        if not names.isdisjoint(self.nested):
            return False
        overwritten_at = view.next_write(source)
        if overwritten_at == index:  # the op writes the source's name itself (in place, or
            # as its mask): that write goes with it, the next one is what matters
            source_name = view.name_of(source)
            here = max(k for k in (output, *mask) if view.name_of(k) == source_name)
            overwritten_at = view.next_write(here)
        limit = self.end if overwritten_at is None else overwritten_at
        if any(reader > limit for reader, _ in view.readers(output)):
            return False
        if output not in external:
            return True
        name = view.name_of(output)
        only_value = view.final_version(name) == 1 and not view.readers(view.key((name, 0)) or 0)
        if (
            (view.producer_of(source) is None and not self._constant(view.name_of(source)))
            or source in external
            or source in self.renamed
            or name in self.inputs
            or not only_value
            or any(reader > limit for reader, _ in view.readers(source))
        ):
            return False
        self.renames.append((view.blob(source), name))
        self.renamed.add(source)
        return True

    def _constant(self, name: str) -> bool:
        """Whether ``name`` is an initializer no input declares (ONNX): a value the net holds,
        which may take an output's name as a computed value does."""
        return name in self.initializers and name not in self.inputs

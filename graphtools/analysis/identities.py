"""Ops that pass their input through unchanged, and how to drop them without changing a value.

An *identity* here is an op the net's op table says passes its first input through as its first
output (Caffe2's ``Identity``, ``Alias``, ``AliasWithName`` and test-mode ``Dropout``; ONNX's
``Identity`` and inference-mode ``Dropout``) whose other outputs (a dropout mask) nobody reads,
or a one-input, one-output op of a type the caller adds. Dropping one ``x@v -> y@w`` makes every
reader of ``y@w`` read ``x@v``, which needs ``x`` not to be overwritten before those readers.
When ``y@w`` is an external output the net's interface keeps its name: the *value* ``x@v``
takes the name ``y`` instead (its producer writes ``y``, its readers read ``y``), which needs
``x@v`` to have a producer and not be an output itself, and ``y`` to have no other value in
the net. Chains of identities collapse onto their first input. An identity that cannot go
is kept; names used inside nested nets are left alone.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import compress, count
from typing import TYPE_CHECKING

from graphtools.ir import Net, Op
from graphtools.nested import names_in_nested_nets
from graphtools.ssa import VersionedBlob

if TYPE_CHECKING:
    from graphtools.rewriter import Edit

__all__ = ["IdentityRemoval", "find_identity_ops"]

_TYPE = operator.attrgetter("type")


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
) -> IdentityRemoval:
    """The identities of ``net`` that can go (see the module docstring); linear time.

    ``candidates`` are the op types that may be identities and ``passes_through(op)`` says
    whether one is (the op table's ``identity_types`` and ``passes_through``); ``types`` are
    more types taken as identities when they have one input and one output.
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
    external = {key for key in map(view.key, view.external_outputs) if key is not None}
    inputs = set(net.external_inputs)
    nested = names_in_nested_nets(net)
    end = len(net)
    removed: set[int] = set()
    rewires: list[tuple[VersionedBlob, VersionedBlob]] = []
    renames: list[tuple[VersionedBlob, str]] = []
    renamed: set[int] = set()
    same_as: dict[int, int] = {}  # a dropped identity's output key -> its source's key
    for index in found:
        read = view.input_keys(index)[0]
        output, *mask = view.output_keys(index)
        if any(key in external or view.readers(key) for key in mask):
            continue
        source = same_as.get(read, read)
        names = {view.name_of(source), view.name_of(output), *map(view.name_of, mask)}
        if not names.isdisjoint(nested):
            continue
        overwritten_at = view.next_write(source)
        if overwritten_at == index:  # the op writes the source's name itself (in place, or
            # as its mask): that write goes with it, the next one is what matters
            source_name = view.name_of(source)
            here = max(k for k in (output, *mask) if view.name_of(k) == source_name)
            overwritten_at = view.next_write(here)
        limit = end if overwritten_at is None else overwritten_at
        if any(reader > limit for reader, _ in view.readers(output)):
            continue
        if output in external:
            name = view.name_of(output)
            only_value = view.final_version(name) == 1 and not view.readers(
                view.key((name, 0)) or 0
            )
            if (
                view.producer_of(source) is None
                or source in external
                or source in renamed
                or name in inputs
                or not only_value
                or any(reader > limit for reader, _ in view.readers(source))
            ):
                continue
            renames.append((view.blob(source), name))
            renamed.add(source)
        removed.add(index)
        rewires.append((view.blob(output), view.blob(source)))
        same_as[output] = source
    return IdentityRemoval(frozenset(removed), tuple(rewires), tuple(renames))

"""What a chain of data-movement ops does, in the fewest ops: the algebra behind merging
consecutive ``Transpose``/``Reshape``/``Squeeze``/``Unsqueeze`` ops.

Two views, both exact:

* **Labels** (``compose_labels``): ``Transpose``, ``Squeeze`` and ``Unsqueeze`` with known axes
  only move dims, drop dims of size 1 and insert them; following each input dim through a
  chain (knowing ranks only, so a symbolic batch is fine) gives which input dims of size 1 are
  dropped, the order of the others, and where dims of size 1 are inserted: at most a
  ``Squeeze``, a ``Transpose`` and an ``Unsqueeze``.
* **Element maps** (``element_forms``): with static shapes, where each element of the chain's
  input lands is the chain's output on ``arange`` of the input's size (evaluated by the caller
  with onnxruntime). From that map, the one-op forms (a ``Reshape``; a ``Transpose``) and the
  two-op forms (``Reshape`` then ``Transpose``, ``Transpose`` then ``Reshape``) are recognised
  when they reproduce it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Form", "LabelForm", "compose_labels", "element_forms", "normalize_axes"]


def normalize_axes(axes: Sequence[int], rank: int) -> list[int] | None:
    """``axes`` made non-negative for a tensor of ``rank``; ``None`` when one is out of range
    or repeated."""
    found = [axis + rank if axis < 0 else axis for axis in axes]
    if any(not 0 <= axis < rank for axis in found) or len(set(found)) != len(found):
        return None
    return found


@dataclass(frozen=True)
class LabelForm:
    """A chain of ``Transpose``/``Squeeze``/``Unsqueeze`` as ``Unsqueeze(Transpose(Squeeze(x)))``.

    Attributes:
        squeeze: input axes (of size 1) to drop first, sorted; empty: no ``Squeeze``.
        perm: the ``Transpose`` of what is left; ``None`` when the order is unchanged.
        unsqueeze: output axes where dims of size 1 are inserted last, sorted; empty: none.
    """

    squeeze: tuple[int, ...]
    perm: tuple[int, ...] | None
    unsqueeze: tuple[int, ...]

    @property
    def ops(self) -> int:
        """How many ops the form takes."""
        return bool(self.squeeze) + (self.perm is not None) + bool(self.unsqueeze)


def compose_labels(
    rank: int, steps: Sequence[tuple[str, Sequence[int] | None]]
) -> LabelForm | None:
    """The ``LabelForm`` of ``steps`` applied to a tensor of ``rank`` dims: each step is
    ``("Transpose", perm or None)``, ``("Squeeze", axes)`` or ``("Unsqueeze", axes)``;
    ``None`` when a step does not fit the ranks."""
    labels: list[int | None] = list(range(rank))  # None: a dim of size 1 a step inserted
    for kind, axes in steps:
        if kind == "Transpose":
            perm = list(range(len(labels)))[::-1] if axes is None else list(axes)
            if sorted(perm) != list(range(len(labels))):
                return None
            labels = [labels[p] for p in perm]
        elif kind == "Unsqueeze" and axes is not None:
            inserted = normalize_axes(axes, len(labels) + len(axes))
            if inserted is None:
                return None
            for axis in sorted(inserted):
                labels.insert(axis, None)
        elif kind == "Squeeze" and axes is not None:
            dropped = normalize_axes(axes, len(labels))
            if dropped is None:
                return None
            labels = [label for axis, label in enumerate(labels) if axis not in dropped]
        else:
            return None
    kept = [label for label in labels if label is not None]
    squeeze = tuple(sorted(set(range(rank)) - set(kept)))
    remaining = [axis for axis in range(rank) if axis not in squeeze]
    order = tuple(remaining.index(label) for label in kept)
    unsqueeze = tuple(axis for axis, label in enumerate(labels) if label is None)
    in_order = order == tuple(range(len(order)))
    if in_order and squeeze == unsqueeze:
        # dims of size 1 (Squeeze takes no other) put back where they were: the identity
        return LabelForm((), None, ())
    return LabelForm(squeeze, None if in_order else order, unsqueeze)


@dataclass(frozen=True)
class Form:
    """A chain of data-movement ops on a static shape, as at most two ops.

    Attributes:
        steps: ``("Reshape", shape)`` and ``("Transpose", perm)`` in order.
    """

    steps: tuple[tuple[str, tuple[int, ...]], ...]


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return tuple(inverse)


def _reshape_then_transpose(
    mapped: np.ndarray, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``(middle, perm)`` with ``transpose(arange.reshape(middle), perm) == mapped``; ``middle``
    is ``shape`` when the dims of size 1 can be placed so."""
    if mapped.size == 0:
        return None
    strides = [
        int(mapped[(0,) * axis + (1,) + (0,) * (mapped.ndim - axis - 1)] - mapped.flat[0])
        if size > 1
        else 0
        for axis, size in enumerate(mapped.shape)
    ]
    order = sorted(range(mapped.ndim), key=lambda axis: (-strides[axis], axis))
    units = [axis for axis in order if mapped.shape[axis] == 1]
    sizes = [mapped.shape[axis] for axis in order if mapped.shape[axis] != 1]
    if len(shape) == mapped.ndim and sizes == [d for d in shape if d != 1]:
        # Put the dims of size 1 where the input has its own: one Transpose, no Reshape.
        others = iter(axis for axis in order if mapped.shape[axis] != 1)
        unit = iter(units)
        order = [next(unit) if d == 1 else next(others) for d in shape]
    moved = np.transpose(mapped, order)
    if not np.array_equal(moved.reshape(-1), np.arange(mapped.size)):
        return None
    return tuple(int(d) for d in moved.shape), _inverse(order)


def _transpose_then_reshape(mapped: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """``perm`` such that ``transpose(arange.reshape(shape), perm)`` holds ``mapped``'s elements
    in ``mapped``'s order."""
    flat = mapped.reshape(-1)
    if flat.size < 2:
        return None
    coordinates = np.unravel_index(flat, shape)
    periods = []
    for axis, size in enumerate(shape):
        changes = np.flatnonzero(coordinates[axis] != coordinates[axis][0])
        periods.append(int(changes[0]) if size > 1 and changes.size else flat.size)
    perm = tuple(sorted(range(len(shape)), key=lambda axis: (-periods[axis], axis)))
    iota = np.arange(flat.size).reshape(shape)
    if not np.array_equal(np.transpose(iota, perm).reshape(-1), flat):
        return None
    return perm


def element_forms(input_shape: Sequence[int], mapped: np.ndarray) -> list[Form]:
    """The forms of at most two ops that move the elements of a tensor of ``input_shape`` as
    ``mapped`` (the chain's output on ``arange``) does, fewest ops first."""
    shape = tuple(int(d) for d in input_shape)
    output = tuple(int(d) for d in mapped.shape)
    forms: list[Form] = []
    flat = mapped.reshape(-1)
    if np.array_equal(flat, np.arange(flat.size)):
        forms.append(Form(() if output == shape else (("Reshape", output),)))
        return forms
    found = _reshape_then_transpose(mapped, shape)
    if found is not None:
        middle, perm = found
        if middle == shape:
            forms.append(Form((("Transpose", perm),)))
        else:
            forms.append(Form((("Reshape", middle), ("Transpose", perm))))
    perm_first = _transpose_then_reshape(mapped, shape)
    if perm_first is not None:
        moved = tuple(shape[axis] for axis in perm_first)
        steps: tuple[tuple[str, tuple[int, ...]], ...] = (("Transpose", perm_first),)
        if moved != output:
            steps += (("Reshape", output),)
        forms.append(Form(steps))
    forms.sort(key=lambda form: len(form.steps))
    return forms

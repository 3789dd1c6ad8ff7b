"""``graphtools.analysis.layouts``: the forms found for a chain of data-movement ops move every
element where the chain moves it (random chains, numpy as the chain), and the label form of a
Transpose/Squeeze/Unsqueeze run is that run."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtools.analysis.layouts import compose_labels, element_forms


def _apply(x: np.ndarray, steps: tuple[tuple[str, tuple[int, ...]], ...]) -> np.ndarray:
    for kind, values in steps:
        x = x.reshape(values) if kind == "Reshape" else np.transpose(x, values)
    return x


@st.composite
def _chains(draw: st.DrawFn) -> tuple[tuple[int, ...], np.ndarray]:
    """A static shape and where a random chain of Reshapes and Transposes sends ``arange``."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=4)))
    x = np.arange(int(np.prod(shape))).reshape(shape)
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            x = np.transpose(x, draw(st.permutations(range(x.ndim))))
        else:
            sizes = [d for d in x.shape if d != 1]
            if draw(st.booleans()) and len(sizes) > 1:
                sizes = [sizes[0] * sizes[1], *sizes[2:]]
            units = draw(st.integers(0, 2))
            for _ in range(units):
                sizes.insert(draw(st.integers(0, len(sizes))), 1)
            x = x.reshape(sizes or [1])
    return shape, x


@settings(max_examples=300, deadline=None)
@given(_chains())
def test_every_form_found_moves_the_elements_as_the_chain(chain: tuple) -> None:
    shape, mapped = chain
    forms = element_forms(shape, mapped)
    source = np.arange(mapped.size).reshape(shape)
    for form in forms:
        assert np.array_equal(_apply(source, form.steps), mapped), form
    assert [len(f.steps) for f in forms] == sorted(len(f.steps) for f in forms)
    if np.array_equal(mapped.reshape(-1), np.arange(mapped.size)):
        assert len(forms[0].steps) <= 1  # the elements stay in order: a Reshape at most


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, list[tuple[str, list[int]]], np.ndarray]:
    """A rank, a run of Transpose/Squeeze/Unsqueeze steps, and its result on a tensor whose
    dims of size 1 are the ones the steps may squeeze."""
    shape = draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=4))
    x = np.arange(int(np.prod(shape))).reshape(shape)
    steps: list[tuple[str, list[int]]] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["Transpose", "Squeeze", "Unsqueeze"]))
        if kind == "Transpose":
            perm = list(draw(st.permutations(range(x.ndim))))
            x = np.transpose(x, perm)
            steps.append((kind, perm))
        elif kind == "Unsqueeze":
            axis = draw(st.integers(-(x.ndim + 1), x.ndim))
            x = np.expand_dims(x, axis)
            steps.append((kind, [axis]))
        else:
            units = [a for a, d in enumerate(x.shape) if d == 1]
            if units:
                axis = draw(st.sampled_from(units))
                x = np.squeeze(x, axis)
                steps.append((kind, [axis]))
    return len(shape), steps, x


@settings(max_examples=300, deadline=None)
@given(_runs())
def test_the_label_form_of_a_run_is_the_run(run: tuple) -> None:
    rank, steps, expected = run
    form = compose_labels(rank, steps)
    assert form is not None
    shape = _input_shape(rank, expected, steps)
    assert shape is not None
    x = np.arange(expected.size).reshape(shape)
    if form.squeeze:
        x = np.squeeze(x, form.squeeze)
    if form.perm is not None:
        x = np.transpose(x, form.perm)
    for axis in form.unsqueeze:
        x = np.expand_dims(x, axis)
    assert np.array_equal(x, expected)
    assert form.ops <= min(len(steps), 3)


def _input_shape(rank: int, expected: np.ndarray, steps: list) -> tuple[int, ...] | None:
    """The shape the run started from: undo the steps on the output's shape."""
    shape = list(expected.shape)
    for kind, values in reversed(steps):
        if kind == "Transpose":
            inverse = [0] * len(values)
            for position, axis in enumerate(values):
                inverse[axis] = position
            shape = [shape[i] for i in inverse]
        elif kind == "Unsqueeze":
            axis = values[0] + len(shape) if values[0] < 0 else values[0]
            del shape[axis]
        else:
            axis = values[0] + len(shape) + 1 if values[0] < 0 else values[0]
            shape.insert(axis, 1)
    return tuple(shape) if len(shape) == rank else None

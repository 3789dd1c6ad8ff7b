"""``synthesize``: walk the model on made-up data until a walk gets through, and report it.

Each walk (``feeds.walk``) starts from scratch with what the earlier ones learnt
(``feeds.state.Attempt``): a ``Retry`` it returns says which output count or image size to
change; a walk that fails on a guessed generic shape is tried with the next one. The first
error is the one reported when no walk gets through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

from graphtools.analysis.input_shapes import GENERIC_SHAPES, IMAGE_SIZES
from graphtools.errors import (
    GraphToolsError,
    InvalidArgumentError,
    InvalidNetError,
    refuse_unknown_inputs,
)
from graphtools.feeds.report import Synthesis, guessed_note
from graphtools.feeds.state import Attempt, Retry, WalkState
from graphtools.feeds.walk import collect_outputs, feed_data, run_init, run_predict
from graphtools.ir import Model

__all__ = ["synthesize", "without_init_ops"]

_RETRIES = 6
"""Walks started again for output counts and generic shapes (image sizes come on top)."""


def synthesize(
    model: Model,
    shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    values: Mapping[str, Any] | None = None,
    seed: int = 0,
    random_params: bool | None = None,
    outputs: Sequence[str] | None = None,
) -> Synthesis:
    """Feed ``model`` made-up data, run it once, and say what was made.

    Args:
        model: the pair (its init_net runs first, op by op).
        shapes: shapes of data inputs (``--shapes``); others are guessed.
        values: arrays to feed as they are (a saved input file).
        seed: seed of every random value.
        random_params: make up parameters nothing provides: ``None`` (default) for a
            predict_net without an init_net and for the outputs of init_net ops that cannot
            run, ``True`` always, ``False`` never (an init_net op that cannot run then raises).
        outputs: the outputs to return (default: the declared external outputs).

    Returns:
        A ``Synthesis``; run the model again on ``feeds`` (without ``skipped_init_ops``) to
        reproduce ``outputs``.

    Raises:
        InvalidNetError: a blob cannot be made (a parameter when ``random_params`` is off).
        UnsupportedOpError / ExecutionError: as ``run_op``; the note names guessed shapes.
    """
    _check_inputs(model, shapes or {}, values or {})
    attempt = Attempt()
    first: GraphToolsError | None = None

    def walk() -> WalkState:
        return WalkState(model, shapes or {}, values or {}, seed, random_params, attempt)

    for _ in range(_RETRIES + len(IMAGE_SIZES)):
        state = walk()
        try:
            outcome = _finish(state, model, outputs)
        except GraphToolsError as exc:
            first = first or exc
            untried = [n for n, i in state.generic_made.items() if i + 1 < len(GENERIC_SHAPES)]
            if not untried:
                raise first from None
            attempt.generic[untried[0]] = state.generic_made[untried[0]] + 1
            continue
        if isinstance(outcome, Synthesis):
            return outcome
        attempt.learn(outcome)
    try:
        outcome = _finish(walk(), model, outputs)
    except GraphToolsError:
        if first is not None:
            raise first from None
        raise
    if isinstance(outcome, Retry):
        if first is not None:
            raise first
        raise InvalidNetError(
            f"made-up data never fit the model in {_RETRIES + len(IMAGE_SIZES) + 1} walks "
            f"(the last: {_asked(outcome)}); give the input shapes with --shapes"
        )
    return outcome


def _check_inputs(
    model: Model, shapes: Mapping[str, Sequence[int]], values: Mapping[str, Any]
) -> None:
    """Refuse a shape or values for a blob the predict_net does not take in (a misspelt
    input would otherwise be guessed silently, and its values fed to nothing) and a shape that
    is not sizes."""
    from graphtools.analysis.input_shapes import first_readers

    net = model.predict_net
    inputs = net.external_input_set() | first_readers(net).keys()
    given = (("a shape is", shapes), ("values are", values))
    refuse_unknown_inputs(given, inputs, "the predict_net")
    for name, shape in shapes.items():
        if not all(isinstance(d, Integral) and d >= 0 for d in shape):
            raise InvalidArgumentError(
                f"the shape given for {name!r} is {list(shape)}: give sizes (0 or more)"
            )


def _asked(retry: Retry) -> str:
    if retry.image is not None:
        return f"the guessed image {retry.image[0]!r} needs another size"
    return f"made-up layer op #{retry.layer} needs {retry.count} outputs"


def _finish(state: WalkState, model: Model, outputs: Sequence[str] | None) -> Synthesis | Retry:
    """One walk: the init_net, the data, the predict_net; its report, or its ``Retry``."""
    run_init(state)
    feed_data(state)
    try:
        retry = run_predict(state)
    except GraphToolsError as exc:
        note = guessed_note(state.result.inputs)
        if note is not None:
            exc.add_note(note)
        raise
    if retry is not None:
        return retry
    collect_outputs(state, list(model.predict_net.external_outputs) if outputs is None else outputs)
    return state.result


def without_init_ops(model: Model, indices: Sequence[int]) -> Model:
    """A copy of ``model`` whose init_net lacks the ops at ``indices``."""
    copy = model.copy()
    if copy.init_net is not None and indices:
        copy.init_net.remove_ops(indices)
    return copy

"""Whether an exported model that declares a free batch runs at another batch size.

``export-onnx --dynamic-batch`` writes the batch dim of the graph inputs as a symbol (dim 0;
dim 1 of a recurrent net's time-major input); a Caffe2 net may still pin the batch it was
exported at (a ``Reshape`` to ``[1, ...]``), and the declared interface would then promise
what the model cannot do. ``check_free_batch`` runs the model with onnxruntime on the feeds
it was exported with, on a second sample, and on both stacked along the symbolic dim: the
model must run at batch 2 when it runs at batch 1, and every output with a symbolic dim must
hold as many rows on it as the two runs together. (Row values are not compared: a free dim
may also be a sequence's length, where rows legitimately depend on each other.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphtools.errors import GraphToolsError, PreconditionError
from graphtools.ir import Model
from graphtools.onnx.runtime import graph_inputs, run_model, seeded_inputs

__all__ = ["check_free_batch"]


def _free_axis(shape: tuple[Any, ...] | None) -> int | None:
    """Where a declared shape's batch is: its first symbolic dim (``None`` when none is)."""
    return next((axis for axis, dim in enumerate(shape or ()) if isinstance(dim, str)), None)


def _free_batch(model: Model) -> dict[str, int]:
    """The graph inputs declaring a symbolic dim, with the axis of the first."""
    found = {}
    for spec in graph_inputs(model):
        axis = _free_axis(None if spec.type is None else spec.type.shape)
        if axis is not None:
            found[spec.name] = axis
    return found


def _second_sample(value: np.ndarray) -> np.ndarray:
    """Another sample like ``value``: floats moved and scaled (a made-up image info stays
    positive), other types as they are (indices must stay valid)."""
    if value.dtype.kind == "f":
        return (value * 0.5 + 0.25).astype(value.dtype)
    return value.copy()


def check_free_batch(model: Model, feeds: Mapping[str, Any] | None = None) -> None:
    """Refuse ``model`` (ONNX dialect) when its free batch is not free (see the module
    docstring). ``feeds``: values at the exported batch (made up from the declared types
    when not given). Nothing is checked when the model does not run on them either.

    Raises:
        PreconditionError: naming the batch size tried and what failed.
    """
    batched = _free_batch(model)
    if not batched:
        return
    if feeds is None:
        feeds, _ = seeded_inputs(model, {}, seed=0)
    first = {name: np.asarray(value) for name, value in feeds.items()}
    second = {n: _second_sample(v) if n in batched else v for n, v in first.items()}
    both = {
        n: np.concatenate([v, second[n]], axis=batched[n]) if n in batched else v
        for n, v in first.items()
    }
    try:
        one, other = run_model(model, first), run_model(model, second)
    except GraphToolsError:
        return  # the feeds do not suit the model: nothing to compare with
    sizes = {name: np.shape(v)[batched[name]] for name, v in first.items() if name in batched}
    try:
        stacked = run_model(model, both)
    except GraphToolsError as exc:
        raise PreconditionError(
            f"the model declares a free batch ({', '.join(batched)}) but fails when fed "
            f"twice the rows it was exported with ({sizes}): {exc}"
        ) from exc
    declared = model.predict_net.types
    for name, value in stacked.items():
        value_type = declared.get(name)
        if value_type is None:
            continue
        axis = _free_axis(value_type.shape)
        if axis is None or np.ndim(one[name]) <= axis:
            continue
        want = np.shape(one[name])[axis] + np.shape(other[name])[axis]
        if np.ndim(value) <= axis or np.shape(value)[axis] != want:
            got = np.shape(value)[axis : axis + 1] or "no"
            raise PreconditionError(
                f"the model declares a free batch, but output {name!r} (declared "
                f"{list(value_type.shape or ())}) has {got} rows on axis {axis} for twice "
                f"the input rows, not {want}: something in the net pins the batch"
            )

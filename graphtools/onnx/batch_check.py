"""Whether an exported model that declares a free batch runs at another batch size.

``export-onnx --dynamic-batch`` writes dim 0 of the graph inputs as a symbol; a Caffe2 net
may still pin the batch it was exported at (a ``Reshape`` to ``[1, ...]``), and the declared
interface would then promise what the model cannot do. ``check_free_batch`` runs the model
with onnxruntime on the feeds it was exported with, on a second sample, and on both stacked
along dim 0: the model must run at batch 2 when it runs at batch 1, and every output whose
dim 0 is symbolic must hold as many rows as the two runs together. (Row values are not
compared: a free dim 0 is also a sequence's length, where rows legitimately depend on each
other.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphtools.errors import GraphToolsError, PreconditionError
from graphtools.ir import Model
from graphtools.onnx.runtime import graph_inputs, run_model, seeded_inputs

__all__ = ["check_free_batch"]


def _free_batch(model: Model) -> list[str]:
    """The graph inputs whose declared dim 0 is a symbol."""
    return [
        spec.name
        for spec in graph_inputs(model)
        if spec.type is not None and spec.type.shape and isinstance(spec.type.shape[0], str)
    ]


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
        n: np.concatenate([v, second[n]], axis=0) if n in batched else v for n, v in first.items()
    }
    try:
        one, other = run_model(model, first), run_model(model, second)
    except GraphToolsError:
        return  # the feeds do not suit the model: nothing to compare with
    sizes = {name: np.shape(v)[0] for name, v in first.items() if name in batched}
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
        if value_type is None or not value_type.shape or not isinstance(value_type.shape[0], str):
            continue
        want = np.shape(one[name])[0] + np.shape(other[name])[0] if np.ndim(one[name]) else None
        if want is not None and (np.ndim(value) == 0 or np.shape(value)[0] != want):
            raise PreconditionError(
                f"the model declares a free batch, but output {name!r} (declared "
                f"{list(value_type.shape)}) has {np.shape(value)[:1] or 'no'} rows for twice "
                f"the input rows, not {want}: something in the net pins the batch"
            )

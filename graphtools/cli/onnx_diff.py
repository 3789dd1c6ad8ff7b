"""What ``diff`` adds for ONNX models: initializers count as the parameters of a pair do.

``diff_models`` compares the graphs (ops matched by what they compute); an ONNX model's
parameters are its main graph's initializers, so those only one side holds are listed as
``params_removed``/``params_added``, and one whose data or type changed under the same name
as ``params_changed``.
"""

from __future__ import annotations

from graphtools.analysis.model_diff import ModelDiff
from graphtools.ir import Model

__all__ = ["add_initializer_changes"]


def add_initializer_changes(change: ModelDiff, before: Model, after: Model) -> None:
    """Record in ``change`` the initializers of the main graph that differ."""
    first = before.predict_net.initializers
    second = after.predict_net.initializers
    removed = [name for name in first if name not in second]
    added = [name for name in second if name not in first]
    changed = [
        name
        for name, tensor in first.items()
        if name in second and not tensor.same_as(second[name])
    ]
    change.params_removed.extend(removed)
    change.params_added.extend(added)
    change.params_changed.extend(changed)

"""Cut a sub-net out of a Caffe2 pair: the ops computing the outputs from the inputs, the
init_net fills of the parameters they read, and the types of the new inputs.

``extract_pair(model, inputs, outputs, shapes)`` plans the cut with
``analysis.subnet.find_sub_net`` (which refuses, by name, outputs the inputs do not
determine) and builds a new pair: the predict_net keeps the ops in their order with their
arguments, devices and nested nets, declares the inputs and the parameters as external inputs
and the outputs as external outputs; the init_net keeps the ops filling those parameters. The
new inputs' types come from ``analysis.shapes`` run on the whole model with ``shapes`` (the
whole model's input shapes). For a predict_net without its init_net, the parameters are the
blobs no op writes whose first read is at a parameter position (input 1 or later), nested
nets included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graphtools.analysis.shapes import ShapeInfo, TensorType, TypeLike, infer_model_shapes
from graphtools.analysis.subnet import SubNet, find_sub_net
from graphtools.errors import GraphToolsError
from graphtools.ir import Model, Net

__all__ = ["ExtractedPair", "extract_pair"]


@dataclass
class ExtractedPair:
    """A cut of a pair.

    Attributes:
        model: the new pair (a new model; the source is not changed).
        plan: which ops of the source's predict_net it kept, and why (``SubNet``).
        input_types: the type of each new input in the source model (dims may be unknown).
        why_unknown: for inputs whose type is incomplete, why.
    """

    model: Model
    plan: SubNet
    input_types: dict[str, TensorType] = field(default_factory=dict)
    why_unknown: dict[str, str] = field(default_factory=dict)


def _params(model: Model) -> set[str]:
    """What the init_net fills; without one, the blobs no op writes (nested nets included)
    whose first read is at a parameter position (input 1 or later)."""
    if model.init_net is not None:
        return {name for op in model.init_net for name in op.outputs}
    first: dict[str, int] = {}
    written: set[str] = set()

    def visit(net: Net) -> None:
        for op in net:
            for position, name in enumerate(op.inputs):
                first.setdefault(name, position)
            written.update(op.outputs)
            for _, nested in op.nested_nets():
                visit(nested)

    visit(model.predict_net)
    return {name for name, position in first.items() if position and name not in written}


def extract_pair(
    model: Model,
    inputs: Sequence[str],
    outputs: Sequence[str],
    shapes: Mapping[str, TypeLike] | None = None,
) -> ExtractedPair:
    """The sub-pair of ``model`` computing ``outputs`` from ``inputs`` (module docstring).

    Args:
        model: the source pair (not changed).
        inputs: blobs the sub-net starts from (their value after the last op writing them).
        outputs: blobs it computes (their last value).
        shapes: types or shapes of the source's inputs, to type the new inputs.

    Raises:
        SubNetError: an unknown name, an output the inputs do not determine, or a cut that
            would run an op twice.
    """
    plan = find_sub_net(model.predict_net, inputs, outputs, _params(model) - set(inputs))
    copy = model.copy()  # the nets' headers (name, type, device, arguments) come along
    new = copy.predict_net
    kept = set(plan.ops)
    new.remove_ops([i for i in range(len(new)) if i not in kept])
    new.set_external_inputs([*plan.inputs, *plan.params])
    new.set_external_outputs(plan.outputs)
    init = copy.init_net
    if init is not None:
        wanted = set(plan.params)
        init.remove_ops([i for i, op in enumerate(init) if not wanted.intersection(op.outputs)])
        if init.external_outputs:
            init.set_external_outputs([n for op in init for n in op.outputs])
    # written in the formats the source was loaded in, as run writes its result
    result = ExtractedPair(Model(new, init, text=model.text, init_text=model.init_text), plan)
    info = _types(model, shapes or {})
    for name in plan.inputs:
        blob = (name, plan.input_versions[name])
        result.input_types[name] = info.types.get(blob, TensorType())
        if blob in info.unknown or blob not in info.types:
            result.why_unknown[name] = info.unknown.get(
                blob, "the shape analysis stopped before it"
            )
    return result


def _types(model: Model, shapes: Mapping[str, TypeLike]) -> ShapeInfo:
    try:
        return infer_model_shapes(model, shapes)
    except GraphToolsError:  # the types are a help: an unknown type is said so
        return ShapeInfo()

"""What an export needs besides the pair: the data inputs' types and, for a pair without its
weights, parameters - made the way ``graphtools verify`` makes them (``graphtools.feeds``).

``prepare_export`` runs ``synthesize`` once on the pair: input shapes from ``shapes`` (else
guessed from how the net reads each input), an init_net placeholder of a data input replaced by
a graph input, Int8 inputs with a scale and zero point, parameters made up when allowed. The
pair is then made whole (ops that cannot run here, a ``Load`` from a missing database, left
out; made-up parameters written by its init_net), and ``value_info``/``input_quantization`` for
``export_onnx`` come from the feeds. Everything made is in the ``Synthesis`` to be reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphtools.analysis.liveness import unread_outputs
from graphtools.convert.caffe2_to_onnx.nn import net_in_test_mode
from graphtools.convert.dtypes import onnx_dtype_of_numpy
from graphtools.convert.fills import fill_op, int8_fill_op
from graphtools.errors import InvalidNetError
from graphtools.executor import Int8Tensor
from graphtools.feeds import Synthesis, synthesize
from graphtools.ir import Model, Net
from graphtools.printer import describe_net

__all__ = ["PreparedExport", "feed_types", "prepare_export", "with_made_up_params"]

ValueInfo = dict[str, tuple[int, list[int]]]
Quantization = dict[str, tuple[float, int]]


@dataclass(frozen=True)
class PreparedExport:
    """A pair ready to export and what it is fed.

    Attributes:
        model: the pair made whole (``with_made_up_params``).
        feeds: the data inputs made, by name (``Int8Tensor`` for Int8 inputs).
        value_info: ``{input: (ONNX elem type, shape)}`` for ``export_onnx``.
        quantization: ``{input: (scale, zero point)}`` of the Int8 inputs.
        synthesis: what ``synthesize`` made and why (for the report).
    """

    model: Model
    feeds: dict[str, Any]
    value_info: ValueInfo
    quantization: Quantization
    synthesis: Synthesis


def feed_types(feeds: Mapping[str, Any]) -> tuple[ValueInfo, Quantization]:
    """``value_info`` and ``input_quantization`` for ``export_onnx`` from feeds (an Int8 feed
    is its uint8 values with its scale and zero point)."""
    value_info: ValueInfo = {}
    quantization: Quantization = {}
    for name, value in feeds.items():
        array = value.values if isinstance(value, Int8Tensor) else np.asarray(value)
        value_info[name] = (onnx_dtype_of_numpy(array.dtype), list(array.shape))
        if isinstance(value, Int8Tensor):
            quantization[name] = (float(value.scale), int(value.zero_point))
    return value_info, quantization


def with_made_up_params(model: Model, synthesis: Synthesis) -> Model:
    """``model`` as ``synthesis`` ran it: the ops that could not run here left out, and the
    parameters it made up written by the init_net (replacing the fill of one it replaced)."""
    pair = model.copy()
    for label, net in (("init_net", pair.init_net), ("predict_net", pair.predict_net)):
        skipped = [s.index for s in synthesis.skipped_ops if s.net == label]
        if net is not None and skipped:
            net.remove_ops(skipped)
    init = pair.init_net if pair.init_net is not None else Net(name="init")
    fills = {}
    for name in synthesis.params:
        value = synthesis.feeds[name]
        if isinstance(value, Int8Tensor):
            fills[name] = int8_fill_op(name, value.values, value.scale, value.zero_point)
        else:
            fills[name] = fill_op(name, np.asarray(value))
    with init.edit() as edit:
        for index, op in enumerate(init):
            if len(op.outputs) == 1 and op.outputs[0] in fills:
                edit.set_op(index, fills.pop(op.outputs[0]))
        edit.insert(len(init), list(fills.values()))
    return Model(pair.predict_net, init)


def prepare_export(
    model: Model,
    shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    seed: int = 0,
    random_params: bool | None = None,
    outputs: Sequence[str] | None = None,
    test_mode: bool = False,
    values: Mapping[str, Any] | None = None,
) -> PreparedExport:
    """Make up what exporting ``model`` needs, as ``graphtools verify`` does (see the module
    docstring); ``random_params`` as ``synthesize`` takes it (``None``: only for a predict_net
    without an init_net); ``test_mode``: the pair's inference form (``is_test=1`` where an op
    has it, as ``export_onnx(test_mode=True)`` exports it); ``values``: input arrays to feed
    as they are (``synthesize``'s), the others made up.

    The prepared model declares the outputs to export: ``outputs``, else those the
    predict_net declares, else the blobs it writes and never reads (as ``export-onnx``).

    Raises:
        InvalidNetError: a parameter nothing provides while ``random_params`` is false, or an
            input whose shape cannot be guessed (from ``synthesize``); an output the
            predict_net never writes.
    """
    if test_mode:
        model = Model(net_in_test_mode(model.predict_net), model.init_net)
    model = _with_outputs(model, outputs)
    synthesis = synthesize(
        model, shapes, values=values, seed=seed, random_params=random_params, outputs=outputs
    )
    feeds = {made.name: synthesis.feeds[made.name] for made in synthesis.inputs}
    value_info, quantization = feed_types(feeds)
    return PreparedExport(
        with_made_up_params(model, synthesis), feeds, value_info, quantization, synthesis
    )


def _with_outputs(model: Model, outputs: Sequence[str] | None) -> Model:
    """``model``, or a copy whose predict_net declares the outputs to export (see
    ``prepare_export``)."""
    net = model.predict_net
    declared = list(net.external_outputs)
    wanted = list(outputs) if outputs else declared or unread_outputs(net)
    if wanted == declared:
        return model
    written = {name for op in net for name in op.outputs}
    for name in wanted:
        if name not in written:
            raise InvalidNetError(
                f"output {name!r} is not a blob {describe_net(net, 'predict_net')} writes"
            )
    copy = net.copy()
    with copy.edit() as edit:
        edit.set_external_outputs(wanted)
    return Model(copy, model.init_net)

"""Shared check of the ONNX export tests: a pair exported, validated with the ONNX checker, run
by onnxruntime against our executor blob by blob, and imported back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from graphtools.executor import Int8Tensor
from graphtools.ir import Model, Net, Op
from graphtools.onnx import compare_blobs_with_onnxruntime, export_onnx, import_onnx
from graphtools.onnx.export_feeds import feed_types
from graphtools.onnx.importer import fill_message, int8_fill_message
from graphtools.serde.codec import op_from_proto
from graphtools.testing import compare_models


def pair(ops: list[Op], inputs: list[str], outputs: list[str], params: Mapping[str, Any]) -> Model:
    """A pair whose init_net fills ``params`` (Int8Tensor values with Int8 fills)."""
    fills = []
    for name, value in params.items():
        if isinstance(value, Int8Tensor):
            msg = int8_fill_message(name, value.values, value.scale, value.zero_point)
        else:
            msg = fill_message(name, np.asarray(value), name)
        fills.append(op_from_proto(msg))
    return Model(Net(ops, [*inputs, *params], outputs, name="net"), Net(fills, name="init"))


def round_trip(
    model: Model,
    feeds: Mapping[str, Any],
    *,
    opset: int | None = None,
    dynamic_batch: bool = False,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    int8_steps: int = 0,
    back_rtol: float = 1e-5,
) -> onnx.ModelProto:
    """Export ``model``, check it, compare every blob with onnxruntime, import it back and
    compare the outputs of the imported pair with the original's (by position: the export
    renames an output a branch rewrites); returns the export."""
    value_info, quantization = feed_types(feeds)
    exported = export_onnx(
        model,
        opset=opset,
        value_info=value_info,
        dynamic_batch=dynamic_batch,
        input_quantization=quantization,
    )
    onnx.checker.check_model(exported, full_check=True)
    report = compare_blobs_with_onnxruntime(
        exported, model, feeds, rtol=rtol, atol=atol, int8_steps=int8_steps
    )
    assert report.ok, (report.first_divergence, [d for d in report.outputs if not d.ok])
    back = import_onnx(exported)
    diffs = compare_models(model, back, feeds, rtol=back_rtol, atol=back_rtol)
    assert all(d.ok for d in diffs), diffs
    return exported

"""What an export can be asked for (``ExportOptions``) and its defaults: a module of its own,
light to import, so the ``convert-to-onnx`` pass can name its options without loading the
converters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["BATCH_DIM", "DEFAULT_OPSET", "MIN_EXPORT_OPSET", "RECURRENT_FORMS", "ExportOptions"]

DEFAULT_OPSET = 17
"""Opset written when none is asked for: supported by onnxruntime since 1.11."""
MIN_EXPORT_OPSET = 11
"""The oldest opset the exporter writes (optional Gemm C and Clip/Pad operands start at 11)."""
BATCH_DIM = "N"
"""Name of the free batch dimension written with ``dynamic_batch=True``."""
RECURRENT_FORMS = ("loop", "scan")
"""How a RecurrentNetwork op may be written: an ONNX ``Loop`` or a ``Scan``."""


@dataclass(frozen=True)
class ExportOptions:
    """How to export (the options of the ``convert-to-onnx`` pass).

    Attributes:
        opset: default-domain opset to write, from ``MIN_EXPORT_OPSET`` to the newest the
            installed onnx knows.
        ir_version: IR version to write; ``None``: the lowest that carries ``opset``.
        dynamic_batch: write the batch of the graph inputs (dim 0; dim 1 of a 3-D input a
            RecurrentNetwork reads time-major) and what follows from it as free
            dimensions: ``N`` for the first input, ``N_<input>`` for each other one.
        recurrent: ``"loop"`` writes each RecurrentNetwork op as an ONNX ``Loop``, ``"scan"``
            as a ``Scan``.
        test_mode: export a training net's inference form (``is_test=1`` on the ops that
            have it: ``Dropout``, ``SpatialBN``), which are refused in training mode otherwise.
        input_quantization: ``{input: (scale, zero point)}`` of the graph inputs that are Int8
            blobs (fed as their uint8 values; their declared type is UINT8).
    """

    opset: int = DEFAULT_OPSET
    ir_version: int | None = None
    dynamic_batch: bool = False
    recurrent: str = "loop"
    test_mode: bool = False
    input_quantization: Mapping[str, tuple[float, int]] = field(default_factory=dict)

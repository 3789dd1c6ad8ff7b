"""What both directions of the conversion agree on: the ``caffe2`` domain of the model-local
functions standing for Caffe2 ops and how their names and attributes are spelled, and the
newest opset the installed onnx package knows."""

from __future__ import annotations

import onnx

__all__ = ["CAFFE2_DOMAIN", "DERIVED_PREFIX", "PROBE_KEEPS", "VARIANT_SEPARATOR", "max_opset"]

CAFFE2_DOMAIN = "caffe2"
"""Domain of the model-local functions standing for Caffe2 ops."""
DERIVED_PREFIX = "_"
"""Prefix of the call attributes the export derives (not Caffe2 arguments)."""
VARIANT_SEPARATOR = "__"
"""Separates a Caffe2 op type from the form in a function's name (``SparseToDense__infer``)."""
PROBE_KEEPS = 1024
"""Initializers up to this many elements stay constants in the model ONNX shape inference reads
(data propagation follows shape arithmetic through them); bigger ones are typed inputs there, so
no weight is encoded for it."""


def max_opset() -> int:
    """The newest default-domain opset the installed onnx package knows."""
    return int(onnx.defs.onnx_opset_version())

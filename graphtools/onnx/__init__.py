"""The ONNX bridge: ONNX model -> Caffe2 pair (``import_onnx``), pair -> ONNX (``export_onnx``),
and the numeric check of one against the other with onnxruntime (``compare_with_onnxruntime``,
``compare_blobs_with_onnxruntime``); ``prepare_export`` makes the inputs and, on request, the
parameters an export and its check need, as ``graphtools verify`` does.
"""

from graphtools.onnx.compare import (
    BlobComparison,
    Divergence,
    compare_blobs_with_onnxruntime,
    compare_with_onnxruntime,
    run_onnxruntime,
)
from graphtools.onnx.export_feeds import PreparedExport, prepare_export
from graphtools.onnx.exporter import (
    BATCH_DIM,
    DEFAULT_OPSET,
    MIN_EXPORT_OPSET,
    export_onnx,
    ir_version_for,
)
from graphtools.onnx.external import load_onnx, save_onnx
from graphtools.onnx.importer import MIN_OPSET, import_onnx, max_opset, supported_ops

__all__ = [
    "BATCH_DIM",
    "DEFAULT_OPSET",
    "MIN_EXPORT_OPSET",
    "MIN_OPSET",
    "BlobComparison",
    "Divergence",
    "PreparedExport",
    "compare_blobs_with_onnxruntime",
    "compare_with_onnxruntime",
    "export_onnx",
    "import_onnx",
    "ir_version_for",
    "load_onnx",
    "max_opset",
    "prepare_export",
    "run_onnxruntime",
    "save_onnx",
    "supported_ops",
]

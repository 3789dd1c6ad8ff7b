"""The ONNX bridge: ONNX model -> Caffe2 pair (``import_onnx``), pair -> ONNX (``export_onnx``),
and the numeric check of one against the other with onnxruntime (``compare_with_onnxruntime``,
``compare_blobs_with_onnxruntime``); ``prepare_export`` makes the inputs and, on request, the
parameters an export and its check need, as ``graphtools verify`` does.
"""

from graphtools.convert.caffe2_to_onnx.model import (
    BATCH_DIM,
    DEFAULT_OPSET,
    MIN_EXPORT_OPSET,
    ir_version_for,
)
from graphtools.convert.conventions import max_opset
from graphtools.convert.onnx_to_caffe2.model import MIN_OPSET, supported_ops
from graphtools.onnx.compare import (
    BlobComparison,
    Divergence,
    compare_blobs_with_onnxruntime,
    compare_with_onnxruntime,
    run_onnxruntime,
)
from graphtools.onnx.convert import export_onnx, import_onnx
from graphtools.onnx.export_feeds import PreparedExport, prepare_export
from graphtools.onnx.external import load_onnx, save_onnx

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

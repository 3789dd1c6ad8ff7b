"""The ONNX bridge: ONNX model -> Caffe2 pair (``import_onnx``), pair -> ONNX (``export_onnx``),
and the numeric check of one against the other with onnxruntime.
"""

from graphtools.onnx.external import load_onnx, save_onnx
from graphtools.onnx.importer import MIN_OPSET, import_onnx, max_opset
from graphtools.onnx.registry import supported_ops

__all__ = [
    "MIN_OPSET",
    "import_onnx",
    "load_onnx",
    "max_opset",
    "save_onnx",
    "supported_ops",
]

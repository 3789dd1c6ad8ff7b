"""The conversions as users call them: ``import_onnx`` (an ONNX model -> a Caffe2 pair) and
``export_onnx`` (a pair -> an ONNX ``ModelProto``), over ``graphtools.convert``."""

from __future__ import annotations

from pathlib import Path

from graphtools.convert.caffe2_to_onnx.model import export_onnx
from graphtools.convert.onnx_to_caffe2.model import import_model_proto
from graphtools.ir import Model
from graphtools.onnx.external import ModelSource, load_onnx

__all__ = ["export_onnx", "import_onnx"]


def import_onnx(model_or_path: ModelSource, *, base_dir: str | Path | None = None) -> Model:
    """Convert an ONNX model (a ModelProto, a path or the file's bytes; external data is
    loaded beside the file or from ``base_dir``) into a Caffe2 init_net/predict_net pair."""
    return import_model_proto(load_onnx(model_or_path, base_dir=base_dir))

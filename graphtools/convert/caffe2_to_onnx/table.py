"""The whole exporter table: importing this module imports every per-op module, whose
``@exporter`` functions fill ``EXPORTERS`` (Caffe2 op type -> the function emitting its ONNX
ops)."""

from __future__ import annotations

from graphtools.convert.caffe2_to_onnx import (  # noqa: F401  (importing registers them)
    aten,
    control,
    detection,
    elementwise,
    image,
    int8,
    math,
    nn,
    normalize,
    random,
    recurrent,
    sparse,
    tensor,
)
from graphtools.convert.caffe2_to_onnx.context import EXPORTERS

__all__ = ["EXPORTERS"]

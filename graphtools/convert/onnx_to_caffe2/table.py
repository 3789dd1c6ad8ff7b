"""The whole converter table: importing this module imports every per-op module, whose
``@converter`` functions fill ``CONVERTERS`` (ONNX op type -> how it becomes Caffe2 ops)."""

from __future__ import annotations

from graphtools.convert.onnx_to_caffe2 import (  # noqa: F401  (importing registers them)
    control,
    elementwise,
    math,
    nn,
    random,
    recurrent,
    tensor,
)
from graphtools.convert.onnx_to_caffe2.registry import CONVERTERS

__all__ = ["CONVERTERS"]

"""How made-up values are held: a blob's array whatever its kind, Int8 quantization."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphtools.executor import Int8Tensor

__all__ = ["as_array", "quantized"]


def as_array(value: Any) -> np.ndarray:
    """``value`` as a numpy array (an ``Int8Tensor`` dequantized)."""
    return value.dequantize() if isinstance(value, Int8Tensor) else np.asarray(value)


def quantized(value: np.ndarray) -> Int8Tensor:
    """``value`` quantized to uint8 around zero point 128."""
    scale = float(np.abs(value).max()) / 127 or 1.0
    return Int8Tensor(np.clip(np.round(value / scale) + 128, 0, 255).astype(np.uint8), scale, 128)

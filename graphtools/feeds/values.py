"""How made-up values are held: a blob's array whatever its kind, Int8 quantization, and the
most values one made-up blob may hold."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from graphtools.errors import MadeUpDataTooLargeError
from graphtools.executor import Int8Tensor

__all__ = ["MAX_MADE_VALUES", "as_array", "check_size", "quantized"]

MAX_MADE_VALUES = 1 << 28
"""Most values one made-up blob may hold (1 GiB as float32; numpy draws them as float64
first). A bigger one comes from shapes gone wrong (an argument that flattens a whole
sequence, a guess that does not fit), and would only exhaust the memory."""


def check_size(name: str, shape: Sequence[int], what: str) -> None:
    """Refuse to make up ``name`` (``what`` it is, for the message) with ``shape``.

    Raises:
        MadeUpDataTooLargeError: ``shape`` holds more than ``MAX_MADE_VALUES`` values.
    """
    count = prod(int(d) for d in shape)
    if count <= MAX_MADE_VALUES:
        return
    dims = "x".join(str(int(d)) for d in shape)
    raise MadeUpDataTooLargeError(
        f"made-up {name!r} ({what}) would be {dims} ({count} values, "
        f"{count * 4 / 2**30:.3g} GiB as float32), over the {MAX_MADE_VALUES} values a made-up "
        "blob may hold: the shapes it follows from look wrong (check the arguments of the ops "
        "that lead to it)",
        name=name,
        shape=tuple(int(d) for d in shape),
    )


def as_array(value: Any) -> np.ndarray:
    """``value`` as a numpy array (an ``Int8Tensor`` dequantized)."""
    return value.dequantize() if isinstance(value, Int8Tensor) else np.asarray(value)


def quantized(value: np.ndarray) -> Int8Tensor:
    """``value`` quantized to uint8 around zero point 128, with a float32 scale (what Caffe2's
    Int8 tensors hold)."""
    scale = float(np.float32(float(np.abs(value).max()) / 127 or 1.0))
    return Int8Tensor(np.clip(np.round(value / scale) + 128, 0, 255).astype(np.uint8), scale, 128)

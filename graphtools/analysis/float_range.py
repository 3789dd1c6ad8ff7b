"""Whether a constant that a fusion folds out of two others still holds its values.

Folding ``(x * c1) * c2`` into ``x * (c1 * c2)``, or a scale into a weight, computes the new
constant ahead of time in the model's element type; where the exact result leaves that type's
range (``1e30 * 1e30`` in float32, ``1024 * 1024`` in float16) or falls below its normal
range (``2^-12 * 2^-13`` in float16), the folded model gives ``inf`` or ``0`` where the
original's rounding at each step gave a number. The caller works the exact value out in
float64 (a check, not the model's arithmetic, which onnxruntime computes) and asks here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fits_float_type"]


def fits_float_type(exact: np.ndarray, dtype: np.dtype | type) -> bool:
    """Whether every finite value of ``exact`` (float64) is finite in ``dtype`` and, unless
    it is zero, at least the smallest normal number of ``dtype``; integer types always fit
    (their arithmetic wraps alike in any order)."""
    kind = np.dtype(dtype)
    if kind.kind != "f":
        return True
    info = np.finfo(kind)
    magnitude = np.abs(exact[np.isfinite(exact)])
    if magnitude.size == 0:
        return True
    return bool(
        magnitude.max() <= info.max and not np.any((magnitude > 0) & (magnitude < info.tiny))
    )

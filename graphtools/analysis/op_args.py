"""Caffe2's argument conventions: storage order, axes, conv/pool geometry (kernels, shapes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphtools.ir import Op

# caffe2.proto LegacyPadding values.
NOTSET, VALID, SAME, CAFFE_LEGACY_POOLING = 0, 1, 2, 3


def order(op: Op) -> str:
    """The op's storage order, ``"NCHW"`` (Caffe2's default) or ``"NHWC"``."""
    value = op.arg("order", b"NCHW")
    text = value.decode() if isinstance(value, bytes) else str(value)
    text = text.upper()
    if text not in ("NCHW", "NHWC"):
        raise ValueError(f"unknown order {text!r}")
    return text


def canonical_axis(axis: int, ndim: int) -> int:
    """``axis`` made non-negative, checked against ``ndim`` (Caffe2's ``canonical_axis_index``)."""
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def channel_axis(op: Op, ndim: int) -> int:
    """Axis holding channels for the op's order."""
    return ndim - 1 if order(op) == "NHWC" else 1


def to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """View a channels-last array as channels-first (no-op for NCHW)."""
    if layout == "NHWC":
        return np.moveaxis(x, -1, 1)
    return x


def from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """Inverse of ``to_nchw``; returns a contiguous array."""
    if layout == "NHWC":
        return np.ascontiguousarray(np.moveaxis(x, 1, -1))
    return x


def _per_dim(
    op: Op, plural: str, single: str, names: tuple[str, ...], nd: int, default: int
) -> list[int] | None:
    """One value per spatial dim from ``plural`` (list), ``single`` (int) or per-dim names."""
    values = op.arg(plural)
    if values is not None:
        values = [int(v) for v in (values if isinstance(values, tuple) else (values,))]
        if len(values) != nd:
            raise ValueError(f"'{plural}' has {len(values)} values for {nd} spatial dims")
        return values
    value = op.arg(single)
    if value is not None:
        return [int(value)] * nd
    if nd == 2 and any(op.has_arg(name) for name in names):
        return [int(op.arg(name, default)) for name in names]
    return None


@dataclass(frozen=True)
class Geometry:
    """Resolved window geometry of a conv or pooling op over ``nd`` spatial dims."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_head: tuple[int, ...]
    pads_tail: tuple[int, ...]
    out_sizes: tuple[int, ...]


def window_args(op: Op, nd: int) -> tuple[list[int] | None, list[int], list[int], list[int]]:
    """Kernel (``None`` when absent), strides, dilations and pads (heads then tails) of ``op``.

    Accepts every spelling Caffe2 does: ``kernels``/``kernel``/``kernel_h``+``kernel_w``,
    ``strides``/``stride``/``stride_h``+``stride_w``, ``dilations``/``dilation``/
    ``dilation_h``+``dilation_w``, and ``pads`` (all heads, then all tails)/``pad``/
    ``pad_t``+``pad_l``+``pad_b``+``pad_r``.
    """
    kernel = _per_dim(op, "kernels", "kernel", ("kernel_h", "kernel_w"), nd, 0)
    strides = _per_dim(op, "strides", "stride", ("stride_h", "stride_w"), nd, 1) or [1] * nd
    dilations = (
        _per_dim(op, "dilations", "dilation", ("dilation_h", "dilation_w"), nd, 1) or [1] * nd
    )
    pads_arg = op.arg("pads")
    if pads_arg is not None:
        pads = [int(v) for v in (pads_arg if isinstance(pads_arg, tuple) else (pads_arg,))]
        if len(pads) != 2 * nd:
            raise ValueError(f"'pads' has {len(pads)} values for {nd} spatial dims")
    elif op.has_arg("pad"):
        pads = [int(op.arg("pad"))] * (2 * nd)
    elif nd == 2 and any(op.has_arg(n) for n in ("pad_t", "pad_l", "pad_b", "pad_r")):
        pads = [int(op.arg(n, 0)) for n in ("pad_t", "pad_l", "pad_b", "pad_r")]
    else:
        pads = [0] * (2 * nd)
    return kernel, strides, dilations, pads


def _size_and_pad(
    size: int, stride: int, kernel: int, dilation: int, legacy: int, head: int, tail: int
) -> tuple[int, int, int]:
    """Caffe2's ``ConvPoolOpBase::ComputeSizeAndPad`` for one dim: (head, tail, out size)."""
    dkernel = dilation * (kernel - 1) + 1
    if legacy == NOTSET:
        if size + head + tail < dkernel:
            padded = size + head + tail
            raise ValueError(f"window {dkernel} is larger than the padded input {padded}")
        return head, tail, (size + head + tail - dkernel) // stride + 1
    if legacy == VALID:
        return 0, 0, (size - dkernel) // stride + 1
    if legacy == SAME:
        if dilation != 1:
            raise ValueError("dilation is not supported with legacy SAME padding")
        target = (size + stride - 1) // stride
        needed = max((target - 1) * stride + kernel - size, 0)
        head = needed // 2
        return head, needed - head, (size + needed - dkernel) // stride + 1
    if legacy == CAFFE_LEGACY_POOLING:
        out = int(np.ceil((size + 2 * head - kernel) / stride)) + 1
        if head > 0 and (out - 1) * stride >= size + head:
            out -= 1
        standard = (size + 2 * head - kernel) // stride + 1
        return head, head + stride * (out - standard), out
    raise ValueError(f"unknown legacy_pad value {legacy}")


def geometry(
    op: Op,
    spatial: tuple[int, ...],
    kernel_from_weight: tuple[int, ...] | None = None,
    *,
    global_pooling: bool = False,
) -> Geometry:
    """Resolve the window geometry of ``op`` over input spatial sizes ``spatial``."""
    nd = len(spatial)
    kernel, strides, dilations, pads = window_args(op, nd)
    if global_pooling:
        kernel, strides, dilations, pads = list(spatial), [1] * nd, [1] * nd, [0] * (2 * nd)
    if kernel is None:
        if kernel_from_weight is None:
            raise ValueError("no kernel size given (kernel, kernels or kernel_h/kernel_w)")
        kernel = list(kernel_from_weight)
    if kernel_from_weight is not None and tuple(kernel) != tuple(kernel_from_weight):
        raise ValueError(f"kernel {kernel} does not match the filter's {list(kernel_from_weight)}")
    if min(kernel) <= 0 or min(strides) <= 0 or min(dilations) <= 0:
        raise ValueError("kernel, strides and dilations must be positive")
    legacy = int(op.arg("legacy_pad", NOTSET))
    if legacy in (VALID, SAME) and any(pads):
        raise ValueError("explicit pads cannot be combined with legacy_pad VALID or SAME")
    heads, tails, outs = [], [], []
    for i in range(nd):
        head, tail, out = _size_and_pad(
            spatial[i], strides[i], kernel[i], dilations[i], legacy, pads[i], pads[nd + i]
        )
        if out <= 0:
            raise ValueError(f"output size {out} along spatial dim {i} is not positive")
        heads.append(head)
        tails.append(tail)
        outs.append(out)
    return Geometry(
        tuple(kernel), tuple(strides), tuple(dilations), tuple(heads), tuple(tails), tuple(outs)
    )


def windows(x: np.ndarray, geo: Geometry, pad_value: float = 0.0) -> np.ndarray:
    """Sliding windows of an N, C, *spatial array: shape (N, C, *out_sizes, *kernel).

    Pads with ``pad_value``, then strides and dilates a zero-copy window view.
    """
    nd = len(geo.kernel)
    pad_width = [(0, 0), (0, 0), *zip(geo.pads_head, geo.pads_tail, strict=True)]
    if any(geo.pads_head) or any(geo.pads_tail):
        x = np.pad(x, pad_width, constant_values=pad_value)
    spans = tuple((k - 1) * d + 1 for k, d in zip(geo.kernel, geo.dilations, strict=True))
    view = np.lib.stride_tricks.sliding_window_view(x, spans, axis=tuple(range(2, 2 + nd)))
    steps = [slice(0, o * s, s) for o, s in zip(geo.out_sizes, geo.strides, strict=True)]
    index = (slice(None), slice(None), *steps, *(slice(None, None, d) for d in geo.dilations))
    return view[index]


def windows_adjoint(cols: np.ndarray, shape: tuple[int, ...], geo: Geometry) -> np.ndarray:
    """The adjoint of ``windows``: each element of ``cols`` (N, C, *out_sizes, *kernel) added
    back to where ``windows`` took it from in an N, C, *spatial array of ``shape``, what fell
    in the padding left out (a gradient through ``windows``)."""
    padded = [s + h + t for s, h, t in zip(shape[2:], geo.pads_head, geo.pads_tail, strict=True)]
    out = np.zeros((*shape[:2], *padded), dtype=cols.dtype)
    for offset in np.ndindex(*geo.kernel):
        target = tuple(
            slice(k * d, k * d + st * (n - 1) + 1, st)
            for k, d, st, n in zip(offset, geo.dilations, geo.strides, geo.out_sizes, strict=True)
        )
        out[(slice(None), slice(None), *target)] += cols[(..., *offset)]
    crop = tuple(slice(h, h + s) for h, s in zip(geo.pads_head, shape[2:], strict=True))
    return out[(slice(None), slice(None), *crop)]

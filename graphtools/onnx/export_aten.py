"""Exporter for ``ATen`` (PyTorch's fallback op naming an ATen function in ``operator``): one
``caffe2``-domain function per function the executor runs, named ``ATen__<operator>``.

* ``unsqueeze(self, dim)``: ``Unsqueeze``;
* ``max(self, dim, keepdim)``: the first maximum's index (``ArgMax``) and its value
  (``GatherElements``), as the executor (and torch) return them;
* ``grid_sampler(input, grid, [interpolation_mode,] padding_mode)``: ``GridSample`` (opset 16),
  bilinear, zeros or border padding, ``align_corners`` true unless given (the exporters that
  omitted it predate the option).
"""

from __future__ import annotations

from graphtools.ir import Op
from graphtools.onnx.export_context import AttrRef, ExportContext, Function, exporter
from graphtools.onnx.export_helpers import unsqueeze

__all__: list[str] = []


def _unsqueeze_body(fx: ExportContext) -> None:
    fx.node("Unsqueeze", ["self", unsqueeze(fx, fx.attr("dim"), [0])], ["Y"])


def _max_body(fx: ExportContext) -> None:
    index, value, shape = fx.fresh("index"), fx.fresh("value"), fx.fresh("shape")
    fx.node("ArgMax", ["self"], [index], axis=AttrRef("dim"), keepdims=1)
    fx.node("GatherElements", ["self", index], [value], axis=AttrRef("dim"))
    fx.node("ArgMax", ["self"], ["indices"], axis=AttrRef("dim"), keepdims=AttrRef("keepdim"))
    fx.node("Shape", ["indices"], [shape])
    fx.node("Reshape", [value, shape], ["values"])


def _grid_sampler_body(fx: ExportContext) -> None:
    mode = "bilinear" if fx.opset < 20 else "linear"
    fx.node(
        "GridSample",
        ["input", "grid"],
        ["Y"],
        mode=mode,
        padding_mode=AttrRef("_padding_mode"),
        align_corners=AttrRef("align_corners"),
    )


_FUNCTIONS = {
    "unsqueeze": Function(
        "ATen",
        ("self",),
        ("Y",),
        {"operator": "string", "dim": "int"},
        _unsqueeze_body,
        variant="unsqueeze",
    ),
    "max": Function(
        "ATen",
        ("self",),
        ("values", "indices"),
        {"operator": "string", "dim": "int", "keepdim": "int"},
        _max_body,
        variant="max",
    ),
    "grid_sampler": Function(
        "ATen",
        ("input", "grid"),
        ("Y",),
        {
            "operator": "string",
            "padding_mode": "int",
            "align_corners": "int",
            "_padding_mode": "string",
        },
        _grid_sampler_body,
        since=16,
        variant="grid_sampler",
    ),
}


@exporter("ATen")
def _aten(cx: ExportContext, op: Op) -> None:
    name = op.arg("operator")
    name = name.decode() if isinstance(name, bytes) else str(name)
    fn = _FUNCTIONS.get(name)
    if fn is None:
        raise cx.refuse(f"ATen operator {name!r} (exported: {', '.join(sorted(_FUNCTIONS))})")
    if name == "unsqueeze":
        cx.call(fn, op.inputs[:1], op.outputs[:1], operator=name, dim=int(op.arg("dim", 0)))
    elif name == "max":
        if not op.has_arg("dim") or len(op.inputs) != 1:
            raise cx.refuse("ATen max without 'dim' (the whole tensor's or two tensors' max)")
        keepdim = int(op.arg("keepdim", 0))
        cx.call(
            fn,
            op.inputs[:1],
            op.outputs[:2],
            operator=name,
            dim=int(op.arg("dim")),
            keepdim=keepdim,
        )
    else:
        if int(op.arg("interpolation_mode", 0)) != 0:
            raise cx.refuse("ATen grid_sampler with an interpolation other than bilinear")
        padding = int(op.arg("padding_mode", 0))
        if padding not in (0, 1):
            raise cx.refuse(f"ATen grid_sampler padding_mode {padding} (zeros or border)")
        cx.call(
            fn,
            op.inputs[:2],
            op.outputs[:1],
            operator=name,
            padding_mode=padding,
            align_corners=int(op.arg("align_corners", 1)),
            _padding_mode="zeros" if padding == 0 else "border",
        )

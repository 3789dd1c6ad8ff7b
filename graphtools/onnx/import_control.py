"""Importers for ``Constant`` and ``If``.

``If`` becomes Caffe2's ``If`` with ``then_net``/``else_net``: both branches run in the If's
workspace, so each branch writes the If's output names directly (its output values are
renamed, as Caffe2's backend did). The op's inputs are the condition followed by the outer
blobs the branches read (Caffe2 uses them for scheduling only).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from graphtools.onnx.context import NodeContext
from graphtools.onnx.registry import converter

__all__: list[str] = []


@converter(
    "Constant",
    since=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25),
    attributes=(
        "value",
        "sparse_value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
        "value_string",
        "value_strings",
    ),
)
def _constant(ctx: NodeContext) -> None:
    attrs = ctx.attrs
    if "sparse_value" in attrs:
        raise ctx.refuse("(a sparse tensor) is not supported", "sparse_value")
    if "value" in attrs:
        value = numpy_helper.to_array(attrs["value"])
    elif "value_float" in attrs:
        value = np.asarray(attrs["value_float"], dtype=np.float32)
    elif "value_floats" in attrs:
        value = np.asarray(attrs["value_floats"], dtype=np.float32)
    elif "value_int" in attrs:
        value = np.asarray(attrs["value_int"], dtype=np.int64)
    elif "value_ints" in attrs:
        value = np.asarray(attrs["value_ints"], dtype=np.int64)
    elif "value_string" in attrs:
        value = np.asarray([attrs["value_string"]], dtype=object).reshape(())
    elif "value_strings" in attrs:
        value = np.asarray(list(attrs["value_strings"]), dtype=object)
    else:
        raise ctx.refuse("has no value attribute")
    ctx.importer.add_constant(ctx.outputs[0], np.asarray(value), ctx.where)


@converter(
    "If", since=(1, 11, 13, 16, 19, 21, 23, 24, 25), attributes=("then_branch", "else_branch")
)
def _if(ctx: NodeContext) -> None:
    outputs = ctx.outputs
    if len(outputs) != len(ctx.node.output):
        raise ctx.refuse("has an output left unnamed; every If output must be named")
    then_net = ctx.subgraph(ctx.attr("then_branch"), outputs)
    else_net = ctx.subgraph(ctx.attr("else_branch"), outputs)
    cond = ctx.inputs[0]
    reads = dict.fromkeys(
        name for net in (then_net, else_net) for name in net.external_inputs if name != cond
    )
    ctx.emit("If", [cond, *reads], outputs, then_net=then_net, else_net=else_net)

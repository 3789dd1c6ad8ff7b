"""Importers for ``Constant``, ``If`` and ``Loop``.

``If`` becomes Caffe2's ``If`` with ``then_net``/``else_net``: both branches run in the If's
workspace, so each branch writes the If's output names directly (its output values are
renamed, as Caffe2's backend did). The op's inputs are the condition followed by the outer
blobs the branches read (Caffe2 uses them for scheduling only).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from graphtools.ir import Net, Op
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


_INT64, _BOOL = 10, 5
"""Caffe2 ``TensorProto.DataType`` numbers of int64 and bool."""


@converter("Loop", since=(1, 11, 13, 16, 19, 21, 23, 24, 25), attributes=("body",))
def _loop(ctx: NodeContext) -> None:
    """ONNX's ``Loop`` as Caffe2's ``While`` in the same workspace.

    Before the loop: the iteration counter (int64 0), the condition, the carried values
    copied to state blobs. The ``cond_net`` computes ``iteration < M and condition`` (either
    part when the other is absent). The ``loop_net`` binds the body's inputs (copies of the
    counter, condition and states), runs the body's ops, copies its outputs back (through
    temporaries, so a body returning its inputs swapped stays right), appends each scan
    output's row to its stacked blob (the first row starts it: an ``If`` on the counter) and
    counts. After the loop the states and stacks are copied to the node's outputs. A loop
    that runs no iteration leaves its scan outputs unset (Caffe2 has no empty tensor of a
    shape not yet known): the executor reports the While's outputs as not written.
    """
    body = ctx.attr("body")
    if body is None:
        raise ctx.refuse("has no body")
    inputs = list(ctx.node.input)
    carried = inputs[2:]
    if any(not name for name in carried):
        raise ctx.refuse("a carried value left out")
    for info in body.input:
        if not info.type.HasField("tensor_type"):
            raise ctx.refuse(f"body input {info.name!r} is not a tensor (sequences, optionals)")
    body_in = [i.name for i in body.input]
    body_out = [o.name for o in body.output]
    scans = len(body_out) - 1 - len(carried)
    if len(body_in) != 2 + len(carried) or scans < 0:
        raise ctx.refuse(
            f"body takes {len(body_in)} inputs and gives {len(body_out)} outputs for "
            f"{len(carried)} carried values"
        )
    trip, cond = ctx.input(0), ctx.input(1)
    hint = (ctx.output(0) or ctx.node.name or "loop").replace("/", "_")
    counter, one, zero = (ctx.fresh(f"{hint}_{k}") for k in ("iteration", "one", "zero"))
    keep, go = ctx.fresh(f"{hint}_cond"), ctx.fresh(f"{hint}_go")
    ctx.emit("ConstantFill", [], [counter], shape=[], dtype=_INT64, value=0)
    ctx.emit("ConstantFill", [], [zero], shape=[], dtype=_INT64, value=0)
    ctx.emit("ConstantFill", [], [one], shape=[], dtype=_INT64, value=1)
    if cond is not None:
        ctx.emit("Copy", [cond], [keep])
    else:
        ctx.emit("ConstantFill", [], [keep], shape=[], dtype=_BOOL, value=1)
    states = [ctx.fresh(f"{hint}_state_{k}") for k in range(len(carried))]
    for initial, state in zip(carried, states, strict=True):
        ctx.emit("Copy", [initial], [state])
    stacks = [ctx.fresh(f"{hint}_stack_{k}") for k in range(scans)]
    cond_ops = _condition(trip, keep, go, counter, ctx)
    step = [
        Op("Copy", [source], [name])
        for source, name in zip([counter, keep, *states], body_in, strict=True)
    ]
    step += ctx.importer.import_body(body, ctx)
    temporaries = [ctx.fresh(f"{hint}_next_{k}") for k in range(1 + len(carried))]
    step += [Op("Copy", [o], [t]) for o, t in zip(body_out, temporaries, strict=False)]
    step += [Op("Copy", [t], [name]) for t, name in zip(temporaries, [keep, *states], strict=True)]
    first = ctx.fresh(f"{hint}_first")
    if scans:
        step.append(Op("EQ", [counter, zero], [first]))
    for row_value, stack in zip(body_out[1 + len(carried) :], stacks, strict=True):
        row, split = ctx.fresh(f"{stack}_row"), ctx.fresh(f"{stack}_split")
        step.append(Op("ExpandDims", [row_value], [row], args={"dims": [0]}))
        start = Net([Op("Copy", [row], [stack])], [row], [stack])
        grow = Net(
            [Op("Concat", [stack, row], [stack, split], args={"axis": 0})], [stack, row], [stack]
        )
        step.append(Op("If", [first, row], [stack], args={"then_net": start, "else_net": grow}))
    step.append(Op("Add", [counter, one], [counter]))
    loop_net = Net(step, name=f"{hint}_loop_net")
    cond_net = Net(cond_ops, name=f"{hint}_cond_net")
    ctx.emit("ConstantFill", [], [go], shape=[], dtype=_BOOL, value=0)  # cond_net sets it
    ctx.emit("While", [go], [*states, *stacks], loop_net=loop_net, cond_net=cond_net)
    for position, value in enumerate([*states, *stacks]):
        name = ctx.output(position)
        if name is not None:
            ctx.emit("Copy", [value], [name])


def _condition(trip: str | None, keep: str, go: str, counter: str, ctx: NodeContext) -> list[Op]:
    """The ops computing whether the loop runs again."""
    if trip is None:
        return [Op("Copy", [keep], [go])]
    below = ctx.fresh(f"{go}_below")
    return [Op("LT", [counter, trip], [below]), Op("And", [below, keep], [go])]

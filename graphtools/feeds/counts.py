"""Output counts of made-up layers that the generic channel plan does not know.

``analysis.channels.plan_channels`` plans each Conv/FC's output count from the net's own
constraints; what reads a layer can fix more: the RPN's deltas are 4 per anchor, the box head's
4 per class, a YOLO head reads (5 + classes) per masked anchor, a Reshape to a fixed target
needs its element count, and inside a ``RecurrentNetwork``'s step net a layer feeding a linked
state takes the state's size, one feeding ``LSTMUnit`` gates 4 per cell value.
"""

from __future__ import annotations

from math import gcd, prod

import numpy as np

from graphtools.analysis.recurrent import APPLY_LINK, ForwardProgram
from graphtools.executor import Workspace
from graphtools.feeds.values import as_array
from graphtools.ir import Net, Op

__all__ = [
    "FEATURES_LAST",
    "GATE_READERS",
    "KEEPS_CHANNELS",
    "LAYERS",
    "demanded",
    "feeding_ops",
    "fixed_counts",
    "last_dim",
    "producer_layer",
    "reshape_count",
    "step_counts",
]

#: Op types whose output has the channels (features) of their first input.
KEEPS_CHANNELS = frozenset(
    {
        *("Relu", "Sigmoid", "Tanh", "Softmax", "Copy", "Alias", "Dropout", "SpatialBN", "LRN"),
        *("MaxPool", "AveragePool", "Int8Relu", "Int8MaxPool", "Int8AveragePool"),
        *("NHWC2NCHW", "NCHW2NHWC", "Add", "Sub", "Mul", "Div"),
    }
)
#: The layers whose output count a plan chooses.
LAYERS = frozenset({"Conv", "FC", "ConvTranspose", "FCTransposed"})


def producer_layer(net: Net, index: int, position: int) -> int | None:
    """The Conv/FC op whose output reaches input ``position`` of op #``index`` through ops
    that keep channels (Sigmoid, Softmax, pools, ...), or ``None``."""
    view = net.ssa()
    blob = view.ssa[index][0][position]
    while True:
        producer = view.producer(blob)
        if producer is None:
            return None
        op = net[producer]
        if op.type in LAYERS:
            return producer
        if op.type not in KEEPS_CHANNELS or not op.inputs:
            return None
        blob = view.ssa[producer][0][0]


def _set_count(counts: dict[int, int], layer: int | None, count: int) -> None:
    if layer is not None and layer in counts and count > 0:
        counts[layer] = count


def fixed_counts(net: Net, counts: dict[int, int]) -> None:
    """Counts set by what reads a layer (in place): the RPN's deltas are 4 per anchor, the
    box head's 4 per class, a YOLO head reads (5 + classes) per masked anchor, the stylizer's
    deprocess 3 colours."""
    view = net.ssa()
    for index, op in enumerate(net):
        kind = op.type
        if kind in ("GenerateProposals", "GenerateProposalsCPP") and len(op.inputs) >= 2:
            scores = producer_layer(net, index, 0)
            if scores in counts:
                _set_count(counts, producer_layer(net, index, 1), 4 * counts[scores])
        elif kind == "BoxWithNMSLimit" and len(op.inputs) >= 2:
            scores = producer_layer(net, index, 0)
            boxes = view.producer(view.ssa[index][0][1])
            if boxes is None or net[boxes].type != "BBoxTransform" or scores not in counts:
                continue
            classes = 1 if op.arg("cls_agnostic_bbox_reg", 0) else counts[scores]
            _set_count(counts, producer_layer(net, boxes, 1), 4 * classes)
        elif kind == "Yolo":
            masked = len(op.arg("anchor_mask", ())) or int(op.arg("numanchors", 9))
            count = masked * (5 + int(op.arg("numclass", 80)))
            _set_count(counts, producer_layer(net, index, 0), count)
        elif kind == "BRGNCHWCToPackedInt8BGRAStylizerDeprocess":
            _set_count(counts, producer_layer(net, index, 0), 3)


def reshape_count(net: Net, index: int, ws: Workspace) -> tuple[int, int] | None:
    """``(layer, count)``: the output count of the layer feeding the Reshape at ``index``
    that lets its element count fit the Reshape's fixed target, or ``None``."""
    op = net[index]
    layer = producer_layer(net, index, 0)
    if layer is None or not ws.has(op.inputs[0]):
        return None
    shape = np.shape(as_array(ws.fetch(op.inputs[0])))
    if len(shape) < 2:
        return None
    if len(op.inputs) > 1 and ws.has(op.inputs[1]):
        target = [int(d) for d in np.asarray(ws.fetch(op.inputs[1])).reshape(-1)]
    else:
        target = [int(d) for d in op.arg("shape", ())]
    rest = prod(shape) // shape[1]  # every dim but the channels
    fixed = prod(d if d else shape[i] for i, d in enumerate(target) if d != -1)
    if not target or rest == 0 or fixed == 0:
        return None
    if -1 not in target:
        return (layer, fixed // rest) if fixed % rest == 0 else None
    return layer, fixed // gcd(fixed, rest)


# -- recurrent step nets -------------------------------------------------------------------------

#: Step ops whose input ``gates`` holds ``k`` values per value of the last dim of input
#: ``state``: ``type -> (gates position, state position, k)`` (LSTMUnit: i, f, o, g blocks).
GATE_READERS: dict[str, tuple[int, int, int]] = {"LSTMUnit": (2, 1, 4)}
_ELEMENTWISE = frozenset({"Sum", "Add", "Sub", "Mul", "Div"})
#: Layers whose features are on the last axis.
FEATURES_LAST = frozenset({"FC", "FCTransposed"})


def feeding_ops(net: Net, blob: tuple[str, int]) -> list[int]:
    """The layers (Conv/FC) and ``rnn_internal_apply_link`` ops whose output reaches the
    versioned ``blob`` through ops keeping the features (through every operand of an
    elementwise op without ``broadcast``), in net order."""
    view = net.ssa()
    todo, seen, found = [blob], set(), set()
    while todo:
        current = todo.pop()
        producer = view.producer(current)
        if current in seen or producer is None:
            continue
        seen.add(current)
        op = net[producer]
        if op.type in LAYERS or op.type == APPLY_LINK:
            found.add(producer)
        elif op.type in _ELEMENTWISE and not op.arg("broadcast", 0):
            todo += view.ssa[producer][0]
        elif op.type in KEEPS_CHANNELS and op.inputs:
            todo.append(view.ssa[producer][0][0])
    return sorted(found)


def last_dim(ws: Workspace, name: str) -> int | None:
    if not ws.has(name):
        return None
    shape = np.shape(as_array(ws.fetch(name)))
    return int(shape[-1]) if shape else None


def step_counts(net: Net, program: ForwardProgram, counts: dict[int, int], ws: Workspace) -> None:
    """Output counts of the step net's layers (in place) that its links and gate readers fix,
    from the shapes in the step workspace ``ws``, each rule overriding the ones before: a
    layer summed (or multiplied, ...) with a value the workspace holds gets its last dim, one
    feeding a value linked back into a state gets that state's, and one feeding the gates of
    an ``LSTMUnit`` 4 per value of its cell state."""
    view = net.ssa()
    for index, op in enumerate(net):
        if op.type not in _ELEMENTWISE or op.arg("broadcast", 0):
            continue
        widths = {d for name in op.inputs if (d := last_dim(ws, name)) is not None and d > 1}
        if len(widths) != 1:
            continue
        width = widths.pop()
        for position in range(len(op.inputs)):
            for layer in feeding_ops(net, view.ssa[index][0][position]):
                if net[layer].type in LAYERS:
                    counts[layer] = width
    for link in program.links:
        size = last_dim(ws, link.external)
        for index, op in enumerate(net):
            if op.type == APPLY_LINK or link.internal not in op.outputs or size is None:
                continue
            blob = view.ssa[index][1][list(op.outputs).index(link.internal)]
            for layer in feeding_ops(net, blob):
                if net[layer].type in LAYERS:
                    counts[layer] = size
    for index, op in enumerate(net):
        gate = GATE_READERS.get(op.type)
        if gate is None or len(op.inputs) <= max(gate[:2]):
            continue
        size = last_dim(ws, op.inputs[gate[1]])
        for layer in feeding_ops(net, view.ssa[index][0][gate[0]]):
            if net[layer].type in LAYERS and size:
                counts[layer] = gate[2] * size


def demanded(op: Op, dims: list[int | None], free: set[int]) -> dict[int, int]:
    """The last dims step op ``op`` needs of its inputs at positions ``free`` (those a made-up
    layer outside the step net could change), given every input's last dim ``dims``."""
    gate = GATE_READERS.get(op.type)
    if gate is not None and gate[0] in free and len(dims) > gate[1]:
        size = dims[gate[1]]
        return {} if size is None else {gate[0]: gate[2] * size}
    if op.type not in _ELEMENTWISE or op.arg("broadcast", 0):
        return {}
    fixed = {d for p, d in enumerate(dims) if p not in free and d is not None and d > 1}
    if len(fixed) != 1:
        return {}
    size = fixed.pop()
    return {p: size for p in free}

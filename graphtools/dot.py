"""A picture of a model: Graphviz DOT text of its predict_net (``graphtools draw``).

Ops are boxes labelled ``%index Type``, filled with one colour per device; versioned blobs
are ellipses labelled ``name@version`` (as the printer spells them), external inputs and
outputs drawn bold with ``in``/``out`` in their label; nested nets (If branches, loop bodies)
are clusters beside their op. ``ops=slice(a, b)`` draws ops ``a`` to ``b - 1`` and the blobs
they touch. With ``diff=(other model)`` the picture shows what changed from this model to the
other (``graphtools.analysis.model_diff``): removed ops red and dashed, changed ops orange,
renamed outputs ``old -> new``, and the other model's added ops green.

The text is plain DOT; rendering it to SVG or PNG is Graphviz's ``dot`` program's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphtools._core import ONNX
from graphtools.analysis.model_diff import NetDiff, OpRef, diff_nets
from graphtools.ir import Model, Net, Op
from graphtools.printer import format_device
from graphtools.ssa_view import SSAView

__all__ = ["DEVICE_COLOURS", "model_to_dot", "net_to_dot"]

#: Fill colours of op boxes, given to devices in the order they first appear.
DEVICE_COLOURS = ("#e3f2fd", "#e8f5e9", "#fff3e0", "#f3e5f5", "#e0f7fa", "#fce4ec")
_REMOVED, _ADDED, _CHANGED = "#ffcdd2", "#c8e6c9", "#ffe0b2"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class _Writer:
    """Collects DOT lines; node ids are made unique per nested-net path."""

    lines: list[str] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)

    def colour(self, device: str) -> str:
        if device not in self.devices:
            self.devices[device] = DEVICE_COLOURS[len(self.devices) % len(DEVICE_COLOURS)]
        return self.devices[device]


def _device(net: Net, op: Op) -> str:
    device = net.op_device(op)
    return "CPU" if device is None else format_device(device)


def _net(
    writer: _Writer,
    net: Net,
    prefix: str,
    indent: str,
    ops: slice | None,
    diff: NetDiff | None,
    other: Net | None,
) -> None:
    view = net.ssa()
    chosen = range(len(net))[ops] if ops is not None else range(len(net))
    removed = {ref.index for ref in diff.removed} if diff is not None else set()
    changed = {c.before: c for c in diff.changed} if diff is not None else {}
    ext_in = {(name, 0) for name in net.external_inputs}
    ext_out = set(view.external_outputs)
    blobs: dict[tuple[str, int], str] = {}

    def blob_node(blob: tuple[str, int], renamed: str | None = None) -> str:
        node = blobs.get(blob)
        if node is not None:
            return node
        node = f"{prefix}b{len(blobs)}"
        blobs[blob] = node
        label = f"{blob[0]}@{blob[1]}"
        if renamed is not None:
            label += f"\n-> {renamed}"
        attrs = ["shape=ellipse"]
        if blob in ext_in:
            label = f"in: {label}"
            attrs.append("style=bold")
        if blob in ext_out:
            label = f"out: {label}"
            attrs.append("style=bold")
        if renamed is not None:
            attrs.append(f'color="{_CHANGED}"')
        attrs.append(f"label={_quote(label)}")
        writer.lines.append(f"{indent}{node} [{', '.join(attrs)}];")
        return node

    for index in chosen:
        op = net[index]
        node = f"{prefix}op{index}"
        fill = writer.colour(_device(net, op))
        style = "filled"
        if index in removed:
            fill, style = _REMOVED, "filled,dashed"
        elif index in changed:
            fill = _CHANGED
        domain = op.domain if net.dialect == ONNX and op.domain not in (None, "", "ai.onnx") else ""
        label = f"%{index} {domain + '::' if domain else ''}{op.type}"
        if op.name:
            label += f"\n{op.name}"
        writer.lines.append(
            f'{indent}{node} [shape=box, style="{style}", fillcolor="{fill}", '
            f"label={_quote(label)}];"
        )
        ins, outs = view.ssa[index]
        renames = {p: new for p, _, new in changed[index].renamed} if index in changed else {}
        for blob in ins:
            writer.lines.append(f"{indent}{blob_node(blob)} -> {node};")
        for position, blob in enumerate(outs):
            writer.lines.append(f"{indent}{node} -> {blob_node(blob, renames.get(position))};")
        for argument, nested in op.nested_nets():
            cluster = f"{prefix}op{index}_{argument or 'net'}"
            writer.lines.append(f"{indent}subgraph cluster_{cluster} {{")
            title = f"%{index} {op.type}: {argument}" + (f" ({nested.name})" if nested.name else "")
            writer.lines.append(f"{indent}  label={_quote(title)}; style=rounded;")
            _net(writer, nested, f"{cluster}_", indent + "  ", None, None, None)
            writer.lines.append(f"{indent}}}")
            if len(nested):
                writer.lines.append(
                    f'{indent}{node} -> {cluster}_op0 [style=dashed, lhead="cluster_{cluster}"];'
                )
    for name in net.external_inputs:
        if ops is None:
            blob_node((name, 0))
    if diff is not None and other is not None:
        _Added(writer, diff, other, net, blobs, indent).draw(diff.added)


class _Added:
    """Draws the other net's added ops, wired to this net's blobs where they read the same
    values (an external input of that name, or an output of a matched op)."""

    def __init__(
        self,
        writer: _Writer,
        diff: NetDiff,
        other: Net,
        net: Net,
        blobs: dict[tuple[str, int], str],
        indent: str,
    ) -> None:
        self.writer = writer
        self.view_b: SSAView = other.ssa()
        self.view_a: SSAView = net.ssa()
        self.to_before = {b: a for a, b in diff.matched.items()}
        self.blobs = blobs
        self.indent = indent
        self.nodes: dict[tuple[str, int], str] = {}

    def draw(self, refs: list[OpRef]) -> None:
        lines = self.writer.lines
        for ref in refs:
            node = f"added{ref.index}"
            label = f"+%{ref.index} {ref.type}"
            lines.append(
                f'{self.indent}{node} [shape=box, style="filled,bold", fillcolor="{_ADDED}", '
                f"label={_quote(label)}];"
            )
            ins, outs = self.view_b.ssa[ref.index]
            for blob in ins:
                lines.append(f"{self.indent}{self.source(blob)} -> {node};")
            for blob in outs:
                target = self.new_blob(blob, f'color="{_ADDED}"')
                lines.append(f"{self.indent}{node} -> {target};")

    def new_blob(self, blob: tuple[str, int], extra: str = "") -> str:
        node = f"after{len(self.nodes)}"
        self.nodes[blob] = node
        attrs = ", ".join(a for a in ("shape=ellipse", extra) if a)
        label = _quote(f"{blob[0]}@{blob[1]}")
        self.writer.lines.append(f"{self.indent}{node} [{attrs}, label={label}];")
        return node

    def source(self, blob: tuple[str, int]) -> str:
        """The node an added op's input comes from."""
        if blob in self.nodes:
            return self.nodes[blob]
        producer = self.view_b.producer(blob)
        same: tuple[str, int] | None = None
        if producer is None:
            same = (blob[0], 0)
        elif producer in self.to_before:
            position = self.view_b.ssa[producer][1].index(blob)
            same = self.view_a.ssa[self.to_before[producer]][1][position]
        if same is not None and same in self.blobs:
            return self.blobs[same]
        return self.new_blob(blob)


def net_to_dot(
    net: Net,
    *,
    ops: slice | None = None,
    diff_with: Net | None = None,
    title: str | None = None,
) -> str:
    """DOT text of ``net`` (see the module docstring); ``diff_with`` marks what changes from
    ``net`` to that net."""
    writer = _Writer()
    name = title or net.name or "net"
    diff = diff_nets(net, diff_with) if diff_with is not None else None
    _net(writer, net, "", "  ", ops, diff, diff_with)
    head = [
        f"digraph {_quote(name)} {{",
        "  compound=true;",
        '  graph [rankdir=TB, fontname="Helvetica"];',
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
        f"  label={_quote(_legend(name, writer.devices, diff))}; labelloc=t;",
    ]
    return "\n".join([*head, *writer.lines, "}"]) + "\n"


def _legend(name: str, devices: dict[str, str], diff: NetDiff | None) -> str:
    text = name
    if len(devices) > 1:
        text += "\ndevices: " + ", ".join(devices)
    if diff is not None:
        text += (
            f"\nremoved (red): {len(diff.removed)}, added (green): {len(diff.added)}, "
            f"changed (orange): {len(diff.changed)}"
        )
    return text


def model_to_dot(model: Model, *, ops: slice | None = None, diff_with: Model | None = None) -> str:
    """DOT text of ``model``'s predict_net (see ``net_to_dot``)."""
    other = None if diff_with is None else diff_with.predict_net
    return net_to_dot(model.predict_net, ops=ops, diff_with=other)

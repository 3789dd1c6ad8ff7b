"""``show`` on an ONNX model: the summary and the initializer listing.

The summary says what the file declares, nothing is inferred or run: the op histogram (nested
graphs included; an op of another domain as ``domain::Type``), the graph inputs and outputs
with their declared types (symbolic dims by name, ``?`` unknown), the initializers, their
total size and the external data files they lie in, the opset imports, IR version and
producer, the model-local functions and the nested graphs (If branches, Loop and Scan bodies).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from graphtools.cli.common import Output, new_table
from graphtools.dialects import initializer_inputs_are_defaults
from graphtools.ir import Model, Net
from graphtools.printer import format_tensor_value, format_value_type, qualified_type
from graphtools.values import ValueType

__all__ = ["initializer_rows", "onnx_summary", "print_onnx_summary"]


def _type_text(value_type: ValueType | None) -> str:
    return "?" if value_type is None else format_value_type(value_type)


def _histogram(net: Net, counter: Counter[str]) -> int:
    """Count the op types of ``net`` and its nested nets into ``counter``; all their ops."""
    total = 0
    for op in net:
        counter[qualified_type(op)] += 1
        total += 1
        for _, nested in op.nested_nets():
            total += _histogram(nested, counter)
    return total


def _nested(net: Net, path: str, found: list[dict[str, Any]]) -> None:
    for index, op in enumerate(net):
        for argument, nested in op.nested_nets():
            where = f"{path}%{index}"
            found.append(
                {
                    "op": where,
                    "op_type": qualified_type(op),
                    "attribute": argument or "",
                    "name": nested.name or "",
                    "ops": len(nested),
                }
            )
            _nested(nested, f"{where}.{argument}/", found)


def onnx_summary(model: Model, path: str) -> dict[str, Any]:
    """What ``show`` prints about an ONNX model, as JSON-ready data."""
    net = model.predict_net
    header = model.header
    counter: Counter[str] = Counter()
    total = _histogram(net, counter)
    held = net.initializers
    fed = initializer_inputs_are_defaults(model)  # else every initializer is listed as input
    nbytes = 0
    files: dict[str, None] = {}
    missing: dict[str, None] = {}
    for tensor in held.values():
        nbytes += tensor.nbytes if tensor.dtype.kind not in "OUS" else 0  # not strings
        external = getattr(tensor, "external", None)
        if external is not None:
            files[external.location] = None
            if not external.path.is_file():
                missing[external.location] = None
    nested: list[dict[str, Any]] = []
    _nested(net, "", nested)
    functions = getattr(header, "functions", ())
    producer = " ".join(
        p
        for p in (getattr(header, "producer_name", ""), getattr(header, "producer_version", ""))
        if p
    )
    return {
        "path": path,
        "format": "onnx",
        "name": net.name,
        "ir_version": int(getattr(header, "ir_version", 0)),
        "opset_imports": {domain or "ai.onnx": v for domain, v in model.opset_imports.items()},
        "producer": producer,
        "ops": len(net),
        "ops_with_nested": total,
        "op_types": dict(sorted(counter.items(), key=lambda item: (-item[1], item[0]))),
        "inputs": [
            {"name": n, "type": _type_text(net.types.get(n)), "initializer_default": n in held}
            for n in net.external_inputs
            if fed or n not in held
        ],
        "outputs": [
            {"name": n, "type": _type_text(net.types.get(n))} for n in net.external_outputs
        ],
        "initializers": len(held),
        "initializer_values": sum(t.size for t in held.values()),
        "initializer_bytes": nbytes,
        "external_data": list(files),
        "missing_external_data": list(missing),
        "functions": [
            {"domain": f.domain, "name": f.name, "nodes": len(f.node)} for f in functions
        ],
        "nested": nested,
    }


def _human(count: float) -> str:
    for unit in ("", "K", "M", "G"):
        if abs(count) < 1000:
            return f"{count:.3g}{unit}"
        count /= 1000
    return f"{count:.3g}T"


def print_onnx_summary(out: Output, data: dict[str, Any]) -> None:
    """The summary as text."""
    opsets = ", ".join(f"{domain} {version}" for domain, version in data["opset_imports"].items())
    out.line(
        f"onnx model {data['name'] or '(unnamed graph)'}: {data['ops']} nodes"
        + (f" ({data['ops_with_nested']} with nested graphs)" if data["nested"] else "")
        + f" ({data['path']})"
    )
    out.line(
        f"IR version {data['ir_version']}, opsets: {opsets or 'none'}"
        + (f", producer {data['producer']}" if data["producer"] else "")
    )
    table = new_table("", "value", "type")
    for blob in data["inputs"]:
        default = " (default: its initializer)" if blob["initializer_default"] else ""
        table.add_row("input", blob["name"], blob["type"] + default)
    for blob in data["outputs"]:
        table.add_row("output", blob["name"], blob["type"])
    if not data["outputs"]:
        table.add_row("output", "(none declared)", "")
    out.table(table)
    if data["initializers"]:
        where = (
            f", external data in {', '.join(data['external_data'])}"
            if data["external_data"]
            else ""
        )
        out.line(
            f"initializers: {data['initializers']}, {_human(data['initializer_values'])} "
            f"values, {_human(data['initializer_bytes'])}B{where}"
        )
        for location in data["missing_external_data"]:
            out.note(
                f"the external data file {location} is not beside the model: its weights "
                "cannot be read (run, verify and exec refuse it); put it next to the model"
            )
    else:
        out.line("initializers: none")
    types = new_table("op type", "count")
    for name, count in data["op_types"].items():
        types.add_row(name, str(count))
    out.table(types)
    for function in data["functions"]:
        qualified = f"{function['domain']}::{function['name']}"
        out.line(f"function {qualified}: {function['nodes']} nodes")
    for nested in data["nested"]:
        out.line(
            f"nested graph: node {nested['op']} ({nested['op_type']}) {nested['attribute']} "
            f"{nested['name']!r}: {nested['ops']} nodes"
        )
    out.line(
        "(--ops [A:B] lists the nodes, --params the initializers, --full the whole dump)", level=2
    )


def initializer_rows(model: Model) -> list[tuple[str, str, str]]:
    """``(name, type, where)`` of every initializer of the main graph (the data is not
    read): ``where`` is ``inline`` or the external data file."""
    rows = []
    for name, tensor in model.predict_net.initializers.items():
        external = getattr(tensor, "external", None)
        where = "inline" if external is None else str(external.location)
        rows.append((name, format_tensor_value(tensor, where=False), where))
    return rows

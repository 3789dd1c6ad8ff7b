"""Keep one copy of equal initializers, in every graph of an ONNX model (control-flow bodies
included): the readers of a copy read the first initializer holding the same data instead,
and the copy goes.

Equal means the same element type, shape and bytes. An initializer that is also a graph
input (IR 3 models list them: a user may feed another value), a graph output, read by a
nested graph (whose reads cannot be rewired) or by something besides the nodes (a
``training_info``, a ``quantization_annotation``) is neither dropped nor kept for others. Exporters
write equal constants under several names (the legacy exporter's shape constants, a batch norm
as constructed); merged, they also let ``merge-common-subexpressions`` see that ops reading
them compute the same thing.

Example (``a`` and ``b`` hold the same ``[2, 3]`` floats)::

    before                              after
      #0 Mul(x@0, a@0) -> p@1             #0 Mul(x@0, a@0) -> p@1
      #1 Mul(y@0, b@0) -> q@1             #1 Mul(y@0, a@0) -> q@1
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, ClassVar

from graphtools._core import ONNX
from graphtools.analysis.dataflow import DataFlow
from graphtools.analysis.scopes import scopes
from graphtools.dialects import annotated_params, op_table, read_outside_graph
from graphtools.ir import Model, Net
from graphtools.pass_infra import Pass, PassResult, register_pass

__all__ = ["DedupeInitializers"]


def _copies(net: Net, flow: DataFlow, outside: frozenset[str]) -> dict[str, str]:
    """``{copy: the initializer it equals}`` for the initializers of ``net`` that can go
    (``outside``: the names something besides the nodes reads, which stay)."""
    fixed = set(net.external_inputs) | flow.escaping | outside
    groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for name, tensor in net.initializers.items():
        if name not in fixed:
            groups[(str(tensor.dtype), tensor.shape)].append(name)
    copies: dict[str, str] = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        first_with: dict[bytes, str] = {}
        for name in names:
            digest = hashlib.sha256(net.initializers[name].numpy().tobytes()).digest()
            kept = first_with.setdefault(digest, name)
            if kept != name and net.initializers[kept].same_as(net.initializers[name]):
                copies[name] = kept
    return copies


@register_pass
@dataclass(frozen=True)
class DedupeInitializers(Pass):
    """Keep one copy of equal initializers (see the module docstring).

    Stats: ``initializers_removed``.
    """

    name: ClassVar[str] = "dedupe-initializers"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    reads_ssa: ClassVar[bool] = True
    idempotent: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        """Group each graph's initializers by type and shape, compare their bytes, rewire."""
        table = op_table(model)
        stats = {"initializers_removed": 0}
        changed = False
        outside = read_outside_graph(model)
        for scope in scopes(model.predict_net, table):
            net = scope.net
            if len(net.initializers) < 2:
                continue
            spared = outside if net is model.predict_net else annotated_params(net)
            copies = _copies(net, DataFlow(scope), spared)
            if not copies:
                continue
            with net.edit() as edit:
                for copy, kept in copies.items():
                    edit.replace_all_uses_with((copy, 0), (kept, 0))
                    edit.set_initializer(copy, None)
                    if copy in net.types:
                        edit.set_type(copy, None)
            changed = edit.changed or changed
            stats["initializers_removed"] += len(copies)
        return PassResult(model, changed, stats)

"""Importer for calls of the ``caffe2``-domain functions ``export_onnx`` writes.

Such a node stands for one Caffe2 op: its op type is the Caffe2 op type (followed by ``__`` and
a form when the op type has several function bodies), its inputs and outputs the op's, its
attributes the op's arguments, except those whose names start with ``_``, which the export
derived for the function body (input quantization, permutations) and which the import drops.
The function's body is not read: the Caffe2 op computes what it stands for.
"""

from __future__ import annotations

from graphtools.onnx.context import NodeContext
from graphtools.onnx.export_context import DERIVED_PREFIX, VARIANT_SEPARATOR

__all__ = ["caffe2_call"]


def caffe2_call(ctx: NodeContext) -> None:
    """Emit the Caffe2 op a ``caffe2``-domain node stands for."""
    args = {name: value for name, value in ctx.attrs.items() if not name.startswith(DERIVED_PREFIX)}
    missing = [i for i, name in enumerate(ctx.node.input) if not name]
    if missing:
        raise ctx.refuse(f"a caffe2-domain call with inputs {missing} left out")
    op_type = ctx.node.op_type.split(VARIANT_SEPARATOR)[0]
    outputs = [o or ctx.fresh("unused") for o in ctx.node.output]
    ctx.emit(op_type, list(ctx.node.input), outputs, **args)

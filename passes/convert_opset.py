"""Convert an ONNX model to another opset of the default domain with onnx's version converter
(``graphtools.dialects.onnx_versions``): the only pass that changes a model's opset, and only
when asked (``run --opset N`` puts it first in the pipeline).

The converter rewrites each node for the target opset (``Squeeze``'s ``axes`` attribute into
an input from 13, ``Softmax``'s axis semantics, ...) and raises ``UnsupportedOpError`` naming
the opsets when it has no adapter for an op of the model. A model already at ``opset`` is left
as it is.

Example (``opset=13``, a model at opset 11)::

    before                                     after
      #0 Squeeze(x@0) -> y@1 {axes=[1]}          #0 Squeeze(x@0, axes@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import ONNX
from graphtools.errors import PipelineSpecError
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult, register_pass

__all__ = ["ConvertOpset"]


@register_pass
@dataclass(frozen=True)
class ConvertOpset(Pass):
    """Convert the model to ``opset`` with onnx's version converter (see the module docstring).

    Options:
        opset: the target opset of the default domain.

    Stats: ``from``, ``to`` (the opsets).
    """

    name: ClassVar[str] = "convert-opset"
    example: ClassVar[str] = "convert-opset{opset=18}"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    idempotent: ClassVar[bool] = True
    opset: int

    def __post_init__(self) -> None:
        if self.opset < 1:
            raise PipelineSpecError(f"convert-opset{{opset={self.opset}}}: no such opset")

    def call(self, model: Model) -> PassResult:
        """Convert through bytes and take the converted graph, opsets and header."""
        from graphtools.dialects.onnx_versions import convert_opset

        current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        stats = {"from": current, "to": self.opset}
        if current == self.opset:
            return PassResult(model, False, stats)
        converted = convert_opset(model, self.opset)
        model.predict_net = converted.predict_net
        model.opset_imports = converted.opset_imports
        model.header = converted.header
        return PassResult(model, True, stats)

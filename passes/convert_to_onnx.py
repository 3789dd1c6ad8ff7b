"""Convert a Caffe2 pair into an ONNX-dialect model, inside the IR.

The model's init_net and predict_net become one ONNX graph (``graphtools.convert.
caffe2_to_onnx``): the params the init_net fills are initializers, every op is converted by the
exporter table (Caffe2 ops without an ONNX op as compositions or calls of ``caffe2``-domain
model-local functions), blobs get SSA names by Caffe2's rule (inputs and outputs keep theirs:
an output written in place is the final version's name, ``fc`` for ``Relu(fc) -> fc``, as
Caffe2's C++ exporter names it, unless a graph input holds the name),
and the graph's inputs are typed by the types the predict_net declares (``Net.types``: an
imported pair keeps its inputs'; ``export_onnx``'s ``value_info`` and ``export-onnx``'s
``--shapes`` put them there). The result passes onnx's checker; a model the converter refuses
is left as it was.

Example (``w`` and ``b`` filled by the init_net, ``x`` declared ``float32[2, 4]``)::

    init_net                               predict_net (onnx, opset 17)
      #0 GivenTensorFill -> w                initializers: w, b
      #1 GivenTensorFill -> b         =>     #0 Gemm(x@0, w@0, b@0) -> y@1
    predict_net
      #0 FC(x@0, w@0, b@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.convert.caffe2_to_onnx.options import (
    DEFAULT_OPSET,
    RECURRENT_FORMS,
    ExportOptions,
)
from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult, register_pass

__all__ = ["ConvertToOnnx", "parse_quantization"]


def parse_quantization(items: tuple[str, ...]) -> dict[str, tuple[float, int]]:
    """``("data=0.5:128", ...)`` as ``{"data": (0.5, 128)}``.

    Raises:
        ValueError: an item not of the form ``NAME=SCALE:ZERO_POINT``.
    """
    found: dict[str, tuple[float, int]] = {}
    for item in items:
        name, _, value = item.partition("=")
        scale, _, zero_point = value.partition(":")
        try:
            found[name.strip()] = (float(scale), int(zero_point))
        except ValueError:
            raise ValueError(
                f"input_quantization item {item!r} is not NAME=SCALE:ZERO_POINT"
            ) from None
        if not name.strip():
            raise ValueError(f"input_quantization item {item!r} names no input")
    return found


@register_pass
@dataclass(frozen=True)
class ConvertToOnnx(Pass):
    """Convert the Caffe2 pair into an ONNX model (see the module docstring).

    Options:
        opset: default-domain opset to write (11 to the newest the installed onnx knows).
        ir_version: IR version to write; 0: the lowest that carries the opset.
        dynamic_batch: write the batch dim of the graph inputs as free dims (``N``,
            ``N_<input>``): dim 0, dim 1 of a 3-D input a RecurrentNetwork reads
            time-major.
        recurrent: ``loop`` writes RecurrentNetwork ops as ONNX ``Loop``, ``scan`` as ``Scan``.
        test_mode: export a training net's inference form (``is_test=1`` on Dropout and
            SpatialBN, refused in training mode otherwise).
        input_quantization: ``NAME=SCALE:ZERO_POINT`` of each graph input that is an Int8
            blob (fed as its uint8 values).

    Stats: ``onnx_ops`` (top-level ops of the graph), ``initializers``, ``functions``
    (model-local functions), ``opset``.
    """

    name: ClassVar[str] = "convert-to-onnx"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    changes_interface: ClassVar[bool] = True
    changes_dialect: ClassVar[bool] = True

    opset: int = DEFAULT_OPSET
    ir_version: int = 0
    dynamic_batch: bool = False
    recurrent: str = "loop"
    test_mode: bool = False
    input_quantization: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.recurrent not in RECURRENT_FORMS:
            raise UnsupportedOpError(
                f"recurrent={self.recurrent!r}: RecurrentNetwork exports as 'loop' or 'scan'"
            )
        if self.ir_version < 0:
            raise ValueError(f"ir_version={self.ir_version}: 0 (the opset's) or a version")
        parse_quantization(self.input_quantization)

    def options(self) -> ExportOptions:
        """The converter's options."""
        return ExportOptions(
            opset=self.opset,
            ir_version=self.ir_version or None,
            dynamic_batch=self.dynamic_batch,
            recurrent=self.recurrent,
            test_mode=self.test_mode,
            input_quantization=parse_quantization(self.input_quantization),
        )

    def call(self, model: Model) -> PassResult:
        from graphtools.convert.caffe2_to_onnx.model import export_model

        exported = export_model(model, self.options())
        model.predict_net = exported.predict_net
        model.init_net = None
        model.opset_imports = exported.opset_imports
        model.header = exported.header
        stats = {
            "onnx_ops": len(exported.predict_net),
            "initializers": len(exported.predict_net.initializers),
            "functions": len(exported.header.functions),
            "opset": self.opset,
        }
        return PassResult(model, True, stats)

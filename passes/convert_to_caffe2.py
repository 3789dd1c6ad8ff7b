"""Convert an ONNX model into a Caffe2 init_net/predict_net pair, inside the IR.

The graph's initializers (and top-level ``Constant`` outputs) become the init_net's fills, every
node is converted by the importer table (``graphtools.convert.onnx_to_caffe2``: calls of the
``caffe2``-domain functions ``convert-to-onnx`` writes become the Caffe2 ops they stand for), and
the predict_net declares the graph inputs' types (``Net.types``), so converting the pair back
needs no declared shapes. A model the importer refuses is left as it was.

Example (``w`` and ``b`` initializers, ``x`` declared ``float32[2, 4]``)::

    predict_net (onnx, opset 17)             init_net
      initializers: w, b                       #0 GivenTensorFill -> w
      #0 Gemm(x@0, w@0, b@0) -> y@1      =>    #1 GivenTensorFill -> b
                                             predict_net (x: float32[2, 4])
                                               #0 FC(x@0, w@0, b@0) -> y@1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import ONNX
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult, register_pass

__all__ = ["ConvertToCaffe2"]


@register_pass
@dataclass(frozen=True)
class ConvertToCaffe2(Pass):
    """Convert the ONNX model into a Caffe2 pair (see the module docstring).

    Stats: ``caffe2_ops`` (top-level ops of the predict_net), ``params`` (fills of the
    init_net), ``opset`` (the default-domain opset the model imported).
    """

    name: ClassVar[str] = "convert-to-caffe2"
    dialects: ClassVar[tuple[str, ...]] = (ONNX,)
    changes_interface: ClassVar[bool] = True
    changes_dialect: ClassVar[bool] = True

    def call(self, model: Model) -> PassResult:
        from graphtools.convert.onnx_to_caffe2.model import import_model

        opset = dict(model.opset_imports).get("", model.opset_imports.get("ai.onnx", 0))
        pair = import_model(model)
        model.predict_net = pair.predict_net
        model.init_net = pair.init_net
        model.opset_imports = {}
        model.header = None
        stats = {
            "caffe2_ops": len(pair.predict_net),
            "params": 0 if pair.init_net is None else len(pair.init_net),
            "opset": opset,
        }
        return PassResult(model, True, stats)

"""Converting an ONNX model to another opset with onnx's own version converter.

The model is written to bytes as it is (external data stays where it lies), converted by
``onnx.version_converter.convert_version``, and read back; the converter's adapters are the
only knowledge of how an op changes between opsets, none of ours.
"""

from __future__ import annotations

import warnings

import onnx

from graphtools.errors import UnsupportedOpError
from graphtools.ir import Model
from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes

__all__ = ["convert_opset"]


def convert_opset(model: Model, opset: int) -> Model:
    """``model`` converted to ``opset`` of the default domain (a new model; its external data
    is read from where ``model``'s lies).

    Raises:
        UnsupportedOpError: the converter has no adapter for an op of the model, or refuses
            the conversion.
    """
    proto = onnx.ModelProto.FromString(model_to_onnx_bytes(model))
    current = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            converted = onnx.version_converter.convert_version(proto, opset)
        except Exception as exc:  # the converter raises RuntimeError, ValidationError, ...
            text = " ".join(str(exc).split())[:400] or type(exc).__name__
            raise UnsupportedOpError(
                f"onnx's version converter cannot take this model from opset {current} to "
                f"{opset}: {text}"
            ) from exc
    base = None if model.predict_path is None else model.predict_path.parent
    loaded = model_from_onnx_bytes(converted.SerializeToString(), base_dir=base)
    loaded.predict_path = model.predict_path
    return loaded

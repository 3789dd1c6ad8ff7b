"""Extract a sub-net: the part of a model computing given outputs from given inputs, as
``onnx.utils.extract_model`` and Polygraphy's ``surgeon extract`` do.

``extract_pair`` cuts a Caffe2 pair (``graphtools.extract.caffe2``), ``extract_onnx`` an ONNX
model (``graphtools.extract.onnx_models``, by ``onnx.utils.Extractor``); both refuse, by name,
outputs the inputs do not determine (``SubNetError``). ``graphtools extract`` is the command.
Caffe2's ``Net.ClonePartial`` and detectron2's ``fuse_alias_placeholder`` are drop-ins in
``graphtools.compat`` (re-exported by ``graphtools.passes``).
"""

from graphtools.extract.caffe2 import ExtractedPair, extract_pair
from graphtools.extract.onnx_models import extract_onnx

__all__ = ["ExtractedPair", "extract_onnx", "extract_pair"]

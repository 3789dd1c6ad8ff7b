"""ONNX-dialect model -> Caffe2 pair: the converter table (``registry.CONVERTERS``, filled by
the per-op modules) and the model-level assembly (``model``)."""

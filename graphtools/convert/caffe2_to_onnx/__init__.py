"""Caffe2 pair -> ONNX-dialect model: the exporter table (``context.EXPORTERS``, filled by the
per-op modules) and the model-level assembly (``model``)."""

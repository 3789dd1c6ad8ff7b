"""Conversions between the dialects, as the libraries the conversion passes run.

``caffe2_to_onnx`` turns a Caffe2 pair into an ONNX-dialect model and ``onnx_to_caffe2`` the
reverse, each with its table of per-op converters and its model-level assembly; both read and
write the IR (``graphtools.ir``), never protobuf messages in the middle. The passes
``convert-to-onnx`` and ``convert-to-caffe2`` (``graphtools.passes``) run them, so ``verify``,
``--bisect`` and the pass manager's rollback cover a conversion like any other rewrite.
"""

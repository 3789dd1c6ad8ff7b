"""Caffe2 protobuf schemas (``caffe2.proto``, ``metanet.proto``) and their generated modules.

Installed as ``graphtools.proto``. Regenerate with ``python proto/regen.py`` after editing a
``.proto`` file; never edit the ``*_pb2`` files by hand.
"""

"""detectron2's ``fuse_copy_between_cpu_and_gpu``, over the ``fuse-copy-ops`` pass."""

from __future__ import annotations

from graphtools.compat._convert import run_pass, to_ir, write_back
from graphtools.ir import Model
from graphtools.proto import caffe2_pb2

__all__ = ["fuse_copy_between_cpu_and_gpu"]


def fuse_copy_between_cpu_and_gpu(predict_net: caffe2_pb2.NetDef) -> None:
    """detectron2's helper: fuse CPU<->GPU copy round trips of ``predict_net``, in place.

    Every reader of a round trip's result is rewired (detectron2 rewires only the first);
    the rules are ``graphtools.analysis.copies``'.
    """
    model = Model(to_ir(predict_net))
    if run_pass("fuse-copy-ops", model).modified:
        write_back(predict_net, model.predict_net)

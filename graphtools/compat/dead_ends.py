"""detectron2's ``remove_dead_end_ops``, over the ``remove-dead-ends`` pass."""

from __future__ import annotations

from graphtools.compat._convert import run_pass, to_ir
from graphtools.ir import Model
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import net_to_netdef

__all__ = ["remove_dead_end_ops"]


def remove_dead_end_ops(net_def: caffe2_pb2.NetDef) -> None:
    """detectron2's ``remove_dead_end_ops``: remove dead-end ops from ``net_def`` in place.

    Same rules as the ``remove-dead-ends`` pass (real liveness, side-effect ops kept, a net
    without external outputs left alone). Only the ops are written back, as upstream.
    """
    model = Model(to_ir(net_def))
    if run_pass("remove-dead-ends", model).modified:
        rebuilt = net_to_netdef(model.predict_net)
        del net_def.op[:]
        net_def.op.extend(rebuilt.op)

"""detectron2's ``rename_op_input`` and ``rename_op_output``, over the ``rename`` pass."""

from __future__ import annotations

from graphtools.compat._convert import run_pass, to_ir, write_back
from graphtools.errors import NoProducerError
from graphtools.ir import Model
from graphtools.proto import caffe2_pb2

__all__ = ["rename_op_input", "rename_op_output"]


def _check_op(model: Model, op_id: int) -> int:
    """``op_id`` as an index from the start: detectron2 indexes a list with it, so ``-1``
    is the last op and a bad index an ``IndexError``."""
    size = len(model.predict_net)
    if not -size <= op_id < size:
        raise IndexError(f"op #{op_id} does not exist: the net has {size} ops")
    return op_id % size


def rename_op_output(
    predict_net: caffe2_pb2.NetDef, op_id: int, output_id: int, new_name: str
) -> None:
    """detectron2's ``rename_op_output``: rename an op's output and all its readers, in place.

    Refuses (``IllegalRewriteError``) renames that collide with another value of ``new_name``.
    """
    model = Model(to_ir(predict_net))
    op_id = _check_op(model, op_id)
    if run_pass("rename", model, op=op_id, output=output_id, to=new_name).modified:
        write_back(predict_net, model.predict_net)


def rename_op_input(
    predict_net: caffe2_pb2.NetDef,
    init_net: caffe2_pb2.NetDef,
    op_id: int,
    input_id: int,
    new_name: str,
    from_producer: bool = False,
) -> None:
    """detectron2's ``rename_op_input``: rename an op's input in both nets, in place.

    Same refusals as detectron2 (the input is read by other ops and ``from_producer`` is
    false; ``from_producer`` with no producer raises ``NoProducerError``, a
    ``NotImplementedError`` as before), plus the collision check of the ``rename`` pass.
    """
    model = Model(to_ir(predict_net), None if init_net is None else to_ir(init_net))
    op_id = _check_op(model, op_id)
    if from_producer:
        _refuse_without_producer(model, op_id, input_id)
    options = {"op": op_id, "input": input_id, "to": new_name, "from_producer": from_producer}
    if run_pass("rename", model, **options).modified:
        write_back(predict_net, model.predict_net)
        if model.init_net is not None:
            write_back(init_net, model.init_net)


def _refuse_without_producer(model: Model, op_id: int, input_id: int) -> None:
    """detectron2 raises for an input no predict_net op produces, a net input included (the
    ``rename`` pass renames that one with every read of it)."""
    from graphtools.analysis.rename import op_slot

    net = model.predict_net
    ssa = net.ssa().ssa
    if not 0 <= input_id < len(net[op_id].inputs):
        return  # the pass says what is wrong with the slot
    blob = op_slot(ssa, op_id, input_id, outputs=False)
    if not any(blob in outs for _, outs in ssa):
        raise NoProducerError(
            f"cannot rename {blob} (input #{input_id} of op #{op_id} ({net[op_id].type})) "
            "from its producer: no predict_net op produces it; it probably comes from the "
            "init_net or is an input of the net"
        )

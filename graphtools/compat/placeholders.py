"""detectron2's ``fuse_alias_placeholder``: fold ``AliasWithName`` ops into the names they
carry.

detectron2's exporter marks blobs with ``AliasWithName(x) -> x {name="x", is_backward=0|1}``
placeholders (after tracing, the names are whatever the tracer gave). For each one, in net
order, the blob it reads is renamed to its ``name`` (``is_backward=1``: at its producer, with
every reader, so the name reaches back to where the value is made; ``is_backward=0``: at this
op only, in the predict_net and the init_net, which needs this op to be its only reader), then
the readers of its output (and the external output it is) read ``name``, and the placeholder
goes. The input rename goes through ``rename_op_input``, so it refuses what that refuses (a
name that would merge two values; a shared input without ``is_backward``).

Upstream renames the output too (``rename_op_output``) and removes the ``name -> name``
placeholders at the end; a reader of the producer's value after the placeholder then reads
the placeholder's output under the same name, which is the same value. Here the placeholder's
readers are rewired to its input instead, an edit the rewriter checks (a rename would be
refused as merging two versions of ``name``); the net that results is the same.
"""

from __future__ import annotations

from graphtools.compat.rename import rename_op_input
from graphtools.errors import AliasPlaceholderError
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net, net_to_netdef

__all__ = ["fuse_alias_placeholder"]


def _placeholder(op: caffe2_pb2.OperatorDef, index: int) -> tuple[str, bool]:
    """The ``(name, is_backward)`` of ``AliasWithName`` op #``index``, checked."""
    if len(op.input) != 1 or len(op.output) != 1:
        raise AliasPlaceholderError(
            f"op #{index} (AliasWithName) has {len(op.input)} inputs and {len(op.output)} "
            "outputs; a placeholder has one of each"
        )
    args = {arg.name: arg for arg in op.arg}
    if "name" not in args or not args["name"].HasField("s"):
        raise AliasPlaceholderError(f"op #{index} (AliasWithName) has no 'name' argument")
    backward = args.get("is_backward")
    return args["name"].s.decode(), bool(backward.i) if backward is not None else False


def fuse_alias_placeholder(predict_net: caffe2_pb2.NetDef, init_net: caffe2_pb2.NetDef) -> None:
    """detectron2's ``fuse_alias_placeholder(predict_net, init_net)``, in place (module
    docstring).

    Raises:
        AliasPlaceholderError: a placeholder without one input, one output and a ``name``
            (also an ``AssertionError``, as upstream asserted).
        IllegalRewriteError / NoProducerError: as ``rename_op_input``; the rewiring's check.

    Both nets are left as they were when it raises (the placeholders are fused on copies,
    written back once all of them went).
    """
    predict, init = caffe2_pb2.NetDef(), caffe2_pb2.NetDef()
    predict.CopyFrom(predict_net)
    init.CopyFrom(init_net)
    index = _next_placeholder(predict, 0)
    while index is not None:
        name, backward = _placeholder(predict.op[index], index)
        rename_op_input(predict, init, index, 0, name, from_producer=backward)
        net = as_net(predict)
        reads, writes = net.ssa().ssa[index]
        with net.edit() as edit:
            edit.replace_all_uses_with(writes[0], reads[0])
            edit.remove(index)
        predict.CopyFrom(net_to_netdef(net))
        index = _next_placeholder(predict, index)
    predict_net.CopyFrom(predict)
    init_net.CopyFrom(init)


def _next_placeholder(net: caffe2_pb2.NetDef, start: int) -> int | None:
    return next((i for i in range(start, len(net.op)) if net.op[i].type == "AliasWithName"), None)

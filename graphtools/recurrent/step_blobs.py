"""``retrieve_step_blobs``: copy the blobs of every step workspace out, to inspect them."""

from __future__ import annotations

from graphtools.executor import Workspace, run_op
from graphtools.ir import Net, Op
from graphtools.proto import caffe2_pb2
from graphtools.serde.codec import as_net

__all__ = ["retrieve_step_blobs"]


def retrieve_step_blobs(
    net: Net | caffe2_pb2.NetDef, prefix: str = "rnn", *, workspace: Workspace
) -> list[str]:
    """Copy the local blobs of the step workspaces of every RecurrentNetwork op of ``net``
    (after it ran in ``workspace``) into ``workspace``, and return their names.

    The k-th RecurrentNetwork op (k from 1) runs ``RecurrentNetworkBlobFetcher`` on its step
    workspaces into blob ``<prefix>_<k>``; blob ``b`` of step ``i`` becomes
    ``<prefix>_<b><i>``. Upstream ran in Caffe2's global workspace; here the workspace the net
    ran in is given.

    Raises:
        ExecutionError: an op has not run in ``workspace`` (no step workspaces to read).
    """
    names: list[str] = []
    count = 1
    for op in as_net(net):
        if op.type != "RecurrentNetwork":
            continue
        blob = f"{prefix}_{count}"
        count += 1
        run_op(
            Op("RecurrentNetworkBlobFetcher", [op.outputs[-1]], [blob], args={"prefix": prefix}),
            workspace,
        )
        names += [str(name) for name in workspace.fetch(blob).tolist()]
    return names

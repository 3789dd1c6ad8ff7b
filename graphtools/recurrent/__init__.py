"""Recurrent nets with Caffe2's names: ``recurrent_net`` builds a ``RecurrentNetwork`` op.

``recurrent_net(net, cell_net, inputs, initial_cell_inputs, links, ...)`` appends the op (its
backward step net built with ``graphtools.gradients``); the executor runs it and its gradient
(``graphtools.executor.kernels_recurrent``); the pass ``lower-recurrent-networks`` unrolls it
into a flat net. ``retrieve_step_blobs`` copies the step workspaces' blobs out after a run.
See ``docs/recurrent.md``.
"""

from __future__ import annotations

from graphtools.recurrent.builder import recurrent_net, set_rnn_executor_config
from graphtools.recurrent.step_blobs import retrieve_step_blobs

__all__ = ["recurrent_net", "retrieve_step_blobs", "set_rnn_executor_config"]

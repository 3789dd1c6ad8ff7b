"""Unroll ``RecurrentNetwork`` ops (and their gradient ops) into flat nets.

Each RecurrentNetwork op whose sequence length is known (the ``seq_len`` option, or the first
dim of its first input from the shape analysis, with ``input_shapes`` for the predict_net's
inputs; ``run``/``verify`` give their ``--shapes`` or ``shapes.txt``) is replaced by its
steps: copies of the step net with the blobs each step writes named ``<scope>/t<k>/<blob>``,
rows of the states read and written through the links, and the outputs (the ``_all``/``_last``
aliases) keeping their names and values. A ``RecurrentNetworkGradient`` op of a lowered op is
unrolled too, so the flat net's gradients can be compared with the op's.
What the unrolling does: ``graphtools.analysis.unroll_recurrent``. Ops whose sequence length
is unknown, or comes from an init_net's placeholder of a data input (which the data fed
replaces), or whose step workspaces or states other ops read, are kept (stat ``kept``, and a
warning naming the op and why).

Example (``lower-recurrent-networks{input_shapes=x:2x3x2;h0:3x2}``, a forward-only tanh RNN;
``fixtures/golden/lower-recurrent-networks``)::

    before
      %0 RecurrentNetwork(x@0, h0@0, w@0, b@0) -> h_all@1, h_last@1, rnn/step_workspaces@1
        (step_net: FC(h_prev, w, b) -> g; Sum(g, x_t) -> s; Tanh(s) -> h)
    after
      %0 ExpandDims(h0@0) -> rnn/h_prev_states/row0@1 {dims=[0]}
      %1 Split(x@0) -> rnn/t0/x@1, rnn/t1/x@1 {axis=0, split=[1, 1]}
      %2 FC(rnn/h_prev_states/row0@1, w@0, b@0) -> rnn/t0/g@1 {axis=2}
      %3 Sum(rnn/t0/g@1, rnn/t0/x@1) -> rnn/t0/s@1
      %4 Tanh(rnn/t0/s@1) -> rnn/t0/h@1
      %5 FC(rnn/t0/h@1, w@0, b@0) -> rnn/t1/g@1 {axis=2}
      %6 Sum(rnn/t1/g@1, rnn/t1/x@1) -> rnn/t1/s@1
      %7 Tanh(rnn/t1/s@1) -> rnn/t1/h@1
      %8 Concat(rnn/t0/h@1, rnn/t1/h@1) -> h_all@1, rnn/h_all_split_info@1 {axis=0}
      %9 Copy(rnn/t1/h@1) -> h_last@1
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from graphtools._core import CAFFE2
from graphtools.analysis.shapes import TensorType
from graphtools.analysis.unroll_recurrent import plan_recurrent_unrolls
from graphtools.errors import PreconditionError
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["LowerRecurrentNetworks"]

logger = logging.getLogger(__name__)


def _input_type(spec: str) -> tuple[str, TensorType]:
    """``name:3x2x4`` (float32), ``name:3x2x4:float64`` or ``name:3x2x4:?`` (element type
    unknown) as a blob name and its type."""
    parts = spec.rsplit(":", 2) if spec.count(":") >= 2 else spec.rsplit(":", 1)
    if len(parts) < 2 or not parts[0]:
        raise PreconditionError(
            f"lower-recurrent-networks: input_shapes entry {spec!r} is not name:3x2x4[:dtype]"
        )
    name, dims = parts[0], parts[1]
    try:
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        given = parts[2] if len(parts) == 3 else "float32"
        dtype = None if given == "?" else np.dtype(given)
    except (ValueError, TypeError) as exc:
        raise PreconditionError(
            f"lower-recurrent-networks: input_shapes entry {spec!r}: {exc}"
        ) from exc
    return name, TensorType(dtype, shape)


@dataclass(frozen=True)
class LowerRecurrentNetworks(Pass):
    """Replace RecurrentNetwork ops (and their gradient ops) by their unrolled steps.

    Options:
        seq_len: the sequence length of every RecurrentNetwork op (-1: from the shapes).
        input_shapes: types of the predict_net's inputs for the shape analysis, as
            ``name:3x2x4`` (float32), ``name:3x2x4:int64`` or ``name:3x2x4:?`` (any element
            type) (spec ``input_shapes=x:5x2x4;h0:2x4``).

    Stats: ``lowered`` (RecurrentNetwork ops), ``gradients_lowered``, ``ops_added``, ``kept``.

    Raises ``UnsupportedOpError`` for a step net the unrolling cannot express (the model is
    left unchanged).
    """

    name: ClassVar[str] = "lower-recurrent-networks"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    idempotent: ClassVar[bool] = True
    seq_len: int = -1
    input_shapes: tuple[str, ...] = ()

    def call(self, model: Model) -> PassResult:
        """Unroll every op the plan found."""
        inputs = dict(_input_type(spec) for spec in self.input_shapes)
        plan = plan_recurrent_unrolls(
            model, seq_len=None if self.seq_len < 0 else self.seq_len, inputs=inputs
        )
        net = model.predict_net
        for index, why in plan.kept.items():
            logger.warning("%s kept op #%d (%s): %s", self.name, index, net[index].type, why)
        added = 0
        with net.edit() as edit:
            for unroll in plan.unrolls:
                edit.expand(unroll.forward_index, unroll.forward_ops)
                added += len(unroll.forward_ops) - 1
                if unroll.gradient_index is not None:
                    edit.expand(unroll.gradient_index, unroll.gradient_ops)
                    added += len(unroll.gradient_ops) - 1
        stats = {
            "lowered": len(plan.unrolls),
            "gradients_lowered": sum(u.gradient_index is not None for u in plan.unrolls),
            "ops_added": added,
            "kept": len(plan.kept),
        }
        return PassResult(model, edit.changed, stats)

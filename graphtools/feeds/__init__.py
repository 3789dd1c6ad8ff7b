"""Inputs and parameters for running a model nobody gave data for (``graphtools verify``).

``synthesize(model, shapes)`` runs the model once, op by op, the way a Caffe2 predictor does,
and makes up every blob an op reads that nothing provides:

* data inputs: ``shapes`` (``--shapes``) when given, else a shape guessed from the first
  reader (``graphtools.analysis.input_shapes``); standard-normal float32 values drawn in
  input order from ``seed``, as ``testing.make_feeds`` draws them;
* inputs with a structural role (``ROLES``): indices within the rows they index, lengths
  summing to what they segment, ``im_info`` matching the image, anchors matching the
  scores, a shape vector for ``input_as_shape`` fills, ... (whatever ``shapes`` says about
  them is ignored: their shape follows from the other inputs; but an input image made by
  its role, the stylizer's BGRA image, takes the shape ``shapes`` gives it);
* parameters (a weight, a bias, a BN scale read at input position 1 or later) when random
  parameters are allowed: by default for a predict_net shipped without an init_net, and for
  the blobs of init_net ops that could not run here (a ``Load`` from a database that is not
  beside the file); shapes from ``graphtools.analysis.channels`` (channel counts planned
  from the net's own constraints, detection heads' 4-per-anchor and 4-per-class deltas
  included), values as ``testing.random_params`` draws them (small integers, of the first
  operand's type, for an operand of integer arithmetic: Caffe2 does not promote types);
* what a ``RecurrentNetwork``'s step net reads from outside (its references: parameters,
  sequence lengths): made while step 0 runs in a throwaway workspace set up as the kernel sets
  it up, so they fit the linked inputs; a made-up FC outside the loop whose output the step
  net needs wider makes the walk start again with that count.

An init_net placeholder for a data input (``analysis.input_shapes.placeholder_inputs``) is
replaced by a feed, and said so. Everything made is reported in the ``Synthesis`` so the
user can tell a verdict on made-up data from one on their own.

The parts, one job each: ``report`` (what was made), ``values`` (how made-up values are
held, and the most one made-up blob may hold), ``params`` (parameter values), ``roles`` (the
registry of inputs made to fit their reader), ``counts`` (output counts of made-up layers the
channel plan does not know), ``state`` (one walk's state, and the ``Retry`` a walk returns),
``make`` (making one missing input), ``dry_runs`` (throwaway runs of nested and step nets),
``walk`` (one walk of the model) and ``synthesis`` (``synthesize``: walks until one gets
through).
"""

from __future__ import annotations

from graphtools.feeds.params import FLOAT_TYPES, ParamMaker, float_view
from graphtools.feeds.report import MadeInput, SkippedOp, Synthesis
from graphtools.feeds.roles import ROLES
from graphtools.feeds.synthesis import synthesize, without_init_ops

__all__ = [
    "FLOAT_TYPES",
    "ROLES",
    "MadeInput",
    "ParamMaker",
    "SkippedOp",
    "Synthesis",
    "float_view",
    "synthesize",
    "without_init_ops",
]

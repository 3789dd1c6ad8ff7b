"""Append the backward pass of the predict_net (Caffe2's ``net.AddGradientOperators(ys)``).

For each blob in ``ys`` the gradient is seeded with ones (``ConstantFill(y) -> y_autogen_grad``)
and the gradient ops of ``graphtools.gradients`` are appended after the forward ops, with
Caffe2's names (``x_grad``, ``_x_grad_autosplit_0``) and rules (see ``docs/gradients.md``).
External inputs and outputs are left as they are, as upstream leaves them. A net that already
writes ``y_autogen_grad`` for every y already has its backward pass and is left alone, so the
pass reaches its fixpoint in one run.

Example (``add-gradients{ys=loss}``)::

    before
      #0 loss@1 = AveragedLoss(x@0)
    after
      #0 loss@1 = AveragedLoss(x@0)
      #1 loss_autogen_grad@1 = ConstantFill(loss@1)        value: 1.0
      #2 x_grad@1 = AveragedLossGradient(x@0, loss_autogen_grad@1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphtools._core import CAFFE2
from graphtools.errors import GradientMakerError, PreconditionError
from graphtools.gradients import add_gradient_operators
from graphtools.ir import Model
from graphtools.pass_infra import Pass, PassResult

__all__ = ["AddGradients"]


@dataclass(frozen=True)
class AddGradients(Pass):
    """Append the gradient ops of the predict_net for the blobs ``ys``.

    Options:
        ys: the blobs to differentiate (spec ``ys=loss`` or ``ys=loss;aux_loss``).

    Stats: ``gradient_ops`` (ops appended) and ``gradients`` (blobs that got a gradient).

    Raises ``PreconditionError`` when ``ys`` is empty or names a blob no op of the predict_net
    writes; the errors of ``GradientRegistry.GetBackwardPass`` (an op without a gradient, a
    gradient needing an overwritten blob) leave the model unchanged.
    """

    name: ClassVar[str] = "add-gradients"
    example: ClassVar[str] = "add-gradients{ys=prob}"
    dialects: ClassVar[tuple[str, ...]] = (CAFFE2,)
    idempotent: ClassVar[bool] = True
    ys: tuple[str, ...] = ()

    def requires(self, model: Model) -> None:
        """``ys`` is given and every y is written by an op of the predict_net."""
        if not self.ys:
            raise PreconditionError("add-gradients needs ys, e.g. add-gradients{ys=loss}")
        written = model.predict_net.written_names()
        missing = [y for y in self.ys if y not in written]
        if missing:
            raise PreconditionError(f"add-gradients: no op of the predict_net writes {missing}")

    def call(self, model: Model) -> PassResult:
        """Append the backward pass unless the net already has it."""
        self.requires(model)
        net = model.predict_net
        written = net.written_names()
        if all(y + "_autogen_grad" in written for y in self.ys):
            return PassResult(model, False, {"gradient_ops": 0, "gradients": 0})
        before = len(net)
        try:
            grad_map = add_gradient_operators(net, list(self.ys))
        except GradientMakerError as exc:  # Caffe2's text ends with the op's whole dump
            said = str(exc).split("\n", 1)[0].rstrip(".")
            raise GradientMakerError(
                f"add-gradients: {said} (the built-in makers: docs/gradients.md; one of your "
                "own: graphtools.gradients.GradientRegistry.RegisterGradient)"
            ) from exc
        return PassResult(
            model, True, {"gradient_ops": len(net) - before, "gradients": len(grad_map)}
        )

"""``GradientRegistry``: which gradient maker serves which op type, with Caffe2's names.

Two tables, looked up in Caffe2's order. Built-in makers (``builtin_gradient``) stand for the
C++ ones: the op is checked against its schema first, and every op they make gets
``is_gradient_op`` and the forward op's device option, engine and (unless the maker opts out)
arguments. Python makers registered with ``GradientRegistry.RegisterGradient`` come second
(Caffe2 registers Do, If and While there) and their ops are used exactly as returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from graphtools.errors import GradientMakerError
from graphtools.gradients._proto import OperatorDef, as_operator_def, create_operator, get_arg
from graphtools.gradients.backward import GradientIR
from graphtools.ir import Op

__all__ = [
    "BuiltinMaker",
    "GradientRegistry",
    "MakerContext",
    "NoGradient",
    "builtin_gradient",
]

GradientList = list[str | None]
PythonMaker = Callable[[OperatorDef, GradientList], tuple[Any, Sequence[str | None]]]


class MakerContext:
    """What a built-in maker sees: Caffe2's ``GradientMakerBase`` helpers.

    ``I(i)``/``O(i)`` name forward inputs/outputs, ``GO(i)`` the gradient of output ``i`` (an
    error when it is missing), ``GI(i)`` names and records the gradient of input ``i``
    (``<input>_grad``), ``set_dense(i, name)`` passes a gradient through without an op.
    """

    def __init__(self, op: OperatorDef, g_output: GradientList) -> None:
        self.op = op
        self.g_output = g_output
        self.g_input: GradientList = [None] * len(op.input)

    def I(self, i: int) -> str:  # noqa: E743  (Caffe2's names)
        return self.op.input[i]

    def O(self, i: int) -> str:  # noqa: E743
        return self.op.output[i]

    def GO(self, i: int) -> str:
        gradient = self.g_output[i]
        if gradient is None:
            raise GradientMakerError(f"Gradient of output {self.op.output[i]} is not provided!")
        return gradient

    def has_GO(self, i: int) -> bool:
        """Whether output ``i`` has a gradient (``!GradOut(i).IsEmpty()`` in Caffe2)."""
        return self.g_output[i] is not None

    def GI(self, i: int) -> str:
        name = self.op.input[i] + "_grad"
        self.g_input[i] = name
        return name

    def set_dense(self, i: int, name: str) -> None:
        self.g_input[i] = name

    def arg(self, name: str, default: Any = None) -> Any:
        """The value of argument ``name`` (``i``, ``f``, ``s``, ``ints``, ... as set)."""
        found = get_arg(self.op, name)
        if found is None:
            return default
        for field in ("i", "f", "s"):
            if found.HasField(field):
                return getattr(found, field)
        for field in ("ints", "floats", "strings"):
            if len(getattr(found, field)):
                return list(getattr(found, field))
        return default

    def has_arg(self, name: str) -> bool:
        return get_arg(self.op, name) is not None

    def make(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **args: Any
    ) -> OperatorDef:
        """A gradient op (``CreateOperatorDef``): arguments in keyword order."""
        return create_operator(op_type, list(inputs), list(outputs), **args)


@dataclass(frozen=True)
class BuiltinMaker:
    """A built-in (C++-style) gradient maker and the forward op's schema.

    Attributes:
        fn: ``fn(ctx) -> [gradient ops]``; ``None`` for Caffe2's ``NO_GRADIENT``.
        inputs / outputs: allowed counts, ``(min, max)`` with ``max=None`` for no bound.
        copy_arguments: whether the forward op's arguments are appended to every gradient op.
        should_not_do: Caffe2's ``SHOULD_NOT_DO_GRADIENT``: asking is an error.
    """

    fn: Callable[[MakerContext], list[OperatorDef]] | None
    inputs: tuple[int, int | None]
    outputs: tuple[int, int | None]
    copy_arguments: bool = True
    should_not_do: bool = False

    def schema_ok(self, op: OperatorDef) -> bool:
        def fits(count: int, bounds: tuple[int, int | None]) -> bool:
            low, high = bounds
            return count >= low and (high is None or count <= high)

        return fits(len(op.input), self.inputs) and fits(len(op.output), self.outputs)

    def __call__(
        self, op: OperatorDef, g_output: GradientList
    ) -> tuple[list[OperatorDef], GradientList]:
        if not self.schema_ok(op):
            raise GradientMakerError(
                "(GradientMaker) Operator def did not pass schema checking: "
                f"{op.type} with {len(op.input)} inputs and {len(op.output)} outputs "
                f"(the schema allows {_bounds(self.inputs)} inputs, {_bounds(self.outputs)} "
                "outputs)"
            )
        if self.should_not_do:
            raise GradientMakerError(f"One should not call gradient for operator {op.type}.")
        ctx = MakerContext(op, g_output)
        ops = [] if self.fn is None else self.fn(ctx)
        for grad_op in ops:
            grad_op.is_gradient_op = True
            if op.HasField("device_option"):
                grad_op.device_option.CopyFrom(op.device_option)
            if op.HasField("engine"):
                grad_op.engine = op.engine
            if self.copy_arguments:
                grad_op.arg.extend(op.arg)
        return ops, ctx.g_input


def _bounds(bounds: tuple[int, int | None]) -> str:
    low, high = bounds
    if high is None:
        return f"at least {low}"
    return str(low) if low == high else f"{low} to {high}"


_BUILTIN: dict[str, BuiltinMaker] = {}


def builtin_gradient(
    *op_types: str,
    inputs: tuple[int, int | None],
    outputs: tuple[int, int | None],
    copy_arguments: bool = True,
) -> Callable[
    [Callable[[MakerContext], list[OperatorDef]]], Callable[[MakerContext], list[OperatorDef]]
]:
    """Register the decorated function as the built-in gradient maker of ``op_types``."""

    def register(
        fn: Callable[[MakerContext], list[OperatorDef]],
    ) -> Callable[[MakerContext], list[OperatorDef]]:
        for op_type in op_types:
            _BUILTIN[op_type] = BuiltinMaker(fn, inputs, outputs, copy_arguments)
        return fn

    return register


def builtin_no_gradient(
    *op_types: str, inputs: tuple[int, int | None], outputs: tuple[int, int | None]
) -> None:
    """Caffe2's ``NO_GRADIENT(T)``: the op's inputs get no gradient."""
    for op_type in op_types:
        _BUILTIN[op_type] = BuiltinMaker(None, inputs, outputs)


def builtin_should_not_do(
    *op_types: str, inputs: tuple[int, int | None], outputs: tuple[int, int | None]
) -> None:
    """Caffe2's ``SHOULD_NOT_DO_GRADIENT(T)``: asking for the gradient is an error."""
    for op_type in op_types:
        _BUILTIN[op_type] = BuiltinMaker(None, inputs, outputs, should_not_do=True)


def _no_gradient_maker(
    op: OperatorDef, g_output: GradientList
) -> tuple[list[OperatorDef], GradientList]:
    return [], [None] * len(op.input)


class GradientRegistry:
    """Gradient makers by op type, and the backward pass built from them (Caffe2's names).

    Python makers are ``maker(op, g_output) -> (gradient_ops, g_input)`` with ``op`` an
    ``OperatorDef``, ``g_output`` one gradient name (or ``None``) per output, ``g_input`` one per
    input; ``gradient_ops`` may be a list, one op or ``None``.
    """

    gradient_registry_: ClassVar[dict[str, PythonMaker]] = {}

    @classmethod
    def RegisterGradient(cls, op_type: str) -> Callable[[PythonMaker | None], PythonMaker | None]:
        """Decorator registering a Python gradient maker for ``op_type``.

        ``RegisterGradient(op_type)(None)`` registers "no gradient" (every input gets ``None``).
        """

        def wrapper(func: PythonMaker | None) -> PythonMaker | None:
            cls.gradient_registry_[op_type] = _no_gradient_maker if func is None else func
            return func

        return wrapper

    register_gradient = RegisterGradient

    @classmethod
    def GetGradientForOp(
        cls, op: OperatorDef | Op, g_output: Sequence[str | None]
    ) -> tuple[list[OperatorDef], GradientList]:
        """The gradient ops and input gradients of one op: built-in maker first, then Python.

        Raises:
            GradientMakerError: no maker, a schema mismatch, or the maker refused the op.
        """
        msg = as_operator_def(op)
        g_out = [None if g is None else str(g) for g in g_output]
        builtin = _BUILTIN.get(msg.type)
        python = cls.gradient_registry_.get(msg.type)
        try:
            if builtin is None:
                raise GradientMakerError(f"Gradient maker for operator {msg.type} not implemented.")
            ops, g_input = builtin(msg, g_out)
        except GradientMakerError as exc:
            if python is None:
                raise GradientMakerError(
                    f"Exception when creating gradient for [{msg.type}]:{exc}.\nOp: \n{msg}"
                ) from exc
            made, python_g_input = python(msg, g_out)
            if made is None:
                ops = []
            elif isinstance(made, OperatorDef):
                ops = [made]
            else:
                ops = list(made)
            g_input = [
                None if g is None else (g if isinstance(g, tuple) else str(g))
                for g in python_g_input
            ]
        return ops, g_input

    get_gradient_for_op = GetGradientForOp

    @classmethod
    def GetBackwardPass(
        cls,
        operators: Sequence[OperatorDef | Op],
        ys: Mapping[str, str | None] | Sequence[str],
        ys_generate_gradient: bool = False,
    ) -> tuple[list[OperatorDef], dict[str, str]]:
        """The backward pass of ``operators`` for ``ys`` (Caffe2's ``IR.GetBackwardPass``).

        Args:
            operators: the forward ops (OperatorDef messages or IR ops; not modified).
            ys: blob names (each gets ``ConstantFill(y) -> y_autogen_grad`` of ones), or a dict
                ``{blob: gradient blob or None}``.
            ys_generate_gradient: accepted for Caffe2 compatibility; unused there too.

        Returns:
            ``(gradient ops, {blob: gradient blob})``; the map includes the ys themselves.

        Raises:
            GradientError: a gradient needs a blob version a later op overwrote, or
                accumulation cannot sum the gradients (also a ``RuntimeError``).
            GradientMakerError: an op has no gradient maker or does not match its schema.
            InvalidArgumentError: an orphan ``StopGradient`` output (also a ``ValueError``).
            TypeError: ``ys`` is neither a list nor a dict.
        """
        ir = GradientIR([as_operator_def(op) for op in operators], cls.GetGradientForOp)
        return ir.backward_pass(ys)

    get_backward_pass = GetBackwardPass


def NoGradient(op_type: str) -> None:
    """Register ``op_type`` as having no gradient (its inputs get ``None``)."""
    GradientRegistry.RegisterGradient(op_type)(None)

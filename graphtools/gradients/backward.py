"""Caffe2's gradient IR: play the forward ops, then walk them backwards emitting gradient ops.

This is ``caffe2.python.core.IR`` rule for rule (``semantics.md`` 1.6 and 2): its own blob
versioning (a blob first written without being read is version 0), the version checks on every
gradient op input, gradient generators, and the ``Sum`` that accumulates several gradients of
one blob version, placed right after the gradient ops of the version's first reader, with
``_<grad>_autosplit_<k>`` temporaries. Gradient makers are looked up through
``GradientRegistry.GetGradientForOp``. Only dense gradients are supported.

One fix: a gradient given for a y (``ys={"y": "g"}``) that ops also read is summed with the
gradients those ops give y; Caffe2 records no generator for it and drops it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from graphtools.errors import GradientError, InvalidArgumentError
from graphtools.gradients._proto import OperatorDef, create_operator
from graphtools.gradients.if_rename import disambiguate_grad_if_op_output
from graphtools.proto import caffe2_pb2

IS_AUTO_GEN_SUM_OPS_TAG = "is_auto_gen_sum_ops"
ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG = "only_keep_is_auto_gen_sum_ops_tag"

GradientFor = Callable[[OperatorDef, list[str | None]], tuple[list[OperatorDef], list[str | None]]]


class _OpSSA(NamedTuple):
    op: OperatorDef
    in_versions: dict[str, int]
    out_versions: dict[str, int]


@dataclass
class _Generator:
    """Where one gradient of a blob version comes from: output ``index`` of ``grad_op``, or a
    gradient passed through without an op (``grad_op`` is ``None``)."""

    grad_op: OperatorDef | None
    index: int | None
    gradient: str
    device_option: caffe2_pb2.DeviceOption
    given: bool = False  # a gradient passed in ys: no op, no device of its own


def device_option_equal(a: caffe2_pb2.DeviceOption, b: caffe2_pb2.DeviceOption) -> bool:
    """Caffe2's ``device_option_equal`` (node name and random seed ignored): two CPU options
    are equal; otherwise only the device ids are compared."""
    if not a.device_type or not b.device_type:
        return not a.device_type and not b.device_type
    return a.device_id == b.device_id


def _index_in(gradients: Sequence[str | None], name: str) -> int | None:
    for index, gradient in enumerate(gradients):
        if gradient is not None and gradient == name:
            return index
    return None


class GradientIR:
    """The forward ops played once, ready to build one backward pass (Caffe2's ``IR``).

    Raises:
        InvalidArgumentError: a ``StopGradient`` output no op reads (Caffe2's ``ValueError``).
    """

    def __init__(self, operators: Sequence[OperatorDef], gradient_for: GradientFor) -> None:
        self._gradient_for = gradient_for
        self.ssa: list[_OpSSA] = []
        self.frontier: defaultdict[str, int] = defaultdict(int)
        self.input_usages: defaultdict[str, defaultdict[int, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.gradient_frontier: dict[str, int] = {}
        self.gradient_generators: defaultdict[str, defaultdict[int, list[_Generator]]] = (
            defaultdict(lambda: defaultdict(list))
        )
        self._out_history: defaultdict[str, list[tuple[OperatorDef, int]]] = defaultdict(list)
        self._in_history: defaultdict[str, list[tuple[OperatorDef, int]]] = defaultdict(list)
        for op in operators:
            self._play(op)
        self._check_stop_gradients(operators)

    def _play(self, op: OperatorDef) -> None:
        in_versions: dict[str, int] = {}
        for name in op.input:
            version = self.frontier[name]
            in_versions[name] = version
            self.input_usages[name][version].append(len(self.ssa))
            self._in_history[name].append((op, version))
        out_versions: dict[str, int] = {}
        for name in op.output:
            if name in self.frontier:
                self.frontier[name] += 1
            out_versions[name] = self.frontier[name]
            self._out_history[name].append((op, self.frontier[name]))
        self.ssa.append(_OpSSA(op, in_versions, out_versions))

    def _check_stop_gradients(self, operators: Sequence[OperatorDef]) -> None:
        for index, op in enumerate(operators):
            if op.type == "StopGradient" and op.output and op.output[0] not in self.input_usages:
                raise InvalidArgumentError(
                    f"StopGradient's output '{op.output[0]}' is orphan (op #{index}): no op "
                    "reads it, so it stops nothing. You typically want the same blob as input "
                    "and output of StopGradient."
                )

    # -- the backward pass --------------------------------------------------------------------

    def backward_pass(
        self, ys: Mapping[str, str | None] | Sequence[str]
    ) -> tuple[list[OperatorDef], dict[str, str]]:
        """The gradient ops, in order, and the map from blob name to gradient blob name."""
        if isinstance(ys, Mapping):
            wanted = {str(y): (None if g is None else str(g)) for y, g in ys.items()}
        elif isinstance(ys, list | tuple):
            wanted = dict.fromkeys((str(y) for y in ys), None)
        else:
            raise TypeError("ys should either be a list or a dict.")
        for y in wanted:
            self.gradient_frontier[y] = self.frontier[y]
            self.input_usages[y][self.frontier[y]].append(len(self.ssa))
        input_to_grad, gradient_ops = self._initial_gradients(wanted)
        for index in reversed(range(len(self.ssa))):
            new_grads, ops = self._gradients_for_op(index, input_to_grad)
            input_to_grad.update(new_grads)
            gradient_ops += ops
            sum_ops, summed = self._accumulate(index)
            input_to_grad.update(summed)
            gradient_ops += sum_ops
        return gradient_ops, {k: v for k, v in input_to_grad.items() if v is not None}

    def _initial_gradients(
        self, ys: dict[str, str | None]
    ) -> tuple[dict[str, str | None], list[OperatorDef]]:
        input_to_grad: dict[str, str | None] = {}
        ops: list[OperatorDef] = []
        for y, gradient in ys.items():
            if gradient is None:
                fill = create_operator("ConstantFill", [y], [y + "_autogen_grad"], value=1.0)
                ops.append(fill)
                gradient = fill.output[0]
                generator = _Generator(fill, 0, gradient, fill.device_option)
            else:
                # Caffe2 records no generator for a given gradient, so when ops also read y
                # their gradients replace it instead of being summed with it.
                generator = _Generator(None, None, gradient, caffe2_pb2.DeviceOption(), True)
            self.gradient_generators[y][self.frontier[y]].append(generator)
            input_to_grad[y] = gradient
        return input_to_grad, ops

    def _gradients_for_op(
        self, index: int, input_to_grad: dict[str, str | None]
    ) -> tuple[dict[str, str | None], list[OperatorDef]]:
        op = self.ssa[index].op
        g_output = [input_to_grad.get(name) for name in op.output]
        if all(g is None for g in g_output) and op.type != "ZeroGradient":
            return {}, []
        ops, g_input = self._gradient_for(op, g_output)
        for gradient in g_input:
            if gradient is not None and not isinstance(gradient, str):
                raise GradientError(
                    f"the gradient maker of {op.type} returned a sparse gradient; "
                    "graphtools supports dense gradients only"
                )
        self._build_generators(index, ops, g_output, g_input)
        new: dict[str, str | None] = {}
        outputs = set(op.output)
        for name, gradient in zip(op.input, g_input, strict=False):
            if gradient is not None or name not in input_to_grad or name in outputs:
                new[name] = gradient
        return new, ops

    def _build_generators(
        self,
        index: int,
        grad_ops: list[OperatorDef],
        g_output: list[str | None],
        g_input: list[str | None],
    ) -> None:
        op, in_versions, _ = self.ssa[index]
        local: set[str] = set()
        for grad_op in grad_ops:
            for name in grad_op.input:
                self._check_input(name, g_output, index, local)
            local.update(grad_op.output)
            for position, output in enumerate(grad_op.output):
                input_index = _index_in(g_input, output)
                if input_index is not None:
                    input_name = op.input[input_index]
                    self.gradient_generators[input_name][in_versions[input_name]].append(
                        _Generator(
                            grad_op, position, g_input[input_index] or "", grad_op.device_option
                        )
                    )
        for input_index, gradient in enumerate(g_input[: len(op.input)]):
            if gradient and gradient not in local:
                input_name = op.input[input_index]
                self.gradient_generators[input_name][in_versions[input_name]].append(
                    _Generator(None, None, gradient, op.device_option)
                )
        for input_index, gradient in enumerate(g_input[: len(op.input)]):
            if gradient is not None:
                input_name = op.input[input_index]
                self.gradient_frontier[input_name] = in_versions[input_name]

    def _check_input(
        self, name: str, g_output: list[str | None], index: int, local: set[str]
    ) -> None:
        op, in_versions, out_versions = self.ssa[index]
        where = f"op #{index} ({op.type})"
        output_index = _index_in(g_output, name)
        if output_index is not None:
            output = op.output[output_index]
            expected = out_versions[output]
            current = self.gradient_frontier.get(output)
            if expected != current:
                raise GradientError(
                    f'Gradient name "{name}" is expected to correspond to version {expected} '
                    f'of "{output}", but currently we have version {current} (gradient of '
                    f"{where}).\n\n" + self._history(output, self._out_history, "out")
                )
        elif name in out_versions:
            if self.frontier[name] != out_versions[name]:
                raise GradientError(
                    f'Gradient operator needs output "{name}" at version {out_versions[name]}, '
                    f"but currently we have version {self.frontier[name]} (gradient of "
                    f"{where}).\n\n" + self._history(name, self._out_history, "out")
                )
        elif name in in_versions:
            if self.frontier[name] != in_versions[name]:
                raise GradientError(
                    f'Gradient operator needs input "{name}" at version {in_versions[name]}, '
                    f"but currently we have version {self.frontier[name]} (gradient of "
                    f"{where}).\n\n" + self._history(name, self._in_history, "in")
                )
        elif name not in local:
            raise GradientError(
                f'Blob name "{name}" not in the scope of operator: {where}, and is not '
                "generated by any of the local gradient operators."
            )

    @staticmethod
    def _history(name: str, history: Mapping[str, list[tuple[OperatorDef, int]]], kind: str) -> str:
        lines = [f"== Version history of blob [{name}]"]
        for op, version in history.get(name, []):
            lines.append(f"version ({kind}) {version} <-- {op.type}{list(op.input)}")
        return "\n".join(lines)

    # -- accumulation -------------------------------------------------------------------------

    def _accumulate(self, index: int) -> tuple[list[OperatorDef], dict[str, str]]:
        op, in_versions, _ = self.ssa[index]
        sum_ops: list[OperatorDef] = []
        summed: dict[str, str] = {}
        for name in dict.fromkeys(op.input):
            version = in_versions[name]
            usage = self.input_usages[name][version]
            if len(usage) <= 1 or usage[0] != index:
                continue
            generators = self.gradient_generators[name][version]
            if len(generators) < 2:
                continue
            options = [g.device_option for g in generators if not g.given]
            if not all(device_option_equal(d, options[0]) for d in options[1:]):
                raise GradientError(
                    f"Gradients for param ''{name}'' failed to verify: Unexpected behavior: "
                    "not all grad ops have the same device option."
                )
            ops, gradient = _dense_sum(generators, name)
            sum_ops += ops
            summed[name] = gradient
        return sum_ops, summed


def _dense_sum(generators: list[_Generator], name: str) -> tuple[list[OperatorDef], str]:
    out = next(
        (
            g.grad_op.output[g.index]
            for g in generators
            if g.grad_op is not None and g.index is not None
        ),
        name + "_grad",
    )
    inputs: list[str] = []
    count = 0
    first = True
    for generator in generators:
        grad_op, position = generator.grad_op, generator.index
        if grad_op is not None and position is not None:
            if first:
                first = False
                inputs.append(grad_op.output[position])
            else:
                renamed = f"_{grad_op.output[position]}_autosplit_{count}"
                count += 1
                _rename_output(grad_op, position, renamed)
                inputs.append(renamed)
        else:
            if generator.gradient == out:
                raise GradientError(
                    f"Gradients for param ''{name}'': the gradient output of empty gradient op "
                    "can not be the same as the normal name of the current input gradient."
                )
            inputs.append(generator.gradient)
    if out in inputs:
        position = inputs.index(out)
        inputs[0], inputs[position] = inputs[position], inputs[0]
    sum_op = create_operator("Sum", inputs, [out])
    _set_sum_device_option(sum_op, generators)
    return [sum_op], out


def _rename_output(grad_op: OperatorDef, position: int, new_name: str) -> None:
    if grad_op.type == "If":
        disambiguate_grad_if_op_output(grad_op, position, new_name)
    else:
        grad_op.output[position] = new_name


def _set_sum_device_option(sum_op: OperatorDef, generators: list[_Generator]) -> None:
    tag = f"{ONLY_KEEP_IS_AUTO_GEN_SUM_OPS_TAG}:1"
    if any(tag in g.device_option.extra_info for g in generators):
        sum_op.device_option.extra_info.append(f"{IS_AUTO_GEN_SUM_OPS_TAG}:1")
    else:
        first = next((g for g in generators if not g.given), generators[0])
        sum_op.device_option.CopyFrom(first.device_option)
        sum_op.device_option.extra_info.append(f"{IS_AUTO_GEN_SUM_OPS_TAG}:1")

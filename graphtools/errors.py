"""The one typed error hierarchy of graphtools.

Every error a user can trigger with bad input or an illegal rewrite is a ``GraphToolsError``;
its message says what went wrong, where (file, op index and type, versioned blob) and what to do.
Callers catch the family they care about; the CLI turns any of them into ``error: ...`` and
exit code 2.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path


class GraphToolsError(Exception):
    """Root of every error graphtools raises on purpose."""


class SerdeError(GraphToolsError):
    """A file could not be read or written as the format it was asked for.

    Attributes:
        path: the file concerned (``None`` for in-memory data).
        reason: what is wrong with it, without the path.
    """

    def __init__(self, path: str | Path | None, reason: str) -> None:
        self.path = None if path is None else Path(path)
        self.reason = reason
        where = f"{self.path}: " if self.path is not None else ""
        super().__init__(f"{where}{reason}")


class InvalidNetError(GraphToolsError):
    """A net is malformed, or an analysis found a contradiction in it."""


class MissingBlobError(InvalidNetError, KeyError):
    """A net names a blob nothing provides (an external output no op writes, say).

    Also a ``KeyError``, which Caffe2's and detectron2's helpers raised in these cases.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class StatusConflictError(InvalidNetError, RuntimeError):
    """Status (device) inference found two statuses for one blob, or an op mixing them.

    Also a ``RuntimeError``, which detectron2's ``_generic_status_identifier`` raised.
    """


class UnknownStatusError(InvalidNetError, NotImplementedError):
    """Status (device) inference left blobs whose status cannot be known.

    Also a ``NotImplementedError``, which detectron2's ``_generic_status_identifier`` raised.
    """


class ExecutionError(InvalidNetError):
    """An op could not run: a missing blob, or its kernel rejected the inputs or arguments.

    Attributes:
        op_index: position of the op in its net.
        op_type: the op's type.
        net_name: the net's name (``None`` when it has none).
        input_shapes: shapes of the inputs that were available, by blob name.
    """

    def __init__(
        self,
        message: str,
        *,
        op_index: int,
        op_type: str,
        net_name: str | None,
        input_shapes: Mapping[str, tuple[int, ...] | None] | None = None,
    ) -> None:
        self.op_index = op_index
        self.op_type = op_type
        self.net_name = net_name
        self.input_shapes = dict(input_shapes or {})
        super().__init__(message)


class MadeUpDataTooLargeError(InvalidNetError, MemoryError):
    """A blob that would be made up (a data input, a parameter) is over the size a made-up
    blob may hold: the shapes it follows from are wrong, or too big to run on made-up data.

    Also a ``MemoryError``, which numpy raised before the limit existed.

    Attributes:
        name: the blob.
        shape: the shape it would have had.
    """

    def __init__(self, message: str, *, name: str, shape: tuple[int, ...]) -> None:
        self.name = name
        self.shape = shape
        super().__init__(message)


class UnsupportedOpError(GraphToolsError):
    """An operation meets an op type it does not handle (no kernel, no rule)."""


class SubNetError(GraphToolsError, ValueError):
    """A sub-net cannot be cut as asked: a name the model does not have, an output the inputs
    do not determine (it needs a blob that is neither an input nor a parameter), or a cut that
    would run an op twice (once to make an input, once inside).

    Also a ``ValueError``, which ``onnx.utils.extract_model`` raises for bad names.
    """


class PartialCloneError(SubNetError, AssertionError):
    """Caffe2's ``Net.ClonePartial`` refused the cut (an output that is not defined, or ops
    that would also generate an input); also an ``AssertionError``, which upstream raised."""


class AliasPlaceholderError(InvalidNetError, AssertionError):
    """detectron2's ``fuse_alias_placeholder`` met an ``AliasWithName`` op it cannot fold (not
    one input and one output, or no ``name``); also an ``AssertionError``, which upstream
    raised."""


class IllegalRewriteError(GraphToolsError, ValueError):
    """A requested rewrite would change what the net computes.

    Subclasses ``ValueError`` because detectron2's ``IllegalGraphTransformError`` did, so user
    scripts with ``except ValueError`` keep working.
    """


class InvalidArgumentError(GraphToolsError, ValueError):
    """A function was called with an argument it cannot use (unknown style, bad device name).

    Subclasses ``ValueError``, which is what the upstream helpers raised for these cases.
    """


class NoProducerError(IllegalRewriteError, NotImplementedError):
    """``from_producer`` was asked for an input no predict_net op produces.

    Also a ``NotImplementedError``, which detectron2 raised in this case.
    """


class PipelineSpecError(GraphToolsError):
    """A pipeline spec or a pass registration is wrong: unknown pass or option, bad value."""


class PreconditionError(GraphToolsError):
    """A pass was asked to run on a model that does not meet its ``requires`` check."""


class PostconditionError(GraphToolsError):
    """A pass produced a model that fails its own ``ensures`` check."""


class PassError(GraphToolsError):
    """A pass failed inside a pipeline; the model was rolled back to its state before it.

    Attributes:
        pass_name: pipeline name of the failing pass.
        previous: pipeline names of the passes that ran before it, in order.
    """

    def __init__(self, pass_name: str, previous: list[str], reason: str) -> None:
        self.pass_name = pass_name
        self.previous = list(previous)
        after = f" (after {', '.join(previous)})" if previous else ""
        super().__init__(f"pass '{pass_name}' failed{after}: {reason}")


class GradientError(GraphToolsError, RuntimeError):
    """A backward pass cannot be built as asked: a gradient needs a blob version that a later
    op overwrote, or several gradients of one blob cannot be summed.

    Subclasses ``RuntimeError``, which Caffe2's gradient IR raised in these cases.
    """


class GradientMakerError(GraphToolsError):
    """No gradient could be made for an op: no maker is registered for its type, the op does
    not match its schema, or the maker refused it (a missing output gradient it needs).

    Caffe2 raised a bare ``Exception("Exception when creating gradient for [T]: ...")``;
    the message keeps that form.
    """


class ControlFlowError(GraphToolsError, AssertionError):
    """A Do, If or While op is malformed for its gradient (bad bindings, missing subnet).

    Subclasses ``AssertionError``, which Caffe2's ``control_ops_grad`` raised (its checks were
    ``assert`` statements); here they hold even under ``python -O``.
    """


class RecurrentNetError(GraphToolsError, AssertionError):
    """``recurrent_net`` cannot build the RecurrentNetwork op it was asked for (not exactly one
    sequence input, a recomputed op writing blobs not declared for recomputation).

    Subclasses ``AssertionError``, which Caffe2's ``recurrent.py`` raised (its checks were
    ``assert`` statements); here they hold even under ``python -O``.
    """


class RecurrentLinkError(GraphToolsError, KeyError):
    """``recurrent_net`` found a recurrent input without a link, or a cell input the backward
    step gives no gradient.

    Also a ``KeyError``, which Caffe2's ``recurrent.py`` raised (a failed dict lookup).
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class UsageError(GraphToolsError):
    """The command line asks for something that cannot be done (e.g. overwrite the input)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'data'?)`` when a choice is close to ``name`` (the same but for case,
    or a near spelling), else ``""``: for messages refusing an unknown name."""
    import difflib  # on an error path only: every command imports this module at start

    listed = list(choices)
    same = [choice for choice in listed if choice.lower() == name.lower()]
    close = same or difflib.get_close_matches(name, listed, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def refuse_unknown_inputs(
    given: Iterable[tuple[str, Iterable[str]]], inputs: Collection[str], of: str
) -> None:
    """Refuse a name given for no input (a misspelt one would be guessed or dropped silently):
    ``given`` pairs what was given (``"a shape is"``, ``"values are"``) with the names it was
    given for, ``inputs`` are the inputs of ``of`` (``"the model"``).

    Raises:
        InvalidArgumentError: the first name that is not one of ``inputs``, with did-you-mean
            and the inputs (the first eight, sorted).
    """
    for what, names in given:
        for name in names:
            if name not in inputs:
                shown = sorted(inputs)
                listed = ", ".join(shown[:8]) + (", ..." if len(shown) > 8 else "")
                raise InvalidArgumentError(
                    f"{what} given for {name!r}, which is not an input of {of}"
                    f"{did_you_mean(name, inputs)}; its inputs are: {listed or 'none'}"
                )

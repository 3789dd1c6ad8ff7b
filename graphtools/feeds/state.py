"""The state of one walk of ``synthesize`` and what a walk returns when it must start again.

A walk runs the model once, op by op, making what is missing (``feeds.walk``); what it makes
can turn out not to fit an op further on. It then returns a ``Retry`` saying what to change,
and ``synthesize`` starts a new walk with that knowledge (``Attempt``): no exception carries
it, so every part of the walk says in its signature that it may ask for one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphtools.analysis.recurrent import ForwardProgram
from graphtools.executor import Int8Tensor, Workspace
from graphtools.feeds.params import ParamMaker
from graphtools.feeds.report import MadeInput, Synthesis
from graphtools.feeds.values import as_array
from graphtools.ir import Model, Net

__all__ = ["Attempt", "Retry", "WalkState"]


@dataclass(frozen=True)
class Retry:
    """The walk must start again: made-up layer #``layer`` needs ``count`` outputs, or (with
    ``image``) the guessed image input ``image[0]`` the size of index ``image[1]``."""

    layer: int = -1
    count: int = 0
    image: tuple[str, int] | None = None


@dataclass
class Attempt:
    """What the walks so far learnt, for the next one.

    Attributes:
        overrides: output counts of made-up layers, by op index of the predict_net.
        generic: for inputs nothing says the rank of, the index of the generic shape to try.
        image_skip: for guessed images, how many of the image sizes to skip.
    """

    overrides: dict[int, int] = field(default_factory=dict)
    generic: dict[str, int] = field(default_factory=dict)
    image_skip: dict[str, int] = field(default_factory=dict)

    def learn(self, retry: Retry) -> None:
        """Take in what a walk asked for."""
        if retry.image is not None:
            self.image_skip[retry.image[0]] = retry.image[1]
        else:
            self.overrides[retry.layer] = retry.count


class WalkState:
    """Everything one walk reads and makes: the model, what the user gave, the workspace, the
    random generators, the parameter makers planned per net, and the ``Synthesis`` so far."""

    def __init__(
        self,
        model: Model,
        shapes: Mapping[str, Sequence[int]],
        values: Mapping[str, Any],
        seed: int,
        random_params: bool | None,
        attempt: Attempt,
    ) -> None:
        self.model = model
        self.shapes = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        self.values = dict(values)
        self.seed = seed
        self.random_params = random_params
        self.overrides = dict(attempt.overrides)
        self.generic = dict(attempt.generic)
        self.image_skip = dict(attempt.image_skip)
        self.image_guesses: dict[str, int] = {}
        """Guessed image inputs and the index of the size they got."""
        self.generic_made: dict[str, int] = {}
        """Inputs given a generic shape, and its index."""
        self.result = Synthesis()
        self.ws = Workspace(seed=seed)
        self.rng = np.random.default_rng([seed, 1])
        self.param_rng = np.random.default_rng([seed, 2])
        self.makers: dict[int, tuple[Net, ParamMaker]] = {}
        """The float view and parameter maker of each net, by ``id``."""
        self.programs: dict[int, ForwardProgram] = {}
        """Forward programs of the RecurrentNetwork ops dry-run, by ``id`` of their step net."""
        self.image: tuple[int, int] | None = None
        self.remake: set[str] = set()
        """Blobs the init_net fills that the walk makes again (input image placeholders)."""
        self.placeholders: set[str] = set()

    @property
    def params_allowed(self) -> bool:
        """Whether missing parameters may be made up (see ``synthesize``'s ``random_params``)."""
        if self.random_params is not None:
            return self.random_params
        return self.model.init_net is None or bool(self.result.skipped_ops)

    def remember(self, name: str, value: Any, origin: str, reason: str) -> None:
        """Record a made data input and feed it in the report (an Int8 blob by its quantized
        values' dtype, uint8, which an ONNX export takes too)."""
        array = value.values if isinstance(value, Int8Tensor) else as_array(value)
        self.result.inputs.append(
            MadeInput(name, tuple(array.shape), str(array.dtype), origin, reason)
        )
        self.result.feeds[name] = value

"""graphtools' pytest plugin: regression tests for your own fixture nets.

Installed with graphtools (entry point ``pytest11``), so any test suite gets:

* ``--update-goldens``: rewrite golden files from the current output instead of comparing;
  the end of the run lists the files whose content changed: review the diff, then commit.
  (``GRAPHTOOLS_UPDATE_GOLDENS=1`` does the same.)
* ``assert_matches_golden(text, path)`` and ``assert_net_matches_golden(net_or_model, path)``:
  compare the canonical dump (``graphtools.printer``) with a golden file; a missing golden
  file is written and the test fails, asking for a review. Values the dump shows in part
  (weights, tensors, lists cut after 8 items) end with a digest of their content, so a
  changed weight fails the test too.
* ``assert_models_equivalent(before, after, ...)``: run both with the reference executor on
  the same feeds (made up when not given, see ``graphtools.feeds``) and fail with a table of
  the largest differences per output.
* fixtures: ``load_model`` (a function: model folder or predict_net file, with the init_net
  beside it, to a ``graphtools.Model``), ``update_goldens`` (whether ``--update-goldens`` is
  on) and ``golden`` (``golden.check(text_or_net, path)``). Both fixtures resolve a relative
  path beside the test file, whatever the working directory.

Example::

    def test_my_pipeline_keeps_outputs(load_model, golden):
        model = load_model("models/detector")
        before = model.copy()
        PassManager.parse("default")(model)
        assert_models_equivalent(before, model, shapes={"data": (1, 3, 64, 64)})
        golden.check(model, "goldens/detector.txt")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from graphtools._core import ONNX
from graphtools.errors import PreconditionError
from graphtools.ir import Model, Net, expect_model

if TYPE_CHECKING:
    from graphtools.testing import OutputDiff

__all__ = [
    "GoldenChecker",
    "MadeUpParameters",  # noqa: F822 (given by __getattr__, from graphtools.testing)
    "assert_matches_golden",
    "assert_models_equivalent",
    "assert_net_matches_golden",
    "updating_goldens",
]


def __getattr__(name: str) -> Any:
    # ``MadeUpParameters`` lives with the check in graphtools.testing, imported on first use
    # so that loading the plugin (every pytest run of a user) stays light.
    if name == "MadeUpParameters":
        from graphtools.testing import MadeUpParameters

        return MadeUpParameters
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ENV = "GRAPHTOOLS_UPDATE_GOLDENS"
_STATE: dict[str, bool] = {"update": False}
_REWRITTEN: list[Path] = []
"""Golden files whose content an update changed, in this run."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphtools")
    group.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="graphtools: rewrite golden files from the current output (review the diff)",
    )


def pytest_configure(config: pytest.Config) -> None:
    _STATE["update"] = bool(config.getoption("--update-goldens", default=False))
    _REWRITTEN.clear()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the golden files this run wrote (new, or their content changed), for review."""
    if _REWRITTEN:
        terminalreporter.write_line(
            f"graphtools: golden files written (review the diff): {len(_REWRITTEN)}"
        )
        for path in _REWRITTEN:
            terminalreporter.write_line(f"  {path}")


_OFF = frozenset({"", "0", "false", "no", "off"})
"""Values of the env variable that leave golden files alone (case aside)."""


def updating_goldens() -> bool:
    """Whether golden files are being rewritten (``--update-goldens`` or the env variable set
    to anything but empty, 0, false, no or off)."""
    return _STATE["update"] or os.environ.get(_ENV, "").strip().lower() not in _OFF


def _dump(value: Net | Model | str) -> str:
    from graphtools.printer import print_model, print_net

    if isinstance(value, str):
        return value
    if isinstance(value, Model):
        return print_model(value, digests=True)
    return print_net(value, "net", digests=True) + "\n"


def assert_matches_golden(text: str, path: str | Path, *, update: bool | None = None) -> None:
    """Fail unless ``text`` equals the golden file at ``path``.

    With ``update`` (default: ``--update-goldens``) the file is rewritten instead. A missing
    file is written and the test fails so that a person reviews it.
    """
    golden = Path(path)
    rewrite = updating_goldens() if update is None else update
    if rewrite or not golden.exists():
        existed = golden.exists()
        if existed and golden.read_text() == text:
            return
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        if update is None or updating_goldens():  # not a caller's own update=True
            _REWRITTEN.append(golden.resolve())
        if not rewrite:
            pytest.fail(f"{golden} did not exist; it was written: review it and commit it")
        return
    expected = golden.read_text()
    if text != expected:
        import difflib

        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                str(golden),
                "actual",
            )
        )
        pytest.fail(f"golden mismatch for {golden} (rerun with --update-goldens):\n{diff}")


def assert_net_matches_golden(
    net: Net | Model, path: str | Path, *, update: bool | None = None
) -> None:
    """Fail unless the canonical dump of ``net`` (or a whole model) equals the golden file."""
    assert_matches_golden(_dump(net), path, update=update)


def assert_models_equivalent(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
) -> None:
    """Fail unless both models compute the same outputs: a Caffe2 pair as
    ``graphtools.testing.assert_models_equivalent`` checks it (on the reference executor), an
    ONNX model on onnxruntime, its inputs made up from their declared types without
    ``feeds``. Given neither ``rtol`` nor ``atol``: 1e-5 and 1e-6, and an ONNX model's
    half-precision output at ``testing.HALF_TOLERANCES`` (as ``verify`` compares them)."""
    from graphtools import testing

    expect_model(before, "assert_models_equivalent")
    expect_model(after, "assert_models_equivalent")
    by_precision = rtol is None and atol is None
    rtol = 1e-5 if rtol is None else rtol
    atol = 1e-6 if atol is None else atol
    if ONNX not in (before.dialect, after.dialect):
        testing.assert_models_equivalent(before, after, feeds, rtol, atol, shapes, seed)
        return
    diffs = _compare_onnx(before, after, feeds, rtol, atol, shapes or {}, seed, by_precision)
    testing.assert_no_difference(diffs, rtol, atol)


def _compare_onnx(
    before: Model,
    after: Model,
    feeds: Mapping[str, Any] | None,
    rtol: float,
    atol: float,
    shapes: Mapping[str, Sequence[int]],
    seed: int,
    by_precision: bool,
) -> list[OutputDiff]:
    """``compare_models`` of two ONNX models, on onnxruntime (as ``verify`` runs them);
    ``by_precision``: half-precision outputs at ``testing.HALF_TOLERANCES`` at least."""
    from graphtools.onnx.runtime import feeds_for, graph_inputs, run_model, seeded_inputs
    from graphtools.testing import compare_outputs, with_half_precision

    if before.dialect != after.dialect:
        raise PreconditionError(
            f"cannot compare a {before.dialect} model with a {after.dialect} one here; "
            "graphtools.onnx.compare_with_onnxruntime compares a pair with its ONNX export"
        )
    specs = graph_inputs(before)
    if feeds is None:
        feeds = seeded_inputs(before, shapes, seed)[0]
    else:
        taken = [spec.name for spec in specs]
        for name in feeds:
            if name not in taken and name not in before.predict_net.initializers:
                from graphtools.errors import did_you_mean

                raise PreconditionError(
                    f"feeds name {name!r}, which is no input of the model"
                    f"{did_you_mean(name, taken)}; its inputs are: {', '.join(taken) or 'none'}"
                )
    ran_before = run_model(before, feeds)
    ran_after = run_model(after, feeds_for(after, feeds, [s.name for s in specs]))
    if set(ran_before) != set(ran_after) and len(ran_before) == len(ran_after):
        ran_after = dict(zip(ran_before, ran_after.values(), strict=True))  # renamed outputs
    per = with_half_precision(ran_before, rtol, atol) if by_precision else None
    return compare_outputs(ran_before, ran_after, rtol=rtol, atol=atol, per_output=per)


class GoldenChecker:
    """The ``golden`` fixture: ``golden.check(text_or_net_or_model, path)``; paths are
    relative to the test file's folder."""

    def __init__(self, root: Path, update: bool) -> None:
        self.root = root
        self.update = update

    def check(self, value: Net | Model | str, path: str | Path) -> None:
        """Compare ``value``'s dump with the golden file (see ``assert_matches_golden``)."""
        assert_matches_golden(_dump(value), self.root / path, update=self.update or None)


@pytest.fixture
def update_goldens() -> bool:
    """Whether ``--update-goldens`` is on."""
    return updating_goldens()


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """Golden-file checks relative to the test file's folder."""
    return GoldenChecker(Path(str(request.path)).parent, updating_goldens())


@pytest.fixture
def load_model(request: pytest.FixtureRequest) -> Callable[..., Model]:
    """A loader: ``load_model(path, init=None)`` for a model folder or a predict_net file
    (its init_net beside it is found as the CLI finds it); relative paths are beside the test
    file, as ``golden``'s are."""
    from graphtools.serde import load_model as load_pair
    from graphtools.serde import load_model_dir
    from graphtools.serde.pairing import find_init_beside

    root = Path(str(request.path)).parent

    def load(path: str | Path, init: str | Path | None = None) -> Model:
        source = root / path
        if source.is_dir():
            return load_model_dir(source, allow_empty=True)
        init_path = root / init if init is not None else find_init_beside(source)
        return load_pair(source, init_path, allow_empty=True)

    return load

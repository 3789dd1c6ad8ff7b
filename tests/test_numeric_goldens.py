"""Every golden case of fixtures/golden, checked numerically: the pipeline keeps the outputs.

Each case's ``pipeline.txt`` carries a ``shapes:`` line giving input shapes that make its net
valid. A case is skipped, with the reason computed from the case, when the pipeline refuses it
(nothing to compare) or when an op type has no executor kernel. Any other failure fails the
test, and so does a case whose inputs have no shape, so a new case cannot be left unchecked
silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURES

from graphtools.errors import GraphToolsError
from graphtools.executor import KERNELS
from graphtools.golden import GoldenCase, find_cases
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import PassManager
from graphtools.testing import (
    assert_models_equivalent,
    model_inputs,
)

GOLDEN_ROOT = FIXTURES / "golden"
CASES = find_cases(GOLDEN_ROOT)


def _ops(net: Net) -> Iterator[Op]:
    for op in net:
        yield op
        for _, nested in op.nested_nets():
            yield from _ops(nested)


def _kernel_less_types(model: Model) -> list[str]:
    return sorted({op.type for net in model.nets() for op in _ops(net)} - KERNELS.keys())


@pytest.mark.parametrize("folder", CASES, ids=[str(c.relative_to(GOLDEN_ROOT)) for c in CASES])
def test_golden_case_keeps_outputs(folder: Path) -> None:
    case = GoldenCase.load(folder)
    before = case.load_model()
    after = case.load_model()
    try:
        PassManager.parse(case.pipeline)(after)
    except GraphToolsError as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        pytest.skip(f"the pipeline refuses this case ({type(cause).__name__}): nothing to compare")
    missing_kernels = _kernel_less_types(before)
    if missing_kernels:
        pytest.skip(f"op types {missing_kernels} have no executor kernel")
    unshaped = [name for name in model_inputs(before) if name not in case.shapes]
    if unshaped:
        pytest.fail(
            f"inputs {unshaped} have no shape: add them to a 'shapes:' line of pipeline.txt"
        )
    # Interface-renaming pipelines (ssa-rewrite{style=all}) are matched by position.
    assert_models_equivalent(before, after, shapes=case.shapes)

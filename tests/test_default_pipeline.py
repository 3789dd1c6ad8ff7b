"""The default pipeline over every real NetDef in ../shared/fixtures-real.

Each file goes through ``default`` without error and without a new verify finding, reaches a
fixpoint, and keeps its interface unless a Reshape chain's params were dropped. Published pairs
are loaded with their init_net so that params are known as params.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_REAL

from graphtools.errors import SerdeError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.serde import find_model_files, load_model
from graphtools.wellformed import verify


def _real_files() -> list[Path]:
    if not SHARED_REAL.is_dir():
        return []
    return sorted(p for p in SHARED_REAL.rglob("*") if p.suffix in (".pb", ".pbtxt"))


def _load(path: Path) -> Model:
    """The model a user would load for ``path``: its folder's pair when it is that pair."""
    try:
        predict, init = find_model_files(path.parent)
    except SerdeError:
        predict, init = path, None
    try:
        if predict == path and init is not None:
            return load_model(path, init, allow_empty=True)
        return load_model(path, allow_empty=True)
    except SerdeError as exc:
        pytest.skip(f"not a NetDef: {exc.reason}")


@pytest.mark.skipif(not SHARED_REAL.is_dir(), reason=f"{SHARED_REAL} is absent")
@pytest.mark.parametrize("path", _real_files(), ids=lambda p: str(p.relative_to(SHARED_REAL)))
def test_default_pipeline_on_real_net(path: Path) -> None:
    model = _load(path)
    before = {(f.kind, f.blob) for f in verify(model)}
    outputs = model.predict_net.external_outputs
    records = PassManager.parse("default")(model)
    assert records[-1].modified is False or len(records) == 0
    assert {(f.kind, f.blob) for f in verify(model)} <= before
    assert model.predict_net.external_outputs == outputs
    again = PassManager.parse("default")(model)
    assert not any(record.modified for record in again)


def test_hungmingwu_loses_its_reshape_before_fc() -> None:
    folder = SHARED_REAL / "HungMingWu-pytorch_caffe2_cpp_binding"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    model = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    assert "Reshape" in {op.type for op in model.predict_net}
    PassManager.parse("default")(model)
    assert "Reshape" not in {op.type for op in model.predict_net}

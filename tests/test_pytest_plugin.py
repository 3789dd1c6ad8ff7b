"""graphtools' pytest plugin, as a user's test suite meets it: registered under ``pytest11``,
``--update-goldens``, golden and equivalence assertions, the model fixtures."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from onnx import TensorProto, helper, numpy_helper

from graphtools.ir import Model, Op
from graphtools.pass_infra import PassManager
from graphtools.printer import print_model
from graphtools.pytest_plugin import (
    assert_matches_golden,
    assert_models_equivalent,
    assert_net_matches_golden,
)
from graphtools.serde import load_model_dir
from graphtools.serde.onnx_codec import model_from_onnx_bytes

TINY = FIXTURES / "models" / "tiny_export"

USER_TESTS = f'''
from graphtools.pass_infra import PassManager
from graphtools.pytest_plugin import assert_models_equivalent


def test_pipeline_keeps_outputs(load_model, golden):
    model = load_model("{TINY}")
    before = model.copy()
    PassManager.parse("default")(model)
    assert_models_equivalent(before, model)
    golden.check(model, "goldens/tiny.txt")


def test_fixture_says_whether_goldens_are_updated(update_goldens):
    assert isinstance(update_goldens, bool)
'''


def test_the_plugin_is_published_under_pytest11() -> None:
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert found.get("graphtools") == "graphtools.pytest_plugin"


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_users_suite_writes_checks_and_updates_goldens(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(USER_TESTS)
    golden = tmp_path / "goldens" / "tiny.txt"
    first = _pytest(tmp_path)
    assert first.returncode == 1 and "did not exist; it was written" in first.stdout
    assert golden.read_text().startswith("net init_net 'tiny_export_init'")
    assert _pytest(tmp_path).returncode == 0
    golden.write_text(golden.read_text().replace("Relu", "Tanh", 1))
    stale = _pytest(tmp_path)
    assert stale.returncode == 1
    assert "golden mismatch" in stale.stdout and "-  %1 Tanh" in stale.stdout
    assert _pytest(tmp_path, "--update-goldens").returncode == 0
    assert "Tanh" not in golden.read_text()
    assert "--update-goldens" in _pytest(tmp_path, "--help").stdout


def _retyped(model: Model, old: str, new: str) -> Model:
    """A copy of ``model`` whose first ``old`` op of the predict_net is a ``new`` one."""
    broken = model.copy()
    net = broken.predict_net
    index = next(i for i, op in enumerate(net) if op.type == old)
    net.replace_op(index, net[index].replace(type=new))
    return broken


def test_assertions_fail_on_what_differs(tmp_path: Path) -> None:
    model = load_model_dir(TINY)
    broken = _retyped(model, "Relu", "Sigmoid")
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(model, broken)
    cleaned = model.copy()
    PassManager.parse("default")(cleaned)
    assert_models_equivalent(model, cleaned)
    path = tmp_path / "g.txt"
    assert_net_matches_golden(model.predict_net, path, update=True)
    assert_net_matches_golden(model.predict_net, path)
    with pytest.raises(pytest.fail.Exception, match="golden mismatch"):
        assert_net_matches_golden(broken.predict_net, path)
    with pytest.raises(pytest.fail.Exception, match="did not exist"):
        assert_matches_golden("text\n", tmp_path / "new.txt")
    assert (tmp_path / "new.txt").read_text() == "text\n"


def _onnx_model(weight: np.ndarray, shift: np.ndarray) -> Model:
    """A Gemm with an initializer and an Add of a Constant node's tensor, loaded."""
    nodes = [
        helper.make_node("Gemm", ["x", "w"], ["h"]),
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(shift)),
        helper.make_node("Add", ["h", "c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model_from_onnx_bytes(model.SerializeToString())


def test_goldens_fail_when_a_weight_changes(tmp_path: Path) -> None:
    """A golden pins every weight: a Caffe2 fill's values past the eighth the dump shows, an
    ONNX initializer and a Constant node's tensor, which the dump shows in brief."""
    model = load_model_dir(TINY)
    path = tmp_path / "tiny.txt"
    assert_net_matches_golden(model, path, update=True)
    init = model.init_net
    assert init is not None
    index, fill = next((i, op) for i, op in enumerate(init) if len(op.arg("values") or ()) > 8)
    values = list(fill.arg("values"))
    values[-1] += 1.0
    changed = model.copy()
    assert changed.init_net is not None
    changed.init_net.replace_op(index, fill.replace(args={**_args_of(fill), "values": values}))
    assert print_model(changed) == print_model(model)  # the plain dump cannot tell them apart
    with pytest.raises(pytest.fail.Exception, match="golden mismatch"):
        assert_net_matches_golden(changed, path)
    assert_net_matches_golden(model, path)

    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    shift = np.ones(3, dtype=np.float32)
    onnx_path = tmp_path / "onnx.txt"
    assert_net_matches_golden(_onnx_model(weight, shift), onnx_path, update=True)
    assert_net_matches_golden(_onnx_model(weight, shift), onnx_path)
    with pytest.raises(pytest.fail.Exception, match="golden mismatch"):
        assert_net_matches_golden(_onnx_model(weight * -5, shift), onnx_path)
    with pytest.raises(pytest.fail.Exception, match="golden mismatch"):
        assert_net_matches_golden(_onnx_model(weight, shift * 2), onnx_path)


def _args_of(op: Op) -> dict[str, Any]:
    return {arg.name: arg.value for arg in op.args if arg.name is not None}


RELATIVE_TESTS = """
def test_load_model_resolves_beside_the_test_file(load_model, golden):
    model = load_model("model")  # beside this file, as golden.check's paths are
    golden.check(model, "goldens/model.txt")
"""


def test_load_model_and_golden_resolve_paths_alike_and_updates_are_listed(
    tmp_path: Path,
) -> None:
    """Issue 21 item 10: ``load_model`` resolves a relative path beside the test file, as
    ``golden`` does (it used to resolve it from the working directory), and
    ``--update-goldens`` lists the golden files it rewrote."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_relative.py").write_text(RELATIVE_TESTS)
    shutil.copytree(TINY, suite / "model")
    first = _pytest(tmp_path)  # the working directory is not the test file's folder
    assert "did not exist; it was written" in first.stdout, first.stdout
    assert _pytest(tmp_path).returncode == 0
    golden = suite / "goldens" / "model.txt"
    golden.write_text(golden.read_text().replace("Relu", "Tanh", 1))
    updated = _pytest(tmp_path, "--update-goldens")
    assert updated.returncode == 0
    assert f"golden files written (review the diff): 1\n  {golden}" in updated.stdout
    assert "golden files written" not in _pytest(tmp_path, "--update-goldens").stdout


def test_assert_models_equivalent_runs_onnx_models_on_onnxruntime(tmp_path: Path) -> None:
    """Two ONNX models whose weight differs are not equivalent (the Caffe2 executor's check
    made the initializers up as missing parameters and passed); equal ones are."""
    from onnx_check import graph_model

    from graphtools.errors import PreconditionError
    from graphtools.serde.onnx_io import load_onnx_model
    from graphtools.testing import compare_models
    from graphtools.values import ArrayTensor

    path = graph_model(
        tmp_path / "m.onnx",
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        {"x": (TensorProto.FLOAT, [2, 4])},
        {"y": (TensorProto.FLOAT, [2, 4])},
        {"b": np.arange(4, dtype=np.float32)},
    )
    before = load_onnx_model(path)
    cleaned = before.copy()
    PassManager.parse("default")(cleaned)
    assert_models_equivalent(before, cleaned)
    after = before.copy()
    with after.predict_net.edit() as edit:
        edit.set_initializer("b", ArrayTensor(np.full(4, 100.0, np.float32)))
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(before, after)
    with pytest.raises(PreconditionError, match="onnxruntime"):
        compare_models(before, after)


def test_a_net_declaring_no_outputs_is_compared_on_the_blobs_nothing_reads() -> None:
    """A predict_net declaring no outputs was compared on nothing, and every check of it
    passed (a Softmax turned Sigmoid included); a comparison of no output is a failure."""
    from graphtools.testing import assert_models_equivalent as testing_check
    from graphtools.testing import assert_no_difference

    model = load_model_dir(TINY)
    with model.predict_net.edit() as edit:
        edit.set_external_outputs([])
    broken = _retyped(model, "Softmax", "Sigmoid")
    with pytest.raises(AssertionError, match="models differ"):
        assert_models_equivalent(model, broken)
    data = next(iter(load_model_dir(TINY).predict_net.external_inputs))
    with pytest.raises(AssertionError, match="models differ"):
        testing_check(model, broken, shapes={data: (1, 1, 6, 6)})
    assert_models_equivalent(model, model.copy())
    with pytest.raises(AssertionError, match="no output was compared"):
        assert_no_difference([], 1e-5, 1e-6)


def test_an_init_net_op_that_cannot_run_is_left_out_as_verify_does(tmp_path: Path) -> None:
    """A Load from a database not shipped failed the check with the executor's error, where
    verify leaves the op out and makes its blobs up; a misspelt feed is named."""
    from graphtools.errors import PreconditionError
    from graphtools.pytest_plugin import MadeUpParameters

    model = load_model_dir(TINY)
    assert model.init_net is not None
    param = next(iter(model.init_net)).outputs[0]
    load = Op("Load", [], [param], args={"db": "nowhere.db", "db_type": "minidb"})
    with model.init_net.edit() as edit:
        edit.set_op(0, load)
    cleaned = model.copy()
    PassManager.parse("default")(cleaned)
    with pytest.warns(MadeUpParameters, match="an init_net op that cannot run here"):
        assert_models_equivalent(model, cleaned)
    with pytest.raises(PreconditionError, match=r"'dta', which is no input.*'data'"):
        assert_models_equivalent(model, cleaned, feeds={"dta": np.ones((1, 1, 6, 6))})


@pytest.mark.parametrize("value", ["false", "No", "off", "0", ""])
def test_the_update_variable_set_to_a_no_leaves_goldens_alone(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GRAPHTOOLS_UPDATE_GOLDENS=false rewrote every golden file."""
    from graphtools.pytest_plugin import updating_goldens

    monkeypatch.setenv("GRAPHTOOLS_UPDATE_GOLDENS", value)
    assert not updating_goldens()
    monkeypatch.setenv("GRAPHTOOLS_UPDATE_GOLDENS", "1")
    assert updating_goldens()


def test_a_check_on_made_up_parameters_says_so(tmp_path: Path) -> None:
    """A pair without its init_net passed on made-up weights without a word (verify notes
    it): the plugin warns."""
    from graphtools.ir import Net
    from graphtools.pytest_plugin import MadeUpParameters

    alone = Model(Net([Op("FC", ["x", "w", "b"], ["y"])], ["x", "w", "b"], ["y"]))
    with pytest.warns(MadeUpParameters, match="made up 2 parameters that nothing provides"):
        assert_models_equivalent(alone, alone.copy(), shapes={"x": (2, 4)})


def test_real_weights_replaced_for_a_guessed_shape_are_named_in_the_warning() -> None:
    """The init_net fills s and b ([4]), and the guessed input [2, 3, 4, 5] does not fit
    them: they were replaced by made-up ones, and the warning said they were parameters
    'nothing provides'. It names them and why; with shapes they fit, no warning."""
    from graphtools.ir import Net
    from graphtools.pytest_plugin import MadeUpParameters

    predict = Net(
        [
            Op("Relu", ["x"], ["r"]),
            Op("Mul", ["r", "s"], ["m"], args={"broadcast": 1}),
            Op("Add", ["m", "b"], ["y"], args={"broadcast": 1}),
        ],
        ["x", "s", "b"],
        ["y"],
    )
    fills = [
        Op("GivenTensorFill", [], [name], args={"shape": [4], "values": [1.0, 2.0, 3.0, 4.0]})
        for name in ("s", "b")
    ]
    model = Model(predict, Net(fills, [], ["s", "b"]))
    with pytest.warns(MadeUpParameters, match=r"replaced the init_net's 's' by a made-up one"):
        assert_models_equivalent(model, model.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_models_equivalent(model, model.copy(), shapes={"x": (2, 4)})


def test_the_python_check_of_a_pair_makes_inputs_as_verify_does() -> None:
    """graphtools.testing.assert_models_equivalent fed the stylizer's uint8 BGRA input as
    float32 of one element (its init_net placeholder) and failed inside the executor, where
    the plugin's function of the same name passed: one check now, verify's inputs."""
    from conftest import SHARED_REAL

    from graphtools.testing import assert_models_equivalent as python_check

    crayon = SHARED_REAL / "caffe2-models" / "style_transfer" / "crayon"
    if not crayon.is_dir():
        pytest.skip(f"no real fixtures at {SHARED_REAL}")
    model = load_model_dir(crayon)
    cleaned = model.copy()
    PassManager.parse("default")(cleaned)
    python_check(model, cleaned, shapes={"data_int8_bgra": (1, 32, 32, 4)})

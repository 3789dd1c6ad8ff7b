"""``graphtools extract`` and ``graphtools.extract``: sub-nets that run and give the values the
whole model gives at the same blobs, on the tiny fixture, a real Caffe2 classifier, the Mask
R-CNN2Go net with its If, and an ONNX export made here with torch; refusals by name."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_error_line, run_cli

from graphtools.errors import SubNetError
from graphtools.executor import Workspace, run_model, run_net, run_op
from graphtools.extract import extract_pair
from graphtools.feeds import synthesize
from graphtools.ir import Model
from graphtools.serde import load_model, load_model_dir
from graphtools.testing import compare_outputs

TINY = FIXTURES / "models" / "tiny_export"
CLASSIFIER = "BIGBALLON-Caffe2-Tutorial"
MASK_RCNN = "caffe2-models/mask_rcnn_2go/fp32/model.pbtxt"


def _whole_run(model: Model, feeds: dict[str, np.ndarray], last: int | None = None) -> Workspace:
    """The workspace after running ``model`` (its predict_net up to op ``last``) on ``feeds``."""
    ws = Workspace()
    if model.init_net is not None:
        run_net(model.init_net, ws)
    for name, value in feeds.items():
        ws.feed(name, value)
    net = model.predict_net
    for index, op in enumerate(net):
        if last is not None and index > last:
            break
        run_op(op, ws, index=index, net=net)
    return ws


def _assert_equal_blobs(ws: Workspace, got: dict[str, np.ndarray]) -> None:
    expected = {name: ws.fetch(name) for name in got}
    diffs = compare_outputs(expected, got, rtol=1e-6, atol=1e-7)
    assert all(d.ok for d in diffs), diffs


def test_the_tiny_pair_cut_at_an_inner_blob_computes_the_whole_models_values() -> None:
    model = load_model_dir(TINY)
    data = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    ws = _whole_run(model, {"data": data})
    tail = extract_pair(model, ["pool1_cpu"], ["prob"], {"data": (2, 1, 6, 6)})
    assert str(tail.input_types["pool1_cpu"]) == "float32[2, 2, 2, 2]"
    assert [op.type for op in tail.model.predict_net][:2] == ["Shape", "Gather"]
    assert len(tail.model.init_net or []) == 6  # conv1's fills stay behind
    _assert_equal_blobs(ws, run_model(tail.model, {"pool1_cpu": ws.fetch("pool1_cpu")}))
    head = extract_pair(model, ["data"], ["conv1", "pool1"], {"data": (2, 1, 6, 6)})
    assert [op.type for op in head.model.predict_net] == ["Conv", "Relu", "MaxPool"]
    _assert_equal_blobs(ws, run_model(head.model, {"data": data}))
    assert model.predict_net.revision == 0 and len(model.predict_net) == 15  # left alone


def test_the_command_writes_a_pair_with_its_input_shapes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "tail"
    argv = ["extract", str(TINY), "--inputs", "pool1_cpu", "--outputs", "prob", "-o", str(out)]
    code, text, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "input pool1_cpu: float32[1, 2, 2, 2]" in text and "kept 9 of 15 ops" in text
    assert (out / "shapes.txt").read_text() == "pool1_cpu=1x2x2x2\n"
    # the source's formats (text files): extract wrote binary, run keeps them
    source_files = sorted(
        p.suffix for p in TINY.iterdir() if p.name.endswith(("_net.pb", "_net.pbtxt"))
    )
    assert sorted(p.suffix for p in out.glob("*_net.*")) == source_files
    code, text, _ = run_cli(capsys, "verify", str(out))
    assert code == 0 and "outputs equal" in text and "(given: " in text


def test_shapes_inferred_from_a_guess_are_not_written_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without shapes.txt the tiny net's input is guessed 1x1x28x28 (its FC takes 6x6 only):
    the cut's shapes.txt held 1x2x13x13, and verify of the cut then failed in the FC, reading
    it as given. Shapes resting on a guess are left out, said so; given ones are written.
    (verify of the cut guesses again, and refuses the guess its weights do not fit.)"""
    source = tmp_path / "tiny"
    source.mkdir()
    for name in ("predict_net.pbtxt", "init_net.pbtxt"):
        (source / name).write_bytes((TINY / name).read_bytes())
    cut = tmp_path / "tail"
    argv = ["extract", str(source), "--inputs", "pool1_cpu", "--outputs", "prob", "-o", str(cut)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "no shape written for pool1_cpu: inferred from guessed or symbolic input" in err
    assert not (cut / "shapes.txt").exists()
    code, text, err = run_cli(capsys, "verify", str(cut))  # guessed again: refused, not read
    assert code == 2 and "do not fit the net" in err and "--shapes" in err, err
    code, text, err = run_cli(capsys, "verify", str(cut), "--shapes", "pool1_cpu=1x2x2x2")
    assert code == 0 and "outputs equal" in text, err
    code, _, err = run_cli(capsys, *argv, "--shapes", "data=1x1x6x6")
    assert code == 0 and "no shape written" not in err
    assert (cut / "shapes.txt").read_text() == "pool1_cpu=1x2x2x2\n"


@pytest.mark.parametrize(
    ("inputs", "outputs", "words"),
    [
        ("fc1", "conv1", ["output 'conv1'", "needs 'data'", "add 'data' to the inputs"]),
        ("nope", "prob", ["input 'nope' is not a blob"]),
    ],
)
def test_the_command_refuses_by_name_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, inputs: str, outputs: str, words: list[str]
) -> None:
    out = tmp_path / "cut"
    argv = ["extract", str(TINY), "--inputs", inputs, "--outputs", outputs, "-o", str(out)]
    code, text, err = run_cli(capsys, *argv)
    assert (code, text) == (2, "")
    assert_one_error_line(err, *words)
    assert not out.exists()


def test_a_real_classifier_cut_at_an_inner_blob(real_fixtures: Path) -> None:
    """The BIGBALLON CIFAR ResNet (trained weights): the first half and the second half, cut
    at a residual sum, each give the whole net's values there."""
    model = load_model_dir(real_fixtures / CLASSIFIER)
    data = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    ws = _whole_run(model, {"data": data})
    shapes = {"data": (2, 3, 32, 32)}
    first = extract_pair(model, ["data"], ["comp_6_sum_2"], shapes)
    second = extract_pair(model, ["comp_6_sum_2"], ["softmax"], shapes)
    assert len(first.plan.ops) + len(second.plan.ops) == len(model.predict_net)
    assert str(second.input_types["comp_6_sum_2"]) == "float32[2, 32, 16, 16]"
    assert not set(first.plan.params) & set(second.plan.params)
    _assert_equal_blobs(ws, run_model(first.model, {"data": data}))
    _assert_equal_blobs(ws, run_model(second.model, {"comp_6_sum_2": ws.fetch("comp_6_sum_2")}))


def test_mask_rcnn_cut_before_its_heads(real_fixtures: Path) -> None:
    """Mask R-CNN2Go (its If, no published weights): the backbone and the RPN up to the
    proposals, on made-up weights, give the whole net's values."""
    model = load_model(real_fixtures / MASK_RCNN)
    outputs = ["rpn_cls_probs", "rpn_bbox_pred", "xif3_6"]
    cut = extract_pair(model, ["data"], outputs, {"data": (1, 3, 64, 64)})
    assert "If" not in [op.type for op in cut.model.predict_net]
    assert cut.plan.ops[-1] < next(i for i, op in enumerate(model.predict_net) if op.type == "If")
    feeds = synthesize(cut.model, {"data": (1, 3, 64, 64)}).feeds
    ws = _whole_run(model, feeds, last=cut.plan.ops[-1])
    got = run_model(cut.model, feeds)
    assert sorted(got) == sorted(outputs)
    _assert_equal_blobs(ws, got)


def test_mask_rcnn_mask_head_keeps_the_fill_its_if_may_leave(real_fixtures: Path) -> None:
    """The mask head is the If's else branch: cut from the features and the boxes, it keeps
    the IsEmpty and the If, with the weights only the branch reads, and the ConstantFill
    before them, whose value the net returns when there are no boxes (the then branch leaves
    it); from the features alone, the RPN and the box head that make the boxes come along."""
    model = load_model(real_fixtures / MASK_RCNN)
    cut = extract_pair(model, ["xif3_6", "bbox_nms", "im_info"], ["mask_fcn_probs"])
    assert [op.type for op in cut.model.predict_net] == ["ConstantFill", "IsEmpty", "If"]
    assert "mask_fcn_logits_w" in cut.plan.params and "rpn_cls_logits_w" not in cut.plan.params
    no_boxes = {
        "xif3_6": np.zeros((1, 4, 2, 2), np.float32),
        "bbox_nms": np.zeros((0, 5), np.float32),
        "im_info": np.array([[64, 64, 1]], np.float32),
    }
    ws = Workspace()
    for name, value in no_boxes.items():
        ws.feed(name, value)
    for index in range(len(model.predict_net) - 3, len(model.predict_net)):  # the same ops
        run_op(model.predict_net[index], ws, index=index, net=model.predict_net)
    _assert_equal_blobs(ws, run_model(cut.model, no_boxes))
    whole_heads = extract_pair(model, ["xif3_6", "im_info"], ["mask_fcn_probs"])
    assert "GenerateProposals" in [op.type for op in whole_heads.model.predict_net]
    with pytest.raises(SubNetError, match="needs 'data'"):  # the features come from the data
        extract_pair(model, ["bbox_nms", "im_info"], ["mask_fcn_probs"])


# -- ONNX ---------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="torch is not installed (optional extra 'torch')")
import onnx  # noqa: E402

from graphtools.extract import extract_onnx  # noqa: E402
from graphtools.onnx import import_onnx, run_onnxruntime  # noqa: E402


class _Net(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.c1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("onnx") / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Net().eval(),
            (torch.randn(2, 3, 8, 8),),
            str(path),
            dynamo=False,
            input_names=["x"],
            output_names=["y"],
        )
    return path


def _relu_output(path: Path, which: int = 1) -> str:
    """The output of a Relu (the second: a value in the middle of the graph)."""
    relus = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Relu"]
    return str(relus[which].output[0])


def _whole_values(path: Path, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    model = onnx.load(str(path))
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n != "y")
    return run_onnxruntime(model, {"x": x}, names)


def test_an_onnx_export_cut_at_a_middle_layer(exported: Path) -> None:
    """onnxruntime on each half and our executor on each half imported give the values
    onnxruntime gives for the whole model at the same names."""
    middle = _relu_output(exported)
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    whole = _whole_values(exported, x, [middle, "y"])
    head = extract_onnx(exported, ["x"], [middle])
    tail = extract_onnx(exported, [middle], ["y"])
    assert [d.dim_value for d in tail.graph.input[0].type.tensor_type.shape.dim] == [2, 8, 8, 8]
    assert "Conv" not in {n.op_type for n in tail.graph.node}
    assert {n.op_type for n in head.graph.node} == {"Conv", "Relu"}
    for model, feeds, name in ((head, {"x": x}, middle), (tail, {middle: whole[middle]}, "y")):
        ours = run_model(import_onnx(model), feeds)[name]
        for value in (run_onnxruntime(model, feeds)[name], ours):
            np.testing.assert_allclose(value, whole[name], rtol=1e-5, atol=1e-6)


def test_an_onnx_cut_is_refused_by_name(exported: Path) -> None:
    middle, first = _relu_output(exported), _relu_output(exported, 0)
    with pytest.raises(SubNetError, match=f"output '{first}' is not determined.*needs 'x'"):
        extract_onnx(exported, [middle], [first])
    with pytest.raises(SubNetError, match="input 'nope' is not a value"):
        extract_onnx(exported, ["nope"], ["y"])


def test_the_command_cuts_an_onnx_model(
    exported: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    middle = _relu_output(exported)
    target = tmp_path / "tail.onnx"
    argv = ["extract", str(exported), "--inputs", middle, "--outputs", "y", "-o", str(target)]
    code, text, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert f"input {middle}: [2, 8, 8, 8]" in text and f"wrote {target}" in text
    onnx.checker.check_model(str(target))
    argv = ["extract", str(exported), "--inputs", "x", "--outputs", "y", "-o", str(tmp_path / "p")]
    code, text, err = run_cli(capsys, *argv)  # a folder: the model keeps its file name
    assert code == 0, err
    assert f"wrote {tmp_path / 'p' / exported.name}" in text
    argv = ["extract", str(TINY), "--inputs", "data", "--outputs", "prob", "-o", str(target)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert_one_error_line(err, "a pair as a pair", "MODEL.onnx with -o OUT.onnx")

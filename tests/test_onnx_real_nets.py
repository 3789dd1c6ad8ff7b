"""Every real Caffe2 net of ../shared/fixtures-real round-trips through ONNX, and docs/onnx.md's
table says so (issues 11 and 20); the only row left out is a file that is not a runnable net.

The nets are the network files tests/test_verify_real.py scans (every ``.pb``/``.pbtxt`` that
loads as a NetDef), minus the init_nets of pairs (they are the parameters of their predict_net)
and the ``.pbtxt`` twins of ``.pb`` files. A predict_net gets the init_net beside it; one
without gets parameters made up by ``graphtools.feeds.synthesize``, as ``graphtools verify``
does, and so does a pair whose init_net fills more than ``MADE_UP_ABOVE`` values (VGG's 138M
weights take minutes to export, import and run twice; its ops are what the test is about), and
so are the weights of the pairs of ``MADE_UP`` (an init_net loading from a database not shipped,
or filling weights that do not fit the op), which the table says.
Inputs are the ones ``synthesize`` makes (shapes guessed from the first reader). A net that
declares no outputs exports the blobs it writes and never reads, as ``verify`` compares them.

A round trip: ``export_onnx`` (dynamic batch, but for ``STATIC``),
``onnx.checker.check_model(full_check=True)``, every blob onnxruntime computes on the export
equal to our executor's on the pair (the nets have random weights, so the blob-by-blob
comparison, not a near-uniform softmax, is what discriminates; detection nets are thus compared
on their final boxes, scores and classes and on every blob before them), and the export
imported back giving our executor's outputs. Tolerances: the outputs float rtol 1e-4 (atol
1e-5, ``ATOL`` for one net), an intermediate float blob with atol raised to 1e-4 of its largest
magnitude; Int8 blobs exact, except within one quantization step in the nets with
Int8Softmax/Int8AveragePool (``INT8_ONE_STEP``); random fills by distribution and the
stylizer's truncated uint8 image within one unit (``graphtools.onnx.compare``). A net that does
not round-trip must fail with a ``GraphToolsError`` whose message is the one its row of the
table records. ``pytest --update-goldens`` rewrites the rows.

The CLI does the same on each net: ``graphtools export-onnx`` and ``graphtools verify --onnx``
exit 0 (the file that is not a net: exit 2 with one error line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import onnx
import pytest
from conftest import REPO, SHARED_REAL, real_net_files, run_cli

from graphtools.analysis.liveness import unread_outputs
from graphtools.convert.caffe2_to_onnx.nn import net_in_test_mode
from graphtools.convert.caffe2_to_onnx.table import EXPORTERS
from graphtools.errors import GraphToolsError, UnsupportedOpError
from graphtools.executor import Workspace, run_net
from graphtools.executor.kernels_image import STYLIZER_NOISE_BLOB
from graphtools.feeds import synthesize
from graphtools.ir import Model, Net
from graphtools.onnx import compare_blobs_with_onnxruntime, export_onnx, import_onnx
from graphtools.onnx.export_feeds import feed_types, with_made_up_params
from graphtools.serde import load_ir_net, load_model
from graphtools.serde.pairing import find_init_beside
from graphtools.testing import compare_models, compare_outputs

DOC = REPO / "docs" / "onnx.md"
MADE_UP_ABOVE = 12_000_000
"""Pairs whose init_net fills more values than this run on made-up parameters."""
MADE_UP = {
    **dict.fromkeys(
        (
            "breadbread1984-Caffe2-C-LSTM-demo/deploy_models/lstm_predict_net.pbtxt",
            "breadbread1984-Caffe2-C-demo/deploy_models/mnist_predict_net.pbtxt",
        ),
        "its init_net Loads them from a database not shipped",
    ),
    **dict.fromkeys(
        (
            "glow/caffe2Models/conv_group_quantized_pred_net.pbtxt",
            "glow/caffe2Models/conv_nhwc_predict_net.pbtxt",
            "glow/caffe2Models/convtranspose_net.pbtxt",
            "glow/caffe2Models/convtranspose_nhwc.pbtxt",
            "glow/caffe2Models/dce_test_predict_net.pbtxt",
        ),
        "the init_net's weights do not fit the op",
    ),
}
"""Pairs whose weights are made up although they have an init_net, and why; ``export-onnx``
refuses them without ``--random-params``."""
NOT_RUNNABLE = {
    "glow/caffe2Models/empty_predict_net.pbtxt": (
        "not a runnable net: it has no ops and declares an output ('unused_output') that "
        "nothing writes"
    ),
}
"""Files of the scan that are not runnable nets, with why; their rows record the refusal."""
TEST_MODE = frozenset({"glow/caffe2Models/dropout.pbtxt"})
"""Training nets exported in their inference form (``test_mode=True``: ``is_test=1``)."""
INT8_ONE_STEP = frozenset(
    {
        "caffe2-models/mask_rcnn_2go/2018-12/int8/model.pb",
        "caffe2-models/mask_rcnn_2go/2019-01/int8/model.pbtxt",
        "caffe2-models/mask_rcnn_2go/int8/model.pbtxt",
    }
)
"""Nets with Int8Softmax or Int8AveragePool, whose Int8 blobs may differ by one step."""
NOISY = frozenset({"caffe2-models/style_transfer/crayon/predict_net.pb"})
"""Nets whose stylizer draws noise once per workspace: imported back, run with the same noise."""
ATOL = {
    "caffe2-models/style_transfer/crayon/predict_net.pb": 1e-3,
    "caffe2-models/mask_rcnn_2go/fp32/model.pbtxt": 1e-3,
    "gredx-caffe2-maskrcnn-qt/mask_rcnn_2go_fp32_model.pb": 1e-3,
}
"""Absolute tolerances above 1e-5: the style transfer computes on 0..255 pixel values, whose
float32 sums leave absolute errors around 1e-4 on the values near 0; Mask R-CNN's boxes are
pixel coordinates decoded through exp and clipped, where onnxruntime 1.32.0 differs from our
executor by up to 1.3e-4 px (2 of 400 coordinates; the install before it stayed within 1e-5)."""
STATIC = frozenset({"glow/caffe2Models/uniform_fill_input_as_shape.pbtxt"})
"""Nets exported without ``dynamic_batch``: their input is a shape (``input_as_shape``), whose
length is the rank of the output, not a batch."""
ROUND_TRIP = "round-trips"
ROUND_TRIP_TEST_MODE = "round-trips in test mode (is_test=1, test_mode=True)"
SHAPES = {
    "jolibrain-deepdetect/xception/predict_net.pb": {"data": (1, 3, 75, 75)},
    "caffe2-models/style_transfer/crayon/predict_net.pb": {"data_int8_bgra": (1, 96, 96, 4)},
    "glow/caffe2Models/int8sumrelu_large_range_pred_net.pbtxt": {"gpu_0/data_0": (4, 2)},
}
"""Input shapes other than the guessed ones: smaller than the guessed 299 px for Xception,
which it allows; the shape of the init_net's other operand for the Int8SumRelu net (its input
is named like an image); larger than the guessed 32 px for the style transfer, whose reflection pads
(10 px after two stride-2 convolutions) need an image of at least 44 px (Caffe2 reflects once;
onnxruntime refuses a pad beyond the image, where numpy would reflect again)."""
SLOW = frozenset(
    {
        "jolibrain-deepdetect/googlenet/predict_net.pb",
        "jolibrain-deepdetect/resnet_18/predict_net.pb",
        "hmc-neural_nets_research/super_resolution/predict_net.pb",
        "jolibrain-deepdetect/xception/predict_net.pb",
    }
)
"""Nets whose round trip takes more than a few seconds on 2 cores (real weights at 224 px)."""


@dataclass(frozen=True)
class RealNet:
    """One net of the scan: its file, the init_net used (if any) and what the row says of it."""

    relative: str
    init: str | None
    params: str


def _fill_values(init: Path) -> int:
    net, _ = load_ir_net(init, allow_empty=True)
    return sum(prod(op.arg("shape", ())) for op in net if op.has_arg("shape"))


def _scan() -> list[RealNet]:
    if not SHARED_REAL.is_dir():
        return []
    files = real_net_files()
    partners = {path: find_init_beside(path) for path in files}
    inits = {init for init in partners.values() if init is not None}
    nets = []
    for path in files:
        twin = path.with_suffix(".pb")
        if path in inits or (path.suffix == ".pbtxt" and twin in partners):
            continue
        init = partners[path]
        params = "made up"
        relative = str(path.relative_to(SHARED_REAL))
        if relative in MADE_UP:
            params = f"made up ({MADE_UP[relative]})"
        elif init is not None:
            values = _fill_values(init)
            params = f"made up (init_net: {values / 1e6:.0f}M values)"
            if values <= MADE_UP_ABOVE:
                params = f"{init.name}"
        used = None if init is None or params.startswith("made up (init_net") else init
        nets.append(
            RealNet(
                str(path.relative_to(SHARED_REAL)),
                None if used is None else str(used.relative_to(SHARED_REAL)),
                params,
            )
        )
    return nets


NETS = _scan()


# -- the docs table ------------------------------------------------------------------------------

_TABLE = re.compile(r"(<!-- real-nets -->\n)(.*?)(<!-- /real-nets -->)", re.S)
_HEADER = "| net | parameters | result |\n|---|---|---|\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _documented() -> dict[str, tuple[str, str]]:
    match = _TABLE.search(DOC.read_text())
    assert match, "docs/onnx.md has no real-nets table"
    rows = {}
    for line in match.group(2).splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows[cells[0].strip("`")] = (cells[1], cells[2].replace("\\|", "|"))
    return rows


def _write_rows(rows: dict[str, tuple[str, str]]) -> None:
    body = "".join(
        f"| `{net}` | {params} | {_escape(result)} |\n"
        for net, (params, result) in sorted(rows.items())
    )
    text = DOC.read_text()
    match = _TABLE.search(text)
    assert match, "docs/onnx.md has no real-nets table"
    DOC.write_text(text[: match.start(2)] + _HEADER + body + text[match.end(2) :])


# -- the round trip ------------------------------------------------------------------------------


def _unmapped(net: Net) -> set[str]:
    """Op types without an exporter in ``net`` and the nested nets exported with it (If
    branches, a RecurrentNetwork's step net)."""
    found = {op.type for op in net if op.type not in EXPORTERS}
    for op in net:
        for name, nested in op.nested_nets():
            if name in ("then_net", "else_net", "step_net"):
                found |= _unmapped(nested)
    return found


def _load(net: RealNet) -> Model:
    path = SHARED_REAL / net.relative
    init = None if net.init is None else SHARED_REAL / net.init
    model = load_model(path, init, allow_empty=True)
    if not model.predict_net.external_outputs:
        with model.predict_net.edit() as edit:
            edit.set_external_outputs(unread_outputs(model.predict_net))
    return model


def _round_trip(net: RealNet) -> int:
    """Run the round trip; returns how many blobs were compared. Raises the first
    ``GraphToolsError`` of a net out of scope (its message prefixed with the stage)."""
    stage = "load"
    try:
        model = _load(net)
        stage = "inputs"
        synthesis = synthesize(model, SHAPES.get(net.relative))
        made_up = net.params.startswith("made up")
        assert made_up or not synthesis.params, synthesis.params  # never silently
        assert synthesis.params or net.relative not in MADE_UP
        stage = "export"
        pair = with_made_up_params(model, synthesis)
        feeds = {made.name: synthesis.feeds[made.name] for made in synthesis.inputs}
        value_info, quantization = feed_types(feeds)
        test_mode = net.relative in TEST_MODE
        exported = export_onnx(
            pair,
            value_info=value_info,
            dynamic_batch=net.relative not in STATIC,
            input_quantization=quantization,
            test_mode=test_mode,
        )
        stage = "import back"
        back = import_onnx(exported)
    except GraphToolsError as exc:
        raise GraphToolsError(f"{stage}: {type(exc).__name__}: {exc}") from exc
    onnx.checker.check_model(exported, full_check=True)
    if test_mode:
        pair = Model(net_in_test_mode(pair.predict_net), pair.init_net)
    report = compare_blobs_with_onnxruntime(
        exported,
        pair,
        feeds,
        rtol=1e-4,
        atol=ATOL.get(net.relative, 1e-5),
        int8_steps=1 if net.relative in INT8_ONE_STEP else 0,
    )
    assert report.ok, (report.first_divergence, [d for d in report.outputs if not d.ok])
    assert report.blobs
    if net.relative in NOISY:
        diffs = _compare_with_the_same_noise(pair, back, feeds)
    else:
        diffs = compare_models(pair, back, feeds, rtol=1e-4, atol=1e-5)
    assert all(d.ok for d in diffs), diffs
    return len(report.blobs)


def _compare_with_the_same_noise(pair: Model, back: Model, feeds: dict[str, Any]) -> list:
    """The imported pair run with the noise the original drew (the executor seeds a draw by
    the op's output name, which the export's SSA renaming changes)."""
    outputs = []
    noise = None
    for model in (pair, back):
        workspace = Workspace()
        if noise is not None:
            workspace.feed(STYLIZER_NOISE_BLOB, noise)
        if model.init_net is not None:
            run_net(model.init_net, workspace)
        for name, value in feeds.items():
            workspace.feed(name, value)
        run_net(model.predict_net, workspace)
        noise = workspace.fetch(STYLIZER_NOISE_BLOB)
        outputs.append([workspace.fetch(n) for n in model.predict_net.external_outputs])
    names = list(pair.predict_net.external_outputs)
    before, after = (dict(zip(names, values, strict=True)) for values in outputs)
    return compare_outputs(before, after, rtol=1e-4, atol=1e-5)


def _params() -> list[object]:
    if not NETS:
        return [pytest.param(None, id="<real fixtures absent>")]
    return [
        pytest.param(net, id=net.relative, marks=[pytest.mark.slow] if net.relative in SLOW else [])
        for net in NETS
    ]


@pytest.mark.parametrize("net", _params())
def test_real_net_round_trips_or_is_refused_as_documented(
    real_fixtures: Path, net: RealNet, update_goldens: bool
) -> None:
    try:
        _round_trip(net)
        result = ROUND_TRIP_TEST_MODE if net.relative in TEST_MODE else ROUND_TRIP
    except GraphToolsError as exc:
        why = NOT_RUNNABLE.get(net.relative)
        result = f"out of scope, {why}: {exc}" if why else f"out of scope: {exc}"
    if update_goldens:
        rows = _documented()
        rows[net.relative] = (net.params, result)
        _write_rows(rows)
    assert _documented().get(net.relative) == (net.params, result)


def _cli_arguments(net: RealNet) -> list[str]:
    """The pair as the CLI takes it: the init_net beside (else ``--no-init``; made-up
    parameters, ``--random-params``), the shapes of ``SHAPES`` and ``--test-mode``."""
    arguments = [str(SHARED_REAL / net.relative)]
    if net.init is None:
        arguments.append("--no-init")
    if net.params.startswith("made up"):
        arguments.append("--random-params")
    for name, shape in SHAPES.get(net.relative, {}).items():
        arguments += ["--shapes", f"{name}={'x'.join(map(str, shape))}"]
    if net.relative in TEST_MODE:
        arguments.append("--test-mode")
    return arguments


@pytest.mark.parametrize("net", _params())
def test_export_onnx_and_verify_onnx_exit_0_on_every_real_net(
    real_fixtures: Path, net: RealNet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI on each net, as the round trip above (``verify --onnx``'s default tolerances:
    rtol 1e-4, atol 1e-5, Int8 within one step); the file that is not a net: one error line."""
    target = str(tmp_path / "model.onnx")
    arguments = _cli_arguments(net)
    if net.relative in MADE_UP:
        refused = [a for a in arguments if a != "--random-params"]
        code, _, err = run_cli(capsys, "export-onnx", *refused, "-o", target)
        assert code == 2 and "--random-params" in err.splitlines()[-1], err
    code, _, err = run_cli(capsys, "export-onnx", *arguments, "-o", target)
    if net.relative in NOT_RUNNABLE:
        assert code == 2 and err.splitlines()[-1].startswith("error: ")
        assert "external output 'unused_output' is neither written" in err.splitlines()[-1]
        return
    assert code == 0, err
    tolerance = ["--atol", str(ATOL[net.relative])] if net.relative in ATOL else []
    code, out, err = run_cli(capsys, "verify", "--onnx", target, *arguments, *tolerance)
    assert code == 0 and "outputs equal" in out, out + err


def test_every_op_type_of_the_real_nets_has_an_onnx_form(real_fixtures: Path) -> None:
    for net in NETS:
        assert not _unmapped(_load(net).predict_net), net.relative


def test_a_training_net_is_refused_by_name_without_test_mode(real_fixtures: Path) -> None:
    (net,) = [n for n in NETS if n.relative in TEST_MODE]
    with pytest.raises(UnsupportedOpError, match=r"op #0 \(Dropout\).*training mode.*--test-mode"):
        export_onnx(_load(net), value_info={"input": (1, [2, 3, 4, 5])})


def test_the_table_lists_every_real_net_and_the_round_trip_count(
    real_fixtures: Path, update_goldens: bool
) -> None:
    scanned = {net.relative for net in NETS}
    if update_goldens:
        _write_rows({k: v for k, v in _documented().items() if k in scanned})
    rows = _documented()
    assert set(rows) == scanned
    refused = {name: result for name, (_, result) in rows.items() if result.startswith("out")}
    assert set(refused) == set(NOT_RUNNABLE)
    trips = {name for name, (_, r) in rows.items() if r in (ROUND_TRIP, ROUND_TRIP_TEST_MODE)}
    assert trips | set(refused) == scanned
    assert {n for n, (_, r) in rows.items() if r == ROUND_TRIP_TEST_MODE} == TEST_MODE

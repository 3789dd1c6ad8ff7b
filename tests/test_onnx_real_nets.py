"""Every real Caffe2 net of ../shared/fixtures-real round-trips through ONNX or is refused with a
typed error, and docs/onnx.md's table says which (issue 11, item 6).

The nets are the network files tests/test_verify_real.py scans (every ``.pb``/``.pbtxt`` that
loads as a NetDef), minus the init_nets of pairs (they are the parameters of their predict_net)
and the ``.pbtxt`` twins of ``.pb`` files. A predict_net gets the init_net beside it; one
without gets parameters made up by ``graphtools.feeds.synthesize``, as ``graphtools verify``
does, and so does a pair whose init_net fills more than ``MADE_UP_ABOVE`` values (VGG's 138M
weights take minutes to export, import and run twice; its ops are what the test is about).
Inputs are the ones ``synthesize`` makes (shapes guessed from the first reader). A net that
declares no outputs exports the blobs it writes and never reads, as ``verify`` compares them.

A round trip: ``export_onnx`` (dynamic batch), ``onnx.checker.check_model(full_check=True)``,
every blob onnxruntime computes on the export equal to our executor's on the pair (the nets
have random weights, so the blob-by-blob comparison, not a near-uniform softmax, is what
discriminates), and the export imported back giving our executor's outputs. A net that does not
round-trip must fail with a ``GraphToolsError`` (an ``UnsupportedOpError`` naming the op for
an op without an ONNX form) whose message is the one its row of the table records.
``pytest --update-goldens`` rewrites the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SHARED_REAL, real_net_files
from onnx_round_trip import export_inputs

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx

from graphtools.analysis.liveness import unread_outputs
from graphtools.errors import GraphToolsError, UnsupportedOpError
from graphtools.executor import Int8Tensor
from graphtools.feeds import Synthesis, synthesize
from graphtools.ir import Model, Net
from graphtools.onnx import compare_blobs_with_onnxruntime, export_onnx, import_onnx
from graphtools.onnx.export_context import EXPORTERS
from graphtools.onnx.importer import fill_message, int8_fill_message
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_ir_net, load_model
from graphtools.serde.codec import op_from_proto
from graphtools.serde.pairing import find_init_beside
from graphtools.testing import compare_models

DOC = REPO / "docs" / "onnx.md"
MADE_UP_ABOVE = 12_000_000
"""Pairs whose init_net fills more values than this run on made-up parameters."""
ROUND_TRIPS = 77
"""How many real nets round-trip (the table's ``round-trips`` rows)."""
SHAPES = {
    "jolibrain-deepdetect/xception/predict_net.pb": {"data": (1, 3, 75, 75)},
    "caffe2-models/style_transfer/crayon/predict_net.pb": {"data_int8_bgra": (1, 96, 96, 4)},
}
"""Input shapes other than the guessed ones: smaller than the guessed 299 px for Xception,
which it allows; larger than the guessed 32 px for the style transfer, whose reflection pads
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
ROUND_TRIP = "round-trips"


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
        if init is not None:
            values = _fill_values(init)
            params = f"made up (init_net: {values / 1e6:.0f}M values)"
            if values <= MADE_UP_ABOVE:
                params = f"{init.name}"
        used = None if init is None or params.startswith("made up") else init
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


def _with_made_up_params(model: Model, synthesis: Synthesis) -> Model:
    """``model`` as ``verify`` runs it, made whole: ops that could not run here removed, and the
    parameters ``synthesize`` made up written by the init_net (replacing the fill of one it
    replaced)."""
    pair = model.copy()
    for label, net in (("init_net", pair.init_net), ("predict_net", pair.predict_net)):
        skipped = [s.index for s in synthesis.skipped_ops if s.net == label]
        if net is not None and skipped:
            net.remove_ops(skipped)
    init = pair.init_net if pair.init_net is not None else Net(name="init")
    fills = {name: op_from_proto(_fill(name, synthesis.feeds[name])) for name in synthesis.params}
    with init.edit() as edit:
        for index, op in enumerate(init):
            if len(op.outputs) == 1 and op.outputs[0] in fills:
                edit.set_op(index, fills.pop(op.outputs[0]))
        edit.insert(len(init), list(fills.values()))
    return Model(pair.predict_net, init)


def _fill(name: str, value: object) -> caffe2_pb2.OperatorDef:
    if isinstance(value, Int8Tensor):
        return int8_fill_message(name, value.values, value.scale, value.zero_point)
    return fill_message(name, np.asarray(value), name)


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
        stage = "export"
        if _unmapped(model.predict_net):
            export_onnx(model)  # refused before input types are asked for
            raise AssertionError("a net with an op type lacking an exporter was exported")
        stage = "inputs"
        synthesis = synthesize(model, SHAPES.get(net.relative))
        stage = "export"
        pair = _with_made_up_params(model, synthesis)
        feeds = {made.name: synthesis.feeds[made.name] for made in synthesis.inputs}
        value_info, quantization = export_inputs(feeds)
        exported = export_onnx(
            pair, value_info=value_info, dynamic_batch=True, input_quantization=quantization
        )
        stage = "import back"
        back = import_onnx(exported)
    except GraphToolsError as exc:
        raise GraphToolsError(f"{stage}: {type(exc).__name__}: {exc}") from exc
    onnx.checker.check_model(exported, full_check=True)
    report = compare_blobs_with_onnxruntime(exported, pair, feeds, rtol=1e-3, atol=1e-4)
    assert report.ok, (report.first_divergence, [d for d in report.outputs if not d.ok])
    assert report.blobs
    diffs = compare_models(pair, back, feeds, rtol=1e-4, atol=1e-5)
    assert all(d.ok for d in diffs), diffs
    return len(report.blobs)


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
        result = ROUND_TRIP
    except GraphToolsError as exc:
        result = f"out of scope: {exc}"
    if update_goldens:
        rows = _documented()
        rows[net.relative] = (net.params, result)
        _write_rows(rows)
    assert _documented().get(net.relative) == (net.params, result)


def test_unmapped_op_types_are_refused_first_naming_the_op(real_fixtures: Path) -> None:
    """An op without an ONNX form is what export reports, before asking for input types."""
    model = load_model(SHARED_REAL / "prince-makwana-Crowd-Counting" / "predict_net.pb")
    with pytest.raises(UnsupportedOpError, match=r"op #\d+ \(PRelu\).*'PRelu'"):
        export_onnx(model)


def test_the_table_lists_every_real_net_and_the_round_trip_count(
    real_fixtures: Path, update_goldens: bool
) -> None:
    scanned = {net.relative for net in NETS}
    if update_goldens:
        _write_rows({k: v for k, v in _documented().items() if k in scanned})
    rows = _documented()
    assert set(rows) == scanned
    trips = sorted(name for name, (_, result) in rows.items() if result == ROUND_TRIP)
    assert len(trips) == ROUND_TRIPS
    assert "jolibrain-deepdetect/resnet_18/predict_net.pb" in trips
    assert "jolibrain-deepdetect/googlenet/predict_net.pb" in trips
    refused = [result for result in (r for _, r in rows.values()) if result != ROUND_TRIP]
    assert all(result.startswith("out of scope: ") for result in refused)

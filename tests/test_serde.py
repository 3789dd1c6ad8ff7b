"""Files: every real NetDef loads and round-trips, bad inputs are refused with a reason, saves
are atomic, model folders and MetaNetDef files are found and read."""

from __future__ import annotations

import os
import random
import re
import stat
from pathlib import Path

import pytest
from conftest import FIXTURES, SHARED_REAL
from google.protobuf import text_format

from graphtools.errors import SerdeError
from graphtools.ir import Model, Net, Op
from graphtools.proto import caffe2_pb2, metanet_pb2
from graphtools.serde import (
    extract_metanet_net,
    find_model_files,
    list_metanet_nets,
    load_metanet,
    load_model,
    load_model_dir,
    load_net,
    load_plan,
    model_from_metanet,
    parse_netdef,
    save_model,
    save_net,
)
from graphtools.serde.codec import net_from_netdef, net_to_netdef
from graphtools.serde.sniff import identify_binary, identify_text, looks_like_text

TINY = FIXTURES / "models" / "tiny_export"


def _source_table() -> list[tuple[str, str, int]]:
    """``(relative path, format, op count)`` of every file listed in the real fixtures' table.

    The op count includes the ops of nested nets (control flow, recurrent step nets).
    """
    table = SHARED_REAL / "SOURCES.md"
    if not table.is_file():
        return []
    rows = []
    folder = None
    for line in table.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"## (\S+)/\s*$", line)
        if heading:
            folder = heading.group(1)
        elif line.startswith("| `") and folder is not None:
            cells = [cell.strip() for cell in line.split("|")[1:-1]]
            rows.append((f"{folder}/{cells[0].strip('`')}", cells[5], int(cells[6])))
    return rows


SOURCES = _source_table()
OP_COUNTS = {rel: ops for rel, _, ops in SOURCES}
NEGATIVE_TENSORPROTOS = "facebookarchive-caffe2/negative/mnist_lenet_TensorProtos.pb"
BINARY_NETDEFS = [
    rel for rel, fmt, _ in SOURCES if fmt == "NetDef-binary" and rel != NEGATIVE_TENSORPROTOS
]
TEXT_NETDEFS = [rel for rel, fmt, _ in SOURCES if fmt.startswith("NetDef-text")]
PLANS = [rel for rel, fmt, _ in SOURCES if fmt.startswith("PlanDef")]
ONNX_TEXT = [rel for rel, fmt, _ in SOURCES if fmt == "ONNX ModelProto (protobuf text)"]
NO_TABLE = pytest.param("<no SOURCES.md>", id="no-real-fixtures")


def _real(real_fixtures: Path, rel: str) -> Path:
    if rel == "<no SOURCES.md>":
        pytest.skip(f"{SHARED_REAL / 'SOURCES.md'} not found")
    return real_fixtures / rel


def _decode_everything(net: Net) -> int:
    """Touch every lazily decoded field, nested nets included; returns the op count."""
    count = len(net)
    for op in net:
        for field in ("name", "engine", "device_option", "control_inputs", "is_gradient_op"):
            getattr(op, field)
        for _, nested in op.nested_nets():
            count += _decode_everything(nested)
    return count


# -- the real files -------------------------------------------------------------------------


def test_sources_table_covers_every_real_file(real_fixtures: Path) -> None:
    listed = {rel for rel, _, _ in SOURCES}
    on_disk = {
        p.relative_to(real_fixtures).as_posix()
        for p in real_fixtures.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    }
    assert listed == on_disk
    assert len([rel for rel in BINARY_NETDEFS if rel.endswith(".pb")]) == 45
    assert len(TEXT_NETDEFS) >= 170
    assert len(PLANS) == 4


@pytest.mark.parametrize("rel", BINARY_NETDEFS or [NO_TABLE])
def test_binary_netdef_resaves_byte_identical(real_fixtures: Path, rel: str) -> None:
    path = _real(real_fixtures, rel)
    data = path.read_bytes()
    assert net_to_netdef(net_from_netdef(load_net(path))).SerializeToString() == data

    decoded = net_from_netdef(load_net(path))
    assert _decode_everything(decoded) == OP_COUNTS[rel]
    assert net_to_netdef(decoded).SerializeToString() == data

    # Every op rewritten (inputs/outputs renamed and renamed back, args and device re-encoded):
    # the fields written back from the IR must reproduce the file's bytes.
    rebuilt = net_from_netdef(load_net(path))
    rebuilt.set_ops(
        op.replace(inputs=[f"{b}_tmp" for b in op.inputs], outputs=[f"{b}_tmp" for b in op.outputs])
        .replace(inputs=op.inputs, outputs=op.outputs)
        .replace(args=op.args, device_option=op.device_option)
        for op in rebuilt
    )
    assert net_to_netdef(rebuilt).SerializeToString() == data


@pytest.mark.parametrize("rel", TEXT_NETDEFS or [NO_TABLE])
def test_text_netdef_round_trips_message_equal(real_fixtures: Path, rel: str) -> None:
    path = _real(real_fixtures, rel)
    empty = path.stat().st_size == 0
    if empty:
        with pytest.raises(SerdeError, match="empty"):
            load_net(path)
    netdef = load_net(path, allow_empty=empty)
    net = net_from_netdef(netdef)
    assert _decode_everything(net) == OP_COUNTS[rel]
    assert net_to_netdef(net) == netdef


def test_empty_real_files(real_fixtures: Path) -> None:
    for rel in (
        "Jokeren-caffe2-tvm-example/negative/squeezenet_init_net_EMPTY.pb",
        "glow/caffe2Models/empty_init_net.pbtxt",
    ):
        path = real_fixtures / rel
        with pytest.raises(SerdeError) as info:
            load_net(path)
        assert info.value.path == path
        assert "empty" in info.value.reason
        assert "allow_empty" in info.value.reason
        assert load_net(path, allow_empty=True) == caffe2_pb2.NetDef()


def test_binary_content_under_pbtxt_name(real_fixtures: Path) -> None:
    folder = real_fixtures / "dongfangduoshou123-Caffe2-yolo-v3"
    as_text_name = load_net(folder / "net.pbtxt")
    binary = load_net(folder / "predict_net.pb")
    assert len(as_text_name.op) == 251
    assert list(as_text_name.op) == list(binary.op)
    assert not as_text_name.external_output
    init, was_text = parse_netdef((folder / "param_init_net.pbtxt").read_bytes())
    assert not was_text
    assert len(init.op) == 366


def test_old_cuda_gpu_id_real_file(real_fixtures: Path) -> None:
    path = real_fixtures / "jolibrain-deepdetect/lenet/predict_net.pbtxt"
    assert "cuda_gpu_id" in path.read_text(encoding="utf-8")
    netdef = load_net(path)
    devices = [op.device_option for op in netdef.op if op.HasField("device_option")]
    assert devices
    assert all(d.device_type == 1 and d.HasField("device_id") for d in devices)
    text = path.read_text(encoding="utf-8").replace("cuda_gpu_id", "device_id")
    assert netdef == text_format.Parse(text, caffe2_pb2.NetDef())


def test_old_cuda_gpu_id_inline(tmp_path: Path) -> None:
    path = tmp_path / "old.pbtxt"
    path.write_text(
        'name: "old"\n'
        "device_option { device_type: 1 cuda_gpu_id: 2 }\n"
        'op { type: "Relu" input: "x" output: "y"\n'
        "     device_option { device_type: 1 cuda_gpu_id: 3 } }\n"
    )
    netdef = load_net(path)
    assert netdef.device_option.device_id == 2
    assert netdef.op[0].device_option.device_id == 3
    plan_path = tmp_path / "old_plan.pbtxt"
    plan_path.write_text(
        'name: "p" network { name: "n" device_option { device_type: 1 cuda_gpu_id: 1 } }\n'
    )
    assert load_plan(plan_path).network[0].device_option.device_id == 1


# -- refused inputs -------------------------------------------------------------------------


def _refused(path: Path, **kwargs: bool) -> SerdeError:
    with pytest.raises(SerdeError) as info:
        load_net(path, **kwargs)
    error = info.value
    assert error.path == path
    assert str(error).startswith(str(path))
    return error


def test_refuses_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")
    assert "empty" in _refused(path).reason
    whitespace = tmp_path / "blank.pbtxt"
    whitespace.write_text("  \n\t\n")
    assert "empty" in _refused(whitespace).reason
    assert load_net(whitespace, allow_empty=True) == caffe2_pb2.NetDef()


@pytest.mark.parametrize(
    "rel",
    [
        "caffe2-models/squeezenet/predict_net.pb",
        "caffe2-models/mask_rcnn_2go/2018-12/fp32/model.pb",
        "HungMingWu-pytorch_caffe2_cpp_binding/init_net.pb",
        "dongfangduoshou123-Caffe2-yolo-v3/predict_net.pb",
    ],
)
def test_refuses_truncated_binary(real_fixtures: Path, tmp_path: Path, rel: str) -> None:
    data = (real_fixtures / rel).read_bytes()
    path = tmp_path / "half.pb"
    path.write_bytes(data[: len(data) // 2])
    assert "truncated" in _refused(path).reason


@pytest.mark.parametrize("seed", range(5))
def test_refuses_random_bytes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "random.pb"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(2000)))
    assert "not a" in _refused(path).reason


@pytest.mark.parametrize(
    "rel",
    [
        "hmc-neural_nets_research/super_resolution/super_resolution.onnx",
        *(ONNX_TEXT[:2] or ["glow/onnxModels/gruForward.onnxtxt"]),
    ],
)
def test_refuses_onnx_models(real_fixtures: Path, rel: str) -> None:
    assert "ONNX" in _refused(real_fixtures / rel).reason


def test_refuses_tensorprotos(real_fixtures: Path) -> None:
    path = real_fixtures / NEGATIVE_TENSORPROTOS
    assert "TensorProtos" in _refused(path).reason
    assert "TensorProtos" in _refused(path, allow_empty=True).reason


@pytest.mark.parametrize("rel", PLANS or [NO_TABLE])
def test_refuses_plan_as_netdef(real_fixtures: Path, rel: str) -> None:
    path = _real(real_fixtures, rel)
    assert "plan" in _refused(path).reason.lower()
    assert len(load_plan(path).network) >= 2


def test_refuses_binary_plan_as_netdef(tmp_path: Path) -> None:
    plan = caffe2_pb2.PlanDef(name="train")
    plan.network.add(name="net", op=[caffe2_pb2.OperatorDef(type="Relu", input=["x"])])
    plan.execution_step.add(name="step", network=["net"])
    path = tmp_path / "plan.pb"
    path.write_bytes(plan.SerializeToString())
    assert "plan" in _refused(path).reason.lower()


def test_text_parse_error_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.pbtxt"
    path.write_text('name: "x"\nop {\n  type: "Relu"\n  inptu: "x"\n}\n')
    reason = _refused(path).reason
    assert "line 4, column 3" in reason
    assert "inptu" in reason


def test_refuses_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in _refused(tmp_path / "absent.pb").reason
    assert "cannot read" in _refused(tmp_path).reason


def _tensorprotos(with_data: bool) -> caffe2_pb2.TensorProtos:
    protos = caffe2_pb2.TensorProtos()
    tensor = protos.protos.add(name="conv1_w", dims=[2, 3], data_type=caffe2_pb2.TensorProto.FLOAT)
    if with_data:
        tensor.float_data.extend([0.5, -1.25, 3.0, 4.5, 5.0, 6.0])
    return protos


def test_refuses_text_tensorprotos(tmp_path: Path) -> None:
    path = tmp_path / "params.pbtxt"
    path.write_text(text_format.MessageToString(_tensorprotos(with_data=True)))
    assert "TensorProtos" in _refused(path).reason


def test_refuses_shape_only_tensorprotos(tmp_path: Path) -> None:
    path = tmp_path / "shapes.pb"
    path.write_bytes(_tensorprotos(with_data=False).SerializeToString())
    assert "TensorProtos" in _refused(path).reason


def test_sniffing_helpers() -> None:
    assert looks_like_text(b'name: "x"\r\n\top {}\n')
    assert looks_like_text('name: "naïve"\n'.encode())
    assert not looks_like_text(b"\n\x01x")
    assert not looks_like_text(b"\xff\xfe")
    plan = caffe2_pb2.PlanDef(name="p")
    plan.network.add(name="n").op.add(type="Relu", input=["x"], output=["y"])
    plan.execution_step.add(name="s", network=["n"])
    assert "PlanDef" in (identify_binary(plan.SerializeToString()) or "")
    assert "PlanDef" in (identify_text(text_format.MessageToString(plan)) or "")
    protos = _tensorprotos(with_data=False)
    assert "TensorProtos" in (identify_binary(protos.SerializeToString()) or "")
    assert identify_binary(net_to_netdef(_small_net()).SerializeToString()) is None
    assert identify_text("this is not protobuf") is None


# Binary messages whose strings are not UTF-8: upb hands proto2 strings back as bytes then.
_NOT_UTF8 = {
    "tensorprotos-with-weights": _tensorprotos(with_data=True).SerializeToString(),
    "op-type": b"\x12\x03" + b"\x22\x01\xff",
    "net-name": b"\x0a\x02\xff\xfe",
    "blob-name": b"\x12\x09" + b"\x22\x04Relu\x0a\x01\xff",
}


@pytest.mark.parametrize("data", _NOT_UTF8.values(), ids=_NOT_UTF8.keys())
def test_refuses_names_that_are_not_utf8(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "weird.pb"
    path.write_bytes(data)
    _refused(path)


def test_text_with_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.pbtxt"
    path.write_bytes('\ufeffname: "a"\nop { type: "Relu" }\n'.encode())
    assert load_net(path).name == "a"


def test_binary_netdef_with_only_a_name(tmp_path: Path) -> None:
    path = tmp_path / "init_net.pb"
    path.write_bytes(caffe2_pb2.NetDef(name="model_init").SerializeToString())
    assert load_net(path, allow_empty=True).name == "model_init"


# -- saving ---------------------------------------------------------------------------------


def _small_net() -> Net:
    return Net([Op("Relu", ["x"], ["y"], args={"alpha": 0.5})], ["x"], ["y"], name="small")


def test_save_net_by_extension(tmp_path: Path) -> None:
    net = _small_net()
    binary = save_net(net, tmp_path / "net.pb")
    assert binary.read_bytes() == net_to_netdef(net).SerializeToString()
    for name in ("net.pbtxt", "NET.PBTXT", "net.prototxt", "net.txt"):
        text = save_net(net, tmp_path / name)
        parsed = text_format.Parse(text.read_text(encoding="utf-8"), caffe2_pb2.NetDef())
        assert parsed == net_to_netdef(net)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["net.pb", "net.pbtxt", "NET.PBTXT", "net.prototxt", "net.txt"]
    )


def test_save_net_text_flag_overrides_extension(tmp_path: Path) -> None:
    netdef = net_to_netdef(_small_net())
    as_text = save_net(netdef, tmp_path / "a.pb", text=True)
    assert parse_netdef(as_text.read_bytes()) == (netdef, True)
    as_binary = save_net(netdef, tmp_path / "b.pbtxt", text=False)
    assert as_binary.read_bytes() == netdef.SerializeToString()
    assert load_net(as_binary) == netdef


def test_save_net_replaces_existing_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "net.pb"
    path.write_bytes(b"\xff" * 100_000)
    save_net(_small_net(), path)
    assert path.read_bytes() == net_to_netdef(_small_net()).SerializeToString()
    assert [p.name for p in tmp_path.iterdir()] == ["net.pb"]


def test_save_net_unwritable_targets(tmp_path: Path) -> None:
    missing_folder = tmp_path / "absent" / "net.pb"
    with pytest.raises(SerdeError) as info:
        save_net(_small_net(), missing_folder)
    assert info.value.path == missing_folder
    assert not missing_folder.parent.exists()

    a_folder = tmp_path / "taken.pb"
    a_folder.mkdir()
    (a_folder / "keep").write_text("x")
    with pytest.raises(SerdeError) as info:
        save_net(_small_net(), a_folder)
    assert info.value.path == a_folder
    assert "cannot write" in info.value.reason
    assert [p.name for p in tmp_path.iterdir()] == ["taken.pb"]
    assert [p.name for p in a_folder.iterdir()] == ["keep"]


def test_save_net_keeps_usual_file_modes(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    fresh = save_net(_small_net(), tmp_path / "fresh.pb")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    existing = tmp_path / "existing.pb"
    existing.write_bytes(b"")
    existing.chmod(0o640)
    save_net(_small_net(), existing)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640


# -- models ---------------------------------------------------------------------------------


def test_load_model_dir_predict_and_init(real_fixtures: Path) -> None:
    folder = real_fixtures / "HungMingWu-pytorch_caffe2_cpp_binding"
    model = load_model_dir(folder)
    assert model.predict_path == folder / "predict_net.pb"
    assert model.init_path == folder / "init_net.pb"
    assert model.text is False
    assert len(model.predict_net) == 11
    assert model.init_net is not None
    assert len(model.init_net) == 8
    same = load_model(folder / "predict_net.pb", folder / "init_net.pb")
    assert net_to_netdef(same.predict_net) == net_to_netdef(model.predict_net)


@pytest.mark.parametrize(
    ("rel", "predict", "init"),
    [
        ("MahlerMozart-caffe2-segmentation-ios", "mobileNetPredict.pb", "mobileNetInit.pb"),
        ("caffe2-models/mask_rcnn_2go/2018-12/int8", "model.pb", "model_init.pb"),
        ("dongfangduoshou123-Caffe2-yolo-v3", "predict_net.pb", "param_init_net.pbtxt"),
        ("tokisamu-PytorchAICamera", "squeeze_predict_net.pb", None),
        (
            "breadbread1984-Caffe2-C-LSTM-demo/deploy_models",
            "lstm_predict_net.pbtxt",
            "lstm_init_net.pbtxt",
        ),
    ],
)
def test_find_model_files_spellings(
    real_fixtures: Path, rel: str, predict: str, init: str | None
) -> None:
    folder = real_fixtures / rel
    found_predict, found_init = find_model_files(folder)
    assert found_predict == folder / predict
    assert found_init == (None if init is None else folder / init)


def test_mask_rcnn_int8_pair_covers_inputs(real_fixtures: Path) -> None:
    model = load_model_dir(real_fixtures / "caffe2-models/mask_rcnn_2go/2018-12/int8")
    assert model.init_net is not None
    produced = {blob for op in model.init_net for blob in op.outputs}
    assert set(model.predict_net.external_inputs) - produced == {"data"}


def test_text_model_dir(real_fixtures: Path) -> None:
    model = load_model_dir(real_fixtures / "breadbread1984-Caffe2-C-LSTM-demo/deploy_models")
    assert model.text is True
    assert model.init_net is not None
    assert [op.type for op in model.predict_net].count("RecurrentNetwork") == 1


def test_several_predict_nets_are_ambiguous(real_fixtures: Path) -> None:
    folder = real_fixtures / "Jokeren-caffe2-tvm-example"
    with pytest.raises(SerdeError) as info:
        load_model_dir(folder)
    assert info.value.path == folder
    for name in ("mobilenet_pred_net.pb", "mobilenetv1_pred_net.pb", "resnet18v1_pred_net.pb"):
        assert name in info.value.reason


def test_load_model_with_empty_init(real_fixtures: Path) -> None:
    folder = real_fixtures / "Jokeren-caffe2-tvm-example"
    empty = folder / "negative" / "squeezenet_init_net_EMPTY.pb"
    with pytest.raises(SerdeError, match="empty"):
        load_model(folder / "mobilenet_pred_net.pb", empty)
    model = load_model(folder / "mobilenet_pred_net.pb", empty, allow_empty=True)
    assert model.init_net is not None
    assert len(model.init_net) == 0
    assert len(model.predict_net) == 138


def test_model_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(SerdeError, match="not a directory"):
        load_model_dir(tmp_path / "absent")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SerdeError, match="no predict net"):
        load_model_dir(tmp_path)


def test_model_save_binary_is_byte_identical(real_fixtures: Path, tmp_path: Path) -> None:
    folder = real_fixtures / "HungMingWu-pytorch_caffe2_cpp_binding"
    written = save_model(load_model_dir(folder), tmp_path / "out" / "nested")
    assert [p.name for p in written] == ["predict_net.pb", "init_net.pb"]
    for path in written:
        assert path.read_bytes() == (folder / path.name).read_bytes()


def test_model_save_text_and_overrides(tmp_path: Path) -> None:
    model = load_model_dir(TINY)
    assert model.text is True
    written = save_model(model, tmp_path / "text")
    assert [p.name for p in written] == ["predict_net.pbtxt", "init_net.pbtxt"]
    again = load_model_dir(tmp_path / "text")
    assert net_to_netdef(again.predict_net) == net_to_netdef(model.predict_net)
    assert again.init_net is not None and model.init_net is not None
    assert net_to_netdef(again.init_net) == net_to_netdef(model.init_net)

    binary = save_model(model, tmp_path / "binary", text=False)
    assert [p.name for p in binary] == ["predict_net.pb", "init_net.pb"]
    assert binary[0].read_bytes() == net_to_netdef(model.predict_net).SerializeToString()

    alone = Model(_small_net())
    assert [p.name for p in save_model(alone, tmp_path / "alone", text=True)] == [
        "predict_net.pbtxt"
    ]
    assert sorted(p.name for p in (tmp_path / "alone").iterdir()) == ["predict_net.pbtxt"]


def test_save_model_into_a_file_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SerdeError):
        save_model(Model(_small_net()), blocker)


# -- MetaNetDef -----------------------------------------------------------------------------


def _metanet(*keys: str) -> metanet_pb2.MetaNetDef:
    meta = metanet_pb2.MetaNetDef()
    for key in keys:
        entry = meta.nets.add(key=key)
        entry.value.name = key.lower()
        entry.value.op.add(type="ConstantFill", output=[f"{key.lower()}_out"])
    meta.blobs.add(key="INPUTS_BLOB_TYPE", value=["data"])
    return meta


def test_metanet_list_and_extract(tmp_path: Path) -> None:
    meta = _metanet("GLOBAL_INIT_NET_TYPE", "PREDICT_INIT_NET_TYPE", "PREDICT_NET_TYPE")
    binary = tmp_path / "model.metanet"
    binary.write_bytes(meta.SerializeToString())
    text = tmp_path / "model.metanet.pbtxt"
    text.write_text(text_format.MessageToString(meta))
    for path in (binary, text):
        loaded = load_metanet(path)
        assert loaded == meta
        assert list_metanet_nets(loaded) == [
            "GLOBAL_INIT_NET_TYPE",
            "PREDICT_INIT_NET_TYPE",
            "PREDICT_NET_TYPE",
        ]
    predict = extract_metanet_net(meta, "PREDICT_NET_TYPE")
    assert predict.name == "predict_net_type"
    predict.name = "changed"
    assert meta.nets[2].value.name == "predict_net_type"
    with pytest.raises(SerdeError) as info:
        extract_metanet_net(meta, "TRAIN_NET")
    assert "TRAIN_NET" in str(info.value)
    assert "PREDICT_NET_TYPE" in str(info.value)


def test_model_from_metanet_picks_the_init() -> None:
    both = model_from_metanet(
        _metanet("GLOBAL_INIT_NET_TYPE", "PREDICT_INIT_NET_TYPE", "PREDICT_NET_TYPE")
    )
    assert both.predict_net.name == "predict_net_type"
    assert both.init_net is not None and both.init_net.name == "predict_init_net_type"
    global_only = model_from_metanet(_metanet("GLOBAL_INIT_NET_TYPE", "PREDICT_NET_TYPE"))
    assert global_only.init_net is not None
    assert global_only.init_net.name == "global_init_net_type"
    assert model_from_metanet(_metanet("PREDICT_NET_TYPE")).init_net is None
    with pytest.raises(SerdeError, match="PREDICT_NET_TYPE"):
        model_from_metanet(_metanet("GLOBAL_INIT_NET_TYPE"))


def test_load_metanet_refuses_other_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.metanet"
    empty.write_bytes(b"")
    with pytest.raises(SerdeError, match="holds no nets") as info:
        load_metanet(empty)
    assert info.value.path == empty
    with pytest.raises(SerdeError, match="not a MetaNetDef"):
        load_metanet(TINY / "predict_net.pbtxt")
    with pytest.raises(SerdeError, match="cannot read"):
        load_metanet(tmp_path / "absent.metanet")

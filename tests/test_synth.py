"""The synthetic net generator behind the benchmarks and property tests (benchmarks/synth.py)."""

from __future__ import annotations

import importlib.util
import math
from collections import defaultdict
from pathlib import Path

import pytest

from graphtools.proto import caffe2_pb2
from graphtools.ssa import get_op_ids_in_path, get_ssa

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)

SIZES = [1, 2, 7, 40, 41, 100, 1000]


def _consumers(net: caffe2_pb2.NetDef) -> dict[str, list[int]]:
    """Ops reading each blob name (names suffice here: only in-place ops rewrite a name)."""
    readers: dict[str, list[int]] = defaultdict(list)
    for index, op in enumerate(net.op):
        for name in op.input:
            readers[name].append(index)
    return readers


def _producers(net: caffe2_pb2.NetDef) -> dict[str, int]:
    """Last op writing each blob name."""
    return {name: index for index, op in enumerate(net.op) for name in op.output}


@pytest.mark.parametrize("num_ops", SIZES)
def test_exact_size_and_well_formed(num_ops: int) -> None:
    predict, init = synth.make_synthetic_pair(num_ops, seed=3)
    assert len(predict.op) == num_ops
    init_outputs = {name for op in init.op for name in op.output}
    assert all(not op.input for op in init.op)
    assert set(predict.external_input) == init_outputs | {synth.DATA}
    assert list(init.external_output) == [n for op in init.op for n in op.output]
    defined = set(predict.external_input)
    for index, op in enumerate(predict.op):
        undefined = [name for name in op.input if name not in defined]
        assert not undefined, f"op #{index} {op.type} reads {undefined} before it is defined"
        defined.update(op.output)
    assert set(predict.external_output) <= {n for op in predict.op for n in op.output}
    assert predict.external_output[0] == synth.OUTPUT
    ssa, _ = get_ssa(predict)
    assert not {n for ins, _ in ssa for n, v in ins if v == 0} - set(predict.external_input)


@pytest.mark.parametrize("num_ops", [40, 1000])
def test_deterministic_per_seed(num_ops: int) -> None:
    first = synth.make_synthetic_pair(num_ops, seed=5)
    second = synth.make_synthetic_pair(num_ops, seed=5)
    other = synth.make_synthetic_pair(num_ops, seed=6)
    assert [n.SerializeToString() for n in first] == [n.SerializeToString() for n in second]
    assert [n.SerializeToString() for n in first] != [n.SerializeToString() for n in other]


def test_rejects_empty_net() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        synth.make_synthetic_pair(0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_feature_present_from_40_ops(seed: int) -> None:
    predict, _ = synth.make_synthetic_pair(40, seed=seed)
    ops = list(predict.op)
    readers = _consumers(predict)
    producers = _producers(predict)

    assert any(set(op.input) & set(op.output) for op in ops if op.type == "Relu")

    forward = [i for i, op in enumerate(ops) if op.type == "CopyCPUToGPU"]
    assert forward
    fusable, blocked, shared_reverse = 0, 0, 0
    for index in forward:
        gpu_readers = readers[ops[index].output[0]]
        reverse = [i for i in gpu_readers if ops[i].type == "CopyGPUToCPU"]
        assert reverse, "every forward copy has a reverse copy"
        assert all(readers[ops[i].output[0]] for i in reverse), "reverse copies feed consumers"
        if len(reverse) == len(gpu_readers):
            fusable += 1
        else:
            blocked += 1
        shared_reverse += any(len(readers[ops[i].output[0]]) > 1 for i in reverse)
        assert ops[index].device_option.device_type == 1
    assert fusable and blocked and shared_reverse

    sums = [op for op in ops if op.type == "Sum" and len(set(op.input)) == 2]
    assert any(producers.get(op.input[0]) != producers.get(op.input[1]) for op in sums)

    ssa, versions = get_ssa(predict)
    live = set(get_op_ids_in_path(ssa, versions, [], list(predict.external_output)))
    dead = [ops[i].type for i in range(len(ops)) if i not in live]
    assert dead
    assert set(dead) <= {"Sigmoid", "Mul", "Shape", "Conv", "Relu"}


@pytest.mark.parametrize("num_ops", [40, 1000])
def test_reshape_heads_have_the_onnx_export_structure(num_ops: int) -> None:
    predict, init = synth.make_synthetic_pair(num_ops, seed=1)
    ops = list(predict.op)
    producers = _producers(predict)
    readers = _consumers(predict)
    int_params = {op.output[0]: op for op in init.op if op.type == "GivenTensorInt64Fill"}
    reshapes = [i for i, op in enumerate(ops) if op.type == "Reshape"]
    assert reshapes
    for index in reshapes:
        reshape = ops[index]
        data, shape = reshape.input
        concat = ops[producers[shape]]
        assert concat.type == "Concat"
        assert concat.input[1] in int_params
        assert list(int_params[concat.input[1]].arg[1].ints) == [-1]
        expand = ops[producers[concat.input[0]]]
        assert expand.type == "ExpandDims"
        gather = ops[producers[expand.input[0]]]
        assert gather.type == "Gather"
        assert list(int_params[gather.input[1]].arg[1].ints) == [0]
        shape_op = ops[producers[gather.input[0]]]
        assert shape_op.type == "Shape"
        assert shape_op.input[0] == data
        assert producers[data] < producers[gather.input[0]], "data comes from the net"
        consumers = readers[reshape.output[0]]
        assert consumers and all(ops[i].type == "FC" for i in consumers)
        assert not readers[reshape.output[1]], "Reshape's old_shape output is unused"


def test_fills_match_their_shapes_and_ops_are_plausibly_sized() -> None:
    predict, init = synth.make_synthetic_pair(1000, seed=0)
    for op in init.op:
        args = {arg.name: arg for arg in op.arg}
        values = args["values"].floats if op.type == "GivenTensorFill" else args["values"].ints
        assert len(values) == math.prod(args["shape"].ints), op.output[0]
    for op in predict.op:
        if op.type == "Conv":
            args = {arg.name: arg for arg in op.arg}
            assert args["order"].s == b"NCHW"
            assert {"kernel", "stride", "pad"} <= set(args)
    assert 60 <= len(predict.SerializeToString()) / len(predict.op) <= 120


def test_cli_writes_a_loadable_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    synth.main(["60", str(tmp_path), "--seed", "2"])
    predict, init = synth.make_synthetic_pair(60, seed=2)
    assert (tmp_path / "predict_net.pb").read_bytes() == predict.SerializeToString()
    assert (tmp_path / "init_net.pb").read_bytes() == init.SerializeToString()
    assert "predict_net.pb" in capsys.readouterr().out

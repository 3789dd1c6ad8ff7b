"""Drop-in compatibility: the exception classes upstream raised, the types it returned, and
the cases upstream handles that we must too (found running upstream's own test inputs)."""

from __future__ import annotations

import pytest

from graphtools.compat import (
    fuse_copy_between_cpu_and_gpu,
    get_params_from_init_net,
    infer_device_type,
    ssa_rewrite,
)
from graphtools.errors import InvalidNetError
from graphtools.ir import Model, Net, Op
from graphtools.passes.fuse_copy_ops import FuseCopyOps
from graphtools.serde.codec import net_to_netdef


def test_a_device_conflict_is_also_a_runtime_error() -> None:
    net = Net([Op("Add", ["a", "b"], ["c"])], ["a", "b"], ["c"])
    with pytest.raises(RuntimeError, match="mixes devices") as info:
        infer_device_type(net_to_netdef(net), {("a", 0): "cpu", ("b", 0): "gpu"})
    assert isinstance(info.value, InvalidNetError)


def test_statuses_left_unknown_are_also_not_implemented() -> None:
    net = Net([Op("Relu", ["a"], ["b"]), Op("Relu", ["x"], ["y"])], ["a", "x"], ["b", "y"])
    with pytest.raises(NotImplementedError, match="cannot infer the status"):
        infer_device_type(net_to_netdef(net), {("a", 0): "cpu"})


def test_ssa_rewrite_of_an_output_nothing_writes_is_also_a_key_error() -> None:
    net = Net([Op("Relu", ["a"], ["b"])], ["a"], ["nowhere"])
    with pytest.raises(KeyError) as info:
        ssa_rewrite(net_to_netdef(net))
    assert str(info.value).startswith("external output 'nowhere'")  # no KeyError quoting


def test_params_of_an_output_nothing_writes_is_also_a_key_error() -> None:
    init = Net([Op("ConstantFill", [], ["w"], args={"shape": [1]})], external_outputs=["v"])
    with pytest.raises(KeyError, match="'v' is written by no op"):
        get_params_from_init_net(net_to_netdef(init))


def _round_trip_into_the_source() -> Net:
    return Net(
        [
            Op("CopyCPUToGPU", ["a"], ["b"]),
            Op("CopyGPUToCPU", ["b"], ["a"]),
            Op("Relu", ["a"], ["y"]),
        ],
        ["a"],
        ["y"],
    )


def test_a_round_trip_writing_back_into_its_source_is_fused_by_the_function() -> None:
    netdef = net_to_netdef(_round_trip_into_the_source())
    fuse_copy_between_cpu_and_gpu(netdef)
    assert [(op.type, list(op.input), list(op.output)) for op in netdef.op] == [
        ("Relu", ["a"], ["y"])
    ]


def test_a_round_trip_writing_back_into_its_source_is_fused_by_the_pass() -> None:
    model = Model(_round_trip_into_the_source())
    result = FuseCopyOps()(model)
    assert result.modified and result.stats == {"copies_removed": 2, "consumers_rewired": 1}
    assert [op.type for op in model.predict_net] == ["Relu"]


def test_every_detectron2_helper_imports_from_graphtools_passes() -> None:
    """Issue 21 item 11: drop-in users import detectron2's helpers from one module; every
    drop-in of ``graphtools.compat`` is there, the same function."""
    import graphtools.compat
    import graphtools.passes

    for name in ("infer_device_type", "get_external_blob_names", "infer_status"):
        assert getattr(graphtools.passes, name) is getattr(graphtools.compat, name)
    missing = set(graphtools.compat.__all__) - set(graphtools.passes.__all__)
    assert missing == set()


def test_get_sub_graph_external_input_output_takes_a_netdef_everywhere() -> None:
    """Issue 21 item 11: ``graphtools.graph``'s function of the same name takes a NetDef as
    detectron2's does (it used to fail with ``AttributeError: ssa``), with the same answer."""
    import graphtools
    import graphtools.graph
    import graphtools.passes

    ops = [Op("Relu", ["x"], ["a"]), Op("Sigmoid", ["a"], ["b"]), Op("Add", ["a", "b"], ["y"])]
    net = Net(ops, ["x"], ["y"], name="n")
    expected = ([("x", 0)], [("a", 1), ("b", 1)])
    for function in (
        graphtools.graph.get_sub_graph_external_input_output,
        graphtools.get_sub_graph_external_input_output,
        graphtools.passes.get_sub_graph_external_input_output,
    ):
        assert function(net_to_netdef(net), [0, 1]) == expected
        assert function(net, [0, 1]) == expected
    assert graphtools.graph.get_sub_graph_external_input_output(net_to_netdef(net), [2]) == (
        [("a", 1), ("b", 1)],
        [("y", 1)],
    )

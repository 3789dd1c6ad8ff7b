"""Baseline only, not product code: the upstream detectron2 export helpers, re-implemented naively.

This module re-implements, on NetDef messages, the algorithms of detectron2's
``export/shared.py`` (``fuse_copy_between_cpu_and_gpu``, ``remove_reshape_for_fc``,
``remove_dead_end_ops`` and their helpers, in facebookresearch/detectron2) with their upstream
complexity, so that ``bench_passes.py`` can compare graphtools' passes with what
users run today:

* ``fuse_copy_between_cpu_and_gpu``: scan, fuse the first fusable copy pair, recompute
  ``get_ssa`` and the consumer map, rescan from the start (quadratic);
* ``identify_reshape_sub_graph`` / ``remove_reshape_for_fc``: per Reshape, the consumer and
  producer maps of the whole net and a DiGraph over a window of 15 ops on each side, all paths
  enumerated by DFS; ``get_ssa`` recomputed per candidate and per removal (quadratic);
* ``remove_dead_end_ops``: one backward sweep (linear).

Upstream's quirks are kept (negative window start, first consumer only rewired, a blob read by
one removed op counts as dead). One upstream cost is deliberately *not* reproduced: upstream's
``get_sub_graph_external_input_output`` gathers the other ops' inputs with ``sum(lists, [])``,
which is quadratic per call; here it is a linear set, so this baseline is a lower bound on
upstream's time. ``get_ssa`` is a local copy of Caffe2's so the baseline does not depend on
graphtools.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from graphtools.proto import caffe2_pb2

Blob = tuple[str, int]
SSA = list[tuple[list[Blob], list[Blob]]]

_COPY_OPS = ("CopyCPUToGPU", "CopyGPUToCPU")
_WINDOW = 15


def get_ssa(
    net: caffe2_pb2.NetDef, blob_versions: dict[str, int] | None = None
) -> tuple[SSA, dict[str, int]]:
    """Caffe2's ``core.get_ssa`` on a NetDef: versioned inputs/outputs per op, final versions."""
    versions = {} if blob_versions is None else blob_versions
    for name in net.external_input:
        versions.setdefault(name, 0)
    declares_inputs = len(net.external_input) > 0
    ssa: SSA = []
    for op in net.op:
        if not declares_inputs:
            for name in op.input:
                versions.setdefault(name, 0)
        inputs = [(name, versions.get(name, 0)) for name in op.input]
        for name in op.output:
            versions[name] = versions.get(name, 0) + 1
        ssa.append((inputs, [(name, versions[name]) for name in op.output]))
    return ssa, versions


def _consumer_map(ssa: SSA) -> defaultdict[Blob, list[tuple[int, int]]]:
    consumers: defaultdict[Blob, list[tuple[int, int]]] = defaultdict(list)
    for index, (inputs, _) in enumerate(ssa):
        for position, blob in enumerate(inputs):
            consumers[blob].append((index, position))
    return consumers


def _producer_map(ssa: SSA) -> dict[Blob, tuple[int, int]]:
    return {
        blob: (index, position)
        for index, (_, outputs) in enumerate(ssa)
        for position, blob in enumerate(outputs)
    }


def _all_paths(edges: dict[Blob, list[Blob]], source: Blob, target: Blob) -> list[list[Blob]]:
    """Every simple path from ``source`` to ``target`` by DFS, as upstream's DiGraph does."""
    paths: list[list[Blob]] = []
    path: list[Blob] = []
    on_path: set[Blob] = set()

    def visit(node: Blob) -> None:
        path.append(node)
        on_path.add(node)
        if node == target:
            paths.append(list(path))
        else:
            for successor in edges.get(node, ()):
                if successor not in on_path:
                    visit(successor)
        path.pop()
        on_path.discard(node)

    visit(source)
    return paths


def _dependency_chain(ssa: SSA, target: Blob, source: Blob) -> list[int]:
    consumers = _consumer_map(ssa)
    producers = _producer_map(ssa)
    start = min(index for index, _ in consumers[source]) - _WINDOW
    end = producers[target][0] + _WINDOW if target in producers else start
    edges: dict[Blob, list[Blob]] = defaultdict(list)
    for inputs, outputs in ssa[start : end + 1]:  # a negative start wraps, as upstream
        for blob_in in inputs:
            edges[blob_in].extend(outputs)
    chain: set[int] = set()
    for path in _all_paths(edges, source, target):
        chain.update(producers[blob][0] for blob in path[1:])
    return sorted(chain)


def identify_reshape_sub_graph(predict_net: caffe2_pb2.NetDef) -> list[list[int]]:
    """Per Reshape: the ops computing its shape input from its data input, then the Reshape."""
    ssa, _ = get_ssa(predict_net)
    found = []
    for index, op in enumerate(predict_net.op):
        if op.type == "Reshape":
            data, shape = ssa[index][0]
            found.append([*_dependency_chain(ssa, shape, data), index])
    return found


def get_sub_graph_external_input_output(
    predict_net: caffe2_pb2.NetDef, op_indices: list[int]
) -> tuple[list[Blob], list[Blob]]:
    """Versioned inputs the sub-graph reads from outside, outputs read outside it."""
    ssa, versions = get_ssa(predict_net)
    inside = set(op_indices)
    all_inputs: list[Blob] = []
    all_outputs: list[Blob] = []
    for index in op_indices:
        all_inputs += [blob for blob in ssa[index][0] if blob not in all_inputs]
        all_outputs += ssa[index][1]
    ext_inputs = [blob for blob in all_inputs if blob not in all_outputs]
    read_outside = {(name, versions[name]) for name in predict_net.external_output}
    for index, (inputs, _) in enumerate(ssa):
        if index not in inside:
            read_outside.update(inputs)
    return ext_inputs, [blob for blob in all_outputs if blob in read_outside]


def rename_op_output(
    predict_net: caffe2_pb2.NetDef, op_id: int, output_id: int, new_name: str
) -> None:
    """Rename one versioned output everywhere it is read (and in external_output if final)."""
    ssa, versions = get_ssa(predict_net)
    old_name, version = ssa[op_id][1][output_id]
    for op, (inputs, outputs) in zip(predict_net.op, ssa, strict=True):
        for position, blob in enumerate(inputs):
            if blob == (old_name, version):
                op.input[position] = new_name
        for position, blob in enumerate(outputs):
            if blob == (old_name, version):
                op.output[position] = new_name
    if versions.get(old_name, 0) == version:
        for position, name in enumerate(predict_net.external_output):
            if name == old_name:
                predict_net.external_output[position] = new_name


def remove_reshape_for_fc(
    predict_net: caffe2_pb2.NetDef, params: dict[str, Any]
) -> tuple[caffe2_pb2.NetDef, dict[str, Any]]:
    """Drop Reshape sub-graphs feeding only FC; mutates ``predict_net`` and returns a copy."""
    removable = []
    for sub_graph in identify_reshape_sub_graph(predict_net):
        reshape = sub_graph[-1]
        ssa, _ = get_ssa(predict_net)
        reshaped = ssa[reshape][1][0]
        consumers = [index for index, (inputs, _) in enumerate(ssa) if reshaped in inputs]
        if all(predict_net.op[index].type == "FC" for index in consumers):
            ext_inputs, ext_outputs = get_sub_graph_external_input_output(predict_net, sub_graph)
            if len([b for b in ext_inputs if b[1] != 0]) == 1 and len(ext_outputs) == 1:
                removable.append(sub_graph)
    drop: set[int] = set()  # upstream uses a list here (quadratic filter); a set keeps it fair
    param_blobs: list[Blob] = []
    for sub_graph in removable:
        reshape = sub_graph[-1]
        rename_op_output(predict_net, reshape, 0, predict_net.op[reshape].input[0])
        ext_inputs, ext_outputs = get_sub_graph_external_input_output(predict_net, sub_graph)
        data_inputs = [b for b in ext_inputs if b[1] != 0]
        if not (
            len(data_inputs) == 1
            and len(ext_outputs) == 1
            and ext_outputs[0] == (data_inputs[0][0], data_inputs[0][1] + 1)
        ):
            raise RuntimeError(f"reshape sub-graph {sub_graph} is not an identity after renaming")
        drop.update(sub_graph)
        param_blobs.extend(b for b in ext_inputs if b[1] == 0)
    result = copy.deepcopy(predict_net)
    kept = [op for index, op in enumerate(result.op) if index not in drop]
    del result.op[:]
    result.op.extend(kept)
    for name, _ in param_blobs:
        del params[name]
        result.external_input.remove(name)
    return result, params


def _fuse_once(predict_net: caffe2_pb2.NetDef) -> bool:
    ssa, versions = get_ssa(predict_net)
    consumers = _consumer_map(ssa)
    external = [(name, versions[name]) for name in predict_net.external_output]
    for op_id, op in enumerate(predict_net.op):
        if op.type not in _COPY_OPS:
            continue
        copied = ssa[op_id][1][0]
        readers = [index for index, _ in consumers[copied]]
        reverse_type = _COPY_OPS[1 - _COPY_OPS.index(op.type)]
        fusable = (
            len(readers) > 0
            and copied not in external
            and all(
                predict_net.op[index].type == reverse_type and ssa[index][1][0] not in external
                for index in readers
            )
        )
        if not fusable:
            continue
        for reverse in readers:
            next_op, position = consumers[ssa[reverse][1][0]][0]
            predict_net.op[next_op].input[position] = op.input[0]
        kept = [
            o for index, o in enumerate(predict_net.op) if index != op_id and index not in readers
        ]
        del predict_net.op[:]
        predict_net.op.extend(kept)
        return True
    return False


def fuse_copy_between_cpu_and_gpu(predict_net: caffe2_pb2.NetDef) -> None:
    """Fuse CPU->GPU->CPU (and GPU->CPU->GPU) round trips in place, one per full rescan."""
    while _fuse_once(predict_net):
        pass


def remove_dead_end_ops(net_def: caffe2_pb2.NetDef) -> None:
    """Remove, in place, ops none of whose versioned outputs reaches a live consumer."""
    ssa, versions = get_ssa(net_def)
    external = [(name, versions[name]) for name in net_def.external_output]
    consumers = _consumer_map(ssa)
    removed: set[int] = set()

    def dead(blob: Blob) -> bool:
        readers = consumers[blob]
        live = blob in external or (
            len(readers) > 0 and all(index not in removed for index, _ in readers)
        )
        return not live

    for index in reversed(range(len(ssa))):
        if all(dead(blob) for blob in ssa[index][1]):
            removed.add(index)
    kept = [op for index, op in enumerate(net_def.op) if index not in removed]
    del net_def.op[:]
    net_def.op.extend(kept)


def run_pipeline(predict_bytes: bytes, init_bytes: bytes) -> tuple[bytes, bytes]:
    """Parse, remove reshapes before FC, fuse copies, remove dead ends, serialize.

    The init_net keeps the fills of the parameters that ``remove_reshape_for_fc`` left in
    ``params``, as detectron2's export does when it rebuilds the init_net from them.
    """
    predict_net = caffe2_pb2.NetDef()
    predict_net.ParseFromString(predict_bytes)
    init_net = caffe2_pb2.NetDef()
    init_net.ParseFromString(init_bytes)
    params = {op.output[0]: op for op in init_net.op}
    predict_net, params = remove_reshape_for_fc(predict_net, params)
    fuse_copy_between_cpu_and_gpu(predict_net)
    remove_dead_end_ops(predict_net)
    kept = [op for op in init_net.op if op.output[0] in params]
    del init_net.op[:]
    init_net.op.extend(kept)
    return predict_net.SerializeToString(), init_net.SerializeToString()

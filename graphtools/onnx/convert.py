"""The conversions as users call them: ``export_onnx`` (a Caffe2 pair -> an ONNX ``ModelProto``)
and ``import_onnx`` (an ONNX model -> a Caffe2 pair), thin functions over the passes
``convert-to-onnx`` and ``convert-to-caffe2``. Each runs its pass with the pass's checks (a
refusal raises the converter's typed error): an export on a copy of the pair, whose result it
encodes with the ONNX codec; an import on the model as the ONNX codec loads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

import onnx

from graphtools._core import ONNX
from graphtools.errors import InvalidArgumentError, PreconditionError, SerdeError, did_you_mean
from graphtools.ir import Model, Net, expect_model
from graphtools.onnx.external import ModelSource
from graphtools.passes.convert_to_caffe2 import ConvertToCaffe2
from graphtools.passes.convert_to_onnx import ConvertToOnnx
from graphtools.serde.netdef_io import read_bytes
from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes
from graphtools.values import ValueType

__all__ = ["ValueInfo", "declare_types", "export_onnx", "import_onnx"]

ValueInfo = Mapping[str, tuple[int, Sequence[int | str | None] | None]]
"""``{input name: (onnx elem_type, shape)}``, as Caffe2's frontend took the inputs' types."""


def declare_types(net: Net, value_info: ValueInfo) -> None:
    """Declare the types ``value_info`` gives in ``net.types`` (where a conversion reads them).

    Raises:
        InvalidArgumentError: an entry that is not ``(onnx elem_type, shape)`` (a shape alone,
            an element type onnx does not know, a negative dim).
    """
    types = {name: _value_type(name, entry) for name, entry in value_info.items()}
    with net.edit() as edit:
        for name, value_type in types.items():
            edit.set_type(name, value_type)


def _refuse_unknown_names(net: Net, value_info: ValueInfo) -> None:
    """A ``value_info`` key naming no blob of the net (a misspelt input) is refused, naming
    it: dropped, it left the real input untyped, and the error then named only that one."""
    names = set(net.external_inputs) | set(net.external_outputs)
    for op in net:
        names.update(op.inputs)
        names.update(op.outputs)
    inputs = list(net.external_inputs)
    for name in value_info:
        if name not in names:
            raise InvalidArgumentError(
                f"value_info names {name!r}, which is no blob of the predict_net"
                f"{did_you_mean(name, inputs or names)}"
            )


def _value_type(name: str, entry: Any) -> ValueType:
    """``value_info[name]`` checked: ``(elem type, shape or None)``."""
    example = f"value_info={{{name!r}: (onnx.TensorProto.FLOAT, [1, 3, 224, 224])}}"
    if not isinstance(entry, tuple | list) or len(entry) != 2:
        raise InvalidArgumentError(
            f"value_info[{name!r}] is {entry!r}: give (onnx elem_type, shape), e.g. {example}"
        )
    elem_type, shape = entry
    if not isinstance(elem_type, Integral) or elem_type not in onnx.TensorProto.DataType.values():
        raise InvalidArgumentError(
            f"value_info[{name!r}] has element type {elem_type!r}, which onnx does not know: "
            f"give an onnx.TensorProto data type, e.g. {example}"
        )
    if shape is None:
        return ValueType(int(elem_type), None)
    dims = tuple(int(d) if isinstance(d, Integral) else d for d in shape)
    if not all(isinstance(d, str) or d is None or (isinstance(d, int) and d >= 0) for d in dims):
        raise InvalidArgumentError(
            f"value_info[{name!r}] has shape {list(dims)}: each dim is a size (0 or more), a "
            "name (a free dim) or None"
        )
    return ValueType(int(elem_type), dims)


def export_onnx(
    model: Model,
    opset: int | None = None,
    ir_version: int | None = None,
    value_info: ValueInfo | None = None,
    dynamic_batch: bool = False,
    recurrent: str = "loop",
    input_quantization: Mapping[str, tuple[float, int]] | None = None,
    test_mode: bool = False,
) -> onnx.ModelProto:
    """Convert an init_net/predict_net pair into an ONNX model (the ``convert-to-onnx`` pass
    on a copy, encoded).

    Args:
        model: the pair (not modified).
        opset: default-domain opset to write (17 when ``None``), from 11 to the newest the
            installed onnx knows.
        ir_version: IR version to write; by default the lowest that carries ``opset``.
        value_info: ``{input name: (onnx elem_type, shape)}`` as Caffe2's frontend took it,
            declared on the predict_net before the conversion (over the types it declares
            already: an imported pair's); needed for every graph input nothing types.
        dynamic_batch: write the batch of the graph inputs (dim 0; dim 1 of a 3-D input a
            RecurrentNetwork reads time-major) and what follows from it as free
            dimensions: ``N`` for the first input, ``N_<input>`` for each other one.
        recurrent: ``"loop"`` writes each RecurrentNetwork op as an ONNX ``Loop``, ``"scan"``
            as a ``Scan``.
        input_quantization: ``{input name: (scale, zero point)}`` of the graph inputs that
            are Int8 blobs (fed as their uint8 values; ``value_info`` gives UINT8).
        test_mode: export a training net's inference form: ``is_test=1`` on the ops that
            have it (``Dropout``, ``SpatialBN``), which are refused in training mode otherwise.

    Raises:
        UnsupportedOpError: an op without an ONNX form (naming op index and type; op types
            without an exporter, nested nets included, are refused before anything else), or
            an argument variant without one (NHWC order, training mode, ...).
        InvalidNetError: an input whose type cannot be known, or a blob read before any op
            writes it that is neither an input nor a param. (A declared external input that
            no op reads is left out of the graph unless its type is declared.)
    """
    converter = ConvertToOnnx(
        opset=ConvertToOnnx.opset if opset is None else int(opset),
        ir_version=0 if ir_version is None else int(ir_version),
        dynamic_batch=dynamic_batch,
        recurrent=recurrent,
        test_mode=test_mode,
        input_quantization=tuple(
            f"{name}={float(scale)!r}:{int(zero_point)}"
            for name, (scale, zero_point) in (input_quantization or {}).items()
        ),
    )
    work = expect_model(model, "export_onnx").copy()
    if value_info:
        _refuse_unknown_names(work.predict_net, value_info)
        declare_types(work.predict_net, value_info)
    converter(work)
    return onnx.ModelProto.FromString(model_to_onnx_bytes(work))


def import_onnx(model_or_path: ModelSource | Model, *, base_dir: str | Path | None = None) -> Model:
    """Convert an ONNX model into a Caffe2 init_net/predict_net pair (the ``convert-to-caffe2``
    pass on the model as the ONNX codec loads it).

    Args:
        model_or_path: a ModelProto or an ONNX-dialect ``Model`` (neither is modified), a
            path to an ``.onnx`` file or the file's bytes.
        base_dir: folder the external data locations are relative to, for a ModelProto or
            bytes (a path uses its own folder); external data is read as it is converted.

    Returns:
        The pair: ``<graph>_init`` holding one fill per param and ``<graph>_predict``, which
        declares the graph inputs' types, so ``export_onnx`` needs no ``value_info`` for it.

    Raises:
        UnsupportedOpError: a node, attribute, opset or element type without a Caffe2
            mapping (naming the node, op type, attribute and opset).
        SerdeError: the file or its external data cannot be read.
    """
    if isinstance(model_or_path, Model):
        if model_or_path.dialect != ONNX:
            raise PreconditionError(
                f"import_onnx takes an ONNX model, not a {model_or_path.dialect} one"
            )
        model = model_or_path.copy()
    else:
        model = _loaded(model_or_path, base_dir)
    ConvertToCaffe2()(model)
    return model


def _loaded(source: ModelSource, base_dir: str | Path | None) -> Model:
    """The ONNX-dialect IR of ``source`` (external data left in its files until read)."""
    if isinstance(source, onnx.ModelProto):
        try:
            data = source.SerializeToString()
        except ValueError as exc:  # over protobuf's 2 GB limit
            raise SerdeError(
                None,
                f"cannot encode the model in memory ({exc}): save it with external data "
                "and import the file",
            ) from exc
        return model_from_onnx_bytes(data, base_dir=base_dir)
    if isinstance(source, bytes):
        return model_from_onnx_bytes(source, base_dir=base_dir)
    return model_from_onnx_bytes(read_bytes(source), Path(source), base_dir)

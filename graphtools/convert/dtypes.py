"""Element types across the bridge: ONNX ``TensorProto.DataType``, numpy and Caffe2's enum.

Caffe2's ``TensorProto.DataType`` numbers differ from ONNX's (INT32 is 2 in Caffe2, 6 in ONNX);
types Caffe2 has no counterpart for (unsigned 32/64-bit, bfloat16, float8, complex, 4-bit) are
refused where they appear.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from graphtools.analysis.dtypes import DTYPE_NUMBERS
from graphtools.errors import UnsupportedOpError

__all__ = [
    "CAFFE2_TO_ONNX",
    "ONNX_TO_CAFFE2",
    "caffe2_dtype",
    "caffe2_dtype_number",
    "fill_op_for",
    "numpy_of_onnx",
    "onnx_dtype_of_numpy",
]

#: ONNX elem type -> Caffe2 ``TensorProto.DataType``.
ONNX_TO_CAFFE2: dict[int, int] = {
    TensorProto.FLOAT: 1,
    TensorProto.INT32: 2,
    TensorProto.STRING: 4,
    TensorProto.BOOL: 5,
    TensorProto.UINT8: 6,
    TensorProto.INT8: 7,
    TensorProto.UINT16: 8,
    TensorProto.INT16: 9,
    TensorProto.INT64: 10,
    TensorProto.FLOAT16: 12,
    TensorProto.DOUBLE: 13,
}
#: Caffe2 ``TensorProto.DataType`` -> ONNX elem type (Caffe2's BYTE is raw uint8).
CAFFE2_TO_ONNX: dict[int, int] = {c2: ox for ox, c2 in ONNX_TO_CAFFE2.items()} | {
    3: TensorProto.UINT8
}

# numpy dtype -> the GivenTensor*Fill holding it and the Argument field of its values.
_FILLS: dict[Any, tuple[str, str]] = {
    np.dtype(np.float32): ("GivenTensorFill", "floats"),
    np.dtype(np.float64): ("GivenTensorDoubleFill", "floats"),
    np.dtype(np.float16): ("GivenTensorFp16Fill", "floats"),
    np.dtype(np.int64): ("GivenTensorInt64Fill", "ints"),
    np.dtype(np.int32): ("GivenTensorIntFill", "ints"),
    np.dtype(np.int16): ("GivenTensorInt16Fill", "ints"),
    np.dtype(np.bool_): ("GivenTensorBoolFill", "ints"),
    np.dtype(np.uint8): ("GivenTensorByteStringToUInt8Fill", "s"),
    np.dtype(object): ("GivenTensorStringFill", "strings"),
}


def caffe2_dtype(onnx_type: int, where: str) -> int:
    """The Caffe2 enum of an ONNX elem type; ``UnsupportedOpError`` naming ``where`` if none."""
    code = ONNX_TO_CAFFE2.get(onnx_type)
    if code is None:
        raise UnsupportedOpError(
            f"{where}: element type {TensorProto.DataType.Name(onnx_type)} has no Caffe2 "
            "counterpart"
        )
    return code


def caffe2_dtype_number(value: Any) -> int:
    """A Caffe2 dtype argument (number, or name as bytes/str) as its enum number."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        code = DTYPE_NUMBERS.get(value.upper())
        if code is None:
            raise UnsupportedOpError(f"unknown Caffe2 data type {value!r}")
        return code
    return int(value)


def numpy_of_onnx(onnx_type: int) -> np.dtype[Any]:
    """The numpy dtype of an ONNX elem type (strings are ``object``)."""
    if onnx_type == TensorProto.STRING:
        return np.dtype(object)
    from onnx.helper import tensor_dtype_to_np_dtype

    return np.dtype(tensor_dtype_to_np_dtype(onnx_type))


def onnx_dtype_of_numpy(dtype: Any) -> int:
    """The ONNX elem type of a numpy dtype (``object`` arrays hold strings)."""
    dtype = np.dtype(dtype)
    if dtype == np.dtype(object) or dtype.kind in "SU":
        return TensorProto.STRING
    from onnx.helper import np_dtype_to_tensor_dtype

    return int(np_dtype_to_tensor_dtype(dtype))


def fill_op_for(dtype: Any, where: str) -> tuple[str, str]:
    """The ``GivenTensor*Fill`` type and value field that hold an array of ``dtype``.

    Raises:
        UnsupportedOpError: Caffe2 has no given-tensor fill for the dtype (int8, uint16,
            uint32, uint64, bfloat16, ...), naming ``where``.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "SU":
        dtype = np.dtype(object)
    found = _FILLS.get(dtype)
    if found is None:
        raise UnsupportedOpError(f"{where}: Caffe2 has no GivenTensor*Fill for dtype {dtype}")
    return found

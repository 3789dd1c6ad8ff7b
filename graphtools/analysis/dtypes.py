"""Caffe2's tensor data types as numpy dtypes: ``TensorProto.DataType`` codes and fill ops.

The executor's ``Cast`` and fill kernels and the shape analysis read the same table, so an
op's inferred dtype is the dtype its kernel produces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DTYPES", "DTYPE_NUMBERS", "GIVEN_FILL_DTYPES", "dtype_of"]

#: caffe2.proto ``TensorProto.DataType`` -> numpy dtype (``object`` for STRING).
DTYPES: dict[int, Any] = {
    1: np.float32,
    2: np.int32,
    3: np.uint8,
    4: object,
    5: np.bool_,
    6: np.uint8,
    7: np.int8,
    8: np.uint16,
    9: np.int16,
    10: np.int64,
    12: np.float16,
    13: np.float64,
}
#: caffe2.proto ``TensorProto.DataType`` names (as an argument holds them) -> numbers.
DTYPE_NUMBERS: dict[bytes, int] = {
    b"FLOAT": 1,
    b"INT32": 2,
    b"BYTE": 3,
    b"STRING": 4,
    b"BOOL": 5,
    b"UINT8": 6,
    b"INT8": 7,
    b"UINT16": 8,
    b"INT16": 9,
    b"INT64": 10,
    b"FLOAT16": 12,
    b"DOUBLE": 13,
}

#: ``GivenTensor*Fill`` type -> numpy dtype of its output (``GivenTensorFill`` may override it
#: with a ``dtype`` argument).
GIVEN_FILL_DTYPES: dict[str, Any] = {
    "GivenTensorFill": np.float32,
    "GivenTensorDoubleFill": np.float64,
    "GivenTensorFp16Fill": np.float16,
    "GivenTensorIntFill": np.int32,
    "GivenTensorInt64Fill": np.int64,
    "GivenTensorInt16Fill": np.int16,
    "GivenTensorBoolFill": np.bool_,
    "GivenTensorStringFill": object,
}


def dtype_of(value: Any) -> Any:
    """The numpy dtype of a ``TensorProto.DataType`` number (or its name as bytes).

    Raises:
        ValueError: the code or name is not a data type Caffe2 defines.
    """
    if isinstance(value, bytes):
        value = DTYPE_NUMBERS.get(value.upper(), -1)
    dtype = DTYPES.get(int(value))
    if dtype is None:
        raise ValueError(f"unsupported TensorProto data type {value!r}")
    return dtype

from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NetLevel(_message.Message):
    __slots__ = ("name", "op", "type", "num_workers", "device_option", "arg", "external_input", "external_output", "partition_info")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_WORKERS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_OPTION_FIELD_NUMBER: _ClassVar[int]
    ARG_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_INPUT_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: OpLevel
    type: str
    num_workers: int
    device_option: DeviceLevel
    arg: ArgLevel
    external_input: str
    external_output: str
    partition_info: PartitionLevel
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[OpLevel, _Mapping]] = ..., type: _Optional[str] = ..., num_workers: _Optional[int] = ..., device_option: _Optional[_Union[DeviceLevel, _Mapping]] = ..., arg: _Optional[_Union[ArgLevel, _Mapping]] = ..., external_input: _Optional[str] = ..., external_output: _Optional[str] = ..., partition_info: _Optional[_Union[PartitionLevel, _Mapping]] = ...) -> None: ...

class OpLevel(_message.Message):
    __slots__ = ("input", "output", "name", "type", "arg", "device_option", "engine", "control_input", "is_gradient_op", "debug_info", "domain", "op_version")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ARG_FIELD_NUMBER: _ClassVar[int]
    DEVICE_OPTION_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_INPUT_FIELD_NUMBER: _ClassVar[int]
    IS_GRADIENT_OP_FIELD_NUMBER: _ClassVar[int]
    DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    OP_VERSION_FIELD_NUMBER: _ClassVar[int]
    input: str
    output: str
    name: str
    type: str
    arg: ArgLevel
    device_option: DeviceLevel
    engine: str
    control_input: str
    is_gradient_op: bool
    debug_info: str
    domain: str
    op_version: int
    def __init__(self, input: _Optional[str] = ..., output: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[str] = ..., arg: _Optional[_Union[ArgLevel, _Mapping]] = ..., device_option: _Optional[_Union[DeviceLevel, _Mapping]] = ..., engine: _Optional[str] = ..., control_input: _Optional[str] = ..., is_gradient_op: _Optional[bool] = ..., debug_info: _Optional[str] = ..., domain: _Optional[str] = ..., op_version: _Optional[int] = ...) -> None: ...

class ArgLevel(_message.Message):
    __slots__ = ("name", "f", "i", "s", "floats", "ints", "strings", "n", "nets", "t", "tensors", "qtensors")
    NAME_FIELD_NUMBER: _ClassVar[int]
    F_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    S_FIELD_NUMBER: _ClassVar[int]
    FLOATS_FIELD_NUMBER: _ClassVar[int]
    INTS_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    NETS_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    QTENSORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    f: float
    i: int
    s: bytes
    floats: float
    ints: int
    strings: bytes
    n: _containers.RepeatedScalarFieldContainer[bytes]
    nets: _containers.RepeatedScalarFieldContainer[bytes]
    t: TensorLevel
    tensors: TensorLevel
    qtensors: QTensorLevel
    def __init__(self, name: _Optional[str] = ..., f: _Optional[float] = ..., i: _Optional[int] = ..., s: _Optional[bytes] = ..., floats: _Optional[float] = ..., ints: _Optional[int] = ..., strings: _Optional[bytes] = ..., n: _Optional[_Iterable[bytes]] = ..., nets: _Optional[_Iterable[bytes]] = ..., t: _Optional[_Union[TensorLevel, _Mapping]] = ..., tensors: _Optional[_Union[TensorLevel, _Mapping]] = ..., qtensors: _Optional[_Union[QTensorLevel, _Mapping]] = ...) -> None: ...

class DeviceLevel(_message.Message):
    __slots__ = ("device_type", "device_id", "random_seed", "node_name", "numa_node_id", "extra_info")
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    RANDOM_SEED_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EXTRA_INFO_FIELD_NUMBER: _ClassVar[int]
    device_type: int
    device_id: int
    random_seed: int
    node_name: str
    numa_node_id: int
    extra_info: str
    def __init__(self, device_type: _Optional[int] = ..., device_id: _Optional[int] = ..., random_seed: _Optional[int] = ..., node_name: _Optional[str] = ..., numa_node_id: _Optional[int] = ..., extra_info: _Optional[str] = ...) -> None: ...

class TensorLevel(_message.Message):
    __slots__ = ("dims", "data_type", "float_data", "int32_data", "byte_data", "string_data", "name", "device_detail", "double_data", "int64_data", "segment", "raw_data", "data_format")
    DIMS_FIELD_NUMBER: _ClassVar[int]
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_DATA_FIELD_NUMBER: _ClassVar[int]
    INT32_DATA_FIELD_NUMBER: _ClassVar[int]
    BYTE_DATA_FIELD_NUMBER: _ClassVar[int]
    STRING_DATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_DATA_FIELD_NUMBER: _ClassVar[int]
    INT64_DATA_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    RAW_DATA_FIELD_NUMBER: _ClassVar[int]
    DATA_FORMAT_FIELD_NUMBER: _ClassVar[int]
    dims: int
    data_type: int
    float_data: bytes
    int32_data: bytes
    byte_data: bytes
    string_data: bytes
    name: str
    device_detail: DeviceLevel
    double_data: bytes
    int64_data: bytes
    segment: bytes
    raw_data: bytes
    data_format: int
    def __init__(self, dims: _Optional[int] = ..., data_type: _Optional[int] = ..., float_data: _Optional[bytes] = ..., int32_data: _Optional[bytes] = ..., byte_data: _Optional[bytes] = ..., string_data: _Optional[bytes] = ..., name: _Optional[str] = ..., device_detail: _Optional[_Union[DeviceLevel, _Mapping]] = ..., double_data: _Optional[bytes] = ..., int64_data: _Optional[bytes] = ..., segment: _Optional[bytes] = ..., raw_data: _Optional[bytes] = ..., data_format: _Optional[int] = ...) -> None: ...

class QTensorLevel(_message.Message):
    __slots__ = ("dims", "precision", "scale", "bias", "is_signed", "data", "name", "data_type", "scales", "biases", "axis", "is_multiparam")
    DIMS_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    BIAS_FIELD_NUMBER: _ClassVar[int]
    IS_SIGNED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCALES_FIELD_NUMBER: _ClassVar[int]
    BIASES_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    IS_MULTIPARAM_FIELD_NUMBER: _ClassVar[int]
    dims: int
    precision: int
    scale: float
    bias: float
    is_signed: bool
    data: bytes
    name: str
    data_type: int
    scales: float
    biases: float
    axis: int
    is_multiparam: bool
    def __init__(self, dims: _Optional[int] = ..., precision: _Optional[int] = ..., scale: _Optional[float] = ..., bias: _Optional[float] = ..., is_signed: _Optional[bool] = ..., data: _Optional[bytes] = ..., name: _Optional[str] = ..., data_type: _Optional[int] = ..., scales: _Optional[float] = ..., biases: _Optional[float] = ..., axis: _Optional[int] = ..., is_multiparam: _Optional[bool] = ...) -> None: ...

class PartitionLevel(_message.Message):
    __slots__ = ("name", "device_id", "extra_info", "backend_options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EXTRA_INFO_FIELD_NUMBER: _ClassVar[int]
    BACKEND_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_id: int
    extra_info: str
    backend_options: BackendLevel
    def __init__(self, name: _Optional[str] = ..., device_id: _Optional[int] = ..., extra_info: _Optional[str] = ..., backend_options: _Optional[_Union[BackendLevel, _Mapping]] = ...) -> None: ...

class BackendLevel(_message.Message):
    __slots__ = ("backend_name", "option")
    BACKEND_NAME_FIELD_NUMBER: _ClassVar[int]
    OPTION_FIELD_NUMBER: _ClassVar[int]
    backend_name: str
    option: MapEntryLevel
    def __init__(self, backend_name: _Optional[str] = ..., option: _Optional[_Union[MapEntryLevel, _Mapping]] = ...) -> None: ...

class MapEntryLevel(_message.Message):
    __slots__ = ("key", "val")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    val: str
    def __init__(self, key: _Optional[str] = ..., val: _Optional[str] = ...) -> None: ...

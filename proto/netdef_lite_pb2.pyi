from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NetDefWithRawOps(_message.Message):
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
    op: _containers.RepeatedScalarFieldContainer[bytes]
    type: str
    num_workers: int
    device_option: bytes
    arg: _containers.RepeatedScalarFieldContainer[bytes]
    external_input: _containers.RepeatedScalarFieldContainer[str]
    external_output: _containers.RepeatedScalarFieldContainer[str]
    partition_info: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Iterable[bytes]] = ..., type: _Optional[str] = ..., num_workers: _Optional[int] = ..., device_option: _Optional[bytes] = ..., arg: _Optional[_Iterable[bytes]] = ..., external_input: _Optional[_Iterable[str]] = ..., external_output: _Optional[_Iterable[str]] = ..., partition_info: _Optional[_Iterable[bytes]] = ...) -> None: ...

class NetDefMergedProbe(_message.Message):
    __slots__ = ("op",)
    OP_FIELD_NUMBER: _ClassVar[int]
    op: OpMergedProbe
    def __init__(self, op: _Optional[_Union[OpMergedProbe, _Mapping]] = ...) -> None: ...

class OpMergedProbe(_message.Message):
    __slots__ = ("arg", "control_input")
    ARG_FIELD_NUMBER: _ClassVar[int]
    CONTROL_INPUT_FIELD_NUMBER: _ClassVar[int]
    arg: ArgNestProbe
    control_input: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, arg: _Optional[_Union[ArgNestProbe, _Mapping]] = ..., control_input: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ArgNestProbe(_message.Message):
    __slots__ = ("n", "nets")
    N_FIELD_NUMBER: _ClassVar[int]
    NETS_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    nets: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, n: _Optional[bytes] = ..., nets: _Optional[_Iterable[bytes]] = ...) -> None: ...

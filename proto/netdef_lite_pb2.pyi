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

class NetDefOpNames(_message.Message):
    __slots__ = ("op",)
    OP_FIELD_NUMBER: _ClassVar[int]
    op: _containers.RepeatedCompositeFieldContainer[OpNames]
    def __init__(self, op: _Optional[_Iterable[_Union[OpNames, _Mapping]]] = ...) -> None: ...

class OpNames(_message.Message):
    __slots__ = ("input", "output", "type")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    input: _containers.RepeatedScalarFieldContainer[str]
    output: _containers.RepeatedScalarFieldContainer[str]
    type: str
    def __init__(self, input: _Optional[_Iterable[str]] = ..., output: _Optional[_Iterable[str]] = ..., type: _Optional[str] = ...) -> None: ...

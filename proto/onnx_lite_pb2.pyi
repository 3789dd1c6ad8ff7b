from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ModelWithRawGraph(_message.Message):
    __slots__ = ("graph",)
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    graph: bytes
    def __init__(self, graph: _Optional[bytes] = ...) -> None: ...

class GraphWithRawParts(_message.Message):
    __slots__ = ("node", "initializer", "input", "output", "value_info")
    NODE_FIELD_NUMBER: _ClassVar[int]
    INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    VALUE_INFO_FIELD_NUMBER: _ClassVar[int]
    node: _containers.RepeatedScalarFieldContainer[bytes]
    initializer: _containers.RepeatedScalarFieldContainer[bytes]
    input: _containers.RepeatedScalarFieldContainer[bytes]
    output: _containers.RepeatedScalarFieldContainer[bytes]
    value_info: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, node: _Optional[_Iterable[bytes]] = ..., initializer: _Optional[_Iterable[bytes]] = ..., input: _Optional[_Iterable[bytes]] = ..., output: _Optional[_Iterable[bytes]] = ..., value_info: _Optional[_Iterable[bytes]] = ...) -> None: ...

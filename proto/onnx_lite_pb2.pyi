from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelWithRawGraph(_message.Message):
    __slots__ = ("graph",)
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    graph: bytes
    def __init__(self, graph: _Optional[bytes] = ...) -> None: ...

class ModelWithGraphParts(_message.Message):
    __slots__ = ("graph",)
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    graph: GraphWithRawParts
    def __init__(self, graph: _Optional[_Union[GraphWithRawParts, _Mapping]] = ...) -> None: ...

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

class GraphNodeNames(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _containers.RepeatedCompositeFieldContainer[NodeNames]
    def __init__(self, node: _Optional[_Iterable[_Union[NodeNames, _Mapping]]] = ...) -> None: ...

class NodeNames(_message.Message):
    __slots__ = ("input", "output", "op_type")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    input: _containers.RepeatedScalarFieldContainer[str]
    output: _containers.RepeatedScalarFieldContainer[str]
    op_type: str
    def __init__(self, input: _Optional[_Iterable[str]] = ..., output: _Optional[_Iterable[str]] = ..., op_type: _Optional[str] = ...) -> None: ...

class NodeHead(_message.Message):
    __slots__ = ("name", "domain")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    domain: str
    def __init__(self, name: _Optional[str] = ..., domain: _Optional[str] = ...) -> None: ...

class GraphTensorHeads(_message.Message):
    __slots__ = ("initializer",)
    INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    initializer: _containers.RepeatedCompositeFieldContainer[TensorHead]
    def __init__(self, initializer: _Optional[_Iterable[_Union[TensorHead, _Mapping]]] = ...) -> None: ...

class TensorHead(_message.Message):
    __slots__ = ("name", "data_location")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_LOCATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    data_location: int
    def __init__(self, name: _Optional[str] = ..., data_location: _Optional[int] = ...) -> None: ...

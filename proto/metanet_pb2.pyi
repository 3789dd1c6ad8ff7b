from graphtools.proto import caffe2_pb2 as _caffe2_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelInfo(_message.Message):
    __slots__ = ("project", "modelClass", "version", "predictorType", "modelId")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MODELCLASS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PREDICTORTYPE_FIELD_NUMBER: _ClassVar[int]
    MODELID_FIELD_NUMBER: _ClassVar[int]
    project: str
    modelClass: str
    version: str
    predictorType: str
    modelId: str
    def __init__(self, project: _Optional[str] = ..., modelClass: _Optional[str] = ..., version: _Optional[str] = ..., predictorType: _Optional[str] = ..., modelId: _Optional[str] = ...) -> None: ...

class BlobsMap(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Iterable[str]] = ...) -> None: ...

class NetsMap(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _caffe2_pb2.NetDef
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_caffe2_pb2.NetDef, _Mapping]] = ...) -> None: ...

class PlansMap(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _caffe2_pb2.PlanDef
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_caffe2_pb2.PlanDef, _Mapping]] = ...) -> None: ...

class StringMap(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MetaNetDef(_message.Message):
    __slots__ = ("blobs", "nets", "modelInfo", "plans", "applicationSpecificInfo", "blobsOrder", "preLoadBlobs", "tensorBoundShapes", "requestOnlyEmbeddings", "aotConfig")
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    NETS_FIELD_NUMBER: _ClassVar[int]
    MODELINFO_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    APPLICATIONSPECIFICINFO_FIELD_NUMBER: _ClassVar[int]
    BLOBSORDER_FIELD_NUMBER: _ClassVar[int]
    PRELOADBLOBS_FIELD_NUMBER: _ClassVar[int]
    TENSORBOUNDSHAPES_FIELD_NUMBER: _ClassVar[int]
    REQUESTONLYEMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    AOTCONFIG_FIELD_NUMBER: _ClassVar[int]
    blobs: _containers.RepeatedCompositeFieldContainer[BlobsMap]
    nets: _containers.RepeatedCompositeFieldContainer[NetsMap]
    modelInfo: ModelInfo
    plans: _containers.RepeatedCompositeFieldContainer[PlansMap]
    applicationSpecificInfo: _containers.RepeatedCompositeFieldContainer[StringMap]
    blobsOrder: _containers.RepeatedScalarFieldContainer[str]
    preLoadBlobs: _containers.RepeatedScalarFieldContainer[str]
    tensorBoundShapes: _caffe2_pb2.TensorBoundShapes
    requestOnlyEmbeddings: _containers.RepeatedScalarFieldContainer[str]
    aotConfig: _caffe2_pb2.AOTConfig
    def __init__(self, blobs: _Optional[_Iterable[_Union[BlobsMap, _Mapping]]] = ..., nets: _Optional[_Iterable[_Union[NetsMap, _Mapping]]] = ..., modelInfo: _Optional[_Union[ModelInfo, _Mapping]] = ..., plans: _Optional[_Iterable[_Union[PlansMap, _Mapping]]] = ..., applicationSpecificInfo: _Optional[_Iterable[_Union[StringMap, _Mapping]]] = ..., blobsOrder: _Optional[_Iterable[str]] = ..., preLoadBlobs: _Optional[_Iterable[str]] = ..., tensorBoundShapes: _Optional[_Union[_caffe2_pb2.TensorBoundShapes, _Mapping]] = ..., requestOnlyEmbeddings: _Optional[_Iterable[str]] = ..., aotConfig: _Optional[_Union[_caffe2_pb2.AOTConfig, _Mapping]] = ...) -> None: ...

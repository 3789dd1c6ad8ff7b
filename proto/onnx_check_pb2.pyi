from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelLevel(_message.Message):
    __slots__ = ("ir_version", "producer_name", "producer_version", "domain", "graph", "opset_import", "metadata_props", "training_info", "functions")
    IR_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_VERSION_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    OPSET_IMPORT_FIELD_NUMBER: _ClassVar[int]
    METADATA_PROPS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_INFO_FIELD_NUMBER: _ClassVar[int]
    FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    ir_version: int
    producer_name: str
    producer_version: str
    domain: str
    graph: _containers.RepeatedScalarFieldContainer[bytes]
    opset_import: OpsetLevel
    metadata_props: EntryLevel
    training_info: TrainingLevel
    functions: FunctionLevel
    def __init__(self, ir_version: _Optional[int] = ..., producer_name: _Optional[str] = ..., producer_version: _Optional[str] = ..., domain: _Optional[str] = ..., graph: _Optional[_Iterable[bytes]] = ..., opset_import: _Optional[_Union[OpsetLevel, _Mapping]] = ..., metadata_props: _Optional[_Union[EntryLevel, _Mapping]] = ..., training_info: _Optional[_Union[TrainingLevel, _Mapping]] = ..., functions: _Optional[_Union[FunctionLevel, _Mapping]] = ...) -> None: ...

class OpsetLevel(_message.Message):
    __slots__ = ("domain", "version")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    domain: str
    version: int
    def __init__(self, domain: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class EntryLevel(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class TrainingLevel(_message.Message):
    __slots__ = ("initialization", "algorithm")
    INITIALIZATION_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    initialization: _containers.RepeatedScalarFieldContainer[bytes]
    algorithm: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, initialization: _Optional[_Iterable[bytes]] = ..., algorithm: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FunctionLevel(_message.Message):
    __slots__ = ("name", "input", "output", "attribute", "node", "opset_import", "domain", "attribute_proto", "value_info", "overload")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    OPSET_IMPORT_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_PROTO_FIELD_NUMBER: _ClassVar[int]
    VALUE_INFO_FIELD_NUMBER: _ClassVar[int]
    OVERLOAD_FIELD_NUMBER: _ClassVar[int]
    name: str
    input: str
    output: str
    attribute: str
    node: NodeLevel
    opset_import: OpsetLevel
    domain: str
    attribute_proto: AttributeLevel
    value_info: ValueLevel
    overload: str
    def __init__(self, name: _Optional[str] = ..., input: _Optional[str] = ..., output: _Optional[str] = ..., attribute: _Optional[str] = ..., node: _Optional[_Union[NodeLevel, _Mapping]] = ..., opset_import: _Optional[_Union[OpsetLevel, _Mapping]] = ..., domain: _Optional[str] = ..., attribute_proto: _Optional[_Union[AttributeLevel, _Mapping]] = ..., value_info: _Optional[_Union[ValueLevel, _Mapping]] = ..., overload: _Optional[str] = ...) -> None: ...

class GraphLevel(_message.Message):
    __slots__ = ("node", "name", "initializer", "input", "output", "value_info", "quantization_annotation", "sparse_initializer", "metadata_props")
    NODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    VALUE_INFO_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_ANNOTATION_FIELD_NUMBER: _ClassVar[int]
    SPARSE_INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    METADATA_PROPS_FIELD_NUMBER: _ClassVar[int]
    node: NodeLevel
    name: str
    initializer: TensorLevel
    input: ValueLevel
    output: ValueLevel
    value_info: ValueLevel
    quantization_annotation: AnnotationLevel
    sparse_initializer: SparseLevel
    metadata_props: BytesEntryLevel
    def __init__(self, node: _Optional[_Union[NodeLevel, _Mapping]] = ..., name: _Optional[str] = ..., initializer: _Optional[_Union[TensorLevel, _Mapping]] = ..., input: _Optional[_Union[ValueLevel, _Mapping]] = ..., output: _Optional[_Union[ValueLevel, _Mapping]] = ..., value_info: _Optional[_Union[ValueLevel, _Mapping]] = ..., quantization_annotation: _Optional[_Union[AnnotationLevel, _Mapping]] = ..., sparse_initializer: _Optional[_Union[SparseLevel, _Mapping]] = ..., metadata_props: _Optional[_Union[BytesEntryLevel, _Mapping]] = ...) -> None: ...

class AnnotationLevel(_message.Message):
    __slots__ = ("tensor_name", "quant_parameter_tensor_names")
    TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    QUANT_PARAMETER_TENSOR_NAMES_FIELD_NUMBER: _ClassVar[int]
    tensor_name: bytes
    quant_parameter_tensor_names: BytesEntryLevel
    def __init__(self, tensor_name: _Optional[bytes] = ..., quant_parameter_tensor_names: _Optional[_Union[BytesEntryLevel, _Mapping]] = ...) -> None: ...

class BytesEntryLevel(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class NodeLevel(_message.Message):
    __slots__ = ("input", "output", "name", "op_type", "attribute", "domain", "overload", "metadata_props", "device_configurations")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    OVERLOAD_FIELD_NUMBER: _ClassVar[int]
    METADATA_PROPS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    input: str
    output: str
    name: str
    op_type: str
    attribute: AttributeLevel
    domain: str
    overload: str
    metadata_props: BytesEntryLevel
    device_configurations: DeviceConfigurationLevel
    def __init__(self, input: _Optional[str] = ..., output: _Optional[str] = ..., name: _Optional[str] = ..., op_type: _Optional[str] = ..., attribute: _Optional[_Union[AttributeLevel, _Mapping]] = ..., domain: _Optional[str] = ..., overload: _Optional[str] = ..., metadata_props: _Optional[_Union[BytesEntryLevel, _Mapping]] = ..., device_configurations: _Optional[_Union[DeviceConfigurationLevel, _Mapping]] = ...) -> None: ...

class DeviceConfigurationLevel(_message.Message):
    __slots__ = ("configuration_id", "sharding_spec", "pipeline_stage")
    CONFIGURATION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARDING_SPEC_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_STAGE_FIELD_NUMBER: _ClassVar[int]
    configuration_id: bytes
    sharding_spec: ShardingSpecLevel
    pipeline_stage: int
    def __init__(self, configuration_id: _Optional[bytes] = ..., sharding_spec: _Optional[_Union[ShardingSpecLevel, _Mapping]] = ..., pipeline_stage: _Optional[int] = ...) -> None: ...

class ShardingSpecLevel(_message.Message):
    __slots__ = ("tensor_name", "device", "index_to_device_group_map", "sharded_dim")
    TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    INDEX_TO_DEVICE_GROUP_MAP_FIELD_NUMBER: _ClassVar[int]
    SHARDED_DIM_FIELD_NUMBER: _ClassVar[int]
    tensor_name: bytes
    device: _containers.RepeatedScalarFieldContainer[int]
    index_to_device_group_map: IntListEntryLevel
    sharded_dim: ShardedDimLevel
    def __init__(self, tensor_name: _Optional[bytes] = ..., device: _Optional[_Iterable[int]] = ..., index_to_device_group_map: _Optional[_Union[IntListEntryLevel, _Mapping]] = ..., sharded_dim: _Optional[_Union[ShardedDimLevel, _Mapping]] = ...) -> None: ...

class IntListEntryLevel(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: int
    value: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, key: _Optional[int] = ..., value: _Optional[_Iterable[int]] = ...) -> None: ...

class ShardedDimLevel(_message.Message):
    __slots__ = ("axis", "simple_sharding")
    AXIS_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_SHARDING_FIELD_NUMBER: _ClassVar[int]
    axis: int
    simple_sharding: SimpleShardedDimLevel
    def __init__(self, axis: _Optional[int] = ..., simple_sharding: _Optional[_Union[SimpleShardedDimLevel, _Mapping]] = ...) -> None: ...

class SimpleShardedDimLevel(_message.Message):
    __slots__ = ("dim_value", "dim_param", "num_shards")
    DIM_VALUE_FIELD_NUMBER: _ClassVar[int]
    DIM_PARAM_FIELD_NUMBER: _ClassVar[int]
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    dim_value: int
    dim_param: bytes
    num_shards: int
    def __init__(self, dim_value: _Optional[int] = ..., dim_param: _Optional[bytes] = ..., num_shards: _Optional[int] = ...) -> None: ...

class AttributeLevel(_message.Message):
    __slots__ = ("name", "floats", "ints", "t", "g", "tensors", "graphs", "tp", "type_protos", "type", "ref_attr_name", "sparse_tensor", "sparse_tensors")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FLOATS_FIELD_NUMBER: _ClassVar[int]
    INTS_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    G_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    GRAPHS_FIELD_NUMBER: _ClassVar[int]
    TP_FIELD_NUMBER: _ClassVar[int]
    TYPE_PROTOS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    REF_ATTR_NAME_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TENSOR_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TENSORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    floats: _containers.RepeatedScalarFieldContainer[float]
    ints: _containers.RepeatedScalarFieldContainer[int]
    t: TensorLevel
    g: _containers.RepeatedScalarFieldContainer[bytes]
    tensors: TensorLevel
    graphs: _containers.RepeatedScalarFieldContainer[bytes]
    tp: TypeLevel
    type_protos: TypeLevel
    type: int
    ref_attr_name: str
    sparse_tensor: SparseLevel
    sparse_tensors: SparseLevel
    def __init__(self, name: _Optional[str] = ..., floats: _Optional[_Iterable[float]] = ..., ints: _Optional[_Iterable[int]] = ..., t: _Optional[_Union[TensorLevel, _Mapping]] = ..., g: _Optional[_Iterable[bytes]] = ..., tensors: _Optional[_Union[TensorLevel, _Mapping]] = ..., graphs: _Optional[_Iterable[bytes]] = ..., tp: _Optional[_Union[TypeLevel, _Mapping]] = ..., type_protos: _Optional[_Union[TypeLevel, _Mapping]] = ..., type: _Optional[int] = ..., ref_attr_name: _Optional[str] = ..., sparse_tensor: _Optional[_Union[SparseLevel, _Mapping]] = ..., sparse_tensors: _Optional[_Union[SparseLevel, _Mapping]] = ...) -> None: ...

class TensorLevel(_message.Message):
    __slots__ = ("dims", "segment", "float_data", "int32_data", "int64_data", "name", "double_data", "uint64_data", "external_data", "metadata_props")
    DIMS_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_DATA_FIELD_NUMBER: _ClassVar[int]
    INT32_DATA_FIELD_NUMBER: _ClassVar[int]
    INT64_DATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_DATA_FIELD_NUMBER: _ClassVar[int]
    UINT64_DATA_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_DATA_FIELD_NUMBER: _ClassVar[int]
    METADATA_PROPS_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    segment: SegmentLevel
    float_data: _containers.RepeatedScalarFieldContainer[float]
    int32_data: _containers.RepeatedScalarFieldContainer[int]
    int64_data: _containers.RepeatedScalarFieldContainer[int]
    name: str
    double_data: _containers.RepeatedScalarFieldContainer[float]
    uint64_data: _containers.RepeatedScalarFieldContainer[int]
    external_data: EntryLevel
    metadata_props: BytesEntryLevel
    def __init__(self, dims: _Optional[_Iterable[int]] = ..., segment: _Optional[_Union[SegmentLevel, _Mapping]] = ..., float_data: _Optional[_Iterable[float]] = ..., int32_data: _Optional[_Iterable[int]] = ..., int64_data: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ..., double_data: _Optional[_Iterable[float]] = ..., uint64_data: _Optional[_Iterable[int]] = ..., external_data: _Optional[_Union[EntryLevel, _Mapping]] = ..., metadata_props: _Optional[_Union[BytesEntryLevel, _Mapping]] = ...) -> None: ...

class SegmentLevel(_message.Message):
    __slots__ = ("begin", "end")
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    begin: int
    end: int
    def __init__(self, begin: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class SparseLevel(_message.Message):
    __slots__ = ("values", "indices", "dims")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    values: TensorLevel
    indices: TensorLevel
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Union[TensorLevel, _Mapping]] = ..., indices: _Optional[_Union[TensorLevel, _Mapping]] = ..., dims: _Optional[_Iterable[int]] = ...) -> None: ...

class ValueLevel(_message.Message):
    __slots__ = ("name", "type", "metadata_props")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_PROPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: TypeLevel
    metadata_props: BytesEntryLevel
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[TypeLevel, _Mapping]] = ..., metadata_props: _Optional[_Union[BytesEntryLevel, _Mapping]] = ...) -> None: ...

class TypeLevel(_message.Message):
    __slots__ = ("tensor_type", "sequence_type", "map_type", "opaque_type", "sparse_tensor_type", "optional_type", "denotation")
    TENSOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MAP_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPAQUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TENSOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPTIONAL_TYPE_FIELD_NUMBER: _ClassVar[int]
    DENOTATION_FIELD_NUMBER: _ClassVar[int]
    tensor_type: TensorTypeLevel
    sequence_type: TypeWrapperLevel
    map_type: MapTypeLevel
    opaque_type: OpaqueTypeLevel
    sparse_tensor_type: TensorTypeLevel
    optional_type: TypeWrapperLevel
    denotation: str
    def __init__(self, tensor_type: _Optional[_Union[TensorTypeLevel, _Mapping]] = ..., sequence_type: _Optional[_Union[TypeWrapperLevel, _Mapping]] = ..., map_type: _Optional[_Union[MapTypeLevel, _Mapping]] = ..., opaque_type: _Optional[_Union[OpaqueTypeLevel, _Mapping]] = ..., sparse_tensor_type: _Optional[_Union[TensorTypeLevel, _Mapping]] = ..., optional_type: _Optional[_Union[TypeWrapperLevel, _Mapping]] = ..., denotation: _Optional[str] = ...) -> None: ...

class OpaqueTypeLevel(_message.Message):
    __slots__ = ("domain", "name")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    domain: bytes
    name: bytes
    def __init__(self, domain: _Optional[bytes] = ..., name: _Optional[bytes] = ...) -> None: ...

class TypeWrapperLevel(_message.Message):
    __slots__ = ("elem_type",)
    ELEM_TYPE_FIELD_NUMBER: _ClassVar[int]
    elem_type: TypeLevel
    def __init__(self, elem_type: _Optional[_Union[TypeLevel, _Mapping]] = ...) -> None: ...

class MapTypeLevel(_message.Message):
    __slots__ = ("key_type", "value_type")
    KEY_TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_TYPE_FIELD_NUMBER: _ClassVar[int]
    key_type: int
    value_type: TypeLevel
    def __init__(self, key_type: _Optional[int] = ..., value_type: _Optional[_Union[TypeLevel, _Mapping]] = ...) -> None: ...

class TensorTypeLevel(_message.Message):
    __slots__ = ("elem_type", "shape")
    ELEM_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    elem_type: int
    shape: ShapeLevel
    def __init__(self, elem_type: _Optional[int] = ..., shape: _Optional[_Union[ShapeLevel, _Mapping]] = ...) -> None: ...

class ShapeLevel(_message.Message):
    __slots__ = ("dim",)
    DIM_FIELD_NUMBER: _ClassVar[int]
    dim: DimLevel
    def __init__(self, dim: _Optional[_Union[DimLevel, _Mapping]] = ...) -> None: ...

class DimLevel(_message.Message):
    __slots__ = ("dim_param", "denotation")
    DIM_PARAM_FIELD_NUMBER: _ClassVar[int]
    DENOTATION_FIELD_NUMBER: _ClassVar[int]
    dim_param: str
    denotation: str
    def __init__(self, dim_param: _Optional[str] = ..., denotation: _Optional[str] = ...) -> None: ...

"""The protobuf messages of KServe v2's gRPC `GRPCInferenceService`, built at import.

`zoo.serving.grpc_server` answers `inference.GRPCInferenceService` (what
`tritonclient.grpc` calls) with these classes. The schema below is the
protocol's (`grpc_predict_v2.proto`: field names, numbers and types, which
fix the wire format), written as a table and built into a private
`DescriptorPool`, so that no generated module is shipped and the classes do
not clash with a client's own copy of the same messages (Triton's
`tritonclient.grpc` registers `inference.*` in the default pool).

Reference: https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/

Example:
>>> request = MESSAGES["ModelInferRequest"](model_name="m", id="7")
>>> request.inputs.add(name="x", datatype="INT32", shape=[2]).contents.int_contents[:] = [1, 2]
>>> again = MESSAGES["ModelInferRequest"].FromString(request.SerializeToString())
>>> again.id, list(again.inputs[0].contents.int_contents)
('7', [1, 2])
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

#: The protobuf package, as the protocol names it.
PACKAGE = "inference"
#: The service, as `/inference.GRPCInferenceService/METHOD` paths name it.
SERVICE = f"{PACKAGE}.GRPCInferenceService"

#: Each message's fields: `"[repeated|map<V>|oneof] TYPE NAME = NUMBER"`
#: (a `map<V>` field maps strings to message `V`). Nested messages are
#: named `Outer.Inner`.
SCHEMA = {
    "ServerLiveRequest": [],
    "ServerLiveResponse": ["bool live = 1"],
    "ServerReadyRequest": [],
    "ServerReadyResponse": ["bool ready = 1"],
    "ModelReadyRequest": ["string name = 1", "string version = 2"],
    "ModelReadyResponse": ["bool ready = 1"],
    "ServerMetadataRequest": [],
    "ServerMetadataResponse": [
        "string name = 1",
        "string version = 2",
        "repeated string extensions = 3",
    ],
    "ModelMetadataRequest": ["string name = 1", "string version = 2"],
    "ModelMetadataResponse.TensorMetadata": [
        "string name = 1",
        "string datatype = 2",
        "repeated int64 shape = 3",
    ],
    "ModelMetadataResponse": [
        "string name = 1",
        "repeated string versions = 2",
        "string platform = 3",
        "repeated ModelMetadataResponse.TensorMetadata inputs = 4",
        "repeated ModelMetadataResponse.TensorMetadata outputs = 5",
    ],
    "InferParameter": [
        "oneof bool bool_param = 1",
        "oneof int64 int64_param = 2",
        "oneof string string_param = 3",
    ],
    "InferTensorContents": [
        "repeated bool bool_contents = 1",
        "repeated int32 int_contents = 2",
        "repeated int64 int64_contents = 3",
        "repeated uint32 uint_contents = 4",
        "repeated uint64 uint64_contents = 5",
        "repeated float fp32_contents = 6",
        "repeated double fp64_contents = 7",
        "repeated bytes bytes_contents = 8",
    ],
    "ModelInferRequest.InferInputTensor": [
        "string name = 1",
        "string datatype = 2",
        "repeated int64 shape = 3",
        "map<InferParameter> parameters = 4",
        "InferTensorContents contents = 5",
    ],
    "ModelInferRequest.InferRequestedOutputTensor": [
        "string name = 1",
        "map<InferParameter> parameters = 2",
    ],
    "ModelInferRequest": [
        "string model_name = 1",
        "string model_version = 2",
        "string id = 3",
        "map<InferParameter> parameters = 4",
        "repeated ModelInferRequest.InferInputTensor inputs = 5",
        "repeated ModelInferRequest.InferRequestedOutputTensor outputs = 6",
        "repeated bytes raw_input_contents = 7",
    ],
    "ModelInferResponse.InferOutputTensor": [
        "string name = 1",
        "string datatype = 2",
        "repeated int64 shape = 3",
        "map<InferParameter> parameters = 4",
        "InferTensorContents contents = 5",
    ],
    "ModelInferResponse": [
        "string model_name = 1",
        "string model_version = 2",
        "string id = 3",
        "map<InferParameter> parameters = 4",
        "repeated ModelInferResponse.InferOutputTensor outputs = 5",
        "repeated bytes raw_output_contents = 6",
    ],
}

#: The service's methods: `name: (request, response)`.
METHODS = {
    name: (f"{name}Request", f"{name}Response")
    for name in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata")
}
METHODS.update(
    ModelMetadata=("ModelMetadataRequest", "ModelMetadataResponse"),
    ModelInfer=("ModelInferRequest", "ModelInferResponse"),
)

_Field = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "bool": _Field.TYPE_BOOL,
    "int32": _Field.TYPE_INT32,
    "int64": _Field.TYPE_INT64,
    "uint32": _Field.TYPE_UINT32,
    "uint64": _Field.TYPE_UINT64,
    "float": _Field.TYPE_FLOAT,
    "double": _Field.TYPE_DOUBLE,
    "string": _Field.TYPE_STRING,
    "bytes": _Field.TYPE_BYTES,
}


def _add_field(message, line, path):
    """Adds one `SCHEMA` line's field (and a map's entry message) to `message`.

    `path` is the message's `SCHEMA` name (`Outer.Inner` when nested).
    """
    words, number = line.split(" = ")
    *modifiers, kind, name = words.split()
    field = message.field.add(name=name, number=int(number))
    field.label = _Field.LABEL_OPTIONAL
    if modifiers == ["repeated"]:
        field.label = _Field.LABEL_REPEATED
    elif modifiers == ["oneof"]:
        if not message.oneof_decl:
            message.oneof_decl.add(name="parameter_choice")
        field.oneof_index = 0
    if kind.startswith("map<"):
        entry = message.nested_type.add(name=name.title() + "Entry")
        entry.options.map_entry = True
        _add_field(entry, "string key = 1", entry.name)
        _add_field(entry, f"{kind[4:-1]} value = 2", entry.name)
        kind = f"{path}.{entry.name}"
        field.label = _Field.LABEL_REPEATED
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    else:
        field.type = _Field.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{kind}"


def _build():
    """The message classes of `SCHEMA`, from a private pool."""
    schema = descriptor_pb2.FileDescriptorProto(
        name="zoo/serving/grpc_predict_v2.proto", package=PACKAGE, syntax="proto3"
    )
    messages = {}
    for name, lines in SCHEMA.items():
        outer, _, inner = name.partition(".")
        if inner:
            message = descriptor_pb2.DescriptorProto(name=inner)
        else:
            message = messages.get(outer) or schema.message_type.add(name=outer)
        messages[name] = message
        for line in lines:
            _add_field(message, line, name)
        if inner:
            parent = messages.get(outer) or schema.message_type.add(name=outer)
            messages[outer] = parent
            parent.nested_type.append(message)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{PACKAGE}.{name}")
        )
        for name in SCHEMA
    }


#: `{name: message class}` for every message of `SCHEMA`.
MESSAGES = _build()

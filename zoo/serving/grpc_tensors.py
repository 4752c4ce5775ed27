"""gRPC tensors as what `zoo.serving.requests.Signatures` reads, sizes checked first.

`zoo.serving.grpc_server` hands each request's tensors here: a TF Serving
`TensorProto` becomes the value `Signatures.check` takes (`tf_value`), and
a KServe v2 `ModelInferRequest` the JSON request and bytes that
`zoo.serving.v2_binary` reads (`v2_body`), so that the checks of the binary
path follow. Each tensor's declared shape is checked against the values or
bytes it holds before anything is built.
"""

import base64

import numpy as np

from zoo.serving import v2_binary
from zoo.serving import v2_protocol as serving_v2
from zoo.serving.requests import BYTES_SUFFIX, RequestError

#: Each v2 datatype's field of `InferTensorContents`.
CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
#: The repeated value fields of a `TensorProto` (one holds its values
#: when `tensor_content` is empty).
TENSOR_VALUES = (
    "half_val",
    "float_val",
    "double_val",
    "int_val",
    "int64_val",
    "bool_val",
    "uint32_val",
    "uint64_val",
)


def tf_value(name, tensor, spec, max_values):
    """A `TensorProto` as the value `Signatures.check` reads, its size checked first.

    Strings come as lists (text decoded, an `*_bytes` input as `{"b64"}`),
    numbers as an array, a scalar as a number.
    """
    import tensorflow as tf

    if tensor.dtype != spec.dtype.as_datatype_enum:
        try:
            received = tf.dtypes.as_dtype(tensor.dtype).name
        except (TypeError, ValueError):
            received = f"enum {tensor.dtype}"
        raise RequestError(
            f"`{name}` must be a {spec.dtype.name} tensor. Received: {received}",
            field=name,
        )
    shape = [dim.size for dim in tensor.tensor_shape.dim]
    if tensor.tensor_shape.unknown_rank:
        shape = None
    count = serving_v2.check_shape(name, shape, max_values)
    if spec.dtype == tf.string:
        held = len(tensor.string_val)
    elif tensor.tensor_content:
        itemsize = np.dtype(spec.dtype.as_numpy_dtype).itemsize
        held = len(tensor.tensor_content) / itemsize
    else:
        held = sum(len(getattr(tensor, field)) for field in TENSOR_VALUES)
    if held != count:
        held = int(held) if held == int(held) else round(held, 2)
        raise RequestError(
            f"`{name}` holds {held} values; its shape {shape} needs {count}.",
            field=name,
        )
    if spec.dtype != tf.string:
        array = tf.make_ndarray(tensor)
        return array.item() if not shape else array
    values = list(tensor.string_val)
    if name.endswith(BYTES_SUFFIX):
        values = [{"b64": base64.b64encode(value).decode("ascii")} for value in values]
    else:
        try:
            values = [value.decode("utf-8") for value in values]
        except UnicodeDecodeError:
            raise RequestError(
                f"`{name}` holds text that is not UTF-8.", field=name
            ) from None
    values = np.array(values, object).reshape(shape)
    return values.item() if not shape else values.tolist()


def v2_body(request, max_values):
    """`(body, binary)` of a `ModelInferRequest`: its JSON form, tensors as bytes.

    Every input travels as `zoo.serving.v2_binary` reads binary tensors
    (`binary_data_size` and the bytes after the JSON), whether it came in
    `raw_input_contents` or in typed `contents`, so that the same checks
    follow.
    """
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise RequestError(
            f"The request holds {len(raw)} raw_input_contents for "
            f"{len(request.inputs)} inputs."
        )
    inputs, chunks = [], []
    for i, tensor in enumerate(request.inputs):
        data = raw[i] if raw else _contents_bytes(tensor, max_values)
        inputs.append(
            {
                "name": tensor.name,
                "datatype": tensor.datatype,
                "shape": list(tensor.shape),
                "parameters": {"binary_data_size": len(data)},
            }
        )
        chunks.append(data)
    body = {"inputs": inputs}
    if request.id:
        body["id"] = request.id
    if request.outputs:
        body["outputs"] = [{"name": output.name} for output in request.outputs]
    return body, b"".join(chunks)


def _contents_bytes(tensor, max_values):
    """A v2 tensor's typed `contents` as the raw bytes of its datatype."""
    field = CONTENTS.get(tensor.datatype)
    dtype = v2_binary.FIXED.get(tensor.datatype)
    if field is None or (dtype is None and tensor.datatype != "BYTES"):
        return b""  # `v2_binary.inline` names the datatype.
    values = getattr(tensor.contents, field)
    if len(values) > max_values:
        raise RequestError(
            f"`{tensor.name}` holds {len(values)} values; a message of at most "
            f"{max_values} bytes (max_request_bytes) cannot hold them.",
            field=tensor.name,
        )
    if tensor.datatype == "BYTES":
        return v2_binary.tensor_bytes(np.array(list(values), object))
    array = np.array(values)
    if dtype.kind in "iu" and array.size:
        info = np.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise RequestError(
                f"`{tensor.name}`'s values must lie in [{info.min}, {info.max}] "
                f"({tensor.datatype}).",
                field=tensor.name,
            )
    return array.astype(dtype).tobytes()

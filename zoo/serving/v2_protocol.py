"""KServe's Open Inference Protocol (v2, REST) over `zoo.serving.server`'s signatures.

`zoo.serving.server` answers it beside TF Serving's API: `GET /v2` (server
metadata), `GET /v2/health/live`, `/v2/health/ready`, `GET
/v2/models/NAME[/versions/V]` (model metadata), `.../ready`, and `POST
.../infer` with `{"id", "inputs": [{"name", "shape", "datatype", "data"},
...], "outputs": [{"name"}, ...]}` (`id` and `outputs` optional),
answered with `{"model_name", "model_version", "id", "outputs": [{"name",
"shape", "datatype", "data"}, ...]}` (the request's `id` when it had one;
the outputs it named, else all; data flat, in row-major order). The
signature is the one whose inputs are the request's names
(`serving_default` first), as on `POST /v1/predict`. `BYTES` data are
UTF-8 text, or base64 when the tensor's `parameters` say
`{"content_type": "base64"}` (an encoded image; outputs named `*_bytes`
come back so). Tensors may also travel as raw bytes after the JSON
(`zoo.serving.v2_binary`, what `tritonclient.http` sends by default).
Errors are `{"error": ...}`.

Reference: https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/
"""

import base64
import json
import math

import numpy as np

from zoo.serving.requests import RequestError

#: The protocol's datatype of each dtype the exports use.
DATATYPES = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "string": "BYTES",
}


def _tensor(spec, name):
    shape = [-1 if d is None else d for d in spec.shape]
    return {
        "name": name,
        "datatype": DATATYPES.get(spec.dtype.name, "BYTES"),
        "shape": shape,
    }


def metadata(signatures, name, version):
    """The model metadata of `serving_default` (v2's `GET /v2/models/NAME`).

    Example:
    >>> from zoo.serving.requests import Signatures, _demo_exported
    >>> metadata(Signatures(_demo_exported()), "lengths", "1")["inputs"]
    [{'name': 'text', 'datatype': 'BYTES', 'shape': [-1]}]
    """
    default = "serving_default"
    if default not in signatures.functions:
        default = sorted(signatures.functions)[0]
    inputs = signatures.inputs[default]
    outputs = signatures.functions[default].structured_outputs
    return {
        "name": name,
        "versions": [version],
        "platform": "tensorflow_savedmodel",
        "inputs": [_tensor(inputs[k], k) for k in sorted(inputs)],
        "outputs": [_tensor(outputs[k], k) for k in sorted(outputs)],
    }


def parse(signatures, body):
    """A `zoo.serving.requests.Parsed` request from an `infer` body.

    Example:
    >>> from zoo.serving.requests import Signatures, _demo_exported
    >>> signatures = Signatures(_demo_exported())
    >>> body = {"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
    ...                     "data": ["ab", "c"]}]}
    >>> parse(signatures, body).inputs["text"].tolist()
    [b'ab', b'c']
    >>> parse(signatures, {"inputs": [{"name": "text", "shape": [3],
    ...     "datatype": "BYTES", "data": ["ab"]}]})
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: `text` holds 1 values; its shape [3] needs 3.
    """
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise RequestError("The body must be an object with a list of `inputs`.")
    fields = {}
    for i, tensor in enumerate(body["inputs"]):
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise RequestError(f"`inputs[{i}]` must be an object with a `name`.")
        fields[tensor["name"]] = _values(tensor, signatures.limits.max_request_bytes)
    name = signatures.choose(fields)
    return signatures.check(name, fields, base64_strings=False)


def check_shape(name, shape, max_values):
    """The count of values a v2 `shape` declares, checked before anything is built.

    A zero in it is refused (a tensor of no values: nothing to run), and so
    is a product of its sizes (`math.prod`, which does not wrap) above
    `max_values` (the body's limit in bytes: each value takes at least one).

    Example:
    >>> check_shape("x", [2, 3], 100)
    6
    >>> check_shape("x", [1, 2**25, 0, 1], 100)
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: `x`'s shape [1, 33554432, 0, 1] holds no values: send at least one.
    """
    if not (
        isinstance(shape, list)
        and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        )
    ):
        raise RequestError(
            f"`{name}` needs a `shape` (a list of sizes). Received: {shape!r:.60}",
            field=name,
        )
    size = math.prod(shape)
    if size == 0:
        raise RequestError(
            f"`{name}`'s shape {shape} holds no values: send at least one.",
            field=name,
        )
    if size > max_values:
        raise RequestError(
            f"`{name}`'s shape {shape} holds {size} values; a body of at most "
            f"{max_values} bytes (max_request_bytes) cannot hold them.",
            field=name,
        )
    return size


def _values(tensor, max_values):
    """A v2 input tensor as the nested JSON values `Signatures` reads."""
    name, shape, data = tensor["name"], tensor.get("shape"), tensor.get("data")
    if not isinstance(data, (list, np.ndarray)):
        raise RequestError(
            f"`{name}` needs a `shape` (a list of sizes) and its `data` (a list).",
            field=name,
        )
    size = check_shape(name, shape, max_values)
    if isinstance(data, np.ndarray) and data.dtype != object:  # Binary numbers.
        if data.size != size:
            raise RequestError(
                f"`{name}` holds {data.size} values; its shape {shape} needs {size}.",
                field=name,
            )
        return data.item() if not shape else data.reshape(shape)
    try:
        flat = np.asarray(data, dtype=object).reshape(-1)
    except ValueError:
        raise RequestError(
            f"`{name}`'s `data` must be a flat list.", field=name
        ) from None
    if flat.size != size:
        raise RequestError(
            f"`{name}` holds {flat.size} values; its shape {shape} needs {size}.",
            field=name,
        )
    parameters = tensor.get("parameters") or {}
    if isinstance(parameters, dict) and parameters.get("content_type") == "base64":
        flat = np.array([{"b64": value} for value in flat], object)
    values = flat.reshape(shape)
    return values.item() if not shape else values.tolist()


#: The protocol extensions the server implements, named as Triton names them.
EXTENSIONS = ["binary_tensor_data"]


def server_metadata(version):
    """The server metadata (v2's `GET /v2`, gRPC's `ServerMetadata`).

    Example:
    >>> server_metadata("0.1.0")
    {'name': 'zoo serve', 'version': '0.1.0', 'extensions': ['binary_tensor_data']}
    """
    return {"name": "zoo serve", "version": version, "extensions": list(EXTENSIONS)}


def request_options(body, output_names):
    """`(id, outputs)` of an `infer` body: the `id` to send back (or `None`)
    and the names of the outputs asked for (all, when it names none).

    Args:
        body: dict. The request.
        output_names: the names of the signature's outputs.

    Raises:
        RequestError: an `id` that is not a string, or an `outputs` entry
            that is not an object naming one of `output_names`.

    Example:
    >>> request_options({"id": "42", "outputs": [{"name": "b"}]}, ["a", "b"])
    ('42', ['b'])
    >>> request_options({}, ["b", "a"])
    (None, ['a', 'b'])
    >>> request_options({"outputs": [{"name": "c"}]}, ["a", "b"])
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: `outputs[0]` must name one of the outputs ['a', 'b']. Received: {'name': 'c'}
    """
    request_id = body.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise RequestError(
            f"`id` must be a string. Received: id={json.dumps(request_id)[:80]}",
            field="id",
        )
    names = sorted(output_names)
    asked = body.get("outputs")
    if asked is None:
        return request_id, names
    if not isinstance(asked, list):
        raise RequestError("`outputs` must be a list of objects with a `name`.")
    wanted = []
    for i, output in enumerate(asked):
        if not isinstance(output, dict) or output.get("name") not in names:
            raise RequestError(
                f"`outputs[{i}]` must name one of the outputs {names}. "
                f"Received: {output!r:.80}"
            )
        if output["name"] not in wanted:
            wanted.append(output["name"])
    return request_id, wanted


def answer(outputs, name, version, request_id=None):
    """The `infer` answer: each output flat, with its shape and datatype.

    Args:
        outputs: dict of arrays, in the order they are answered.
        name: str. The model's name.
        version: str. Its version.
        request_id: optional str. The request's `id`, sent back.

    Example:
    >>> answer({"length": np.array([2, 1], np.int32)}, "lengths", "1", "42")
    {'model_name': 'lengths', 'model_version': '1', 'id': '42', 'outputs': [{'name': 'length', 'datatype': 'INT32', 'shape': [2], 'data': [2, 1]}]}
    """
    tensors = []
    for key, value in outputs.items():
        value = np.asarray(value)
        tensor = {"name": key, "datatype": "BYTES", "shape": list(value.shape)}
        if value.dtype != object:
            tensor["datatype"] = DATATYPES.get(value.dtype.name, "BYTES")
            tensor["data"] = value.reshape(-1).tolist()
        elif key.endswith("_bytes"):
            tensor["parameters"] = {"content_type": "base64"}
            tensor["data"] = [
                base64.b64encode(v).decode("ascii") for v in value.reshape(-1)
            ]
        else:
            tensor["data"] = [
                v.decode("utf-8", errors="replace") for v in value.reshape(-1)
            ]
        tensors.append(tensor)
    response = {"model_name": name, "model_version": version}
    if request_id is not None:
        response["id"] = request_id
    response["outputs"] = tensors
    return response

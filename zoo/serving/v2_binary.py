"""KServe v2's binary tensor data extension, over `zoo.serving.v2_protocol`.

What `tritonclient.http` sends by default: an `infer` body whose first
`Inference-Header-Content-Length` bytes are the JSON request, followed by
the raw bytes of each input whose `parameters` hold `binary_data_size`, in
the order of `inputs`. Fixed-size datatypes (`UINT8`, `INT32`, `FP32`, ...)
are little-endian, row-major; `BYTES` are elements each preceded by its
length as a 4-byte little-endian integer. An output asked for with
`"parameters": {"binary_data": true}` (or every output, when the request's
`parameters` say `"binary_data_output": true`) is answered the same way:
its `data` replaced by `binary_data_size`, its bytes after the JSON header.

Every declared size is checked against the shape, the body and the limits
before anything is built: `split` and `inline` read the bytes into the JSON
form that `v2_protocol.parse` reads, so the same bounds follow.

Reference: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
"""

import base64
import json
import struct

import numpy as np

from zoo.serving.requests import BYTES_SUFFIX, RequestError, check_depth
from zoo.serving.v2_protocol import DATATYPES, check_shape

#: The header naming the length of the JSON part of a body.
HEADER = "Inference-Header-Content-Length"
#: The NumPy dtype (little-endian) of each fixed-size datatype.
FIXED = {
    datatype: np.dtype(name).newbyteorder("<")
    for name, datatype in DATATYPES.items()
    if datatype != "BYTES"
}


def split(data, header_length):
    """`(json_request, binary)` of a body, given its `HEADER` value (or `None`).

    Example:
    >>> split(b'{"inputs": []}abc', "14")
    ({'inputs': []}, b'abc')
    >>> split(b'{"inputs": []}', None)
    ({'inputs': []}, b'')
    >>> split(b'{}', "9")
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: Inference-Header-Content-Length 9 is not a count of bytes within the body's 2.
    """
    if header_length is None:
        length = len(data)
    else:
        text = header_length.strip()
        if not (text.isascii() and text.isdigit() and int(text) <= len(data)):
            raise RequestError(
                f"{HEADER} {text[:40]} is not a count of bytes within the "
                f"body's {len(data)}."
            )
        length = int(text)
    try:
        request = json.loads(data[:length])
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise RequestError(f"The body is not JSON: {reason}"[:300]) from None
    check_depth(data[:length])
    return request, data[length:]


def inline(request, binary, max_values):
    """Puts each binary input's values in its `data`: an array, or JSON's strings.

    A number tensor's `data` is a flat NumPy array over its bytes (no list
    of Python numbers is built); a `BYTES` one's a list of strings, as JSON
    would carry them.

    Args:
        request: dict. The JSON request (changed in place).
        binary: bytes. What follows the JSON header.
        max_values: int. The most values a tensor may declare.

    Raises:
        RequestError: a `binary_data_size` that is not a count of bytes,
            disagrees with the tensor's shape and datatype, or runs past the
            body; bytes left over; `BYTES` text that is not UTF-8.

    Example:
    >>> request = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32",
    ...     "parameters": {"binary_data_size": 8}}]}
    >>> inline(request, struct.pack("<ii", 3, -1), 100)
    >>> request["inputs"][0]["data"]
    array([ 3, -1], dtype=int32)
    >>> request["inputs"][0]["parameters"]["binary_data_size"] = 12
    >>> inline(request, struct.pack("<iii", 3, -1, 0), 100)
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: `x`'s binary_data_size 12 disagrees with its shape [2] of INT32 (8 bytes).
    """
    inputs = request.get("inputs") if isinstance(request, dict) else None
    position = 0
    for tensor in inputs if isinstance(inputs, list) else ():
        parameters = tensor.get("parameters") if isinstance(tensor, dict) else None
        if not isinstance(parameters, dict) or "binary_data_size" not in parameters:
            continue
        name = str(tensor.get("name"))[:100]
        size = parameters.pop("binary_data_size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise RequestError(
                f"`{name}`'s binary_data_size must be a count of bytes. "
                f"Received: {size!r:.40}",
                field=name,
            )
        if position + size > len(binary):
            raise RequestError(
                f"`{name}`'s binary_data_size {size} runs past the body: "
                f"{len(binary) - position} bytes are left.",
                field=name,
            )
        shape = tensor.get("shape")
        count = check_shape(name, shape, max_values)
        chunk = binary[position : position + size]
        position += size
        tensor["data"] = _values(name, shape, tensor.get("datatype"), chunk, count)
        if tensor.get("datatype") == "BYTES" and name.endswith(BYTES_SUFFIX):
            parameters["content_type"] = "base64"
    if position != len(binary):
        raise RequestError(
            f"The body holds {len(binary) - position} bytes after its tensors' "
            "binary_data_size."
        )


def _values(name, shape, datatype, chunk, count):
    """The `count` values of one tensor's bytes: a flat array, or a list of strings."""
    if datatype in FIXED:
        dtype = FIXED[datatype]
        if len(chunk) != count * dtype.itemsize:
            raise RequestError(
                f"`{name}`'s binary_data_size {len(chunk)} disagrees with its "
                f"shape {shape} of {datatype} ({count * dtype.itemsize} bytes).",
                field=name,
            )
        return np.frombuffer(chunk, dtype)
    if datatype != "BYTES":
        raise RequestError(
            f"`{name}`'s datatype must be one of {['BYTES', *FIXED]}. "
            f"Received: {datatype!r:.40}",
            field=name,
        )
    values, position = [], 0
    while len(values) < count and position + 4 <= len(chunk):
        (length,) = struct.unpack_from("<I", chunk, position)
        if position + 4 + length > len(chunk):
            break
        values.append(chunk[position + 4 : position + 4 + length])
        position += 4 + length
    if len(values) != count or position != len(chunk):
        raise RequestError(
            f"`{name}`'s {len(chunk)} bytes are not the {count} length-prefixed "
            f"elements its shape {shape} declares.",
            field=name,
        )
    if name.endswith(BYTES_SUFFIX):
        return [base64.b64encode(value).decode("ascii") for value in values]
    try:
        return [value.decode("utf-8") for value in values]
    except UnicodeDecodeError:
        raise RequestError(
            f"`{name}` holds text that is not UTF-8.", field=name
        ) from None


def binary_outputs(request, names):
    """The names of the outputs `request` asks for as binary data.

    Example:
    >>> binary_outputs({"parameters": {"binary_data_output": True}}, ["a", "b"])
    ['a', 'b']
    >>> asked = [{"name": "a", "parameters": {"binary_data": True}}, {"name": "b"}]
    >>> binary_outputs({"outputs": asked}, ["a", "b"])
    ['a']
    """
    parameters = request.get("parameters")
    every = (
        isinstance(parameters, dict) and parameters.get("binary_data_output") is True
    )
    asked = {}
    for output in request.get("outputs") or ():
        if isinstance(output, dict) and isinstance(output.get("parameters"), dict):
            asked[output.get("name")] = output["parameters"].get("binary_data")
    return [name for name in names if asked.get(name, every) is True]


def tensor_bytes(value):
    """An array's raw bytes: little-endian values, or length-prefixed `BYTES`.

    Example:
    >>> tensor_bytes(np.array([1, 2], np.int32)), tensor_bytes(np.array([b"ab"], object))
    (b'\\x01\\x00\\x00\\x00\\x02\\x00\\x00\\x00', b'\\x02\\x00\\x00\\x00ab')
    """
    value = np.asarray(value)
    if value.dtype == object:
        return b"".join(
            struct.pack("<I", len(v)) + v for v in value.reshape(-1).tolist()
        )
    return np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()


def encode(response, outputs, binary_names):
    """`(body, json_length)`: `response` with the `binary_names` outputs as bytes.

    Args:
        response: dict. `v2_protocol.answer`'s response (changed in place).
        outputs: dict of arrays, the values of its outputs.
        binary_names: the outputs to send as binary data.

    Returns:
        The body, and the length of its JSON part (the answer's `HEADER`).

    Example:
    >>> response = {"outputs": [{"name": "n", "datatype": "INT32", "shape": [1],
    ...     "data": [7]}]}
    >>> encode(response, {"n": np.array([7], np.int32)}, ["n"])
    (b'{"outputs": [{"name": "n", "datatype": "INT32", "shape": [1], "parameters": {"binary_data_size": 4}}]}\\x07\\x00\\x00\\x00', 102)
    """
    chunks = []
    for tensor in response["outputs"]:
        if tensor["name"] not in binary_names:
            continue
        data = tensor_bytes(outputs[tensor["name"]])
        del tensor["data"]
        tensor.pop("parameters", None)
        tensor["parameters"] = {"binary_data_size": len(data)}
        chunks.append(data)
    header = json.dumps(response, ensure_ascii=False).encode("utf-8")
    return header + b"".join(chunks), len(header)

"""TensorFlow Serving's REST answers over `zoo.serving.server`'s signatures.

`zoo.serving.server` routes `/v1/models/NAME...` here for what TF Serving
itself would answer: the model's metadata (`GET .../metadata`: its
signatures as `SignatureDef`s in JSON) and a `:predict` answer in rows
(`{"predictions": [...]}`) or columns (`{"outputs": ...}`), binary strings
as `{"b64": ...}`.

Reference: https://www.tensorflow.org/tfx/serving/api_rest
"""

import base64

import numpy as np

from zoo.serving.requests import BYTES_SUFFIX

#: TensorFlow's names of the dtypes (`DataType` enum names).
DATA_TYPES = {
    "string": "DT_STRING",
    "float32": "DT_FLOAT",
    "float64": "DT_DOUBLE",
    "float16": "DT_HALF",
    "bfloat16": "DT_BFLOAT16",
    "bool": "DT_BOOL",
}


def json_value(value, name=""):
    """A NumPy output as JSON: text for strings (`{"b64"}` for `*_bytes`), lists.

    Example:
    >>> json_value(np.array([b"ab", b"c"], object)), json_value(b"\\x89", "image_bytes")
    (['ab', 'c'], {'b64': 'iQ=='})
    """
    if isinstance(value, bytes):
        if name.endswith(BYTES_SUFFIX):
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [json_value(v, name) for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def tensor_info(spec, tensor_name):
    """A `TensorInfo` protobuf's JSON, as TF Serving's metadata gives it."""
    dtype = DATA_TYPES.get(spec.dtype.name, "DT_" + spec.dtype.name.upper())
    dims = [{"size": str(-1 if d is None else d), "name": ""} for d in spec.shape]
    return {
        "dtype": dtype,
        "tensor_shape": {"dim": dims, "unknown_rank": spec.shape.rank is None},
        "name": tensor_name,
    }


def metadata(signatures, name, version):
    """TF Serving's `GET /v1/models/NAME/metadata` answer.

    Example:
    >>> from zoo.serving.requests import Signatures, _demo_exported
    >>> answer = metadata(Signatures(_demo_exported()), "lengths", "1")
    >>> answer["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    {'text': {'dtype': 'DT_STRING', 'tensor_shape': {'dim': [{'size': '-1', 'name': ''}], 'unknown_rank': False}, 'name': 'serving_default_text:0'}}
    """
    definitions = {}
    for signature, function in signatures.functions.items():
        inputs = signatures.inputs[signature]
        outputs = function.structured_outputs
        definitions[signature] = {
            "inputs": {
                k: tensor_info(s, f"{signature}_{k}:0") for k, s in inputs.items()
            },
            "outputs": {
                k: tensor_info(outputs[k], f"StatefulPartitionedCall:{i}")
                for i, k in enumerate(sorted(outputs))
            },
            "method_name": "tensorflow/serving/predict",
        }
    return {
        "model_spec": {"name": name, "signature_name": "", "version": version},
        "metadata": {"signature_def": {"signature_def": definitions}},
    }


def answer(outputs, rows, form):
    """TF Serving's answer: `{"predictions": rows}` or `{"outputs": columns}`.

    A signature with one output gives its values alone, without its name.

    Example:
    >>> answer({"length": np.array([2, 1])}, 2, "row")
    {'predictions': [2, 1]}
    """
    names = sorted(outputs)
    if form == "row":
        rows = [{k: json_value(outputs[k][i], k) for k in names} for i in range(rows)]
        if len(names) == 1:
            rows = [row[names[0]] for row in rows]
        return {"predictions": rows}
    columns = {k: json_value(outputs[k], k) for k in names}
    return {"outputs": columns[names[0]] if len(names) == 1 else columns}

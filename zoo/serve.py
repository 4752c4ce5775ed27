"""An HTTP server over an exported SavedModel (`zoo.export`), bounded for a network.

`serve(directory)` (`python -m zoo serve DIR`) answers two protocols on one
port, with the standard library's `http.server`:

- TensorFlow Serving's REST API, so that a client written for
  `tensorflow_model_server` works unchanged: `POST
  /v1/models/NAME[/versions/N]:predict` with `{"signature_name": ...,
  "instances": [...]}` (row format; the answer is `{"predictions": [...]}`)
  or `{"inputs": ...}` (columnar; `{"outputs": ...}`), binary strings as
  `{"b64": "..."}`; `GET /v1/models/NAME` (the model's status) and `GET
  /v1/models/NAME/metadata` (its signatures). Errors are `{"error": ...}`.
- The zoo's own, older paths: `POST /v1/predict` takes the inputs of the
  signature that matches its fields (`{"text": [...]}`, `{"image": [...]}`,
  `{"image_bytes": [base64, ...]}`, a scalar such as `beam_width` as a
  number) and answers `{"signature", "predictions": [{output: value}, ...]}`;
  `GET /v1/metadata` gives the export's description; `GET /` a page to try
  the model in a browser (`serving_page.html`).

Every request is bounded (`Limits`, each a `python -m zoo serve` flag): the
body's size, the time a client has to send it, its rows, the pixels of each
image (read from the PNG / JPEG / GIF / BMP header before anything decodes
it), a translator's `beam_width` and `max_length` (the smaller of the
export's own limits and the server's), the time a request may wait for its
answer; a fixed pool of worker threads handles connections, and one more
than its queue holds gets a 503. Requests are run by one `Batcher` thread in
model calls of at most `max_batch` rows, taken in turn from every waiting
request, so that a one-sentence request is not stuck behind a
1,000-sentence one. Bad input gets a 4xx with a JSON error naming the field;
a POST must say `Content-Type: application/json` and a request's `Host` must
be a loopback name or one allowed with `allow_hosts` (what stops a web page
from posting to a server on the reader's laptop). SIGTERM (`serve`) stops
accepting, answers the requests already accepted, and returns.
"""

import base64
import binascii
import collections
import dataclasses
import json
import os
import queue
import re
import signal
import socket
import struct
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit

import numpy as np

#: Input names whose values travel as base64 text.
BYTES_SUFFIX = "_bytes"
#: JSON deeper than this is refused (no input of ours nests more than 5).
MAX_JSON_DEPTH = 32
#: Host names every server answers to.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: The demo page, beside this module.
PAGE_FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "serving_page.html"
)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request, and the server, may use; each a `zoo serve` flag.

    The defaults keep a 2-core, 24 GiB machine answering under any single
    request and under hundreds of concurrent ones.

    Args:
        max_request_bytes: int. Largest body (else 413). Defaults to 10 MiB.
        max_rows: int. Rows (sentences, images) in one request (else 400).
            Defaults to `1024`.
        max_batch: int. Rows per model call; larger requests are split and
            interleaved with others. Defaults to `64`.
        max_beam_width: int. Largest `beam_width` input (else 400); an
            export's own, smaller limit wins. Defaults to `16`.
        max_length: int. Largest `max_length` input (else 400); an export's
            own, smaller limit wins. Defaults to `256`.
        max_image_pixels: int. Pixels of one image, read from its header
            before decoding (else 400). Defaults to `2**22` (2048 x 2048).
        max_request_pixels: int. Pixels of all images of one request, and
            of one model call. Defaults to `2**24`.
        request_timeout: float. Seconds a request may wait for the model
            (else 503). Defaults to `60`.
        read_timeout: float. Seconds a client has to send its whole request
            (else 408, or the connection is closed). Defaults to `10`.
        workers: int. Threads handling connections. Defaults to `16`.
        max_queued: int. Accepted connections waiting for a worker; one
            more gets a 503. Defaults to `256`.
        batch_delay: float. Seconds a request waits for others to batch
            with. Defaults to `0.005`.

    Example:
    >>> Limits(max_rows=8).max_rows
    8
    >>> Limits(max_rows=0)
    Traceback (most recent call last):
    ...
    ValueError: `max_rows` must be a number > 0. Received: max_rows=0
    """

    max_request_bytes: int = 10 * 2**20
    max_rows: int = 1024
    max_batch: int = 64
    max_beam_width: int = 16
    max_length: int = 256
    max_image_pixels: int = 2**22
    max_request_pixels: int = 2**24
    request_timeout: float = 60.0
    read_timeout: float = 10.0
    workers: int = 16
    max_queued: int = 256
    batch_delay: float = 0.005

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            least = 0 if field.name == "batch_delay" else None
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and (value >= 0 if least == 0 else value > 0)
            if field.type == "int" or field.type is int:
                ok = ok and isinstance(value, int)
            if not ok:
                sign = ">= 0" if least == 0 else "> 0"
                raise ValueError(
                    f"`{field.name}` must be a number {sign}. "
                    f"Received: {field.name}={value!r}"
                )


class RequestError(Exception):
    """A request the server refuses: an HTTP status and the field at fault.

    Args:
        message: str. What is wrong, sent as the answer's `error`.
        field: optional str. The request field at fault, sent as `field`
            on the zoo's own paths.
        status: `HTTPStatus`. Defaults to 400 (bad request).

    Example:
    >>> error = RequestError("`image` must be a list.", field="image")
    >>> int(error.status), error.field, str(error)
    (400, 'image', '`image` must be a list.')
    >>> int(RequestError("No page /x.", status=HTTPStatus.NOT_FOUND).status)
    404
    """

    def __init__(self, message, field=None, status=HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.field = field
        self.status = status


def image_size(data):
    """`(height, width, frames)` of an encoded image, read from its header.

    Nothing is decoded: the server checks the pixels an image would take
    before the model's graph decodes it. GIF frames are counted (TensorFlow
    decodes them all).

    Args:
        data: bytes. A PNG, JPEG, GIF or BMP file.

    Returns:
        `(height, width, frames)`, or `None` when `data` is none of these
        formats or its header is cut short.

    Example:
    >>> import zlib
    >>> header = struct.pack(">IIBBBBB", 23000, 23000, 8, 0, 0, 0, 0)
    >>> png = b"\\x89PNG\\r\\n\\x1a\\n" + struct.pack(">I", 13) + b"IHDR" + header
    >>> image_size(png + struct.pack(">I", zlib.crc32(b"IHDR" + header)))
    (23000, 23000, 1)
    >>> image_size(b"not an image") is None
    True
    """
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return height, width, 1
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return _gif_size(data)
        if data.startswith(b"BM"):
            (header,) = struct.unpack("<I", data[14:18])
            if header == 12:
                width, height = struct.unpack("<HH", data[18:22])
            else:
                width, height = struct.unpack("<ii", data[18:26])
            return abs(height), abs(width), 1
    except (struct.error, IndexError):
        return None
    return None


def _jpeg_size(data):
    """A JPEG's size from its first start-of-frame marker."""
    position = 2
    while position + 9 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # Fill byte.
            position += 1
            continue
        if 0xD0 <= marker <= 0xD9 or marker == 0x01:  # No length.
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return height, width, 1
        position += 2 + length
    return None


def _gif_size(data):
    """A GIF's screen size, and its frames counted by walking its blocks."""
    width, height, flags = struct.unpack("<HHB", data[6:11])
    position = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    frames, largest = 0, width * height

    def skip_sub_blocks(position):
        while data[position] != 0:
            position += data[position] + 1
        return position + 1

    while position < len(data) and data[position] != 0x3B:
        if data[position] == 0x21:  # Extension.
            position = skip_sub_blocks(position + 2)
        elif data[position] == 0x2C:  # Image descriptor.
            frames += 1
            frame_width, frame_height, flags = struct.unpack(
                "<HHB", data[position + 5 : position + 10]
            )
            largest = max(largest, frame_width * frame_height)
            position += 10 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
            position = skip_sub_blocks(position + 1)
        else:
            break
    # The screen's shape, with as many frames as hold the largest frame's
    # pixels each: what decoding allocates.
    frames = max(frames, 1) * max(1, -(-largest // max(width * height, 1)))
    return height, width, frames


#: A parsed request: the signature, its NumPy inputs, the rows and, for
#: images, each row's pixels (what a model call's pixel budget counts).
Parsed = collections.namedtuple("Parsed", "signature inputs rows costs")
Parsed.__doc__ = """`(signature, inputs, rows, costs)`: what `Signatures.parse` reads.

Example:
>>> parsed = Parsed("serving_default", {"text": np.array([b"a"], object)}, 1, None)
>>> parsed.signature, parsed.rows
('serving_default', 1)
"""


def _demo_exported():
    """A one-signature export (`text -> length`) for the examples."""
    import tempfile

    import tensorflow as tf

    from zoo.export import Exported, write_metadata

    class Lengths(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"length": tf.strings.length(text)}

    module = Lengths()
    with tempfile.TemporaryDirectory() as path:
        tf.saved_model.save(module, path, signatures=module.serve)
        write_metadata(path, {"kind": "demo", "limits": {"beam_width": 4}})
        return Exported(path)


class Signatures:
    """The export's signatures: picks one for a request and checks its fields.

    Args:
        exported: a `zoo.export.Exported` (its `signatures` and `metadata`;
            `metadata["limits"]` holds the export's own bounds on scalar
            inputs such as `beam_width`).
        limits: a `Limits`. Defaults to `Limits()`.

    Example:
    >>> signatures = Signatures(_demo_exported())
    >>> parsed = signatures.parse({"text": ["ab", "c"]})
    >>> parsed.signature, parsed.rows, signatures(parsed.signature, parsed.inputs)["length"].tolist()
    ('serving_default', 2, [2, 1])
    >>> signatures.parse({"txt": ["ab"]})
    Traceback (most recent call last):
    ...
    zoo.serve.RequestError: The fields ['txt'] match no signature: send {text}.
    >>> signatures.bounds
    {'beam_width': 4, 'max_length': 256}
    """

    def __init__(self, exported, limits=None):
        self.exported = exported
        self.limits = limits or Limits()
        self.functions = dict(exported.signatures)
        self.inputs = {
            name: function.structured_input_signature[1]
            for name, function in self.functions.items()
        }
        own = exported.metadata.get("limits", {})
        self.bounds = {
            "beam_width": min(
                self.limits.max_beam_width, own.get("beam_width", np.inf)
            ),
            "max_length": min(self.limits.max_length, own.get("max_length", np.inf)),
        }

    def describe(self):
        """JSON-ready `{signature: {"inputs": {...}, "outputs": {...}}}`.

        Example:
        >>> Signatures(_demo_exported()).describe()
        {'serving_default': {'inputs': {'text': {'dtype': 'string', 'shape': [None]}}, 'outputs': {'length': {'dtype': 'int32', 'shape': [None]}}}}
        """

        def spec(s):
            return {"dtype": s.dtype.name, "shape": s.shape.as_list()}

        return {
            name: {
                "inputs": {k: spec(s) for k, s in self.inputs[name].items()},
                "outputs": {k: spec(s) for k, s in function.structured_outputs.items()},
            }
            for name, function in self.functions.items()
        }

    def choose(self, fields):
        """The signature whose inputs are exactly `fields`, else a 400.

        Example:
        >>> signatures = Signatures(_demo_exported())
        >>> signatures.choose(["text"])
        'serving_default'
        >>> try:
        ...     signatures.choose(["text", "beam_width"])
        ... except RequestError as error:
        ...     print(int(error.status), error.field, error)
        400 beam_width The fields ['beam_width', 'text'] match no signature: send {text}.
        """
        candidates = sorted(
            name for name, specs in self.inputs.items() if set(specs) == set(fields)
        )
        if "serving_default" in candidates:
            return "serving_default"
        if candidates:
            return candidates[0]
        known = sorted({field for specs in self.inputs.values() for field in specs})
        unknown = sorted(set(fields) - set(known))
        field = unknown[0] if unknown else None
        accepted = " or ".join(
            "{" + ", ".join(sorted(specs)) + "}" for specs in self.inputs.values()
        )
        raise RequestError(
            f"The fields {sorted(fields)} match no signature: send {accepted}.",
            field=field,
        )

    def parse(self, body):
        """A `Parsed` request from the JSON body of `POST /v1/predict`.

        Example:
        >>> signatures = Signatures(_demo_exported())
        >>> parsed = signatures.parse({"text": ["ab", "c"]})
        >>> parsed.signature, parsed.inputs["text"].tolist(), parsed.rows
        ('serving_default', [b'ab', b'c'], 2)
        >>> signatures.parse({"text": []})
        Traceback (most recent call last):
        ...
        zoo.serve.RequestError: The request holds no rows (an empty list).
        >>> signatures.parse({"text": ["\\ud800"]})
        Traceback (most recent call last):
        ...
        zoo.serve.RequestError: `text[0]` is not valid Unicode text (a lone surrogate?).
        """
        if not isinstance(body, dict) or not body:
            raise RequestError("The body must be a JSON object of input fields.")
        return self._check(self.choose(body), body, base64_strings=True)

    def parse_tf_serving(self, body):
        """`(Parsed, "row" or "columnar")` from a TF Serving predict request.

        The body is `{"signature_name": ..., "instances": [...]}` (a list of
        rows: values when the signature has one input, else objects of
        inputs) or `{"signature_name": ..., "inputs": ...}` (each input a
        batch, a scalar input a number); a binary string is `{"b64": ...}`.

        Example:
        >>> signatures = Signatures(_demo_exported())
        >>> parsed, form = signatures.parse_tf_serving({"instances": ["ab", {"b64": "Yw=="}]})
        >>> parsed.inputs["text"].tolist(), form
        ([b'ab', b'c'], 'row')
        >>> signatures.parse_tf_serving({"inputs": {"text": ["abc"]}})[1]
        'columnar'
        >>> signatures.parse_tf_serving({"signature_name": "x", "inputs": ["a"]})
        Traceback (most recent call last):
        ...
        zoo.serve.RequestError: Serving signature name: "x" not found in signature def (the export has ['serving_default']).
        """
        if not isinstance(body, dict):
            raise RequestError("The body must be a JSON object.")
        name = body.get("signature_name", "serving_default")
        if not isinstance(name, str) or name not in self.functions:
            raise RequestError(
                f"Serving signature name: {json.dumps(name)} not found in "
                f"signature def (the export has {sorted(self.functions)}).",
                field="signature_name",
            )
        forms = [key for key in ("instances", "inputs") if key in body]
        if len(forms) != 1:
            raise RequestError(
                "The body must hold exactly one of 'instances' (rows) and "
                f"'inputs' (columns). Received: keys={sorted(body)}"
            )
        specs = self.inputs[name]
        value = body[forms[0]]
        if forms[0] == "inputs":
            named = isinstance(value, dict) and set(value) == set(specs)
            if not named and len(specs) == 1:
                value = {next(iter(specs)): value}
            if not isinstance(value, dict):
                raise RequestError(
                    f"'inputs' must be an object of the inputs {sorted(specs)}."
                )
            return self._check(name, value, base64_strings=False), "columnar"
        if not isinstance(value, list) or not value:
            raise RequestError("'instances' must be a non-empty list of rows.")
        scalars = sorted(k for k, s in specs.items() if s.shape.rank == 0)
        if scalars:
            raise RequestError(
                f"Signature {name!r} takes the scalar input `{scalars[0]}`, "
                "which rows cannot hold: send the columnar 'inputs' form.",
                field=scalars[0],
            )
        if all(isinstance(row, dict) for row in value):
            for i, row in enumerate(value):
                if set(row) != set(specs) and not (
                    len(specs) == 1 and set(row) == {"b64"}
                ):
                    raise RequestError(
                        f"'instances[{i}]' must hold the inputs {sorted(specs)}. "
                        f"Received: {sorted(row)}"
                    )
            if not (len(specs) == 1 and set(value[0]) == {"b64"}):
                value = {k: [row[k] for row in value] for k in specs}
        if isinstance(value, list):
            if len(specs) != 1:
                raise RequestError(
                    f"Signature {name!r} takes {sorted(specs)}: each of "
                    "'instances' must be an object of those inputs."
                )
            value = {next(iter(specs)): value}
        return self._check(name, value, base64_strings=False), "row"

    def _check(self, name, fields, base64_strings):
        """`Parsed` inputs of signature `name`, checked against every bound."""
        specs = self.inputs[name]
        if set(fields) != set(specs):
            wrong = sorted(set(fields) ^ set(specs))
            raise RequestError(
                f"Signature {name!r} takes {sorted(specs)}. Received: {sorted(fields)}",
                field=wrong[0],
            )
        inputs, rows, costs = {}, None, None
        for field, spec in sorted(specs.items()):
            value = _array(field, fields[field], spec, base64_strings)
            if spec.shape.rank:
                if rows is not None and len(value) != rows:
                    raise RequestError(
                        f"`{field}` holds {len(value)} rows, the other inputs {rows}.",
                        field=field,
                    )
                rows = len(value)
                if rows > self.limits.max_rows:
                    raise RequestError(
                        f"`{field}` holds {rows} rows; the limit is "
                        f"{self.limits.max_rows} a request (max_rows).",
                        field=field,
                    )
                if field.startswith("image"):
                    costs = self._pixels(field, value, spec)
            elif field in self.bounds and value > self.bounds[field]:
                raise RequestError(
                    f"`{field}` must be <= {self.bounds[field]} (the limit of "
                    f"this export and server). Received: {field}={value}",
                    field=field,
                )
            inputs[field] = value
        if not rows:
            raise RequestError("The request holds no rows (an empty list).")
        return Parsed(name, inputs, rows, costs)

    def _pixels(self, field, value, spec):
        """Each image's pixels (from the header of an encoded one), bounded."""
        if spec.dtype.name == "string":
            sizes = []
            for i, data in enumerate(value):
                size = image_size(data)
                if size is None:
                    raise RequestError(
                        f"`{field}[{i}]` is not a PNG, JPEG, GIF or BMP file.",
                        field=field,
                    )
                sizes.append(size[0] * size[1] * size[2])
        else:
            sizes = [value.shape[1] * value.shape[2]] * len(value)
        limit = self.limits.max_image_pixels
        for i, pixels in enumerate(sizes):
            if pixels > limit:
                raise RequestError(
                    f"`{field}[{i}]` holds {pixels} pixels; the limit is {limit} "
                    "an image (max_image_pixels).",
                    field=field,
                )
        total, limit = sum(sizes), self.limits.max_request_pixels
        if total > limit:
            raise RequestError(
                f"`{field}` holds {total} pixels in all; the limit is {limit} "
                "a request (max_request_pixels).",
                field=field,
            )
        return sizes

    def __call__(self, name, inputs):
        """Runs a signature on NumPy inputs; returns NumPy outputs."""
        import tensorflow as tf

        function = self.functions[name]
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in function(**tensors).items()}


def _array(field, value, spec, base64_strings=True):
    """A JSON value as the NumPy array a signature input takes, or a 400.

    Strings are UTF-8 encoded; `{"b64": ...}` is binary (and, when
    `base64_strings`, so is a plain string of an input named `*_bytes`).
    """
    dtype = spec.dtype
    if spec.shape.rank == 0:
        if dtype.is_integer and not isinstance(value, bool) and isinstance(value, int):
            info = np.iinfo(dtype.as_numpy_dtype)
            if not info.min <= value <= info.max:
                raise RequestError(
                    f"`{field}` must lie in [{info.min}, {info.max}]. "
                    f"Received: {field}={value}",
                    field=field,
                )
            return np.asarray(value, dtype.as_numpy_dtype)
        if dtype.is_floating and isinstance(value, (int, float)):
            return np.asarray(value, dtype.as_numpy_dtype)
        raise RequestError(
            f"`{field}` must be a single {dtype.name} number. Received: {value!r:.60}",
            field=field,
        )
    if not isinstance(value, list):
        raise RequestError(
            f"`{field}` must be a list (one entry per row). Received: {value!r:.60}",
            field=field,
        )
    if dtype.name == "string":
        binary = base64_strings and field.endswith(BYTES_SUFFIX)
        return np.array(
            [_string(field, i, v, binary) for i, v in enumerate(value)], object
        )
    return _numbers(field, value, spec)


def _string(field, index, value, binary):
    """One string input: text as UTF-8, `{"b64": ...}` or base64 as bytes."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        value, binary = value["b64"], True
    if not isinstance(value, str):
        kind = "base64 text" if binary else "a string"
        raise RequestError(
            f"`{field}[{index}]` must be {kind}. Received: {value!r:.60}",
            field=field,
        )
    if binary:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise RequestError(
                f"`{field}[{index}]` is not valid base64.", field=field
            ) from None
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(
            f"`{field}[{index}]` is not valid Unicode text (a lone surrogate?).",
            field=field,
        ) from None


def _numbers(field, value, spec):
    """Nested lists as an array of the spec's rank, exactly (no guessing)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        array = None
    if array is None or array.dtype == object:
        raise RequestError(
            f"The rows of `{field}` must be nested lists of one shape (send "
            "images of different sizes in separate requests, or encoded).",
            field=field,
        )
    if array.size and array.dtype.kind not in "iuf":
        raise RequestError(
            f"`{field}` must hold numbers. Received: {array.dtype.name} values",
            field=field,
        )
    rank = spec.shape.rank
    if array.ndim != rank:
        hint = (
            " (a batch of images, each height x width x channels: wrap one "
            "image in a list, give gray ones a channel axis)"
            if rank == 4
            else ""
        )
        raise RequestError(
            f"`{field}` must be a list of arrays of rank {rank - 1}{hint}. "
            f"Received: shape {list(array.shape)}",
            field=field,
        )
    numpy_dtype = spec.dtype.as_numpy_dtype
    if spec.dtype.is_integer and array.size:
        if array.dtype.kind == "f" and not np.all(array == np.round(array)):
            raise RequestError(f"`{field}` must hold integers.", field=field)
        info = np.iinfo(numpy_dtype)
        if array.min() < info.min or array.max() > info.max:
            raise RequestError(
                f"`{field}` values must lie in [{info.min}, {info.max}]. "
                f"Received: values in [{array.min()}, {array.max()}]",
                field=field,
            )
    return array.astype(numpy_dtype)


def _check_depth(value, limit=MAX_JSON_DEPTH):
    """Refuses JSON nested deeper than `limit` (before NumPy recurses in it)."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            raise RequestError(f"The JSON is nested deeper than {limit} levels.")
        level = [
            child
            for item in level
            if isinstance(item, (list, dict))
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (list, dict))
        ]


class _Pending:
    """One request in the `Batcher`: its inputs, rows done so far, outputs."""

    def __init__(self, name, inputs, rows, costs=None):
        self.name = name
        self.inputs = inputs
        self.rows = rows
        self.costs = None if costs is None else np.asarray(costs, np.int64)
        # Requests with equal keys can share a model call.
        self.key = (name,) + tuple(
            (k, v.shape[1:], v.item() if v.ndim == 0 else None)
            for k, v in sorted(inputs.items())
        )
        self.done = threading.Event()
        self.next = 0  # The first row not yet run.
        self.parts = []
        self.outputs = None
        self.error = None
        self.cancelled = False

    def rows_of(self, start, end):
        return {k: v if v.ndim == 0 else v[start:end] for k, v in self.inputs.items()}

    def finish(self, outputs=None, error=None):
        self.outputs, self.error = outputs, error
        self.done.set()


class Batcher:
    """Runs concurrent requests on one thread, in turns of bounded model calls.

    A request that arrives while the thread is idle waits at most `delay`
    seconds for others to join it. Each model call takes at most `max_rows`
    rows (and `max_cost` pixels, for images) from the waiting requests that
    go to the same signature with inputs of the same shape (and the same
    scalar inputs): new requests first, then those already partly run, so
    that a large request is split over several calls and a small one that
    arrives meanwhile runs in the next call. When a call fails, its
    requests are run one by one, so a bad request fails alone.

    Args:
        run: callable `(signature, inputs) -> outputs` (NumPy dicts).
        delay: float. Seconds to wait for more requests. Defaults to
            `0.005`.
        max_rows: int. Rows per call. Defaults to `64`.
        max_cost: optional int. Sum of the rows' costs (pixels) per call.
        timeout: float. Seconds `submit` waits for an answer. Defaults to
            `60`.

    Example:
    >>> batcher = Batcher(lambda name, x: {"double": 2 * x["x"]}, max_rows=2)
    >>> batcher.submit("f", {"x": np.arange(5)}, 5)["double"].tolist()
    [0, 2, 4, 6, 8]
    >>> batcher.calls  # Five rows in calls of two.
    3
    >>> batcher.close()
    """

    def __init__(self, run, delay=0.005, max_rows=64, max_cost=None, timeout=60.0):
        self.run = run
        self.delay = delay
        self.max_rows = max_rows
        self.max_cost = max_cost
        self.timeout = timeout
        self.calls = 0
        self.requests = 0
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def submit(self, name, inputs, rows, costs=None, timeout=None):
        """Queues one request and waits for its outputs (or raises its error).

        Args:
            name: str. The signature to run.
            inputs: dict of NumPy arrays (`Signatures.parse`'s).
            rows: int. The request's batch size.
            costs: optional sequence of each row's cost (pixels).
            timeout: float. Seconds to wait, then a 503 (and the request's
                rows not yet run are dropped). Defaults to the batcher's.

        Example:
        >>> def run(name, inputs):
        ...     if (inputs["x"] < 0).any():
        ...         raise ValueError("negative")
        ...     return {"double": 2 * inputs["x"]}
        >>> batcher = Batcher(run)
        >>> batcher.submit("f", {"x": np.array([1, 2])}, 2)["double"].tolist()
        [2, 4]
        >>> batcher.submit("f", {"x": np.array([-1])}, 1)
        Traceback (most recent call last):
        ...
        zoo.serve.RequestError: The model failed: ValueError
        >>> batcher.close()
        """
        timeout = self.timeout if timeout is None else timeout
        pending = _Pending(name, inputs, rows, costs)
        self.requests += 1
        self._queue.put(pending)
        if not pending.done.wait(timeout):
            pending.cancelled = True
            raise RequestError(
                f"The model did not answer within {timeout:g} s "
                "(the server's request_timeout).",
                status=HTTPStatus.SERVICE_UNAVAILABLE,
            )
        if pending.error is not None:
            raise pending.error
        return pending.outputs

    def close(self):
        """Stops the batching thread once the queued requests are done.

        Example:
        >>> batcher = Batcher(lambda name, x: {"y": x["x"] + 1})
        >>> batcher.submit("f", {"x": np.zeros(2)}, 2)["y"].tolist()
        [1.0, 1.0]
        >>> batcher.close()
        >>> batcher.calls, batcher.requests
        (1, 1)
        """
        self._queue.put(None)
        self._thread.join()

    def _loop(self):
        waiting, stop = [], False
        while not (stop and not waiting):
            if not waiting:
                first = self._queue.get()
                if first is None:
                    return
                self._admit(waiting, first)
                end = time.monotonic() + self.delay
                while sum(p.rows for p in waiting) < self.max_rows:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        pending = self._queue.get(timeout=left)
                    except queue.Empty:
                        break
                    if pending is None:
                        stop = True
                        break
                    self._admit(waiting, pending)
            while True:  # Requests that came while the model ran join now.
                try:
                    pending = self._queue.get_nowait()
                except queue.Empty:
                    break
                if pending is None:
                    stop = True
                else:
                    self._admit(waiting, pending)
            waiting = [p for p in waiting if not p.cancelled]
            if not waiting:
                continue
            batch = self._take(waiting)
            self._run(batch)
            served = [p for p, _, _ in batch]
            waiting = [p for p in waiting if p not in served] + [
                p for p in served if not p.done.is_set()
            ]

    @staticmethod
    def _admit(waiting, pending):
        """New requests go before those already partly run (in arrival order)."""
        started = [i for i, p in enumerate(waiting) if p.next > 0]
        waiting.insert(started[0] if started else len(waiting), pending)

    def _take(self, waiting):
        """`[(request, start, end)]`: rows for one call, in `waiting`'s order."""
        key = waiting[0].key
        rows, cost, batch = self.max_rows, self.max_cost, []
        for pending in waiting:
            if pending.key != key:
                continue
            take = min(rows, pending.rows - pending.next)
            if pending.costs is not None and cost is not None:
                costs = np.cumsum(pending.costs[pending.next : pending.next + take])
                fits = int(np.searchsorted(costs, cost, side="right"))
                take = min(take, fits if fits or batch else 1)
                cost -= int(costs[take - 1]) if take else 0
            if take == 0:
                break
            batch.append((pending, pending.next, pending.next + take))
            rows -= take
            if rows == 0:
                break
        return batch

    def _run(self, batch):
        first = batch[0][0]
        try:
            inputs = {
                k: v
                if v.ndim == 0
                else np.concatenate([p.inputs[k][s:e] for p, s, e in batch])
                for k, v in first.inputs.items()
            }
            self.calls += 1
            outputs = self.run(first.name, inputs)
        except Exception as error:  # noqa: BLE001 - reported to the requests
            if len(batch) > 1:
                for piece in batch:
                    self._run([piece])
            else:
                first.finish(error=_model_error(error))
            return
        offset = 0
        for pending, start, end in batch:
            count = end - start
            pending.parts.append(
                {k: v[offset : offset + count] for k, v in outputs.items()}
            )
            offset += count
            pending.next = end
            if end == pending.rows:
                parts = pending.parts
                pending.finish(
                    {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
                )


# Lines of a TensorFlow error that locate it rather than say what is wrong.
_TRACE_LINES = ("Graph execution error", "Detected at node", "<stack", "[[")


def _model_error(error):
    """A model failure as a 400 (bad input the graph refused) or a 500."""
    import tensorflow as tf

    if isinstance(error, RequestError):
        return error
    if isinstance(error, tf.errors.InvalidArgumentError):
        lines = str(getattr(error, "message", error)).splitlines()
        said = [line.strip() for line in lines if line.strip()]
        said = [line for line in said if not line.startswith(_TRACE_LINES)] or said
        return RequestError(f"The model refused the input: {said[0][:300]}")
    return RequestError(
        f"The model failed: {type(error).__name__}",
        status=HTTPStatus.INTERNAL_SERVER_ERROR,
    )


def _json_value(value, name=""):
    """A NumPy output as JSON: text for strings (`{"b64"}` for `*_bytes`), lists."""
    if isinstance(value, bytes):
        if name.endswith(BYTES_SUFFIX):
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [_json_value(v, name) for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _busy_answer(message):
    """A whole HTTP 503 answer, written before the request is read."""
    body = json.dumps({"error": message}).encode("utf-8")
    head = (
        "HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class ModelServer(HTTPServer):
    """An `HTTPServer` holding the export, its `Batcher` and a bounded pool.

    Accepted connections wait in a queue of `limits.max_queued` for one of
    `limits.workers` threads (one more gets a 503 at once); a watchdog
    closes a connection whose request has not arrived in
    `limits.read_timeout` seconds. `server_close()` stops accepting, lets the
    workers answer every connection already accepted, then stops.

    Args:
        address: `(host, port)`; port `0` picks a free one
            (`server_address` tells which).
        signatures: a `Signatures`.
        limits: a `Limits`. Defaults to `signatures.limits`.
        allow_hosts: iterable of str. `Host` names answered besides the
            loopback ones (and the bound address); `"*"` allows any.
        model_name: str. The name in TF Serving's paths. Defaults to the
            export's preset (or folder) name.
        version: str. The version TF Serving's paths report. Defaults to
            `"1"`.

    Example (`make_server(directory)` builds one for an export):
    >>> import json, threading, urllib.request
    >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()),
    ...     model_name="lengths")
    >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    >>> url = "http://127.0.0.1:%d" % server.server_address[1]
    >>> def post(path, body):
    ...     request = urllib.request.Request(url + path, json.dumps(body).encode(),
    ...         headers={"Content-Type": "application/json"})
    ...     try:
    ...         with urllib.request.urlopen(request) as answer:
    ...             return json.load(answer)
    ...     except urllib.error.HTTPError as error:
    ...         return error.code, json.load(error)
    >>> post("/v1/models/lengths:predict", {"instances": ["ab", "c"]})
    {'predictions': [2, 1]}
    >>> post("/v1/predict", {"text": ["ab", "c"]})
    {'signature': 'serving_default', 'predictions': [{'length': 2}, {'length': 1}]}
    >>> post("/v1/predict", {"txt": ["ab"]})
    (400, {'error': "The fields ['txt'] match no signature: send {text}.", 'field': 'txt'})
    >>> server.shutdown()
    >>> server.server_close()  # and the workers and the batcher's thread
    """

    # Concurrent clients connect at once; the default backlog of 5 resets them.
    request_queue_size = 128

    def __init__(
        self,
        address,
        signatures,
        limits=None,
        allow_hosts=(),
        model_name=None,
        version="1",
    ):
        self.signatures = signatures
        self.limits = limits or signatures.limits
        exported = signatures.exported
        self.model_name = model_name or _model_name(exported)
        self.version = str(version)
        super().__init__(address, Handler)
        bound = str(self.server_address[0]).lower()
        self.allowed_hosts = {*LOOPBACK_HOSTS, *(h.lower() for h in allow_hosts)}
        if bound not in ("0.0.0.0", "::", ""):
            self.allowed_hosts.add(bound)
        self.batcher = Batcher(
            signatures,
            delay=self.limits.batch_delay,
            max_rows=self.limits.max_batch,
            max_cost=self.limits.max_request_pixels,
            timeout=self.limits.request_timeout,
        )
        self._connections = queue.Queue(self.limits.max_queued)
        self._receiving = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._workers = [
            threading.Thread(target=self._work, daemon=True, name=f"zoo-serve-{i}")
            for i in range(self.limits.workers)
        ]
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        for thread in (*self._workers, self._watchdog):
            thread.start()

    def process_request(self, request, client_address):
        """Queues an accepted connection for a worker, or answers 503 at once.

        Example (one worker, one place in the queue: a third idle
        connection is turned away):
        >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported(),
        ...     Limits(workers=1, max_queued=1, read_timeout=1.0)))
        >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        >>> idle = [socket.create_connection(server.server_address) for _ in range(3)]
        >>> idle[2].recv(1000).split(b"\\r\\n")[0]
        b'HTTP/1.0 503 Service Unavailable'
        >>> for connection in idle:
        ...     connection.close()
        >>> server.shutdown()
        >>> server.server_close()
        """
        try:
            self._connections.put_nowait((request, client_address))
        except queue.Full:
            try:
                request.settimeout(1.0)
                request.sendall(
                    _busy_answer(
                        f"The server is busy ({self.limits.workers} workers, "
                        f"{self.limits.max_queued} waiting): retry later."
                    )
                )
            except OSError:
                pass
            self.shutdown_request(request)

    def _work(self):
        while True:
            item = self._connections.get()
            if item is None:
                return
            request, client_address = item
            # Each read waits at most `read_timeout`; the watchdog closes the
            # connection if the whole request takes longer.
            request.settimeout(self.limits.read_timeout)
            with self._lock:
                self._receiving[request] = time.monotonic() + self.limits.read_timeout
            try:
                self.finish_request(request, client_address)
            except Exception as error:  # noqa: BLE001 - one connection's failure
                print(f"zoo serve: connection failed: {error!r}", file=sys.stderr)
            finally:
                self._received(request)
                self.shutdown_request(request)

    def _received(self, connection):
        """`connection`'s request has arrived: the watchdog leaves it."""
        with self._lock:
            self._receiving.pop(connection, None)

    def _watch(self):
        while not self._closed.wait(0.2):
            now = time.monotonic()
            with self._lock:
                late = [c for c, end in self._receiving.items() if end < now]
                for connection in late:
                    del self._receiving[connection]
            for connection in late:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def server_close(self):
        """Stops accepting, answers what was accepted, stops the threads."""
        super().server_close()
        if self._closed.is_set():
            return
        for _ in self._workers:
            self._connections.put(None)
        for thread in self._workers:
            thread.join()
        self._closed.set()
        self._watchdog.join()
        self.batcher.close()


def _model_name(exported):
    """The export's name in TF Serving's paths: its preset's, else its folder's."""
    metadata = exported.metadata
    name = metadata.get("preset") or getattr(exported, "path", None) or "model"
    name = os.path.basename(os.path.normpath(str(name)))
    if name.isdigit():  # A version folder: the model's name is its parent's.
        name = os.path.basename(os.path.dirname(os.path.normpath(exported.path)))
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "model"


#: `/v1/models/NAME[/versions/N|/labels/L][:predict|/metadata]`.
_TF_SERVING_PATH = re.compile(
    r"/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?::(?P<verb>[a-z]+)|(?P<metadata>/metadata))?"
)

#: TensorFlow's names of the dtypes (`DataType` enum names).
_DATA_TYPES = {
    "string": "DT_STRING",
    "float32": "DT_FLOAT",
    "float64": "DT_DOUBLE",
    "float16": "DT_HALF",
    "bfloat16": "DT_BFLOAT16",
    "bool": "DT_BOOL",
}


def _tensor_info(spec, tensor_name):
    """A `TensorInfo` protobuf's JSON, as TF Serving's metadata gives it."""
    dtype = _DATA_TYPES.get(spec.dtype.name, "DT_" + spec.dtype.name.upper())
    dims = [{"size": str(-1 if d is None else d), "name": ""} for d in spec.shape]
    return {
        "dtype": dtype,
        "tensor_shape": {"dim": dims, "unknown_rank": spec.shape.rank is None},
        "name": tensor_name,
    }


class Handler(BaseHTTPRequestHandler):
    """The routes of a `ModelServer`: TF Serving's REST API and the zoo's own.

    Every answer is JSON (but the page); an error is `{"error": ...}` with
    its HTTP status (and `"field"` on the zoo's own paths). Any failure of
    the handler itself is a 500 with the error's type, never a closed
    connection or a traceback.

    Example:
    >>> import urllib.request
    >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()),
    ...     model_name="lengths")
    >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    >>> url = "http://127.0.0.1:%d" % server.server_address[1]
    >>> with urllib.request.urlopen(url + "/v1/models/lengths") as answer:
    ...     json.load(answer)["model_version_status"][0]["state"]
    'AVAILABLE'
    >>> try:
    ...     urllib.request.urlopen(url + "/v1/models/other/metadata")
    ... except urllib.error.HTTPError as error:
    ...     print(error.code, json.load(error))
    404 {'error': 'Servable not found for request: Latest(other)'}
    >>> server.shutdown()
    >>> server.server_close()
    """

    server_version = "zoo-serve/2"
    sys_version = ""  # The Server header does not tell the Python version.

    def log_message(self, format, *args):  # noqa: A002 - the base signature
        pass

    def send_error(self, code, message=None, explain=None):
        """`http.server`'s own errors (bad request line, ...), as JSON.

        Example:
        >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
        >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        >>> with socket.create_connection(server.server_address) as connection:
        ...     connection.sendall(b"NONSENSE\\r\\n\\r\\n")
        ...     answer = b"".join(iter(lambda: connection.recv(1000), b""))
        >>> answer.split(b"\\r\\n")[0], json.loads(answer.split(b"\\r\\n\\r\\n")[1])
        (b'HTTP/1.0 400 Bad Request', {'error': "Bad request syntax ('NONSENSE')"})
        >>> server.shutdown()
        >>> server.server_close()
        """
        self.close_connection = True
        # A request line too broken to name its version still gets a status.
        self.request_version = "HTTP/1.0"
        self._send(code, {"error": message or HTTPStatus(code).phrase})

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        try:
            self.send_response(int(status))
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            if int(status) == HTTPStatus.SERVICE_UNAVAILABLE:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # The client left.
            self.close_connection = True

    def do_GET(self):
        self._answer(self._get)

    def do_POST(self):
        self._answer(self._post)

    def _answer(self, route):
        tf_serving = False
        try:
            self._check_host()
            path = urlsplit(self.path).path
            match = _TF_SERVING_PATH.fullmatch(path)
            tf_serving = match is not None
            status, body, content_type = HTTPStatus.OK, *route(path, match)
        except RequestError as error:
            self.close_connection = True
            status, body, content_type = error.status, {"error": str(error)}, None
            if not tf_serving:
                body["field"] = error.field
        except Exception as error:  # noqa: BLE001 - answered, the server lives on
            self.close_connection = True
            print(
                f"zoo serve: {self.command} {self.path[:200]}: {error!r}",
                file=sys.stderr,
            )
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            body, content_type = (
                {"error": f"The server failed: {type(error).__name__}"},
                None,
            )
        self._send(status, body, content_type or "application/json")

    def _check_host(self):
        """A `Host` (and `Origin`) that is not ours is refused: DNS rebinding."""
        allowed = self.server.allowed_hosts
        if "*" in allowed:
            return
        for header in ("Host", "Origin"):
            value = self.headers.get(header)
            if value is None:
                continue
            host = urlsplit(value if header == "Origin" else "//" + value).hostname
            if host is None or host.rstrip(".") not in allowed:
                raise RequestError(
                    f"The {header} {value[:100]!r} is not one this server answers "
                    "to: a loopback name, or one given with --allow-host.",
                    status=HTTPStatus.FORBIDDEN,
                )

    def _get(self, path, match):
        signatures = self.server.signatures
        metadata = signatures.exported.metadata
        if match is not None:
            self._check_model(match, "metadata" if match["metadata"] else "status")
            if match["metadata"]:
                return self._tf_serving_metadata(), None
            return {
                "model_version_status": [
                    {
                        "version": self.server.version,
                        "state": "AVAILABLE",
                        "status": {"error_code": "OK", "error_message": ""},
                    }
                ]
            }, None
        if path == "/":
            with open(PAGE_FILE, encoding="utf-8") as f:
                page = f.read()
            for key, value in {
                "__KIND__": metadata.get("kind", "model"),
                "__MODEL__": self.server.model_name,
                "__TITLE__": metadata.get("preset") or metadata.get("model", ""),
            }.items():
                page = page.replace(
                    key, json.dumps(value)[1:-1].replace("<", "\\u003c")
                )
            return page.encode("utf-8"), "text/html; charset=utf-8"
        if path == "/v1/metadata":
            return {"metadata": metadata, "signatures": signatures.describe()}, None
        raise RequestError(f"No page {path[:200]}.", status=HTTPStatus.NOT_FOUND)

    def _post(self, path, match):
        signatures = self.server.signatures
        if match is not None:
            self._check_model(match, "predict")
            parsed, form = signatures.parse_tf_serving(self._json())
            outputs = self._run(parsed)
            return _tf_serving_answer(outputs, parsed.rows, form), None
        if path != "/v1/predict":
            raise RequestError(
                f"No endpoint {path[:200]}: POST to /v1/models/"
                f"{self.server.model_name}:predict or /v1/predict.",
                status=HTTPStatus.NOT_FOUND,
            )
        parsed = signatures.parse(self._json())
        outputs = self._run(parsed)
        predictions = [
            {k: _json_value(v[i], k) for k, v in sorted(outputs.items())}
            for i in range(parsed.rows)
        ]
        return {"signature": parsed.signature, "predictions": predictions}, None

    def _run(self, parsed):
        return self.server.batcher.submit(
            parsed.signature, parsed.inputs, parsed.rows, parsed.costs
        )

    def _check_model(self, match, verb):
        """TF Serving's 404 for another model or version, 400 for a verb."""
        server = self.server
        wanted = match["name"], match["version"], match["label"]
        if wanted[0] != server.model_name or wanted[1] not in (None, server.version):
            which = (
                f"Specific({wanted[0]}, {wanted[1]})"
                if wanted[1]
                else f"Latest({wanted[0]})"
            )
            raise RequestError(
                f"Servable not found for request: {which}", status=HTTPStatus.NOT_FOUND
            )
        if wanted[2] is not None:
            raise RequestError(
                f"This server has no version labels. Received: label {wanted[2]!r}",
                status=HTTPStatus.NOT_FOUND,
            )
        asked = match["verb"] or ("metadata" if match["metadata"] else "status")
        if asked != verb:
            raise RequestError(
                "This server answers POST :predict, GET (status) and GET "
                f"/metadata. Received: {self.command} {asked}",
                status=HTTPStatus.NOT_FOUND,
            )

    def _tf_serving_metadata(self):
        signatures = self.server.signatures
        definitions = {}
        for name, function in signatures.functions.items():
            inputs = signatures.inputs[name]
            outputs = function.structured_outputs
            definitions[name] = {
                "inputs": {
                    k: _tensor_info(s, f"{name}_{k}:0") for k, s in inputs.items()
                },
                "outputs": {
                    k: _tensor_info(outputs[k], f"StatefulPartitionedCall:{i}")
                    for i, k in enumerate(sorted(outputs))
                },
                "method_name": "tensorflow/serving/predict",
            }
        return {
            "model_spec": {
                "name": self.server.model_name,
                "signature_name": "",
                "version": self.server.version,
            },
            "metadata": {"signature_def": {"signature_def": definitions}},
        }

    def _json(self):
        """The body, checked (type, length, arrival time, depth) and decoded."""
        kind = self.headers.get("Content-Type", "")
        if kind.split(";")[0].strip().lower() != "application/json":
            raise RequestError(
                "A POST must carry its JSON with `Content-Type: application/json`. "
                f"Received: {kind[:60]!r}",
                status=HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            )
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(
                "Send the body with a Content-Length (no Transfer-Encoding).",
                status=HTTPStatus.LENGTH_REQUIRED,
            )
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(
                "The request needs a Content-Length.", status=HTTPStatus.LENGTH_REQUIRED
            )
        length = length.strip()
        if not (length.isascii() and length.isdigit()):
            raise RequestError(
                f"The Content-Length must be a count of bytes. Received: {length[:40]!r}"
            )
        limit = self.server.limits.max_request_bytes
        if len(length) > 18 or int(length) > limit:
            raise RequestError(
                f"The body holds {length[:40]} bytes; the limit is {limit} "
                "(max_request_bytes).",
                status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        data = self._read(int(length))
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as error:
            reason = "nested too deeply" if isinstance(error, RecursionError) else error
            raise RequestError(f"The body is not JSON: {reason}"[:300]) from None
        _check_depth(body)
        return body

    def _read(self, length):
        """`length` bytes of body, within the request's `read_timeout`."""
        chunks, left = [], length
        try:
            while left:
                chunk = self.rfile.read1(min(left, 2**16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except (TimeoutError, OSError):
            pass
        self.server._received(self.connection)
        if left:
            raise RequestError(
                f"The body stopped after {length - left} of {length} bytes "
                f"(a request must arrive within {self.server.limits.read_timeout:g} s).",
                status=HTTPStatus.REQUEST_TIMEOUT,
            )
        return b"".join(chunks)


def _tf_serving_answer(outputs, rows, form):
    """TF Serving's answer: `{"predictions": rows}` or `{"outputs": columns}`.

    A signature with one output gives its values alone, without its name.
    """
    names = sorted(outputs)
    if form == "row":
        rows = [{k: _json_value(outputs[k][i], k) for k in names} for i in range(rows)]
        if len(names) == 1:
            rows = [row[names[0]] for row in rows]
        return {"predictions": rows}
    columns = {k: _json_value(outputs[k], k) for k in names}
    return {"outputs": columns[names[0]] if len(names) == 1 else columns}


def saved_model_folder(directory):
    """`(folder, version)` of an export, or of the newest version under it.

    `directory` is a SavedModel (version `"1"`), or a model base folder as
    `tensorflow_model_server --model_base_path` takes it: numbered version
    folders, the largest served.

    Example:
    >>> import tempfile
    >>> base = tempfile.mkdtemp()
    >>> for version in ("1", "10", "9"):
    ...     os.makedirs(os.path.join(base, version))
    ...     open(os.path.join(base, version, "saved_model.pb"), "w").close()
    >>> folder, version = saved_model_folder(base)
    >>> os.path.basename(folder), version
    ('10', '10')
    """
    if os.path.isfile(os.path.join(directory, "saved_model.pb")):
        return directory, "1"
    versions = [
        name
        for name in os.listdir(directory)
        if name.isdigit()
        and os.path.isfile(os.path.join(directory, name, "saved_model.pb"))
    ]
    if not versions:
        raise FileNotFoundError(
            f"{directory!r} holds no saved_model.pb, nor numbered version "
            "folders with one (write one with `python -m zoo export`)."
        )
    version = max(versions, key=int)
    return os.path.join(directory, version), str(int(version))


def make_server(
    directory,
    host="127.0.0.1",
    port=8501,
    allow_hosts=(),
    model_name=None,
    **limits,
):
    """Loads an export and returns its (not yet serving) `ModelServer`.

    Call `serve_forever()` on it (e.g. in a thread), then `shutdown()` and
    `server_close()`.

    Args:
        directory: str. A SavedModel written by `zoo.export`, or a folder of
            numbered versions of one (TF Serving's layout).
        host: str. Defaults to `"127.0.0.1"`.
        port: int. `0` picks a free port. Defaults to `8501`.
        allow_hosts: iterable of str. `Host` names answered besides the
            loopback ones. Defaults to none.
        model_name: str. The name in TF Serving's paths. Defaults to the
            export's preset (or folder) name.
        **limits: `Limits` fields (`max_request_bytes`, `max_rows`,
            `request_timeout`, ...).
    """
    from zoo.export import load

    folder, version = saved_model_folder(directory)
    limits = Limits(**limits)
    signatures = Signatures(load(folder), limits)
    return ModelServer(
        (host, port), signatures, limits, allow_hosts, model_name, version
    )


def serve(directory, host="127.0.0.1", port=8501, **options):
    """Serves an export over HTTP until Ctrl-C or SIGTERM (`python -m zoo serve`).

    Either signal stops accepting connections; the requests already
    accepted are answered before this returns.

    Args:
        directory: str. A SavedModel written by `zoo.export` (or a folder
            of numbered versions of one).
        host: str. Defaults to `"127.0.0.1"`.
        port: int. Defaults to `8501`.
        **options: `make_server` settings (`allow_hosts`, `model_name` and
            the `Limits`).
    """
    server = make_server(directory, host, port, **options)
    host, port = server.server_address[:2]

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = signal.signal(signal.SIGTERM, stop)
    print(
        f"Serving {directory} as {server.model_name!r} on http://{host}:{port}/ "
        f"(TF Serving: /v1/models/{server.model_name}:predict; Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
    print("Stopped: every accepted request was answered.", flush=True)

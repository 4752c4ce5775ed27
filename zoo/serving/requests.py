"""What `zoo.serving.server` accepts: its bounds (`Limits`) and the reading of a request.

`Signatures` turns a decoded JSON body, in the zoo's own form
(`{"text": [...]}`, `parse`) or TF Serving's (`{"signature_name",
"instances" | "inputs"}`, `parse_tf_serving`), into the NumPy inputs of one
of the export's signatures, checked against every bound before the model
runs: rows, a translator's `beam_width` and `max_length`, each image's pixels
(read by `image_size` from the file's header, never decoded here). Anything
else is a `RequestError`: an HTTP status, a message naming the field and the
limit.
"""

import base64
import binascii
import collections
import dataclasses
import json
import re
import struct
from http import HTTPStatus

import numpy as np

#: Input names whose values travel as base64 text.
BYTES_SUFFIX = "_bytes"
#: JSON deeper than this is refused (no input of ours nests more than 5).
MAX_JSON_DEPTH = 32


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
        max_client_connections: int. Connections one client (IP address)
            may hold open, queued or read, and gRPC calls it may have under
            way; one more gets a 503 (gRPC: `RESOURCE_EXHAUSTED`), so that
            one client cannot fill the queue. Defaults to `64`.

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
    max_client_connections: int = 64

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
    """A GIF's size and frames, read from its screen and its frame descriptors.

    The height and width are the largest of the logical screen's and every
    frame's extent (its offset plus its size): a decoder given a screen
    smaller than a frame (0x0, say) allocates the frame's size.

    Example (a 0x0 screen holding one 12,000 x 12,000 frame):
    >>> frame = b"\\x2c" + struct.pack("<HHHHB", 0, 0, 12000, 12000, 0)
    >>> _gif_size(b"GIF89a" + struct.pack("<HHBBB", 0, 0, 0, 0, 0) + frame
    ...     + b"\\x02\\x00\\x3b")
    (12000, 12000, 1)
    """
    width, height, flags = struct.unpack("<HHB", data[6:11])
    position = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    frames = 0

    def skip_sub_blocks(position):
        while data[position] != 0:
            position += data[position] + 1
        return position + 1

    while position < len(data) and data[position] != 0x3B:
        if data[position] == 0x21:  # Extension.
            position = skip_sub_blocks(position + 2)
        elif data[position] == 0x2C:  # Image descriptor.
            frames += 1
            left, top, frame_width, frame_height, flags = struct.unpack(
                "<HHHHB", data[position + 1 : position + 10]
            )
            width = max(width, left + frame_width)
            height = max(height, top + frame_height)
            position += 10 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
            position = skip_sub_blocks(position + 1)
        else:
            break
    return height, width, max(frames, 1)


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

    from zoo.serving.export import Exported, write_metadata

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
        exported: a `zoo.serving.export.Exported` (its `signatures` and `metadata`;
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
    zoo.serving.requests.RequestError: The fields ['txt'] match no signature: send {text}.
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
        zoo.serving.requests.RequestError: The request holds no rows (an empty list).
        >>> signatures.parse({"text": ["\\ud800"]})
        Traceback (most recent call last):
        ...
        zoo.serving.requests.RequestError: `text[0]` is not valid Unicode text (a lone surrogate?).
        """
        if not isinstance(body, dict) or not body:
            raise RequestError("The body must be a JSON object of input fields.")
        return self.check(self.choose(body), body, base64_strings=True)

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
        zoo.serving.requests.RequestError: Serving signature name: "x" not found in signature def (the export has ['serving_default']).
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
            return self.check(name, value, base64_strings=False), "columnar"
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
        return self.check(name, value, base64_strings=False), "row"

    def check(self, name, fields, base64_strings):
        """`Parsed` inputs of signature `name`, checked against every bound.

        Args:
            name: str. The signature.
            fields: dict of JSON values, one per input of the signature.
            base64_strings: bool. Whether a plain string of an input named
                `*_bytes` is base64 (the zoo's own form) or text (TF
                Serving's, where binary is `{"b64": ...}`).

        Example:
        >>> signatures = Signatures(_demo_exported())
        >>> signatures.check("serving_default", {"text": ["a"] * 3}, True).rows
        3
        >>> signatures.check("serving_default", {"text": ["a"] * 1025}, True)
        Traceback (most recent call last):
        ...
        zoo.serving.requests.RequestError: `text` holds 1025 rows; the limit is 1024 a request (max_rows).
        """
        specs = self.inputs[name]
        if set(fields) != set(specs):
            wrong = sorted(set(fields) ^ set(specs))
            raise RequestError(
                f"Signature {name!r} takes {sorted(specs)}. Received: {sorted(fields)}",
                field=wrong[0],
            )
        inputs, rows, costs = {}, None, None
        for field, spec in sorted(specs.items()):
            self._check_bound(field, fields[field])
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
            inputs[field] = value
        if not rows:
            raise RequestError("The request holds no rows (an empty list).")
        return Parsed(name, inputs, rows, costs)

    def _check_bound(self, field, value):
        """A bounded scalar (`beam_width`, `max_length`) in `[1, bound]`, else a 400."""
        bound = self.bounds.get(field)
        if bound is None or isinstance(value, bool) or not isinstance(value, int):
            return
        if not 1 <= value <= bound:
            raise RequestError(
                f"`{field}` must be an int in [1, {bound}] (the limit of this "
                f"export and server). Received: {field}={value}",
                field=field,
            )

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
                if not size[0] * size[1]:
                    raise RequestError(
                        f"`{field}[{i}]` declares a size of {size[0]}x{size[1]}: "
                        "an image needs pixels.",
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
    if not isinstance(value, (list, np.ndarray)):  # An array: a gRPC tensor's.
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
    """One string input: text as UTF-8, `{"b64": ...}` or base64 as bytes.

    Text that is empty or only white space is refused, as the command line
    refuses it: there is nothing to translate.
    """
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
    if not value.strip():
        raise RequestError(
            f"`{field}[{index}]` is empty or only white space: nothing to read. "
            f"Received: {value!r:.60}",
            field=field,
        )
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


#: A JSON string, escapes included (brackets inside it do not nest).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: Every byte but those that open and close a JSON array or object.
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
#: Bytes `check_depth` scans at once.
_SCAN_BYTES = 2**20


def check_depth(value, limit=MAX_JSON_DEPTH):
    """Refuses JSON nested deeper than `limit` (before NumPy recurses in it).

    Args:
        value: a decoded JSON value, or the bytes of a valid JSON text
            (scanned in NumPy, without walking the decoded lists: a
            one-image request holds thousands of them).
        limit: int. Levels of arrays and objects allowed. Defaults to
            `MAX_JSON_DEPTH`.

    Example:
    >>> check_depth({"text": [["a"]]})
    >>> check_depth(b'{"text": [["a]]]]"]]}', limit=3)
    >>> check_depth([[[1]]], limit=2)
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: The JSON is nested deeper than 2 levels.
    >>> check_depth(b'[[[1]]]', limit=2)
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: The JSON is nested deeper than 2 levels.
    """
    if isinstance(value, bytes):
        brackets = _JSON_STRING.sub(b"", value).translate(None, _NOT_BRACKETS)
        codes, depth = np.frombuffer(brackets, np.uint8), 0
        for start in range(0, codes.size, _SCAN_BYTES):  # Bounded memory.
            chunk = codes[start : start + _SCAN_BYTES]
            steps = np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1)
            levels = depth + np.cumsum(steps)
            if levels.max() > limit:
                raise RequestError(f"The JSON is nested deeper than {limit} levels.")
            depth = int(levels[-1])
        return
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

"""A small HTTP JSON endpoint over an exported SavedModel (`zoo.export`).

`serve(directory, host, port)` answers, with the standard library's
`ThreadingHTTPServer`:

- `POST /v1/predict`: a JSON object whose fields are the inputs of one of
  the export's signatures, each a list over the batch: `{"image": [image,
  ...]}` (an image is rows of pixels, `H x W` or `H x W x C`, uint8 values;
  the images of one request share one size), `{"image_bytes": [base64,
  ...]}` (encoded PNG / JPEG files), `{"text": ["...", ...]}`; a scalar
  input (e.g. a translator's `beam_width`) is a number. The answer is
  `{"signature": name, "predictions": [{output: value, ...}, ...]}`, one
  entry per input row (strings as UTF-8 text, arrays as nested lists).
- `GET /v1/metadata`: the export's description and its signatures.
- `GET /`: a page to try the model in a browser, which draws the answer
  with its attention: a classifier's glimpse path over the image, a
  captioner's attention map over the image for each word.

The signature is the one whose inputs are exactly the request's fields
(`serve_bytes` for `image_bytes`, ...), so a server needs no configuration
for a classifier, a captioner or a translator. Requests that arrive within
`batch_delay` seconds of each other and go to the same signature with
inputs of the same shape are run as one batch (`Batcher`). A body larger
than `max_request_bytes` is refused with 413 before it is read; bad input
gets a 400 naming the field (`{"error": ..., "field": ...}`).

`python -m zoo serve DIR --port N` runs `serve`.
"""

import base64
import binascii
import json
import queue
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

#: Input names whose values travel as base64 text.
BYTES_SUFFIX = "_bytes"


class RequestError(Exception):
    """A request the server refuses: an HTTP status and the field at fault.

    Args:
        message: str. What is wrong, sent as the answer's `error`.
        field: optional str. The request field at fault, sent as `field`.
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


class Signatures:
    """The export's signatures: picks one for a request and checks its fields.

    Args:
        exported: a `zoo.export.Exported` (its `signatures` and `metadata`).

    Example:
    >>> import tempfile
    >>> import tensorflow as tf
    >>> module = tf.Module()
    >>> module.serve = tf.function(
    ...     lambda text: {"length": tf.strings.length(text)},
    ...     input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    >>> path = tempfile.mkdtemp()
    >>> tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    >>> class Exported:
    ...     metadata = {"kind": "demo"}
    ...     signatures = tf.saved_model.load(path).signatures
    >>> signatures = Signatures(Exported())
    >>> name, inputs, rows = signatures.parse({"text": ["ab", "c"]})
    >>> name, rows, signatures(name, inputs)["length"].tolist()
    ('serving_default', 2, [2, 1])
    >>> signatures.parse({"txt": ["ab"]})
    Traceback (most recent call last):
    ...
    zoo.serve.RequestError: The fields ['txt'] match no signature: send {text}.
    """

    def __init__(self, exported):
        self.exported = exported
        self.functions = dict(exported.signatures)
        self.inputs = {
            name: function.structured_input_signature[1]
            for name, function in self.functions.items()
        }

    def describe(self):
        """JSON-ready `{signature: {"inputs": {...}, "outputs": {...}}}`.

        Example:
        >>> import tempfile
        >>> import tensorflow as tf
        >>> from zoo.export import Exported, write_metadata
        >>> class Lengths(tf.Module):
        ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        ...     def serve(self, text):
        ...         return {"length": tf.strings.length(text)}
        >>> module = Lengths()
        >>> with tempfile.TemporaryDirectory() as path:
        ...     tf.saved_model.save(module, path, signatures=module.serve)
        ...     write_metadata(path, {"kind": "demo"})
        ...     signatures = Signatures(Exported(path))
        >>> signatures.describe()
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
        >>> import tempfile
        >>> import tensorflow as tf
        >>> from zoo.export import Exported, write_metadata
        >>> class Lengths(tf.Module):
        ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        ...     def serve(self, text):
        ...         return {"length": tf.strings.length(text)}
        >>> module = Lengths()
        >>> with tempfile.TemporaryDirectory() as path:
        ...     tf.saved_model.save(module, path, signatures=module.serve)
        ...     write_metadata(path, {"kind": "demo"})
        ...     signatures = Signatures(Exported(path))
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
        """`(signature, {input: array}, rows)` from a decoded JSON body.

        Example:
        >>> import tempfile
        >>> import tensorflow as tf
        >>> from zoo.export import Exported, write_metadata
        >>> class Lengths(tf.Module):
        ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        ...     def serve(self, text):
        ...         return {"length": tf.strings.length(text)}
        >>> module = Lengths()
        >>> with tempfile.TemporaryDirectory() as path:
        ...     tf.saved_model.save(module, path, signatures=module.serve)
        ...     write_metadata(path, {"kind": "demo"})
        ...     signatures = Signatures(Exported(path))
        >>> name, inputs, rows = signatures.parse({"text": ["ab", "c"]})
        >>> name, inputs["text"].tolist(), rows
        ('serving_default', [b'ab', b'c'], 2)
        >>> signatures.parse({"text": []})
        Traceback (most recent call last):
        ...
        zoo.serve.RequestError: The request holds no rows (an empty list).
        """
        if not isinstance(body, dict) or not body:
            raise RequestError("The body must be a JSON object of input fields.")
        name = self.choose(body)
        inputs, rows = {}, None
        for field, spec in sorted(self.inputs[name].items()):
            value = _array(field, body[field], spec)
            if spec.shape.rank:
                if rows is not None and len(value) != rows:
                    raise RequestError(
                        f"`{field}` holds {len(value)} rows, the other inputs {rows}.",
                        field=field,
                    )
                rows = len(value)
            inputs[field] = value
        if not rows:
            raise RequestError("The request holds no rows (an empty list).")
        return name, inputs, rows

    def __call__(self, name, inputs):
        """Runs a signature on NumPy inputs; returns NumPy outputs."""
        import tensorflow as tf

        function = self.functions[name]
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in function(**tensors).items()}


def _array(field, value, spec):
    """A JSON value as the NumPy array a signature input takes, or a 400."""
    dtype = spec.dtype
    if spec.shape.rank == 0:
        if dtype.is_integer and not isinstance(value, bool) and isinstance(value, int):
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
        if field.endswith(BYTES_SUFFIX):
            return np.array([_base64(field, i, v) for i, v in enumerate(value)], object)
        for i, text in enumerate(value):
            if not isinstance(text, str):
                raise RequestError(
                    f"`{field}[{i}]` must be a string. Received: {text!r:.60}",
                    field=field,
                )
        return np.array([t.encode("utf-8") for t in value], object)
    return _numbers(field, value, spec)


def _base64(field, index, value):
    if not isinstance(value, str):
        raise RequestError(
            f"`{field}[{index}]` must be base64 text. Received: {value!r:.60}",
            field=field,
        )
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(
            f"`{field}[{index}]` is not valid base64.", field=field
        ) from None


def _numbers(field, value, spec):
    """Nested lists as an array of the spec's rank (images get a channel axis)."""
    try:
        array = np.asarray(value)
    except ValueError:
        array = None
    if array is None or array.dtype == object:
        raise RequestError(
            f"The rows of `{field}` must be nested lists of one shape (send "
            "images of different sizes in separate requests, or as "
            "image_bytes).",
            field=field,
        )
    if array.size and array.dtype.kind not in "iuf":
        raise RequestError(
            f"`{field}` must hold numbers. Received: {array.dtype.name} values",
            field=field,
        )
    rank = spec.shape.rank
    if rank == 4 and array.ndim == 3:
        array = array[..., None]  # Gray images without a channel axis.
    if array.ndim != rank:
        raise RequestError(
            f"`{field}` must be a list of arrays of rank {rank - 1}. Received: "
            f"shape {list(array.shape)}",
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


class _Pending:
    """One request waiting in the `Batcher`."""

    def __init__(self, name, inputs, rows):
        self.name = name
        self.inputs = inputs
        self.rows = rows
        self.key = (name,) + tuple(
            (k, v.shape[1:], v.item() if v.ndim == 0 else None)
            for k, v in sorted(inputs.items())
        )
        self.done = threading.Event()
        self.outputs = None
        self.error = None


class Batcher:
    """Runs concurrent requests as batches on one thread.

    A request waits at most `delay` seconds for others to join it; those
    that go to the same signature with inputs of the same shape (and the
    same scalar inputs) are concatenated into one call of at most
    `max_rows` rows and the outputs split back. When a batch fails, its
    requests are run one by one, so a bad request fails alone.

    Args:
        run: callable `(signature, inputs) -> outputs` (NumPy dicts).
        delay: float. Seconds to wait for more requests. Defaults to
            `0.005`.
        max_rows: int. Rows per call. Defaults to `64`.

    Example:
    >>> batcher = Batcher(lambda name, x: {"double": 2 * x["x"]})
    >>> batcher.submit("f", {"x": np.arange(3)}, 3)["double"].tolist()
    [0, 2, 4]
    >>> batcher.close()
    """

    def __init__(self, run, delay=0.005, max_rows=64):
        self.run = run
        self.delay = delay
        self.max_rows = max_rows
        self.calls = 0
        self.requests = 0
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def submit(self, name, inputs, rows, timeout=300):
        """Queues one request and waits for its outputs (or raises its error).

        Args:
            name: str. The signature to run.
            inputs: dict of NumPy arrays (`Signatures.parse`'s).
            rows: int. The request's batch size.
            timeout: float. Seconds to wait, then a 503. Defaults to `300`.

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
        pending = _Pending(name, inputs, rows)
        self._queue.put(pending)
        if not pending.done.wait(timeout):
            raise RequestError(
                "The model did not answer in time.",
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
        while True:
            first = self._queue.get()
            if first is None:
                return
            waiting = [first]
            deadline = time.monotonic() + self.delay
            stop = False
            while sum(p.rows for p in waiting) < self.max_rows:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    pending = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if pending is None:
                    stop = True
                    break
                waiting.append(pending)
            groups = {}
            for pending in waiting:
                groups.setdefault(pending.key, []).append(pending)
            for group in groups.values():
                self._run_group(group)
            if stop:
                return

    def _run_group(self, group):
        self.requests += len(group)
        try:
            inputs = {
                k: v if v.ndim == 0 else np.concatenate([p.inputs[k] for p in group])
                for k, v in group[0].inputs.items()
            }
            self.calls += 1
            outputs = self.run(group[0].name, inputs)
        except Exception as error:  # noqa: BLE001 - reported to the requests
            if len(group) > 1:
                self.requests -= len(group)
                for pending in group:
                    self._run_group([pending])
                return
            group[0].error = _model_error(error)
            group[0].done.set()
            return
        start = 0
        for pending in group:
            end = start + pending.rows
            pending.outputs = {k: v[start:end] for k, v in outputs.items()}
            start = end
            pending.done.set()


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


def _json_value(value):
    """A NumPy output row as JSON: text for bytes, lists for arrays."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [_json_value(v) for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class ModelServer(ThreadingHTTPServer):
    """A `ThreadingHTTPServer` holding the export and its `Batcher`.

    Args:
        address: `(host, port)`; port `0` picks a free one
            (`server_address` tells which).
        signatures: a `Signatures`.
        max_request_bytes: int. Largest accepted body.
        batch_delay: float. Seconds a request waits for others.
        max_batch: int. Rows per model call.

    Example (`make_server(directory)` builds one for an export):
    >>> import tempfile
    >>> import tensorflow as tf
    >>> from zoo.export import Exported, write_metadata
    >>> class Lengths(tf.Module):
    ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    ...     def serve(self, text):
    ...         return {"length": tf.strings.length(text)}
    >>> module = Lengths()
    >>> with tempfile.TemporaryDirectory() as path:
    ...     tf.saved_model.save(module, path, signatures=module.serve)
    ...     write_metadata(path, {"kind": "demo"})
    ...     signatures = Signatures(Exported(path))
    >>> import json, threading, urllib.request
    >>> server = ModelServer(("127.0.0.1", 0), signatures, max_request_bytes=2**20,
    ...     batch_delay=0.005, max_batch=64)
    >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    >>> url = "http://127.0.0.1:%d" % server.server_address[1]
    >>> body = json.dumps({"text": ["ab", "c"]}).encode()
    >>> with urllib.request.urlopen(url + "/v1/predict", body) as answer:
    ...     json.load(answer)
    {'signature': 'serving_default', 'predictions': [{'length': 2}, {'length': 1}]}
    >>> server.shutdown()
    >>> server.server_close()  # and the batcher's thread
    """

    daemon_threads = True
    # Concurrent clients connect at once; the default backlog of 5 resets them.
    request_queue_size = 128

    def __init__(self, address, signatures, max_request_bytes, batch_delay, max_batch):
        self.signatures = signatures
        self.max_request_bytes = max_request_bytes
        self.batcher = Batcher(signatures, delay=batch_delay, max_rows=max_batch)
        super().__init__(address, Handler)

    def server_close(self):
        super().server_close()
        self.batcher.close()


class Handler(BaseHTTPRequestHandler):
    """`POST /v1/predict`, `GET /v1/metadata`, `GET /`.

    The request handler of a `ModelServer`; errors are answered as JSON,
    `{"error": ..., "field": ...}`, with their HTTP status.

    Example:
    >>> import tempfile
    >>> import tensorflow as tf
    >>> from zoo.export import Exported, write_metadata
    >>> class Lengths(tf.Module):
    ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    ...     def serve(self, text):
    ...         return {"length": tf.strings.length(text)}
    >>> module = Lengths()
    >>> with tempfile.TemporaryDirectory() as path:
    ...     tf.saved_model.save(module, path, signatures=module.serve)
    ...     write_metadata(path, {"kind": "demo"})
    ...     signatures = Signatures(Exported(path))
    >>> import json, threading, urllib.request
    >>> server = ModelServer(("127.0.0.1", 0), signatures, max_request_bytes=2**20,
    ...     batch_delay=0.005, max_batch=64)
    >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    >>> url = "http://127.0.0.1:%d" % server.server_address[1]
    >>> with urllib.request.urlopen(url + "/v1/metadata") as answer:
    ...     json.load(answer)["metadata"]
    {'kind': 'demo'}
    >>> bad = json.dumps({"txt": ["ab"]}).encode()
    >>> try:
    ...     urllib.request.urlopen(url + "/v1/predict", bad)
    ... except urllib.error.HTTPError as error:
    ...     print(error.code, json.load(error))
    400 {'error': "The fields ['txt'] match no signature: send {text}.", 'field': 'txt'}
    >>> server.shutdown()
    >>> server.server_close()  # and the batcher's thread
    """

    server_version = "zoo-serve/1"

    def log_message(self, format, *args):  # noqa: A002 - the base signature
        pass

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error):
        self._send(int(error.status), {"error": str(error), "field": error.field})

    def do_GET(self):
        if self.path == "/":
            kind = self.server.signatures.exported.metadata.get("kind", "model")
            page = PAGE.replace("{kind}", kind).encode("utf-8")
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
        elif self.path == "/v1/metadata":
            self._send(
                HTTPStatus.OK,
                {
                    "metadata": self.server.signatures.exported.metadata,
                    "signatures": self.server.signatures.describe(),
                },
            )
        else:
            self._error(
                RequestError(f"No page {self.path}.", status=HTTPStatus.NOT_FOUND)
            )

    def do_POST(self):
        try:
            if self.path != "/v1/predict":
                raise RequestError(
                    f"No endpoint {self.path}: POST to /v1/predict.",
                    status=HTTPStatus.NOT_FOUND,
                )
            name, inputs, rows = self.server.signatures.parse(self._body())
            outputs = self.server.batcher.submit(name, inputs, rows)
        except RequestError as error:
            self._error(error)
            return
        predictions = [
            {k: _json_value(v[i]) for k, v in sorted(outputs.items())}
            for i in range(rows)
        ]
        self._send(HTTPStatus.OK, {"signature": name, "predictions": predictions})

    def _body(self):
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestError(
                "The request needs a Content-Length.", status=HTTPStatus.LENGTH_REQUIRED
            )
        limit = self.server.max_request_bytes
        if int(length) > limit:
            # Not read: the connection closes after the answer.
            self.close_connection = True
            raise RequestError(
                f"The body holds {length} bytes; the limit is {limit}.",
                status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        try:
            return json.loads(self.rfile.read(int(length)))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RequestError(f"The body is not JSON: {error}") from None


def make_server(
    directory,
    host="127.0.0.1",
    port=8501,
    max_request_bytes=10 * 2**20,
    batch_delay=0.005,
    max_batch=64,
):
    """Loads an export and returns its (not yet serving) `ModelServer`.

    Call `serve_forever()` on it (e.g. in a thread), then `shutdown()` and
    `server_close()`.

    Args:
        directory: str. A SavedModel written by `zoo.export`.
        host: str. Defaults to `"127.0.0.1"`.
        port: int. `0` picks a free port. Defaults to `8501`.
        max_request_bytes: int. Largest body accepted (else 413). Defaults
            to 10 MiB.
        batch_delay: float. Seconds a request waits for others to batch
            with. Defaults to `0.005`.
        max_batch: int. Rows per model call. Defaults to `64`.
    """
    from zoo.export import load

    signatures = Signatures(load(directory))
    return ModelServer(
        (host, port), signatures, max_request_bytes, batch_delay, max_batch
    )


def serve(directory, host="127.0.0.1", port=8501, **options):
    """Serves an export over HTTP until interrupted (`python -m zoo serve`).

    Args:
        directory: str. A SavedModel written by `zoo.export`.
        host: str. Defaults to `"127.0.0.1"`.
        port: int. Defaults to `8501`.
        **options: `make_server` settings (`max_request_bytes`,
            `batch_delay`, `max_batch`).
    """
    server = make_server(directory, host, port, **options)
    host, port = server.server_address[:2]
    print(f"Serving {directory} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>zoo: {kind}</title>
<style>body{font-family:sans-serif;max-width:48em;margin:2em auto}
pre{background:#f4f4f4;padding:1em;white-space:pre-wrap}pre:empty{display:none}
canvas{image-rendering:pixelated;border:1px solid #ccc}
#figure figure{display:inline-block;margin:0 .5em .5em 0;text-align:center}
#label{font-size:1.4em;font-weight:bold}.note{font-size:.85em;color:#555}
#probabilities td{padding:0 .5em}.bar{background:#48c;height:.8em}</style></head>
<body><h1>zoo {kind}</h1>
<form id="form"><p id="fields"></p><button type="submit" id="run">Run</button></form>
<p id="status" data-state="idle"></p>
<p id="label"></p><p id="score"></p>
<div id="figure"></div>
<table id="probabilities"></table>
<p id="note" class="note"></p>
<pre id="result"></pre>
<script>
// Renders the answer of /v1/predict with its attention: the glimpse path of a
// classifier, a captioner's attention map per word, a translator's text.
const kind = "{kind}";
const $ = (id) => document.getElementById(id);
const metadata = fetch("/v1/metadata").then((r) => r.json())
  .then((m) => m.metadata).catch(() => ({}));
$("fields").innerHTML = kind === "translator"
  ? '<textarea id="text" rows="3" cols="60">In the beginning</textarea>'
  : '<input type="file" id="file" accept="image/*">';

// The image, or null when the browser cannot show it (the model may read it).
function loadImage(url) {
  return new Promise((ok) => {
    const image = new Image();
    image.onload = () => ok(image);
    image.onerror = () => ok(null);
    image.src = url;
  });
}

// A canvas holding `image` scaled to fit `longest` pixels (whole multiples
// when enlarging, so pixels stay square); `scale` is canvas / image pixels.
function imageCanvas(image, longest) {
  const side = Math.max(image.naturalWidth, image.naturalHeight);
  const scale = side >= longest ? longest / side : Math.floor(longest / side);
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(image.naturalWidth * scale);
  canvas.height = Math.round(image.naturalHeight * scale);
  const context = canvas.getContext("2d");
  context.imageSmoothingEnabled = false;
  context.drawImage(image, 0, 0, canvas.width, canvas.height);
  return canvas;
}

// Glimpse centres are (y, x) in [-1, 1]: (-1, -1) the top-left corner of the
// image, (1, 1) the bottom-right one (keras_attention.layers.glimpse).
// The export does not record the retina's size: a square of fixed size marks
// each centre.
function drawGlimpses(image, path) {
  const canvas = imageCanvas(image, 320);
  canvas.id = "glimpses";
  const context = canvas.getContext("2d");
  const points = path.map(([y, x]) =>
    [(x + 1) / 2 * canvas.width, (y + 1) / 2 * canvas.height]);
  context.lineWidth = 2;
  context.strokeStyle = "cyan";
  context.beginPath();
  points.forEach(([x, y], t) => (t ? context.lineTo(x, y) : context.moveTo(x, y)));
  context.stroke();
  context.font = "bold 13px sans-serif";
  points.forEach(([x, y], t) => {
    const colour = `hsl(${60 - 60 * t / Math.max(1, points.length - 1)}, 100%, 50%)`;
    context.lineWidth = 2;
    context.strokeStyle = context.fillStyle = colour;
    context.strokeRect(x - 7, y - 7, 14, 14);
    context.beginPath();
    context.arc(x, y, 4, 0, 2 * Math.PI);
    context.fill();
    context.lineWidth = 3;
    context.strokeStyle = "black";
    context.strokeText(String(t + 1), x + 6, y - 6);
    context.fillText(String(t + 1), x + 6, y - 6);
  });
  canvas.dataset.points = JSON.stringify(points);
  $("figure").append(canvas);
  $("note").textContent = "The glimpses in order: numbered centres joined by "
    + "the cyan line.";
}

function showProbabilities(probabilities, names) {
  const order = probabilities.map((p, i) => i)
    .sort((a, b) => probabilities[b] - probabilities[a]).slice(0, 5);
  for (const i of order) {
    const row = $("probabilities").insertRow();
    row.insertCell().textContent = names ? names[i] : String(i);
    row.insertCell().textContent = (100 * probabilities[i]).toFixed(1) + "%";
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = (10 * probabilities[i]).toFixed(2) + "em";
    row.insertCell().append(bar);
  }
}

// One canvas per generated word: the image with that word's attention grid
// upsampled (smoothly) over it, opacity in proportion to the weight.
function drawWords(image, tokens, length, attention) {
  for (let t = 0; t < length; t++) {
    const weights = attention[t];
    const rows = weights.length, columns = weights[0].length;
    const top = Math.max(...weights.flat()) || 1;
    const grid = document.createElement("canvas");
    grid.width = columns;
    grid.height = rows;
    const cells = grid.getContext("2d").createImageData(columns, rows);
    weights.flat().forEach((w, i) => {
      cells.data.set([255, 40, 0, Math.round(255 * Math.max(0, w) / top)], 4 * i);
    });
    grid.getContext("2d").putImageData(cells, 0, 0);
    const canvas = imageCanvas(image, 128);
    const context = canvas.getContext("2d");
    context.imageSmoothingEnabled = true;
    context.globalAlpha = 0.6;
    context.drawImage(grid, 0, 0, canvas.width, canvas.height);
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = tokens[t];
    figure.className = "word";
    figure.append(canvas, caption);
    $("figure").append(figure);
  }
  $("note").textContent = "Where the decoder looked for each word (red: "
    + "more attention).";
}

async function run() {
  let body, image;
  if (kind === "translator") {
    body = {text: [$("text").value]};
  } else {
    const file = $("file").files[0];
    if (!file) throw new Error("Choose an image file first.");
    const url = await new Promise((ok) => {
      const reader = new FileReader();
      reader.onload = () => ok(reader.result);
      reader.readAsDataURL(file);
    });
    image = await loadImage(url);
    body = {image_bytes: [url.split(",")[1]]};
  }
  const response = await fetch("/v1/predict", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  const shown = answer.predictions[0];
  const meta = await metadata;
  if (kind === "classifier") {
    $("label").textContent = shown.class_name;
    if (image) drawGlimpses(image, shown.glimpse_path);
    showProbabilities(shown.probabilities, meta.class_names);
  } else if (kind === "captioner") {
    $("label").textContent = shown.caption;
    $("score").textContent = "score " + shown.score.toFixed(3);
    if (image) drawWords(image, shown.tokens, shown.length, shown.attention);
  } else {
    $("label").textContent = shown.translation;
    $("score").textContent = "score " + shown.score.toFixed(3);
    $("note").textContent = "This export has no alignment: "
      + "`python -m zoo translate PRESET TEXT --plot out.png` draws the heatmap.";
  }
  for (const key of ["attention", "tokens"]) delete shown[key];
  // The answer as JSON, one field a line.
  const lines = Object.entries(shown).map(([k, v]) => `"${k}": ${JSON.stringify(v)}`);
  $("result").textContent = "{\n " + lines.join(",\n ") + "\n}";
}

$("form").onsubmit = async (event) => {
  event.preventDefault();
  for (const id of ["label", "score", "figure", "probabilities", "note", "result"]) {
    $(id).replaceChildren();
  }
  $("status").dataset.state = "running";
  $("status").textContent = "Running...";
  try {
    await run();
    $("status").dataset.state = "done";
    $("status").textContent = "";
  } catch (error) {
    $("status").dataset.state = "error";
    $("status").textContent = error.message;
  }
};
</script></body></html>
"""

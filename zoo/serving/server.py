"""An HTTP server over an exported SavedModel (`zoo.serving.export`), bounded for a network.

`serve(directory)` (`python -m zoo serve DIR`) answers three protocols on one
port, with the standard library's `http.server`:

- TensorFlow Serving's REST API (`zoo.serving.tf_serving`), so that a client
  written for `tensorflow_model_server` works unchanged: `POST
  /v1/models/NAME[/versions/N]:predict` with `{"signature_name": ...,
  "instances": [...]}` (row format; the answer is `{"predictions": [...]}`)
  or `{"inputs": ...}` (columnar; `{"outputs": ...}`), binary strings as
  `{"b64": "..."}`; `GET /v1/models/NAME` (the model's status) and `GET
  /v1/models/NAME/metadata` (its signatures). Errors are `{"error": ...}`.
- KServe's Open Inference Protocol v2 (`zoo.serving.v2_protocol`): `GET /v2`,
  `GET /v2/health/ready`, `GET /v2/models/NAME`, `POST
  /v2/models/NAME/infer` (with its `id` and requested `outputs`), in JSON
  or with binary tensors (`zoo.serving.v2_binary`).
- The zoo's own, older paths: `POST /v1/predict` takes the inputs of the
  signature that matches its fields (`{"text": [...]}`, `{"image": [...]}`,
  `{"image_bytes": [base64, ...]}`, a scalar such as `beam_width` as a
  number) and answers `{"signature", "predictions": [{output: value}, ...]}`;
  `GET /v1/metadata` gives the export's description; `GET /` a page to try
  the model in a browser (`page.html`, beside this module); `GET /metrics`
  Prometheus' metrics (`zoo.serving.metrics`).

Every request is bounded (`zoo.serving.requests.Limits`, each a `python -m zoo
serve` flag, checked by `zoo.serving.requests.Signatures`): the
body's size, the time a client has to send it, its rows, the pixels of each
image (read from the PNG / JPEG / GIF / BMP header before anything decodes
it), a translator's `beam_width` and `max_length` (the smaller of the
export's own limits and the server's), the time a request may wait for its
answer; a fixed pool of worker threads handles connections, and one more
than its queue holds, or than one client may hold open, gets a 503; a request
head that could be read two ways is refused (`zoo.serving.connections`);
each connection carries one request (`Connection: close`). Requests are run by one
`zoo.serving.batcher.Batcher` thread in
model calls of at most `max_batch` rows, taken in turn from every waiting
request, so that a one-sentence request is not stuck behind a
1,000-sentence one. Bad input gets a 4xx with a JSON error naming the field;
a POST must say `Content-Type: application/json` (or come, without an
`Origin`, from a client such as `curl -d`) and a request's `Host` must
be a loopback name or one allowed with `allow_hosts` (what stops a web page
from posting to a server on the reader's laptop). `serve` also answers gRPC
on a second port (`zoo.serving.grpc_server`). SIGTERM (`serve`) stops
accepting, answers the requests already accepted, and returns.
"""

import json
import os
import queue
import re
import signal
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer

from zoo.serving import tf_serving, v2_binary
from zoo.serving import v2_protocol as serving_v2
from zoo.serving.batcher import Batcher
from zoo.serving.connections import ClientSlots, check_head, read_seconds
from zoo.serving.metrics import CONTENT_TYPE as METRICS_TYPE
from zoo.serving.metrics import ServerMetrics
from zoo.serving.requests import (  # noqa: F401 - Parsed, _demo_exported: examples
    Limits,
    Parsed,
    RequestError,
    Signatures,
    _demo_exported,
    check_depth,
)
from zoo.version import __version__

#: What `curl -d` sends without `-H 'Content-Type: ...'`.
CURL_DEFAULT_TYPE = "application/x-www-form-urlencoded"
#: Host names every server answers to.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: The demo page, beside this module.
PAGE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page.html")


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
    >>> post("/v1/predict", {"text": ["ab", " "]})[1]["error"]
    "`text[1]` is empty or only white space: nothing to read. Received: ' '"
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
        self._connections = queue.Queue(self.limits.max_queued)
        self.metrics = ServerMetrics(self.model_name, self._connections.qsize)
        self.batcher = Batcher(
            self.metrics.counting(signatures),
            delay=self.limits.batch_delay,
            max_rows=self.limits.max_batch,
            max_cost=self.limits.max_request_pixels,
            timeout=self.limits.request_timeout,
        )
        self._clients = ClientSlots(self.limits.max_client_connections)
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

        Example (one worker, one place in the queue: of three idle
        connections the first waits in the queue or is read by the worker;
        the third, or both others where the worker had not yet taken the
        first, are turned away at once):
        >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported(),
        ...     Limits(workers=1, max_queued=1, read_timeout=30.0)))
        >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        >>> idle = [
        ...     socket.create_connection(server.server_address, timeout=3)
        ...     for _ in range(3)
        ... ]
        >>> def first_line(connection):
        ...     try:
        ...         return connection.recv(1000).split(b"\\r\\n")[0]
        ...     except TimeoutError:
        ...         return None  # held by the worker or waiting in the queue
        >>> busy = [first_line(c) == b"HTTP/1.0 503 Service Unavailable" for c in idle]
        >>> busy[0], 1 <= sum(busy) <= 2
        (False, True)
        >>> for connection in idle:
        ...     connection.close()
        >>> server.shutdown()
        >>> server.server_close()
        """
        client = client_address[0]
        if not self._clients.take(client):
            self.metrics.refused("max_client_connections")
            self._turn_away(
                request,
                f"This client holds {self.limits.max_client_connections} open "
                "connections (max_client_connections): close one, or retry later.",
            )
            return
        try:
            self._connections.put_nowait((request, client_address))
        except queue.Full:
            self._clients.give_back(client)
            self.metrics.refused("max_queued")
            self._turn_away(
                request,
                f"The server is busy ({self.limits.workers} workers, "
                f"{self.limits.max_queued} waiting): retry later.",
            )

    def run(self, parsed, timeout=None):
        """A `Parsed` request's outputs, from the batcher (HTTP's and gRPC's).

        `timeout` (seconds) defaults to `limits.request_timeout`.

        Example:
        >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
        >>> server.run(server.signatures.parse({"text": ["ab", "c"]}))
        {'length': array([2, 1], dtype=int32)}
        >>> server.server_close()
        """
        waiting = self.metrics.waiting
        waiting.inc()
        try:
            return self.batcher.submit(
                parsed.signature, parsed.inputs, parsed.rows, parsed.costs, timeout
            )
        finally:
            waiting.dec()

    def _turn_away(self, request, message):
        """Answers a 503 on an accepted connection before reading it, and closes it."""
        try:
            request.settimeout(1.0)
            request.sendall(_busy_answer(message))
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
            # connection if the whole request takes longer (or, for a client
            # already sending more than its share, longer than a second).
            request.settimeout(self.limits.read_timeout)
            client = client_address[0]
            with self._lock:
                reading = sum(c == client for _, c in self._receiving.values())
                seconds = read_seconds(
                    self.limits.read_timeout, self.limits.workers, reading
                )
                self._receiving[request] = (time.monotonic() + seconds, client)
            try:
                self.finish_request(request, client_address)
            except Exception as error:  # noqa: BLE001 - one connection's failure
                print(f"zoo serve: connection failed: {error!r}", file=sys.stderr)
            finally:
                self._received(request)
                self.shutdown_request(request)
                self._clients.give_back(client_address[0])

    def _received(self, connection):
        """`connection`'s request has arrived: the watchdog leaves it."""
        with self._lock:
            self._receiving.pop(connection, None)

    def _watch(self):
        while not self._closed.wait(0.2):
            now = time.monotonic()
            with self._lock:
                late = [c for c, (end, _) in self._receiving.items() if end < now]
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

#: `/v2/models/NAME[/versions/V][/ready|/infer]`.
_V2_PATH = re.compile(
    r"/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?(?P<verb>/ready|/infer)?"
)


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
        data = (
            body
            if isinstance(body, bytes)
            else json.dumps(body, ensure_ascii=False).encode("utf-8")
        )
        try:
            self.send_response(int(status))
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            if int(status) == HTTPStatus.SERVICE_UNAVAILABLE:
                self.send_header("Retry-After", "1")
            if getattr(self, "_json_length", None) is not None:
                self.send_header(v2_binary.HEADER, str(self._json_length))
            if self.close_connection:  # Requests sent after this one go unread.
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:  # The client left.
            self.close_connection = True

    def do_GET(self):
        self._answer(self._get)

    def do_HEAD(self):
        """A GET's status and headers, without its body.

        Example:
        >>> import urllib.request
        >>> server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
        >>> threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        >>> url = "http://127.0.0.1:%d/v1/metadata" % server.server_address[1]
        >>> with urllib.request.urlopen(urllib.request.Request(url, method="HEAD")) as answer:
        ...     answer.status, int(answer.headers["Content-Length"]) > 0, answer.read()
        (200, True, b'')
        >>> server.shutdown()
        >>> server.server_close()
        """
        self._answer(self._get)

    def do_POST(self):
        self._answer(self._post)

    def _answer(self, route):
        started, tf_serving, protocol, error_text = time.monotonic(), False, "zoo", None
        try:
            path = check_head(
                self.headers, self.path, self.server.allowed_hosts, self.request_version
            )
            match = _TF_SERVING_PATH.fullmatch(path)
            # TF Serving's and KServe's errors are `{"error"}` alone.
            v2 = path == "/v2" or path.startswith("/v2/")
            tf_serving = match is not None or v2
            protocol = "kserve_v2" if v2 else "tf_serving" if tf_serving else "zoo"
            protocol = "metrics" if path == "/metrics" else protocol
            if v2:
                route = self._v2
            status, body, content_type = HTTPStatus.OK, *route(path, match)
        except RequestError as error:
            self.close_connection = True
            error_text = str(error)
            status, body, content_type = error.status, {"error": error_text}, None
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
        elapsed = time.monotonic() - started
        self.server.metrics.answered(protocol, status, elapsed, error_text)

    def _get(self, path, match):
        signatures = self.server.signatures
        metadata = signatures.exported.metadata
        if match is not None:
            self._check_model(match, "metadata" if match["metadata"] else "status")
            if match["metadata"]:
                return (
                    tf_serving.metadata(
                        self.server.signatures,
                        self.server.model_name,
                        self.server.version,
                    ),
                    None,
                )
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
        if path == "/metrics":
            return self.server.metrics.text(), METRICS_TYPE
        if path == "/v1/metadata":
            return {"metadata": metadata, "signatures": signatures.describe()}, None
        raise RequestError(f"No page {path[:200]}.", status=HTTPStatus.NOT_FOUND)

    def _post(self, path, match):
        signatures = self.server.signatures
        if match is not None:
            self._check_model(match, "predict")
            parsed, form = signatures.parse_tf_serving(self._json())
            outputs = self._run(parsed)
            return tf_serving.answer(outputs, parsed.rows, form), None
        if path != "/v1/predict":
            raise RequestError(
                f"No endpoint {path[:200]}: POST to /v1/models/"
                f"{self.server.model_name}:predict or /v1/predict.",
                status=HTTPStatus.NOT_FOUND,
            )
        parsed = signatures.parse(self._json())
        outputs = self._run(parsed)
        predictions = [
            {k: tf_serving.json_value(v[i], k) for k, v in sorted(outputs.items())}
            for i in range(parsed.rows)
        ]
        return {"signature": parsed.signature, "predictions": predictions}, None

    def _v2(self, path, match):
        """KServe's Open Inference Protocol (`zoo.serving.v2_protocol`)."""
        server = self.server
        command = "GET" if self.command == "HEAD" else self.command
        if command == "GET" and path in ("/v2/health/live", "/v2/health/ready"):
            return {path.rsplit("/", 1)[1]: True}, None
        if command == "GET" and path == "/v2":
            return serving_v2.server_metadata(__version__), None
        found = _V2_PATH.fullmatch(path)
        if found is None:
            raise RequestError(f"No page {path[:200]}.", status=HTTPStatus.NOT_FOUND)
        name, version, verb = found["name"], found["version"], found["verb"]
        if name != server.model_name or version not in (None, server.version):
            raise RequestError(
                f"No model {name!r} (version {version}): this server has "
                f"{server.model_name!r} version {server.version}.",
                status=HTTPStatus.NOT_FOUND,
            )
        wanted = {"GET": (None, "/ready"), "POST": ("/infer",)}[command]
        if verb not in wanted:
            raise RequestError(
                f"No {command} {path[:200]}: GET the model or /ready, POST /infer.",
                status=HTTPStatus.NOT_FOUND,
            )
        if verb == "/ready":
            return {"name": name, "ready": True}, None
        if verb is None:
            return serving_v2.metadata(server.signatures, name, server.version), None
        body, binary = self._v2_body()
        v2_binary.inline(body, binary, server.limits.max_request_bytes)
        parsed = serving_v2.parse(server.signatures, body)
        function = server.signatures.functions[parsed.signature]
        request_id, wanted = serving_v2.request_options(
            body, function.structured_outputs
        )
        outputs = self._run(parsed)
        outputs = {key: outputs[key] for key in wanted}
        response = serving_v2.answer(outputs, name, server.version, request_id)
        as_bytes = v2_binary.binary_outputs(body, wanted)
        if not as_bytes:
            return response, None
        data, self._json_length = v2_binary.encode(response, outputs, as_bytes)
        return data, "application/octet-stream"

    def _run(self, parsed):
        return self.server.run(parsed)

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

    def _json(self):
        """The body, checked (type, length, arrival time, depth) and decoded."""
        body, binary = self._v2_body()
        if binary:
            raise RequestError(
                f"Binary tensor data ({v2_binary.HEADER}) is KServe v2's: POST it to "
                f"/v2/models/{self.server.model_name}/infer."
            )
        return body

    def _v2_body(self):
        """`(request, binary)`: the JSON and the bytes after it (`v2_binary`)."""
        kind = self.headers.get("Content-Type", "")
        media = kind.split(";")[0].strip().lower()
        header_length = self.headers.get(v2_binary.HEADER)
        # curl's `-d` without a type (as in TF Serving's own examples) is
        # taken from a client that is not a browser: no Origin header.
        curl = media in ("", CURL_DEFAULT_TYPE) and "Origin" not in self.headers
        # A browser sends octet-stream only after a CORS preflight.
        binary = media == "application/octet-stream" and header_length is not None
        if media != "application/json" and not (curl or binary):
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
        body, binary = v2_binary.split(self._read(int(length)), header_length)
        check_depth(body)
        return body, binary

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
        directory: str. A SavedModel written by `zoo.serving.export`, or a folder of
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
    from zoo.serving.export import load

    folder, version = saved_model_folder(directory)
    limits = Limits(**limits)
    signatures = Signatures(load(folder), limits)
    return ModelServer(
        (host, port), signatures, limits, allow_hosts, model_name, version
    )


def serve(directory, host="127.0.0.1", port=8501, grpc_port=None, **options):
    """Serves an export over HTTP and gRPC until Ctrl-C or SIGTERM (`zoo serve`).

    Either signal stops accepting connections and calls; the requests
    already accepted are answered before this returns.

    Args:
        directory: str. A SavedModel written by `zoo.serving.export` (or a folder
            of numbered versions of one).
        host: str. Defaults to `"127.0.0.1"`.
        port: int. Defaults to `8501`.
        grpc_port: int. The gRPC port (`zoo.serving.grpc_server`); `0` for
            none. Defaults to `None`: 8500 if it is free.
        **options: `make_server` settings (`allow_hosts`, `model_name` and
            the `Limits`).
    """
    from zoo.serving import grpc_server

    server = make_server(directory, host, port, **options)
    try:
        rpc = grpc_server.start(server, host, grpc_port)
    except BaseException:  # A bad or busy port: the HTTP server's threads stop.
        server.server_close()
        raise
    host, port = server.server_address[:2]

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = signal.signal(signal.SIGTERM, stop)
    print(
        f"Serving {directory} as {server.model_name!r} on http://{host}:{port}/ "
        f"(TF Serving: /v1/models/{server.model_name}:predict; "
        + (f"gRPC: {host}:{rpc.port}; " if rpc else "")
        + "Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if rpc is not None:  # Calls under way end, then the batcher stops.
            rpc.stop(server.limits.request_timeout).wait()
        server.server_close()
    print("Stopped: every accepted request was answered.", flush=True)

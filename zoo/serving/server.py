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

This module holds the process: the connection pool and its workers
(`ModelServer`), loading an export (`make_server`) and `serve`'s life;
`zoo.serving.handler.Handler` reads and answers each request.
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
from http.server import HTTPServer

from zoo.serving.batcher import Batcher
from zoo.serving.connections import ClientSlots, read_seconds
from zoo.serving.handler import Handler
from zoo.serving.metrics import ServerMetrics
from zoo.serving.requests import (  # noqa: F401 - RequestError, Parsed: importable here
    Limits,
    Parsed,
    RequestError,
    Signatures,
    _demo_exported,
)

#: Host names every server answers to.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")

#: Seconds a turned-away connection stays open after its 503, for the client
#: to finish sending and read the answer.
LINGER_SECONDS = 1.0

#: Turned-away connections held open at once; past it, one closes at once.
MAX_LINGERING = 256


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
        self._lingering = {}
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
        """Answers a 503 on an accepted connection before reading it.

        The answer is followed by a half-close; the watchdog drains and
        closes the connection `LINGER_SECONDS` later. Closing at once would
        reset a client still sending its request (a broken pipe where it
        should read the 503). Past `MAX_LINGERING` such connections, one
        closes at once.
        """
        try:
            request.settimeout(1.0)
            request.sendall(_busy_answer(message))
            request.shutdown(socket.SHUT_WR)
        except OSError:
            self.shutdown_request(request)
            return
        with self._lock:
            if len(self._lingering) < MAX_LINGERING:
                self._lingering[request] = time.monotonic() + LINGER_SECONDS
                return
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
                done = [c for c, end in self._lingering.items() if end < now]
                for connection in done:
                    del self._lingering[connection]
            for connection in late:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            for connection in done:
                self._close_turned_away(connection)
        with self._lock:
            done, self._lingering = list(self._lingering), {}
        for connection in done:
            self._close_turned_away(connection)

    @staticmethod
    def _close_turned_away(connection):
        """Reads what the client sent (at most 64 KiB, without waiting) and closes.

        Unread bytes at the close would make the kernel answer a reset.
        """
        try:
            connection.setblocking(False)
            for _ in range(16):
                if not connection.recv(4096):
                    break
        except OSError:
            pass
        connection.close()

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

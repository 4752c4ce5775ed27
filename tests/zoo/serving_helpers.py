"""What the server tests share: a server in a thread, JSON over HTTP.

A served address is `(host, port)` (a longer tuple whose first two items
are those is taken too). `call` sends one request and returns the status
and the decoded JSON answer, whatever the status, since every answer of
`zoo serve`, errors included, is JSON.
"""

import contextlib
import http.client
import json
import socket
import threading
import time

import tensorflow as tf

TIMEOUT = 60


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving(server, poll_interval=0.05):
    """Serves `server` (`zoo.serving.server.make_server`) in a thread: `(host, port)`.

    On leaving the block the server is shut down and closed, and its thread
    must have ended.
    """
    thread = threading.Thread(
        target=server.serve_forever, args=(poll_interval,), daemon=True
    )
    thread.start()
    try:
        yield server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
        assert not thread.is_alive()


def base_url(address):
    """`http://host:port` of a served address."""
    host, port = address[:2]
    return f"http://{host}:{port}"


def call(address, method, path, body=None, headers=None):
    """`(status, decoded JSON answer)` of one request.

    Args:
        address: `(host, port, ...)`.
        method: str. `"GET"`, `"POST"`, ...
        path: str. E.g. `"/v1/models/tiny:predict"`.
        body: `None` (no body), bytes (sent as they are) or a JSON value.
        headers: optional dict; a body goes as `application/json` unless
            these say otherwise.
    """
    host, port = address[:2]
    sent = {} if body is None else {"Content-Type": "application/json"}
    sent.update(headers or {})
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def post(address, body, headers=None, path="/v1/predict"):
    """`call(address, "POST", path, body, headers)`: the zoo's own predict."""
    return call(address, "POST", path, body, headers)


def post_once_free(address, body, deadline=TIMEOUT):
    """`post(address, body)`, repeated while the server answers 503 (busy).

    After a test closes connections that held every worker, the workers
    give their places back only once they read the end of those connections:
    until then a new request is turned away with a 503. Any other answer,
    or `deadline` seconds, ends the wait.
    """
    ends = time.monotonic() + deadline
    while True:
        status, answer = post(address, body)
        if status != 503 or time.monotonic() > ends:
            return status, answer
        time.sleep(0.05)


def direct(signatures, name, **inputs):
    """A SavedModel signature's outputs as NumPy, called without a server."""
    outputs = signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}

"""The HTTP routes of `zoo.serving.server.ModelServer`: one request, read and answered.

`Handler` reads a request on a connection that a worker of the
`ModelServer` took: it checks the head (`zoo.serving.connections`), reads
a body of at most `max_request_bytes` within `read_timeout`, and answers
TF Serving's REST API (`zoo.serving.tf_serving`), KServe v2's
(`zoo.serving.v2_protocol`, JSON or binary tensors), the zoo's own paths,
the page and `/metrics`, running predictions on the server's batcher.
Every answer is JSON (but the page and binary tensors); a failure is a 4xx
or 5xx naming what was wrong, never a closed connection.
"""

import json
import os
import re
import sys
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from zoo.serving import tf_serving, v2_binary
from zoo.serving import v2_protocol as serving_v2
from zoo.serving.connections import check_head
from zoo.serving.metrics import CONTENT_TYPE as METRICS_TYPE
from zoo.serving.requests import RequestError
from zoo.version import __version__

#: What `curl -d` sends without `-H 'Content-Type: ...'`.
CURL_DEFAULT_TYPE = "application/x-www-form-urlencoded"
#: The demo page, beside this module.
PAGE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page.html")


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
    >>> import threading, urllib.request
    >>> from zoo.serving.requests import Signatures, _demo_exported
    >>> from zoo.serving.server import ModelServer
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
    # The head and the body are two writes: without TCP_NODELAY the body
    # can wait for the client's delayed ACK of the head.
    disable_nagle_algorithm = True
    sys_version = ""  # The Server header does not tell the Python version.

    def log_message(self, format, *args):  # noqa: A002 - the base signature
        pass

    def send_error(self, code, message=None, explain=None):
        """`http.server`'s own errors (bad request line, ...), as JSON.

        Example:
        >>> import socket, threading
        >>> from zoo.serving.requests import Signatures, _demo_exported
        >>> from zoo.serving.server import ModelServer
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
        >>> import threading, urllib.request
        >>> from zoo.serving.requests import Signatures, _demo_exported
        >>> from zoo.serving.server import ModelServer
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
        return v2_binary.split(self._read(int(length)), header_length)

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

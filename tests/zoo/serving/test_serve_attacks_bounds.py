"""`zoo.serving.server` under the attacks of issue #55 (item 5): bounded before anything is built.

Each attack was found from outside and broke the server before: a KServe v2
shape holding a zero (millions of empty lists built from a 94-byte body) or
too large for a 64-bit product (a 500), a GIF whose 0x0 screen hid its
frames' size, ambiguous request heads (answered 200), `HEAD` (501),
pipelined requests dropped silently and one client's idle sockets filling
every other client's queue. Most are served from a one-signature export
(`text -> length`) in this process; the GIF from a tiny RAM classifier.
"""

import base64
import json
import os
import socket
import struct
import sys
import time
import tracemalloc

import pytest

from zoo.serving.requests import Limits, Signatures, _demo_exported, image_size
from zoo.serving.server import ModelServer

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_helpers import TIMEOUT, call, post, post_once_free, serving  # noqa: E402
from test_serve_attacks import classifier, raw  # noqa: E402, F401 - a fixture

NAME = "lengths"


@pytest.fixture(scope="module")
def exported():
    return _demo_exported()


@pytest.fixture(scope="module")
def lengths(exported):
    """`(host, port)` of the demo export, served with small limits."""
    limits = Limits(read_timeout=1.0, workers=2, max_queued=4)
    server = ModelServer(("127.0.0.1", 0), Signatures(exported, limits), limits)
    server.model_name = NAME
    with serving(server) as address:
        yield address


def infer(address, shape, data):
    body = {"inputs": [{"name": "text", "shape": shape, "datatype": "BYTES"}]}
    body["inputs"][0]["data"] = data
    return call(address, "POST", f"/v2/models/{NAME}/infer", body)


def test_a_v2_shape_holding_a_zero_builds_nothing(lengths):
    tracemalloc.start()
    try:
        started = time.monotonic()
        status, answer = infer(lengths, [1, 2**20, 0, 1], [])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 400 and "holds no values" in answer["error"], answer
    # 2**20 empty lists would take 56 MiB; the refusal takes what a request does.
    assert peak < 8 * 2**20, peak
    assert time.monotonic() - started < 5
    assert infer(lengths, [2], ["ab", "c"])[1]["outputs"][0]["data"] == [2, 1]


@pytest.mark.parametrize("shape", [[2**62, 4], [2**32, 2**32], [3, 2**62, 2**62]])
def test_a_v2_shape_past_64_bits_is_a_400(lengths, shape):
    status, answer = infer(lengths, shape, ["a"])
    assert status == 400, answer
    assert "max_request_bytes" in answer["error"] and str(shape) in answer["error"]


def _gif(screen, frames):
    """A GIF of a `screen` (width, height) holding `frames` of those sizes."""
    data = b"GIF89a" + struct.pack("<HHBBB", *screen, 0, 0, 0)
    for width, height in frames:
        data += b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
        data += b"\x02\x02\x4c\x01\x00"  # LZW minimum size, one sub-block.
    return data + b"\x3b"


def test_a_gif_counts_its_frames_beyond_its_screen(classifier):  # noqa: F811
    server = classifier[2]
    calls = server.batcher.calls
    hidden = _gif((0, 0), [(12000, 12000)])
    assert image_size(hidden) == (12000, 12000, 1)
    assert image_size(_gif((10, 10), [(30, 20), (5, 5)])) == (20, 30, 2)
    status, answer = post(
        classifier, {"image_bytes": [base64.b64encode(hidden).decode()]}
    )
    assert status == 400 and "144000000" in answer["error"], answer
    assert "max_image_pixels" in answer["error"]
    empty = base64.b64encode(_gif((0, 0), [])).decode()
    status, answer = post(classifier, {"image_bytes": [empty]})
    assert status == 400 and "0x0" in answer["error"], answer
    assert server.batcher.calls == calls  # The model never ran.


def _request(target="/v1/predict", headers=()):
    body = b'{"text": ["ab"]}'
    head = [f"POST {target} HTTP/1.1", "Content-Type: application/json"]
    head += list(headers) or ["Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


def _status(answer):
    return int(answer.split(b"\r\n")[0].split()[1])


@pytest.mark.parametrize(
    "target, headers, status",
    [
        ("/v1/predict", ["Host: 127.0.0.1", "Content-Length: 16"], 200),
        (
            "/v1/predict",
            ["Host: 127.0.0.1", "Content-Length: 2", "Content-Length: 16"],
            400,
        ),
        ("/v1/predict", ["Host: 127.0.0.1", "Content-Length: 16, 2"], 400),
        (
            "/v1/predict",
            ["Host: 127.0.0.1", "Host: evil.example", "Content-Length: 16"],
            400,
        ),
        (
            "http://evil.example/v1/predict",
            ["Host: 127.0.0.1", "Content-Length: 16"],
            403,
        ),
        ("http://127.0.0.1/v1/predict", ["Host: 127.0.0.1", "Content-Length: 16"], 200),
        ("/v1/predict", ["Content-Length: 16"], 400),  # HTTP/1.1 without Host
    ],
)
def test_an_ambiguous_request_head_is_refused(lengths, target, headers, status):
    answer = raw(lengths, _request(target, headers))
    assert _status(answer) == status, answer[:300]
    assert b"\r\nConnection: close\r\n" in answer


@pytest.mark.parametrize("path", ["/v1/models/lengths", "/v2/health/ready", "/"])
def test_head_answers_a_gets_headers(lengths, path):
    answer = raw(lengths, f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert _status(head) == 200 and body == b"", answer[:300]
    assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) > 0


def test_pipelined_requests_are_answered_or_closed_with_connection_close(lengths):
    answer = raw(lengths, _request() * 3)
    first, _, rest = answer.partition(b"\r\n\r\n")
    assert _status(first) == 200 and b"\r\nConnection: close" in first, answer[:300]
    assert json.loads(rest) == {
        "signature": "serving_default",
        "predictions": [{"length": 2}],
    }


def test_one_client_cannot_fill_the_queue(exported):
    limits = Limits(read_timeout=2.0, workers=1, max_queued=2, max_client_connections=2)
    server = ModelServer(("127.0.0.1", 0), Signatures(exported, limits), limits)
    with serving(server) as address:
        idle = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(2)]
        try:
            with socket.create_connection(address, timeout=TIMEOUT) as third:
                answer = third.recv(65536)
            assert _status(answer) == 503 and b"max_client_connections" in answer
            # Another address on the loopback is queued, then answered.
            other = socket.create_connection(
                address, timeout=TIMEOUT, source_address=("127.0.0.2", 0)
            )
            with other:
                other.sendall(_request())
                answer = b"".join(iter(lambda: other.recv(65536), b""))
            assert _status(answer) == 200, answer[:300]
        finally:
            for connection in idle:
                connection.close()
        # The closed connections give their places back.
        assert post_once_free(address, {"text": ["ab"]})[0] == 200


def test_a_turned_away_client_sends_its_request_and_reads_the_503(exported):
    # The 503 is written before the request is read. Closing at once reset
    # a client still sending (a broken pipe, not the 503): the connection
    # stays half-open for a second, and what was sent is drained.
    limits = Limits(
        read_timeout=30.0, workers=1, max_queued=1, max_client_connections=1
    )
    server = ModelServer(("127.0.0.1", 0), Signatures(exported, limits), limits)
    with serving(server) as address:
        with socket.create_connection(address, timeout=TIMEOUT):  # The one slot.
            for _ in range(20):
                status, answer = post(address, {"text": ["ab"] * 2000})
                assert status == 503, answer
                assert "max_client_connections" in answer["error"]
        assert post_once_free(address, {"text": ["ab"]})[0] == 200


def test_one_clients_idle_sockets_hold_a_share_of_the_workers_for_a_second(exported):
    # Eight workers: a client's first two idle sockets are read for the whole
    # read_timeout (30 s), its others are closed after a second each, so
    # another client's request is answered within seconds, not 30.
    limits = Limits(read_timeout=30.0, workers=8, max_queued=32)
    server = ModelServer(("127.0.0.1", 0), Signatures(exported, limits), limits)
    with serving(server) as address:
        idle = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(24)]
        try:
            time.sleep(0.5)  # The workers take the idle sockets first.
            started = time.monotonic()
            other = socket.create_connection(
                address, timeout=TIMEOUT, source_address=("127.0.0.2", 0)
            )
            with other:
                other.sendall(_request())
                answer = b"".join(iter(lambda: other.recv(65536), b""))
            waited = time.monotonic() - started
            assert _status(answer) == 200, answer[:300]
            assert waited < 15, waited
            closed = sum(connection.recv(1) == b"" for connection in idle[2:6])
            assert closed == 4
        finally:
            for connection in idle:
                connection.close()

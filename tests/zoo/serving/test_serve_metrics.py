"""`GET /metrics`: Prometheus' text format, and its counters move with the requests.

A one-signature export (`text -> length`) is served in this process with
small limits; requests of each protocol, a refused one and a connection
turned away are sent, and the scrape, read by `prometheus_client`'s own
parser, must count each of them.
"""

import http.client
import os
import socket
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from zoo.serving.requests import Limits, Signatures, _demo_exported
from zoo.serving.server import ModelServer

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from serving_helpers import TIMEOUT, call, post, serving  # noqa: E402


def scrape(address):
    """`{(sample name, frozenset of labels): value}` of `GET /metrics`."""
    connection = http.client.HTTPConnection(*address, timeout=TIMEOUT)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/plain")
        text = response.read().decode()
    finally:
        connection.close()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_count_requests_latency_rows_and_refusals():
    limits = Limits(max_rows=3, max_batch=2, workers=1, max_client_connections=2)
    server = ModelServer(
        ("127.0.0.1", 0), Signatures(_demo_exported(), limits), limits, model_name="m"
    )
    with serving(server) as address:
        before = scrape(address)
        assert before[("zoo_serve_queued_connections", frozenset())] == 0
        assert post(address, {"text": ["ab", "c", "d"]})[0] == 200  # Two calls.
        assert post(address, {"text": ["a"] * 4})[0] == 400  # max_rows
        v2 = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES"}]}
        v2["inputs"][0]["data"] = ["ab"]
        assert call(address, "POST", "/v2/models/m/infer", v2)[0] == 200
        assert (
            post(address, {"instances": ["ab"]}, path="/v1/models/m:predict")[0] == 200
        )
        # Two connections held open: a third from the same client is turned away.
        deadline = time.monotonic() + TIMEOUT
        while server._clients._open and time.monotonic() < deadline:
            time.sleep(0.01)  # The connections above are closed by now.
        held = [socket.create_connection(address, timeout=TIMEOUT) for _ in range(2)]
        with socket.create_connection(address, timeout=TIMEOUT) as turned:
            assert b" 503 " in turned.recv(65536).split(b"\r\n")[0]
        for connection in held:
            connection.sendall(
                b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n"
            )
            assert b" 200 " in connection.recv(65536).split(b"\r\n")[0]
            connection.close()
        after = scrape(address)

    def moved(name, **labels):
        key = (name, frozenset(labels.items()))
        return after.get(key, 0) - before.get(key, 0)

    requests = "zoo_serve_requests_total"
    assert moved(requests, protocol="zoo", model="m", status="200") == 1
    assert moved(requests, protocol="zoo", model="m", status="400") == 1
    assert moved(requests, protocol="kserve_v2", model="m", status="200") == 3
    assert moved(requests, protocol="tf_serving", model="m", status="200") == 1
    assert moved(requests, protocol="metrics", model="m", status="200") == 1
    assert moved("zoo_serve_refusals_total", limit="max_rows") == 1
    assert moved("zoo_serve_refusals_total", limit="max_client_connections") == 1
    # Rows per model call: 2 + 1 (the three rows split), 1, 1.
    assert moved("zoo_serve_model_call_rows_count", model="m") == 4
    assert moved("zoo_serve_model_call_rows_sum", model="m") == 5
    assert moved("zoo_serve_model_call_rows_bucket", model="m", le="1.0") == 3
    seconds = "zoo_serve_request_seconds_count"
    assert moved(seconds, protocol="kserve_v2", model="m") == 3
    assert moved("zoo_serve_request_seconds_sum", protocol="zoo", model="m") > 0
    assert after[("zoo_serve_waiting_requests", frozenset({("model", "m")}))] == 0

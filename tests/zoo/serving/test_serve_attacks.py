"""`zoo.serving.server` under the attacks of issue #40: each gets a JSON 4xx (or 503), and the server lives on.

Tiny exports (a GRU translator, a RAM classifier) are served on 127.0.0.1
in this process with small limits, so that every attack is cheap and
bounded in time (socket timeouts on every client) and memory (the limits
refuse before the model runs). After each attack a normal request must
still be answered. Each attack here broke the server before (a closed
connection with a traceback, gigabytes of memory, a thread held forever,
a silently wrong answer).
"""

import base64
import concurrent.futures
import json
import os
import socket
import struct
import sys
import threading
import time
import zlib

import numpy as np
import pytest
import tensorflow as tf

from zoo.ram.export import export_classifier
from zoo.serving.requests import image_size
from zoo.serving.server import Batcher, RequestError, make_server
from zoo.translation.export import export_translator

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import TIMEOUT, post, post_once_free, serving  # noqa: E402

LIMITS = dict(
    max_request_bytes=2**16,
    max_rows=300,
    max_batch=4,
    max_image_pixels=100 * 100,
    max_request_pixels=4 * 100 * 100,
    read_timeout=1.0,
    request_timeout=120.0,
    workers=3,
    max_queued=4,
)


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    """`(host, port, server, path)` of a served tiny translator export."""
    path = export_translator(
        tiny_models.seq2seq(),
        tmp_path_factory.mktemp("attacks") / "translator",
        beam_width=2,
        max_length=6,
        beam_width_limit=4,
        max_length_limit=10,
    )
    yield from _serving(make_server(path, "127.0.0.1", 0, **LIMITS), path)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    model = tiny_models.exportable_ram(1, "rnn")
    path = export_classifier(model, tmp_path_factory.mktemp("attacks") / "ram")
    yield from _serving(make_server(path, "127.0.0.1", 0, **LIMITS), path)


def _serving(server, path):
    with serving(server) as (host, port):
        yield host, port, server, path


def raw(served, data, wait=TIMEOUT):
    """The bytes the server answers to `data` sent as is (until it closes)."""
    with socket.create_connection(served[:2], timeout=wait) as connection:
        connection.sendall(data)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def alive(translator):
    status, answer = post(translator, {"text": ["In the beginning"]})
    assert status == 200, answer
    return answer


@pytest.mark.parametrize(
    "field, value",
    [
        ("beam_width", 262144),
        ("beam_width", 2147483648),
        ("beam_width", 5),
        ("max_length", 2**31 - 1),
        ("max_length", 11),
    ],
)
def test_beam_width_and_max_length_are_bounded(translator, field, value):
    body = {"text": ["Jesus wept."], "beam_width": 2, "max_length": 4, field: value}
    started = time.monotonic()
    status, answer = post(translator, body)
    assert status == 400 and answer["field"] == field, answer
    assert str(value) in answer["error"]
    limit = {"beam_width": 4, "max_length": 10}[field]
    assert f"[1, {limit}]" in answer["error"]
    assert time.monotonic() - started < 10
    alive(translator)


def test_the_export_records_and_enforces_its_own_limits(translator):
    path = translator[3]
    with open(os.path.join(path, "assets.extra", "zoo_export.json")) as f:
        assert json.load(f)["limits"] == {"beam_width": 4, "max_length": 10}
    translate = tf.saved_model.load(path).signatures["translate"]
    text = tf.constant(["Jesus wept."])
    with pytest.raises(tf.errors.InvalidArgumentError, match="<= 4"):
        translate(text=text, beam_width=tf.constant(5), max_length=tf.constant(3))
    with pytest.raises(tf.errors.InvalidArgumentError, match="<= 10"):
        translate(text=text, beam_width=tf.constant(1), max_length=tf.constant(11))


def test_signatures_refuse_inputs_of_another_rank(translator, classifier):
    translator_model = tf.saved_model.load(translator[3]).signatures
    with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible"):
        translator_model["serving_default"](text=tf.constant([["a", "b"], ["c", "d"]]))
    status, answer = post(translator, {"text": [["a", "b"], ["c", "d"]]})
    assert status == 400 and answer["field"] == "text", answer
    classifier_model = tf.saved_model.load(classifier[3]).signatures
    with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible"):
        classifier_model["serving_default"](image=tf.zeros((60, 60, 1), tf.uint8))
    # One unbatched image: refused, not read as 60 images.
    status, answer = post(classifier, {"image": np.zeros((60, 60, 1), int).tolist()})
    assert status == 400 and "rank 3" in answer["error"], answer


def test_rows_per_request_are_bounded(translator):
    status, answer = post(translator, {"text": ["a"] * 301})
    assert status == 400 and answer["field"] == "text"
    assert "300" in answer["error"] and "max_rows" in answer["error"]


def _png_header(height, width):
    """A PNG signature and IHDR claiming `height x width` (no pixels)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
    )


def test_image_pixels_are_checked_from_the_header_before_decoding(classifier):
    server = classifier[2]
    calls = server.batcher.calls
    huge = _png_header(23000, 23000) + b"\0" * 100
    assert image_size(huge) == (23000, 23000, 1)
    status, answer = post(
        classifier, {"image_bytes": [base64.b64encode(huge).decode()]}
    )
    assert status == 400 and answer["field"] == "image_bytes", answer
    assert "529000000" in answer["error"] and "max_image_pixels" in answer["error"]
    assert server.batcher.calls == calls  # The model never ran.
    # Five images within the per-image limit exceed the per-request one.
    png = tf.io.encode_png(tf.zeros((100, 100, 1), tf.uint8)).numpy()
    status, answer = post(
        classifier, {"image_bytes": [base64.b64encode(png).decode()] * 5}
    )
    assert status == 400 and "max_request_pixels" in answer["error"]
    jpeg = tf.io.encode_jpeg(tf.zeros((30, 20, 3), tf.uint8)).numpy()
    gif = base64.b64decode(
        "R0lGODlhAgADAIAAAP///wAAACH5BAAAAAAALAAAAAACAAMAAAIChF8AOw=="
    )
    assert image_size(jpeg) == (30, 20, 1) and image_size(gif)[:2] == (3, 2)
    status, answer = post(
        classifier, {"image_bytes": [base64.b64encode(png).decode()] * 4}
    )
    assert status == 200 and len(answer["predictions"]) == 4


@pytest.mark.parametrize(
    "body, status",
    [
        (b'{"text": ["\\ud800"]}', 400),  # A lone surrogate.
        (b'{"text": ["a"], "beam_width": 2147483648, "max_length": 3}', 400),
        (b"[" * 5000 + b"]" * 5000, 400),
        (b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400),
        (b'{"text": ' + b"[" * 100 + b"]" * 100 + b"}", 400),
        (b'{"text": ["a"]', 400),
        (b"\xff\xfe", 400),
    ],
)
def test_malformed_bodies_get_a_json_400(translator, body, status):
    got, answer = post(translator, body)
    assert got == status and answer["error"], answer
    alive(translator)


@pytest.mark.parametrize(
    "length, status",
    [("9" * 5000, 413), ("²", 400), ("-1", 400), ("1e3", 400), ("", 400)],
)
def test_bad_content_lengths_get_a_json_answer(translator, length, status):
    head = (
        "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    # Latin-1, as `http.client` reads header bytes: "²" is the byte 0xB2, a
    # digit to `str.isdigit` and not to `int`.
    answer = raw(translator, head.encode("latin-1") + b'{"text": ["a"]}')
    first, _, rest = answer.partition(b"\r\n")
    assert first.split()[1] == str(status).encode(), answer[:200]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    alive(translator)


def test_content_type_and_host_are_checked(translator):
    body = {"text": ["a"]}
    status, answer = post(translator, body, {"Content-Type": "text/plain"})
    assert status == 415 and "application/json" in answer["error"]
    # A browser's form post (it sends an Origin) is refused; curl's `-d`
    # (the same type, no Origin), as TF Serving's examples use it, is not.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    origin = {"Origin": "http://127.0.0.1:8501"}
    assert post(translator, body, {**form, **origin})[0] == 415
    assert post(translator, body, form)[0] == 200
    status, answer = post(translator, body, {"Host": "evil.example:8501"})
    assert status == 403 and "--allow-host" in answer["error"]
    for origin in ("http://evil.example", "null", "http://[::1"):
        assert post(translator, body, {"Origin": origin})[0] == 403
    assert post(translator, body, {"Host": "[::1"})[0] == 403
    for host in ("localhost:8501", "127.0.0.1", "[::1]:8501"):
        assert post(translator, body, {"Host": host})[0] == 200


def test_allow_host_admits_a_name(tmp_path):
    model = tf.Module()
    model.serve = tf.function(
        lambda text: {"length": tf.strings.length(text)},
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
    )
    tf.saved_model.save(model, str(tmp_path), signatures={"serve": model.serve})
    from zoo.serving.export import write_metadata

    write_metadata(str(tmp_path), {"kind": "demo"})
    server = make_server(str(tmp_path), "127.0.0.1", 0, allow_hosts=["model.lan"])
    with serving(server) as address:
        status, _ = post(address, {"text": ["a"]}, {"Host": "model.lan:8501"})
        assert status == 200
        status, _ = post(address, {"text": ["a"]}, {"Host": "other.lan"})
        assert status == 403


def test_a_slow_client_is_cut_off_and_holds_no_thread(translator):
    host, port, server = translator[:3]
    started = time.monotonic()
    head = (
        "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    answer = raw(translator, head.encode() + b'{"text": [', wait=30)
    assert b" 408 " in answer.split(b"\r\n")[0], answer[:200]
    # Headers that never end: the watchdog closes the connection.
    assert raw(translator, b"POST /v1/predict HTTP/1.1\r\nHost: 1", wait=30) in (
        b"",
        answer[:0],
    )
    assert time.monotonic() - started < 2 * 1.0 + 5
    alive(translator)


def test_the_worker_pool_is_bounded_and_answers_503_when_full(translator):
    threads = threading.active_count()
    idle = []
    try:
        for _ in range(3 + 4 + 5):  # Workers, queue, and five more.
            idle.append(socket.create_connection(translator[:2], timeout=30))
        busy = 0
        for connection in idle[-5:]:
            answer = connection.recv(65536)
            if b" 503 " in answer.split(b"\r\n")[0]:
                busy += 1
                assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
        assert busy == 5
        assert threading.active_count() == threads  # No thread a connection.
    finally:
        for connection in idle:
            connection.close()
    # The workers free themselves as they read the closed connections' ends.
    status, answer = post_once_free(translator, {"text": ["In the beginning"]})
    assert status == 200, answer


def test_a_request_past_its_deadline_gets_503():
    def slow(name, inputs):
        time.sleep(0.5)
        return {"y": inputs["x"]}

    batcher = Batcher(slow, timeout=0.1)
    with pytest.raises(RequestError, match="0.1 s") as caught:
        batcher.submit("f", {"x": np.zeros(2)}, 2)
    assert int(caught.value.status) == 503
    batcher.close()


def test_a_small_request_is_not_starved_by_a_large_one(translator):
    server = translator[2]
    sentences = ["In the beginning God created the heaven and the earth."] * 200
    finished = {}

    def ask(name, texts):
        status, answer = post(translator, {"text": texts})
        finished[name] = time.monotonic()
        return status, answer

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        calls = server.batcher.calls
        large = pool.submit(ask, "large", sentences)
        deadline = time.monotonic() + TIMEOUT
        while server.batcher.calls < calls + 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        small = pool.submit(ask, "small", ["Jesus wept."])
        assert small.result(TIMEOUT)[0] == 200
        status, answer = large.result(TIMEOUT)
    assert status == 200 and len(answer["predictions"]) == 200
    # 200 rows in calls of 4: the small request ran between two of them.
    assert finished["small"] < finished["large"]
    assert server.batcher.calls - calls >= 50


def test_tf_serving_columns_carry_a_translators_scalar_inputs(translator):
    name = translator[2].model_name
    path = f"/v1/models/{name}:predict"
    texts = ["Jesus wept.", "In the beginning"]
    columns = {"text": texts, "beam_width": 3, "max_length": 5}
    status, answer = post(
        translator, {"signature_name": "translate", "inputs": columns}, path=path
    )
    assert status == 200 and sorted(answer["outputs"]) == [
        "input_truncated",
        "output_truncated",
        "score",
        "translation",
    ]
    status, direct = post(translator, columns)
    assert answer["outputs"]["translation"] == [
        p["translation"] for p in direct["predictions"]
    ]
    # Rows cannot hold a scalar input; a bound is a TF Serving error.
    rows = [{"text": t, "beam_width": 3, "max_length": 5} for t in texts]
    body = {"signature_name": "translate", "instances": rows}
    status, answer = post(translator, body, path=path)
    assert status == 400 and "columnar" in answer["error"]
    columns["beam_width"] = 5
    body = {"signature_name": "translate", "inputs": columns}
    status, answer = post(translator, body, path=path)
    assert status == 400 and list(answer) == ["error"] and "[1, 4]" in answer["error"]


def test_every_limit_is_a_serve_flag(capsys):
    import dataclasses

    from zoo.cli import SERVE_LIMITS, build_parser
    from zoo.serving.server import Limits

    flags = {flag[2:].replace("-", "_") for flag, _, _ in SERVE_LIMITS}
    assert flags | {"batch_delay"} == {f.name for f in dataclasses.fields(Limits)}
    args = build_parser().parse_args(
        ["serve", "d", "--max-rows", "5", "--read-timeout", "0.5", "--allow-host", "a"]
    )
    assert (args.max_rows, args.read_timeout, args.allow_host) == (5, 0.5, ["a"])
    assert args.max_beam_width == Limits().max_beam_width
    for flag in ("--max-rows", "--request-timeout", "--workers"):
        with pytest.raises(SystemExit) as caught:
            build_parser().parse_args(["serve", "d", flag, "0"])
        assert caught.value.code == 2

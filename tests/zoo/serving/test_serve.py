"""`zoo.serving.server`: the HTTP endpoint over a tiny RAM export, with real requests.

The server runs on 127.0.0.1 on a free port in a thread of this process;
requests go through `http.client` / `urllib` as any client's would. The
answers are compared with the SavedModel called directly; bad requests must
get a 4xx with a JSON error naming the field; 20 concurrent requests must
all be answered right, in fewer model calls than requests (the batcher).
"""

import base64
import concurrent.futures
import http.client
import os
import re
import sys
import threading
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from zoo.ram.export import export_classifier
from zoo.serving.server import make_server

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import TIMEOUT, base_url, call, direct, post, serving  # noqa: E402

NAMES = ["cat", "dog", "owl", "yak"]
LIMIT = 64 * 1024
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A served tiny RAM export: `(address, server, serving signatures)`."""
    model = tiny_models.exportable_ram(3, "lstm", NAMES)
    path = export_classifier(model, tmp_path_factory.mktemp("serve") / "ram")
    # A long batching window, so that concurrent requests surely meet.
    running = make_server(
        path, "127.0.0.1", 0, max_request_bytes=LIMIT, batch_delay=0.05
    )
    with serving(running) as address:
        yield address, running, tf.saved_model.load(path).signatures


def assert_predictions(predictions, wanted):
    assert [p["class_name"] for p in predictions] == [
        n.decode() for n in wanted["class_name"]
    ]
    assert [p["class_id"] for p in predictions] == wanted["class_id"].tolist()
    # Batches of other sizes than `wanted`'s round differently.
    np.testing.assert_allclose(
        [p["probabilities"] for p in predictions], wanted["probabilities"], **TOLERANCE
    )
    np.testing.assert_allclose(
        [p["glimpse_path"] for p in predictions], wanted["glimpse_path"], **TOLERANCE
    )


def images(count, seed, size=(12, 10)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (count, *size, 3), dtype="uint8")


def test_page_and_metadata(server):
    address = server[0]
    with urllib.request.urlopen(base_url(address) + "/", timeout=TIMEOUT) as response:
        page = response.read().decode()
        assert response.headers["Content-Type"].startswith("text/html")
    assert ":predict" in page and "zoo classification" in page
    status, metadata = call(address, "GET", "/v1/metadata")
    assert status == 200
    assert metadata["metadata"]["class_names"] == NAMES
    assert metadata["signatures"]["serve"]["inputs"] == {
        "image": {"dtype": "uint8", "shape": [None, None, None, None]}
    }
    assert set(metadata["signatures"]["serve_bytes"]["outputs"]) == {
        "class_id",
        "class_name",
        "probabilities",
        "glimpse_path",
    }


def test_images_and_encoded_images_answer_as_the_savedmodel(server):
    address, _, signatures = server
    batch = images(3, seed=0)
    status, answer = post(address, {"image": batch.tolist()})
    assert status == 200 and answer["signature"] == "serving_default"
    assert_predictions(answer["predictions"], direct(signatures, "serve", image=batch))
    # Gray images need their channel axis: (3, 12, 10) is not 3 images.
    gray = batch[..., :1]
    status, answer = post(address, {"image": gray.tolist()})
    assert status == 200
    assert_predictions(answer["predictions"], direct(signatures, "serve", image=gray))
    status, answer = post(address, {"image": gray[..., 0].tolist()})
    assert status == 400 and "rank 3" in answer["error"]
    files = [tf.io.encode_png(image).numpy() for image in batch]
    status, answer = post(
        address, {"image_bytes": [base64.b64encode(f).decode() for f in files]}
    )
    assert status == 200 and answer["signature"] == "serve_bytes"
    wanted = direct(signatures, "serve_bytes", image_bytes=np.array(files, object))
    assert_predictions(answer["predictions"], wanted)


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({}, None, "JSON object"),
        ([1, 2], None, "JSON object"),
        ({"picture": [[[1]]]}, "picture", "match no signature"),
        ({"image": "cat.png"}, "image", "must be a list"),
        ({"image": [[["a", "b"]]]}, "image", "numbers"),
        ({"image": [[[[300]]]]}, "image", r"\[0, 255\]"),
        ({"image": [[[[1.5]]]]}, "image", "integers"),
        ({"image": [[[1, 2]], [[1, 2], [3, 4]]]}, "image", "one shape"),
        ({"image": [1, 2, 3]}, "image", "rank 3"),
        ({"image": []}, "image", "rank 3"),
        ({"image_bytes": ["***"]}, "image_bytes", "base64"),
        ({"image_bytes": [7]}, "image_bytes", "base64"),
        ({"image_bytes": []}, None, "no rows"),
        ({"image": [[[[1, 2]]]]}, None, "1 or 3 channels"),
        (
            {"image_bytes": [base64.b64encode(b"not a png").decode()]},
            "image_bytes",
            "not a PNG, JPEG, GIF or BMP",
        ),
    ],
)
def test_bad_requests_get_a_400_naming_the_field(server, body, field, message):
    status, answer = post(server[0], body)
    assert status == 400, answer
    assert answer["field"] == field
    assert re.search(message, answer["error"]), answer


def test_bad_json_too_large_bodies_and_unknown_paths(server):
    address = server[0]
    status, answer = post(address, b"{not json")
    assert status == 400 and "not JSON" in answer["error"]
    status, answer = post(address, b" " * (LIMIT + 1))
    assert status == 413 and str(LIMIT) in answer["error"]
    connection = http.client.HTTPConnection(*address, timeout=TIMEOUT)
    connection.putrequest("POST", "/v1/predict")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(10**9))  # claimed, never sent
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413
    connection.close()
    status, answer = post(address, {"image": [[[1]]]}, path="/v2")
    assert status == 404
    assert call(address, "GET", "/nothing")[0] == 404


def test_twenty_concurrent_requests_are_batched_and_answered_right(server):
    address, running, signatures = server
    batch = images(20, seed=3)
    wanted = direct(signatures, "serve", image=batch)
    calls = running.batcher.calls
    start = threading.Barrier(20)

    def ask(i):
        start.wait()
        return post(address, {"image": batch[i : i + 1].tolist()})

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, range(20)))
    assert [status for status, _ in answers] == [200] * 20
    predictions = [answer["predictions"][0] for _, answer in answers]
    assert_predictions(predictions, wanted)
    assert running.batcher.calls - calls < 20


def test_answers_are_utf8_json_not_ascii_escapes(server):
    """Accented text comes back as UTF-8 (readable in `curl`), not `\\u00e9`."""
    host, port = server[0][:2]
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    connection.request(
        "POST",
        "/v1/predict",
        '{"pícture": [[[[1]]]]}'.encode(),
        {"Content-Type": "application/json"},
    )
    answer = connection.getresponse()
    body = answer.read()
    connection.close()
    assert answer.status == 400
    assert "pícture".encode() in body and b"\\u00ed" not in body

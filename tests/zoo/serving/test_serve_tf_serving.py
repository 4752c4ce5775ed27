"""`python -m zoo serve` speaks TF Serving's REST API (and KServe's v2); SIGTERM drains it.

A tiny RAM export is written in TF Serving's layout (`BASE/1/`, what
`tensorflow_model_server --model_base_path=BASE` reads) and served by the
command in a subprocess on 127.0.0.1. A client written for TF Serving's
REST API (`/v1/models/NAME`, `/metadata`, `:predict` with `instances` or
`inputs`, binary strings as `{"b64": ...}`, errors as `{"error": ...}`)
must get TF Serving's answers, equal to the SavedModel's outputs. Then
SIGTERM, sent while a request is on its way, must let that request be
answered and the command exit 0.
"""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.ram.export import export_classifier

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import TIMEOUT, call, direct, free_port  # noqa: E402

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
NAME = "tiny_ram"
OUTPUTS = ["class_id", "class_name", "glimpse_path", "probabilities"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`(address, process, signatures)` of `python -m zoo serve BASE` running."""
    base = tmp_path_factory.mktemp("models") / NAME
    model = tiny_models.exportable_ram(1, "rnn")
    path = export_classifier(model, base / "1")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "serve", str(base), "--port", str(port)]
        + ["--read-timeout", "20"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # Printed once it listens.
        assert "Serving" in line, process.stderr.read()[-3000:]
        yield ("127.0.0.1", port), process, tf.saved_model.load(path).signatures
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(TIMEOUT)


def assert_rows(rows, wanted):
    assert [row["class_name"] for row in rows] == [
        n.decode() for n in wanted["class_name"]
    ]
    np.testing.assert_allclose(
        [row["probabilities"] for row in rows],
        wanted["probabilities"],
        rtol=1e-5,
        atol=1e-6,
    )


def test_model_status_and_metadata(served):
    address = served[0]
    status, answer = call(address, "GET", f"/v1/models/{NAME}")
    assert status == 200
    assert answer == {
        "model_version_status": [
            {
                "version": "1",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    assert call(address, "GET", f"/v1/models/{NAME}/versions/1")[0] == 200
    status, answer = call(address, "GET", f"/v1/models/{NAME}/metadata")
    assert status == 200
    assert answer["model_spec"] == {"name": NAME, "signature_name": "", "version": "1"}
    definitions = answer["metadata"]["signature_def"]["signature_def"]
    image = definitions["serving_default"]["inputs"]["image"]
    assert image["dtype"] == "DT_UINT8"
    assert image["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}] * 4
    assert definitions["serve_bytes"]["inputs"]["image_bytes"]["dtype"] == "DT_STRING"
    outputs = definitions["serving_default"]["outputs"]
    assert sorted(outputs) == OUTPUTS
    assert outputs["probabilities"]["dtype"] == "DT_FLOAT"
    assert definitions["serving_default"]["method_name"] == "tensorflow/serving/predict"
    status, answer = call(address, "GET", "/v1/models/other")
    assert status == 404 and answer == {
        "error": "Servable not found for request: Latest(other)"
    }
    assert call(address, "GET", f"/v1/models/{NAME}/versions/2")[0] == 404


def test_predict_rows_columns_and_b64(served):
    address, _, signatures = served
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 12, 10, 1), dtype="uint8")
    wanted = direct(signatures, "serve", image=images)
    path = f"/v1/models/{NAME}:predict"
    status, answer = call(address, "POST", path, {"instances": images.tolist()})
    assert status == 200 and list(answer) == ["predictions"]
    assert [sorted(row) for row in answer["predictions"]] == [OUTPUTS] * 3
    assert_rows(answer["predictions"], wanted)
    # Columnar: `inputs` in, `outputs` (a batch per output) back.
    body = {"signature_name": "serving_default", "inputs": {"image": images.tolist()}}
    status, answer = call(
        address, "POST", f"/v1/models/{NAME}/versions/1:predict", body
    )
    assert status == 200 and sorted(answer["outputs"]) == OUTPUTS
    columns = answer["outputs"]
    assert_rows(
        [{k: columns[k][i] for k in OUTPUTS} for i in range(3)],
        wanted,
    )
    # Encoded files as {"b64": ...}, in rows and in columns.
    files = [tf.io.encode_png(image).numpy() for image in images]
    encoded = [{"b64": base64.b64encode(f).decode()} for f in files]
    wanted = direct(signatures, "serve_bytes", image_bytes=np.array(files, object))
    body = {"signature_name": "serve_bytes", "instances": encoded}
    status, answer = call(address, "POST", path, body)
    assert status == 200
    assert_rows(answer["predictions"], wanted)
    body = {"signature_name": "serve_bytes", "inputs": {"image_bytes": encoded}}
    status, answer = call(address, "POST", path, body)
    assert status == 200
    assert answer["outputs"]["class_name"] == [n.decode() for n in wanted["class_name"]]


@pytest.mark.parametrize(
    "body, status",
    [
        ({"instances": [[[[1]]]], "inputs": [[[[1]]]]}, 400),
        ({"signature_name": "nope", "instances": [[[[1]]]]}, 400),
        ({"instances": []}, 400),
        ({"instances": [[[1]]]}, 400),  # One rank-2 "image".
        ({"signature_name": "serve_bytes", "instances": ["not base64, not png"]}, 400),
    ],
)
def test_predict_errors_are_tf_serving_errors(served, body, status):
    got, answer = call(served[0], "POST", f"/v1/models/{NAME}:predict", body)
    assert got == status and list(answer) == ["error"], answer


def test_kserve_open_inference_protocol(served):
    address, _, signatures = served
    assert call(address, "GET", "/v2/health/ready") == (200, {"ready": True})
    assert call(address, "GET", f"/v2/models/{NAME}/ready")[1]["ready"] is True
    status, answer = call(address, "GET", f"/v2/models/{NAME}")
    assert status == 200 and answer["inputs"] == [
        {"name": "image", "datatype": "UINT8", "shape": [-1, -1, -1, -1]}
    ]
    images = np.random.default_rng(1).integers(0, 256, (2, 12, 10, 1), dtype="uint8")
    wanted = direct(signatures, "serve", image=images)
    tensor = {"name": "image", "shape": [2, 12, 10, 1], "datatype": "UINT8"}
    body = {"inputs": [dict(tensor, data=images.reshape(-1).tolist())]}
    status, answer = call(address, "POST", f"/v2/models/{NAME}/infer", body)
    assert status == 200 and answer["model_name"] == NAME
    outputs = {t["name"]: t for t in answer["outputs"]}
    assert outputs["class_name"]["data"] == [n.decode() for n in wanted["class_name"]]
    assert outputs["probabilities"]["shape"] == list(wanted["probabilities"].shape)
    np.testing.assert_allclose(
        np.reshape(outputs["probabilities"]["data"], outputs["probabilities"]["shape"]),
        wanted["probabilities"],
        rtol=1e-5,
        atol=1e-6,
    )
    # Encoded files: BYTES in base64, as the input's parameters say.
    files = [base64.b64encode(tf.io.encode_png(i).numpy()).decode() for i in images]
    tensor = {"name": "image_bytes", "shape": [2], "datatype": "BYTES", "data": files}
    body = {"inputs": [dict(tensor, parameters={"content_type": "base64"})]}
    status, answer = call(address, "POST", f"/v2/models/{NAME}/infer", body)
    assert status == 200
    assert answer["outputs"][1]["name"] == "class_name"
    assert answer["outputs"][1]["data"] == outputs["class_name"]["data"]
    body = {"inputs": [dict(tensor, shape=[3])]}
    status, answer = call(address, "POST", f"/v2/models/{NAME}/infer", body)
    assert status == 400 and list(answer) == ["error"]
    assert call(address, "GET", "/v2/models/other")[0] == 404


def test_kserve_id_requested_outputs_and_server_metadata(served):
    # The protocol: an `id` given must come back; named `outputs` are the
    # only ones answered; `GET /v2` is the server metadata.
    address, _, signatures = served
    images = np.random.default_rng(2).integers(0, 256, (2, 9, 9, 1), "uint8")
    path = f"/v2/models/{NAME}/infer"
    tensor = {
        "name": "image",
        "shape": list(images.shape),
        "datatype": "UINT8",
        "data": images.reshape(-1).tolist(),
    }
    body = {"id": "req-7", "inputs": [tensor], "outputs": [{"name": "class_name"}]}
    status, answer = call(address, "POST", path, body)
    assert status == 200, answer
    assert answer["id"] == "req-7"
    assert [output["name"] for output in answer["outputs"]] == ["class_name"]
    wanted = direct(signatures, "serve", image=images)["class_name"]
    assert answer["outputs"][0]["data"] == [name.decode() for name in wanted]
    status, answer = call(address, "POST", path, {"inputs": [tensor]})
    assert "id" not in answer
    assert [output["name"] for output in answer["outputs"]] == OUTPUTS
    for bad in ({"id": 7}, {"outputs": [{"name": "logits"}]}, {"outputs": "all"}):
        status, answer = call(address, "POST", path, {"inputs": [tensor], **bad})
        assert status == 400 and list(answer) == ["error"], (bad, answer)
    status, answer = call(address, "GET", "/v2")
    assert status == 200
    assert answer == {
        "name": "zoo serve",
        "version": zoo.__version__,
        "extensions": ["binary_tensor_data"],
    }


def test_sigterm_answers_the_request_on_its_way_and_exits_0(served):
    address, process, _ = served
    body = json.dumps({"instances": np.zeros((1, 8, 8, 1), int).tolist()}).encode()
    head = (
        f"POST /v1/models/{NAME}:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(address, timeout=TIMEOUT) as client:
        client.sendall(head + body[:10])
        time.sleep(0.5)  # Accepted, and reading the body.
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        client.sendall(body[10:])
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 200"), answer[:300]
    assert "predictions" in json.loads(answer.partition(b"\r\n\r\n")[2])
    assert process.wait(TIMEOUT) == 0
    assert "Stopped" in process.stdout.read()

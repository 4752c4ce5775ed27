"""KServe v2's binary tensor data extension: `tritonclient.http` with its defaults, and hand-built lies.

Triton's own HTTP client sends every tensor as binary data by default
(`Inference-Header-Content-Length`, raw bytes after the JSON header) and
asks for every output so. A tiny RAM export (UINT8 images, BYTES encoded
files) and a tiny translator export (BYTES text, INT32 scalars through
`translate`) are served in this process; the client's answers must equal
the SavedModel's own. Then bodies whose declared sizes lie about their
bytes, shape or datatype must each get a 400 before the model runs.
"""

import json
import os
import struct
import sys

import numpy as np
import pytest
import tensorflow as tf

from zoo.ram.export import export_classifier
from zoo.serving.server import make_server
from zoo.translation.export import export_translator

pytestmark = pytest.mark.tensorflow_only

httpclient = pytest.importorskip("tritonclient.http")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import TIMEOUT, call, direct, serving  # noqa: E402


def _serve(path, name):
    server = make_server(path, "127.0.0.1", 0, model_name=name, read_timeout=20.0)
    with serving(server) as (host, port):
        client = httpclient.InferenceServerClient(
            f"{host}:{port}", connection_timeout=TIMEOUT, network_timeout=TIMEOUT
        )
        try:
            yield client, (host, port), server, tf.saved_model.load(path).signatures
        finally:
            client.close()


@pytest.fixture(scope="module")
def ram(tmp_path_factory):
    model = tiny_models.exportable_ram(1, "rnn")
    path = export_classifier(model, tmp_path_factory.mktemp("binary") / "ram")
    yield from _serve(path, "tiny_ram")


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    path = export_translator(
        tiny_models.seq2seq(), tmp_path_factory.mktemp("binary") / "translator"
    )
    yield from _serve(path, "tiny_translator")


def _input(name, value, datatype):
    tensor = httpclient.InferInput(name, list(value.shape), datatype)
    tensor.set_data_from_numpy(value)  # binary_data=True: the client's default
    return tensor


def test_tritonclient_defaults_on_a_ram_export(ram):
    client, _, _, signatures = ram
    assert client.is_server_ready() and client.is_model_ready("tiny_ram")
    images = np.random.default_rng(1).integers(0, 256, (2, 12, 10, 1), dtype="uint8")
    wanted = direct(signatures, "serve", image=images)
    result = client.infer("tiny_ram", [_input("image", images, "UINT8")])
    assert result.get_response()["outputs"][0]["parameters"]["binary_data_size"] > 0
    assert result.as_numpy("class_name").tolist() == wanted["class_name"].tolist()
    np.testing.assert_allclose(
        result.as_numpy("probabilities"), wanted["probabilities"], rtol=1e-5, atol=1e-6
    )
    assert result.as_numpy("class_id").tolist() == wanted["class_id"].tolist()
    # Encoded files: BYTES elements, each its raw bytes.
    files = np.array([tf.io.encode_png(i).numpy() for i in images], dtype=object)
    asked = [httpclient.InferRequestedOutput("class_name")]
    result = client.infer(
        "tiny_ram", [_input("image_bytes", files, "BYTES")], outputs=asked
    )
    assert result.as_numpy("class_name").tolist() == wanted["class_name"].tolist()
    # JSON outputs where asked so, binary inputs still.
    asked = [httpclient.InferRequestedOutput("class_id", binary_data=False)]
    result = client.infer("tiny_ram", [_input("image", images, "UINT8")], outputs=asked)
    assert result.get_response()["outputs"][0]["data"] == wanted["class_id"].tolist()


def test_tritonclient_defaults_on_a_translator_export(translator):
    client, _, _, signatures = translator
    text = np.array([b"In the beginning", b"Jesus wept."], dtype=object)
    wanted = direct(signatures, "serving_default", text=text)
    result = client.infer("tiny_translator", [_input("text", text, "BYTES")])
    assert result.as_numpy("translation").tolist() == wanted["translation"].tolist()
    np.testing.assert_allclose(result.as_numpy("score"), wanted["score"], rtol=1e-5)
    # INT32 scalars beside the text, through the `translate` signature.
    scalars = [
        _input("beam_width", np.array(2, np.int32), "INT32"),
        _input("max_length", np.array(5, np.int32), "INT32"),
    ]
    wanted = direct(
        signatures,
        "translate",
        text=text,
        beam_width=np.int32(2),
        max_length=np.int32(5),
    )
    result = client.infer("tiny_translator", [_input("text", text, "BYTES"), *scalars])
    assert result.as_numpy("translation").tolist() == wanted["translation"].tolist()


def _raw_infer(address, name, request, binary, headers=None):
    header = json.dumps(request).encode()
    sent = {"Inference-Header-Content-Length": str(len(header))}
    sent.update(headers or {})
    return call(address, "POST", f"/v2/models/{name}/infer", header + binary, sent)


def _text(name, shape, size):
    parameters = {"binary_data_size": size}
    return {"name": name, "shape": shape, "datatype": "BYTES", "parameters": parameters}


def _elements(*values):
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


@pytest.mark.parametrize(
    "tensor, binary, words",
    [
        # A size past the body, and bytes left over after the tensors.
        (_text("text", [1], 100), _elements(b"ab"), "runs past the body"),
        (_text("text", [1], 6), _elements(b"ab") + b"xx", "after its tensors"),
        # An element's length prefix past its tensor; fewer elements than the shape.
        (_text("text", [1], 6), struct.pack("<I", 2**31) + b"ab", "length-prefixed"),
        (_text("text", [2], 6), _elements(b"ab"), "length-prefixed"),
        # A shape that the bytes cannot hold, before anything is built.
        (_text("text", [2**40], 6), _elements(b"ab"), "max_request_bytes"),
        (_text("text", [1, 2**25, 0], 6), _elements(b"ab"), "holds no values"),
        (_text("text", [1], -1), b"", "a count of bytes"),
        (_text("text", [1], 2), b"\xff\xfe", "length-prefixed"),
        (_text("text", [1], 6), _elements(b"\xff\xfe"), "not UTF-8"),
        (
            {**_text("text", [2], 8), "datatype": "INT32"},
            struct.pack("<ii", 1, 2),
            "`text[0]` must be a string",  # The signature's own check of the values.
        ),
        (
            {**_text("text", [3], 8), "datatype": "INT32"},
            struct.pack("<ii", 1, 2),
            "disagrees with its shape [3] of INT32 (12 bytes)",
        ),
        ({**_text("text", [1], 1), "datatype": "FP8"}, b"\x00", "datatype must be"),
    ],
)
def test_binary_data_whose_sizes_lie_is_refused(translator, tensor, binary, words):
    address, server = translator[1:3]
    calls = server.batcher.calls
    status, answer = _raw_infer(
        address, "tiny_translator", {"inputs": [tensor]}, binary
    )
    assert status == 400 and words in answer["error"], answer
    assert server.batcher.calls == calls


def test_the_json_header_length_is_checked(translator):
    address = translator[1]
    request = json.dumps({"inputs": [_text("text", [1], 6)]}).encode()
    for length in ("-1", "1e3", str(len(request) + 7), "9" * 30):
        status, answer = call(
            address,
            "POST",
            "/v2/models/tiny_translator/infer",
            request + _elements(b"ab"),
            {"Inference-Header-Content-Length": length},
        )
        assert status == 400 and "Inference-Header-Content-Length" in answer["error"]
    # Binary data on a path that is not KServe v2's is refused, not ignored.
    status, answer = call(
        address,
        "POST",
        "/v1/predict",
        b'{"text": ["ab"]}xyz',
        {"Inference-Header-Content-Length": "16"},
    )
    assert status == 400 and "/v2/models/tiny_translator/infer" in answer["error"]
    # A browser's octet-stream comes after a CORS preflight: it is taken only
    # with the binary header.
    status, answer = _raw_infer(
        address,
        "tiny_translator",
        {"inputs": [_text("text", [1], 6)]},
        _elements(b"ab"),
        {"Content-Type": "application/octet-stream"},
    )
    assert status == 200 and answer["outputs"][0]["name"] == "input_truncated"

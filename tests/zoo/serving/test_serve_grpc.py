"""gRPC (`zoo.serving.grpc_server`): TF Serving's and Triton's own clients, unchanged, and lies.

A tiny RAM export (UINT8 images, encoded files) and a tiny translator export
(text, INT32 scalars through `translate`) are served in this process over
HTTP and gRPC. `tensorflow-serving-api`'s `PredictionServiceStub` and
`tritonclient.grpc` must get the SavedModel's own answers; then messages
that lie about their size, shape or dtype, an oversized message and a
missed deadline must each get their gRPC status while the server answers
the next call, and `stop` must let a call under way finish.
"""

import os
import sys
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from zoo.ram.export import export_classifier
from zoo.serving.grpc_server import GrpcServer
from zoo.serving.server import make_server
from zoo.serving.v2_messages import MESSAGES, SERVICE
from zoo.translation.export import export_translator

pytestmark = pytest.mark.tensorflow_only

apis = pytest.importorskip("tensorflow_serving.apis")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tensorflow_serving.apis import (  # noqa: E402
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import TIMEOUT, direct, serving  # noqa: E402

LIMITS = dict(max_request_bytes=2**16, max_rows=300, read_timeout=20.0)


class Served:
    """A served export: the HTTP server, its gRPC server, a channel, the signatures."""

    def __init__(self, server, rpc, path):
        self.server, self.rpc = server, rpc
        self.address = f"127.0.0.1:{rpc.port}"
        self.channel = grpc.insecure_channel(self.address)
        self.predict = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.signatures = tf.saved_model.load(path).signatures

    def infer(self, request, timeout=TIMEOUT):
        """KServe v2's ModelInfer, sent as built (whatever it claims)."""
        call = self.channel.unary_unary(
            f"/{SERVICE}/ModelInfer",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=MESSAGES["ModelInferResponse"].FromString,
        )
        return call(request, timeout=timeout)


def _serve(path, name):
    server = make_server(path, "127.0.0.1", 0, model_name=name, **LIMITS)
    rpc = GrpcServer(server, "127.0.0.1", 0)
    rpc.start()
    with serving(server):
        served = Served(server, rpc, path)
        try:
            yield served
        finally:
            served.channel.close()
            rpc.stop(TIMEOUT).wait()


@pytest.fixture(scope="module")
def ram(tmp_path_factory):
    model = tiny_models.exportable_ram(1, "rnn")
    path = export_classifier(model, tmp_path_factory.mktemp("grpc") / "ram")
    yield from _serve(path, "tiny_ram")


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    path = export_translator(
        tiny_models.seq2seq(), tmp_path_factory.mktemp("grpc") / "translator"
    )
    yield from _serve(path, "tiny_translator")


def _predict(name, signature="", **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    return request


def _images(rows=2):
    return np.random.default_rng(1).integers(0, 256, (rows, 12, 10, 1), dtype="uint8")


def test_tf_serving_stub_predicts_as_the_saved_model(ram):
    images = _images()
    wanted = direct(ram.signatures, "serve", image=images)
    answer = ram.predict.Predict(_predict("tiny_ram", image=images), timeout=TIMEOUT)
    assert answer.model_spec.name == "tiny_ram" and answer.model_spec.version.value == 1
    outputs = {k: tf.make_ndarray(v) for k, v in answer.outputs.items()}
    assert outputs["class_name"].tolist() == wanted["class_name"].tolist()
    np.testing.assert_allclose(
        outputs["probabilities"], wanted["probabilities"], rtol=1e-5, atol=1e-6
    )
    files = np.array([tf.io.encode_png(i).numpy() for i in images], object)
    request = _predict("tiny_ram", "serve_bytes", image_bytes=files)
    request.output_filter.append("class_id")
    answer = ram.predict.Predict(request, timeout=TIMEOUT)
    assert list(answer.outputs) == ["class_id"]
    assert tf.make_ndarray(answer.outputs["class_id"]).tolist() == (
        wanted["class_id"].tolist()
    )


def test_tf_serving_metadata_and_status(ram):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "tiny_ram"
    request.metadata_field.append("signature_def")
    answer = ram.predict.GetModelMetadata(request, timeout=TIMEOUT)
    definitions = get_model_metadata_pb2.SignatureDefMap()
    answer.metadata["signature_def"].Unpack(definitions)
    image = definitions.signature_def["serving_default"].inputs["image"]
    assert image.dtype == tf.uint8.as_datatype_enum
    assert [d.size for d in image.tensor_shape.dim] == [-1] * 4
    status_stub = model_service_pb2_grpc.ModelServiceStub(ram.channel)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "tiny_ram"
    (version,) = status_stub.GetModelStatus(
        request, timeout=TIMEOUT
    ).model_version_status
    assert version.version == 1
    assert version.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    request.model_spec.name = "other"
    with pytest.raises(grpc.RpcError) as caught:
        status_stub.GetModelStatus(request, timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "Latest(other)" in caught.value.details()


def test_tf_serving_stub_translates_with_scalar_inputs(translator):
    text = np.array([b"In the beginning", b"Jesus wept."], object)
    scalars = dict(beam_width=np.int32(2), max_length=np.int32(5))
    wanted = direct(translator.signatures, "translate", text=text, **scalars)
    request = _predict("tiny_translator", "translate", text=text, **scalars)
    answer = translator.predict.Predict(request, timeout=TIMEOUT)
    assert tf.make_ndarray(answer.outputs["translation"]).tolist() == (
        wanted["translation"].tolist()
    )


def test_tritonclient_grpc_unchanged(ram, translator):
    client = grpcclient.InferenceServerClient(ram.address)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("tiny_ram") and not _ready(client, "other")
    assert list(client.get_server_metadata().extensions) == ["binary_tensor_data"]
    metadata = client.get_model_metadata("tiny_ram")
    assert [(t.name, t.datatype) for t in metadata.inputs] == [("image", "UINT8")]
    images = _images()
    wanted = direct(ram.signatures, "serve", image=images)
    tensor = grpcclient.InferInput("image", list(images.shape), "UINT8")
    tensor.set_data_from_numpy(images)
    asked = [grpcclient.InferRequestedOutput("class_name")]
    result = client.infer("tiny_ram", [tensor], outputs=asked, request_id="r1")
    assert result.get_response().id == "r1"
    assert [o.name for o in result.get_response().outputs] == ["class_name"]
    assert result.as_numpy("class_name").tolist() == wanted["class_name"].tolist()
    client.close()
    client = grpcclient.InferenceServerClient(translator.address)
    text = np.array([b"In the beginning", b"Jesus wept."], object)
    inputs = []
    for name, value, datatype in [
        ("text", text, "BYTES"),
        ("beam_width", np.array(2, np.int32), "INT32"),
        ("max_length", np.array(5, np.int32), "INT32"),
    ]:
        inputs.append(grpcclient.InferInput(name, list(value.shape), datatype))
        inputs[-1].set_data_from_numpy(value)
    wanted = direct(
        translator.signatures,
        "translate",
        text=text,
        beam_width=np.int32(2),
        max_length=np.int32(5),
    )
    result = client.infer("tiny_translator", inputs)
    assert result.as_numpy("translation").tolist() == wanted["translation"].tolist()
    np.testing.assert_allclose(result.as_numpy("score"), wanted["score"], rtol=1e-5)
    client.close()


def _ready(client, name):
    try:
        return client.is_model_ready(name)
    except Exception:  # noqa: BLE001 - tritonclient raises its own error
        return False


def _v2_text(shape, contents=None, raw=None, datatype="BYTES"):
    request = MESSAGES["ModelInferRequest"](model_name="tiny_translator")
    tensor = request.inputs.add(name="text", datatype=datatype, shape=shape)
    if contents is not None:
        tensor.contents.bytes_contents.extend(contents)
    if raw is not None:
        request.raw_input_contents.append(raw)
    return request


@pytest.mark.parametrize(
    "request_, words",
    [
        (_v2_text([3], contents=[b"ab", b"c"]), "length-prefixed"),
        (_v2_text([2**40], contents=[b"ab"]), "max_request_bytes"),
        (_v2_text([1, 2**25, 0], contents=[b"ab"]), "holds no values"),
        (_v2_text([2], raw=b"\x02\x00\x00\x00ab"), "length-prefixed"),
        (_v2_text([1], raw=b"\x00" * 4, datatype="INT32"), "must be a string"),
        (_v2_text([1], raw=b"\x00", datatype="FP8"), "datatype must be"),
        (_v2_text([1], contents=[b"\xff\xfe"]), "not UTF-8"),
    ],
)
def test_v2_tensors_that_lie_are_refused_before_the_model(translator, request_, words):
    calls = translator.server.batcher.calls
    with pytest.raises(grpc.RpcError) as caught:
        translator.infer(request_)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in caught.value.details(), caught.value.details()
    assert translator.server.batcher.calls == calls


def _text_tensor(shape, values):
    tensor = tf.make_tensor_proto(np.array([b"ab"], object))
    tensor.tensor_shape.dim[0].size = shape[0]
    del tensor.string_val[:]
    tensor.string_val.extend(values)
    return tensor


@pytest.mark.parametrize(
    "inputs, words",
    [
        ({"text": _text_tensor([3], [b"ab", b"c"])}, "holds 2 values"),
        ({"text": _text_tensor([2**40], [b"ab"])}, "max_request_bytes"),
        ({"text": tf.make_tensor_proto(np.array([1.5], np.float32))}, "string"),
        ({"text": tf.make_tensor_proto(np.array([b"ab"] * 301, object))}, "max_rows"),
        ({"txt": tf.make_tensor_proto(np.array([b"ab"], object))}, "Signature"),
    ],
)
def test_tf_serving_tensors_that_lie_are_refused_before_the_model(
    translator, inputs, words
):
    calls = translator.server.batcher.calls
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny_translator"
    for key, tensor in inputs.items():
        request.inputs[key].CopyFrom(tensor)
    with pytest.raises(grpc.RpcError) as caught:
        translator.predict.Predict(request, timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in caught.value.details(), caught.value.details()
    assert translator.server.batcher.calls == calls


def test_an_oversized_message_and_a_missed_deadline_leave_the_server_answering(
    ram, monkeypatch
):
    big = np.zeros((1, 300, 300, 1), np.uint8)  # 90 kB > max_request_bytes 64 kB
    with pytest.raises(grpc.RpcError) as caught:
        ram.predict.Predict(_predict("tiny_ram", image=big), timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    run = ram.server.batcher.run

    def slow(name, inputs):
        time.sleep(1.0)
        return run(name, inputs)

    monkeypatch.setattr(ram.server.batcher, "run", slow)
    with pytest.raises(grpc.RpcError) as caught:
        ram.predict.Predict(_predict("tiny_ram", image=_images(1)), timeout=0.3)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    monkeypatch.setattr(ram.server.batcher, "run", run)
    answer = ram.predict.Predict(_predict("tiny_ram", image=_images(1)), timeout=30)
    assert "class_name" in answer.outputs


def test_stop_lets_the_call_under_way_finish():
    from zoo.serving.requests import Signatures, _demo_exported
    from zoo.serving.server import ModelServer

    server = ModelServer(
        ("127.0.0.1", 0), Signatures(_demo_exported()), model_name="lengths"
    )
    run = server.batcher.run
    server.batcher.run = lambda name, inputs: (time.sleep(1.0), run(name, inputs))[1]
    rpc = GrpcServer(server, "127.0.0.1", 0)
    rpc.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{rpc.port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = _predict("lengths", text=np.array([b"abc"], object))
    future = stub.Predict.future(request, timeout=TIMEOUT)
    time.sleep(0.3)  # The call is with the model.
    stopped = rpc.stop(TIMEOUT)
    answer = future.result()
    assert tf.make_ndarray(answer.outputs["length"]).tolist() == [3]
    assert stopped.wait(TIMEOUT)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Predict(request, timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()
    server.server_close()


def test_zoo_serve_answers_grpc_and_sigterm_drains_it(tmp_path):
    import signal
    import subprocess

    from serving_helpers import free_port

    base = tmp_path / "tiny_ram"
    export_classifier(tiny_models.exportable_ram(1, "rnn"), base / "1")
    port, grpc_port = free_port(), free_port()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "serve", str(base), "--port", str(port)]
        + ["--grpc-port", str(grpc_port)],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert f"gRPC: 127.0.0.1:{grpc_port}" in line, process.stderr.read()[-3000:]
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        request = _predict("tiny_ram", image=_images(300))
        assert "class_id" in stub.Predict(request, timeout=TIMEOUT).outputs
        future = stub.Predict.future(request, timeout=TIMEOUT)
        time.sleep(0.3)  # On its way, or answered.
        process.send_signal(signal.SIGTERM)
        assert len(tf.make_ndarray(future.result().outputs["class_id"])) == 300
        assert process.wait(TIMEOUT) == 0
        assert "Stopped" in process.stdout.read()
        channel.close()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(TIMEOUT)


def test_a_busy_port_is_an_error_unless_it_is_the_default(monkeypatch, capsys):
    import socket

    from zoo.serving import grpc_server
    from zoo.serving.requests import Signatures, _demo_exported
    from zoo.serving.server import ModelServer

    server = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            grpc_server.start(server, "127.0.0.1", port)
        monkeypatch.setattr(grpc_server, "DEFAULT_PORT", port)
        assert grpc_server.start(server, "127.0.0.1") is None
        assert capsys.readouterr().err.startswith("warning: gRPC cannot listen")
    assert grpc_server.start(server, "127.0.0.1", 0) is None
    with pytest.raises(ValueError, match="grpc_port"):
        grpc_server.start(server, "127.0.0.1", 70000)
    server.server_close()


def test_one_client_holding_its_calls_does_not_starve_another():
    # HTTP/2 carries many calls on one connection: `max_client_connections`
    # caps a client's calls under way (by its host, 127.0.0.1 or ::1 here),
    # refused before their messages are read, so that one client cannot
    # take every place (`workers + max_queued`) from the others.
    import threading

    from zoo.serving.requests import Limits, Signatures, _demo_exported
    from zoo.serving.server import ModelServer

    limits = Limits(workers=1, max_queued=3, max_client_connections=2, read_timeout=1.0)
    server = ModelServer(
        ("127.0.0.1", 0), Signatures(_demo_exported(), limits), model_name="lengths"
    )
    run, gate, never = server.batcher.run, threading.Event(), threading.Event()
    server.batcher.run = lambda name, inputs: (gate.wait(TIMEOUT), run(name, inputs))[1]
    rpc = GrpcServer(server, "localhost", 0)  # Both loopbacks: two client hosts.
    rpc.start()
    first, second = (
        grpc.insecure_channel(f"{host}:{rpc.port}") for host in ("127.0.0.1", "[::1]")
    )
    stub, other = map(
        prediction_service_pb2_grpc.PredictionServiceStub, (first, second)
    )
    request = _predict("lengths", text=np.array([b"abc"], object))
    try:
        held = [stub.Predict.future(request, timeout=TIMEOUT) for _ in range(2)]
        time.sleep(0.5)  # One with the model, one waiting for the worker.
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            stub.Predict(request, timeout=TIMEOUT)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "2 calls under way (max_client_connections)" in caught.value.details()
        assert time.monotonic() - started < 5  # Refused at once, not queued.
        answer = other.Predict.future(request, timeout=TIMEOUT)  # A place is free.
        time.sleep(0.3)
        gate.set()
        for call in (*held, answer):
            assert tf.make_ndarray(call.result().outputs["length"]).tolist() == [3]
        # Every place is given back, whatever ended the call: a refusal, a
        # bad request, a missed deadline, a cancelled call.
        gate.clear()
        cancelled = stub.Predict.future(request, timeout=TIMEOUT)
        time.sleep(0.3)
        cancelled.cancel()
        with pytest.raises(grpc.RpcError):
            stub.Predict(request, timeout=0.3)
        gate.set()
        with pytest.raises(grpc.RpcError) as caught:
            stub.Predict(_predict("lengths", text=np.array([1], np.int32)))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        both = [stub.Predict.future(request, timeout=TIMEOUT) for _ in range(2)]
        assert [len(call.result().outputs) for call in both] == [1, 1]
        metrics = server.metrics.text().decode()
        assert 'zoo_serve_refusals_total{limit="max_client_connections"} 1.0' in metrics
        # A call whose message never comes holds the worker for read_timeout.
        silent = first.stream_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=predict_pb2.PredictRequest.SerializeToString,
            response_deserializer=predict_pb2.PredictResponse.FromString,
        )
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            silent(iter(never.wait, True), timeout=TIMEOUT)  # Sends nothing.
        assert caught.value.code() == grpc.StatusCode.CANCELLED
        assert 1.0 <= time.monotonic() - started < 10
        assert len(stub.Predict(request, timeout=TIMEOUT).outputs) == 1
        assert 'zoo_serve_refusals_total{limit="read_timeout"} 1.0' in (
            server.metrics.text().decode()
        )
    finally:
        never.set()
        gate.set()
        first.close()
        second.close()
        rpc.stop(TIMEOUT).wait()
        server.server_close()

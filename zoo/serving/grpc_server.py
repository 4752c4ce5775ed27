"""gRPC beside `zoo.serving.server`'s HTTP: TF Serving's and KServe v2's services.

`GrpcServer(model_server, host, port)` answers, on its own port (TF
Serving's 8500 by default in `serve`), with `grpcio`:

- TensorFlow Serving's `tensorflow.serving.PredictionService` (`Predict`,
  `GetModelMetadata`) and `tensorflow.serving.ModelService`
  (`GetModelStatus`), with the messages of `tensorflow-serving-api`, so
  that its `PredictionServiceStub` works unchanged: inputs are
  `TensorProto`s of the signature's dtype.
- KServe v2's `inference.GRPCInferenceService` (`ServerLive`,
  `ServerReady`, `ModelReady`, `ServerMetadata`, `ModelMetadata`,
  `ModelInfer`), with `zoo.serving.v2_messages`, so that
  `tritonclient.grpc` works unchanged: tensors in typed `contents` or in
  `raw_input_contents` (what `tritonclient.grpc` sends); outputs in
  `raw_output_contents`, as Triton answers.

Both run requests on the HTTP server's `Batcher` and check them with its
`Signatures` and `Limits`: a message over `max_request_bytes` is refused by
gRPC itself (`RESOURCE_EXHAUSTED`); each tensor's declared shape is checked
against its bytes before anything is built (`zoo.serving.grpc_tensors`, as
`zoo.serving.v2_binary` checks binary tensors), then rows, beams and pixels
as on HTTP; a request waits for the model at most the shorter of
`request_timeout` and the client's deadline (`DEADLINE_EXCEEDED`). The server holds at most
`workers + max_queued` calls at once (one more is `RESOURCE_EXHAUSTED`), of
which `workers` read and run their requests while the others wait; one
client (the host of `context.peer()`: HTTP/2 carries many calls on one
connection) may hold `max_client_connections` of them, and its next call
is `RESOURCE_EXHAUSTED` before its message is read, so that one client
cannot take every place; a message must arrive within `read_timeout` (else
the call is cancelled). A refusal is the gRPC status of the HTTP one
(`INVALID_ARGUMENT` for a 400, `NOT_FOUND` for a 404, ...) with the same
message; the server answers the next call.

Example (a client of each service; `serve` starts one beside the HTTP server):
>>> import threading
>>> import grpc
>>> import numpy as np
>>> import tensorflow as tf
>>> from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
>>> from zoo.serving.requests import Signatures, _demo_exported
>>> from zoo.serving.server import ModelServer
>>> http = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()),
...     model_name="lengths")
>>> server = GrpcServer(http, "127.0.0.1", 0)
>>> server.start()
>>> channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
>>> stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
>>> request = predict_pb2.PredictRequest()
>>> request.model_spec.name = "lengths"
>>> request.inputs["text"].CopyFrom(tf.make_tensor_proto([b"ab", b"c"]))
>>> tf.make_ndarray(stub.Predict(request, timeout=30).outputs["length"]).tolist()
[2, 1]
>>> request.model_spec.name = "other"
>>> try:
...     stub.Predict(request, timeout=30)
... except grpc.RpcError as error:
...     print(error.code(), error.details())
StatusCode.NOT_FOUND Servable not found for request: Latest(other)
>>> channel.close()
>>> server.stop(5).wait()
True
>>> http.server_close()
"""

import concurrent.futures
import sys
import threading
import time
from http import HTTPStatus

import grpc
import numpy as np

from keras_attention.arguments import int_argument
from zoo.serving import tf_serving, v2_binary
from zoo.serving import v2_protocol as serving_v2
from zoo.serving.connections import ClientSlots, peer_host
from zoo.serving.grpc_tensors import (  # noqa: F401 - CONTENTS, TENSOR_VALUES: here too
    CONTENTS,
    TENSOR_VALUES,
    tf_value,
    v2_body,
)
from zoo.serving.requests import RequestError
from zoo.serving.v2_messages import MESSAGES, METHODS, SERVICE
from zoo.version import __version__

#: TF Serving's gRPC port, `serve`'s default.
DEFAULT_PORT = 8500
#: The gRPC status of each HTTP status a request is refused with.
CODES = {
    HTTPStatus.BAD_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    HTTPStatus.FORBIDDEN: grpc.StatusCode.PERMISSION_DENIED,
    HTTPStatus.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    HTTPStatus.REQUEST_TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    HTTPStatus.TOO_MANY_REQUESTS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    HTTPStatus.SERVICE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    HTTPStatus.GATEWAY_TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
}


class GrpcServer:
    """TF Serving's and KServe v2's gRPC services over a `ModelServer`'s model.

    Args:
        model_server: a `zoo.serving.server.ModelServer`: its signatures,
            limits, batcher, metrics, model name and version.
        host: str. Defaults to `"127.0.0.1"`.
        port: int. `0` picks a free one (`port` tells which). Defaults to
            `8500`.

    Raises:
        OSError: the port cannot be bound (in use, say).

    Example (the module's shows a client of each service):
    >>> from zoo.serving.requests import Signatures, _demo_exported
    >>> from zoo.serving.server import ModelServer
    >>> http = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
    >>> server = GrpcServer(http, "127.0.0.1", 0)
    >>> server.port > 0
    True
    >>> GrpcServer(http, "127.0.0.1", server.port)
    Traceback (most recent call last):
    ...
    OSError: gRPC cannot listen on 127.0.0.1:...
    >>> http.server_close()
    """

    def __init__(self, model_server, host="127.0.0.1", port=8500):
        self.model = model_server
        limits = model_server.limits
        places = limits.workers + limits.max_queued
        # Every call held has a thread, so that its client is counted as it
        # comes; `workers` of them read and run requests at once.
        self._clients = ClientSlots(limits.max_client_connections)
        self._running = threading.BoundedSemaphore(limits.workers)
        # Calls whose message is still coming, and when it must have come.
        self._receiving, self._lock = {}, threading.Lock()
        self._closed = threading.Event()
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(
                places, thread_name_prefix="zoo-grpc"
            ),
            maximum_concurrent_rpcs=places,
            options=[
                ("grpc.max_receive_message_length", limits.max_request_bytes),
                ("grpc.so_reuseport", 0),  # A port in use is an error.
            ],
        )
        self._server.add_generic_rpc_handlers(self._handlers())
        try:
            self.port = self._server.add_insecure_port(f"{host}:{port}")
        except RuntimeError as error:
            raise OSError(f"gRPC cannot listen on {host}:{port}: {error}") from None

    def start(self):
        """Starts answering (in gRPC's threads).

        Example:
        >>> from zoo.serving.requests import Signatures, _demo_exported
        >>> from zoo.serving.server import ModelServer
        >>> http = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
        >>> server = GrpcServer(http, "127.0.0.1", 0)
        >>> server.start()
        >>> with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        ...     grpc.channel_ready_future(channel).result(timeout=30)  # connects
        >>> server.stop(0).wait(30)
        True
        >>> http.server_close()
        """
        self._server.start()
        threading.Thread(target=self._watch, daemon=True, name="zoo-grpc-watch").start()

    def stop(self, grace):
        """Stops taking calls; those under way have `grace` seconds to finish.

        Returns:
            A `threading.Event`, set once every call has ended.

        Example:
        >>> from zoo.serving.requests import Signatures, _demo_exported
        >>> from zoo.serving.server import ModelServer
        >>> http = ModelServer(("127.0.0.1", 0), Signatures(_demo_exported()))
        >>> server = GrpcServer(http, "127.0.0.1", 0)
        >>> server.start()
        >>> server.stop(5).wait(30)
        True
        >>> with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        ...     grpc.channel_ready_future(channel).result(timeout=0.5)
        Traceback (most recent call last):
        ...
        grpc.FutureTimeoutError
        >>> http.server_close()
        """
        self._closed.set()
        return self._server.stop(grace)

    def _handlers(self):
        from tensorflow_serving.apis import (
            get_model_metadata_pb2,
            get_model_status_pb2,
            predict_pb2,
        )

        def unary(method, request, protocol):
            # Wire-compatible with a unary call, a stream-unary handler sees
            # the call before its message is read: the caps come first.
            return grpc.stream_unary_rpc_method_handler(
                self._answering(method, protocol),
                request_deserializer=request.FromString,
                response_serializer=lambda message: message.SerializeToString(),
            )

        tf_serving_methods = {
            "Predict": unary(self._predict, predict_pb2.PredictRequest, "tf"),
            "GetModelMetadata": unary(
                self._tf_metadata, get_model_metadata_pb2.GetModelMetadataRequest, "tf"
            ),
        }
        status = unary(
            self._tf_status, get_model_status_pb2.GetModelStatusRequest, "tf"
        )
        v2 = {
            name: unary(getattr(self, "_v2_" + name), MESSAGES[request], "v2")
            for name, (request, _) in METHODS.items()
        }
        return (
            grpc.method_handlers_generic_handler(
                "tensorflow.serving.PredictionService", tf_serving_methods
            ),
            grpc.method_handlers_generic_handler(
                "tensorflow.serving.ModelService", {"GetModelStatus": status}
            ),
            grpc.method_handlers_generic_handler(SERVICE, v2),
        )

    def _answering(self, method, protocol):
        """`method` on the call's message, within the caps, its refusals counted."""
        protocol = {"tf": "tf_serving_grpc", "v2": "kserve_v2_grpc"}[protocol]

        def answer(messages, context):
            started, status, error_text = time.monotonic(), HTTPStatus.OK, None
            client, counted, working = peer_host(context.peer()), False, False
            try:
                counted = self._count(client)
                working = self._wait_for_worker(context)
                return method(self._receive(messages, context), context)
            except grpc.RpcError:  # gRPC ended the call (a message too large...).
                status = HTTPStatus.BAD_REQUEST
            except RequestError as error:
                status, error_text = error.status, str(error)
                code = CODES.get(error.status, grpc.StatusCode.INTERNAL)
                context.abort(code, error_text)
            except Exception as error:  # noqa: BLE001 - answered, the server lives on
                print(f"zoo serve: gRPC {method.__name__}: {error!r}", file=sys.stderr)
                status = HTTPStatus.INTERNAL_SERVER_ERROR
                context.abort(
                    grpc.StatusCode.INTERNAL,
                    f"The server failed: {type(error).__name__}",
                )
            finally:
                if working:
                    self._running.release()
                if counted:
                    self._clients.give_back(client)
                elapsed = time.monotonic() - started
                self.model.metrics.answered(protocol, status, elapsed, error_text)

        return answer

    def _receive(self, messages, context):
        """The call's message; the call is cancelled if it takes `read_timeout`."""
        timeout = self.model.limits.read_timeout
        with self._lock:
            self._receiving[context] = time.monotonic() + timeout
        try:
            request = next(messages, None)
        except grpc.RpcError:
            if self._receiving.get(context, float("inf")) > time.monotonic():
                raise  # Ended by gRPC or the client, not for its time.
            request = None
        finally:
            with self._lock:
                end = self._receiving.pop(context, float("inf"))
        # Cancelled by `_watch`: gRPC raises, or ends the messages, by a race.
        if request is None and end <= time.monotonic():
            raise RequestError(
                f"The request message did not arrive within {timeout:g} s "
                "(read_timeout).",
                status=HTTPStatus.REQUEST_TIMEOUT,
            )
        if request is None:
            raise RequestError("The call carries no request message.")
        return request

    def _watch(self):
        """Cancels the calls whose message has not come in `read_timeout`."""
        while not self._closed.wait(0.2):
            now = time.monotonic()
            with self._lock:
                late = [c for c, end in self._receiving.items() if end < now]
            for context in late:
                context.cancel()

    def _count(self, client):
        """Counts a call of `client` (`True`), or refuses one over its share."""
        if self._clients.take(client):
            return True
        limit = self.model.limits.max_client_connections
        raise RequestError(
            f"This client has {limit} calls under way (max_client_connections): "
            "wait for one to end, or retry later.",
            status=HTTPStatus.TOO_MANY_REQUESTS,
        )

    def _wait_for_worker(self, context):
        """Takes one of the `workers` (`True`) within the timeout and the deadline."""
        timeout = self.model.limits.request_timeout
        left = context.time_remaining()
        wait = timeout if left is None else min(timeout, max(left, 0.0))
        if self._running.acquire(timeout=wait):
            return True
        if left is not None and left < timeout:
            raise RequestError(
                f"No worker was free within the call's deadline ({left:.3g} s).",
                status=HTTPStatus.GATEWAY_TIMEOUT,
            )
        raise RequestError(
            f"Every worker was busy for {timeout:g} s (request_timeout): retry later.",
            status=HTTPStatus.SERVICE_UNAVAILABLE,
        )

    def _run(self, parsed, context):
        """The outputs, waiting at most `request_timeout` or the client's deadline."""
        timeout = self.model.limits.request_timeout
        left = context.time_remaining()
        if left is None or left >= timeout:
            return self.model.run(parsed, timeout)
        try:
            return self.model.run(parsed, max(left, 0.0))
        except RequestError as error:
            if error.status != HTTPStatus.SERVICE_UNAVAILABLE:
                raise
            raise RequestError(
                f"The model did not answer within the call's deadline ({left:.3g} s).",
                status=HTTPStatus.GATEWAY_TIMEOUT,
            ) from None

    # TF Serving's services.

    def _tf_model(self, spec):
        """TF Serving's 404 unless `spec` (a `ModelSpec`) names this model."""
        model = self.model
        version = spec.version.value if spec.HasField("version") else None
        if spec.name != model.model_name or version not in (None, int(model.version)):
            which = f"Specific({spec.name}, {version})" if version else None
            raise RequestError(
                f"Servable not found for request: {which or f'Latest({spec.name})'}",
                status=HTTPStatus.NOT_FOUND,
            )
        if spec.version_label:
            raise RequestError(
                "This server has no version labels. Received: label "
                f"{spec.version_label!r}",
                status=HTTPStatus.NOT_FOUND,
            )

    def _model_spec(self, spec, signature_name=""):
        spec.name = self.model.model_name
        spec.version.value = int(self.model.version)
        spec.signature_name = signature_name

    def _predict(self, request, context):
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        self._tf_model(request.model_spec)
        signatures = self.model.signatures
        name = request.model_spec.signature_name or "serving_default"
        if name not in signatures.functions:
            raise RequestError(
                f'Serving signature name: "{name}" not found in signature def '
                f"(the export has {sorted(signatures.functions)})."
            )
        specs = signatures.inputs[name]
        limit = self.model.limits.max_request_bytes
        fields = {
            key: tf_value(key, tensor, specs[key], limit) if key in specs else None
            for key, tensor in request.inputs.items()
        }
        parsed = signatures.check(name, fields, base64_strings=False)
        outputs = self._run(parsed, context)
        wanted = list(request.output_filter) or sorted(outputs)
        unknown = sorted(set(wanted) - set(outputs))
        if unknown:
            raise RequestError(
                f"output_filter names {unknown}, which signature {name!r} does "
                f"not give (it gives {sorted(outputs)})."
            )
        response = predict_pb2.PredictResponse()
        self._model_spec(response.model_spec, name)
        for key in wanted:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
        return response

    def _tf_metadata(self, request, context):
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_metadata_pb2

        self._tf_model(request.model_spec)
        fields = list(request.metadata_field)
        if fields != ["signature_def"]:
            raise RequestError(
                "metadata_field must be ['signature_def'], the one this server "
                f"gives. Received: {fields[:4]}"
            )
        model = self.model
        answer = tf_serving.metadata(model.signatures, model.model_name, model.version)
        definitions = json_format.ParseDict(
            answer["metadata"]["signature_def"],
            get_model_metadata_pb2.SignatureDefMap(),
        )
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        self._model_spec(response.model_spec)
        response.metadata["signature_def"].Pack(definitions)
        return response

    def _tf_status(self, request, context):
        from tensorflow_serving.apis import get_model_status_pb2

        self._tf_model(request.model_spec)
        response = get_model_status_pb2.GetModelStatusResponse()
        status = response.model_version_status.add(version=int(self.model.version))
        status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        return response

    # KServe v2's service.

    def _v2_model(self, name, version):
        model = self.model
        if name != model.model_name or version not in ("", model.version):
            raise RequestError(
                f"No model {name!r} (version {version or None}): this server has "
                f"{model.model_name!r} version {model.version}.",
                status=HTTPStatus.NOT_FOUND,
            )

    def _v2_ServerLive(self, request, context):
        return MESSAGES["ServerLiveResponse"](live=True)

    def _v2_ServerReady(self, request, context):
        return MESSAGES["ServerReadyResponse"](ready=True)

    def _v2_ModelReady(self, request, context):
        self._v2_model(request.name, request.version)
        return MESSAGES["ModelReadyResponse"](ready=True)

    def _v2_ServerMetadata(self, request, context):
        return MESSAGES["ServerMetadataResponse"](
            **serving_v2.server_metadata(__version__)
        )

    def _v2_ModelMetadata(self, request, context):
        self._v2_model(request.name, request.version)
        model = self.model
        answer = serving_v2.metadata(model.signatures, model.model_name, model.version)
        return MESSAGES["ModelMetadataResponse"](**answer)

    def _v2_ModelInfer(self, request, context):
        self._v2_model(request.model_name, request.model_version)
        model = self.model
        limit = model.limits.max_request_bytes
        body, binary = v2_body(request, limit)
        v2_binary.inline(body, binary, limit)
        parsed = serving_v2.parse(model.signatures, body)
        function = model.signatures.functions[parsed.signature]
        _, wanted = serving_v2.request_options(body, function.structured_outputs)
        outputs = self._run(parsed, context)
        response = MESSAGES["ModelInferResponse"](
            model_name=model.model_name, model_version=model.version, id=request.id
        )
        for key in wanted:
            value = np.asarray(outputs[key])
            datatype = "BYTES"
            if value.dtype != object:
                datatype = serving_v2.DATATYPES.get(value.dtype.name, "BYTES")
            response.outputs.add(name=key, datatype=datatype, shape=value.shape)
            response.raw_output_contents.append(v2_binary.tensor_bytes(value))
        return response


def start(model_server, host="127.0.0.1", port=None):
    """Starts a `GrpcServer` beside `model_server` for `serve`, or `None` for none.

    Args:
        model_server: a `zoo.serving.server.ModelServer`.
        host: str. Defaults to `"127.0.0.1"`.
        port: int or `None`. `0` serves no gRPC; `None` (the default)
            serves it on `DEFAULT_PORT` if that port is free, else prints a
            warning and serves none; any other port must be free.

    Raises:
        OSError: `port` (not `None`) cannot be bound.
    """
    port = int_argument("grpc_port", port, minimum=0, maximum=65535, allowed=(None,))
    if port == 0:
        return None
    try:
        server = GrpcServer(model_server, host, DEFAULT_PORT if port is None else port)
    except OSError as error:
        if port is not None:
            raise
        print(
            f"warning: {error}: serving HTTP only (--grpc-port N serves gRPC "
            "on another port, 0 on none).",
            file=sys.stderr,
        )
        return None
    server.start()
    return server

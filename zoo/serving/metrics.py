"""`zoo.serving.server`'s Prometheus metrics, answered on `GET /metrics`.

One `ServerMetrics` a server, in its own registry (two servers in one
process count apart), in Prometheus' text format (`prometheus-client`):

- `zoo_serve_requests_total{protocol, model, status}`: answered requests;
  `protocol` is `tf_serving`, `kserve_v2`, `zoo` (the zoo's own paths),
  `metrics` (the scrapes), or `tf_serving_grpc` and `kserve_v2_grpc`
  (`zoo.serving.grpc_server`, whose `status` is the HTTP status of the
  gRPC one).
- `zoo_serve_request_seconds{protocol, model}`: a histogram of the time
  from the request's head to its answer.
- `zoo_serve_model_call_rows{model}`: a histogram of the rows of each model
  call (what the batcher gathered).
- `zoo_serve_queued_connections`: accepted connections waiting for a worker;
  `zoo_serve_waiting_requests{model}`: requests waiting for the model.
- `zoo_serve_refusals_total{limit}`: requests refused by a limit
  (`max_rows`, `read_timeout`, `max_client_connections`, ... : the
  `zoo.serving.requests.Limits` field).

Example:
>>> metrics = ServerMetrics("lengths", queued=lambda: 0)
>>> metrics.answered("zoo", 400, 0.01, "`text` holds 9 rows; the limit is 8 (max_rows).")
>>> text = metrics.text().decode()
>>> 'zoo_serve_refusals_total{limit="max_rows"} 1.0' in text
True
>>> 'zoo_serve_requests_total{model="lengths",protocol="zoo",status="400"} 1.0' in text
True
"""

import dataclasses
import re

import prometheus_client as prometheus

from zoo.serving.requests import Limits

#: The media type of `text()`.
CONTENT_TYPE = prometheus.CONTENT_TYPE_LATEST
#: Each limit's name, as a refusal's message names it.
_LIMIT = re.compile(
    r"\b(" + "|".join(f.name for f in dataclasses.fields(Limits)) + r")\b"
)
#: The limit behind a status whose message does not name one.
_STATUS_LIMITS = {408: "read_timeout", 413: "max_request_bytes"}
#: Rows a model call may hold, as histogram buckets.
_ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServerMetrics:
    """The counters, histograms and gauges of one server.

    Args:
        model: str. The model's name, the `model` label.
        queued: callable returning the count of connections waiting for a
            worker.

    Example:
    >>> metrics = ServerMetrics("lengths", queued=lambda: 3)
    >>> b"zoo_serve_queued_connections 3.0" in metrics.text()
    True
    """

    def __init__(self, model, queued):
        self.model = model
        self.registry = prometheus.CollectorRegistry()
        options = {"registry": self.registry}
        self.requests = prometheus.Counter(
            "zoo_serve_requests",
            "Requests answered, by protocol, model and HTTP status.",
            ["protocol", "model", "status"],
            **options,
        )
        self.seconds = prometheus.Histogram(
            "zoo_serve_request_seconds",
            "Seconds from a request's head to its answer.",
            ["protocol", "model"],
            **options,
        )
        self.rows = prometheus.Histogram(
            "zoo_serve_model_call_rows",
            "Rows of each model call.",
            ["model"],
            buckets=_ROW_BUCKETS,
            **options,
        )
        self.waiting = prometheus.Gauge(
            "zoo_serve_waiting_requests",
            "Requests waiting for the model.",
            ["model"],
            **options,
        ).labels(model)
        self.refusals = prometheus.Counter(
            "zoo_serve_refusals",
            "Requests refused by a limit (a zoo serve flag).",
            ["limit"],
            **options,
        )
        prometheus.Gauge(
            "zoo_serve_queued_connections",
            "Accepted connections waiting for a worker.",
            **options,
        ).set_function(queued)

    def answered(self, protocol, status, seconds, error=None):
        """Counts an answer: its status, its time and the limit it names.

        Example:
        >>> metrics = ServerMetrics("m", queued=lambda: 0)
        >>> metrics.answered("kserve_v2", 408, 10.0, "The body stopped after 3 bytes.")
        >>> b'zoo_serve_refusals_total{limit="read_timeout"} 1.0' in metrics.text()
        True
        """
        self.requests.labels(protocol, self.model, str(int(status))).inc()
        self.seconds.labels(protocol, self.model).observe(seconds)
        if error is not None:
            found = _LIMIT.search(error)
            limit = found[1] if found else _STATUS_LIMITS.get(int(status))
            if limit:
                self.refusals.labels(limit).inc()

    def refused(self, limit):
        """Counts a connection turned away before its request was read.

        Example:
        >>> metrics = ServerMetrics("m", queued=lambda: 0)
        >>> metrics.refused("max_queued")
        >>> b'zoo_serve_refusals_total{limit="max_queued"} 1.0' in metrics.text()
        True
        """
        self.refusals.labels(limit).inc()

    def counting(self, run):
        """`run(name, inputs)` that records each call's rows first.

        Example:
        >>> import numpy as np
        >>> metrics = ServerMetrics("m", queued=lambda: 0)
        >>> run = metrics.counting(lambda name, inputs: {"n": len(inputs["x"])})
        >>> run("serve", {"x": np.zeros(5), "beam_width": np.array(2)})
        {'n': 5}
        >>> b'zoo_serve_model_call_rows_sum{model="m"} 5.0' in metrics.text()
        True
        """

        def call(name, inputs):
            rows = next((len(v) for v in inputs.values() if v.ndim), 1)
            self.rows.labels(self.model).observe(rows)
            return run(name, inputs)

        return call

    def text(self):
        """The metrics in Prometheus' text format (bytes).

        Example:
        >>> ServerMetrics("m", queued=lambda: 0).text().splitlines()[0]
        b'# HELP zoo_serve_requests_total Requests answered, by protocol, model and HTTP status.'
        """
        return prometheus.generate_latest(self.registry)

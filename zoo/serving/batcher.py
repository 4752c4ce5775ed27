"""`Batcher`: the one thread that runs `zoo.serving.server`'s requests on the model.

Concurrent requests share model calls of at most `max_rows` rows (and
`max_cost` pixels); a large request is split over several calls, and a
request that arrives meanwhile joins the next one, so that it waits for at
most one call rather than for the whole large request.
"""

import queue
import threading
import time
from http import HTTPStatus

import numpy as np

from zoo.serving.requests import RequestError


class _Pending:
    """One request in the `Batcher`: its inputs, rows done so far, outputs."""

    def __init__(self, name, inputs, rows, costs=None):
        self.name = name
        self.inputs = inputs
        self.rows = rows
        self.costs = None if costs is None else np.asarray(costs, np.int64)
        # Requests with equal keys can share a model call.
        self.key = (name,) + tuple(
            (k, v.shape[1:], v.item() if v.ndim == 0 else None)
            for k, v in sorted(inputs.items())
        )
        self.done = threading.Event()
        self.next = 0  # The first row not yet run.
        self.parts = []
        self.outputs = None
        self.error = None
        self.cancelled = False

    def rows_of(self, start, end):
        return {k: v if v.ndim == 0 else v[start:end] for k, v in self.inputs.items()}

    def finish(self, outputs=None, error=None):
        self.outputs, self.error = outputs, error
        self.done.set()


class Batcher:
    """Runs concurrent requests on one thread, in turns of bounded model calls.

    A request that arrives while the thread is idle waits at most `delay`
    seconds for others to join it. Each model call takes at most `max_rows`
    rows (and `max_cost` pixels, for images) from the waiting requests that
    go to the same signature with inputs of the same shape (and the same
    scalar inputs): new requests first, then those already partly run, so
    that a large request is split over several calls and a small one that
    arrives meanwhile runs in the next call. When a call fails, its
    requests are run one by one, so a bad request fails alone.

    Args:
        run: callable `(signature, inputs) -> outputs` (NumPy dicts).
        delay: float. Seconds to wait for more requests. Defaults to
            `0.005`.
        max_rows: int. Rows per call. Defaults to `64`.
        max_cost: optional int. Sum of the rows' costs (pixels) per call.
        timeout: float. Seconds `submit` waits for an answer. Defaults to
            `60`.

    Example:
    >>> batcher = Batcher(lambda name, x: {"double": 2 * x["x"]}, max_rows=2)
    >>> batcher.submit("f", {"x": np.arange(5)}, 5)["double"].tolist()
    [0, 2, 4, 6, 8]
    >>> batcher.calls  # Five rows in calls of two.
    3
    >>> batcher.close()
    """

    def __init__(self, run, delay=0.005, max_rows=64, max_cost=None, timeout=60.0):
        self.run = run
        self.delay = delay
        self.max_rows = max_rows
        self.max_cost = max_cost
        self.timeout = timeout
        self.calls = 0
        self.requests = 0
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def submit(self, name, inputs, rows, costs=None, timeout=None):
        """Queues one request and waits for its outputs (or raises its error).

        Args:
            name: str. The signature to run.
            inputs: dict of NumPy arrays (`Signatures.parse`'s).
            rows: int. The request's batch size.
            costs: optional sequence of each row's cost (pixels).
            timeout: float. Seconds to wait, then a 503 (and the request's
                rows not yet run are dropped). Defaults to the batcher's.

        Example:
        >>> def run(name, inputs):
        ...     if (inputs["x"] < 0).any():
        ...         raise ValueError("negative")
        ...     return {"double": 2 * inputs["x"]}
        >>> batcher = Batcher(run)
        >>> batcher.submit("f", {"x": np.array([1, 2])}, 2)["double"].tolist()
        [2, 4]
        >>> batcher.submit("f", {"x": np.array([-1])}, 1)
        Traceback (most recent call last):
        ...
        zoo.serving.requests.RequestError: The model failed: ValueError
        >>> batcher.close()
        """
        timeout = self.timeout if timeout is None else timeout
        pending = _Pending(name, inputs, rows, costs)
        self.requests += 1
        self._queue.put(pending)
        if not pending.done.wait(timeout):
            pending.cancelled = True
            raise RequestError(
                f"The model did not answer within {timeout:g} s "
                "(the server's request_timeout).",
                status=HTTPStatus.SERVICE_UNAVAILABLE,
            )
        if pending.error is not None:
            raise pending.error
        return pending.outputs

    def close(self):
        """Stops the batching thread once the queued requests are done.

        Example:
        >>> batcher = Batcher(lambda name, x: {"y": x["x"] + 1})
        >>> batcher.submit("f", {"x": np.zeros(2)}, 2)["y"].tolist()
        [1.0, 1.0]
        >>> batcher.close()
        >>> batcher.calls, batcher.requests
        (1, 1)
        """
        self._queue.put(None)
        self._thread.join()

    def _loop(self):
        waiting, stop = [], False
        while not (stop and not waiting):
            if not waiting:
                first = self._queue.get()
                if first is None:
                    return
                self._admit(waiting, first)
                end = time.monotonic() + self.delay
                while sum(p.rows for p in waiting) < self.max_rows:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        pending = self._queue.get(timeout=left)
                    except queue.Empty:
                        break
                    if pending is None:
                        stop = True
                        break
                    self._admit(waiting, pending)
            while True:  # Requests that came while the model ran join now.
                try:
                    pending = self._queue.get_nowait()
                except queue.Empty:
                    break
                if pending is None:
                    stop = True
                else:
                    self._admit(waiting, pending)
            waiting = [p for p in waiting if not p.cancelled]
            if not waiting:
                continue
            batch = self._take(waiting)
            self._run(batch)
            served = [p for p, _, _ in batch]
            waiting = [p for p in waiting if p not in served] + [
                p for p in served if not p.done.is_set()
            ]

    @staticmethod
    def _admit(waiting, pending):
        """New requests go before those already partly run (in arrival order)."""
        started = [i for i, p in enumerate(waiting) if p.next > 0]
        waiting.insert(started[0] if started else len(waiting), pending)

    def _take(self, waiting):
        """`[(request, start, end)]`: rows for one call, in `waiting`'s order."""
        key = waiting[0].key
        rows, cost, batch = self.max_rows, self.max_cost, []
        for pending in waiting:
            if pending.key != key:
                continue
            take = min(rows, pending.rows - pending.next)
            if pending.costs is not None and cost is not None:
                costs = np.cumsum(pending.costs[pending.next : pending.next + take])
                fits = int(np.searchsorted(costs, cost, side="right"))
                take = min(take, fits if fits or batch else 1)
                cost -= int(costs[take - 1]) if take else 0
            if take == 0:
                break
            batch.append((pending, pending.next, pending.next + take))
            rows -= take
            if rows == 0:
                break
        return batch

    def _run(self, batch):
        first = batch[0][0]
        try:
            inputs = {
                k: v
                if v.ndim == 0
                else np.concatenate([p.inputs[k][s:e] for p, s, e in batch])
                for k, v in first.inputs.items()
            }
            self.calls += 1
            outputs = self.run(first.name, inputs)
        except Exception as error:  # noqa: BLE001 - reported to the requests
            if len(batch) > 1:
                for piece in batch:
                    self._run([piece])
            else:
                first.finish(error=_model_error(error))
            return
        offset = 0
        for pending, start, end in batch:
            count = end - start
            pending.parts.append(
                {k: v[offset : offset + count] for k, v in outputs.items()}
            )
            offset += count
            pending.next = end
            if end == pending.rows:
                parts = pending.parts
                pending.finish(
                    {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
                )


# Lines of a TensorFlow error that locate it rather than say what is wrong.
_TRACE_LINES = ("Graph execution error", "Detected at node", "<stack", "[[")


def _model_error(error):
    """A model failure as a 400 (bad input the graph refused) or a 500."""
    import tensorflow as tf

    if isinstance(error, RequestError):
        return error
    if isinstance(error, tf.errors.InvalidArgumentError):
        lines = str(getattr(error, "message", error)).splitlines()
        said = [line.strip() for line in lines if line.strip()]
        said = [line for line in said if not line.startswith(_TRACE_LINES)] or said
        return RequestError(f"The model refused the input: {said[0][:300]}")
    return RequestError(
        f"The model failed: {type(error).__name__}",
        status=HTTPStatus.INTERNAL_SERVER_ERROR,
    )

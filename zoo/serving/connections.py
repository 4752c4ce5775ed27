"""What `zoo.serving.server` checks of a connection and of a request's head.

`check_head` refuses, before the body is read, a request that two parts of
a network could read differently (RFC 9112): differing `Content-Length`s, a
repeated `Host` (or none, from an HTTP/1.1 client), an absolute-form target (`POST http://host/...`) or a
`Host` or `Origin` naming a host the server does not answer to (what stops
a web page from posting to a server on the reader's laptop: DNS
rebinding). `ClientSlots` counts each client's open connections (and,
keyed by `peer_host`, its gRPC calls), so that one client holding idle
sockets cannot fill the queue every other client waits in, and
`read_seconds` gives a client reading more than its share of the workers a
shorter time to send each request, so that its idle sockets cannot hold
every worker for the whole `read_timeout`.

Reference: https://www.rfc-editor.org/rfc/rfc9112 (sections 3.2 and 6.3).
"""

import threading
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

from zoo.serving.requests import RequestError


def _host_name(header, value):
    """The host of an `Origin` URL or another header's authority, else `None`."""
    try:
        return urlsplit(value if header == "Origin" else "//" + value).hostname
    except ValueError:  # e.g. "[::1" (an unclosed IPv6 address)
        return None


def check_head(headers, target, allowed_hosts, version="HTTP/1.0"):
    """The path of a request's target, once its head is unambiguous and ours.

    Args:
        headers: the request's `http.client.HTTPMessage`.
        target: str. The request line's target (`/v1/predict`, or the
            absolute form `http://host:port/v1/predict`).
        allowed_hosts: set of str. Host names answered; `"*"` allows any.
        version: str. The request line's version: an `"HTTP/1.1"` request
            must carry a `Host` (RFC 9112, section 3.2). Defaults to
            `"HTTP/1.0"`.

    Returns:
        The target's path.

    Raises:
        RequestError: 400 for differing `Content-Length`s, a repeated
            `Host` or an HTTP/1.1 request without one; 403 for a host (of `Host`, `Origin` or the target) not
            in `allowed_hosts`.

    Example:
    >>> from email.message import Message
    >>> head = Message()
    >>> head["Host"] = "localhost:8501"
    >>> check_head(head, "/v1/predict?x=1", {"localhost"})
    '/v1/predict'
    >>> check_head(head, "http://evil.example/v1/predict", {"localhost"})
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: The target's host 'evil.example' is not one this server answers to: a loopback name, or one given with --allow-host.
    >>> head["Content-Length"], head["Content-Length"] = "2", "20"
    >>> check_head(head, "/v1/predict", {"localhost"})
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: The request has differing Content-Lengths ['2', '20']: which one ends the body is ambiguous.
    >>> check_head(Message(), "/v1/predict", {"localhost"}, "HTTP/1.1")
    Traceback (most recent call last):
    ...
    zoo.serving.requests.RequestError: An HTTP/1.1 request must carry a Host header (RFC 9112).
    """
    lengths = [
        part.strip()
        for value in headers.get_all("Content-Length") or ()
        for part in value.split(",")
    ]
    if len(set(lengths)) > 1:
        raise RequestError(
            f"The request has differing Content-Lengths {lengths[:4]}: which one "
            "ends the body is ambiguous."
        )
    hosts = headers.get_all("Host") or ()
    if not hosts and version == "HTTP/1.1":
        raise RequestError("An HTTP/1.1 request must carry a Host header (RFC 9112).")
    if len(hosts) > 1:
        raise RequestError(
            f"The request has {len(hosts)} Host headers; it may have one."
        )
    parts = urlsplit(target)
    named = [("Host", value) for value in hosts]
    named += [("Origin", value) for value in headers.get_all("Origin") or ()]
    if parts.scheme or parts.netloc:  # The absolute form names its host.
        named.append(("target's host", parts.netloc))
    if "*" not in allowed_hosts:
        for header, value in named:
            host = _host_name(header, value)
            if host is None or host.rstrip(".") not in allowed_hosts:
                raise RequestError(
                    f"The {header} {value[:100]!r} is not one this server answers "
                    "to: a loopback name, or one given with --allow-host.",
                    status=HTTPStatus.FORBIDDEN,
                )
    return parts.path


#: The workers one client may hold reading its requests for the whole
#: `read_timeout`: this fraction of them (at least one).
IDLE_SHARE = 0.25
#: Seconds a client reading more than its share of the workers has to send
#: each further request (if `read_timeout` is not shorter).
OVER_SHARE_SECONDS = 1.0


def read_seconds(read_timeout, workers, reading):
    """Seconds a client has to send a request, given how many it already sends.

    Args:
        read_timeout: float. The server's `read_timeout`.
        workers: int. The server's worker threads.
        reading: int. Workers already reading this client's other requests.

    Example (16 workers: a client's first four requests have 10 s each;
    its fifth, while the other four are still arriving, has 1 s):
    >>> read_seconds(10.0, 16, 3), read_seconds(10.0, 16, 4)
    (10.0, 1.0)
    """
    share = max(1, int(workers * IDLE_SHARE))
    if reading < share:
        return read_timeout
    return min(read_timeout, OVER_SHARE_SECONDS)


class ClientSlots:
    """Each client's open connections, at most `limit` at once.

    Args:
        limit: int. Connections one client (an IP address) may hold open,
            waiting in the queue or read by a worker.

    Example:
    >>> slots = ClientSlots(2)
    >>> [slots.take("10.0.0.1") for _ in range(3)], slots.take("10.0.0.2")
    ([True, True, False], True)
    >>> slots.give_back("10.0.0.1")
    >>> slots.take("10.0.0.1")
    True
    """

    def __init__(self, limit):
        self.limit = limit
        self._open = {}
        self._lock = threading.Lock()

    def take(self, client):
        """Counts one more connection of `client`; `False` if it holds `limit`.

        Example:
        >>> slots = ClientSlots(1)
        >>> slots.take("10.0.0.1"), slots.take("10.0.0.1"), slots.take("::1")
        (True, False, True)
        """
        with self._lock:
            held = self._open.get(client, 0)
            if held >= self.limit:
                return False
            self._open[client] = held + 1
            return True

    def give_back(self, client):
        """`client` closed a connection that `take` counted.

        Example:
        >>> slots = ClientSlots(1)
        >>> slots.take("10.0.0.1")
        True
        >>> slots.give_back("10.0.0.1")
        >>> slots.take("10.0.0.1")
        True
        """
        with self._lock:
            held = self._open.pop(client) - 1
            if held:
                self._open[client] = held


def peer_host(peer):
    """The host of a gRPC peer (`context.peer()`): the client a cap counts.

    Example:
    >>> peer_host("ipv4:127.0.0.1:50123"), peer_host("ipv6:%5B::1%5D:50123")
    ('127.0.0.1', '::1')
    >>> peer_host("unix:/tmp/zoo.sock")
    'unix:/tmp/zoo.sock'
    """
    kind, _, address = unquote(peer).partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer
    return address.rpartition(":")[0].strip("[]")

"""A fault-injecting HTTP proxy in front of the real Connect REST API, for tests.

Connect's transient refusals (a 409 during a rebalance, the 500 while a stopped sink's consumers
linger) and its silences are hard to provoke on demand, yet the saga must survive each of them.
This proxy forwards every request unchanged (method, path, query, body, headers including basic
auth) to the real worker and answers only the requests a test chose, with the exact status and
body Connect itself sends (texts from AK `DistributedHerder` and `Worker`, see
`shared/reference/connect-offsets.md` §1.4). Everything else is the real Connect.

    proxy = FaultProxy(connect_url)
    url = proxy.start()                                  # http://127.0.0.1:<free port>
    proxy.inject("PATCH", r"/connectors/[^/]+/offsets$", REBALANCE_409)   # once
    proxy.inject("PUT", r"/stop$", NO_ANSWER, times=None)                   # until cleared
    ...
    proxy.calls        # what came through and what was answered (never any header)
    proxy.stop()

It runs in the test's process on a thread (one thread per connection), on loopback only.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import unquote, urlsplit

import httpx

__all__ = [
    "CLOSE",
    "DROP_ANSWER",
    "NO_ANSWER",
    "NO_LEADER_409",
    "REBALANCE_409",
    "REQUEST_TIMEOUT_500",
    "RESET_LINGERING_500",
    "RETRIABLE_500",
    "ZOMBIE_SINK_500",
    "Call",
    "Fault",
    "FaultProxy",
    "Injection",
]

Mode = Literal["answer", "hold", "close", "forward_then_close"]


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or after) forwarding.

    answer: reply `status` with Connect's error body `{"error_code": status, "message": ...}`
      (`{connector}` in the message is the connector name from the path);
    hold: never answer; keep the connection open `hold_s` (or until `stop()`), then close it;
    close: close the connection without any answer;
    forward_then_close: let Connect do the request, then close without answering (the change
      happened but the client cannot know).
    """

    name: str
    mode: Mode
    status: int = 0
    message: str = ""
    hold_s: float = 120.0

    def body(self, connector: str) -> bytes:
        text = self.message.replace("{connector}", connector)
        # Connect's ErrorMessage, as Jackson writes it: error_code first, no spaces
        return f'{{"error_code":{self.status},"message":{_json_str(text)}}}'.encode()


def _json_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


_LINGERING = (
    "Failed to {verb} consumer group offsets for connector {connector} either because its tasks "
    "haven't stopped completely yet or the connector was resumed before the request to {verb} "
    "its offsets could be successfully completed. If the connector is in a stopped state, this "
    "operation can be safely retried. If it doesn't eventually succeed, the Connect cluster may "
    "need to be restarted to get rid of the zombie sink tasks."
)

#: PATCH/DELETE/stop while a rebalance is pending (DistributedHerder, stale config).
REBALANCE_409 = Fault(
    "rebalance_409",
    "answer",
    409,
    "Cannot complete request momentarily due to stale configuration "
    "(typically caused by a concurrent config change)",
)
#: A follower that knows no leader to forward to.
NO_LEADER_409 = Fault(
    "no_leader_409",
    "answer",
    409,
    "Cannot complete request momentarily due to no known leader URL, "
    "likely because a rebalance was underway.",
)
#: PATCH on a stopped sink whose consumers still linger in the group (KAFKA-15826): retriable.
RETRIABLE_500 = Fault(
    "retriable_500",
    "answer",
    500,
    _LINGERING.replace("{verb}", "alter"),
)
#: The same answer from a sink whose task blocks in stop(): Connect sends the very same text
#: (it names the zombie sink tasks); what makes it a zombie is that it never stops. Inject it
#: with `times=None` to make the retries run out.
ZOMBIE_SINK_500 = Fault("zombie_sink_500", "answer", 500, RETRIABLE_500.message)
#: DELETE /offsets (reset) while the group is not empty.
RESET_LINGERING_500 = Fault(
    "reset_lingering_500", "answer", 500, _LINGERING.replace("{verb}", "reset")
)
#: The REST layer's own 90 s wait ran out.
REQUEST_TIMEOUT_500 = Fault("request_timeout_500", "answer", 500, "Request timed out")
#: Connect stops answering (the client's timeout decides what happens).
NO_ANSWER = Fault("no_answer", "hold")
#: The connection drops before any answer.
CLOSE = Fault("close", "close")
#: Connect does it, the answer is lost.
DROP_ANSWER = Fault("drop_answer", "forward_then_close")


@dataclass
class Injection:
    """One armed fault: requests matching `method` and `path` (a regex, `re.search` on the
    decoded path without the query) and, if given, `query` (a regex on the raw query string)
    get `fault`, `times` times (None = until cleared)."""

    method: str
    path: re.Pattern[str]
    fault: Fault
    times: int | None
    used: int = 0
    query: re.Pattern[str] | None = None

    def matches(self, method: str, path: str, query: str = "") -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.query is not None and self.query.search(query) is None:
            return False
        return self.method in ("*", method) and self.path.search(path) is not None


@dataclass(frozen=True)
class Call:
    """One request through the proxy: what it was and what was answered (no headers, no body)."""

    method: str
    path: str
    query: str
    status: int | None  # None: no answer (held, closed)
    fault: str | None  # the fault's name, None if forwarded
    at: float = field(default_factory=time.time)


_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of `upstream` (Connect's REST URL)."""

    def __init__(self, upstream: str, *, upstream_timeout_s: float = 120.0) -> None:
        self.upstream = upstream.rstrip("/")
        self._upstream_timeout_s = upstream_timeout_s
        self._injections: list[Injection] = []
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.Client | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> str:
        """Listen on a free loopback port; returns the proxy's base URL."""
        if self._server is not None:
            return self.url
        self._client = httpx.Client(timeout=self._upstream_timeout_s, follow_redirects=False)
        handler = type("_BoundHandler", (_Handler,), {"proxy": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        """Stop listening; held requests are released (their connections closed)."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- faults ---------------------------------------------------------------------------------

    def inject(
        self,
        method: str,
        path_regex: str,
        fault: Fault,
        times: int | None = 1,
        *,
        query_regex: str | None = None,
    ) -> Injection:
        """Arm `fault` for the next `times` matching requests (`method` `*` = any method)."""
        query = re.compile(query_regex) if query_regex is not None else None
        injection = Injection(method.upper(), re.compile(path_regex), fault, times, query=query)
        with self._lock:
            self._injections.append(injection)
        return injection

    def clear(self) -> None:
        with self._lock:
            self._injections.clear()

    @contextmanager
    def injected(
        self, method: str, path_regex: str, fault: Fault, times: int | None = None
    ) -> Iterator[Injection]:
        injection = self.inject(method, path_regex, fault, times)
        try:
            yield injection
        finally:
            with self._lock:
                if injection in self._injections:
                    self._injections.remove(injection)

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def faulted(self) -> list[Call]:
        return [c for c in self.calls if c.fault is not None]

    # -- used by the handler --------------------------------------------------------------------

    def _take(self, method: str, path: str, query: str = "") -> Fault | None:
        with self._lock:
            for injection in self._injections:
                if injection.matches(method, path, query):
                    injection.used += 1
                    return injection.fault
        return None

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def _forward(
        self, method: str, raw_path: str, headers: list[tuple[str, str]], body: bytes
    ) -> _Upstream:
        client = self._client
        if client is None:
            raise httpx.TransportError("the proxy is stopped")
        request = client.build_request(
            method,
            self.upstream + raw_path,
            headers=[(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP],
            content=body if body or method in ("POST", "PUT", "PATCH") else None,
        )
        response = client.send(request, stream=True)
        try:
            raw = b"".join(response.iter_raw())  # as sent: any content-encoding stays
        finally:
            response.close()
        return _Upstream(
            response.status_code, response.reason_phrase, response.headers.multi_items(), raw
        )


@dataclass(frozen=True)
class _Upstream:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    raw: bytes


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Silent: the proxy's log is `calls`."""

    def _serve(self) -> None:
        proxy = self.proxy
        method = self.command.upper()
        split = urlsplit(self.path)
        path = unquote(split.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = proxy._take(method, path, split.query)
        if fault is None or fault.mode == "forward_then_close":
            try:
                response = proxy._forward(method, self.path, list(self.headers.items()), body)
            except httpx.HTTPError:
                proxy._record(Call(method, split.path, split.query, None, "upstream_error"))
                self._close()
                return
            if fault is not None:
                proxy._record(Call(method, split.path, split.query, None, fault.name))
                self._close()
                return
            proxy._record(Call(method, split.path, split.query, response.status, None))
            self._relay(response)
            return
        proxy._record(
            Call(
                method,
                split.path,
                split.query,
                fault.status if fault.mode == "answer" else None,
                fault.name,
            )
        )
        if fault.mode == "answer":
            self._answer(fault.status, fault.body(_connector_of(path)))
        elif fault.mode == "hold":
            proxy._stopping.wait(fault.hold_s)
            self._close()
        else:
            self._close()

    def _relay(self, response: _Upstream) -> None:
        raw = response.raw
        self.send_response_only(response.status, response.reason)
        for key, value in response.headers:
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if raw and self.command != "HEAD":
            self.wfile.write(raw)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _close(self) -> None:
        self.close_connection = True
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve


def _connector_of(path: str) -> str:
    parts = path.strip("/").split("/")
    return parts[1] if len(parts) >= 2 and parts[0] == "connectors" else ""

"""`/healthz` and `/readyz` while the daemon waits for its clusters, before the worker starts.

The faust worker serves the health pages once it runs, but it only starts once Kafka and every
Connect cluster answered (`offsetd.cli.run.wait_for_clusters`). A wrong password or an
untrusted certificate keeps the daemon waiting there, and without pages Kubernetes would see a
dead pod and restart it into the same wall. This small server answers on the worker's own
address meanwhile: alive (waiting is not broken) and not ready, with the one-line reason. It is
stopped before the worker binds the port.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["StartupHealth"]


class StartupHealth:
    """A health server whose readiness reports why the clusters are not usable yet."""

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._reason = "waiting for the clusters to answer"
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    def waiting(self, reason: str) -> None:
        """Report `reason` on /readyz; the server starts on the first call."""
        with self._lock:
            self._reason = reason
        if self._server is None:
            self._start()

    def _start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/healthz":
                    self._answer(200, {"alive": True, "detail": "waiting for the clusters"})
                elif self.path.split("?")[0] == "/readyz":
                    check = {"ok": False, "detail": owner.reason}
                    self._answer(503, {"ready": False, "checks": {"startup": check}})
                else:
                    self._answer(404, {"error": "not found"})

            def _answer(self, status: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: object) -> None:  # probes every few seconds: quiet
                return

        try:
            self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        except OSError:
            return  # the port is taken: the log still says why the daemon waits
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, name="startup-health", daemon=True
        ).start()

    def stop(self) -> None:
        """Stop serving and free the port (for the worker's own pages)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

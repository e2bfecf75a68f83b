"""A tiny HTTP server for `offsetd lag serve`: `GET /metrics` returns the pre-rendered page.

The daemon does not use it (its own web server appends `LagExporter.render()` to `/metrics`).
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["CONTENT_TYPE", "metrics_server"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def metrics_server(host: str, port: int, page: Callable[[], bytes]) -> ThreadingHTTPServer:
    """A server (not started: call `serve_forever`) answering `/metrics` with `page()`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = page()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server

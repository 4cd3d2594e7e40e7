"""The binder's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process and its
workers are alive), `/readyz` (its watches have listed once). Served on a thread of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kaipolicy import metrics
from kaipolicy.errors import InputError


class Endpoints:
    def __init__(self, address: str, healthy: Callable[[], bool], ready: Callable[[], bool]) -> None:
        host, _, port = address.rpartition(":")
        try:
            self._server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), _handler(healthy, ready))
        except (OSError, ValueError) as e:
            raise InputError(f"cannot serve metrics on {address!r}: {e}") from e
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="endpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(healthy: Callable[[], bool], ready: Callable[[], bool]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:   # the name http.server calls
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                ok = healthy() if path == "/healthz" else ready()
                self._answer(200 if ok else 503, b"ok\n" if ok else b"not ok\n", "text/plain")
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass   # probes every few seconds would drown the log
    return Handler

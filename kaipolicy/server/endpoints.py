"""The scheduler's HTTP endpoints: `/metrics` (Prometheus text format), `/healthz` (the process
answers) and `/readyz` (200 once the informers have listed and a rule bundle is loaded, else 503
with the reason). Served from a thread of their own; `--metrics-address` says where.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import generate_latest

from kaipolicy import metrics
from kaipolicy.errors import ConfigError

log = logging.getLogger("kaipolicy.server")

#: None when ready, else why not
Readiness = Callable[[], str | None]
#: the classic text format, which every Prometheus reads (newer clients announce 1.0.0, for UTF-8
#: names; kaipolicy's names are plain ASCII and generate_latest writes the classic format)
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def parse_address(text: str) -> tuple[str, int]:
    """"host:port", ":port" (every interface, as the reference's `:8080`) or "[v6]:port"."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--metrics-address {text!r}: expected HOST:PORT or :PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


class Endpoints:
    def __init__(self, address: str, readiness: Readiness) -> None:
        host, port = parse_address(address)
        handler = _handler(readiness)
        try:
            self.server = ThreadingHTTPServer((host, port), handler)
        except OSError as e:
            raise ConfigError(f"--metrics-address {address}: cannot listen there: {e.strerror or e}") from e
        self.server.daemon_threads = True
        self.address = f"{host}:{self.server.server_address[1]}"
        # a short poll interval: shutdown() waits for the serving loop to look up
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), name="endpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(readiness: Readiness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(metrics.REGISTRY), TEXT_FORMAT)
            elif path in ("/healthz", "/livez"):
                self._answer(200, b"ok\n")
            elif path == "/readyz":
                why = readiness()
                self._answer(200 if why is None else 503, f"{why or 'ok'}\n".encode())
            else:
                self._answer(404, b"not found: /metrics, /healthz, /readyz\n")

        def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler

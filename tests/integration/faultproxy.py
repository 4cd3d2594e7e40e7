"""A loopback proxy between a client under test and the kube-apiserver that injects faults at set
rates: 409 Conflict and 500 answers made up without forwarding, answers lost after the request was
carried out (the connection held until the client times out, or dropped at once), and watch
streams cut after a while.

TLS is terminated here, with the test apiserver's own certificate and key (its self-signed
certificate covers 127.0.0.1): the client's kubeconfig differs from the apiserver's only by the
port, its TLS verification runs unchanged, and the proxy sees every request and answer. A TCP
pass-through could only cut connections blindly; faults on chosen verbs and paths need the HTTP.

Which request gets which fault is a function of (seed, method, path, how often that method and
path were asked before), not of a shared random stream: the same requests meet the same faults
whatever the threads' interleaving.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")


@dataclass(frozen=True)
class Rates:
    """Per request: `conflict` (writes only) and `error` are answered here without forwarding;
    `timeout` and `drop` forward the request and lose the answer (held for `hold` seconds, or
    dropped at once). Watch streams are cut after `watch_cut` seconds (a range), when given."""

    conflict: float = 0.0
    error: float = 0.0
    timeout: float = 0.0
    drop: float = 0.0
    hold: float = 3.0
    watch_cut: tuple[float, float] | None = None


class FaultProxy:
    def __init__(self, upstream: str, cert_dir: Path, rates: Rates, seed: int = 0) -> None:
        self.upstream = urlsplit(upstream)
        self.rates, self.seed = rates, seed
        self.faults: Counter[str] = Counter()          # injected, by kind
        self.requests: Counter[str] = Counter()        # seen, by kind of request
        self.bindings: list[tuple[str, int]] = []      # (namespace/pod, the apiserver's status) per binding forwarded
        self._asked: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._client_tls = ssl.create_default_context(cafile=str(cert_dir / "apiserver.crt"))
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(str(cert_dir / "apiserver.crt"), str(cert_dir / "apiserver.key"))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.socket = server_tls.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, original: Path, out: Path) -> Path:
        """`original` pointed at the proxy."""
        out.write_text(original.read_text().replace(f":{self.upstream.port}\"", f":{self.port}\""))
        return out

    def quiet(self) -> None:
        """No more faults from now on (the run settles)."""
        self.rates = Rates()

    # ---- deciding ----------------------------------------------------------------------------------
    def fault_for(self, method: str, path: str, watch: bool) -> str | None:
        with self._lock:
            self.requests["watch" if watch else method] += 1
            self._asked[(method, path)] += 1
            nth = self._asked[(method, path)]
        if watch:
            return None
        digest = hashlib.sha256(f"{self.seed}/{method}/{path}/{nth}".encode()).digest()
        roll = int.from_bytes(digest[:8], "big") / 2**64
        r = self.rates
        for kind, rate in (("conflict", r.conflict if method != "GET" else 0.0), ("error", r.error),
                           ("timeout", r.timeout), ("drop", r.drop)):
            if roll < rate:
                return kind
            roll -= rate
        return None

    def count(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def cut_after(self, path: str) -> float | None:
        if self.rates.watch_cut is None:
            return None
        low, high = self.rates.watch_cut
        digest = hashlib.sha256(f"{self.seed}/cut/{path}/{time.monotonic_ns()}".encode()).digest()
        return low + (high - low) * int.from_bytes(digest[:8], "big") / 2**64

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port,
                                           context=self._client_tls, timeout=60)


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        upstream: http.client.HTTPSConnection | None = None

        def do_GET(self) -> None:
            self._relay()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def _relay(self) -> None:
            path, _, query = self.path.partition("?")
            watch = "watch=true" in query.split("&") or "watch=1" in query.split("&")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fault = proxy.fault_for(self.command, path, watch)
            if fault in ("conflict", "error"):
                proxy.count(fault)
                self._made_up(409 if fault == "conflict" else 500)
                return
            response = self._forward(body)
            if watch:
                self._stream(response, proxy.cut_after(path))
                return
            data = response.read()
            binding = BINDING.match(path)
            if binding and self.command == "POST":
                with proxy._lock:
                    proxy.bindings.append((f"{binding[1]}/{binding[2]}", response.status))
            if fault is not None:   # carried out upstream; the client never hears of it
                proxy.count(fault)
                if fault == "timeout":
                    time.sleep(proxy.rates.hold)
                self._hang_up()
                return
            self._answer(response.status, response.getheaders(), data)

        def _forward(self, body: bytes) -> http.client.HTTPResponse:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "host"}
            for attempt in range(2):   # a kept-alive upstream connection the apiserver closed is opened again
                if self.upstream is None:
                    self.upstream = proxy.connect()
                try:
                    self.upstream.request(self.command, self.path, body=body or None, headers=headers)
                    return self.upstream.getresponse()
                except (http.client.HTTPException, OSError):
                    self.upstream.close()
                    self.upstream = None
                    if attempt:
                        raise
            raise AssertionError("unreachable")

        def _stream(self, response: http.client.HTTPResponse, cut: float | None) -> None:
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            upstream, self.upstream = self.upstream, None   # a stream's connection is not reused
            cutting = threading.Event()

            def cut_now() -> None:
                cutting.set()
                try:
                    if upstream is not None and upstream.sock is not None:
                        upstream.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            timer = threading.Timer(cut, cut_now) if cut is not None else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                while True:
                    try:
                        chunk = response.read1(65536)
                    except (http.client.HTTPException, OSError, ValueError):
                        chunk = b""
                    if not chunk:
                        break
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                if cutting.is_set():
                    proxy.count("watch_cut")
                    self._hang_up()    # no last chunk: the client sees the stream break
                else:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
            except OSError:
                self.close_connection = True
            finally:
                if timer is not None:
                    timer.cancel()
                if upstream is not None:
                    upstream.close()

        def _made_up(self, code: int) -> None:
            reason = "Conflict" if code == 409 else "InternalError"
            message = ("the object has been modified; please apply your changes to the latest version and try again"
                       if code == 409 else "an error on the server (injected by the test proxy)")
            data = (f'{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure",'
                    f'"message":"{message}","reason":"{reason}","code":{code}}}').encode()
            self._answer(code, [("Content-Type", "application/json")], data)

        def _answer(self, code: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(code)
            for k, v in headers:
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _hang_up(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def finish(self) -> None:
            try:
                super().finish()
            except OSError:
                pass
            if self.upstream is not None:
                self.upstream.close()

        def log_message(self, format: str, *args: object) -> None:
            pass
    return Handler

"""A real etcd + kube-apiserver on loopback ports for the integration tests (no kubelet, no
controllers), built by tools/kube-apiserver/build.sh. Start, restart the apiserver (etcd keeps the
data, the port and kubeconfig stay), stop.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "kube-apiserver" / "build.sh"


def binaries() -> Path | None:
    """The folder holding kube-apiserver and etcd (KUBEBUILDER_ASSETS or the build cache), or None."""
    try:
        proc = subprocess.run(["bash", str(BUILD), "--where"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class ApiServer:
    def __init__(self, bin_dir: Path, state: Path) -> None:
        self.bin_dir, self.state = bin_dir, state
        self.etcd_port, self.peer_port, self.port = _free_ports(3)
        self.token = secrets.token_hex(16)
        self.kubeconfig = state / "kubeconfig"
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        (self.state / "certs").mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "genrsa", "-out", str(self.state / "sa.key"), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(self.state / "sa.key"), "-pubout", "-out", str(self.state / "sa.pub")],
                       check=True, capture_output=True)
        (self.state / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        self._start_etcd()
        self.start_apiserver()
        self._write_kubeconfig()

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        self._etcd = self._spawn("etcd", [
            str(self.bin_dir / "etcd"), "--name", "kaipolicy", "--data-dir", str(self.state / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer, "--initial-cluster", f"kaipolicy={peer}", "--unsafe-no-fsync"])
        self._wait(lambda: _get(f"{client}/health") is not None, self._etcd, "etcd", 30)

    def start_apiserver(self) -> None:
        s = self.state
        self._apiserver = self._spawn("apiserver", [
            str(self.bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={s / 'certs'}", f"--token-auth-file={s / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={s / 'sa.pub'}", f"--service-account-signing-key-file={s / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            # no controller creates the `default` ServiceAccount, and a loopback address has no endpoints
            "--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none",
            # open watches would hold a graceful shutdown for many seconds
            "--shutdown-watch-termination-grace-period=2s"])
        self._wait(self._ready, self._apiserver, "apiserver", 120)

    def stop_apiserver(self) -> None:
        self._terminate(self._apiserver)
        self._apiserver = None

    def restart_apiserver(self) -> None:
        """Stop the apiserver and start it again on the same port (etcd and its data stay)."""
        self.stop_apiserver()
        self.start_apiserver()

    def stop(self) -> None:
        self.stop_apiserver()
        self._terminate(self._etcd)
        self._etcd = None

    # ---- helpers ------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.state / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps writing to it
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def _ready(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.state / "certs" / "apiserver.crt")) \
            if (self.state / "certs" / "apiserver.crt").exists() else None
        return ctx is not None and _get(f"{self.url}/readyz", ctx, self.token) == "ok"

    def _wait(self, ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ready():
                return
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = (self.state / f"{log}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{log} did not become ready in {seconds:.0f}s:\n{tail}")

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{self.url}", certificate-authority: "{self.state / 'certs' / 'apiserver.crt'}"}}
contexts:
- name: test
  context: {{cluster: test, user: admin}}
current-context: test
users:
- name: admin
  user: {{token: "{self.token}"}}
""")


def _get(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> str | None:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=3, context=ctx) as response:
            return str(response.read().decode())
    except (OSError, ValueError):
        return None


def openssl_available() -> bool:
    return shutil.which("openssl") is not None


def reason_unavailable() -> str | None:
    """Why the integration tests cannot run here, or None when they can."""
    if binaries() is None:
        return ("kube-apiserver and etcd are not built: run tools/kube-apiserver/build.sh (10-15 min the first "
                "time, needs Go >= 1.26) or set KUBEBUILDER_ASSETS to a folder holding both")
    if not openssl_available():
        return "openssl is not on PATH (it makes the service-account key)"
    if os.name != "posix":
        return "the integration tests run on POSIX systems only"
    return None

"""`kaipolicy run` as a real process for the integration tests: started with short periods and a
short lease, its JSON log lines read back, its /metrics scraped and parsed with prometheus_client's
own parser; and the tests' stand-in for the binder (issue 7 builds the real one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cluster import Cluster
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--schedule-period", "0.2", "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.25",
        "--metrics-address", "127.0.0.1:0", "--log-format", "json")
GROUP, VERSION = "scheduling.run.ai", "v1alpha2"


class Scheduler:
    """One `kaipolicy run` process; `namespace` holds its Lease."""

    def __init__(self, kubeconfig: Path, log: Path, namespace: str, *args: str) -> None:
        self.log_path = log
        self.argv = [sys.executable, "-m", "kaipolicy.cli.main", "run", "--kubeconfig", str(kubeconfig),
                     "--namespace", namespace, *FAST, *args]
        env = os.environ | {"PYTHONPATH": str(ROOT)}
        with log.open("wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        self._address: str | None = None

    # ---- its log --------------------------------------------------------------------------------
    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"level": "raw", "message": line})
        return out

    def messages(self, level: str | None = None) -> list[str]:
        return [str(e.get("message")) for e in self.lines() if level is None or e.get("level") == level]

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    # ---- its endpoints ------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        if self._address is None:
            def find() -> str | None:
                self._check_alive()
                return next((e["metricsAddress"] for e in self.lines() if "metricsAddress" in e), None)
            self._address = wait_for("the scheduler's metrics address", find, 30)
        return self._address

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self.address}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample, by (name, sorted labels), parsed by prometheus_client's text parser."""
        status, text = self.get("/metrics")
        assert status == 200, text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics().get((name, tuple(sorted(labels.items()))), 0.0)

    def cycles(self, result: str = "ok") -> float:
        return self.sample("kaipolicy_cycles_total", result=result)

    def wait_cycles(self, n: int, seconds: float = 30.0) -> float:
        """Wait until `n` more cycles than now completed."""
        start = self.cycles()
        return wait_for(f"{n} more cycles", lambda: (c := self.cycles()) >= start + n and c, seconds)

    # ---- ending it --------------------------------------------------------------------------------
    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"kaipolicy run did not stop within {timeout}s of {sig!r}") from None
        return int(self.proc.returncode)

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"kaipolicy run exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")


# ---- BindRequests, and the binder's part ---------------------------------------------------------
def bind_requests(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    items = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "bindrequests")["items"]
    return {str(b["spec"]["podName"]): b for b in items}


def nodes_of(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {pod: str(b["spec"]["selectedNode"]) for pod, b in bind_requests(cluster, namespace).items()}


def act_as_binder(cluster: Cluster, namespace: str) -> list[str]:
    """Bind every pod that has a pending BindRequest (pods/binding, phase Running, the request
    Succeeded), as the binder would; the pods bound."""
    bound = []
    for pod, br in sorted(bind_requests(cluster, namespace).items()):
        if (br.get("status") or {}).get("phase") == "Succeeded":
            continue
        node = br["spec"]["selectedNode"]
        groups = br["spec"].get("selectedGPUGroups") or []
        if groups:
            # the first group in `runai-gpu-group`, the others of a multi-device pod as `runai-gpu-group/<id>`
            labels = {"runai-gpu-group": groups[0]} | {f"runai-gpu-group/{g}": g for g in groups[1:]}
            cluster.core.patch_namespaced_pod(pod, namespace, {"metadata": {"labels": labels}})
        cluster.core.create_namespaced_binding(
            namespace, {"metadata": {"name": pod}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
            _preload_content=False)
        cluster.set_phase(namespace, pod, "Running")
        cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "bindrequests",
                                                             br["metadata"]["name"], {"status": {"phase": "Succeeded"}})
        bound.append(pod)
    return bound

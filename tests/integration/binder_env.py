"""What the binder's integration tests share: BindRequests in the shape the reference scheduler
writes them, a binder running in this process, and a fake kubelet that plays the reservation pods
(there is no kubelet and no GPU here: it writes the device annotation a reservation pod would)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from kubernetes.client.exceptions import ApiException

from kaipolicy.binder.process import run_binder
from kaipolicy.binder.reconciler import Reconciler
from kaipolicy.binder.settings import DEVICE_ANNOTATION, BinderSettings, ReservationSettings
from kaipolicy.cache.informer import Backoff
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.cache.lease import LeaseTimings
from tests.integration.cluster import ROOT, Cluster
from tests.polling import wait_for

GROUP = "scheduling.run.ai"


def bind_request(cluster: Cluster, namespace: str, pod: dict[str, Any], node: str, *,
                 groups: list[str] | None = None, portion: str | None = None, backoff_limit: int | None = 3,
                 name: str | None = None) -> str:
    """A BindRequest as KAI's scheduler writes it (named after the pod, owned by it, labelled with
    the node); a GPU share when `groups` are given."""
    meta = pod["metadata"]
    spec: dict[str, Any] = {
        "podName": meta["name"], "selectedNode": node,
        "receivedResourceType": "Fraction" if groups else "Regular",
        "receivedGPU": {"count": len(groups or []), "portion": portion or ("0.50" if groups else "0.00")}}
    if groups:
        spec["selectedGPUGroups"] = groups
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    body = {"apiVersion": f"{GROUP}/v1alpha2", "kind": "BindRequest",
            "metadata": {"name": name or meta["name"], "labels": {"selected-node": node},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta["uid"]}]},
            "spec": spec}
    cluster.create(body, namespace)
    return str(body["metadata"]["name"])


def request_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.custom.get_namespaced_custom_object(GROUP, "v1alpha2", namespace, "bindrequests", name))


def is_settled(request: dict[str, Any]) -> bool:
    """Final: Succeeded, or Failed with no retry left."""
    status, limit = request.get("status") or {}, int(request["spec"].get("backoffLimit") or 0)
    return status.get("phase") == "Succeeded" or (status.get("phase") == "Failed"
                                                  and status.get("failedAttempts", 0) >= limit)


def settled(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The request once it is final, else None."""
    obj = request_of(cluster, namespace, name)
    return obj if is_settled(obj) else None


def wait_settled(cluster: Cluster, namespace: str, name: str, seconds: float = 30) -> dict[str, Any]:
    return wait_for(f"BindRequest {namespace}/{name} to settle", lambda: settled(cluster, namespace, name), seconds)


def reservations(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    pods = cluster.api.sanitize_for_serialization(cluster.core.list_namespaced_pod(namespace))
    return [p for p in pods.get("items") or [] if not (p["metadata"].get("deletionTimestamp"))]


def quick_settings(scheduler: str, reservation_namespace: str, lease_namespace: str, **changes: Any) -> BinderSettings:
    """Short waits for tests: retries from 0.1s, a 5s reservation timeout, a 1s sweep."""
    base = BinderSettings(scheduler_name=scheduler, workers=4, retry_base=0.1, retry_limit=1.0, resync=1.0,
                          reservations=ReservationSettings(namespace=reservation_namespace, timeout=5.0),
                          lease_namespace=lease_namespace, lease=LeaseTimings(3.0, 2.0, 0.5))
    return replace(base, **changes)


class BinderInThread:
    """`kaipolicy binder` in a thread of this process: `with BinderInThread(...) as b:`."""

    def __init__(self, kubeconfig: Path, settings: BinderSettings, request_timeout: tuple[float, float] = (3, 10)):
        self.api = KubeApi(str(kubeconfig), request_timeout=request_timeout, pool_size=settings.workers + 8)
        self.settings = settings
        self.stop = threading.Event()
        self.reconciler: Reconciler | None = None
        self.code: int | None = None
        self._thread = threading.Thread(target=self._run, name="binder-under-test", daemon=True)

    def _serve(self, reconciler: Reconciler) -> Callable[[], None]:
        self.reconciler = reconciler
        return lambda: None

    def _run(self) -> None:
        self.code = run_binder(self.api, self.settings, self.stop, self._serve,
                               backoff=lambda: Backoff(0.1, 1.0), sync_timeout=60)

    def __enter__(self) -> Self:
        self._thread.start()
        wait_for("the binder to start watching", lambda: self.reconciler is not None and self.reconciler.synced(), 60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(60)
        self.api.close()
        assert not self._thread.is_alive(), "the binder did not stop within 60s"
        assert self.code == 0, f"the binder exited {self.code}"


class FakeKubelet:
    """Plays each reservation pod of `namespace`: writes a device UUID into it once it exists,
    except for the groups held back (`hold`) until released."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.held: set[str] = set()
        self.reported: dict[str, str] = {}      # pod name -> device
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-kubelet", daemon=True)

    def hold(self, *groups: str) -> None:
        self.held.update(groups)

    def release(self, *groups: str) -> None:
        self.held.difference_update(groups)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                for pod in reservations(self.cluster, self.namespace):
                    meta = pod["metadata"]
                    group = (meta.get("labels") or {}).get("runai-gpu-group", "")
                    if group in self.held or (meta.get("annotations") or {}).get(DEVICE_ANNOTATION):
                        continue
                    device = f"GPU-{uuid.uuid4()}"
                    self.cluster.core.patch_namespaced_pod(
                        meta["name"], self.namespace, {"metadata": {"annotations": {DEVICE_ANNOTATION: device}}})
                    self.reported[meta["name"]] = device
            except ApiException:
                pass   # a pod deleted meanwhile: the next round sees the truth


class BinderProcess:
    """`kaipolicy binder` as a real process, its JSON log lines collected as they come."""

    def __init__(self, kubeconfig: Path, scheduler: str, reserved: str, lease_namespace: str, *extra: str) -> None:
        argv = [sys.executable, "-m", "kaipolicy.cli.main", "binder", "--kubeconfig", str(kubeconfig),
                "--scheduler-name", scheduler, "--reservation-namespace", reserved, "--workers", "2",
                "--metrics-address", "127.0.0.1:0", "--lease-namespace", lease_namespace,
                "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5",
                "--retry-base-delay", "0.1", "--reservation-resync", "1", *extra]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"message": line.rstrip(), "level": "raw"})

    def logged(self, text: str) -> dict[str, Any] | None:
        return next((line for line in list(self.lines) if text in line.get("message", "")), None)

    @property
    def port(self) -> int:
        line = wait_for("the metrics port in the log", lambda: self.logged("serving /metrics on port"), 30)
        return int(line["message"].rsplit(" ", 1)[1])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def terminate(self, seconds: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(seconds)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

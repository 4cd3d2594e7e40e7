"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it.

A candidate takes the Lease when it does not exist or when its holder has not renewed it for a
lease duration, measured on this process's own clock from when the record last changed (clocks
of two machines are never compared). The leader renews every retry period; when it has not
renewed for the renew deadline it stops leading, before any other replica may take over. Every
write is a compare-and-swap on the Lease's resourceVersion. `release()` hands the Lease over at
once on a clean shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import ClusterError

log = logging.getLogger("kaipolicy.leader")


@dataclass(frozen=True)
class Timing:
    lease: float = 15.0        # the reference's defaults (cmd/scheduler/app/server.go)
    renew_deadline: float = 10.0
    retry: float = 5.0


def lease_name(scheduler_name: str, partition: str) -> str:
    """The reference's lock name: the scheduler name, with the shard's partition when it has one."""
    return f"{scheduler_name}-{partition}" if partition else scheduler_name


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str, timing: Timing = Timing()) -> None:
        self.api, self.namespace, self.name, self.identity, self.timing = api, namespace, name, identity, timing
        self.last_error = ""
        self._renewed = -1e18          # monotonic time of our last successful acquire or renew
        self._leading = False
        self._observed: tuple[str, str] | None = None   # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def leading(self) -> bool:
        """True while this process holds the Lease and renewed it within the renew deadline."""
        return self._leading and time.monotonic() - self._renewed < self.timing.renew_deadline

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timing.retry + 10)

    def release(self) -> None:
        """Give the Lease up (holder cleared, one-second duration) so that another replica takes
        over at once instead of after a lease duration."""
        if not self._leading:
            return
        self._leading = False
        metrics.LEADER.set(0)
        try:
            lease = self.api.get(kubeapi.LEASE, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            lease["spec"] = spec | {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _now()}
            self.api.replace(kubeapi.LEASE, lease)
            log.info("released lease %s/%s", self.namespace, self.name)
        except ClusterError as e:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, e)

    # ---- the election loop -------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.timing.retry)
        self.release()

    def step(self) -> None:
        """One round: acquire or renew, or notice that leadership is gone."""
        if self._try():
            if not self._leading:
                log.info("became the leader (lease %s/%s)", self.namespace, self.name)
            self._renewed, self._leading = time.monotonic(), True
        elif self._leading and not self.leading():
            self._lost("could not renew it within the renew deadline")
        metrics.LEADER.set(1 if self.leading() else 0)

    def _lost(self, why: str) -> None:
        self._leading = False
        metrics.LEADER.set(0)
        log.error("lost the lease %s/%s (%s): scheduling stops until it is won again", self.namespace, self.name,
                  why)

    def _try(self) -> bool:
        """One attempt to acquire or renew; True when this process holds the Lease now."""
        try:
            lease = self.api.get(kubeapi.LEASE, self.name, self.namespace)
        except ClusterError as e:
            if e.status != 404:
                return self._failed(e)
            return self._create()
        spec = lease.get("spec") or {}
        holder, renewed = str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or "")
        if (holder, renewed) != self._observed:
            self._observed, self._observed_at = (holder, renewed), time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease)
        if holder and holder != self.identity and time.monotonic() - self._observed_at < duration:
            if self._leading:
                self._lost(f"{holder} holds it now")
            return False     # held by another replica that renewed recently
        now = _now()
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        lease["spec"] = spec | {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.timing.lease),
                                "renewTime": now, "leaseTransitions": transitions}
        if holder != self.identity:
            lease["spec"]["acquireTime"] = now
        try:
            self.api.replace(kubeapi.LEASE, lease)
        except ClusterError as e:
            return self._failed(e)
        self.last_error = ""
        return True

    def _create(self) -> bool:
        now = _now()
        lease: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": self.name, "namespace": self.namespace},
                      "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.timing.lease),
                               "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        try:
            self.api.create(kubeapi.LEASE, lease, self.namespace)
        except ClusterError as e:
            return self._failed(e)
        self.last_error = ""
        return True

    def _failed(self, e: ClusterError) -> bool:
        if e.status == 409:      # a conflict is another replica winning the race: no news
            return False
        error = str(e)
        if e.status == 404 and "namespaces" in error:
            error = f"namespace {self.namespace} does not exist: create it, or name another with --namespace ({e})"
        if error != self.last_error:
            log.warning("leader election: %s", error)
        self.last_error = error
        return False

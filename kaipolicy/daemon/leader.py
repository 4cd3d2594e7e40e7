"""Leader election on a `coordination.k8s.io` Lease, as client-go's leaderelection does it, for the
scheduler and the binder alike.

A candidate takes the Lease when it does not exist or when its holder has not renewed it for a
lease duration, measured on this process's own clock from when the record last changed (clocks of
two machines are never compared). The leader renews every retry period; when it has not renewed
for the renew deadline it stops leading, before any other replica may take over. Every write is a
compare-and-swap on the Lease's resourceVersion. Stopping releases the Lease, so that a successor
takes over at once.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import Gauge

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import ClusterError, ConfigError

log = logging.getLogger("kaipolicy.leader")

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_NAMESPACE = "kai-scheduler"      # the reference's install namespace, where its Leases live
_POLL = 0.05                             # seconds between looks while waiting for a change of leadership


@dataclass(frozen=True)
class LeaseTimings:
    """Seconds: a leader unheard of for `duration` may be replaced; a leader that could not renew
    for `renew_deadline` steps down; candidates and the leader try every `retry_period`."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.duration:
            raise ConfigError("leader election needs 0 < --retry-period < --renew-deadline < --lease-duration "
                              f"(given {self.retry_period:g}, {self.renew_deadline:g}, {self.duration:g})")


def lease_name(scheduler_name: str, partition: str) -> str:
    """The reference scheduler's lock name: its name, with the shard's partition when it has one."""
    return f"{scheduler_name}-{partition}" if partition else scheduler_name


def default_identity() -> str:
    """The hostname (the pod's name in a cluster) and a random suffix, so two processes never share one."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:12]}"


def own_namespace(path: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The namespace of the pod this process runs in (where its chart's Role lets it keep a Lease),
    else the reference's `kai-scheduler`."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def _micro_time() -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """`start()` it; `leading()` says whether to act now; `stop()` ends the election and releases
    the Lease. `gauge` (if given) is 1 while this process leads."""

    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str | None = None,
                 timings: LeaseTimings = LeaseTimings(), *, gauge: Gauge | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.identity = identity or default_identity()
        self.timings, self.gauge, self._clock = timings, gauge, clock
        self.last_error = ""                             # why the last round failed ('' when it did not)
        self._renewed = -math.inf                        # our clock at our last successful write
        self._leading = False
        self._observed: tuple[object, ...] | None = None   # the Lease's record as last read
        self._observed_at = 0.0                          # when it last changed, on our clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    @property
    def where(self) -> str:
        return kubeapi.object_name(kubeapi.LEASE, self.namespace, self.name)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the election; the Lease is released if this process holds it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.timings.retry_period + 10)
        self.release()

    def leading(self) -> bool:
        """True while this process holds the Lease and renewed it within the renew deadline."""
        return self._leading and self._clock() - self._renewed < self.timings.renew_deadline

    def wait(self, stop: threading.Event, leading: bool = True) -> bool:
        """Block until `leading()` says `leading` (True), or until `stop` is set (False)."""
        while not stop.is_set():
            if self.leading() == leading:
                return True
            stop.wait(_POLL)
        return False

    def release(self) -> None:
        """Give the Lease up (holder cleared, one-second duration) so that another replica takes
        over at once instead of after a lease duration."""
        if not self._leading:
            return
        self._set_leading(False)
        try:
            lease = self.api.get(kubeapi.LEASE, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time()
            self.api.replace(kubeapi.LEASE, lease | {"spec": spec | {
                "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now}})
            log.info("released %s", self.where)
        except ClusterError as e:
            log.warning("could not release %s: %s", self.where, e)

    # ---- the election loop -------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:     # the election must outlive a bug in one round; leading() times out
                log.exception("leader election: a round failed")
            self._stop.wait(self.timings.retry_period)

    def step(self) -> None:
        """One round: acquire or renew, or notice that leadership is gone."""
        if self._try():
            if not self._leading:
                log.info("leading: %s held by %s", self.where, self.identity)
            self._renewed = self._clock()
            self._set_leading(True)
        elif self._leading and not self.leading():
            self._lost(f"no renewal for {self.timings.renew_deadline:g}s")
        if self.gauge is not None:
            self.gauge.set(1 if self.leading() else 0)

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self.gauge is not None:
            self.gauge.set(1 if leading else 0)

    def _lost(self, why: str) -> None:
        self._set_leading(False)
        log.error("lost %s (%s): stepping down until it is won again", self.where, why)

    def _try(self) -> bool:
        """One attempt to acquire or renew; True when this process holds the Lease now."""
        try:
            lease = self.api.get(kubeapi.LEASE, self.name, self.namespace)
        except ClusterError as e:
            if e.status != 404:
                return self._failed(e)
            return self._write(lambda: self.api.create(kubeapi.LEASE, self._new_lease(), self.namespace))
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or self.timings.duration)
        if holder and holder != self.identity and self._clock() - self._observed_at < duration:
            if self._leading:
                self._lost(f"{holder} holds it now")
            return False     # held by another replica that renewed within a lease duration, as seen here
        now, ours = _micro_time(), holder == self.identity
        renewed = spec | {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.timings.duration),
                          "renewTime": now, "acquireTime": spec.get("acquireTime") if ours else now,
                          "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)}
        return self._write(lambda: self.api.replace(kubeapi.LEASE, lease | {"spec": renewed}))

    def _new_lease(self) -> Obj:
        now = _micro_time()
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.timings.duration),
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}

    def _observe(self, spec: Obj) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()

    def _write(self, call: Callable[[], Obj]) -> bool:
        try:
            written = call()
        except ClusterError as e:
            return self._failed(e)
        self._observe(written.get("spec") or {})
        self.last_error = ""
        return True

    def _failed(self, e: ClusterError) -> bool:
        if e.status == 409:      # another candidate wrote first: no news
            return False
        error = str(e)
        if e.status == 404 and "namespaces" in error:
            error = (f"namespace {self.namespace} does not exist: create it, or name another with "
                     f"--lease-namespace ({e})")
        if error != self.last_error:
            log.warning("leader election: %s", error)
        self.last_error = error
        return False

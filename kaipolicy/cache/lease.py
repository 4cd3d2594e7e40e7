"""Leader election on a `coordination.k8s.io` Lease, the way client-go does it: a candidate takes
the Lease when it is missing, or when its holder has not renewed it for a lease duration as seen
on the candidate's own clock (never by comparing clocks), always through compare-and-swap on the
resourceVersion; the leader renews it every retry period and has lost it when no renewal succeeds
within the renew deadline. Releasing it on a clean stop lets a successor take over at once.
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
from typing import Any

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import ClusterError

log = logging.getLogger("kaipolicy.lease")


def default_identity() -> str:
    """hostname (the pod's name in a cluster) and a random suffix, so two processes never share one."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseTimings:
    """Seconds: a leader unheard of for `duration` may be replaced; a leader that could not renew
    for `renew_deadline` steps down; candidates and the leader try every `retry_period`."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str | None = None,
                 timings: LeaseTimings = LeaseTimings(), clock: Callable[[], float] = time.monotonic) -> None:
        if not timings.retry_period < timings.renew_deadline < timings.duration:
            raise ValueError("lease timings must satisfy retry period < renew deadline < duration")
        self.api, self.namespace, self.name = api, namespace, name
        self.identity = identity or default_identity()
        self.timings = timings
        self.leading = threading.Event()
        self._clock = clock
        self._observed: tuple[Any, ...] | None = None    # the holder's record as last read
        self._observed_at = 0.0                          # when it last changed, on our clock

    @property
    def where(self) -> str:
        return kubeapi.object_name(kubeapi.LEASE, self.namespace, self.name)

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this candidate leads (True) or `stop` is set (False)."""
        while not stop.is_set():
            if self._try_acquire_or_renew():
                self.leading.set()
                log.info("leading: %s held by %s", self.where, self.identity)
                return True
            stop.wait(self.timings.retry_period)
        return False

    def hold(self, stop: threading.Event) -> bool:
        """Renew until `stop` is set (True) or a renewal fails for the renew deadline (False: the
        lease is lost and whatever it guarded must stop at once)."""
        last = self._clock()
        while not stop.wait(self.timings.retry_period):
            if self._try_acquire_or_renew():
                last = self._clock()
                continue
            holder = self._observed[0] if self._observed else None
            if holder and holder != self.identity:
                self.leading.clear()
                log.error("lost %s: it is held by %s", self.where, holder)
                return False
            if self._clock() - last > self.timings.renew_deadline:
                self.leading.clear()
                log.error("lost %s: no renewal for %.0fs", self.where, self.timings.renew_deadline)
                return False
        return True

    def release(self) -> None:
        """Give the lease up (holder emptied, duration 1s) so that a successor need not wait."""
        if not self.leading.is_set():
            return
        self.leading.clear()
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

    # ---- one round ------------------------------------------------------------------------------
    def _try_acquire_or_renew(self) -> bool:
        try:
            lease = self.api.get(kubeapi.LEASE, self.name, self.namespace)
        except ClusterError as e:
            if e.status != 404:
                log.warning("cannot read %s: %s", self.where, e)
                return False
            return self._create()
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.timings.duration)
        if holder and holder != self.identity and self._clock() < self._observed_at + duration:
            return False   # held, and renewed within a lease duration as we have seen it
        now = _micro_time()
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        renewed = spec | {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.timings.duration),
                          "renewTime": now, "acquireTime": spec.get("acquireTime") if ours else now,
                          "leaseTransitions": transitions}
        return self._write(lambda: self.api.replace(kubeapi.LEASE, lease | {"spec": renewed}))

    def _create(self) -> bool:
        now = _micro_time()
        body: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace},
                     "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": math.ceil(self.timings.duration),
                              "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        return self._write(lambda: self.api.create(kubeapi.LEASE, body))

    def _write(self, call: Callable[[], Obj]) -> bool:
        try:
            written = call()
        except ClusterError as e:
            if e.status != 409:   # 409: another candidate wrote first
                log.warning("cannot write %s: %s", self.where, e)
            return False
        spec = written.get("spec") or {}
        self._observed = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"),
                          spec.get("leaseTransitions"))
        self._observed_at = self._clock()
        return True


def _micro_time() -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

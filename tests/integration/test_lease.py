"""Leader election on a real Lease: one candidate leads, the other waits until the lease is
released or goes unrenewed for its duration; a leader whose lease was taken knows it lost it."""

from __future__ import annotations

import threading
import time

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.cache.lease import LeaderElector, LeaseTimings

FAST = LeaseTimings(duration=1.5, renew_deadline=1.0, retry_period=0.2)


def candidate(api: KubeApi, namespace: str, name: str) -> LeaderElector:
    return LeaderElector(api, namespace, "leader", identity=name, timings=FAST)


def acquire_within(elector: LeaderElector, seconds: float) -> bool:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        return elector.acquire(stop)
    finally:
        timer.cancel()


def test_one_candidate_leads_and_the_other_waits_until_the_lease_is_released(api: KubeApi, namespace: str) -> None:
    a, b = candidate(api, namespace, "a"), candidate(api, namespace, "b")
    assert acquire_within(a, 5)
    assert not acquire_within(b, 1.0)      # renewed or not, a lease younger than its duration is a's
    a.release()
    started = time.monotonic()
    assert acquire_within(b, 5) and time.monotonic() - started < 1.0
    lease = api.get(kubeapi.LEASE, "leader", namespace)["spec"]
    assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("b", 1)


def test_a_lease_left_unrenewed_for_its_duration_is_taken_over(api: KubeApi, namespace: str) -> None:
    a, b = candidate(api, namespace, "a"), candidate(api, namespace, "b")
    assert acquire_within(a, 5)            # and then a stops renewing (a crashed leader)
    started = time.monotonic()
    assert acquire_within(b, 5)
    assert time.monotonic() - started >= FAST.duration - FAST.retry_period


def test_a_leader_whose_lease_was_taken_stops_leading_at_once(api: KubeApi, namespace: str) -> None:
    a = candidate(api, namespace, "a")
    assert acquire_within(a, 5)
    lease = api.get(kubeapi.LEASE, "leader", namespace)
    api.replace(kubeapi.LEASE, lease | {"spec": lease["spec"] | {"holderIdentity": "intruder"}})
    stop = threading.Event()
    threading.Timer(5, stop.set).start()
    assert a.hold(stop) is False and not a.leading.is_set() and not stop.is_set()
    stop.set()

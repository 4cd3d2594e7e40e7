"""Leader election on a real Lease: one candidate leads, the other waits until the Lease is
released or goes unrenewed for its duration; a leader whose Lease was taken knows it lost it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.daemon.leader import LeaderElector, LeaseTimings

FAST = LeaseTimings(duration=1.5, renew_deadline=1.0, retry_period=0.2)


@pytest.fixture
def candidates(api: KubeApi, namespace: str) -> Iterator[dict[str, LeaderElector]]:
    started = {name: LeaderElector(api, namespace, "leader", identity=name, timings=FAST) for name in "ab"}
    yield started
    for elector in started.values():
        elector.stop()


def leads_within(elector: LeaderElector, seconds: float) -> bool:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        return elector.wait(stop, leading=True)
    finally:
        timer.cancel()


def test_one_candidate_leads_and_the_other_waits_until_the_lease_is_released(
        api: KubeApi, namespace: str, candidates: dict[str, LeaderElector]) -> None:
    a, b = candidates["a"], candidates["b"]
    a.start()
    assert leads_within(a, 5)
    b.start()
    assert not leads_within(b, 1.0)      # renewed or not, a lease younger than its duration is a's
    a.stop()
    started = time.monotonic()
    assert leads_within(b, 5) and time.monotonic() - started < 1.0
    lease = api.get(kubeapi.LEASE, "leader", namespace)["spec"]
    assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("b", 1)


def test_a_lease_left_unrenewed_for_its_duration_is_taken_over(candidates: dict[str, LeaderElector]) -> None:
    a, b = candidates["a"], candidates["b"]
    a.step()                             # a leads once and never renews (a crashed leader)
    assert a.leading()
    b.start()
    started = time.monotonic()
    assert leads_within(b, 5)
    assert time.monotonic() - started >= FAST.duration - FAST.retry_period


def test_a_leader_whose_lease_was_taken_stops_leading_at_once(
        api: KubeApi, namespace: str, candidates: dict[str, LeaderElector]) -> None:
    a = candidates["a"]
    a.start()
    assert leads_within(a, 5)
    lease = api.get(kubeapi.LEASE, "leader", namespace)
    api.replace(kubeapi.LEASE, lease | {"spec": lease["spec"] | {"holderIdentity": "intruder"}})
    taken = time.monotonic()
    stop = threading.Event()
    threading.Timer(5, stop.set).start()
    assert a.wait(stop, leading=False) and not stop.is_set()
    assert time.monotonic() - taken < FAST.renew_deadline     # at its next round, not at the deadline
    stop.set()

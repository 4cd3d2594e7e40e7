"""Leader election on a Lease, on this process's clock: the first candidate leads; another waits
while the holder renews, takes over a lease duration after it stops, and at once after a release;
a leader that cannot renew stops leading at the renew deadline, one whose Lease was taken at once;
a lost race is no error; a missing namespace is named with the fix."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge

from kaipolicy.cache import kubeapi
from kaipolicy.daemon.leader import LeaderElector, LeaseTimings, lease_name, own_namespace
from kaipolicy.errors import ConfigError
from tests.unit.fakeapi import FakeApi

KEY = ("Lease", "kai-scheduler", "kai-scheduler")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _electors(api: FakeApi, clock: Clock, *names: str, gauge: Gauge | None = None) -> list[LeaderElector]:
    return [LeaderElector(api, "kai-scheduler", "kai-scheduler", n, LeaseTimings(15, 10, 5), gauge=gauge, clock=clock)
            for n in names]


def _holder(api: FakeApi) -> str:
    return str(api.objects[KEY]["spec"]["holderIdentity"])


@pytest.mark.parametrize(("scheduler", "partition", "want"), [
    ("kai-scheduler", "", "kai-scheduler"), ("kai-scheduler", "a100", "kai-scheduler-a100")])
def test_the_lease_is_named_as_the_reference_names_it(scheduler: str, partition: str, want: str) -> None:
    assert lease_name(scheduler, partition) == want


@pytest.mark.parametrize(("timings", "ok"), [
    ((15, 10, 2), True), ((1.5, 1, 0.25), True), ((15, 15, 5), False), ((15, 10, 10), False), ((15, 10, 0), False)])
def test_timings_must_keep_the_retry_period_below_the_renew_deadline_below_the_duration(
        timings: tuple[float, float, float], ok: bool) -> None:
    if ok:
        LeaseTimings(*timings)
    else:
        with pytest.raises(ConfigError, match="--retry-period < --renew-deadline < --lease-duration"):
            LeaseTimings(*timings)


def test_the_lease_namespace_is_the_pods_own_else_the_references(tmp_path: Path) -> None:
    (tmp_path / "namespace").write_text("kaipolicy-system\n")
    assert own_namespace(str(tmp_path / "namespace")) == "kaipolicy-system"
    assert own_namespace(str(tmp_path / "missing")) == "kai-scheduler"


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _electors(api, clock, "a", "b")
    a.step()
    b.step()
    assert (a.leading(), b.leading(), _holder(api)) == (True, False, "a")
    assert api.objects[KEY]["spec"]["leaseDurationSeconds"] == 15


def test_another_candidate_takes_over_a_lease_duration_after_the_holder_stops_renewing() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _electors(api, clock, "a", "b")
    a.step()
    for _ in range(4):      # a renews every 5 s: b keeps waiting
        clock.now += 5
        a.step()
        b.step()
        assert not b.leading()
    clock.now += 14          # a stopped (killed): not yet a lease duration since b saw the last renewal
    b.step()
    assert not b.leading()
    clock.now += 1
    b.step()
    assert b.leading() and _holder(api) == "b"
    assert api.objects[KEY]["spec"]["leaseTransitions"] == 1
    a.step()                 # a comes back: b holds it now, a must not lead
    assert not a.leading()


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline() -> None:
    api, clock = FakeApi(), Clock()
    (a,) = _electors(api, clock, "a")
    a.step()
    api.fail("get", "Lease", "kai-scheduler", status=500, times=10)
    clock.now += 9.9
    a.step()
    assert a.leading()
    clock.now += 0.2
    assert not a.leading()
    a.step()
    assert not a._leading and "500" in a.last_error


def test_a_leader_whose_lease_was_taken_stops_leading_at_its_next_round() -> None:
    api, clock = FakeApi(), Clock()
    (a,) = _electors(api, clock, "a")
    a.step()
    api.objects[KEY]["spec"]["holderIdentity"] = "intruder"
    api.objects[KEY]["spec"]["renewTime"] = "later"
    clock.now += 5
    a.step()
    assert not a.leading()


def test_a_release_hands_the_lease_over_at_once_and_stopping_releases() -> None:
    api, clock = FakeApi(), Clock()
    a, b = _electors(api, clock, "a", "b")
    a.step()
    b.step()
    a.stop()                 # never started: stopping only releases
    assert _holder(api) == "" and not a.leading()
    b.step()
    assert b.leading() and _holder(api) == "b"


def test_losing_a_race_for_the_lease_is_no_error() -> None:
    api, clock = FakeApi(), Clock()
    (a,) = _electors(api, clock, "a")
    api.put(kubeapi.LEASE, {"metadata": {"name": "kai-scheduler", "namespace": "kai-scheduler"},
                            "spec": {"holderIdentity": "", "leaseDurationSeconds": 15}})
    api.fail("replace", "Lease", "kai-scheduler", status=409, message="Conflict")
    a.step()
    assert not a.leading() and a.last_error == ""


def test_a_missing_namespace_is_named_with_what_to_do() -> None:
    api, clock = FakeApi(), Clock()
    (a,) = _electors(api, clock, "a")
    api.fail("create", "Lease", "kai-scheduler", status=404, message='namespaces "kai-scheduler" not found')
    a.step()
    assert not a.leading()
    assert a.last_error.startswith("namespace kai-scheduler does not exist: create it, or name another with "
                                   "--lease-namespace")


def test_the_gauge_says_whether_this_process_leads() -> None:
    api, clock = FakeApi(), Clock()
    gauge = Gauge("leader_under_test", "", registry=CollectorRegistry())
    a, b = _electors(api, clock, "a", "b", gauge=gauge)
    a.step()
    assert gauge._value.get() == 1
    b.step()                 # the same gauge, as two processes would each have theirs: b does not lead
    assert gauge._value.get() == 0
    a.release()
    assert gauge._value.get() == 0


def _stop_after(seconds: float) -> threading.Event:
    """A stop event that a hung wait cannot outlive."""
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    return stop


def test_waiting_ends_when_leadership_changes_or_when_told_to_stop() -> None:
    api, clock = FakeApi(), Clock()
    (a,) = _electors(api, clock, "a")
    stop = _stop_after(10)
    threading.Timer(0.1, a.step).start()
    assert a.wait(stop, leading=True) and a.leading()
    clock.now += 10.5        # no renewal within the renew deadline
    assert a.wait(stop, leading=False)
    stop.set()
    assert a.wait(stop, leading=True) is False


def test_a_round_that_fails_with_a_bug_does_not_end_the_election(monkeypatch: pytest.MonkeyPatch) -> None:
    api, clock = FakeApi(), Clock()
    a = LeaderElector(api, "kai-scheduler", "kai-scheduler", "a", LeaseTimings(0.3, 0.2, 0.01), clock=clock)
    rounds: list[int] = []
    real = a._try

    def flaky() -> bool:
        rounds.append(1)
        if len(rounds) == 1:
            raise RuntimeError("a bug")
        return real()
    monkeypatch.setattr(a, "_try", flaky)
    a.start()
    try:
        assert a.wait(_stop_after(10), leading=True) and len(rounds) >= 2
    finally:
        a.stop()
    assert _holder(api) == ""

"""Leader election on a Lease, on this process's clock: the first candidate leads; another waits
while the holder renews, takes over a lease duration after it stops, and at once after a release;
a leader that cannot renew stops leading at the renew deadline; a lost race is no error."""

from __future__ import annotations

import pytest

from kaipolicy.cache import kubeapi
from kaipolicy.server import leader
from kaipolicy.server.leader import LeaderElector, Timing, lease_name
from tests.unit.fakeapi import FakeApi


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(leader, "time", fake)
    return fake


def _electors(api: FakeApi, *names: str) -> list[LeaderElector]:
    return [LeaderElector(api, "kai-scheduler", "kai-scheduler", n, Timing(15, 10, 5)) for n in names]


def _holder(api: FakeApi) -> str:
    return str(api.objects[("Lease", "kai-scheduler", "kai-scheduler")]["spec"]["holderIdentity"])


@pytest.mark.parametrize(("scheduler", "partition", "want"), [
    ("kai-scheduler", "", "kai-scheduler"), ("kai-scheduler", "a100", "kai-scheduler-a100")])
def test_the_lease_is_named_as_the_reference_names_it(scheduler: str, partition: str, want: str) -> None:
    assert lease_name(scheduler, partition) == want


def test_the_first_candidate_creates_the_lease_and_leads(clock: Clock) -> None:
    api = FakeApi()
    a, b = _electors(api, "a", "b")
    a.step()
    b.step()
    assert (a.leading(), b.leading(), _holder(api)) == (True, False, "a")
    assert api.objects[("Lease", "kai-scheduler", "kai-scheduler")]["spec"]["leaseDurationSeconds"] == 15


def test_another_candidate_takes_over_a_lease_duration_after_the_holder_stops_renewing(clock: Clock) -> None:
    api = FakeApi()
    a, b = _electors(api, "a", "b")
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
    assert api.objects[("Lease", "kai-scheduler", "kai-scheduler")]["spec"]["leaseTransitions"] == 1
    a.step()                 # a comes back: b holds it now, a must not lead
    assert not a.leading()


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline(clock: Clock) -> None:
    api = FakeApi()
    (a,) = _electors(api, "a")
    a.step()
    api.fail("get", "Lease", "kai-scheduler", status=500, times=10)
    clock.now += 9.9
    a.step()
    assert a.leading()
    clock.now += 0.2
    assert not a.leading()
    a.step()
    assert not a._leading and "500" in a.last_error


def test_a_release_hands_the_lease_over_at_once(clock: Clock) -> None:
    api = FakeApi()
    a, b = _electors(api, "a", "b")
    a.step()
    b.step()
    a.release()
    assert _holder(api) == "" and not a.leading()
    b.step()
    assert b.leading() and _holder(api) == "b"


def test_losing_a_race_for_the_lease_is_no_error(clock: Clock) -> None:
    api = FakeApi()
    (a,) = _electors(api, "a")
    api.put(kubeapi.LEASE, {"metadata": {"name": "kai-scheduler", "namespace": "kai-scheduler"},
                            "spec": {"holderIdentity": "", "leaseDurationSeconds": 15}})
    api.fail("replace", "Lease", "kai-scheduler", status=409, message="Conflict")
    a.step()
    assert not a.leading() and a.last_error == ""


def test_a_missing_namespace_is_named_with_what_to_do(clock: Clock) -> None:
    api = FakeApi()
    (a,) = _electors(api, "a")
    api.fail("create", "Lease", "kai-scheduler", status=404, message='namespaces "kai-scheduler" not found')
    a.step()
    assert not a.leading()
    assert a.last_error.startswith("namespace kai-scheduler does not exist: create it, or name another with --namespace")

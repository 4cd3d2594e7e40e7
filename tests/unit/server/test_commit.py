"""Writing a cycle's decisions: gangs whole or not at all, evictions, the Events that say so; and
the next cycle waits until the informers show what was written (so no pod is placed twice)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kaipolicy.cache import kubeapi
from kaipolicy.cache.bindrequests import Placement
from kaipolicy.cache.eviction import Eviction
from kaipolicy.server.commit import Committer
from kaipolicy.server.decisions import Decisions, EvictionDecision
from tests.unit.fakeapi import FakeApi

NODES = {"n1"}
JOB = ("PodGroup", "team", "train", "pg-uid")


class Informer(dict[str, Any]):
    version = "0"

    def reached(self, version: str) -> bool:
        return int(self.version) >= int(version)


class Source:
    def __init__(self) -> None:
        self.informers = {"BindRequest": Informer(), "Pod": Informer(), "PodGroup": Informer()}


class Outbox:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, kind: kubeapi.Kind, involved: dict[str, Any], reason: str, message: str, type_: str = "Normal",
              annotations: dict[str, str] | None = None) -> bool:
        self.events.append((kind.kind, involved["metadata"]["name"], reason, message))
        return True

    def write(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def source() -> Source:
    return Source()


@pytest.fixture
def committer(api: FakeApi, source: Source) -> Committer:
    return Committer(api, source, Outbox(), 3, "")


def _gang(n: int) -> Decisions:
    placements = [Placement("team", f"w-{i}", f"u-{i}", "n1") for i in range(n)]
    return Decisions(gangs=[(JOB, placements)], created={f"u-{i}": time.time() for i in range(n)})


def _show(api: FakeApi, source: Source) -> None:
    """The informers catch up with the API."""
    informer = source.informers["BindRequest"]
    informer.clear()
    informer.update({f"{ns}/{name}": obj for (kind, ns, name), obj in api.objects.items() if kind == "BindRequest"})


def test_a_written_gang_holds_the_next_cycle_until_the_informer_shows_it(
        api: FakeApi, source: Source, committer: Committer) -> None:
    summary = committer.apply(_gang(2), NODES, lambda: True)
    assert summary.binds == 2
    assert not committer.caught_up()
    _show(api, source)
    assert committer.caught_up()
    assert [e[2] for e in committer.outbox.events] == ["Scheduled", "Scheduled"]


def test_an_informer_past_the_writes_version_counts_as_caught_up(source: Source, committer: Committer) -> None:
    committer.apply(_gang(1), NODES, lambda: True)
    source.informers["BindRequest"].version = "10000"      # the request was written, then deleted by someone
    assert committer.caught_up()


def test_a_withdrawn_gang_holds_the_next_cycle_until_the_informer_drops_it(
        api: FakeApi, source: Source, committer: Committer) -> None:
    source.informers["BindRequest"]["team/w-0"] = {"metadata": {"uid": "stale-view"}}
    api.fail("create", "BindRequest", "w-2", status=422, message="injected failure")
    source.informers["BindRequest"].update({"team/w-1": {"metadata": {"uid": "uid-2"}}})  # seen before its deletion
    summary = committer.apply(_gang(3), NODES, lambda: True)
    assert (summary.binds, summary.gangs_failed) == (0, 1)
    assert "injected failure" in summary.errors[0] and "withdrew 2 of the 2 written" in summary.errors[0]
    assert committer.outbox.events[-1][1:3] == ("train", "FailedBinding")
    assert not committer.caught_up()
    _show(api, source)
    assert committer.caught_up()


def test_a_withdrawal_that_failed_is_retried_before_the_next_cycle(
        api: FakeApi, source: Source, committer: Committer) -> None:
    api.fail("create", "BindRequest", "w-1")
    api.fail("delete", "BindRequest", "w-0")
    summary = committer.apply(_gang(2), NODES, lambda: True)
    assert "withdrew 0 of the 1 written (the rest is retried before the next cycle)" in summary.errors[0]
    _show(api, source)
    assert sorted(source.informers["BindRequest"]) == ["team/w-0"]
    assert not committer.caught_up()         # retried now: deleted, but the informer still shows it
    assert not api.objects
    _show(api, source)
    assert committer.caught_up()


def test_no_new_gang_is_started_once_writing_is_no_longer_allowed(api: FakeApi, committer: Committer) -> None:
    summary = committer.apply(_gang(2), NODES, lambda: False)
    assert (summary.binds, summary.abandoned) == (0, 1) and not api.objects


def test_an_evicted_pod_holds_the_next_cycle_until_the_informer_shows_it_going(
        api: FakeApi, source: Source, committer: Committer) -> None:
    pod = {"metadata": {"name": "v", "namespace": "team", "uid": "v-uid"}, "status": {}}
    api.put(kubeapi.POD, pod)
    source.informers["Pod"]["team/v"] = pod
    eviction = EvictionDecision(Eviction("team", "v", "v-uid", "Pod team/v was preempted"), JOB, "reclaim", None, 1)
    summary = committer.apply(Decisions(evictions=[eviction]), NODES, lambda: True)
    assert summary.evictions == 1
    assert not committer.caught_up()
    source.informers["Pod"]["team/v"] = api.objects[("Pod", "team", "v")]
    assert committer.caught_up()
    assert committer.outbox.events == [("PodGroup", "train", "Evict", "Pod team/v was preempted")]

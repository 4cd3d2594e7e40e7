"""The outbox: Events rate-limited per object, reason and message; status writes coalesced per
object; failures counted and survived; what is queued at shutdown gets a bounded time."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.outbox import Outbox
from tests.unit.fakeapi import FakeApi

POD = {"metadata": {"name": "p", "namespace": "team", "uid": "u1"}}


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def outbox(api: FakeApi) -> Iterator[Outbox]:
    box = Outbox(api, window=300.0) 
    yield box
    box.stop(1.0)


def test_the_same_event_on_the_same_object_is_sent_once_within_the_window(api: FakeApi, outbox: Outbox) -> None:
    suppressed = metrics.EVENTS_SUPPRESSED.labels(why="repeated")._value.get()
    sent = [outbox.event(kubeapi.POD, POD, "Unschedulable", "no GPU") for _ in range(5)]
    sent.append(outbox.event(kubeapi.POD, POD, "Unschedulable", "no node"))
    sent.append(outbox.event(kubeapi.POD, POD | {"metadata": {"name": "q", "uid": "u2"}}, "Unschedulable", "no GPU"))
    assert outbox.drain(5)
    assert sent == [True, False, False, False, False, True, True]
    assert [(e["name"], e["message"]) for e in api.events] == [("p", "no GPU"), ("p", "no node"), ("q", "no GPU")]
    assert metrics.EVENTS_SUPPRESSED.labels(why="repeated")._value.get() == suppressed + 4


def test_without_a_window_every_event_is_sent(api: FakeApi) -> None:
    box = Outbox(api, window=0.0) 
    try:
        for _ in range(3):
            box.event(kubeapi.POD, POD, "Unschedulable", "no GPU")
            assert box.drain(5)
    finally:
        box.stop(1.0)
    assert len(api.events) == 3


def test_a_newer_status_write_replaces_one_not_sent_yet(outbox: Outbox) -> None:
    gate, done = threading.Event(), []
    outbox.write(("hold",), "patch", "Pod", gate.wait)        # keeps the sending thread busy
    for i in range(3):
        outbox.write(("PodGroup", "team/g", "True"), "patch", "PodGroup", lambda i=i: done.append(i))
    gate.set()
    assert outbox.drain(5)
    assert done == [2]


def test_a_write_the_api_server_could_not_take_for_the_moment_is_retried(api: FakeApi) -> None:
    box = Outbox(api, retry_delay=0.01)
    try:
        api.fail("create", "Event", "p", status=None, times=2)      # unreachable (an apiserver restart)
        api.fail("create", "Event", "p", status=503, times=1)
        box.event(kubeapi.POD, POD, "Scheduled", "assigned")
        assert box.drain(5)
    finally:
        box.stop(1.0)
    assert [e["message"] for e in api.events] == ["assigned"]
    assert api.verbs("Event") == ["create team/p"] * 4


def test_a_refused_write_is_counted_and_the_next_ones_still_go(api: FakeApi, outbox: Outbox) -> None:
    api.fail("create", "Event", "p", status=422)
    errors = metrics.API_ERRORS.labels(verb="create", kind="Event")._value.get()
    outbox.event(kubeapi.POD, POD, "Unschedulable", "first")
    outbox.event(kubeapi.POD, POD, "Unschedulable", "second")
    assert outbox.drain(5)
    assert [e["message"] for e in api.events] == ["second"]
    assert metrics.API_ERRORS.labels(verb="create", kind="Event")._value.get() == errors + 1


def test_stopping_gives_queued_writes_a_bounded_time(api: FakeApi) -> None:
    box = Outbox(api) 
    gate = threading.Event()
    box.write(("hold",), "patch", "Pod", lambda: gate.wait(0.5))
    box.event(kubeapi.POD, POD, "Unschedulable", "never sent")
    box.stop(0.2)
    gate.set()
    assert api.events == []

"""The informer's list+watch loop against a fake API that records each call: resume from the last
version, list again on 410, back off while the API fails, and tell every change by key."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from kaipolicy.cache import kubeapi
from kaipolicy.cache.informer import Backoff, Informer
from kaipolicy.cache.kubeapi import WatchEvent
from kaipolicy.errors import ClusterError, WatchExpired
from tests.polling import wait_for


def obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


class Stream:
    def __init__(self, events: list[Any], done: threading.Event) -> None:
        self.events, self.done = events, done

    def __iter__(self) -> Iterator[WatchEvent]:
        for e in self.events:
            if isinstance(e, Exception):
                raise e
            yield e
        self.done.wait(10)   # an open watch with nothing more to say, until closed

    def close(self) -> None:
        self.done.set()


class FakeApi:
    """Answers lists and watches from scripts, and records what was asked."""

    def __init__(self, lists: list[Any], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.calls: list[tuple[str, str]] = []
        self.done = threading.Event()

    def list(self, kind: kubeapi.Kind, namespace: str | None = None, **_: Any) -> tuple[list[Any], str]:
        self.calls.append(("list", ""))
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def watch(self, kind: kubeapi.Kind, version: str, *args: Any, **kwargs: Any) -> Stream:
        self.calls.append(("watch", version))
        if not self.watches:
            return Stream([], self.done)
        return Stream(self.watches.pop(0), self.done)


def run(api: FakeApi) -> tuple[Informer, list[str]]:
    changed: list[str] = []
    informer = Informer(api, kubeapi.POD, changed.append, backoff=Backoff(0.01, 0.05))  # type: ignore[arg-type]
    informer.start()
    return informer, changed


def test_a_list_fills_the_store_and_changes_then_arrive_by_watch_from_its_version() -> None:
    api = FakeApi([([obj("a", "5"), obj("b", "6")], "10")], [[
        WatchEvent("ADDED", obj("c", "11")), WatchEvent("MODIFIED", obj("a", "12")),
        WatchEvent("DELETED", obj("b", "13")), WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "20"}})]])
    informer, changed = run(api)
    try:
        assert informer.synced.wait(5)
        wait_for("the watched changes", lambda: len(changed) == 5, 5)
        assert changed == ["ns/a", "ns/b", "ns/c", "ns/a", "ns/b"]
        assert sorted(informer.keys()) == ["ns/a", "ns/c"]
        assert informer.get("ns/a") == obj("a", "12")
        wait_for("the bookmark's version", lambda: informer._version == "20", 5)
    finally:
        informer.stop()
    assert api.calls[:2] == [("list", ""), ("watch", "10")]


def test_a_broken_watch_is_reopened_from_the_last_version_after_a_pause() -> None:
    broken = ClusterError("watch Pod: the stream broke")
    api = FakeApi([([], "10")], [[WatchEvent("ADDED", obj("a", "11")), broken],
                                 [ClusterError("watch Pod: cannot reach the API server")]])
    informer, _ = run(api)
    try:
        wait_for("the third watch", lambda: len([c for c in api.calls if c[0] == "watch"]) >= 3, 5)
    finally:
        informer.stop()
    assert api.calls[:4] == [("list", ""), ("watch", "10"), ("watch", "11"), ("watch", "11")]
    assert (informer.lists, informer.errors) == (1, 2)


def test_a_410_lists_again_and_what_vanished_meanwhile_is_a_change() -> None:
    api = FakeApi([([obj("a", "5"), obj("b", "6")], "10"), ([obj("b", "6"), obj("c", "30")], "31")],
                  [[WatchExpired("watch Pod: too old resource version", 410)]])
    informer, changed = run(api)
    try:
        wait_for("the second list", lambda: informer.lists == 2, 5)
        wait_for("the watch after it", lambda: ("watch", "31") in api.calls, 5)
    finally:
        informer.stop()
    assert sorted(informer.keys()) == ["ns/b", "ns/c"]
    assert changed == ["ns/a", "ns/b", "ns/a", "ns/c"]   # b did not change: it is not told again


def test_a_failing_first_list_is_retried_and_synced_only_once_it_answers() -> None:
    api = FakeApi([ClusterError("list Pod: cannot reach"), ClusterError("list Pod: cannot reach"), ([], "3")], [])
    informer, _ = run(api)
    try:
        assert informer.synced.wait(5)
    finally:
        informer.stop()
    assert [c for c in api.calls if c[0] == "list"] == [("list", "")] * 3
    assert informer.errors == 2


def test_backoff_doubles_up_to_its_limit_and_starts_over_after_a_reset() -> None:
    b = Backoff(0.5, 3.0)
    assert [b.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.reset()
    assert b.next() == 0.5


def test_managed_fields_are_not_kept() -> None:
    listed = obj("a", "5") | {"metadata": {**obj("a", "5")["metadata"], "managedFields": [{"manager": "kubectl"}]}}
    watched = obj("b", "11")
    watched["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    api = FakeApi([([listed], "10")], [[WatchEvent("ADDED", watched)]])
    informer, changed = run(api)
    try:
        wait_for("the watched object", lambda: "ns/b" in changed, 5)
    finally:
        informer.stop()
    assert all("managedFields" not in (informer.get(k) or {})["metadata"] for k in ("ns/a", "ns/b"))


def test_a_watch_that_delivered_events_before_breaking_is_reopened_after_the_first_pause_again() -> None:
    broken = ClusterError("watch Pod: the stream broke")
    # two failures in a row double the pause; a healthy stream that breaks later starts over
    api = FakeApi([([], "10")], [[broken], [broken], [WatchEvent("ADDED", obj("a", "11")), broken]])
    pauses: list[float] = []

    class Recorded(Backoff):
        def next(self) -> float:
            pauses.append(super().next())
            return pauses[-1]

    informer = Informer(api, kubeapi.POD, lambda key: None, backoff=Recorded(0.01, 10.0))  # type: ignore[arg-type]
    informer.start()
    try:
        wait_for("the fourth watch", lambda: len([c for c in api.calls if c[0] == "watch"]) >= 4, 5)
    finally:
        informer.stop()
    assert pauses == [0.01, 0.02, 0.01]

"""The binder's work queue: a key waits once, one worker holds it at a time, a key re-added while
held comes back after `done`, delayed keys come when due (the earliest add wins)."""

from __future__ import annotations

import threading

from kaipolicy.binder.workqueue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_added_twice_waits_once_and_keys_come_in_order() -> None:
    q = WorkQueue()
    for key in ["a", "b", "a"]:
        q.add(key)
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]


def test_a_key_held_by_a_worker_is_not_handed_to_another_until_done_then_comes_back_once() -> None:
    q = WorkQueue()
    q.add("pod")
    assert q.get(0) == "pod"
    q.add("pod")
    q.add("pod")
    assert q.get(0) is None        # held: nobody else may take it
    q.done("pod")
    assert q.get(0) == "pod"
    q.done("pod")
    assert q.get(0) is None


def test_a_delayed_key_comes_when_due_and_the_earliest_add_wins() -> None:
    clock = Clock()
    q = WorkQueue(clock)
    q.add_after("late", 5)
    q.add_after("late", 2)
    q.add_after("late", 9)
    assert q.get(0) is None and q.delayed() == 1
    clock.now = 2.0
    assert q.get(0) == "late"
    q.done("late")
    clock.now = 10.0
    assert q.get(0) is None


def test_shutdown_wakes_waiting_workers_with_none() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(q.get()))
    worker.start()
    q.shutdown()
    worker.join(5)
    assert got == [None]
    q.add("after")
    assert q.get(0) is None

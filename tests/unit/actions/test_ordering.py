"""Jobs by queue: the eviction order judges a queue by the victims already taken from it."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.actions import ordering
from kaipolicy.actions.eviction_loop import solve_in_order
from kaipolicy.actions.ordering import JobFilter, JobsByQueue
from kaipolicy.actions.signatures import FailedSignatures
from kaipolicy.api.job import Job
from kaipolicy.api.task import Status, Task
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.statement import Statement
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def _victim_order(sum_taken: bool, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(ordering, "SUM_TAKEN_VICTIMS", sum_taken)
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "creationOrder": 0},
              {"name": "qb", "deserved": {"gpu": 2}, "creationOrder": 1}]
    running = [{"state": "Running", "node": "n0"}]
    jobs = [*(job(f"a{i}", "qa", running, createdMinutesAgo=10 + i) for i in range(5)),
            *(job(f"b{i}", "qb", [{"state": "Running", "node": "n1"}], createdMinutesAgo=10 + i,
                  perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9}) for i in range(2))]
    ssn = open_session(scenario([node("n0", gpus=8), node("n1", gpus=8)], jobs, queues).snapshot(),
                       SchedulerConfig(), default_bundle())
    order = JobsByQueue(ssn, victims=True).add(ssn.cluster.jobs.values(), JobFilter(preemptible=True))
    popped = []
    while not order.empty():
        victim = order.pop()
        assert victim is not None
        popped.append(victim.name)
    return popped


def test_victims_are_taken_from_the_queue_left_most_over_its_share_counting_those_already_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # qa holds 5 GPUs in one-GPU jobs, qb 4 in two-GPU jobs, both deserve 2; newest job first.
    # qa gives up two jobs before qb's turn comes; judged without the victims already taken,
    # qa would give up all five first.
    assert _victim_order(True, monkeypatch) == ["a0", "a1", "b0", "a2", "a3", "a4", "b1"]


def test_the_running_sum_of_taken_victims_orders_as_summing_them_again_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _victim_order(True, monkeypatch) == _victim_order(False, monkeypatch)


def test_a_sorted_order_loads_again_without_the_skipped_jobs_and_those_whose_pods_changed_status() -> None:
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "creationOrder": 0},
              {"name": "qb", "deserved": {"gpu": 2}, "creationOrder": 1}]
    jobs = [*(job(f"a{i}", "qa", createdMinutesAgo=10 - i) for i in range(4)), job("b0", "qb")]
    ssn = open_session(scenario([node("n0", gpus=8)], jobs, queues).snapshot(), SchedulerConfig(), default_bundle())
    by_name = {j.name: j for j in ssn.cluster.jobs.values()}
    sorted_jobs = JobsByQueue(ssn).add(ssn.cluster.jobs.values(), JobFilter(pending=True)).sorted_jobs()
    # a1's pod changes status: its key may differ, so it is taken again
    task = next(iter(by_name["a1"].tasks.values()))
    ssn.set_status(task, type(task.status).PIPELINED)
    order = JobsByQueue(ssn)
    changed = order.add_sorted(sorted_jobs, {by_name["a3"].uid})
    assert [j.name for j in changed] == ["a1"]
    popped = []
    while not order.empty():
        popped.append(order.pop().name)   # type: ignore[union-attr]
    assert sorted(popped) == ["a0", "a2", "b0"]
    assert popped.index("a0") < popped.index("a2")
    # loaded again, nothing changed since: the same jobs come out, in the same order
    again = JobsByQueue(ssn)
    assert [j.name for j in again.add_sorted(sorted_jobs, {by_name["a3"].uid})] == ["a1"]
    assert [again.pop().name for _ in range(3)] == popped   # type: ignore[union-attr]


def test_a_listed_job_whose_pods_are_back_in_their_statuses_does_not_count_as_changed() -> None:
    # a simulation pipelines a pending pod and rolls it back: its statuses are as they were, so
    # it keeps its place (the heaps' shape must not depend on which simulations ran)
    jobs = [job(f"a{i}", "qa", createdMinutesAgo=10 - i) for i in range(3)]
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "creationOrder": 0}]
    ssn = open_session(scenario([node("n0", gpus=8)], jobs, queues).snapshot(), SchedulerConfig(), default_bundle())
    by_name = {j.name: j for j in ssn.cluster.jobs.values()}
    sorted_jobs = JobsByQueue(ssn).add(ssn.cluster.jobs.values(), JobFilter(pending=True)).sorted_jobs()
    task = next(iter(by_name["a1"].tasks.values()))
    status = task.status
    ssn.set_status(task, type(status).PIPELINED)
    assert [j.name for j in sorted_jobs.changed(ssn, set())] == ["a1"]
    assert sorted_jobs.changed(ssn, {by_name["a1"].uid}) == []   # (a job taking part is left out)
    ssn.set_status(task, status)
    assert ssn.job_keys_pure   # (its key is then as listed)
    assert sorted_jobs.changed(ssn, set()) == []
    assert not sorted_jobs.changed_pending(ssn, set())
    order = JobsByQueue(ssn)
    order.add_sorted(sorted_jobs, set())
    order.add([j for j in sorted_jobs.changed(ssn, set())], JobFilter())
    assert [order.pop().name for _ in range(3)] == ["a0", "a1", "a2"]   # type: ignore[union-attr]


def test_the_changed_jobs_are_asked_again_after_every_status_change_of_a_listed_job() -> None:
    # what the list of changed jobs remembers between calls must follow each status change
    jobs = [job(f"a{i}", tasks=[{"state": "Pending"}, {"state": "Pending"}], minAvailable=1) for i in range(3)]
    ssn = open_session(scenario([node("n0", gpus=8)], jobs).snapshot(), SchedulerConfig(), default_bundle())
    by_name = {j.name: j for j in ssn.cluster.jobs.values()}
    sorted_jobs = JobsByQueue(ssn).add(ssn.cluster.jobs.values(), JobFilter(pending=True)).sorted_jobs()
    assert sorted_jobs.changed(ssn, set()) == [] and not sorted_jobs.changed_pending(ssn, set())
    first, second = by_name["a1"].tasks.values()
    ssn.set_status(first, Status.PIPELINED)
    assert [j.name for j in sorted_jobs.changed(ssn, set())] == ["a1"]
    assert sorted_jobs.changed_pending(ssn, set()) and not sorted_jobs.changed_pending(ssn, {by_name["a1"].uid})
    ssn.set_status(second, Status.PIPELINED)     # a1 has no pending pod left
    assert [j.name for j in sorted_jobs.changed(ssn, set())] == ["a1"]
    assert not sorted_jobs.changed_pending(ssn, set())
    ssn.set_status(next(iter(by_name["a2"].tasks.values())), Status.PIPELINED)
    assert [j.name for j in sorted_jobs.changed(ssn, {by_name["a1"].uid})] == ["a2"]
    assert sorted_jobs.changed_pending(ssn, set())


def test_a_disposed_order_is_freed_by_reference_counting_alone() -> None:
    # the cyclic collector is paused during a cycle, and the solver builds an order per simulation
    import gc
    import weakref
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "parent": "d"}, {"name": "qb", "deserved": {"gpu": 2}, "parent": "d"}]
    jobs = [*(job(f"a{i}", "qa") for i in range(3)), job("b0", "qb")]
    ssn = open_session(scenario([node("n0")], jobs, queues, departments=[{"name": "d", "deserved": {"gpu": 4}}])
                       .snapshot(), SchedulerConfig(), default_bundle())
    was = gc.isenabled()
    gc.disable()
    try:
        kept, freed = [], []
        for dispose in (False, True):
            order = JobsByQueue(ssn).add(ssn.cluster.jobs.values(), JobFilter(pending=True))
            order.pop()
            (freed if dispose else kept).append(weakref.ref(order))
            if dispose:
                order.dispose()
                assert order.empty()
            del order
        assert kept[0]() is not None      # its heaps and nodes hold it in cycles
        assert freed[0]() is None
    finally:
        if was:
            gc.enable()


def _four_victims() -> tuple[Any, list[Any]]:
    running = [{"state": "Running", "node": "n0"}]
    ssn = open_session(scenario([node("n0", gpus=8)], [job(f"v{i}", "q0", running) for i in range(4)]).snapshot(),
                       SchedulerConfig(), default_bundle())
    return ssn, sorted(ssn.cluster.jobs.values(), key=lambda j: j.name)


def test_taken_victims_are_the_earlier_ones_as_they_stood_then_the_next_made_into_a_list_only_when_read() -> None:
    from kaipolicy.api.job import TakenVictims
    _, jobs = _four_victims()
    earlier = jobs[:2]
    victims = TakenVictims(earlier, jobs[2], (1.0, 2.0, 3.0))
    earlier.append(jobs[3])                     # the order takes another one later
    assert len(victims) == 3 and victims.last is jobs[2] and victims.taken == (1.0, 2.0, 3.0)
    assert list(victims) == jobs[:3] and victims[-1] is jobs[2] and victims[-1:] == [jobs[2]]
    assert victims[0] is jobs[0] and victims.jobs() is victims.jobs()


def test_a_queue_order_rule_reading_the_victims_sees_every_victim_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # with a rule of its own (not the built-in's key) the session hands the rule the whole list
    from kaipolicy.api.job import TakenVictims
    ssn, jobs = _four_victims()
    seen: list[list[str]] = []
    real = ssn._env

    def noting(**values: Any) -> Any:
        if "victims" in values:
            seen.append([j.name for j in values["victims"]])
        return real(**values)

    monkeypatch.setattr(ssn, "_env", noting)
    monkeypatch.setattr(type(ssn), "queue_keys_remembered", property(lambda self: False))
    ssn.queue_key(ssn.cluster.queues["q0"], None, TakenVictims(jobs[:2], jobs[2], (0.0, 0.0, 0.0)))
    assert seen == [["v0", "v1", "v2"]]


@pytest.mark.parametrize("depth", [None, 8], ids=["sorted leaves", "heap leaves"])
def test_an_order_tells_whether_it_still_holds_a_job(depth: int | None) -> None:
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "creationOrder": 0},
              {"name": "qb", "deserved": {"gpu": 2}, "creationOrder": 1}]
    jobs = [job("a0", "qa", createdMinutesAgo=10), job("a1", "qa", createdMinutesAgo=5), job("b0", "qb")]
    ssn = open_session(scenario([node("n0", gpus=8)], jobs, queues).snapshot(), SchedulerConfig(), default_bundle())
    uid = {j.name: j.uid for j in ssn.cluster.jobs.values()}
    order = JobsByQueue(ssn, depth=depth).add(ssn.cluster.jobs.values(), JobFilter(pending=True))
    assert order.holding({uid["a0"], uid["b0"]}) and not order.holding({"no-such-job"})
    popped = set()
    while not order.empty():
        first = order.pop()
        assert first is not None
        popped.add(first.uid)
        assert not order.holding(popped)
        assert order.holding(set(uid.values()) - popped) == (len(popped) < 3)


def test_a_queue_whose_allocation_a_commit_moved_is_judged_by_its_key_as_it_stands() -> None:
    # Regression (busy_three_levels seed 26385): the order marks only the queues it pops from or
    # pushes to, so a queue whose pods a committed eviction freed keeps its place in the heap;
    # but each comparison asks its key as it stands, as the reference's queue order does.
    queues = [{"name": "qa", "deserved": {"gpu": 2}, "creationOrder": 0},
              {"name": "qb", "deserved": {"gpu": 2}, "creationOrder": 1}]
    jobs = [job("ra", "qa", [{"state": "Running", "node": "n0"}] * 2, createdMinutesAgo=50),
            job("rb", "qb", [{"state": "Running", "node": "n0"}] * 4, createdMinutesAgo=40),
            job("a0", "qa", createdMinutesAgo=30), job("a1", "qa", createdMinutesAgo=20),
            job("b0", "qb", createdMinutesAgo=10)]
    ssn = open_session(scenario([node("n0", gpus=8)], jobs, queues).snapshot(), SchedulerConfig(), default_bundle())
    by_name = {j.name: j for j in ssn.cluster.jobs.values()}
    qa, qb = ssn.cluster.queues["qa"], ssn.cluster.queues["qb"]
    order = JobsByQueue(ssn).add(ssn.cluster.jobs.values(), JobFilter(pending=True))
    assert ssn.queue_key(qa, by_name["a0"]) < ssn.queue_key(qb, by_name["b0"])   # qb holds twice its share
    tried: list[str] = []

    def attempt(pending: Job) -> tuple[bool, Statement | None, list[Task]]:
        tried.append(pending.name)
        if pending.name != "a0":
            return False, None, []
        stmt = Statement(ssn)   # a0's "solution": rb's pods evicted
        victims = list(by_name["rb"].tasks.values())
        for t in victims:
            stmt.evict(t, "test", {})
        return True, stmt, victims

    solve_in_order(ssn, "reclaim", "reclaimed", order, FailedSignatures(ssn), attempt)
    assert ssn.queue_key(qb, by_name["b0"]) < ssn.queue_key(qa, by_name["a1"])   # qb now holds nothing
    assert tried == ["a0", "b0", "a1"]

"""Fair share: deserved quota first, then over-quota by priority band and weight, level by level."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.api.queue import RESOURCES
from kaipolicy.api.task import ALLOCATED, Status
from kaipolicy.builtins.fairshare import QueueShare, Share, Shares, accepted_quantities, pending_quantities
from kaipolicy.cache.scenario_source import scenario_from_doc
from tests.fuzz.generate import scenario as generated
from tests.unit.helpers import job, node, scenario


def shares(queues: list[dict[str, Any]], jobs: list[dict[str, Any]], gpus: int = 8) -> Shares:
    scn = scenario([node("n0", gpus=gpus)], jobs, queues=queues, defaultDepartment=False)
    return Shares.build(scn.snapshot())


def gpu_fair(s: Shares, name: str) -> float:
    return s.queues[name].shares["gpu"].fair_share


def pending(name: str, queue: str, n: int) -> dict[str, Any]:
    return job(name, queue, tasks=[{"state": "Pending"} for _ in range(n)])


def test_each_queue_gets_its_deserved_quota_when_it_asks_for_it() -> None:
    s = shares([{"name": "a", "deserved": {"gpu": 3}}, {"name": "b", "deserved": {"gpu": 5}}],
               [pending("ja", "a", 3), pending("jb", "b", 5)])
    assert (gpu_fair(s, "a"), gpu_fair(s, "b")) == (3, 5)


def test_a_queue_asking_less_than_its_quota_gets_only_what_it_asks() -> None:
    s = shares([{"name": "a", "deserved": {"gpu": 6}}, {"name": "b", "deserved": {"gpu": 2}}],
               [pending("ja", "a", 1), pending("jb", "b", 7)])
    assert gpu_fair(s, "a") == 1
    assert gpu_fair(s, "b") == 7  # its 2 deserved plus what is left over


def test_leftovers_are_split_by_over_quota_weight() -> None:
    s = shares([{"name": "a", "deserved": {"gpu": 0}, "overQuotaWeight": {"gpu": 3}},
                {"name": "b", "deserved": {"gpu": 0}, "overQuotaWeight": {"gpu": 1}}],
               [pending("ja", "a", 8), pending("jb", "b", 8)])
    assert (gpu_fair(s, "a"), gpu_fair(s, "b")) == (6, 2)


def test_a_higher_priority_band_is_served_before_a_lower_one() -> None:
    s = shares([{"name": "hi", "deserved": {"gpu": 0}, "priority": 200},
                {"name": "lo", "deserved": {"gpu": 0}, "priority": 100}],
               [pending("jh", "hi", 6), pending("jl", "lo", 6)])
    assert (gpu_fair(s, "hi"), gpu_fair(s, "lo")) == (6, 2)


def test_a_limit_caps_what_a_queue_can_be_given() -> None:
    s = shares([{"name": "a", "deserved": {"gpu": 0}, "limit": {"gpu": 2}},
                {"name": "b", "deserved": {"gpu": 0}}],
               [pending("ja", "a", 8), pending("jb", "b", 8)])
    assert gpu_fair(s, "a") == 2
    assert gpu_fair(s, "b") == 6


def test_a_department_divides_its_own_share_among_its_queues() -> None:
    queues = [{"name": "d1", "deserved": {"gpu": 4}}, {"name": "d2", "deserved": {"gpu": 4}},
              {"name": "a", "parent": "d1", "deserved": {"gpu": 1}}, {"name": "b", "parent": "d1", "deserved": {"gpu": 1}},
              {"name": "c", "parent": "d2", "deserved": {"gpu": 4}}]
    s = shares(queues, [pending("ja", "a", 8), pending("jb", "b", 8), pending("jc", "c", 1)])
    assert gpu_fair(s, "d1") == 7  # 4 deserved + 3 that d2 does not ask for
    assert gpu_fair(s, "a") + gpu_fair(s, "b") == 7


def test_running_work_counts_as_allocated_up_the_tree() -> None:
    queues = [{"name": "d", "deserved": {"gpu": 8}}, {"name": "a", "parent": "d", "deserved": {"gpu": 8}}]
    s = shares(queues, [job("r", "a", tasks=[{"state": "Running", "node": "n0"}] * 1)])
    assert s.queues["a"].shares["gpu"].allocated == 1
    assert s.queues["d"].shares["gpu"].allocated == 1


def test_capacity_counts_only_ready_nodes_and_not_what_other_schedulers_pods_hold() -> None:
    scn = scenario([node("ok", gpus=8, otherPods={"count": 1, "gpus": 2}), node("cordoned", gpus=8, unschedulable=True),
                    node("sick", gpus=8, conditions=["NotReady"])],
                   [pending("ja", "a", 10)], queues=[{"name": "a"}], defaultDepartment=False)
    s = Shares.build(scn.snapshot())
    assert s.total["gpu"] == 6
    assert gpu_fair(s, "a") == 6


def _counted_pod_by_pod(cluster: Any) -> Shares:
    """Shares.build's counting as written per pod, with `_add_up` (the reference's loop)."""
    s = Shares(cluster)
    for q in cluster.queues.values():
        s.queues[q.uid] = QueueShare(q, {r: Share() for r in RESOURCES})
    for j in cluster.jobs.values():
        for t in j.tasks.values():
            if t.status in ALLOCATED:
                s._add_up(j, accepted_quantities(t), allocated=True)
            elif t.status == Status.PENDING:
                s._add_up(j, pending_quantities(t.request, cluster.min_node_gpu_memory), allocated=False)
    return s


@pytest.mark.parametrize("seed", [*range(0, 60, 5), 120, 241])
def test_queues_count_the_same_requests_and_allocations_as_adding_pod_by_pod(seed: int) -> None:
    cluster = scenario_from_doc(generated(seed), f"<seed {seed}>").snapshot()
    built, expected = Shares.build(cluster), _counted_pod_by_pod(cluster)
    fields = ("request", "allocated", "allocated_non_preemptible")
    for uid, qs in expected.queues.items():
        for r, sh in qs.shares.items():
            got = built.queues[uid].shares[r]
            assert [getattr(got, f) for f in fields] == [getattr(sh, f) for f in fields], (uid, r)


@pytest.mark.parametrize("seed", [0, 9, 17, 30, 47])   # each has both kinds of jobs, some queues two levels deep
def test_taking_pods_off_and_putting_them_back_moves_every_queue_on_their_path_by_their_grant(seed: int) -> None:
    # on_allocate walks each job's queue path once per pod: the amounts must land on the right
    # resource of every level, and on the non-preemptible totals only for non-preemptible jobs
    cluster = scenario_from_doc(generated(seed), f"<seed {seed}>").snapshot()
    s = Shares.build(cluster)
    placed = [(j, t) for j in cluster.jobs.values() for t in j.tasks.values() if t.status in ALLOCATED]
    assert {j.preemptible for j, _ in placed} == {True, False}
    assert any(s.queues[uid].queue.parent for uid in {j.queue for j, _ in placed})
    before = {uid: {r: (qs.shares[r].allocated, qs.shares[r].allocated_non_preemptible) for r in RESOURCES}
              for uid, qs in s.queues.items()}
    for j, t in placed:
        s.on_allocate(j, t, -1.0)
    for uid, qs in s.queues.items():
        for r in RESOURCES:
            assert qs.shares[r].allocated == pytest.approx(0.0, abs=1e-6), (uid, r)
            assert qs.shares[r].allocated_non_preemptible == pytest.approx(0.0, abs=1e-6), (uid, r)
    for j, t in placed:
        s.on_allocate(j, t, +1.0)
    for uid, qs in s.queues.items():
        for r in RESOURCES:
            got = (qs.shares[r].allocated, qs.shares[r].allocated_non_preemptible)
            assert got == pytest.approx(before[uid][r], abs=1e-6), (uid, r)


@pytest.mark.parametrize("seed", [0, 9, 17])
def test_shares_placed_virtually_are_those_on_allocate_leaves_and_come_back_exactly(seed: int) -> None:
    # the solver reads the order with a job's pods counted as placed, without placing them: inside
    # the block every queue holds what on_allocate gives it, and after it exactly what it held
    cluster = scenario_from_doc(generated(seed), f"<seed {seed}>").snapshot()
    s, counted = Shares.build(cluster), Shares.build(cluster)
    pending_jobs = [j for j in cluster.jobs.values() if any(t.status == Status.PENDING for t in j.tasks.values())]
    assert {j.preemptible for j in pending_jobs} == {True, False}

    def held(sh: Shares) -> dict[tuple[str, str], tuple[float, float]]:
        return {(uid, r): (qs.shares[r].allocated, qs.shares[r].allocated_non_preemptible)
                for uid, qs in sh.queues.items() for r in RESOURCES}

    for j in pending_jobs:
        tasks = [t for t in j.tasks.values() if t.status == Status.PENDING]
        # amounts that do not come back when taken off again: the block must restore, not subtract
        for qs in s.path(j.queue):
            qs.shares["cpu"].allocated += 0.1
            counted.queues[qs.queue.uid].shares["cpu"].allocated += 0.1
        before = held(s)
        for t in tasks:
            counted.on_allocate(j, t, +1.0)
        with s.placed_virtually(j, tasks):
            assert held(s) == held(counted)
            assert held(s) != before
        assert held(s) == before
        with pytest.raises(RuntimeError), s.placed_virtually(j, tasks):
            raise RuntimeError("a rule failed")
        assert held(s) == before
        for (uid, r), (allocated, non_preemptible) in before.items():   # the counted copy as before too
            counted.queues[uid].shares[r].allocated = allocated
            counted.queues[uid].shares[r].allocated_non_preemptible = non_preemptible

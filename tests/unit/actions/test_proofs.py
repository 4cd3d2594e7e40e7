"""Reclaim scenarios proven refused: the capacity count behind the proof, and a cluster where the
proof stands in for the simulation and the decisions are those of simulating."""

from __future__ import annotations

from typing import Any

from kaipolicy.actions.solver import proofs
from kaipolicy.actions.solver.proofs import one_stays_evicted
from kaipolicy.api.task import Status
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import Session
from kaipolicy.framework.tasks import tasks_to_allocate
from kaipolicy.simulate import simulate, without_timings
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario

HALF = {"gpus": 0.4, "cpuMillis": 1000, "memoryBytes": 10**9}   # two leave a fifth of the device idle
QUEUES = [{"name": "q0", "deserved": {"gpu": 1}, "priority": 150, "creationOrder": 0},   # goes first
          {"name": "q1", "deserved": {"gpu": 1}, "creationOrder": 1},
          {"name": "q2", "deserved": {"gpu": 1}, "creationOrder": 2}]


def _cluster(free_elsewhere: bool) -> list[list[dict[str, Any]]]:
    """n0: one device shared by two 0.4 pods of q1 ("halves"); n1: one device, free or held by a pod of q2
    that cannot be evicted; a pending one-GPU job of q0."""
    halves = [job(f"half{i}", "q1", perTask=HALF, tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["g0"]}])
              for i in range(2)]
    others = [] if free_elsewhere else [job("keep", "q2", preemptible=False,
                                            tasks=[{"state": "Running", "node": "n1"}])]
    return [[node("n0", gpus=1), node("n1", gpus=1)], [*halves, *others, job("want", "q0")]]


def _evicted(free_elsewhere: bool) -> tuple[Session, list[Any]]:
    nodes, jobs = _cluster(free_elsewhere)
    ssn = open_session(scenario(nodes, jobs, QUEUES).snapshot(), SchedulerConfig(), default_bundle())
    stmt = ssn.statement()
    halves = [t for j in ("half0", "half1") for t in ssn.cluster.jobs[j].tasks.values()]
    for t in halves:
        stmt.evict(t, "test", {})
    assert all(t.status == Status.RELEASING for t in halves)
    return ssn, halves


def test_pods_that_can_only_go_back_where_the_preemptor_goes_and_do_not_fit_beside_it_stay_evicted() -> None:
    ssn, halves = _evicted(free_elsewhere=False)
    want = tasks_to_allocate(ssn, ssn.cluster.jobs["want"], False)
    # the preemptor takes n0's one device: the two halves need 80 MiB more than n0 has left
    assert one_stays_evicted(ssn, ssn.node_list, want, halves)
    # one half alone would not fit beside it either
    assert one_stays_evicted(ssn, ssn.node_list, want, halves[:1])


def test_pods_that_could_go_back_elsewhere_prove_nothing() -> None:
    ssn, halves = _evicted(free_elsewhere=True)
    want = tasks_to_allocate(ssn, ssn.cluster.jobs["want"], False)
    # n1's free device could take both halves (or the preemptor): no count rules either out
    assert not one_stays_evicted(ssn, ssn.node_list, want, halves)


def _reclaim(proven: bool) -> tuple[dict[str, Any], Session]:
    # as _cluster, with a second node like n0 (q1 then holds its two deserved GPUs)
    nodes, jobs = _cluster(free_elsewhere=False)
    nodes.append(node("n2", gpus=1))
    jobs += [job(f"half{i}", "q1", perTask=HALF, tasks=[{"state": "Running", "node": "n2", "gpuGroups": ["g2"]}])
             for i in (2, 3)]
    queues = [*QUEUES[:1], {"name": "q1", "deserved": {"gpu": 2}, "creationOrder": 1}, QUEUES[2]]
    saved = proofs.REFUSALS_PROVEN
    proofs.REFUSALS_PROVEN = proven
    try:
        res = simulate(scenario(nodes, jobs, queues, actions=["reclaim"]), default_bundle())
    finally:
        proofs.REFUSALS_PROVEN = saved
    return without_timings(res.report()), res.last


def test_a_proven_refusal_decides_as_the_simulation_it_stands_in_for() -> None:
    # q1 holds just its deserved GPUs: taking anything from it breaks both chunk strategies, and
    # its halves cannot come back beside the preemptor. The first scenario that frees a node is
    # simulated (the preemptor was never placed: its grant is left as that placement leaves it)
    # and refused; the one that frees the other node is proven refused. The job stays pending.
    report, ssn = _reclaim(proven=True)
    plain, plain_ssn = _reclaim(proven=False)
    assert report == plain
    assert ssn.tally["proven", "reclaim"] >= 1 and plain_ssn.tally["proven", "reclaim"] == 0
    assert ssn.tally["simulated", "reclaim"] == plain_ssn.tally["simulated", "reclaim"]
    assert next(t for t in report["tasks"] if t["name"] == "want-0")["status"] == "Pending"

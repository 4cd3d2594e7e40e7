"""Reclaim scenarios proven refused: the capacity count behind the proof, a cluster where the proof
stands in for the simulation and the decisions are those of simulating, and the bounds that end a
simulation once the preemptor is placed."""

from __future__ import annotations

from typing import Any

from kaipolicy.actions.solver import Scenario, proofs
from kaipolicy.actions.solver.proofs import one_stays_evicted
from kaipolicy.api.task import Status
from kaipolicy.builtins.reclaimable import snapshot
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import Session
from kaipolicy.framework.tasks import init_request_quantities, tasks_to_allocate
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz import reclaim_pressure
from tests.scenarios.shared import default_bundle
from tests.scenarios.test_eviction_shortcuts import SMALL_LARGE, _small_large
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


ONE = {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 10**9}
DEPARTMENTS = [{"name": "d0", "deserved": {"gpu": 4}, "creationOrder": 0},
               {"name": "d1", "deserved": {"gpu": 4}, "creationOrder": 1}]
IN_DEPARTMENTS = [{"name": "q0", "parent": "d0", "deserved": {"gpu": 3}, "creationOrder": 2},
                  {"name": "q0b", "parent": "d0", "deserved": {"gpu": 1}, "creationOrder": 3},
                  {"name": "q1", "parent": "d1", "deserved": {"gpu": 4}, "creationOrder": 4}]


def _preemptor_placed(free_gpus: int) -> tuple[Session, proofs.ReclaimRefusals, Scenario, list[Any]]:
    """d0 and d1 each hold their 4 deserved GPUs: q1's gang of 4 on n0; n1 has q0's pod, q0b's 3
    pods that cannot be evicted, and `free_gpus` more. The gang is evicted for a one-GPU job of
    q0 and that job is placed where the gang was."""
    jobs = [job("gang", "q1", perTask=ONE, minAvailable=4, tasks=[{"state": "Running", "node": "n0"}] * 4),
            job("mine", "q0", perTask=ONE, tasks=[{"state": "Running", "node": "n1"}]),
            job("theirs", "q0b", perTask=ONE, preemptible=False, minAvailable=3,
                tasks=[{"state": "Running", "node": "n1"}] * 3),
            job("want", "q0", perTask=ONE)]
    nodes = [node("n0"), node("n1", gpus=4 + free_gpus)]
    doc = scenario(nodes, jobs, IN_DEPARTMENTS, departments=DEPARTMENTS)
    ssn = open_session(doc.snapshot(), SchedulerConfig(), default_bundle())
    proof = proofs.ReclaimRefusals.for_session(ssn)
    assert proof is not None
    want = ssn.cluster.jobs["want"]
    gang = ssn.cluster.jobs["gang"]
    scen = Scenario("reclaim", ssn.cluster.jobs, want, dict(init_request_quantities(ssn, want)), [],
                    snapshot(ssn.shares.queues))
    scen.add_potential(gang, list(gang.tasks.values()))
    stmt = ssn.statement()
    victims = list(gang.tasks.values())
    for t in victims:
        stmt.evict(t, "test", {})
    stmt.pipeline(next(iter(want.tasks.values())), "n0", False)
    return ssn, proof, scen, victims


def test_a_gang_that_cannot_come_back_whole_dooms_the_scenario_once_the_preemptor_is_placed() -> None:
    # d0 would hold 5 of its 4 GPUs after the reclaim, d1 surely gives up its gang (it needs 4
    # GPUs, 3 are left): the saturation check fails, whatever the gang's turn brings
    ssn, proof, scen, victims = _preemptor_placed(free_gpus=0)
    assert proof.refused_after_preemptor(scen, ssn.node_list, victims, {"gang"})
    assert ssn.refusals[proof.label] == 1 and ssn.tally["cut short", ""] == 1


def test_a_gang_that_may_come_back_whole_proves_nothing() -> None:
    # four GPUs free on n1: the gang may go back there, and then nothing is taken from d1
    ssn, proof, scen, victims = _preemptor_placed(free_gpus=4)
    assert not proof.refused_after_preemptor(scen, ssn.node_list, victims, {"gang"})
    assert not ssn.refusals
    # once its turn has passed without it, it stays out
    assert proof.refused_after_preemptor(scen, ssn.node_list, victims, set())


def test_the_bounds_refuse_most_when_every_evicted_pod_stays_out(monkeypatch: Any) -> None:
    # refused_after_preemptor asks the worst case (every evicted pod stays out) before working
    # out which pods surely stay: that is exact only if any refusal within the bounds is also a
    # refusal in the worst case. Checked, with that test off, on every bounds the clusters under
    # reclaim pressure ask.
    asked: list[bool] = []
    original = proofs._RefusalBounds.refused

    def refused(self: Any) -> bool:
        got = original(self)
        if got and self.maybe:
            parts = [*self.sure, *self.maybe]
            asked.append(original(proofs._RefusalBounds(self.proof, self.scenario, parts, [], 0.0)))
        return got

    monkeypatch.setattr(proofs._RefusalBounds, "refused", refused)
    monkeypatch.setattr(proofs.ReclaimRefusals, "_may_refuse", lambda *_: True)   # every split is judged
    for seed in range(100):
        simulate(scenario_from_doc(reclaim_pressure.scenario(seed), "<test>"), default_bundle())
    assert len(asked) >= 5 and all(asked)


def test_a_victim_job_is_one_part_of_the_bounds_only_where_its_amounts_add_up_exactly() -> None:
    ssn, proof, _, gang = _preemptor_placed(free_gpus=0)
    parts = proof._parts(gang)
    # whole numbers: the gang's four pods are one part, their amounts added up
    assert [(p.job, len(p.tasks), p.gives, p.whole) for p in parts] == [
        ("gang", 4, {"cpu": 4000.0, "memory": 4.0 * 10**9, "gpu": 4.0}, 4.0)]
    ssn, halves = _evicted(free_elsewhere=False)
    proof = proofs.ReclaimRefusals.for_session(ssn)
    assert proof is not None
    # a fraction of a device (0.4) is not a whole number: one part per pod, as before
    parts = proof._parts(halves)
    assert [(p.job, len(p.tasks), p.gives["gpu"], p.whole) for p in parts] == [("half0", 1, 0.4, 0.0),
                                                                              ("half1", 1, 0.4, 0.0)]


def test_whole_amounts_too_large_to_add_up_exactly_stay_one_part_per_pod(monkeypatch: Any) -> None:
    _, proof, _, gang = _preemptor_placed(free_gpus=0)
    monkeypatch.setattr(proofs, "EXACT_BELOW", 4.0 * 10**9)    # the gang's memory adds up to that
    assert [len(p.tasks) for p in proof._parts(gang)] == [1, 1, 1, 1]
    monkeypatch.setattr(proofs, "EXACT_BELOW", 4.0 * 10**9 + 1)
    assert [len(p.tasks) for p in proof._parts(gang)] == [4]


def test_the_bounds_decide_alike_with_a_part_per_job_and_a_part_per_pod(monkeypatch: Any) -> None:
    # every bounds check the clusters under reclaim pressure and small cuts of the large shape
    # ask, asked again with one part per pod: the same verdict each time
    asked: list[tuple[bool, bool]] = []
    original = proofs.ReclaimRefusals._bounded

    def bounded(self: Any, *args: Any) -> bool:
        got = original(self, *args)
        monkeypatch.setattr(proofs, "PARTS_BY_JOB", False)
        try:
            asked.append((got, original(self, *args)))
        finally:
            monkeypatch.setattr(proofs, "PARTS_BY_JOB", True)
        return got

    monkeypatch.setattr(proofs.ReclaimRefusals, "_bounded", bounded)
    for seed in range(60):
        simulate(scenario_from_doc(reclaim_pressure.scenario(seed), "<test>"), default_bundle())
    for cut in SMALL_LARGE[:3]:
        simulate(scenario_from_doc(_small_large(*cut), "<test>"), default_bundle())
    assert all(by_job == by_pod for by_job, by_pod in asked)
    assert sum(got for got, _ in asked) >= 20 and sum(not got for got, _ in asked) >= 20


def test_a_walks_start_is_kept_for_the_walks_own_recorded_pods_only() -> None:
    # what the bounds before the evictions read at a walk's start (_WalkStart) is kept while the
    # scenarios come with the walk's own list of recorded pods, and read anew for another list
    ssn, halves = _evicted(free_elsewhere=True)
    proof = proofs.ReclaimRefusals(ssn, "test")
    first = proof._walk_read(halves)
    assert first is not None and proof._walk_read(halves) is first
    other = halves[:1]
    second = proof._walk_read(other)
    assert second is not None and second is not first and second.recorded is other
    assert second.jobs == {"half0"} and first.jobs == {"half0", "half1"}


def test_a_walks_start_adds_the_free_gpus_of_the_nodes_its_list_grows_by() -> None:
    ssn, halves = _evicted(free_elsewhere=True)
    walk = proofs.ReclaimRefusals(ssn, "test")._walk_read(halves)
    assert walk is not None
    n0, n1 = ssn.node_list
    shorter, longer = [n0], [n0, n1]
    # n0's device is releasing whole (both halves on it are evicted), n1's is idle
    assert walk.free_on(ssn, shorter) == 1.0
    assert walk.free_on(ssn, longer) == 2.0 == proofs._free_whole(ssn.table.view(longer))
    assert walk.free_on(ssn, [n1]) == 1.0     # not an extension: read anew
    assert walk.free_on(ssn, shorter) == 1.0


def test_a_victim_job_goes_back_whole_exactly_where_its_placement_takes_every_evicted_pod() -> None:
    # the doomed-together count and the split on a job's two cases hold only for a job whose
    # turn places every evicted pod of it or none: with all its pods evicted, the pods its
    # placement would take are all of them exactly where goes_back_whole says so; a gang above
    # its minimum takes back fewer
    checked = {True: 0, False: 0}
    for seed in range(40):
        cluster = scenario_from_doc(reclaim_pressure.whole_gpu_gangs(seed), f"<seed {seed}>").snapshot()
        ssn = open_session(cluster, SchedulerConfig(), default_bundle())
        stmt = ssn.statement()
        for j in list(ssn.cluster.jobs.values()):
            running = [t for t in j.tasks.values() if t.status == Status.RUNNING]
            if not running or len(running) != len(j.tasks):
                continue
            cp = stmt.checkpoint()
            for t in running:
                stmt.evict(t, "test", {})
            whole = proofs.goes_back_whole(j)
            assert whole == (len(tasks_to_allocate(ssn, j, False)) == len(running)), (seed, j.name)
            checked[whole] += 1
            stmt.rollback(cp)
    assert checked[True] >= 20 and checked[False] >= 20


def test_the_levels_over_fair_share_are_read_anew_for_another_request_queue_or_start() -> None:
    # the levels of the reclaimer's path over fair share are kept per start shares, reclaimer
    # and request: each of those read anew gives what the path says then
    ssn, proof, scen, _ = _preemptor_placed(free_gpus=0)
    want = ssn.cluster.jobs["want"]
    start = scen.start_shares
    assert start is not None

    def levels(request: dict[str, float], queues: Any = start, queue: str = "q0") -> list[str]:
        s = Scenario("reclaim", ssn.cluster.jobs, want, request, [], queues)
        if queue != want.queue:
            s.preemptor = ssn.cluster.jobs["gang"]
        got = [qs.queue.uid for qs in proof.over_share(s)]
        assert got == [qs.queue.uid for qs in proofs._over_share(queues, s.preemptor.queue, request)]
        return got

    one = dict(scen.request)
    many = {**one, "gpu": 100.0}
    assert levels(one) != levels(many)     # more GPUs asked puts more of the path over its share
    assert levels(one) == levels(one)
    levels(one, snapshot(ssn.shares.queues))
    levels(many, queue="q1")

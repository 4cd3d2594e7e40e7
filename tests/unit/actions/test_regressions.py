"""Regressions found by running the reference's unseen test cases through kaipolicy."""

from __future__ import annotations

from typing import Any

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.simulate import simulate
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def _running(name: str, queue: str, minutes: int) -> dict[str, Any]:
    return job(name, queue, tasks=[{"state": "Running", "node": "n0"}], createdMinutesAgo=minutes,
               lastStartMinutesAgo=1)


def test_reclaim_takes_victims_alternately_from_equally_over_share_queues() -> None:
    # Two queues deserving 1 GPU run 3 each; a reclaimer deserving 2 needs 2. Judged with the
    # victims already taken from it, the queue that gave one falls behind the other, so each
    # queue gives one (the newest job of each).
    queues = [{"name": "d1", "deserved": {"gpu": 1}},
              {"name": "qa", "parent": "d1", "deserved": {"gpu": 1}, "creationOrder": 0},
              {"name": "qb", "parent": "d1", "deserved": {"gpu": 1}, "creationOrder": 1},
              {"name": "qr", "parent": "d1", "deserved": {"gpu": 2}, "overQuotaWeight": {"gpu": 0},
               "creationOrder": 2}]
    jobs = [_running("a2", "qa", 7), _running("b2", "qb", 6), _running("a0", "qa", 5), _running("a1", "qa", 4),
            _running("b0", "qb", 3), _running("b1", "qb", 2),
            job("reclaimer", "qr", minAvailable=2, tasks=[{"state": "Pending"}] * 2)]
    report = simulate(scenario([node("n0", gpus=6)], jobs, queues=queues, actions=["reclaim"],
                               defaultDepartment=False), default_bundle()).report()
    status = {t["job"]: t["status"] for t in report["tasks"]}
    assert {j for j, s in status.items() if s == "Releasing"} == {"a1", "b1"}
    assert status["reclaimer"] == "Pipelined"


def test_a_pending_pod_keeps_the_node_it_names_across_cycles() -> None:
    scn = scenario([node("n0", gpus=2)], [job("p", tasks=[{"state": "Pending", "node": "n0"}],
                                              perTask={"gpus": 4, "cpuMillis": 1000, "memoryBytes": 10**6})],
                   cycles=2)
    report = simulate(scn, default_bundle()).report()
    assert [(t["status"], t["node"]) for t in report["tasks"]] == [("Pending", "n0")]


# ---- found by the fuzz tests (tests/fuzz) ------------------------------------------------------------
def test_a_queue_depth_of_zero_lets_no_job_through_instead_of_crashing() -> None:
    queues = [{"name": "d0"}, {"name": "d1"}, {"name": "q0", "parent": "d0", "deserved": {"gpu": 2}},
              {"name": "q1", "parent": "d1", "deserved": {"gpu": 2}}]
    report = simulate(scenario([node("n0")], [job("j0", "q0"), job("j1", "q1")], queues=queues,
                               defaultDepartment=False, config={"queueDepthPerAction": {"allocate": 0}}),
                      default_bundle()).report()
    assert report["binds"] == 0
    assert {t["status"] for t in report["tasks"]} == {"Pending"}


def test_a_victim_moved_by_one_preemptor_is_not_evicted_again_by_the_next() -> None:
    # job2 preempts job1's pod and it is placed again on node2 (moved); job4 must not pick the
    # moved pod as a victim a second time (found by the fuzz tests, seed 21361).
    doc = {"name": "moved victim", "actions": ["preempt"], "queues": [{"name": "q"}],
           "nodes": [{"name": "node1"}, {"name": "node2", "gpus": 4, "gpuMemoryMiB": 100}],
           "jobs": [{"name": "job1", "queue": "q", "priority": 10, "perTask": {"gpus": 0.3},
                     "tasks": [{"name": "job1-0", "state": "Allocated", "node": "node1", "gpuGroups": ["0"]}]},
                    {"name": "job2", "queue": "q", "tasks": [{"name": "job2-0", "state": "Pending"}]},
                    {"name": "job4", "queue": "q", "tasks": [{"name": "job4-4", "state": "Pending"}]}]}
    report = simulate(scenario_from_doc(doc, "<moved victim>"), default_bundle()).report()
    evicted = [e["task"] for e in report["evictionReasons"]]
    assert evicted == ["job1-0"]


def test_a_fraction_opening_a_new_gpu_waits_when_no_device_is_idle() -> None:
    # One device bound to a 0.7 share, two devices whose shares are being released, one idle
    # device taken by a whole-GPU pod: a 0.3 pod that would open a new group (spread prefers it)
    # can only be pipelined onto a releasing device, never bound beyond the node's 4 GPUs.
    spread = [{"plugins": [{"name": n} for n in ("predicates", "proportion", "priority", "nodeavailability",
                                                 "gpusharingorder", "gpuspread", "nodeplacement")]}]
    jobs = [job("shared", perTask={"gpus": 0.7, "cpuMillis": 10, "memoryBytes": 10}, tasks=[
                {"state": "Bound", "node": "n0", "gpuGroups": ["0"]},
                {"state": "Releasing", "node": "n0", "gpuGroups": ["1"]},
                {"state": "Releasing", "node": "n0", "gpuGroups": ["2"]}]),
            job("new", minAvailable=1, perTask={"gpus": 1, "cpuMillis": 10, "memoryBytes": 10}, tasks=[
                {"state": "Pending"}, {"state": "Pending", "resources": {"gpus": 0.3}}])]
    report = simulate(scenario([node("n0")], jobs, config={"tiers": spread}), default_bundle()).report()
    fraction = next(t for t in report["tasks"] if t["name"] == "new-1")
    assert fraction["status"] in ("Pipelined", "Pending")
    assert report["nodes"][0]["idleGpus"] >= 0



# ---- found by the scale work (bench/openb.py) ----------------------------------------------------------
def test_a_new_shared_gpu_never_takes_the_id_of_a_running_group() -> None:
    # A 0.5 pod runs on group new-1 (opened by an earlier cycle); a 0.7 pod cannot join it and
    # opens its own group, which must get a fresh id: reusing new-1 merged the two accounts.
    jobs = [job("running", perTask={"gpus": 0.5, "cpuMillis": 10, "memoryBytes": 10},
                tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["new-1"]}]),
            job("pending", perTask={"gpus": 0.7, "cpuMillis": 10, "memoryBytes": 10})]
    report = simulate(scenario([node("n0", gpus=2)], jobs), default_bundle()).report()
    groups = {t["job"]: (t["status"], t["gpuGroups"]) for t in report["tasks"]}
    assert groups["pending"][0] == "Binding" and groups["pending"][1] != ["new-1"]
    assert report["nodes"][0]["idleGpus"] == 0

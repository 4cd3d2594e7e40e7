"""What each rule of the default bundle (policies/) decides, one small world per behaviour.

Each test builds a tiny scenario, opens a session on it with the default configuration and
asks one rule (bound to that session) about the tasks, jobs and nodes of interest.
"""

from __future__ import annotations

import contextlib
import functools
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kaipolicy.actions.solver.scenario import Scenario
from kaipolicy.actions.solver.views import partial_job
from kaipolicy.api.task import ACTIVE_USED, WHOLE_GPU, Status
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.main import main
from kaipolicy.cycle import BUILTINS, open_session
from kaipolicy.framework.config import DEFAULT_PLUGINS, Params, SchedulerConfig
from kaipolicy.framework.session import GpuView
from kaipolicy.framework.tasks import init_request_quantities
from kaipolicy.rules import BoundRule, Bundle, load_bundle
from kaipolicy.rules.standard import VOCABULARY

POLICIES = Path(__file__).resolve().parents[3] / "policies"
MIG = "nvidia.com/mig-1g.10gb"


@functools.cache
def bundle() -> Bundle:
    return load_bundle([POLICIES], VOCABULARY)


# ---- tiny worlds ---------------------------------------------------------------------------------
def node(name: str, gpus: int = 0, **extra: Any) -> dict[str, Any]:
    labels = {"kai.scheduler/type": name, **extra.pop("labels", {})}
    return {"name": name, "gpus": gpus, "gpuMemoryMiB": 1000, "cpuMillis": 8000, "memoryBytes": 32_000_000_000,
            "maxPods": 110, "labels": labels, **extra}


def job(name: str, tasks: list[dict[str, Any]], queue: str = "q", **extra: Any) -> dict[str, Any]:
    return {"name": name, "queue": queue, "priority": extra.pop("priority", 50), "createdMinutesAgo": 1,
            "perTask": extra.pop("perTask", {"gpus": 1, "cpuMillis": 1000}), "tasks": tasks, **extra}


def pending(**task: Any) -> dict[str, Any]:
    return {"state": "Pending", **task}


def running(on: str, **task: Any) -> dict[str, Any]:
    return {"state": "Running", "node": on, **task}


CPU = {"gpus": 0, "cpuMillis": 1000}


class World:
    """A snapshot of a small scenario, a session on it, and the default rules bound to it."""

    def __init__(self, nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
                 queues: list[dict[str, Any]] | None = None, params: Params | None = None, **doc: Any) -> None:
        scenario = {"name": "w", "actions": ["allocate"], "queues": queues or [{"name": "q"}],
                    "nodes": nodes, "jobs": jobs, **doc}
        self.cluster = scenario_from_doc(scenario).snapshot()
        self.session = open_session(self.cluster, SchedulerConfig(params=params or Params()), bundle())
        self.nodes = list(self.session.node_list)
        self.session.scoring_nodes = self.nodes     # placement.binpack compares these nodes
        self.session.scoring_memo = {}

    def rule(self, plugin: str, name: str, **args: Any) -> BoundRule:
        instance = bundle().instantiate(plugin, args).bind_cluster(self.session)
        return next(r for r in instance.rules if r.name == name)

    def node(self, name: str) -> Any:
        return self.cluster.nodes[name]

    def job(self, name: str) -> Any:
        return self.cluster.jobs[name]

    def task(self, name: str) -> tuple[Any, Any]:
        for j in self.cluster.jobs.values():
            for t in j.tasks.values():
                if t.name == name:
                    return t, j
        raise KeyError(name)

    def scenario(self, preemptor: str, victims: dict[str, int], action: str = "reclaim") -> Scenario:
        """A victim scenario: the preemptor's pending tasks, and the first n running pods of each victim."""
        j = self.job(preemptor)
        partial = partial_job(j, [t for t in j.tasks.values() if t.status == Status.PENDING])
        scenario = Scenario(action, self.cluster.jobs, partial, dict(init_request_quantities(self.session, partial)), [])
        for name, n in victims.items():
            victim = self.job(name)
            scenario.add_potential(victim, [t for t in victim.tasks.values() if t.status in ACTIVE_USED][:n])
        return scenario

    def on_nodes(self, rule: BoundRule, task_name: str) -> dict[str, Any]:
        """The rule's scalar result for one task on every node, by node name."""
        task, j = self.task(task_name)
        return {n.name: rule.scalar(task, j, n) for n in self.nodes}


# ---- elastic, priority, subgrouporder: job and pod-set order ------------------------------------
def test_jobs_below_their_minimum_go_before_jobs_at_it_and_those_before_jobs_above_it() -> None:
    w = World([node("n", 0, cpuMillis=16000)], [
        job("above", [running("n"), running("n"), pending()], perTask=CPU, minAvailable=1),
        job("at", [running("n"), pending()], perTask=CPU, minAvailable=1),
        job("below", [running("n"), pending()], perTask=CPU, minAvailable=2),
    ])
    rule = w.rule("elastic", "below-min-available-first")
    keys = {name: rule.scalar(w.job(name)) for name in ("below", "at", "above")}
    assert keys == {"below": [0], "at": [1], "above": [2]}


def test_higher_priority_jobs_go_first() -> None:
    w = World([node("n", 1)], [job("train", [pending()], priority=50), job("infer", [pending()], priority=125)])
    rule = w.rule("priority", "higher-priority-first")
    assert rule.scalar(w.job("infer")) < rule.scalar(w.job("train"))


def test_pod_sets_below_their_minimum_go_first_then_the_least_allocated_relative_to_their_minimum() -> None:
    w = World([node("n", 0, cpuMillis=16000)], [job("j", [
        pending(subGroup="short"),
        running("n", subGroup="met"), pending(subGroup="met"),
        running("n", subGroup="twice"), running("n", subGroup="twice"), pending(subGroup="twice"),
    ], perTask=CPU, subGroups=[{"name": "short", "minAvailable": 1}, {"name": "met", "minAvailable": 1},
                               {"name": "twice", "minAvailable": 1}])])
    rule = w.rule("subgrouporder", "unsatisfied-first")
    j = w.job("j")
    keys = {name: rule.scalar(j, ps) for name, ps in j.pod_sets.items()}
    assert keys == {"short": [0, 0.0], "met": [1, 1.0], "twice": [1, 2.0]}
    assert sorted(keys, key=keys.__getitem__) == ["short", "met", "twice"]


# ---- kubeflow, ray, taskorder: task order --------------------------------------------------------
def _task_keys(w: World, plugin: str, rule_name: str) -> dict[str, Any]:
    rule = w.rule(plugin, rule_name)
    return {t.name: rule.scalar(t, j) for j in w.cluster.jobs.values() for t in j.tasks.values()}


def test_kubeflow_master_and_launcher_are_ordered_before_workers() -> None:
    role = "training.kubeflow.org/job-role"
    w = World([node("n", 0)], [job("j", [
        pending(name="worker", labels={role: "worker"}), pending(name="master", labels={role: "master"}),
        pending(name="launcher", labels={role: "launcher"}), pending(name="plain"),
    ], perTask=CPU)])
    assert _task_keys(w, "kubeflow", "master-first") == {"worker": [1], "master": [0], "launcher": [0], "plain": [1]}


def test_a_ray_head_is_ordered_before_its_workers() -> None:
    w = World([node("n", 0)], [job("j", [
        pending(name="worker", labels={"ray.io/node-type": "worker"}),
        pending(name="head", labels={"ray.io/node-type": "head"}), pending(name="plain"),
    ], perTask=CPU)])
    assert _task_keys(w, "ray", "head-first") == {"worker": [1], "head": [0], "plain": [1]}


def test_pods_with_a_task_priority_label_go_first_highest_value_first() -> None:
    w = World([node("n", 0)], [job("j", [
        pending(name="plain"), pending(name="low", priority=1), pending(name="high", priority=9),
        pending(name="negative", labels={"kai.scheduler/task-priority": "-3"}),
    ], perTask=CPU)])
    keys = _task_keys(w, "taskorder", "task-priority-label")
    assert sorted(keys, key=keys.__getitem__) == ["high", "low", "negative", "plain"]


def test_a_task_priority_label_that_is_not_a_number_sorts_after_numbered_labels_and_before_none() -> None:
    w = World([node("n", 0)], [job("j", [
        pending(name="plain"), pending(name="numbered", priority=1),
        pending(name="word", labels={"kai.scheduler/task-priority": "high"}),
    ], perTask=CPU)])
    keys = _task_keys(w, "taskorder", "task-priority-label")
    assert keys["numbered"] < keys["word"] < keys["plain"]


# ---- gpupack, gpuspread: which GPU of a node -----------------------------------------------------
def _gpu_world() -> World:
    return World([node("n", 2)], [
        job("half", [running("n", gpuGroups=["g1"])], perTask={"gpus": 0.5}),
        job("frac", [pending()], perTask={"gpus": 0.25}),
    ])


def test_gpupack_scores_a_shared_gpu_by_its_used_portion_and_a_whole_gpu_0() -> None:
    w = _gpu_world()
    task, _ = w.task("frac-0")
    rule = w.rule("gpupack", "fullest-gpu")
    n = w.node("n")
    assert rule.scalar(task, n, GpuView(n, "g1")) == 0.5
    assert rule.scalar(task, n, GpuView(n, WHOLE_GPU)) == 0.0


def test_gpuspread_scores_a_whole_gpu_1_and_a_shared_gpu_by_its_free_portion() -> None:
    w = _gpu_world()
    task, _ = w.task("frac-0")
    rule = w.rule("gpuspread", "emptiest-gpu")
    n = w.node("n")
    assert rule.scalar(task, n, GpuView(n, "g1")) == 0.5
    assert rule.scalar(task, n, GpuView(n, WHOLE_GPU)) == 1.0


# ---- node order ------------------------------------------------------------------------------------
def test_a_fractional_task_prefers_a_node_with_a_shared_gpu_it_can_join_by_1000() -> None:
    w = World([node("joinable", 1), node("crowded", 1), node("empty", 1)], [
        job("a", [running("joinable", gpuGroups=["g1"])], perTask={"gpus": 0.5}),
        job("b", [running("crowded", gpuGroups=["g2"])], perTask={"gpus": 0.75}),
        job("frac", [pending()], perTask={"gpus": 0.5}),
    ])
    rule = w.rule("gpusharingorder", "join-shared-gpu")
    assert w.on_nodes(rule, "frac-0") == {"joinable": 1000.0, "crowded": 0.0, "empty": 0.0}


def test_a_node_where_the_task_fits_now_scores_100_and_one_it_would_wait_on_0() -> None:
    w = World([node("idle", 1), node("releasing", 1)], [
        job("leaving", [{"state": "Releasing", "node": "releasing"}]), job("p", [pending()]),
    ])
    rule = w.rule("nodeavailability", "fits-now")
    assert w.on_nodes(rule, "p-0") == {"idle": 100.0, "releasing": 0.0}


def test_a_cpu_only_task_prefers_a_cpu_only_node_by_10() -> None:
    w = World([node("cpu", 0), node("gpu", 2)], [job("c", [pending()], perTask=CPU), job("g", [pending()])])
    rule = w.rule("resourcetype", "cpu-task-on-cpu-node")
    assert w.on_nodes(rule, "c-0") == {"cpu": 10.0, "gpu": 0.0}
    assert w.on_nodes(rule, "g-0") == {"cpu": 0.0, "gpu": 0.0}


def _placement_world() -> World:
    return World([node("emptiest", 4, cpuMillis=8000), node("middle", 4, cpuMillis=8000),
                  node("fullest", 4, cpuMillis=8000), node("cpu", 0, cpuMillis=8000)], [
        job("m", [running("middle"), running("middle")], perTask={"gpus": 1, "cpuMillis": 2000}),
        job("f", [running("fullest"), running("fullest"), running("fullest")],
            perTask={"gpus": 1, "cpuMillis": 2000}),
        job("g", [pending()]),
        job("c", [pending()], perTask=CPU),
    ])


def test_the_binpack_score_is_9_on_the_fullest_node_and_0_on_the_emptiest() -> None:
    w = _placement_world()
    scores = w.on_nodes(w.rule("nodeplacement", "gpu-binpack"), "g-0")
    # free GPUs 4, 2, 1 -> 9 x (1 - (free - 1) / 3); a node without GPUs scores 0
    assert scores == pytest.approx({"emptiest": 0.0, "middle": 6.0, "fullest": 9.0, "cpu": 0.0})


def test_a_cpu_only_task_packs_by_free_cpu_and_gpu_tasks_are_not_scored_by_the_cpu_rules() -> None:
    w = _placement_world()
    cpu_rule = w.rule("nodeplacement", "cpu-binpack")
    # free CPU 8000, 4000, 2000, 8000 -> 9 x (1 - (free - 2000) / 6000)
    assert w.on_nodes(cpu_rule, "c-0") == pytest.approx({"emptiest": 0.0, "middle": 6.0, "fullest": 9.0, "cpu": 0.0})
    assert set(w.on_nodes(cpu_rule, "g-0").values()) == {None}
    assert set(w.on_nodes(w.rule("nodeplacement", "gpu-binpack"), "c-0").values()) == {None}


def test_with_gpu_spread_a_gpu_task_scores_the_share_of_a_nodes_gpus_still_free() -> None:
    w = _placement_world()
    assert set(w.on_nodes(w.rule("nodeplacement", "gpu-spread"), "g-0").values()) == {None}
    scores = w.on_nodes(w.rule("nodeplacement", "gpu-spread", gpu="spread"), "g-0")
    assert scores == {"emptiest": 1.0, "middle": 0.5, "fullest": 0.25, "cpu": 0.0}
    assert set(w.on_nodes(w.rule("nodeplacement", "gpu-binpack", gpu="spread"), "g-0").values()) == {None}


def test_with_cpu_spread_a_cpu_only_task_scores_the_share_of_a_nodes_cpu_still_free() -> None:
    w = _placement_world()
    scores = w.on_nodes(w.rule("nodeplacement", "cpu-spread", cpu="spread"), "c-0")
    assert scores == {"emptiest": 1.0, "middle": 0.5, "fullest": 0.25, "cpu": 1.0}


def test_the_binpack_score_is_9_everywhere_when_all_candidates_are_equally_free() -> None:
    w = World([node("a", 2), node("b", 2)], [job("g", [pending()])])
    assert w.on_nodes(w.rule("nodeplacement", "gpu-binpack"), "g-0") == {"a": 9.0, "b": 9.0}


def test_nodes_in_the_jobs_preferred_topology_domain_score_higher_and_jobs_without_one_score_0() -> None:
    racks = {"r1": "zone-a", "r2": "zone-a", "r3": "zone-b"}
    nodes = [node(f"n-{r}", 2, labels={"zone": z, "rack": r}) for r, z in racks.items()]
    w = World(nodes, [
        job("topo", [pending(), pending()], topologyConstraint={"topology": "t", "preferredLevel": "rack"}),
        job("plain", [pending()]),
    ], topologies=[{"name": "t", "levels": ["zone", "rack"]}])
    rule = w.rule("topology", "preferred-domain")
    for name in ("topo", "plain"):
        j = w.job(name)
        w.session.pre_job_allocation(j)
        w.session.subset_nodes(j, j.root, list(j.pod_sets.values()), list(j.tasks.values()), w.nodes)
        scores = w.on_nodes(rule, f"{name}-0")
        if name == "plain":
            assert set(scores.values()) == {0.0}
        else:
            assert len(set(scores.values())) > 1 and min(scores.values()) >= 0.0


def test_topologys_builtin_rules_name_built_ins_the_cycle_provides() -> None:
    rules = {r.name: r for r in bundle().plugins["topology"].rules}
    assert rules["required-domains"].builtin in BUILTINS
    assert rules["reset-job-state"].builtin in BUILTINS


# ---- predicates ---------------------------------------------------------------------------------------
def test_a_task_that_would_take_its_queue_over_its_limit_is_denied_on_the_node_with_the_queues_reason() -> None:
    w = World([node("used", 2), node("free", 2)], [
        job("running", [running("used"), running("used")], queue="capped"), job("p", [pending()], queue="capped"),
    ], queues=[{"name": "capped", "deserved": {"gpu": 2}, "limit": {"gpu": 2}}])
    rule = w.rule("predicates", "queue-capacity-on-node")
    task, j = w.task("p-0")
    assert rule.scalar(task, j, w.node("free")) is True
    assert rule.message(task, j, w.node("free")) == (
        "node does not have enough capacity. capped quota has reached the allowable limit of GPUs. "
        "Limit is 2 GPUs, currently 2 GPUs allocated and workload requested 1 GPUs")


@pytest.mark.parametrize(("task_kind", "node_kind", "error"), [
    pytest.param("mig", "plain", "MIG job cannot be scheduled on non-MIG node", id="a MIG task is denied on a non-MIG node"),
    pytest.param("mig", "mixed", "", id="a MIG task fits a mixed-strategy MIG node"),
    pytest.param("whole", "mixed", "non MIG jobs cant run on a node with MigStrategy='mixed'",
                 id="a whole-GPU task is denied on a mixed-strategy MIG node"),
    pytest.param("whole", "single", "", id="a whole-GPU task fits a single-strategy MIG node"),
    pytest.param("fraction", "single", "only whole gpu jobs can run on a node with MigStrategy='single'",
                 id="a fractional task is denied on a single-strategy MIG node"),
    pytest.param("fraction", "plain", "", id="a fractional task fits a plain GPU node"),
    pytest.param("legacy", "plain", "Legacy MIG jobs cannot be scheduled on node plain",
                 id="a legacy MIG task is denied everywhere"),
    pytest.param("cpu", "mixed", "", id="a CPU-only task is never denied for the node's kind of GPUs"),
])
def test_resource_type(task_kind: str, node_kind: str, error: str) -> None:
    w = World([
        node("plain", 2),
        node("single", 2, migStrategy="single",
             labels={"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "single"}),
        node("mixed", 0, migStrategy="mixed", mig={MIG: 2},
             labels={"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "mixed"}),
    ], [
        job("mig", [pending()], perTask={"gpus": 0, "mig": {MIG: 1}}), job("whole", [pending()]),
        job("fraction", [pending()], perTask={"gpus": 0.5}), job("legacy", [pending(legacyMig=True)]),
        job("cpu", [pending()], perTask=CPU),
    ])
    rule = w.rule("predicates", "resource-type")
    task, j = w.task(f"{task_kind}-0")
    n = w.node(node_kind)
    assert rule.scalar(task, j, n) is bool(error)
    assert rule.message(task, j, n) == error


def test_a_gpu_memory_task_is_denied_on_a_node_whose_gpu_memory_is_not_synced() -> None:
    w = World([node("synced", 1), node("unsynced", 1, gpuMemorySynced=False)], [
        job("mem", [pending()], perTask={"gpuMemoryMiB": 500}), job("whole", [pending()]),
    ])
    rule = w.rule("predicates", "gpu-memory-synced")
    assert w.on_nodes(rule, "mem-0") == {"synced": False, "unsynced": True}
    assert w.on_nodes(rule, "whole-0") == {"synced": False, "unsynced": False}
    task, j = w.task("mem-0")
    assert rule.message(task, j, w.node("unsynced")) == (
        "node is not a gpu node or the gpu memory count on the node was not synced yet")


def test_a_node_without_a_free_pod_slot_denies_any_task() -> None:
    w = World([node("full", 2, maxPods=1), node("roomy", 2, maxPods=2)], [
        job("r", [running("full"), running("roomy")], perTask=CPU), job("p", [pending()]),
    ])
    rule = w.rule("predicates", "max-pods")
    assert w.on_nodes(rule, "p-0") == {"full": True, "roomy": False}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("full")) == "node(s) pod number exceeded"


def test_a_fractional_task_opening_a_new_gpu_group_needs_two_free_pod_slots_but_joining_one_needs_one() -> None:
    w = World([node("one-slot-shared", 1, maxPods=2), node("one-slot-empty", 1, maxPods=1),
               node("two-slots-empty", 1, maxPods=2)], [
        job("half", [running("one-slot-shared", gpuGroups=["0"])], perTask={"gpus": 0.5}),
        job("p", [pending()], perTask={"gpus": 0.5}),
    ])
    rule = w.rule("predicates", "max-pods")
    assert w.on_nodes(rule, "p-0") == {"one-slot-shared": False, "one-slot-empty": True, "two-slots-empty": False}


def test_an_unschedulable_node_denies_every_task() -> None:
    w = World([node("cordoned", 1, unschedulable=True), node("open", 1)], [job("p", [pending()])])
    rule = w.rule("predicates", "unschedulable")
    assert w.on_nodes(rule, "p-0") == {"cordoned": True, "open": False}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("cordoned")) == "node(s) were unschedulable"


def test_a_task_with_node_affinity_is_denied_on_the_other_nodes() -> None:
    w = World([node("a", 1), node("b", 1)], [job("p", [pending(nodeAffinity=["a"])]), job("any", [pending()])])
    rule = w.rule("predicates", "node-affinity")
    assert w.on_nodes(rule, "p-0") == {"a": False, "b": True}
    assert w.on_nodes(rule, "any-0") == {"a": False, "b": False}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("b")) == "node(s) didn't match Pod's node affinity/selector"


def test_a_task_requiring_pod_affinity_is_denied_outside_the_zone_of_the_pods_it_follows() -> None:
    w = World([node("a1", 1, labels={"zone": "a"}), node("a2", 1, labels={"zone": "a"}),
               node("b1", 1, labels={"zone": "b"})], [
        job("web", [running("a1", labels={"app": "web"})]),
        job("p", [pending(podAffinity={"labels": {"app": "web"}, "topologyKey": "zone"})]),
    ])
    rule = w.rule("predicates", "pod-affinity")
    assert w.on_nodes(rule, "p-0") == {"a1": False, "a2": False, "b1": True}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("b1")) == "node(s) didn't match pod affinity rules"


# ---- proportion ----------------------------------------------------------------------------------------
def _quota_world() -> World:
    return World([node("n", 8)], [
        job("hog", [running("n"), running("n"), running("n")], queue="over"),
        job("next-over", [pending()], queue="over"),
        job("next-under", [pending()], queue="under"),
        job("too-big", [pending(), pending(), pending()], queue="capped"),
        job("np", [pending(), pending()], queue="under", priority=125),
        job("p", [pending(), pending()], queue="under", priority=50),
    ], queues=[
        {"name": "over", "deserved": {"gpu": 1}, "creationOrder": 0},
        {"name": "under", "deserved": {"gpu": 1}, "creationOrder": 1},
        {"name": "capped", "deserved": {"gpu": 1}, "limit": {"gpu": 2}, "creationOrder": 2},
    ])


def test_a_queue_below_its_deserved_share_goes_before_a_queue_above_it() -> None:
    w = _quota_world()
    rule = w.rule("proportion", "fair-share-order")
    q = w.cluster.queues
    under = rule.scalar(q["under"], w.job("next-under"), [])
    over = rule.scalar(q["over"], w.job("next-over"), [])
    # [over fair share in every resource, not starved (over deserved with the job), -priority, ...]
    assert under[:2] == [0, 0] and over[:2] == [0, 1]
    assert under < over


def test_a_job_that_would_take_its_queue_over_its_gpu_limit_is_over_capacity() -> None:
    w = _quota_world()
    rule = w.rule("proportion", "queue-limit-and-quota")
    q = w.cluster.queues
    assert rule.scalar(w.job("too-big"), q["capped"]) is True
    assert rule.message(w.job("too-big"), q["capped"]) == (
        "capped quota has reached the allowable limit of GPUs. Limit is 2 GPUs, currently 0 GPUs allocated "
        "and workload requested 3 GPUs")
    assert rule.scalar(w.job("next-under"), q["under"]) is False


def test_a_non_preemptible_job_over_its_queues_deserved_gpus_is_denied_but_a_preemptible_one_is_not() -> None:
    w = _quota_world()
    rule = w.rule("proportion", "non-preemptible-quota")
    under = w.cluster.queues["under"]
    assert rule.scalar(w.job("np"), under) is True
    assert rule.message(w.job("np"), under).startswith("Non-preemptible workload is over quota.")
    assert rule.scalar(w.job("p"), under) is False


def test_a_whole_gpu_task_counts_one_device_on_the_node_against_the_queue_limit() -> None:
    """Kept from the reference: on a node a non-MIG task counts the portion of one device."""
    w = World([node("n", 8)], [
        job("used", [running("n")], queue="capped"),
        job("two", [pending()], queue="capped", perTask={"gpus": 2, "cpuMillis": 100}),
        job("one", [pending()], queue="full", perTask={"gpus": 1, "cpuMillis": 100}),
        job("filler", [running("n")], queue="full"),
    ], queues=[{"name": "capped", "deserved": {"gpu": 1}, "limit": {"gpu": 2}},
               {"name": "full", "deserved": {"gpu": 1}, "limit": {"gpu": 1}}])
    rule = w.rule("proportion", "task-capacity-on-node")
    assert w.on_nodes(rule, "two-0") == {"n": False}
    assert w.on_nodes(rule, "one-0") == {"n": True}


def _reclaim_world(**params: Any) -> World:
    return World([node("n", 4)], [
        job("hog", [running("n"), running("n"), running("n")], queue="over"),
        job("next-over", [pending()], queue="over"),
        job("small", [running("n")], queue="under"),
        job("next-under", [pending()], queue="under"),
    ], queues=[{"name": "over", "deserved": {"gpu": 1}, "creationOrder": 0},
               {"name": "under", "deserved": {"gpu": 2}, "creationOrder": 1}], params=Params(**params))


def test_a_job_may_reclaim_while_its_queue_stays_within_its_fair_share_and_not_beyond_it() -> None:
    w = _reclaim_world()
    rule = w.rule("proportion", "reclaim-within-fair-share")
    q = w.cluster.queues
    assert rule.scalar(w.job("next-under"), q["under"]) is True
    assert rule.scalar(w.job("next-over"), q["over"]) is False


def test_a_queue_over_its_quota_may_not_reclaim_from_a_queue_below_its_own() -> None:
    # running victims count only when the solver may not re-place them (allowConsolidatingReclaim off)
    w = _reclaim_world(allow_consolidating_reclaim=False)
    rule = w.rule("proportion", "reclaim-strategies")
    assert rule.scalar(w.job("next-under"), w.scenario("next-under", {"hog": 1})) is True
    assert rule.scalar(w.job("next-over"), w.scenario("next-over", {"small": 1})) is False


# ---- minruntime -----------------------------------------------------------------------------------------
def _runtime_world() -> World:
    return World([node("n", 8)], [
        job("fresh", [running("n")], lastStartMinutesAgo=1),
        job("old", [running("n")], lastStartMinutesAgo=60),
        job("elastic", [running("n"), running("n")], minAvailable=1, lastStartMinutesAgo=1),
        job("p", [pending()], priority=125),
    ])


@pytest.mark.parametrize(("hook", "rule_name", "argument"), [
    ("reclaimVictimFilter", "reclaim-min-runtime", "defaultReclaimMinRuntime"),
    ("preemptVictimFilter", "preempt-min-runtime", "defaultPreemptMinRuntime"),
])
def test_a_victim_started_less_than_its_min_runtime_ago_is_protected_unless_it_is_elastic(
        hook: str, rule_name: str, argument: str) -> None:
    w = _runtime_world()
    rule = w.rule("minruntime", rule_name, **{argument: "5m"})
    assert rule.rule.hook.name == hook
    allowed = {name: rule.scalar(w.job("p"), w.job(name)) for name in ("fresh", "old", "elastic")}
    assert allowed == {"fresh": False, "old": True, "elastic": True}
    default = w.rule("minruntime", rule_name)   # 0s: nobody is protected
    assert default.scalar(w.job("p"), w.job("fresh")) is True


@pytest.mark.parametrize(("rule_name", "action", "argument"), [
    ("reclaim-elastic-keeps-minimum", "reclaim", "defaultReclaimMinRuntime"),
    ("preempt-elastic-keeps-minimum", "preempt", "defaultPreemptMinRuntime"),
])
def test_a_protected_elastic_victim_may_lose_only_the_pods_above_its_minimum(
        rule_name: str, action: str, argument: str) -> None:
    w = _runtime_world()
    rule = w.rule("minruntime", rule_name, **{argument: "5m"})
    assert rule.scalar(w.job("p"), w.scenario("p", {"elastic": 1}, action)) is True
    assert rule.scalar(w.job("p"), w.scenario("p", {"elastic": 2}, action)) is False
    assert rule.scalar(w.job("p"), w.scenario("p", {"fresh": 1}, action)) is True   # not elastic: the filter's job


# ---- the bundle as a whole -------------------------------------------------------------------------------
@pytest.mark.parametrize("plugin", ["dynamicresources", "nominatednode", "podaffinity", "snapshot"])
def test_a_plugin_the_engine_does_not_model_yet_loads_with_no_rules(plugin: str) -> None:
    assert bundle().plugins[plugin].rules == ()


def test_every_plugin_of_the_reference_default_configuration_has_a_rule_file() -> None:
    for name, args in DEFAULT_PLUGINS:
        assert (POLICIES / f"{name}.yaml").is_file(), f"no policies/{name}.yaml"
        assert name in bundle().plugins
        bundle().instantiate(name, args)   # its configured arguments are declared and fit


def test_every_rule_file_names_the_reference_plugin_it_mirrors() -> None:
    for name, plugin in bundle().plugins.items():
        assert plugin.reference == f"pkg/scheduler/plugins/{name}"


def test_kaipolicy_lint_reports_no_errors_on_the_default_bundle() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["lint", str(POLICIES)])
    assert code == 0, out.getvalue()
    assert " error " not in out.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["lint"]) == 0   # the bundled policies are the default


def test_no_default_rule_errors_while_a_default_session_allocates_the_sample_worlds() -> None:
    """The rules above, run together by the allocate action, raise no rule errors."""
    from kaipolicy.actions.allocate import allocate
    for w in (_placement_world(), _quota_world(), _gpu_world()):
        allocate(w.session)
        assert w.session.errors == []
        assert any(t.status != Status.PENDING for j in w.cluster.jobs.values() for t in j.tasks.values())


def _vector(w: World, rule: BoundRule, task_name: str) -> dict[str, Any]:
    """The rule's vector result for one task over every node, by node name."""
    task, j = w.task(task_name)
    assert rule.vector is not None
    values = rule.vector(task, j, w.session.table.view(w.nodes))
    return {n.name: bool(v) if isinstance(v, (bool, np.bool_)) else v for n, v in zip(w.nodes, values, strict=True)}


def test_a_node_with_a_bad_condition_denies_every_task_and_says_which() -> None:
    w = World([node("sick", 1, conditions=["NotReady", "DiskPressure"]), node("well", 1)], [job("p", [pending()])])
    rule = w.rule("predicates", "node-condition")
    assert w.on_nodes(rule, "p-0") == {"sick": True, "well": False}
    assert _vector(w, rule, "p-0") == {"sick": True, "well": False}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("sick")) == "node has NotReady condition, node has DiskPressure condition"


def test_a_tainted_node_denies_tasks_that_do_not_tolerate_its_taint() -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    w = World([node("tainted", 1, taints=[taint]), node("open", 1)], [
        job("p", [pending()]),
        job("tolerant", [pending(tolerations=[{"key": "dedicated", "operator": "Exists"}])]),
    ])
    rule = w.rule("predicates", "taints")
    assert w.on_nodes(rule, "p-0") == {"tainted": True, "open": False}
    assert _vector(w, rule, "p-0") == {"tainted": True, "open": False}
    assert w.on_nodes(rule, "tolerant-0") == {"tainted": False, "open": False}
    task, j = w.task("p-0")
    assert rule.message(task, j, w.node("tainted")) == "node(s) had untolerated taint {dedicated: infer}"


def test_a_task_with_a_node_selector_or_required_affinity_is_denied_on_nodes_without_the_labels() -> None:
    affinity = [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]
    w = World([node("h", 1, labels={"gpu": "h100", "zone": "a"}), node("a", 1, labels={"gpu": "a100", "zone": "a"})], [
        job("sel", [pending(nodeSelector={"gpu": "a100"})]),
        job("aff", [pending(requiredNodeAffinity=affinity)]),
    ])
    rule = w.rule("predicates", "node-affinity")
    assert w.on_nodes(rule, "sel-0") == {"h": True, "a": False}
    assert _vector(w, rule, "sel-0") == {"h": True, "a": False}
    assert w.on_nodes(rule, "aff-0") == {"h": False, "a": True}

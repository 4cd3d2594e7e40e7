"""Scenario files: loading errors name the file and place; settling between cycles."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kaipolicy.api.resources import Request
from kaipolicy.api.task import PodAffinity, Status, Task
from kaipolicy.cache.scenario_source import load_scenario
from kaipolicy.errors import ScenarioError
from tests.unit.helpers import job, node, scenario


def test_a_file_that_is_not_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nactions: [allocate\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(bad)
    assert str(e.value) == (f"{bad}:3:1: malformed YAML: did not find expected ',' or ']' (while parsing a "
                            "flow sequence that starts at line 2, column 10)")


SMALL = """name: small
actions: [allocate]
queues: [{name: q0}]
nodes:
- {name: n0, gpus: 1, gpuMemoryMiB: 100, cpuMillis: 1000, memoryBytes: 1000}
jobs:
- name: j0
  queue: q0
  perTask: {gpus: 1, cpuMillis: 1, memoryBytes: 1}
  tasks:
  - {state: Pending}
"""


@pytest.mark.parametrize(("old", "new", "where", "message"), [
    ("queue: q0\n", "queue: q1\n", "8:3: jobs[j0].queue", "unknown queue 'q1'"),
    ("{state: Pending}", "{state: Pending, nodee: n0}", "11:22: jobs[j0].tasks[0].nodee", "unknown key 'nodee'"),
    ("gpus: 1, gpuMemoryMiB: 100,", "gpus: 1,", "5:3: nodes[n0]", "gives 'gpuMemoryMiB'"),
    ("name: small\n", "name: small\ncycles: .nan\n", "2:1: cycles", "expected a finite number, got nan"),
])
def test_a_rule_broken_in_a_file_names_its_line_column_and_key_path(
        tmp_path: Path, old: str, new: str, where: str, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace(old, new, 1))
    with pytest.raises(ScenarioError) as e:
        load_scenario(bad)
    assert str(e.value).startswith(f"{bad}:{where}: ") and message in str(e.value), str(e.value)
    assert (e.value.line, e.value.column) == tuple(int(x) for x in where.split(":")[:2])


def test_warnings_carry_the_line_of_their_key_path(tmp_path: Path) -> None:
    path = tmp_path / "gang.yaml"
    path.write_text(SMALL.replace("  tasks:", "  minAvailable: 2\n  tasks:"))
    message = ("minAvailable 2 is more than the job's 1 task(s): the job waits for pods that do not exist and is "
               "never scheduled")
    assert load_scenario(path).warnings == [("jobs[j0].minAvailable (line 10)", message)]


def test_tasks_written_with_an_alias_settle_each_on_their_own(tmp_path: Path) -> None:
    path = tmp_path / "alias.yaml"
    path.write_text(SMALL.replace("  - {state: Pending}\n", "  - &t {state: Pending}\n  - *t\n")
                    .replace("  perTask: {gpus: 1,", "  minAvailable: 1\n  perTask: {gpus: 1,"))
    scn = load_scenario(path)
    cluster = scn.snapshot()
    cluster.jobs["j0"].tasks["j0-0"].status = Status.BINDING
    cluster.jobs["j0"].tasks["j0-0"].node = "n0"
    scn.settle(cluster)
    assert [t["state"] for t in scn.jobs[0]["tasks"]] == ["Running", "Pending"]


def test_tasks_sharing_one_mapping_in_a_document_built_in_code_settle_each_on_their_own() -> None:
    spec = {"state": "Pending"}
    scn = scenario([node("n0")], [job("j0", minAvailable=1, tasks=[spec, spec])])
    cluster = scn.snapshot()
    cluster.jobs["j0"].tasks["j0-0"].status = Status.BINDING
    cluster.jobs["j0"].tasks["j0-0"].node = "n0"
    scn.settle(cluster)
    assert [(t["state"], t.get("node")) for t in scn.jobs[0]["tasks"]] == [("Running", "n0"), ("Pending", None)]
    assert spec == {"state": "Pending"}   # the caller's document is left as it was


@pytest.mark.parametrize(("nodes", "running", "fragment"), [
    ([node("n0", cpuMillis=1000)], [{"perTask": {"gpus": 0, "cpuMillis": 800, "memoryBytes": 1}, "count": 2}],
     "cpuMillis 600 over"),
    ([node("n0", gpus=1)], [{"perTask": {"gpus": 1, "cpuMillis": 1, "memoryBytes": 1}, "count": 2}],
     "GPUs 2 in use of 1"),
    ([node("n0", gpus=1, gpuMemoryMiB=100)],
     [{"perTask": {"gpus": 0.7, "cpuMillis": 1, "memoryBytes": 1}, "count": 2, "gpuGroups": ["0"]}],
     "GPU group '0' 140 MiB of 100"),
    ([node("n0", maxPods=1)], [{"perTask": {"gpus": 0, "cpuMillis": 1, "memoryBytes": 1}, "count": 2}],
     "pods 1 over"),
])
def test_a_node_overcommitted_by_its_running_pods_loads_with_a_warning(
        nodes: list[dict[str, Any]], running: list[dict[str, Any]], fragment: str) -> None:
    jobs = [job(f"r{i}", perTask=r["perTask"],
                tasks=[{"state": "Running", "node": "n0", **({"gpuGroups": r["gpuGroups"]} if "gpuGroups" in r else {})}
                       for _ in range(r["count"])])
            for i, r in enumerate(running)]
    for i, j in enumerate(jobs):
        for k, t in enumerate(j["tasks"]):
            t["name"] = f"r{i}-{k}"
    scn = scenario(nodes, jobs)
    assert [p for p, _ in scn.warnings] == ["nodes[n0]"]
    assert fragment in scn.warnings[0][1] and "nothing new fits there until pods leave" in scn.warnings[0][1]


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_an_unknown_key_names_the_key_path() -> None:
    with pytest.raises(ScenarioError, match=r"jobs\[j0\].perTask.gpuz"):
        scenario([node("n0")], [job("j0", perTask={"gpuz": 1})])


def test_binding_runs_and_pipelined_and_releasing_pods_return_to_pending_after_a_cycle() -> None:
    scn = scenario([node("n0")], [
        job("b", tasks=[{"state": "Running", "node": "n0"}]),
        job("p", tasks=[{"state": "Running", "node": "n0"}]),
        job("r", tasks=[{"state": "Releasing", "node": "n0"}]),
        job("d", tasks=[{"state": "Releasing", "node": "n0"}], deleted=True),
    ])
    cluster = scn.snapshot()
    cluster.jobs["b"].tasks["b-0"].status = Status.BINDING
    cluster.jobs["p"].tasks["p-0"].status = Status.PIPELINED
    scn.settle(cluster)
    after = scn.snapshot()
    assert after.jobs["b"].tasks["b-0"].status == Status.RUNNING and after.jobs["b"].tasks["b-0"].node == "n0"
    assert after.jobs["p"].tasks["p-0"].status == Status.PENDING and after.jobs["p"].tasks["p-0"].node == ""
    assert after.jobs["r"].tasks["r-0"].status == Status.PENDING
    assert after.jobs["d"].tasks["d-0"].status == Status.RELEASING


def test_pipelined_and_evicted_shared_pods_return_to_pending_without_their_gpu_groups() -> None:
    # Only the binder labels a pod with its GPU group: a pipelined pod was never bound and an
    # evicted one comes back as a new pod, so neither names a group next cycle. A bound pod, and a
    # releasing pod of a deleted job, keep theirs.
    shared = {"gpus": 0.5, "cpuMillis": 1, "memoryBytes": 1}
    scn = scenario([node("n0", gpus=2)], [
        job("b", perTask=shared, tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["g0"]}]),
        job("p", perTask=shared, tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["g0"]}]),
        job("r", perTask=shared, tasks=[{"state": "Releasing", "node": "n0", "gpuGroups": ["g1"]}]),
        job("d", perTask=shared, tasks=[{"state": "Releasing", "node": "n0", "gpuGroups": ["g1"]}], deleted=True),
    ])
    cluster = scn.snapshot()
    cluster.jobs["b"].tasks["b-0"].status = Status.BINDING
    cluster.jobs["p"].tasks["p-0"].status = Status.PIPELINED
    scn.settle(cluster)
    groups = {j["name"]: (j["tasks"][0]["state"], j["tasks"][0]["gpuGroups"]) for j in scn.jobs}
    assert groups == {"b": ("Running", ["g0"]), "p": ("Pending", []), "r": ("Pending", []),
                      "d": ("Releasing", ["g1"])}
    after = scn.snapshot()
    assert after.jobs["p"].tasks["p-0"].gpu_groups == [] and after.jobs["r"].tasks["r-0"].gpu_groups == []


def test_the_default_department_holds_queues_without_a_parent() -> None:
    scn = scenario([node("n0")], [job("j")], queues=[{"name": "q0"}])
    cluster = scn.snapshot()
    assert cluster.queues["q0"].parent == "default"
    assert cluster.queues["default"].children == ["q0"]


def test_task_priority_becomes_the_task_priority_label() -> None:
    scn = scenario([node("n0")], [job("j", tasks=[{"state": "Pending", "priority": 7}])])
    assert scn.snapshot().jobs["j"].tasks["j-0"].labels["kai.scheduler/task-priority"] == "7"


def test_a_gpu_fraction_below_one_hundredth_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"jobs\[j\].perTask.gpus: expected 0 or at least 0.01"):
        scenario([node("n0")], [job("j", perTask={"gpus": 0.001, "cpuMillis": 1, "memoryBytes": 1})])


def test_pods_of_other_schedulers_are_used_on_their_node_and_never_idle() -> None:
    other = {"count": 2, "cpuMillis": 3000, "memoryBytes": 10**9, "gpus": 1}
    cluster = scenario([node("n0", gpus=4, otherPods=other)], [job("j", tasks=[{"state": "Pending"}])]).snapshot()
    n = cluster.nodes["n0"]
    assert (n.allocatable.gpus, n.idle.gpus, n.used.gpus) == (4, 3, 1)
    assert n.idle.pods == n.allocatable.pods - 2


def test_node_conditions_and_taints_and_queue_min_runtimes_reach_the_model() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    cluster = scenario([node("n0", conditions=["MemoryPressure"], taints=[taint])], [job("j", queue="q0")],
                       queues=[{"name": "q0", "preemptMinRuntimeSeconds": 60, "reclaimMinRuntimeSeconds": 90}]
                       ).snapshot()
    n = cluster.nodes["n0"]
    assert (n.ready, n.not_ready_reason) == (False, "node has MemoryPressure condition")
    assert [(t.key, t.value, t.effect) for t in n.taints] == [("k", "v", "NoExecute")]
    q = cluster.queues["q0"]
    assert (q.preempt_min_runtime, q.reclaim_min_runtime) == (60, 90)


def test_a_task_keeps_its_node_selector_affinity_terms_and_tolerations() -> None:
    task_spec = {"state": "Pending", "nodeSelector": {"b": "2", "a": "1"},
                 "requiredNodeAffinity": [{"matchExpressions": [{"key": "z", "operator": "In", "values": ["x"]}],
                                           "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                            "values": ["n9"]}]}],
                 "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}
    task = next(iter(scenario([node("n0")], [job("j", tasks=[task_spec])]).snapshot().jobs["j"].tasks.values()))
    assert task.node_selector == (("a", "1"), ("b", "2"))
    assert [(r.key, r.operator, r.values) for r in task.affinity_terms[0].expressions] == [("z", "In", ("x",))]
    assert [(r.key, r.operator, r.values) for r in task.affinity_terms[0].fields] == [("metadata.name", "NotIn", ("n9",))]
    assert [(t.key, t.operator, t.effect) for t in task.tolerations] == [("k", "Exists", "NoSchedule")]
    assert task.has_node_affinity


@pytest.mark.parametrize("constraints", [
    {},
    {"nodeSelector": {}, "requiredNodeAffinity": [], "tolerations": []},
    {"nodeSelector": {"zone": "a"}},
    {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
    {"requiredNodeAffinity": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
])
def test_a_pod_without_node_constraints_gets_the_same_fields_as_one_that_names_them_empty(
        constraints: dict[str, Any]) -> None:
    task = scenario([node("n0")], [job("j", tasks=[{"state": "Pending", **constraints}])]).snapshot().jobs["j"].tasks["j-0"]
    selector = tuple(sorted(constraints.get("nodeSelector", {}).items()))
    assert task.node_selector == selector
    assert len(task.tolerations) == len(constraints.get("tolerations", []))
    assert len(task.affinity_terms) == len(constraints.get("requiredNodeAffinity", []))
    assert isinstance(task.node_selector, tuple) and isinstance(task.tolerations, tuple)


@pytest.mark.parametrize("spec", [
    {"state": "Pending"},
    {"state": "Running", "node": "n0"},
    {"state": "Running", "node": "n0", "name": "mine"},
])
def test_a_pod_naming_only_its_state_node_and_name_is_read_as_one_naming_every_other_key_empty(
        spec: dict[str, Any]) -> None:
    # (such pods are read by a shorter path; the fields must be what the full reading gives)
    empty = {"labels": {}, "gpuGroups": [], "nodeAffinity": [], "legacyMig": False, "nodeSelector": {},
             "requiredNodeAffinity": [], "tolerations": [], "resources": {}}
    short, full = (scenario([node("n0")], [job("j", minAvailable=1, tasks=[dict(s)])]).snapshot().jobs["j"]
                   for s in (spec, {**spec, **empty}))
    (a,), (b,) = short.tasks.values(), full.tasks.values()
    assert [getattr(a, f.name) for f in dataclasses.fields(Task)] == [getattr(b, f.name) for f in dataclasses.fields(Task)]
    assert a.request is b.request and a.labels is not b.labels


@pytest.mark.parametrize(("extra", "field", "value"), [
    ({"labels": {"app": "a"}}, "labels", {"app": "a"}),
    ({"priority": 3}, "priority", 3),
    ({"nodeAffinity": ["n0"]}, "node_affinity", ("n0",)),
    ({"podAffinity": {"labels": {"app": "a"}, "topologyKey": "zone"}}, "pod_affinity",
     PodAffinity((("app", "a"),), "zone", None)),
    ({"resources": {"gpus": 2}}, "request", Request.build(cpu=1000, memory=10**9, gpus=2)),
])
def test_a_pod_naming_any_other_key_has_it_read(extra: dict[str, Any], field: str, value: Any) -> None:
    pod = scenario([node("n0")], [job("j", minAvailable=1, tasks=[{"state": "Pending", **extra}])]).snapshot()
    assert getattr(pod.jobs["j"].tasks["j-0"], field) == value


def test_jobs_asking_alike_share_one_request_and_jobs_asking_otherwise_do_not() -> None:
    per_task = {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 10**9}
    jobs = [job("a", perTask=dict(per_task)), job("b", perTask=dict(per_task)),
            job("c", perTask={**per_task, "gpus": 1.0}), job("e", perTask={**per_task, "gpus": 2})]
    tasks = {name: j.tasks[f"{name}-0"] for name, j in scenario([node("n0")], jobs).snapshot().jobs.items()}
    assert tasks["a"].request is tasks["b"].request
    assert tasks["a"].request == tasks["c"].request and tasks["c"].request.count == 1
    assert tasks["e"].request.gpus == 2 and tasks["a"].request.gpus == 1


def test_every_pod_state_is_read_as_its_status() -> None:
    states = [s.value for s in Status]
    scn = scenario([node("n0", gpus=8)], [job("j", tasks=[{"state": s, "node": "n0"} if s not in ("Pending", "Gated")
                                                          else {"state": s} for s in states], minAvailable=1)])
    tasks = scn.snapshot().jobs["j"].tasks
    assert [t.status for t in tasks.values()] == list(Status)

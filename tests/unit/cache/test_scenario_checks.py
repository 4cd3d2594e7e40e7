"""Scenario rules beyond the schema: numbers, requests, GPU memory, groups, trees; and warnings."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache.scenario_checks import MAX_NUMBER, warnings
from kaipolicy.cache.scenario_schema import validate_scenario
from kaipolicy.errors import ScenarioError
from tests.unit.helpers import job, node


def doc(nodes: list[dict[str, Any]] | None = None, jobs: list[dict[str, Any]] | None = None,
        **over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"actions": ["allocate"], "queues": [{"name": "q0"}],
                         "nodes": nodes if nodes is not None else [node("n0")],
                         "jobs": jobs if jobs is not None else [job("j")]}
    d.update(over)
    return d


def running(node_name: str = "n0", **over: Any) -> dict[str, Any]:
    return {"state": "Running", "node": node_name, **over}


def per_task(**request: Any) -> dict[str, Any]:
    return {"cpuMillis": 1, "memoryBytes": 1, **request}


REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, document, key path, message fragment)
    ("NaN", doc([node("n0", cpuMillis=float("nan"))]), "nodes[n0].cpuMillis", "expected a finite number, got nan"),
    ("infinity in a queue", doc(queues=[{"name": "q0", "deserved": {"gpu": float("inf")}}]),
     "queues[q0].deserved.gpu", "expected a finite number, got inf"),
    ("an integer past 2^53", doc([node("n0", memoryBytes=MAX_NUMBER + 1)]), "nodes[n0].memoryBytes",
     f"{MAX_NUMBER + 1} is out of range"),
    ("a float past 2^53", doc(jobs=[job("j", createdMinutesAgo=1e300)]), "jobs[j].createdMinutesAgo",
     "1e+300 is out of range"),
    ("a 40-digit integer", doc(jobs=[job("j", priority=10**40)]), "jobs[j].priority", "a 41-digit number"),
    ("cycles past 1000", doc(cycles=1001), "cycles", "expected a number <= 1000, got 1001"),
    ("a thousand cycles of 201 nodes and pods", doc([node(f"n{i}") for i in range(200)], cycles=1000), "cycles",
     "1000 cycles of 201 nodes and pods make 201,000 node- and pod-cycles, over the limit of 100,000"),
    ("1.5 GPUs", doc(jobs=[job("j", perTask=per_task(gpus=1.5))]), "jobs[j].perTask.gpus",
     "expected a whole number of GPUs above 1, got 1.5"),
    ("1.5 GPUs in a task's resources", doc(jobs=[job("j", tasks=[{"state": "Pending", "resources": {"gpus": 2.5}}])]),
     "jobs[j].tasks[0].resources.gpus", "expected a whole number of GPUs above 1"),
    ("a fraction below a hundredth", doc(jobs=[job("j", perTask=per_task(gpus=0.001))]), "jobs[j].perTask.gpus",
     "expected 0 or at least 0.01 GPUs"),
    ("gpus with gpuMemoryMiB", doc(jobs=[job("j", perTask=per_task(gpus=0.5, gpuMemoryMiB=10))]),
     "jobs[j].perTask.gpuMemoryMiB", "'gpus' or 'gpuMemoryMiB', not both"),
    ("perTask memory and a task's fraction", doc(jobs=[job("j", perTask=per_task(gpuMemoryMiB=10),
                                                          tasks=[{"state": "Pending", "resources": {"gpus": 0.5}}])]),
     "jobs[j].perTask.gpuMemoryMiB", "not both"),
    ("mig with gpus", doc(jobs=[job("j", perTask=per_task(gpus=1, mig={"nvidia.com/mig-1g.5gb": 1}))]),
     "jobs[j].perTask.mig", "a MIG request names its slices in 'mig' only"),
    ("gpuDevices of whole GPUs", doc(jobs=[job("j", perTask=per_task(gpus=2, gpuDevices=2))]),
     "jobs[j].perTask.gpus", "with 'gpuDevices', 'gpus' is the fraction of each device"),
    ("gpuDevices alone", doc(jobs=[job("j", perTask=per_task(gpuDevices=2))]), "jobs[j].perTask.gpuDevices",
     "got 0"),
    ("a GPU node without its memory", doc([{"name": "n0", "gpus": 1}]), "nodes[n0]",
     "a node with GPUs gives 'gpuMemoryMiB'"),
    ("a GPU node with no memory", doc([node("n0", gpuMemoryMiB=0)]), "nodes[n0].gpuMemoryMiB",
     "expected at least 1 MiB"),
    ("a running fraction without a group", doc(jobs=[job("j", perTask=per_task(gpus=0.5), tasks=[running()])]),
     "jobs[j].tasks[0]", "names the GPU group of each of its 1 device(s) in 'gpuGroups', got 0"),
    ("a running multi-device fraction with one group",
     doc(jobs=[job("j", perTask=per_task(gpus=0.5, gpuDevices=2), tasks=[running(gpuGroups=["0"])])]),
     "jobs[j].tasks[0].gpuGroups", "each of its 2 device(s) in 'gpuGroups', got 1"),
    ("a running GPU-memory task without a group", doc(jobs=[job("j", perTask=per_task(gpuMemoryMiB=50),
                                                                tasks=[running(name="t")])]),
     "jobs[j].tasks[t]", "got 0"),
    ("queues 17 levels deep", doc(queues=[{"name": f"q{i}", **({"parent": f"q{i - 1}"} if i else {})}
                                          for i in range(18)], jobs=[job("j", queue="q17")]),
     "queues[q16].parent", "queues nest more than 16 levels deep"),
    ("subgroups 17 levels deep", doc(jobs=[job("j", subGroups=[{"name": f"g{i}", **({"parent": f"g{i - 1}"} if i else {})}
                                                              for i in range(17)] + [{"name": "leaf", "minAvailable": 1,
                                                                                      "parent": "g16"}],
                                               tasks=[{"state": "Pending", "subGroup": "leaf"}])]),
     "jobs[j].subGroups[g16].parent", "subgroups nest more than 16 levels deep"),
]


@pytest.mark.parametrize(("document", "path", "fragment"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_scenario_breaking_a_rule_is_refused_at_its_key_path(document: dict[str, Any], path: str,
                                                               fragment: str) -> None:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(document, "s.yaml")
    assert info.value.path == path, str(info.value)
    assert fragment in info.value.message


ACCEPTED = [
    ("whole GPUs above 1", doc(jobs=[job("j", perTask=per_task(gpus=3))])),
    ("a fraction of several devices", doc(jobs=[job("j", perTask=per_task(gpus=1, gpuDevices=2))])),
    ("a task's resources naming every GPU key over a fraction",
     doc(jobs=[job("j", perTask=per_task(gpus=0.5), tasks=[{"state": "Pending", "resources": {
         "gpus": 0, "gpuMemoryMiB": 0, "mig": {"nvidia.com/mig-1g.5gb": 1}}}])])),
    ("an unsynced GPU node without its memory", doc([{"name": "n0", "gpus": 1, "gpuMemorySynced": False}])),
    ("a CPU node without GPU memory", doc([{"name": "n0"}], jobs=[job("j", perTask=per_task())])),
    ("a running fraction with its group", doc(jobs=[job("j", perTask=per_task(gpus=0.5),
                                                        tasks=[running(gpuGroups=["x"])])])),
    ("a pending fraction without a group", doc(jobs=[job("j", perTask=per_task(gpus=0.5))])),
    ("a long queue chain within the limit", doc(queues=[{"name": f"q{i}", **({"parent": f"q{i - 1}"} if i else {})}
                                                        for i in range(15)], jobs=[job("j", queue="q14")])),
    ("1000 cycles", doc(cycles=1000)),
    ("1000 cycles of 100 nodes and pods", doc([node(f"n{i}") for i in range(99)], cycles=1000)),
    ("one cycle of 200,000 nodes and pods", doc([{"name": f"n{i}"} for i in range(200_000)])),
    ("2^53 bytes", doc([node("n0", memoryBytes=MAX_NUMBER)])),
]


@pytest.mark.parametrize("document", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_scenarios_within_the_rules_validate(document: dict[str, Any]) -> None:
    validate_scenario(document, "s.yaml")


def test_a_queue_chain_of_thousands_is_checked_in_linear_time() -> None:
    queues = [{"name": f"q{i}"} for i in range(5000)] + [{"name": f"r{i}", "parent": f"q{i}"} for i in range(5000)]
    validate_scenario(doc(queues=queues, jobs=[job("j", queue="r0")]), "s.yaml")


WARNED = [
    ("a gang larger than its tasks", doc(jobs=[job("j", minAvailable=2)]), "jobs[j].minAvailable",
     "minAvailable 2 is more than the job's 1 task(s)"),
    ("a subgroup larger than its tasks", doc(jobs=[job("j", subGroups=[{"name": "a", "minAvailable": 3}],
                                                       tasks=[{"state": "Pending", "subGroup": "a"}])]),
     "jobs[j].subGroups[a].minAvailable", "more than the subgroup's 1 task(s)"),
    ("a job in a queue with children", doc(queues=[{"name": "q0"}, {"name": "q1", "parent": "q0"}]),
     "jobs[j].queue", "queue 'q0' has child queues"),
    ("a job in the implicit default department", doc(jobs=[job("j", queue="default")]), "jobs[j].queue",
     "queue 'default' has child queues"),
]


@pytest.mark.parametrize(("document", "path", "fragment"), [c[1:] for c in WARNED], ids=[c[0] for c in WARNED])
def test_legal_but_hardly_meant_scenarios_get_a_warning(document: dict[str, Any], path: str, fragment: str) -> None:
    validate_scenario(document, "s.yaml")
    assert [(p, m) for p, m in warnings(document) if fragment in m] == [(path, warnings(document)[0][1])]


def test_an_ordinary_scenario_has_no_warning() -> None:
    assert warnings(doc(jobs=[job("j", minAvailable=1, tasks=[{"state": "Pending"}] * 2)])) == []

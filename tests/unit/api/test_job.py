"""Job summaries read in one pass give what their definitions say."""

from __future__ import annotations

import pytest

from kaipolicy.api.job import Job
from kaipolicy.api.resources import Resources
from kaipolicy.api.task import ALLOCATED, Status
from kaipolicy.cache.scenario_source import scenario_from_doc
from tests.fuzz.generate import scenario as generated
from tests.unit.helpers import job, node, scenario


def stale_by_definition(j: Job) -> bool:
    """No pod succeeded, some pod is active, and some pod set has fewer active pods than its minimum."""
    if any(t.status == Status.SUCCEEDED for t in j.tasks.values()):
        return False
    return j.active_used > 0 and not j.gang_satisfied()


@pytest.mark.parametrize("seed", [*range(0, 80, 4), 120, 241])
def test_a_job_is_stale_exactly_as_defined_on_generated_clusters(seed: int) -> None:
    cluster = scenario_from_doc(generated(seed), f"<seed {seed}>").snapshot()
    assert [j.is_stale() for j in cluster.jobs.values()] == [stale_by_definition(j) for j in cluster.jobs.values()]


def allocated_by_definition(j: Job) -> Resources:
    """Each allocated pod's request added up as Resources (the reference's PodGroupInfo.Allocated
    adds ResReq: a GPU-memory pod counts no GPUs, whatever portion it was granted)."""
    total = Resources()
    for t in j.tasks.values():
        if t.status in ALLOCATED:
            req = t.request
            total.add(Resources(req.cpu, req.memory, req.gpus_quota, 1.0))
    return total


def test_a_jobs_allocated_resources_are_its_allocated_pods_requests_added_up() -> None:
    fractions = 0
    for seed in [*range(0, 80, 4), 120, 241]:
        cluster = scenario_from_doc(generated(seed), f"<seed {seed}>").snapshot()
        jobs = list(cluster.jobs.values())
        assert [j.allocated_resources() for j in jobs] == [allocated_by_definition(j) for j in jobs], f"seed {seed}"
        fractions += sum(1 for j in jobs if not float(j.allocated_resources().gpus).is_integer())
    assert fractions > 0   # (the sums met GPU fractions)


@pytest.mark.parametrize(("states", "minimum", "stale"), [
    (["Running", "Running"], 2, False),                  # the gang is whole
    (["Running", "Pending"], 2, True),                   # one short, one active
    (["Pending", "Pending"], 2, False),                  # nothing active
    (["Running", "Succeeded"], 2, False),                # a pod succeeded
    (["Releasing", "Pending"], 2, True),                 # a releasing pod is active
    (["Running"], 1, False),
])
def test_a_job_is_stale_when_its_active_gang_is_short(states: list[str], minimum: int, stale: bool) -> None:
    tasks = [{"state": s, "node": "n0"} if s not in ("Pending",) else {"state": s} for s in states]
    cluster = scenario([node("n0")], [job("j", tasks=tasks, minAvailable=minimum)]).snapshot()
    assert cluster.jobs["j"].is_stale() is stale


def test_a_gpu_memory_pod_adds_no_gpus_to_its_jobs_allocated_resources() -> None:
    # the reference's PodGroupInfo.Allocated adds each pod's ResReq, whose GPUs are 0 for a
    # gpu-memory request (pod_info.go: NewGpuResourceRequirementWithGpus(0, gpuMemory)); the
    # victim queue's order subtracts it (queue_order.go calculateDominantResourceShareWithJob)
    n = node("n0", gpus=1, gpuMemoryMiB=40000)
    mem = job("mem", perTask={"gpuMemoryMiB": 10000, "cpuMillis": 1000, "memoryBytes": 10**9},
              tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["n0-g0"]}])
    frac = job("frac", perTask={"gpus": 0.5, "cpuMillis": 1000, "memoryBytes": 10**9},
               tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["n0-g0"]}])
    cluster = scenario([n], [mem, frac]).snapshot()
    assert cluster.jobs["mem"].tasks[next(iter(cluster.jobs["mem"].tasks))].accepted.gpus_quota > 0  # granted a portion
    assert cluster.jobs["mem"].allocated_resources().gpus == 0.0
    assert cluster.jobs["frac"].allocated_resources().gpus == 0.5

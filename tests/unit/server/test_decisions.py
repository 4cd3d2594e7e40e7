"""A cycle's outcome in the cluster's terms: what each placed pod receives (as the reference's
BindRequest says it), gangs kept together, shared-GPU groups given unique and repeatable ids, the
rules' annotations, fit errors with the reference's reasons, phases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kaipolicy.api.task import Status
from kaipolicy.cache.assemble import Assembly
from kaipolicy.cache.scenario_source import Scenario
from kaipolicy.cycle import run_cycle
from kaipolicy.framework.config import Params, config_from
from kaipolicy.framework.outcome import EvictionRecord
from kaipolicy.rules import Bundle
from kaipolicy.server.decisions import Decisions, decide
from kaipolicy.workflow.bundles import default_policies, load
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario

NOW = 1_800_000_000.0


def _job(short: str, queue: str = "q0", **over: Any) -> dict[str, Any]:
    tasks = over.pop("tasks", [{"state": "Pending"}])
    named = [t | {"name": f"team/{short}-{i}"} for i, t in enumerate(tasks)]
    return job(f"team/{short}", queue, tasks=named, namespace="team", **over)


def _decide(scn: Scenario, bundle: Bundle | None = None) -> Decisions:
    config = config_from(scn.config, actions=scn.actions, params=Params.from_scenario(scn.params, 60.0))
    result = run_cycle(scn.snapshot(), config, bundle or default_bundle())
    origins = {j["name"]: ("PodGroup", "team", j["name"].split("/")[1], f"uid-{j['name']}") for j in scn.doc["jobs"]}
    origins |= {t["name"]: ("Pod", "team", t["name"].split("/")[1], f"uid-{t['name']}")
                for j in scn.doc["jobs"] for t in j["tasks"]}
    return decide(result.session, Assembly(scn.doc, [], origins, NOW))


def _placements(d: Decisions) -> dict[str, Any]:
    return {p.pod: p for _, placements in d.gangs for p in placements}


def _mixed() -> Scenario:
    return scenario([node("n0", gpus=4, gpuMemoryMiB=40000), node("n1", gpus=4, gpuMemoryMiB=40000)], [
        _job("whole", perTask={"gpus": 2}),
        _job("half-a", perTask={"gpus": 0.5}), _job("half-b", perTask={"gpus": 0.5}),
        _job("mem", perTask={"gpuMemoryMiB": 10000}),
        _job("two", perTask={"gpus": 0.5, "gpuDevices": 2}),
        _job("cpu", perTask={"gpus": 0, "cpuMillis": 500}),
        _job("gang", perTask={"gpus": 1}, minAvailable=2, tasks=[{"state": "Pending"}] * 2),
    ])


@pytest.mark.parametrize(("pod", "received"), [
    ("whole-0", ("Regular", 2, 1.0, 0)),
    ("half-a-0", ("Fraction", 1, 0.5, 1)),
    ("mem-0", ("Fraction", 1, 0.25, 1)),
    ("two-0", ("Fraction", 2, 0.5, 2)),
    ("cpu-0", ("Regular", 0, 0.0, 0)),
])
def test_each_pod_receives_what_the_references_bind_request_says(pod: str, received: tuple[Any, ...]) -> None:
    p = _placements(_decide(_mixed()))[pod]
    assert (p.resource_type, p.gpu_count, p.gpu_portion, len(p.gpu_groups)) == received
    assert (p.namespace, p.pod_uid) == ("team", f"uid-team/{pod}")


def test_a_gangs_pods_are_written_together() -> None:
    d = _decide(_mixed())
    gangs = {job[2]: [p.pod for p in placements] for job, placements in d.gangs}
    assert gangs["gang"] == ["gang-0", "gang-1"]
    assert d.scheduled_by_action == {"allocate": 7}


def test_new_shared_gpu_groups_get_unique_ids_that_a_rerun_repeats() -> None:
    first, again = _placements(_decide(_mixed())), _placements(_decide(_mixed()))
    groups = {pod: p.gpu_groups for pod, p in first.items() if p.gpu_groups}
    assert groups == {pod: p.gpu_groups for pod, p in again.items() if p.gpu_groups}
    assert groups["half-a-0"] == groups["half-b-0"]                     # sharing one GPU
    assert len(set(groups["two-0"])) == 2 and not set(groups["two-0"]) & set(groups["half-a-0"])
    assert all(len(g) == 36 and not g.startswith("new-") for gs in groups.values() for g in gs)


def test_a_group_already_on_the_cluster_keeps_its_id() -> None:
    running = _job("old", perTask={"gpus": 0.5}, tasks=[{"state": "Running", "node": "n0", "gpuGroups": ["g-7"]}])
    d = _decide(scenario([node("n0", gpus=1)], [running, _job("new", perTask={"gpus": 0.5})]))
    assert _placements(d)["new-0"].gpu_groups == ("g-7",)


def test_bind_request_mutate_rules_annotate_the_placement(tmp_path: Path) -> None:
    (tmp_path / "stamp.yaml").write_text("""plugin: stamp
enable: always
rules:
  - name: node-and-size
    hook: bindRequestMutate
    annotations:
      example.com/node: node.name
      example.com/gpus: string(task.gpus)
""")
    bundle = load([str(default_policies()), str(tmp_path)])
    d = _decide(scenario([node("n0")], [_job("a", perTask={"gpus": 2})]), bundle)
    assert _placements(d)["a-0"].annotations == {"example.com/node": "n0", "example.com/gpus": "2"}


def test_a_job_over_its_queue_limit_is_unschedulable_with_the_references_reason() -> None:
    queues = [{"name": "q0", "deserved": {"gpu": 1}, "limit": {"gpu": 1}}]
    d = _decide(scenario([node("n0")], [_job("big", perTask={"gpus": 2})], queues=queues))
    (decision,) = d.jobs
    report = decision.report
    assert [e.reason for e in report.fit_errors] == ["OverLimit"]
    assert report.fit_errors[0].message.startswith("q0 quota has reached the allowable limit of GPUs")
    assert (report.phase, report.unschedulable, report.counts["pending"]) == ("Pending", True, 1)
    # no pod-level fit error: the pod says what the job's errors say, as the reference does
    summary = f"OverLimit: {report.fit_errors[0].message}."
    assert decision.pod_messages == ((("Pod", "team", "big-0", "uid-team/big-0"), summary),)
    assert ("Normal", "Unschedulable", summary) in decision.events


def test_a_gang_that_does_not_fit_is_a_pod_scheduling_error_on_each_pending_pod() -> None:
    d = _decide(scenario([node("n0", gpus=2)], [_job("g", perTask={"gpus": 2}, minAvailable=2,
                                                      tasks=[{"state": "Pending"}] * 2)]))
    (decision,) = d.jobs
    assert [e.reason for e in decision.report.fit_errors] == ["PodSchedulingErrors"]
    assert [pod[2] for pod, _ in decision.pod_messages] == ["g-0", "g-1"]
    assert d.gangs == []


def test_a_placed_job_is_scheduled_and_remembers_when_it_started() -> None:
    d = _decide(scenario([node("n0")], [_job("a", perTask={"gpus": 1})]))
    (decision,) = d.jobs
    assert (decision.report.phase, decision.report.unschedulable, decision.pod_messages) == ("Scheduled", False, ())
    assert decision.report.last_start == NOW


def test_a_pod_placed_then_moved_in_the_same_cycle_is_neither_written_nor_evicted() -> None:
    # consolidation may relocate what allocate placed moments before: that pod never ran, so it
    # stays pending for the next cycle instead of a BindRequest and then its deletion
    running = _job("old", perTask={"gpus": 1}, tasks=[{"state": "Running", "node": "n0"}])
    scn = scenario([node("n0")], [running, _job("new", perTask={"gpus": 1}, minAvailable=2,
                                                tasks=[{"state": "Pending"}] * 2)])
    config = config_from(scn.config, actions=scn.actions, params=Params.from_scenario(scn.params, 60.0))
    ssn = run_cycle(scn.snapshot(), config, default_bundle()).session
    moved = next(t for t in ssn.cluster.jobs["team/new"].tasks.values() if t.name == "team/new-1")
    victim = next(iter(ssn.cluster.jobs["team/old"].tasks.values()))
    moved.status = Status.PIPELINED
    ssn.evictions += [EvictionRecord("team/new", "team/new-1", "team", "n0", "consolidation", "moved"),
                      EvictionRecord("team/old", victim.name, "team", "n0", "consolidation", "moved")]
    origins = {name: ("Pod", "team", name.split("/")[1], f"uid-{name}")
               for name in ("team/old", "team/old-0", "team/new", "team/new-0", "team/new-1")}
    d = decide(ssn, Assembly(scn.doc, [], origins, NOW))
    assert sorted(_placements(d)) == ["new-0"]
    assert [e.eviction.pod for e in d.evictions] == ["old-0"]

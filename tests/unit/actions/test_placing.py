"""A preemptor's placement proven instead of run: which rules are node-local, when enough distinct
nodes each take a pod, and, over random clusters, that every placement proven sure is one the
pipeline-only placement makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kaipolicy.actions.placement import allocate_job
from kaipolicy.actions.solver import placing
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import Params, SchedulerConfig, config_from
from kaipolicy.framework.session import Session
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.fuzz import reclaim_pressure
from tests.fuzz.generate import scenario as fuzz_scenario
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"
ONE_GPU = {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 10**9}


def _session(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], bundle: Any = None,
             queues: list[dict[str, Any]] | None = None) -> Session:
    return open_session(scenario(nodes, jobs, queues).snapshot(), SchedulerConfig(), bundle or default_bundle())


def _pending(size: int, **over: Any) -> dict[str, Any]:
    tasks = over.pop("tasks", [{"state": "Pending"}] * size)
    return job("gang", "q0", tasks, perTask=over.pop("perTask", ONE_GPU), minAvailable=size, **over)


def _full(name: str, gpus: int) -> dict[str, Any]:
    return job(f"on-{name}", "q0", [{"state": "Running", "node": name}] * gpus, perTask=ONE_GPU)


def _local(ssn: Session, plugin: str | None = None) -> dict[str, bool]:
    """Each predicate rule (of `plugin`, or all): is it node-local for the pending gang's pod?"""
    gang = ssn.cluster.jobs["gang"]
    task = next(iter(gang.tasks.values()))
    return {r.name: placing.node_local(ssn, r, task, gang) for r in ssn.hooks["predicate"]
            if plugin is None or r.plugin == plugin}


def test_the_default_predicates_are_node_local_for_a_plain_pod_of_an_uncapped_queue() -> None:
    assert all(_local(_session([node("n0")], [_pending(2)])).values())


def test_a_capped_queue_or_pod_affinity_makes_the_rule_that_reads_it_not_node_local() -> None:
    capped = [{"name": "q0", "deserved": {"gpu": 4}, "limit": {"gpu": 3}}]
    local = _local(_session([node("n0")], [_pending(2)], queues=capped))
    assert not local["queue-capacity-on-node"] and local["max-pods"]
    affine = [{"state": "Pending", "podAffinity": {"labels": {"a": "b"}}}] * 2
    local = _local(_session([node("n0")], [_pending(2, tasks=affine)]))
    assert not local["pod-affinity"] and local["queue-capacity-on-node"]


OWN = """\
plugin: own
enable: always
rules:
  - {name: elastic, hook: predicate, deny: "job.elasticState > 1"}
  - {name: packed, hook: predicate, deny: "placement.binpack(cluster, node, 'gpu') > 100.0"}
  - {name: static, hook: predicate, deny: "node.name == 'x' || job.priority > 1000 || size(task.labels) > 50"}
"""


def test_what_a_rule_reads_decides_whether_it_is_node_local(tmp_path: Path) -> None:
    (tmp_path / "own.yaml").write_text(OWN)
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    local = _local(_session([node("n0")], [_pending(2)], bundle), "own")
    assert local == {"elastic": False, "packed": False, "static": True}


LOOPING = """\
plugin: looping
enable: always
rules:
  - {name: asks-itself, hook: taskOverCapacityOnNode, deny: "capacity.onNode(cluster, task, job, node) != ''"}
"""


def test_a_hook_whose_rule_asks_the_same_hook_again_is_not_node_local(tmp_path: Path) -> None:
    (tmp_path / "looping.yaml").write_text(LOOPING)
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    local = _local(_session([node("n0")], [_pending(2)], bundle))
    assert local["queue-capacity-on-node"] is False     # answered, not a recursion without end


@pytest.mark.parametrize(("free", "size", "sure"), [
    ([1, 1, 1], 3, True),          # three nodes, a pod each
    ([1, 1, 1], 4, False),         # a fourth pod has no node of its own
    ([4, 0, 0], 2, False),         # room for both on one node: the proof counts nodes, not room
    ([2, 2, 0], 2, True),
])
def test_a_gang_is_surely_placed_when_as_many_distinct_nodes_each_take_a_pod(free: list[int], size: int,
                                                                              sure: bool) -> None:
    nodes = [node(f"n{i}") for i in range(len(free))]
    busy = [_full(f"n{i}", 4 - f) for i, f in enumerate(free) if f < 4]
    ssn = _session(nodes, [*busy, _pending(size)])
    gang = ssn.cluster.jobs["gang"]
    assert placing.surely_placed(ssn, gang, ssn.node_list) is sure


def test_a_node_a_predicate_denies_is_not_counted() -> None:
    nodes = [node("n0"), node("n1", unschedulable=True), node("n2")]
    busy = [_full(n, 3) for n in ("n0", "n1", "n2")]
    ssn = _session(nodes, [*busy, _pending(3)])
    assert not placing.surely_placed(ssn, ssn.cluster.jobs["gang"], ssn.node_list)
    assert placing.surely_placed(ssn, ssn.cluster.jobs["gang"], ssn.node_list[:1] + ssn.node_list[2:]) is False
    ssn2 = _session(nodes, [*busy, _pending(2)])
    assert placing.surely_placed(ssn2, ssn2.cluster.jobs["gang"], ssn2.node_list)


def test_shared_or_unlike_pods_are_never_proven() -> None:
    shared = _session([node("n0"), node("n1")], [_pending(2, perTask={"gpus": 0.5, "cpuMillis": 1, "memoryBytes": 1})])
    assert not placing.surely_placed(shared, shared.cluster.jobs["gang"], shared.node_list)
    unlike = _session([node("n0"), node("n1")],
                      [_pending(2, tasks=[{"state": "Pending", "labels": {"a": "1"}}, {"state": "Pending"}])])
    assert not placing.surely_placed(unlike, unlike.cluster.jobs["gang"], unlike.node_list)


def _check_every_proven_placement(ssn: Session) -> int:
    """For every pending job the proof says is surely placed, place it (pipeline only) and undo."""
    proven = 0
    for j in list(ssn.cluster.jobs.values()):
        if not j.has_pending or not placing.surely_placed(ssn, j, ssn.node_list):
            continue
        proven += 1
        stmt = ssn.statement()
        assert allocate_job(ssn, stmt, ssn.node_list, j, pipeline_only=True), j.name
        stmt.discard()
    return proven


def test_over_random_clusters_every_placement_proven_sure_is_made() -> None:
    proven = 0
    for seed in range(150):
        doc = fuzz_scenario(seed) if seed % 2 else reclaim_pressure.scenario(seed)
        scn = scenario_from_doc(doc, f"<seed {seed}>")
        params = Params.from_scenario(scn.params, scn.stale_grace_seconds)
        ssn = open_session(scn.snapshot(), config_from(scn.config, actions=scn.actions, params=params),
                           default_bundle())
        proven += _check_every_proven_placement(ssn)
    assert proven >= 20   # the claim was put to the test


def test_a_placement_after_pods_not_placed_yet_is_sure_only_with_a_node_to_spare_for_each() -> None:
    # three nodes with one free GPU each: a gang of two is surely placed now, and still after a
    # pod of another job lands first (on any one of the nodes), but not after two such pods
    ssn = _session([node(f"n{i}") for i in range(3)], [*(_full(f"n{i}", 3) for i in range(3)), _pending(2)])
    gang = ssn.cluster.jobs["gang"]
    assert placing.surely_placed(ssn, gang, ssn.node_list)
    assert placing.surely_placed(ssn, gang, ssn.node_list, margin=1)
    assert not placing.surely_placed(ssn, gang, ssn.node_list, margin=2)

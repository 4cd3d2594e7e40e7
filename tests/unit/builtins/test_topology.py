"""Topology-aware placement on small hand-built clusters: domain trees, candidate domain order,
filtering by fit and by running pods, preference scores and fit errors."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kaipolicy.api.job import Job
from kaipolicy.api.resources import Request
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.builtins import topology
from kaipolicy.builtins.topology_domains import build_tree, lowest_common_domain, node_accommodation
from kaipolicy.cache.scenario_source import scenario_from_doc

ZONE, RACK = "zone", "rack"


def _node(name: str, gpus: int, zone: str | None, rack: str | None, cpu: int = 64000) -> dict[str, Any]:
    labels = {}
    if zone is not None:
        labels[ZONE] = zone
    if rack is not None:
        labels[RACK] = rack
    return {"name": name, "gpus": gpus, "gpuMemoryMiB": 100, "cpuMillis": cpu, "memoryBytes": 10**12, "labels": labels}


def _job(name: str, tasks: list[dict[str, Any]], gpus: float = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "queue": "q", "perTask": {"gpus": gpus, "cpuMillis": 1000, "memoryBytes": 10**9},
            "tasks": tasks, **extra}


def _pending(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"state": "Pending", **extra} for _ in range(n)]


def _cluster(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
             levels: tuple[str, ...] = (ZONE, RACK)) -> ClusterInfo:
    doc = {"name": "t", "actions": ["allocate"], "queues": [{"name": "q"}], "nodes": nodes, "jobs": jobs,
           "topologies": [{"name": "topo", "levels": list(levels)}]}
    return scenario_from_doc(doc).snapshot()


def _session(cluster: ClusterInfo) -> Any:
    return SimpleNamespace(cluster=cluster, cache={})


def _pending_tasks(job: Job) -> list[Any]:
    return sorted((t for t in job.tasks.values() if t.status.value == "Pending"), key=lambda t: t.name)


def _subset_root(ssn: Any, job_name: str) -> list[list[str]]:
    job = ssn.cluster.jobs[job_name]
    nodes = sorted(ssn.cluster.nodes.values(), key=lambda n: n.name)
    sets = topology.subset_nodes(ssn, {}, job, job.root, job.root.all_pod_sets(), _pending_tasks(job), nodes)
    return [[n.name for n in s] for s in sets]


# Two zones, four racks: rack a1 (n0, n1), rack a2 (n2), rack b1 (n3), rack b2 (n4, n5).
FOUR_RACKS = [
    _node("n0", 4, "a", "a1"), _node("n1", 4, "a", "a1"), _node("n2", 4, "a", "a2"),
    _node("n3", 4, "b", "b1"), _node("n4", 4, "b", "b2"), _node("n5", 4, "b", "b2"),
]
REQUIRED_RACK = {"topology": "topo", "requiredLevel": RACK}


def test_domain_tree_from_labels() -> None:
    cluster = _cluster([*FOUR_RACKS, _node("loose", 4, "a", None)], [])
    tree = build_tree(cluster.topologies["topo"], cluster.nodes.values())
    assert sorted(tree.by_level[ZONE]) == ["a", "b"]
    assert sorted(tree.by_level[RACK]) == ["a.a1", "a.a2", "b.b1", "b.b2"]
    assert sorted(tree.by_level[RACK]["a.a1"].nodes) == ["n0", "n1"]
    assert [c.id for c in tree.by_level[ZONE]["a"].children] == ["a.a1", "a.a2"]
    assert "loose" not in tree.root.nodes   # a node missing a level label is outside the topology
    assert sorted(tree.root.nodes) == ["n0", "n1", "n2", "n3", "n4", "n5"]


def test_lowest_common_domain_stops_at_the_preferred_level() -> None:
    cluster = _cluster(FOUR_RACKS, [])
    tree = build_tree(cluster.topologies["topo"], cluster.nodes.values())
    nodes = cluster.nodes
    assert lowest_common_domain(tree, nodes.values(), "").id == "root"
    assert lowest_common_domain(tree, [nodes["n0"], nodes["n2"]], "").id == "a"
    assert lowest_common_domain(tree, [nodes["n0"], nodes["n1"]], "").id == "a.a1"
    assert lowest_common_domain(tree, [nodes["n0"], nodes["n1"]], ZONE).id == "a"


def test_no_constraint_returns_the_nodes_unchanged() -> None:
    cluster = _cluster(FOUR_RACKS, [_job("j", _pending(2))])
    assert _subset_root(_session(cluster), "j") == [["n0", "n1", "n2", "n3", "n4", "n5"]]


def test_required_rack_fullest_fitting_domain_first() -> None:
    # Free GPUs per rack: a1 = 8 - 3 = 5, a2 = 4, b1 = 4 - 1 = 3, b2 = 8. The job wants 4 x 1 GPU.
    jobs = [
        _job("busy", [
            {"name": "busy-0", "state": "Running", "node": "n0"},
            {"name": "busy-1", "state": "Running", "node": "n0"},
            {"name": "busy-2", "state": "Running", "node": "n1"},
            {"name": "busy-3", "state": "Running", "node": "n3"}]),
        _job("j", _pending(4), topologyConstraint=REQUIRED_RACK),
    ]
    ssn = _session(_cluster(FOUR_RACKS, jobs))
    # b1 cannot hold 4; zone a is sorted before zone b (9 free vs 11), then a2 (4/4) before a1 (4/5).
    assert _subset_root(ssn, "j") == [["n2"], ["n0", "n1"], ["n4", "n5"]]
    assert ssn.cluster.jobs["j"].fit_errors == []


def test_required_rack_ties_broken_by_domain_id() -> None:
    nodes = [_node("n0", 2, "z", "r2"), _node("n1", 2, "z", "r1"), _node("n2", 2, "z", "r3")]
    ssn = _session(_cluster(nodes, [_job("j", _pending(2), topologyConstraint=REQUIRED_RACK)]))
    assert _subset_root(ssn, "j") == [["n1"], ["n0"], ["n2"]]


def test_running_pods_pin_the_required_domain() -> None:
    # The job already runs on n4 (rack b2): only b2 may take the rest, though a1 is fuller.
    jobs = [
        _job("other", [{"name": "o-0", "state": "Running", "node": "n0"}]),
        _job("j", [{"name": "j-0", "state": "Running", "node": "n4"}, *_pending(2)],
             topologyConstraint=REQUIRED_RACK, minAvailable=1),
    ]
    ssn = _session(_cluster(FOUR_RACKS, jobs))
    assert _subset_root(ssn, "j") == [["n4", "n5"]]


def test_preferred_and_required_try_the_preferred_level_first() -> None:
    # Required zone, preferred rack; 3 tasks of 2 GPUs: racks that hold 3 come first, then zones.
    nodes = [_node("n0", 4, "a", "a1"), _node("n1", 4, "a", "a1"), _node("n2", 2, "a", "a2"),
             _node("n3", 4, "b", "b1"), _node("n4", 4, "b", "b1")]
    constraint = {"topology": "topo", "requiredLevel": ZONE, "preferredLevel": RACK}
    ssn = _session(_cluster(nodes, [_job("j", _pending(3), gpus=2, topologyConstraint=constraint)]))
    # The search starts at the root (zones differ); zones a (10 free) and b (8) are sorted
    # fullest first: b, a. Racks b1 and a1 hold 4 tasks each; a2 holds 1 and is left out.
    assert _subset_root(ssn, "j") == [["n3", "n4"], ["n0", "n1"], ["n3", "n4"], ["n0", "n1", "n2"]]
    scores = ssn.cache[topology.SCORES][""]
    # Inside zone a the nearly full a2 (6 of 2 free GPUs) sorts before a1 (6 of 8): rack order
    # b1, a2, a1 -> floor(10 * k / 3) x 10000 for k = 1, 2, 3.
    assert scores == {"n3": 30000.0, "n4": 30000.0, "n2": 60000.0, "n0": 100000.0, "n1": 100000.0}


def test_preferred_only_falls_back_to_wider_domains_and_scores_emptier_racks_higher() -> None:
    nodes = [_node("n0", 2, "z", "r1"), _node("n1", 2, "z", "r2")]
    jobs = [_job("a", [{"name": "a-0", "state": "Running", "node": "n0"}]),
            _job("b", [{"name": "b-0", "state": "Running", "node": "n1"}]),
            _job("j", _pending(2), topologyConstraint={"topology": "topo", "preferredLevel": RACK})]
    ssn = _session(_cluster(nodes, jobs))
    # No rack holds both tasks. The search starts at zone z (all nodes share it), so the root,
    # above it, is never accounted and only the zone remains.
    assert _subset_root(ssn, "j") == [["n0", "n1"]]
    job = ssn.cluster.jobs["j"]
    task = _pending_tasks(job)[0]
    got = {n: topology.preferred_score(ssn, task, job, ssn.cluster.nodes[n]) for n in ("n0", "n1")}
    assert got == {"n0": 50000.0, "n1": 100000.0}
    topology.pre_job_allocation(ssn, job)
    assert topology.preferred_score(ssn, task, job, ssn.cluster.nodes["n1"]) == 0.0


def test_scores_come_from_the_nearest_ancestor_group() -> None:
    nodes = [_node("n0", 2, "z", "r1"), _node("n1", 2, "z", "r2")]
    job_spec = _job("j", [{"state": "Pending", "subGroup": "enc"}, {"state": "Pending", "subGroup": "dec"}],
                    subGroups=[{"name": "rep", "topology": {"topology": "topo", "preferredLevel": RACK}},
                               {"name": "enc", "minAvailable": 1, "parent": "rep"},
                               {"name": "dec", "minAvailable": 1, "parent": "rep"}])
    ssn = _session(_cluster(nodes, [job_spec]))
    job = ssn.cluster.jobs["j"]
    rep = job.root.groups[0]
    all_nodes = sorted(ssn.cluster.nodes.values(), key=lambda n: n.name)
    sets = topology.subset_nodes(ssn, {}, job, rep, rep.all_pod_sets(), _pending_tasks(job), all_nodes)
    assert [[n.name for n in s] for s in sets] == [["n0"], ["n1"], ["n0", "n1"]]
    enc_task = next(t for t in job.tasks.values() if t.sub_group == "enc")
    assert topology.preferred_score(ssn, enc_task, job, ssn.cluster.nodes["n1"]) == 100000.0
    # A pod set without a constraint keeps what its parent handed down.
    enc = job.pod_sets["enc"]
    assert topology.subset_nodes(ssn, {}, job, enc, [enc], [enc_task], sets[0]) == [sets[0]]


def test_child_search_stays_inside_the_parent_domain() -> None:
    ssn = _session(_cluster(FOUR_RACKS, [_job("j", _pending(1), topologyConstraint=REQUIRED_RACK)]))
    job = ssn.cluster.jobs["j"]
    zone_b = [ssn.cluster.nodes[n] for n in ("n3", "n4", "n5")]
    sets = topology.subset_nodes(ssn, {}, job, job.root, job.root.all_pod_sets(), _pending_tasks(job), zone_b)
    assert [[n.name for n in s] for s in sets] == [["n3"], ["n4", "n5"]]


def test_no_fitting_domain_records_the_topology_errors() -> None:
    ssn = _session(_cluster(FOUR_RACKS, [_job("j", _pending(9), topologyConstraint=REQUIRED_RACK)]))
    assert _subset_root(ssn, "j") == []
    errors = ssn.cluster.jobs["j"].fit_errors
    assert "node-group a.a1 can allocate only 8 of 9 required pods" in errors
    assert errors[-1] == "topology topo, requirement rack couldn't be satisfied for job <default/j>"


def test_whole_cluster_too_small_is_reported_once() -> None:
    ssn = _session(_cluster(FOUR_RACKS, [_job("j", _pending(25), topologyConstraint=REQUIRED_RACK)]))
    assert _subset_root(ssn, "j") == []
    assert ssn.cluster.jobs["j"].fit_errors == [
        ("topology topo, requirement rack couldn't be satisfied for job <default/j>: "
         "not enough resources in the cluster to allocate the job")]


def test_unknown_topology_is_a_fit_error() -> None:
    cluster = _cluster(FOUR_RACKS, [_job("j", _pending(1))])
    job = cluster.jobs["j"]
    from kaipolicy.api.job import TopologyConstraint
    job.root.topology = TopologyConstraint("nope", RACK)
    ssn = _session(cluster)
    assert _subset_root(ssn, "j") == []
    assert job.fit_errors == ["Requested topology nope does not exist"]


def test_mixed_tasks_are_fitted_by_their_summed_request() -> None:
    # One GPU task and one CPU-only task: the domain must hold their sum (1 GPU, 2 cores).
    nodes = [_node("n0", 0, "z", "r1"), _node("n1", 1, "z", "r2", cpu=1000), _node("n2", 1, "z", "r3")]
    tasks = [{"state": "Pending"}, {"state": "Pending", "resources": {"gpus": 0}}]
    ssn = _session(_cluster(nodes, [_job("j", tasks, topologyConstraint=REQUIRED_RACK)]))
    assert _subset_root(ssn, "j") == [["n2"]]


@pytest.mark.parametrize("request_, expected", [
    (Request.build(cpu=1000, memory=0, gpus=1), 4),     # GPUs bound it
    (Request.build(cpu=30000, memory=0), 2),            # CPU bounds it
    (Request.build(cpu=0, memory=0, gpus=3), 1),
])
def test_node_accommodation(request_: Request, expected: int) -> None:
    cluster = _cluster([_node("n0", 4, "z", "r1")], [])
    assert node_accommodation(cluster.nodes["n0"], request_) == expected


def test_node_accommodation_is_bounded_by_the_free_pod_slots() -> None:
    # each copy takes a pod slot, as the reference's test pods each ask one pod: a node with four
    # free GPUs and one free slot takes one 1-GPU pod, not four
    slots = _node("n0", 4, "z", "r1")
    slots["maxPods"] = 2
    cluster = _cluster([slots], [_job("cpu", [{"state": "Running", "node": "n0"}], gpus=0)])
    assert node_accommodation(cluster.nodes["n0"], Request.build(cpu=1000, memory=0, gpus=1)) == 1


def test_a_rack_without_pod_slots_for_the_gang_is_reported_as_the_reference_reports_it() -> None:
    # two 1-GPU pods bound to one rack whose only node has GPUs for four but one free pod slot:
    # the rack cannot hold them (the reference's Go says the same, word for word), rather than a
    # gang placement failing on the slots
    slots = _node("n0", 4, "z", "r1")
    slots["maxPods"] = 2
    ssn = _session(_cluster([slots], [_job("cpu", [{"state": "Running", "node": "n0"}], gpus=0),
                                      _job("j", _pending(2), topologyConstraint=REQUIRED_RACK)]))
    assert _subset_root(ssn, "j") == []
    assert ssn.cluster.jobs["j"].fit_errors == [
        ("topology topo, requirement rack couldn't be satisfied for job <default/j>: "
         "not enough resources in z.r1 to allocate the job")]

"""Node selector, required node affinity and taint matching: Kubernetes' own rules, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.api.node import Node, Taint
from kaipolicy.api.resources import Request, Resources
from kaipolicy.api.task import AffinityTerm, Requirement, Status, Task, Toleration
from kaipolicy.builtins.affinity import node_affinity_matches, untolerated_taint
from kaipolicy.cycle import run_cycle
from kaipolicy.framework.config import SchedulerConfig
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job as job_doc
from tests.unit.helpers import node as node_doc
from tests.unit.helpers import scenario

LABELS = {"zone": "a", "gpu": "h100", "rack-size": "8"}


def task(**fields: Any) -> Task:
    return Task(uid="t", name="t", namespace="ns", job="j", request=Request(), status=Status.PENDING, **fields)


def node(**fields: Any) -> Node:
    return Node("n1", Resources(1000, 1e9, 0, 10), labels=dict(LABELS), **fields)


def term(*expressions: tuple[str, str, tuple[str, ...]], fields: tuple[Requirement, ...] = ()) -> AffinityTerm:
    return AffinityTerm(tuple(Requirement(k, op, v) for k, op, v in expressions), fields)


@pytest.mark.parametrize(("note", "fields", "matches"), [
    ("no constraint matches any node", {}, True),
    ("a selector with every label present matches", {"node_selector": (("zone", "a"), ("gpu", "h100"))}, True),
    ("a selector with one label different does not", {"node_selector": (("zone", "a"), ("gpu", "a100"))}, False),
    ("a selector naming a missing label does not", {"node_selector": (("pool", "x"),)}, False),
    ("In holds when the value is listed", {"affinity_terms": (term(("zone", "In", ("a", "b"))),)}, True),
    ("In fails on a missing label", {"affinity_terms": (term(("pool", "In", ("a",))),)}, False),
    ("NotIn holds on a missing label", {"affinity_terms": (term(("pool", "NotIn", ("a",))),)}, True),
    ("NotIn fails when the value is listed", {"affinity_terms": (term(("zone", "NotIn", ("a",))),)}, False),
    ("Exists holds on any value", {"affinity_terms": (term(("gpu", "Exists", ())),)}, True),
    ("DoesNotExist fails on a present label", {"affinity_terms": (term(("gpu", "DoesNotExist", ())),)}, False),
    ("Gt compares integers", {"affinity_terms": (term(("rack-size", "Gt", ("7",))),)}, True),
    ("Lt compares integers", {"affinity_terms": (term(("rack-size", "Lt", ("8",))),)}, False),
    ("Gt on a non-integer label fails", {"affinity_terms": (term(("zone", "Gt", ("1",))),)}, False),
    ("every expression of a term must hold",
     {"affinity_terms": (term(("zone", "In", ("a",)), ("gpu", "In", ("a100",))),)}, False),
    ("one term holding is enough",
     {"affinity_terms": (term(("zone", "In", ("b",))), term(("gpu", "In", ("h100",))))}, True),
    ("an empty term selects nothing", {"affinity_terms": (term(),)}, False),
    ("matchFields compare the node name",
     {"affinity_terms": (term(fields=(Requirement("metadata.name", "In", ("n1",)),)),)}, True),
    ("selector and affinity must both hold",
     {"node_selector": (("zone", "a"),), "affinity_terms": (term(("gpu", "In", ("a100",))),)}, False),
    ("the scenario shorthand still names kai.scheduler/type values", {"node_affinity": ("other",)}, False),
])
def test_node_selector_and_required_node_affinity(note: str, fields: dict[str, Any], matches: bool) -> None:
    assert node_affinity_matches(task(**fields), node()) is matches, note


TAINT = Taint("gpu", "reserved", "NoSchedule")


@pytest.mark.parametrize(("note", "taints", "tolerations", "refusal"), [
    ("an untainted node takes any pod", (), (), ""),
    ("a NoSchedule taint refuses a pod without tolerations", (TAINT,), (),
     "node(s) had untolerated taint {gpu: reserved}"),
    ("a NoExecute taint refuses it too", (Taint("gpu", "", "NoExecute"),), (),
     "node(s) had untolerated taint {gpu: }"),
    ("PreferNoSchedule only prefers: it refuses nothing", (Taint("gpu", "x", "PreferNoSchedule"),), (), ""),
    ("Equal with the same key and value tolerates", (TAINT,), (Toleration("gpu", "Equal", "reserved"),), ""),
    ("Equal with another value does not", (TAINT,), (Toleration("gpu", "Equal", "other"),),
     "node(s) had untolerated taint {gpu: reserved}"),
    ("Exists tolerates any value of the key", (TAINT,), (Toleration("gpu", "Exists"),), ""),
    ("an empty key with Exists tolerates every taint", (TAINT,), (Toleration("", "Exists"),), ""),
    ("a toleration for another effect does not apply", (TAINT,), (Toleration("gpu", "Exists", "", "NoExecute"),),
     "node(s) had untolerated taint {gpu: reserved}"),
    ("the first untolerated taint is named",
     (TAINT, Taint("maintenance", "now", "NoSchedule")), (Toleration("gpu", "Exists"),),
     "node(s) had untolerated taint {maintenance: now}"),
])
def test_taints_and_tolerations(note: str, taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                                refusal: str) -> None:
    assert untolerated_taint(task(tolerations=tolerations), node(taints=taints)) == refusal, note


def _placed_node(nodes: list[str], running_affinity: dict[str, Any] | None, pending_labels: dict[str, str],
                 namespaces: tuple[str, str] = ("default", "default"), running_labels: dict[str, str] | None = None,
                 pending_affinity: dict[str, Any] | None = None) -> str | None:
    """Where one allocate cycle binds a pending pod labelled `pending_labels`, with a pod running
    on n0 that carries `running_affinity` (nodes by name; n0 packs best: it holds a pod already);
    `namespaces`: the running pod's job's and the pending pod's job's."""
    running: dict[str, Any] = {"state": "Running", "node": "n0"}
    if running_affinity is not None:
        running["podAffinity"] = running_affinity
    if running_labels is not None:
        running["labels"] = running_labels
    pending: dict[str, Any] = {"state": "Pending", "labels": pending_labels}
    if pending_affinity is not None:
        pending["podAffinity"] = pending_affinity
    scn = scenario([node_doc(name, labels={"kai.scheduler/type": name, "zone": "z"}) for name in nodes],
                   [job_doc("old", tasks=[running], namespace=namespaces[0]),
                    job_doc("new", tasks=[pending], namespace=namespaces[1])])
    result = run_cycle(scn.snapshot(), SchedulerConfig(), default_bundle())
    return next((b.node for b in result.session.binds if b.task.startswith("new")), None)


def test_a_placed_pods_anti_affinity_keeps_a_matching_pod_out_of_its_domain() -> None:
    """Kubernetes' inter-pod affinity filter is symmetric: a pod already placed whose required
    anti-affinity selects the incoming pod keeps it out of that pod's domain, though the incoming
    pod has no terms of its own (the reference's Go on `generate.scenario` seeds 521 and 565)."""
    anti = {"labels": {"app": "b"}, "antiTopologyKey": "kai.scheduler/type"}
    assert _placed_node(["n0", "n1"], None, {"app": "b"}) == "n0"          # binpacking's choice
    assert _placed_node(["n0", "n1"], anti, {"app": "b"}) == "n1"          # kept out of n0's domain
    assert _placed_node(["n0", "n1"], anti, {"app": "c"}) == "n0"          # the selector does not match
    assert _placed_node(["n0"], anti, {"app": "b"}) is None                 # nowhere else to go
    wide = {"labels": {"app": "b"}, "antiTopologyKey": "zone"}               # both nodes in zone z
    assert _placed_node(["n0", "n1"], wide, {"app": "b"}) is None


def test_pod_affinity_terms_select_pods_of_their_own_namespace_only() -> None:
    """A term that names no namespaces selects pods of its own pod's namespace, as Kubernetes
    reads it, for a placed pod's anti-affinity and for the incoming pod's own terms alike (the
    reference's Go decides each case so; before, pods of every namespace matched)."""
    anti = {"labels": {"app": "b"}, "antiTopologyKey": "kai.scheduler/type"}
    apart, together = ("team-a", "default"), ("team-a", "team-a")
    # a placed pod's anti-affinity
    assert _placed_node(["n0", "n1"], anti, {"app": "b"}, apart) == "n0"
    assert _placed_node(["n0", "n1"], anti, {"app": "b"}, together) == "n1"
    # the incoming pod's own anti-affinity
    assert _placed_node(["n0", "n1"], None, {"app": "b"}, apart, {"app": "b"}, anti) == "n0"
    assert _placed_node(["n0", "n1"], None, {"app": "b"}, together, {"app": "b"}, anti) == "n1"
    # its affinity: only a pod of its namespace draws it (it does not match its own selector)
    near_db = {"labels": {"app": "db"}, "topologyKey": "kai.scheduler/type"}
    assert _placed_node(["n0", "n1"], None, {"app": "web"}, together, {"app": "db"}, near_db) == "n0"
    assert _placed_node(["n0", "n1"], None, {"app": "web"}, apart, {"app": "db"}, near_db) is None


def _placed_beside(running_node_labels: dict[str, str], pending_labels: dict[str, str],
                   running_gpus: int = 1) -> str | None:
    """Where one allocate cycle binds a pending pod labelled `pending_labels` whose required
    affinity draws it to pods labelled app=cache in the same zone, with the only such pod running
    on n1 (labelled `running_node_labels`, `running_gpus` of its 4 GPUs taken); n0 is in zone z0."""
    pending = {"state": "Pending", "labels": pending_labels,
               "podAffinity": {"labels": {"app": "cache"}, "topologyKey": "zone"}}
    running = {"state": "Running", "node": "n1", "labels": {"app": "cache"}}
    scn = scenario([node_doc("n0", labels={"zone": "z0"}), node_doc("n1", labels=running_node_labels)],
                   [job_doc("old", tasks=[running], perTask={"gpus": running_gpus, "cpuMillis": 1000,
                                                              "memoryBytes": 10**9}),
                    job_doc("new", tasks=[pending])])
    result = run_cycle(scn.snapshot(), SchedulerConfig(), default_bundle())
    return next((b.node for b in result.session.binds if b.task.startswith("new")), None)


def test_a_matching_pod_on_a_node_without_the_topology_key_is_in_no_domain() -> None:
    """Kubernetes counts the pods a required affinity term matches by the domain of their node; a
    node without the term's key is in none. So a pod that matches its own term and whose only
    match runs on such a node is the first of its kind and may go to any node with the key (the
    reference's Go binds it to n0; kaipolicy had counted the match and left it pending)."""
    assert _placed_beside({}, {"app": "cache"}) == "n0"
    # a pod that does not match its own term has no such escape: no domain holds a match
    assert _placed_beside({}, {"app": "web"}) is None
    # a match on a node with the key holds the pod to that zone, even when the zone is full
    assert _placed_beside({"zone": "z1"}, {"app": "cache"}) == "n1"
    assert _placed_beside({"zone": "z1"}, {"app": "cache"}, running_gpus=4) is None


def _consolidated(anti_selector: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Every pod's status and node after allocate and consolidation: run0 (labelled app=x, with a
    required anti-affinity selecting `anti_selector` across the rack) on n0, a pod nobody may move
    on n1, both nodes in rack r0 with two GPUs each, and a pending pod of two GPUs that fits only
    once run0 moves to n1."""
    running = {"state": "Running", "node": "n0", "labels": {"app": "x"},
               "podAffinity": {"labels": anti_selector, "antiTopologyKey": "rack"}}
    scn = scenario([node_doc("n0", gpus=2, labels={"rack": "r0"}), node_doc("n1", gpus=2, labels={"rack": "r0"})],
                   [job_doc("run0", tasks=[running], createdMinutesAgo=10),
                    job_doc("run1", tasks=[{"state": "Running", "node": "n1"}], priority=125, createdMinutesAgo=10),
                    job_doc("want0", perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9})],
                   actions=["allocate", "consolidation"])
    result = run_cycle(scn.snapshot(), SchedulerConfig(), default_bundle())
    return {t.name: (str(t.status), t.node or "") for j in result.session.cluster.jobs.values()
            for t in j.tasks.values()}


def test_an_evicted_pod_placed_again_sees_its_own_releasing_copy() -> None:
    """The reference's inter-pod affinity filter sees every pod listed on a node, and an evicted
    pod is still listed, Releasing, on the node it leaves. So a pod whose anti-affinity selects its
    own labels cannot move within the domain it leaves: consolidation makes no room here (the
    reference's Go keeps run0 on n0 and want0 pending; kaipolicy had left the pod's own copy out
    and moved it)."""
    stuck = _consolidated({"app": "x"})
    assert stuck["run0-0"] == ("Status.RUNNING", "n0") and stuck["want0-0"][0] == "Status.PENDING"
    moved = _consolidated({"app": "y"})    # the same move when the term does not select the pod itself
    assert moved["run0-0"] == ("Status.PIPELINED", "n1") and moved["want0-0"] == ("Status.PIPELINED", "n0")

"""Joining converted objects into the scenario one scheduler sees: jobs of pod groups and of bare
pods, BindRequests placing pods, other schedulers' pods on nodes, partitions, and the problems
that leave objects out."""

from __future__ import annotations

from typing import Any

from kaipolicy.cache import convert, convert_pods
from kaipolicy.cache.assemble import Scope, Views, assemble
from kaipolicy.cache.scenario_source import scenario_from_doc

NOW = 1_800_000_000.0
POOL = "kai.scheduler/node-pool"
WHOLE_CLUSTER = Scope()


def _meta(name: str, namespace: str | None = None, age: float = 60.0, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    created = convert_time(NOW - age)
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": created, "resourceVersion": "1",
                            "labels": labels or {}, "annotations": annotations or {}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def convert_time(t: float) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, *, queue: str | None = "q", group: str | None = None, gpus: int = 0, node: str = "",
        phase: str = "Pending", scheduler: str = "kai-scheduler", age: float = 60.0,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Any:
    labels = dict(labels or {}) | ({"kai.scheduler/queue": queue} if queue else {})
    annotations = dict(annotations or {}) | ({"pod-group-name": group} if group else {})
    requests = {"cpu": "1", "memory": "1Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return convert_pods.pod({
        "metadata": _meta(name, "ns", age, labels, annotations),
        "spec": {"schedulerName": scheduler, "nodeName": node or None,
                 "containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": phase}})


def group(name: str, queue: str = "q", min_member: int = 1, age: float = 60.0, **spec: Any) -> Any:
    return convert_pods.pod_group({"metadata": _meta(name, "ns", age),
                                   "spec": {"queue": queue, "minMember": min_member, **spec}})


def queue(name: str, parent: str | None = None, labels: dict[str, str] | None = None, age: float = 600.0) -> Any:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return convert.queue({"metadata": _meta(name, None, age, labels), "spec": spec})


def node(name: str, gpus: int = 4, labels: dict[str, str] | None = None) -> Any:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return convert.node({"metadata": _meta(name, None, 3600, labels), "status": {"allocatable": alloc}})


def bind_request(pod_name: str, node_name: str, failed: bool = False, owner: str | None = None,
                 groups: tuple[str, ...] = ("g7",), phase: str | None = None) -> Any:
    status = {"phase": "Failed"} if failed else ({"phase": phase} if phase else {})
    meta = _meta(f"br-{pod_name}", "ns") | ({"ownerReferences": [{"kind": "Pod", "name": pod_name, "uid": owner}]}
                                           if owner else {})
    return convert.bind_request({"metadata": meta, "status": status,
                                 "spec": {"podName": pod_name, "selectedNode": node_name,
                                          "selectedGPUGroups": list(groups)}})


def views(*objects: Any) -> Views:
    v = Views()
    for o in objects:
        attr = {"PodView": "pods", "PodGroupView": "pod_groups", "BindRequestView": "bind_requests",
                "QueueView": "queues", "NodeView": "nodes"}[type(o).__name__]
        getattr(v, attr)[o.meta.key] = o
    return v


def run(*objects: Any, scope: Scope = WHOLE_CLUSTER) -> Any:
    out = assemble(views(*objects), scope, NOW, {"actions": ["allocate"]})
    scenario_from_doc(out.doc)   # every assembled document is a valid scenario
    return out


def jobs(out: Any) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in out.doc["jobs"]}


def test_a_bare_pod_of_this_scheduler_is_a_job_of_one_and_other_schedulers_pods_are_not() -> None:
    out = run(queue("q"), node("n"), pod("mine"), pod("theirs", scheduler="default-scheduler"))
    assert list(jobs(out)) == ["ns/mine"]
    job = jobs(out)["ns/mine"]
    assert (job["queue"], job["priority"], job["minAvailable"], job["createdMinutesAgo"]) == ("q", 50, 1, 1.0)
    assert [t["name"] for t in job["tasks"]] == ["ns/mine"]
    assert out.origins["ns/mine"][:3] == ("Pod", "ns", "mine")


def test_a_pod_without_a_queue_label_goes_to_the_default_queue() -> None:
    out = run(queue("default-queue"), pod("p", queue=None))
    assert jobs(out)["ns/p"]["queue"] == "default-queue"


def test_a_pod_group_holds_its_pods_oldest_first_and_jobs_come_oldest_first() -> None:
    out = run(queue("q"), group("young", age=10), group("old", min_member=2, age=100),
              pod("old-b", group="old", age=50), pod("old-a", group="old", age=90), pod("young-0", group="young"))
    assert list(jobs(out)) == ["ns/old", "ns/young"]
    assert [t["name"] for t in jobs(out)["ns/old"]["tasks"]] == ["ns/old-a", "ns/old-b"]
    assert jobs(out)["ns/old"]["minAvailable"] == 2
    assert out.origins["ns/old"][:3] == ("PodGroup", "ns", "old")


def test_a_job_in_a_missing_or_non_leaf_queue_is_left_out_with_a_problem() -> None:
    out = run(queue("dept"), queue("leaf", parent="dept"), group("lost", queue="nowhere"), group("high", queue="dept"),
              pod("lost-0", group="lost"), pod("high-0", group="high"))
    assert not out.doc["jobs"]
    assert [str(p) for p in out.problems] == [
        "PodGroup/ns/high: queue 'dept' has child queues: only leaf queues take jobs",
        "PodGroup/ns/lost: queue 'nowhere' does not exist"]


def test_an_orphan_queue_is_left_out_with_its_children() -> None:
    out = run(queue("child", parent="orphan"), queue("orphan", parent="gone"), queue("ok"))
    assert [q["name"] for q in out.doc["queues"]] == ["ok"]
    assert sorted(str(p) for p in out.problems) == ["Queue/child: ancestor queue 'gone' does not exist",
                                                    "Queue/orphan: parent queue 'gone' does not exist"]


def test_a_live_bind_request_places_its_pod_and_a_failed_or_misdirected_one_does_not() -> None:
    out = run(queue("q"), node("n"), pod("a", gpus=1), pod("b", gpus=1), pod("c", gpus=1),
              bind_request("a", "n"), bind_request("b", "n", failed=True), bind_request("c", "elsewhere"))
    tasks = {t["name"]: t for j in out.doc["jobs"] for t in j["tasks"]}
    assert tasks["ns/a"] | {"resources": None} == {"name": "ns/a", "state": "Binding", "node": "n", "gpuGroups": ["g7"],
                                                  "resources": None, "labels": {"kai.scheduler/queue": "q"}}
    assert (tasks["ns/b"]["state"], tasks["ns/c"]["state"]) == ("Pending", "Pending")


def test_a_bind_request_owned_by_an_earlier_pod_of_the_same_name_does_not_place_the_new_one() -> None:
    out = run(queue("q"), node("n"), pod("a", gpus=1), pod("b", gpus=1),
              bind_request("a", "n", owner="uid-a"), bind_request("b", "n", owner="uid-of-the-pod-before"))
    tasks = {t["name"]: t["state"] for j in out.doc["jobs"] for t in j["tasks"]}
    assert tasks == {"ns/a": "Binding", "ns/b": "Pending"}


def test_a_bound_share_holds_the_gpu_groups_its_bind_request_named_whatever_its_labels_say() -> None:
    # KAI's binder labels a share of two devices `runai-gpu-group/<g>` only; the request names both
    share = {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}
    out = run(queue("q"), node("n"),
              pod("two", node="n", phase="Running", annotations=share, labels={"runai-gpu-group/ga": "ga"}),
              pod("moved", node="m", phase="Running", annotations={"gpu-fraction": "0.5"},
                  labels={"runai-gpu-group": "gm"}),
              bind_request("two", "n", owner="uid-two", groups=("ga", "gb"), phase="Succeeded"),
              bind_request("moved", "n", owner="uid-moved", groups=("gx",), phase="Succeeded"), node("m"))
    tasks = {t["name"]: t for j in out.doc["jobs"] for t in j["tasks"]}
    assert tasks["ns/two"]["gpuGroups"] == ["ga", "gb"]
    assert tasks["ns/moved"]["gpuGroups"] == ["gm"]     # bound elsewhere than asked: the labels tell


def test_states_follow_the_pod_phase() -> None:
    out = run(queue("q"), node("n"), pod("running", node="n", phase="Running"), pod("bound", node="n"),
              pod("done", phase="Succeeded"), pod("elsewhere", node="other-pool-node", phase="Running"))
    states = {t["name"]: (t["state"], t.get("node")) for j in out.doc["jobs"] for t in j["tasks"]}
    assert states == {"ns/running": ("Running", "n"), "ns/bound": ("Bound", "n"), "ns/done": ("Succeeded", None)}


def test_what_other_schedulers_pods_hold_is_counted_on_their_node() -> None:
    out = run(queue("q"), node("n"), pod("kube", gpus=2, node="n", phase="Running", scheduler="default-scheduler",
                                         queue=None), pod("ours", gpus=1, node="n", phase="Running"))
    (n,) = out.doc["nodes"]
    assert n["otherPods"] == {"count": 1, "cpuMillis": 1000, "memoryBytes": 2**30, "gpus": 2}


def test_a_pod_naming_a_sub_group_its_group_lacks_is_left_out_with_a_problem() -> None:
    sub_groups = [{"name": "workers", "minMember": 1}]
    out = run(queue("q"), group("g", subGroups=sub_groups),
              pod("w", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
              pod("x", group="g", labels={"kai.scheduler/subgroup-name": "typo"}))
    assert [t["name"] for t in jobs(out)["ns/g"]["tasks"]] == ["ns/w"]
    assert [str(p) for p in out.problems] == ["Pod/ns/x: sub-group 'typo' is not a leaf sub-group of pod group g"]


def test_a_bare_pod_naming_a_sub_group_is_left_out_with_a_problem_instead_of_failing_the_snapshot() -> None:
    # regression: the job of a bare pod has no sub-groups, and building it failed with a KeyError
    out = run(queue("q"), node("n"), pod("w", node="n", phase="Running", labels={"kai.scheduler/subgroup-name": "workers"}),
              pod("ok"))
    assert sorted(jobs(out)) == ["ns/ok"]
    assert [str(p) for p in out.problems] == ["Pod/ns/w: sub-group 'workers' does not exist: the pod names no pod group"]
    assert out.doc["nodes"][0]["otherPods"]["count"] == 1    # still holds its node
    scenario_from_doc(out.doc, "<test>").snapshot()


def test_an_empty_partition_serves_the_objects_without_the_label_and_a_named_one_its_own() -> None:
    objects = (queue("free"), queue("pooled", labels={POOL: "a"}), queue("blank", labels={POOL: ""}),
               node("free"), node("pooled", labels={POOL: "a"}))
    assert [q["name"] for q in run(*objects).doc["queues"]] == ["free"]
    assert [q["name"] for q in run(*objects, scope=Scope(partition="a")).doc["queues"]] == ["pooled"]
    assert [n["name"] for n in run(*objects, scope=Scope(partition="a")).doc["nodes"]] == ["pooled"]


def test_a_bare_pod_named_like_a_pod_group_of_its_namespace_gets_a_name_of_its_own() -> None:
    out = run(queue("q"), group("same"), pod("same-0", group="same"), pod("same"))
    assert sorted(jobs(out)) == ["ns/same", "ns/same (pod)"]


def test_the_last_start_and_stale_times_become_ages() -> None:
    anns = {"kai.scheduler/last-start-timestamp": convert_time(NOW - 600),
            "kai.scheduler/stale-podgroup-timestamp": convert_time(NOW - 30)}
    g = convert_pods.pod_group({"metadata": _meta("g", "ns", annotations=anns), "spec": {"queue": "q"}})
    job = jobs(run(queue("q"), g, pod("g-0", group="g")))["ns/g"]
    assert (job["lastStartMinutesAgo"], job["staleSeconds"]) == (10.0, 30.0)


def test_a_pod_group_naming_a_missing_topology_or_level_is_left_out_with_a_problem() -> None:
    dc = convert.topology({"metadata": _meta("dc"), "spec": {"levels": [{"nodeLabel": "zone"}]}})
    v = views(queue("q"), group("nowhere", topologyConstraint={"topology": "moon"}),
              group("nolevel", topologyConstraint={"topology": "dc", "requiredTopologyLevel": "rack"}),
              group("fine", topologyConstraint={"topology": "dc", "requiredTopologyLevel": "zone"}),
              pod("a", group="nowhere"), pod("b", group="nolevel"), pod("c", group="fine"))
    v.topologies["dc"] = dc
    out = assemble(v, WHOLE_CLUSTER, NOW, {"actions": ["allocate"]})
    scenario_from_doc(out.doc)
    assert list(jobs(out)) == ["ns/fine"]
    assert [str(p) for p in out.problems] == ["PodGroup/ns/nolevel: 'rack' is not a level of topology 'dc'",
                                              "PodGroup/ns/nowhere: topology 'moon' does not exist"]


def test_the_assembly_says_which_wall_clock_time_its_clock_zero_is() -> None:
    assert run(queue("q")).now == NOW


def test_a_snapshot_file_builds_the_same_cluster_as_the_live_source() -> None:
    import yaml

    frac = pod("frac", annotations={"gpu-fraction": "0.33"}, labels={"runai-gpu-group": "g1"}, node="n",
               phase="Running")
    out = run(queue("q"), node("n"), group("g", min_member=2), pod("g-0", group="g", gpus=1, node="n", phase="Running"),
              pod("g-1", group="g", gpus=1), frac, pod("kube", gpus=1, node="n", scheduler="other", phase="Running"))
    live = scenario_from_doc(out.doc, validate=False).snapshot()
    filed = scenario_from_doc(yaml.safe_load(yaml.safe_dump(out.doc, sort_keys=False))).snapshot()

    def facts(c: Any) -> Any:
        tasks = sorted((t.name, t.status, t.node, t.request, tuple(t.gpu_groups), t.created)
                       for j in c.jobs.values() for t in j.tasks.values())
        nodes = sorted((n.name, repr(n.idle), repr(n.used), dict(n.shared_used)) for n in c.nodes.values())
        return tasks, nodes, sorted((j.name, j.priority, j.created, j.queue) for j in c.jobs.values())

    assert facts(live) == facts(filed)


def test_a_gpu_sharing_reservation_pod_is_nobodys_job_and_its_gpu_is_the_groups() -> None:
    reservation = pod("runai-reservation-x", queue=None, gpus=1, node="n", phase="Running",
                      labels={"app": "kai-resource-reservation"})
    out = run(queue("q"), node("n"), reservation)
    assert not out.doc["jobs"]
    assert out.doc["nodes"][0]["otherPods"] == {"count": 1, "cpuMillis": 1000, "memoryBytes": 2**30, "gpus": 0}


def test_the_document_does_not_depend_on_the_order_the_objects_arrived_in() -> None:
    # regression: other pods' GPU fractions were summed, and a group's problems listed, in arrival order
    others = [pod(f"o{i}", queue=None, node="n", phase="Running", scheduler="default-scheduler",
                  annotations={"gpu-fraction": fraction}) for i, fraction in enumerate(("0.1", "0.2", "0.3"))]
    members = [pod(f"m{i}", group="g", labels={"kai.scheduler/subgroup-name": f"typo{i}"}) for i in range(3)]
    first = run(queue("q"), node("n"), group("g", subGroups=[{"name": "workers", "minMember": 1}]), *others, *members)
    second = run(queue("q"), node("n"), group("g", subGroups=[{"name": "workers", "minMember": 1}]),
                 *reversed(others), *reversed(members))
    assert first.doc == second.doc
    assert [str(p) for p in first.problems] == [str(p) for p in second.problems]
    assert first.doc["nodes"][0]["otherPods"]["gpus"] == (0.1 + 0.2) + 0.3

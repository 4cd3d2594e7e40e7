"""`kaipolicy run` as a real process on a real API server: a realistic mix of queues over quota, a
gang, shared GPUs and a CPU-only pod gets exactly the BindRequests that `kaipolicy simulate`
decides on `kaipolicy snapshot` of the same state, pod by pod; its /metrics parse and say so."""

from __future__ import annotations

import contextlib
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kaipolicy.cli.main import main
from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, bind_requests
from tests.polling import wait_for


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, err.getvalue()
    return out.getvalue()


def _realistic_mix(cluster: Cluster, ns: str, p: str) -> int:
    """Two queues whose pods ask for more than the cluster has, a gang of 4, shared GPUs (fractions,
    GPU memory, a fraction of two devices) and a CPU-only pod; returns the number of pods."""
    memory = {"nvidia.com/gpu.memory": "40960"}
    cluster.node(f"gpu-a-{p}", p, gpus=8, cpu="64", memory="512Gi", labels=memory | {"pool": "a"})
    cluster.node(f"gpu-b-{p}", p, gpus=8, cpu="64", memory="512Gi", labels=memory | {"pool": "b"})
    cluster.node(f"cpu-{p}", p, cpu="32", memory="128Gi", labels={"pool": "cpu"})
    cluster.queue(f"dept-{p}", p)
    cluster.queue(f"team-a-{p}", p, parent=f"dept-{p}", gpu=(4, -1))
    cluster.queue(f"team-b-{p}", p, parent=f"dept-{p}", gpu=(4, -1))
    a, b = f"team-a-{p}", f"team-b-{p}"
    cluster.pod_group(ns, "train", p, a, min_member=4)
    pods = [cluster.pod(ns, f"train-{i}", p, group="train", gpus=1) for i in range(4)]
    pods += [cluster.pod(ns, f"sweep-{i}", p, queue=a, gpus=2) for i in range(2)]
    pods += [cluster.pod(ns, f"half-{i}", p, queue=b, annotations={"gpu-fraction": "0.5"}) for i in range(3)]
    pods.append(cluster.pod(ns, "mem", p, queue=b, annotations={"gpu-memory": "20000"}))
    pods.append(cluster.pod(ns, "two-halves", p, queue=b,
                            annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}))
    pods.append(cluster.pod(ns, "cpu-only", p, queue=b, cpu="4", memory="8Gi", nodeSelector={"pool": "cpu"}))
    pods += [cluster.pod(ns, f"infer-{i}", p, queue=b, gpus=1) for i in range(6)]
    return len(pods)


def _same_groups(simulated: dict[str, list[str]], written: dict[str, list[str]]) -> bool:
    """Pods share a GPU group in one exactly where they share one in the other (the ids differ:
    the simulation numbers new groups, the scheduler gives them cluster-wide unique ids)."""
    def partition(groups: dict[str, list[str]]) -> set[frozenset[str]]:
        members: dict[str, set[str]] = defaultdict(set)
        for pod, gs in groups.items():
            for g in gs:
                members[g].add(pod)
        return {frozenset(m) for m in members.values()}
    return partition(simulated) == partition(written)


def test_the_bind_requests_equal_simulate_on_the_snapshot_pod_by_pod(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.shard(p, p)
    n_pods = _realistic_mix(cluster, ns, p)
    snapshot = tmp_path / "snapshot.yaml"
    _cli("snapshot", "--kubeconfig", str(apiserver.kubeconfig), "--shard", p, "-o", str(snapshot))
    report = json.loads(_cli("simulate", str(snapshot), "--output", "json"))
    simulated = {t["name"].split("/", 1)[1]: t for t in report["tasks"]}
    assert len(simulated) == n_pods
    placed = {pod: t["node"] for pod, t in simulated.items() if t["status"] == "Binding"}
    assert 0 < len(placed) < n_pods       # over quota: not everything fits
    assert {f"train-{i}" for i in range(4)} <= set(placed)     # the gang, whole

    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        scheduler.wait_cycles(3)
        written = bind_requests(cluster, ns)
        assert {pod: br["spec"]["selectedNode"] for pod, br in written.items()} == placed
        assert _same_groups({pod: simulated[pod]["gpuGroups"] for pod in placed},
                            {pod: br["spec"].get("selectedGPUGroups") or [] for pod, br in written.items()})
        _check_shapes(written, {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in _pods(cluster, ns)})
        _check_metrics(scheduler, p, len(placed))
    finally:
        assert scheduler.stop() == 0


def _pods(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return list(cluster.api.sanitize_for_serialization(cluster.core.list_namespaced_pod(ns))["items"])


def _check_shapes(written: dict[str, dict[str, Any]], uids: dict[str, str]) -> None:
    """The reference's shape: named after and owned by the pod, what the pod receives, backoff."""
    for pod, br in written.items():
        assert br["metadata"]["name"] == pod
        assert br["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                                      "uid": uids[pod]}]
        assert br["metadata"]["labels"]["selected-node"] == br["spec"]["selectedNode"]
        assert br["spec"]["backoffLimit"] == 3
    received = {pod: (br["spec"]["receivedResourceType"], br["spec"]["receivedGPU"]) for pod, br in written.items()}
    expected = {"train-0": ("Regular", {"count": 1, "portion": "1.00"}),
                "half-0": ("Fraction", {"count": 1, "portion": "0.50"}),
                "two-halves": ("Fraction", {"count": 2, "portion": "0.50"}),
                "mem": ("Fraction", {"count": 1, "portion": "0.49"}),       # 20000 of 40900 MiB
                "cpu-only": ("Regular", {"count": 0, "portion": "0.00"})}
    assert {pod: received[pod] for pod in expected if pod in received} == {
        pod: want for pod, want in expected.items() if pod in received}
    assert {"train-0", "half-0", "mem", "cpu-only"} <= set(received)


def _check_metrics(scheduler: Scheduler, p: str, binds: int) -> None:
    status, text = scheduler.get("/metrics")
    assert status == 200
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert {name: types.get(name) for name in (
        "kai_e2e_scheduling_latency_milliseconds", "kai_open_session_latency_milliseconds",
        "kai_close_session_latency_milliseconds", "kai_action_scheduling_latency_milliseconds",
        "kai_task_scheduling_latency_milliseconds", "kai_task_bind_latency_milliseconds",
        "kai_queue_fair_share_gpu", "kai_queue_fair_share_cpu_cores", "kai_queue_fair_share_memory_gb",
        "kai_podgroups_scheduled_by_action", "kaipolicy_cycles", "kaipolicy_bundle_reloads")} == {
        "kai_e2e_scheduling_latency_milliseconds": "gauge", "kai_open_session_latency_milliseconds": "gauge",
        "kai_close_session_latency_milliseconds": "gauge", "kai_action_scheduling_latency_milliseconds": "gauge",
        "kai_task_scheduling_latency_milliseconds": "histogram", "kai_task_bind_latency_milliseconds": "histogram",
        "kai_queue_fair_share_gpu": "gauge", "kai_queue_fair_share_cpu_cores": "gauge",
        "kai_queue_fair_share_memory_gb": "gauge", "kai_podgroups_scheduled_by_action": "unknown",
        "kaipolicy_cycles": "counter", "kaipolicy_bundle_reloads": "counter"}
    assert scheduler.sample("kai_task_scheduling_latency_milliseconds_count") == binds
    assert scheduler.sample("kai_podgroups_scheduled_by_action", action="allocate") >= 1
    assert scheduler.sample("kai_action_scheduling_latency_milliseconds", action="reclaim") >= 0
    shares = {q: scheduler.sample("kai_queue_fair_share_gpu", queue_name=f"{q}-{p}") for q in ("team-a", "team-b")}
    assert shares["team-a"] >= 4 and shares["team-b"] >= 4 and sum(shares.values()) <= 16
    assert scheduler.sample("kaipolicy_bundle_reloads_total", result="success") == 1
    assert scheduler.get("/healthz") == (200, "ok\n") and scheduler.get("/readyz") == (200, "ok\n")


def test_a_pending_job_gets_the_references_condition_and_no_flood_of_events(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.one_node_shard(p, gpus=2)
    cluster.pod_group(ns, "big", p, f"q-{p}", min_member=2)
    for i in range(2):
        cluster.pod(ns, f"big-{i}", p, group="big", gpus=2)
    audit = tmp_path / "audit.jsonl"
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p, "--audit", str(audit))
    try:
        group = wait_for("the scheduling condition", lambda: (g := cluster.custom.get_namespaced_custom_object(
            "scheduling.run.ai", "v2alpha2", ns, "podgroups", "big")).get("status", {}).get("schedulingConditions")
            and g)
        scheduler.wait_cycles(5)
        (bundle,) = [dict(labels)["hash"] for (name, labels) in scheduler.metrics() if name == "kaipolicy_bundle_info"]
    finally:
        assert scheduler.stop() == 0
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    # the same records cycle after cycle are written once
    assert {r["cycle"] for r in records} == {1} and {r["bundle"] for r in records} == {bundle}
    answer = _cli("explain", "big-1", "--audit", str(audit))
    assert answer.startswith(f"pod {ns}/big-1 (job {ns}/big) in queue q-{p}, cycle ")
    assert "its gang needs 2 pods and only 1 fit" in answer
    (condition,) = group["status"]["schedulingConditions"]
    assert {k: condition[k] for k in ("type", "nodePool", "reason", "status", "transitionID")} == {
        "type": "UnschedulableOnNodePool", "nodePool": p, "reason": "Unschedulable", "status": "True",
        "transitionID": "1"}
    assert condition["message"].startswith("PodSchedulingErrors: Resources were found for 1 pods while 2 are "
                                           "required for gang scheduling")
    assert [r["reason"] for r in condition["reasons"]] == ["PodSchedulingErrors"]
    assert group["status"]["phase"] == "Pending" and group["status"]["pending"] == 2
    pod = cluster.core.read_namespaced_pod("big-1", ns)
    (scheduled,) = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    # several cycles, one Event per object and message
    events = [(e["involvedObject"]["name"], e["reason"]) for e in cluster.events_about(ns, "big")]
    events += [(e["involvedObject"]["name"], e["reason"]) for e in cluster.events_about(ns, "big-1")]
    assert sorted(events) == [("big", "Unschedulable"), ("big-1", "Unschedulable")]

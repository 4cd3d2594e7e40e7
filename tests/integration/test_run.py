"""`kaipolicy run` as a real process on a real API server: a realistic mix of queues over quota, a
gang, shared GPUs and a CPU-only pod gets exactly the BindRequests that `kaipolicy simulate`
decides on `kaipolicy snapshot` of the same state, pod by pod; its /metrics parse and say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, bind_requests
from tests.integration.workloads import cli, realistic_mix, same_groups
from tests.integration.workloads import simulated as simulate_snapshot
from tests.polling import wait_for


def test_the_bind_requests_equal_simulate_on_the_snapshot_pod_by_pod(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.shard(p, p)
    n_pods = len(realistic_mix(cluster, ns, p))
    simulated = simulate_snapshot(apiserver.kubeconfig, p, "kai-scheduler", tmp_path)
    assert len(simulated) == n_pods
    placed = {pod: t["node"] for pod, t in simulated.items() if t["status"] == "Binding"}
    assert 0 < len(placed) < n_pods       # over quota: not everything fits
    # the gang, whole (an intermittent CI failure once placed train-0 alone: the message shows what
    # the snapshot held of the gang, to tell a snapshot that missed its PodGroup from an engine bug)
    assert {f"train-{i}" for i in range(4)} <= set(placed), _gang_in_snapshot(tmp_path, simulated)

    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        scheduler.wait_cycles(3)
        written = bind_requests(cluster, ns)
        assert {pod: br["spec"]["selectedNode"] for pod, br in written.items()} == placed
        assert same_groups({pod: simulated[pod]["gpuGroups"] for pod in placed},
                            {pod: br["spec"].get("selectedGPUGroups") or [] for pod, br in written.items()})
        _check_shapes(written, {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in _pods(cluster, ns)})
        _check_metrics(scheduler, p, len(placed))
    finally:
        assert scheduler.stop() == 0


def _gang_in_snapshot(tmp_path: Path, simulated: dict[str, dict[str, Any]]) -> str:
    """The snapshot's jobs holding a train pod, and what simulate made of those pods."""
    doc = yaml.safe_load((tmp_path / "snapshot.yaml").read_text())
    jobs = [{k: v for k, v in job.items() if k != "tasks"} | {"tasks": [t.get("name") for t in job.get("tasks") or []]}
            for job in doc.get("jobs") or [] if any("train" in str(t.get("name")) for t in job.get("tasks") or [])]
    tasks = {pod: t for pod, t in simulated.items() if pod.startswith("train")}
    return f"snapshot jobs: {jobs}; simulated: {tasks}; problems: {doc.get('problems')}"


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
    answer = cli("explain", "big-1", "--audit", str(audit))
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

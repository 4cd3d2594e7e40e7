"""What `kaipolicy run` writes when things go wrong or get taken back: a gang whose write fails
part-way (a real admission policy refuses one BindRequest) is withdrawn whole and written whole
once it can be; a malformed pod is reported and skipped while the rest schedules; reclaim evicts
through the Eviction API with the reference's condition, Event and metric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import GROUP, VERSION, Scheduler, act_as_binder, bind_requests, nodes_of
from tests.polling import wait_for


def _refuse_bind_requests_for(cluster: Cluster, namespace: str, pod: str) -> str:
    """A ValidatingAdmissionPolicy that makes the API server refuse BindRequests for `pod` in
    `namespace`: the failure a scheduler meets mid-gang, from the real server. Returns its name."""
    name = f"refuse-{namespace}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": [VERSION],
                                                               "operations": ["CREATE"],
                                                               "resources": ["bindrequests"]}]},
                       "validations": [{"expression": f"object.spec.podName != '{pod}'",
                                        "message": "injected failure"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}
    for obj, plural in ((policy, "validatingadmissionpolicies"), (binding, "validatingadmissionpolicybindings")):
        cluster.custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1", plural, obj)
    probe = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BindRequest", "metadata": {"name": "probe"},
             "spec": {"podName": pod, "selectedNode": "none"}}
    wait_for("the admission policy to refuse", lambda: _refused(cluster, namespace, probe), 30)
    return name


def _refused(cluster: Cluster, namespace: str, probe: dict[str, Any]) -> bool:
    try:
        cluster.create(probe, namespace)
    except ApiException as e:
        return e.status in (403, 422) and "injected failure" in str(e.body)
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "bindrequests", "probe")
    return False


def test_a_gang_whose_write_fails_part_way_is_withdrawn_whole_and_written_whole_later(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.one_node_shard(p, gpus=8)
    cluster.pod_group(ns, "train", p, f"q-{p}", min_member=4)
    for i in range(4):
        cluster.pod(ns, f"train-{i}", p, group="train", gpus=1)
    cluster.pod(ns, "solo", p, queue=f"q-{p}", gpus=1)
    refusal = _refuse_bind_requests_for(cluster, ns, "train-2")
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        wait_for("the gang's rollback", lambda: scheduler.sample("kaipolicy_gang_rollbacks_total") >= 1)
        scheduler.wait_cycles(3)
        assert set(nodes_of(cluster, ns)) == {"solo"}     # the rest of the cluster is scheduled
        errors = [e for e in scheduler.lines() if e.get("message", "").startswith(f"gang {ns}/train not committed")]
        assert errors and "injected failure" in errors[0]["message"]
        assert "withdrew 2 of the 2 written" in errors[0]["message"]
        events = {e["reason"]: e["message"] for e in cluster.events_about(ns, "train")}
        assert "injected failure" in events["FailedBinding"]

        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            cluster.custom.delete_cluster_custom_object("admissionregistration.k8s.io", "v1", plural, refusal)
        wait_for("the whole gang", lambda: set(nodes_of(cluster, ns)) == {"solo"} | {f"train-{i}" for i in range(4)},
                 30)
    finally:
        assert scheduler.stop() == 0


def test_a_malformed_pod_is_reported_and_skipped_while_the_rest_schedules_and_a_failed_request_is_replaced(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.one_node_shard(p, gpus=4)
    cluster.pod(ns, "bad", p, queue=f"q-{p}", annotations={"gpu-fraction": "half"})
    cluster.pod(ns, "good", p, queue=f"q-{p}", annotations={"gpu-fraction": "0.5"})
    cluster.pod(ns, "whole", p, queue=f"q-{p}", gpus=1)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        wait_for("the good pods' BindRequests", lambda: set(nodes_of(cluster, ns)) == {"good", "whole"})
        assert scheduler.sample("kaipolicy_malformed_objects_total", kind="Pod") == 1
        scheduler.wait_cycles(3)
        assert set(nodes_of(cluster, ns)) == {"good", "whole"}
        # the binder gives up on one: the pod is free again and gets a new request
        old = bind_requests(cluster, ns)["whole"]["metadata"]["uid"]
        cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, "bindrequests", "whole", {
            "status": {"phase": "Failed", "failedAttempts": 3, "reason": "node rejected the pod"}})
        wait_for("a new request for the pod", lambda: (bind_requests(cluster, ns).get("whole") or {}).get(
            "metadata", {}).get("uid") not in (None, old))
    finally:
        assert scheduler.stop() == 0
    message = f"Pod/{ns}/bad: annotation gpu-fraction: 'half' is not a fraction in [0.01, 1]"
    assert scheduler.messages("warning").count(f"left out of the snapshot: {message}") == 1
    (event,) = [e for e in cluster.events_about(ns, "bad") if e["reason"] == "NotSchedulable"]
    assert "gpu-fraction: 'half'" in event["message"]


def test_reclaim_evicts_through_the_eviction_api_with_the_references_condition_event_and_metric(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.shard(p, p)
    cluster.node(f"n-{p}", p, gpus=4)
    cluster.queue(f"dept-{p}", p)
    cluster.queue(f"a-{p}", p, parent=f"dept-{p}", gpu=(2, -1))
    cluster.queue(f"b-{p}", p, parent=f"dept-{p}", gpu=(2, -1))
    for i in range(4):
        cluster.pod(ns, f"a-{i}", p, queue=f"a-{p}", gpus=1)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        wait_for("queue a's pods placed", lambda: len(nodes_of(cluster, ns)) == 4)
        act_as_binder(cluster, ns)
        for i in range(2):
            cluster.pod(ns, f"b-{i}", p, queue=f"b-{p}", gpus=1)
        def evicted() -> list[Any] | None:
            pods = [pod for pod in _terminating(cluster, ns)
                    if any(c.reason == "PreemptionByScheduler" for c in pod.status.conditions or [])]
            return pods if len(pods) == 2 else None
        victims = wait_for("two evictions with the reference's condition", evicted)
        events = wait_for("their Evict Events", lambda: e if len(e := [
            ev for v in victims for ev in cluster.events_about(ns, v.metadata.name) if ev["reason"] == "Evict"]) == 2
            else None)
        messages = {ev["involvedObject"]["name"]: ev["message"] for ev in events}
        for pod in victims:
            (target,) = [c for c in pod.status.conditions if c.type == "DisruptionTarget"]
            assert target.status == "True" and target.message == messages[pod.metadata.name]
            assert target.message.startswith(f"Pod {ns}/{pod.metadata.name} was preempted by workload {ns}/b-")
        assert [e["metadata"]["annotations"] for e in events] == [
            {"evictor-action-type": "reclaim", "num-evicted-pods": "1", "evictor-pod-group-name": e["metadata"][
                "annotations"]["evictor-pod-group-name"], "evictor-pod-group-namespace": ns} for e in events]
        assert sum(v for (name, _), v in scheduler.metrics().items()
                   if name == "kai_pod_group_evicted_pods_total") == 2
        for pod in victims:   # the kubelet's part: the pods end
            cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
        wait_for("queue b's pods placed", lambda: {"b-0", "b-1"} <= set(nodes_of(cluster, ns)), 30)
    finally:
        assert scheduler.stop() == 0


def _terminating(cluster: Cluster, namespace: str) -> list[Any]:
    return [pod for pod in cluster.core.list_namespaced_pod(namespace).items if pod.metadata.deletion_timestamp]


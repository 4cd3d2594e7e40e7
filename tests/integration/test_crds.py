"""crds/ on a real API server: every definition is served, good objects (the reference's own
quickstart among them) apply unchanged, bad ones are refused with the field named."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.integration.cluster import Cluster

# The reference scheduler's quickstart (docs/quickstart in NVIDIA/KAI-Scheduler): its default
# queues and example pods, object for object.
QUICKSTART_QUEUES = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: default-parent-queue}
spec:
  resources:
    cpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    gpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    memory: {limit: -1, overQuotaWeight: 1, quota: 0}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: default-queue}
spec:
  parentQueue: default-parent-queue
  resources:
    cpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    gpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    memory: {limit: -1, overQuotaWeight: 1, quota: 0}
"""
QUICKSTART_PODS = """
apiVersion: v1
kind: Pod
metadata:
  name: cpu-only-pod
  labels: {kai.scheduler/queue: default-queue}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: ubuntu
    args: ["sleep", "infinity"]
    resources:
      requests: {cpu: 100m, memory: 250M}
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
  labels: {kai.scheduler/queue: default-queue}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: ubuntu
    command: ["bash", "-c"]
    args: ["nvidia-smi; trap 'exit 0' TERM; sleep infinity & wait"]
    resources:
      limits: {nvidia.com/gpu: "1"}
"""


def _queue(name: str, **resources: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
            "spec": {"resources": resources}}


def _refusal(cluster: Cluster, obj: dict[str, Any], namespace: str | None = None) -> str:
    with pytest.raises(ApiException) as e:
        cluster.create(obj, namespace)
    assert e.value.status in (400, 422)
    return str(json.loads(e.value.body)["message"])


def apply_quickstart(cluster: Cluster, namespace: str) -> None:
    """The quickstart's queues (once per API server) and its pods in `namespace`, unchanged."""
    for queue in yaml.safe_load_all(QUICKSTART_QUEUES):
        try:
            created = cluster.create(queue)
        except ApiException as e:
            if e.status != 409:
                raise
            continue
        assert created["spec"] == queue["spec"]
    for pod in yaml.safe_load_all(QUICKSTART_PODS):
        cluster.create(pod, namespace)


def test_the_reference_quickstart_queues_and_pods_apply_unchanged(cluster: Cluster, namespace: str) -> None:
    apply_quickstart(cluster, namespace)
    gpu_pod = cluster.core.read_namespaced_pod("gpu-pod", namespace)
    assert gpu_pod.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}


@pytest.mark.parametrize(("note", "obj", "says"), [
    ("a negative quota", _queue("neg-quota", gpu={"quota": -2, "limit": -1}), "must be -1 (unlimited) or >= 0"),
    ("a negative limit", _queue("neg-limit", cpu={"quota": 0, "limit": -0.5}), "must be -1 (unlimited) or >= 0"),
    ("a negative over-quota weight", _queue("neg-weight", memory={"overQuotaWeight": -1}), "overQuotaWeight"),
    ("an unknown field", _queue("typo", gpu={"quota": 1, "limt": 2}), 'unknown field "spec.resources.gpu.limt"'),
    ("no resources (the reference's webhook requires them)",
     {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "bare"}, "spec": {"priority": 1}},
     "spec.resources: Required value"),
    ("a min-runtime that is not a duration",
     {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "rt"},
      "spec": {"resources": {}, "preemptMinRuntime": "ten minutes"}}, "spec.preemptMinRuntime"),
    ("a hostname level that is not the narrowest",
     {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "upside-down"},
      "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]}},
     "kubernetes.io/hostname can only be the last"),
    ("a topology repeating a level",
     {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "twice"},
      "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}}, "each node label may appear once"),
    ("a shard placement that is neither binpack nor spread",
     {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": "packed"},
      "spec": {"placementStrategy": {"gpu": "pack"}}}, "spec.placementStrategy.gpu"),
    ("a rule bundle ConfigMap without a namespace",
     {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": "nons"},
      "spec": {"ruleBundle": {"configMaps": [{"name": "rules"}]}}}, "namespace: Required value"),
])
def test_bad_cluster_scoped_objects_are_refused_naming_the_field(cluster: Cluster, note: str, obj: dict[str, Any],
                                                                 says: str) -> None:
    assert says in _refusal(cluster, obj), note


@pytest.mark.parametrize(("note", "obj", "says"), [
    ("a gang of zero", {"kind": "PodGroup", "spec": {"queue": "q", "minMember": 0}}, "spec.minMember"),
    ("an unknown preemptibility", {"kind": "PodGroup", "spec": {"queue": "q", "preemptibility": "sometimes"}},
     "spec.preemptibility"),
    ("a sub-group whose parent is missing",
     {"kind": "PodGroup", "spec": {"queue": "q", "subGroups": [{"name": "a", "parent": "nope"}]}},
     "every parent must name a sub-group of this list"),
    ("two sub-groups of one name",
     {"kind": "PodGroup", "spec": {"queue": "q", "subGroups": [{"name": "a"}, {"name": "a"}]}}, "Duplicate value"),
    ("a negative backoff limit", {"kind": "BindRequest", "spec": {"podName": "p", "backoffLimit": -1}},
     "spec.backoffLimit"),
])
def test_bad_namespaced_objects_are_refused_naming_the_field(cluster: Cluster, namespace: str, note: str,
                                                             obj: dict[str, Any], says: str) -> None:
    version = {"PodGroup": "scheduling.run.ai/v2alpha2", "BindRequest": "scheduling.run.ai/v1alpha2"}[obj["kind"]]
    manifest = {"apiVersion": version, "metadata": {"name": "bad"}, **obj}
    assert says in _refusal(cluster, manifest, namespace), note


def test_a_bind_request_status_takes_only_the_binder_phases(cluster: Cluster, namespace: str) -> None:
    cluster.bind_request(namespace, "p", "n", phase="Failed")
    name = cluster.custom.list_namespaced_custom_object("scheduling.run.ai", "v1alpha2", namespace,
                                                        "bindrequests")["items"][0]["metadata"]["name"]
    with pytest.raises(ApiException) as e:
        cluster.custom.patch_namespaced_custom_object_status(
            "scheduling.run.ai", "v1alpha2", namespace, "bindrequests", name, {"status": {"phase": "Maybe"}})
    assert "status.phase" in json.loads(e.value.body)["message"]


def test_status_is_a_subresource_a_spec_update_cannot_change(cluster: Cluster, namespace: str) -> None:
    cluster.pod_group(namespace, "pg", "p", "q", min_member=2)
    group = ("scheduling.run.ai", "v2alpha2", namespace, "podgroups", "pg")
    cluster.custom.patch_namespaced_custom_object(*group, {"status": {"phase": "Running"}})
    assert "status" not in cluster.custom.get_namespaced_custom_object(*group)
    cluster.custom.patch_namespaced_custom_object_status(*group, {"status": {"phase": "Running"}})
    assert cluster.custom.get_namespaced_custom_object(*group)["status"]["phase"] == "Running"


@pytest.mark.parametrize(("plural", "namespaced", "columns"), [
    ("queues", False, ["Name", "Priority", "Parent", "GPU Quota", "GPU Limit", "Age"]),
    ("podgroups", True, ["Name", "Phase", "Queue", "Min Member", "Running", "Age"]),
    ("bindrequests", True, ["Name", "Pod", "Node", "Phase", "Failed Attempts", "Age"]),
])
def test_kubectl_get_shows_the_columns_a_user_wants(cluster: Cluster, namespace: str, plural: str, namespaced: bool,
                                                    columns: list[str]) -> None:
    version = {"queues": "v2", "podgroups": "v2alpha2", "bindrequests": "v1alpha2"}[plural]
    path = f"/apis/scheduling.run.ai/{version}" + (f"/namespaces/{namespace}" if namespaced else "") + f"/{plural}"
    # what kubectl get asks for: the server renders the printer columns as a Table
    request = cluster.api.param_serialize("GET", path, auth_settings=["BearerToken"],
                                          header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = json.loads(cluster.api.call_api(*request).read())
    assert [c["name"] for c in table["columnDefinitions"]] == columns

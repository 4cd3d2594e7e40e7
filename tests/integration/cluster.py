"""The tests' own hands on the API server: the official kubernetes client, not kaipolicy's code,
and short builders for the objects the tests create. Cluster-scoped objects and pods carry the
test's partition label, so that each test sees only its own objects through its shard.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODE_POOL = "kai.scheduler/node-pool"


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.extensions = client.ApiextensionsV1Api(self.api)
        self.scheduling = client.SchedulingV1Api(self.api)

    # ---- CRDs -----------------------------------------------------------------------------------
    def install_crds(self) -> list[str]:
        names = []
        for path in sorted((ROOT / "crds").glob("*.yaml")):
            body = yaml.safe_load(path.read_text())
            self.extensions.create_custom_resource_definition(body)
            names.append(body["metadata"]["name"])
        for name in names:
            wait_for(f"CRD {name} to be established", lambda n=name: self._established(n), 60)
        return names

    def _established(self, name: str) -> bool:
        crd = self.api.sanitize_for_serialization(self.extensions.read_custom_resource_definition(name))
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    # ---- generic ------------------------------------------------------------------------------------
    def create(self, obj: dict[str, Any], namespace: str | None = None, strict: bool = True) -> dict[str, Any]:
        """Create any object from its manifest (custom kinds through CustomObjectsApi)."""
        group, _, version = obj["apiVersion"].rpartition("/")
        plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
        plural = {"topologys": "topologies", "priorityclasss": "priorityclasses"}.get(plural, plural)
        validation = "Strict" if strict else None
        if obj["kind"] == "Pod":
            out = self.core.create_namespaced_pod(namespace, obj, field_validation=validation)
        elif obj["kind"] == "PriorityClass":
            out = self.scheduling.create_priority_class(obj, field_validation=validation)
        elif namespace:
            out = self.custom.create_namespaced_custom_object(group, version, namespace, plural, obj,
                                                              field_validation=validation)
        else:
            out = self.custom.create_cluster_custom_object(group, version, plural, obj, field_validation=validation)
        return dict(self.api.sanitize_for_serialization(out))

    # ---- builders ---------------------------------------------------------------------------------
    def node(self, name: str, partition: str, gpus: int = 0, cpu: str = "16", memory: str = "64Gi",
             labels: dict[str, str] | None = None, pods: int = 110, **spec: Any) -> None:
        meta = {"name": name, "labels": {NODE_POOL: partition, **(labels or {})}}
        self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec})
        allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        self.core.patch_node_status(name, {"status": {"allocatable": allocatable, "capacity": allocatable}})
        # admission taints a new node not-ready until its kubelet reports; no kubelet runs here
        self.core.patch_node(name, {"spec": {"taints": spec.get("taints") or []}})

    def queue(self, name: str, partition: str, parent: str | None = None, gpu: tuple[float, float] = (0, -1),
              weight: float = 1) -> None:
        amounts = {"gpu": {"quota": gpu[0], "limit": gpu[1], "overQuotaWeight": weight},
                   "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": weight},
                   "memory": {"quota": -1, "limit": -1, "overQuotaWeight": weight}}
        spec: dict[str, Any] = {"resources": amounts} | ({"parentQueue": parent} if parent else {})
        self.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                     "metadata": {"name": name, "labels": {NODE_POOL: partition}}, "spec": spec})

    def one_node_shard(self, partition: str, gpus: int) -> str:
        """A shard serving `partition`, one node of `gpus` GPUs and one queue in it; the queue's name."""
        self.shard(partition, partition)
        self.node(f"n-{partition}", partition, gpus=gpus)
        self.queue(f"q-{partition}", partition)
        return f"q-{partition}"

    def shard(self, name: str, partition: str, **spec: Any) -> None:
        self.create({"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": name},
                     "spec": {"partitionLabelValue": partition, **spec}})

    def pod_group(self, namespace: str, name: str, partition: str, queue: str, min_member: int = 1,
                  **spec: Any) -> None:
        self.create({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                     "metadata": {"name": name, "labels": {NODE_POOL: partition}},
                     "spec": {"queue": queue, "minMember": min_member, **spec}}, namespace)

    def pod(self, namespace: str, name: str, partition: str, *, queue: str | None = None, group: str | None = None,
            gpus: int = 0, cpu: str = "500m", memory: str = "1Gi", annotations: dict[str, str] | None = None,
            labels: dict[str, str] | None = None, scheduler: str = "kai-scheduler", **spec: Any) -> dict[str, Any]:
        requests = {"cpu": cpu, "memory": memory} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        meta: dict[str, Any] = {"name": name, "labels": {NODE_POOL: partition, **(labels or {})},
                                "annotations": dict(annotations or {})}
        if queue:
            meta["labels"]["kai.scheduler/queue"] = queue
        if group:
            meta["annotations"]["pod-group-name"] = group
        container = {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
        return self.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                            "spec": {"schedulerName": scheduler, "containers": [container], **spec}}, namespace)

    def set_phase(self, namespace: str, name: str, phase: str) -> None:
        self.core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": phase}})

    def bind_request(self, namespace: str, pod: str, node: str, groups: list[str] | None = None,
                     phase: str | None = None, **spec: Any) -> None:
        name = f"{pod}-{secrets.token_hex(3)}"
        body = {"podName": pod, "selectedNode": node, **spec} | ({"selectedGPUGroups": groups} if groups else {})
        self.create({"apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest",
                     "metadata": {"name": name}, "spec": body}, namespace)
        if phase:
            self.custom.patch_namespaced_custom_object_status(
                "scheduling.run.ai", "v1alpha2", namespace, "bindrequests", name, {"status": {"phase": phase}})

    def events_about(self, namespace: str, name: str) -> list[dict[str, Any]]:
        events = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        return list(self.api.sanitize_for_serialization(events).get("items") or [])

"""Manifests applied unchanged, scheduled by `kaipolicy run` without a shard (the whole unlabelled
cluster, the bundled rules): the reference's quickstart, and workloads written the way teams write
them (tests/integration/manifests: GPU memory, fractions of one and two devices, a pod group with
sub-groups and a priority class, a topology-constrained gang, node selectors, tolerations and
node affinity), each getting a BindRequest on a node that satisfies it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, bind_requests
from tests.integration.test_crds import apply_quickstart
from tests.polling import wait_for

MANIFESTS = Path(__file__).resolve().parent / "manifests"


@pytest.fixture
def made() -> list[str]:
    return []


@pytest.fixture(autouse=True)
def _clean_up(cluster: Cluster, namespace: str, made: list[str]) -> Iterator[None]:
    """Objects without a node-pool label are seen by every test that runs without a shard: this
    test's nodes and pods are gone after it."""
    yield
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for name in made:
        cluster.core.delete_node(name)


def _node(cluster: Cluster, made: list[str], name: str, gpus: int, labels: dict[str, str] | None = None,
          taints: list[dict[str, str]] | None = None) -> None:
    """A node without a node-pool label: the default partition."""
    made.append(name)
    cluster.core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                                    **(labels or {})}}})
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    cluster.core.patch_node_status(name, {"status": {"allocatable": allocatable, "capacity": allocatable}})
    cluster.core.patch_node(name, {"spec": {"taints": taints or []}})


def _apply(cluster: Cluster, path: Path, namespace: str) -> list[str]:
    """Every object of the file, unchanged (cluster-scoped ones once per API server); the pods' names."""
    pods = []
    for obj in yaml.safe_load_all(path.read_text()):
        namespaced = obj["kind"] in ("Pod", "PodGroup")
        try:
            cluster.create(obj, namespace if namespaced else None)
        except ApiException as e:
            if e.status != 409 or namespaced:
                raise
        if obj["kind"] == "Pod":
            pods.append(obj["metadata"]["name"])
    return pods


def test_the_references_quickstart_applied_unchanged_gets_bind_requests_on_real_nodes(
        cluster: Cluster, apiserver: ApiServer, namespace: str, tmp_path: Path, made: list[str]) -> None:
    _node(cluster, made, f"qs-{namespace}", gpus=2)
    apply_quickstart(cluster, namespace)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", namespace)
    try:
        requests = wait_for("both quickstart pods' BindRequests", lambda: r if len(
            r := bind_requests(cluster, namespace)) == 2 else None)
    finally:
        assert scheduler.stop() == 0
    nodes = {n.metadata.name for n in cluster.core.list_node().items}
    assert sorted(requests) == ["cpu-only-pod", "gpu-pod"]
    assert all(br["spec"]["selectedNode"] in nodes for br in requests.values())
    assert requests["gpu-pod"]["spec"]["receivedGPU"] == {"count": 1, "portion": "1.00"}


def test_workloads_written_as_teams_write_them_get_bind_requests_that_honour_them(
        cluster: Cluster, apiserver: ApiServer, namespace: str, tmp_path: Path, made: list[str]) -> None:
    s = namespace
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}
    _node(cluster, made, f"a100-{s}", 8, a100 | {"topology.kubernetes.io/zone": "z1", "example.com/rack": "r0"})
    _node(cluster, made, f"infer-{s}", 4, {"dedicated": "inference", "nvidia.com/gpu.memory": "46068"},
          taints=[{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}])
    racks = {f"r1-{i}-{s}": ("r1", 2) for i in range(2)} | {f"r2-{i}-{s}": ("r2", 4) for i in range(2)}
    for name, (rack, gpus) in racks.items():
        _node(cluster, made, name, gpus, {"topology.kubernetes.io/zone": "z1", "example.com/rack": rack,
                                    "example.com/pool": "training", "nvidia.com/gpu.memory": "81920"},
              taints=[{"key": "example.com/pool", "value": "training", "effect": "NoSchedule"}])
    _apply(cluster, MANIFESTS / "queues.yaml", s)
    pods = [pod for f in ("shared-gpus.yaml", "distributed.yaml", "topology.yaml", "serving.yaml")
            for pod in _apply(cluster, MANIFESTS / f, s)]
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", s)
    try:
        requests = wait_for("every pod's BindRequest", lambda: r if len(
            r := bind_requests(cluster, s)) == len(pods) else None, 30)
    finally:
        assert scheduler.stop() == 0
    node = {pod: br["spec"]["selectedNode"] for pod, br in requests.items()}
    assert node["llm-serving-a100"] == f"a100-{s}"
    assert node["llm-serving-dedicated"] == f"infer-{s}"
    assert {node[f"llm-pretrain-{i}"] for i in range(4)} <= {f"r2-0-{s}", f"r2-1-{s}"}   # one rack: r2
    assert f"infer-{s}" not in {n for pod, n in node.items() if pod != "llm-serving-dedicated"}
    received = {pod: _received(br) for pod, br in requests.items()}
    assert received["notebook-mem"][:2] == ("Fraction", 1)
    assert received["notebook-quarter"] == ("Fraction", 1, "0.25", 1)
    assert received["eval-two-halves"] == ("Fraction", 2, "0.50", 2)
    assert received["pytorch-job-master-0"] == ("Regular", 1, "1.00", 0)
    assert received["tokenizer"] == ("Regular", 0, "0.00", 0)


def _received(br: dict[str, Any]) -> tuple[str, int, str, int]:
    spec = br["spec"]
    return (spec["receivedResourceType"], spec["receivedGPU"]["count"], spec["receivedGPU"]["portion"],
            len(spec.get("selectedGPUGroups") or []))

"""Node filters about kinds and neighbours: GPU resource type, node affinity, pod (anti-)affinity."""

from __future__ import annotations

from kaipolicy.api.node import Node
from kaipolicy.api.resources import RequestType
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import ACTIVE_USED, Task

NODE_TYPE_LABEL = "kai.scheduler/type"


def resource_type_error(task: Task, node: Node) -> str:
    """Why this node's kind of GPU cannot serve the task ('' when it can)."""
    if task.legacy_mig:
        return f"Legacy MIG jobs cannot be scheduled on node {node.name}"
    if task.cpu_only:
        return ""
    mig_task = task.request.kind == RequestType.MIG
    if not node.mig_enabled:
        return "MIG job cannot be scheduled on non-MIG node" if mig_task else ""
    if mig_task and node.legacy_mig_tasks:
        return "MIG job cannot be scheduled on node with legacy MIG jobs"
    if node.mig_strategy == "single" and task.request.kind != RequestType.REGULAR:
        return "only whole gpu jobs can run on a node with MigStrategy='single'"
    if node.mig_strategy == "mixed" and not mig_task:
        return "non MIG jobs cant run on a node with MigStrategy='mixed'"
    return ""


def node_affinity_matches(task: Task, node: Node) -> bool:
    if not task.node_affinity:
        return True
    return node.labels.get(NODE_TYPE_LABEL) in task.node_affinity


def _matches(labels: dict[str, str], selector: tuple[tuple[str, str], ...]) -> bool:
    return all(labels.get(k) == v for k, v in selector)


def pod_affinity_fits(cluster: ClusterInfo, task: Task, node: Node) -> bool:
    """Required affinity: some matching pod in the node's `topologyKey` domain (or none anywhere
    and the pod matches itself, as Kubernetes allows); anti-affinity: none in its domain."""
    aff = task.pod_affinity
    if aff is None:
        return True
    matching = [(n, t) for n in cluster.nodes.values() for t in n.tasks.values()
                if t.status in ACTIVE_USED and t.uid != task.uid and _matches(t.labels, aff.labels)]
    if aff.topology_key:
        domain = node.labels.get(aff.topology_key)
        if domain is None:
            return False
        here = any(n.labels.get(aff.topology_key) == domain for n, _ in matching)
        if not here and not (not matching and _matches(task.labels, aff.labels)):
            return False
    if aff.anti_topology_key:
        domain = node.labels.get(aff.anti_topology_key)
        if domain is not None and any(n.labels.get(aff.anti_topology_key) == domain for n, _ in matching):
            return False
    return True

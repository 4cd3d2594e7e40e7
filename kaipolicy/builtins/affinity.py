"""Node filters about kinds and neighbours: GPU resource type, node selector and affinity, taints,
pod (anti-)affinity. Selector, affinity and taint matching follow Kubernetes' own rules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kaipolicy.api.node import Node, PodOnNode, Taint
from kaipolicy.api.resources import RequestType
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import ACTIVE_USED, AffinityTerm, PodAffinity, Requirement, Task, Toleration

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
    """The node has every nodeSelector label, and one required node-affinity term holds."""
    if task.node_affinity and node.labels.get(NODE_TYPE_LABEL) not in task.node_affinity:
        return False
    if any(node.labels.get(k) != v for k, v in task.node_selector):
        return False
    return not task.affinity_terms or any(_term_holds(t, node) for t in task.affinity_terms)


def _term_holds(term: AffinityTerm, node: Node) -> bool:
    # an empty term selects no node, as in Kubernetes
    if not term.expressions and not term.fields:
        return False
    return (all(_requirement_holds(r, node.labels.get(r.key)) for r in term.expressions)
            and all(_requirement_holds(r, node.name if r.key == "metadata.name" else None) for r in term.fields))


def _requirement_holds(req: Requirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def untolerated_taint(task: Task, node: Node) -> str:
    """The first NoSchedule / NoExecute taint of the node the task does not tolerate, as the
    Kubernetes filter reports it; '' when there is none."""
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in task.tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    return ""


def _tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    return tol.operator in ("", "Equal") and tol.value == taint.value


def _matches(labels: dict[str, str], selector: tuple[tuple[str, str], ...]) -> bool:
    return all(labels.get(k) == v for k, v in selector)


def holds_anti_affinity(cluster: ClusterInfo) -> bool:
    """Whether any pod of the cluster has a required anti-affinity, worked out once per snapshot
    (a snapshot's pods and their terms are fixed; only where they run changes)."""
    known = cluster.anti_affinity
    if known is None:
        known = cluster.anti_affinity = any(t.pod_affinity is not None and bool(t.pod_affinity.anti_topology_key)
                                            for j in cluster.jobs.values() for t in j.tasks.values())
    return known


Repeller = tuple[str, str]   # a node-label key and its value: one domain


def _neighbours(cluster: ClusterInfo, task: Task) -> Iterator[tuple[Node, PodOnNode]]:
    """Every pod in use, with its node, that a term of `task` or a term about it can select:
    terms name no namespaces, so only pods of the task's own namespace (Kubernetes' reading of
    such a term). The task's own listing counts too: an evicted pod being placed again is still
    listed, Releasing, on the node it leaves, and the reference's filter sees that copy like any
    other pod (so a pod whose anti-affinity selects its own labels cannot move within the domain
    it leaves: the reference's Go keeps it there, and consolidation then makes no room)."""
    for n in cluster.nodes.values():
        for t in n.tasks.values():
            if t.status in ACTIVE_USED and t.namespace == task.namespace:
                yield n, t


def repellers(cluster: ClusterInfo, task: Task) -> list[Repeller]:
    """The domains placed pods' required anti-affinity keeps `task` out of: (topology key, value)
    for each pod in use on a node with that key, in the task's namespace, whose selector matches
    the task's labels (the task's own listing too, see _neighbours). Kubernetes' inter-pod
    affinity filter rejects a node in such a domain, so the check is symmetric: found by the
    reference's Go on random clusters (`generate.scenario` seeds 521 and 565). A term names no
    namespaces, so it selects pods of its own pod's namespace only, as Kubernetes reads it."""
    if not holds_anti_affinity(cluster):
        return []
    out: list[Repeller] = []
    for n, t in _neighbours(cluster, task):
        other = t.pod_affinity
        if other is None or not other.anti_topology_key:
            continue
        value = n.labels.get(other.anti_topology_key)
        if value is not None and _matches(task.labels, other.labels):
            out.append((other.anti_topology_key, value))
    return out


def repelled(node: Node, found: list[Repeller]) -> bool:
    return any(node.labels.get(key) == value for key, value in found)


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    """What the inter-pod affinity filter reads of the cluster for one pod, read once for every
    node it is asked of: the domains placed pods' anti-affinity keeps it out of (`repellers`),
    and for its own terms the domains of their keys that hold a matching pod.

    Kubernetes counts a matching pod by the domain of its node, and a node without the key is in
    no domain: a pod matching there neither draws the incoming pod nor stops it from being the
    first of its kind (the reference's Go then binds a pod matching its own term to a node with
    the key)."""

    repellers: list[Repeller]
    terms: PodAffinity | None
    near: frozenset[str] = frozenset()     # values of the affinity's key whose domain holds a match
    first_of_kind: bool = False            # no domain holds a match, and the pod matches its own term
    apart: frozenset[str] = frozenset()    # values of the anti-affinity's key whose domain holds a match

    @property
    def unconstrained(self) -> bool:
        return self.terms is None and not self.repellers

    def admits(self, node: Node) -> bool:
        if repelled(node, self.repellers):
            return False
        aff = self.terms
        if aff is None:
            return True
        if aff.topology_key:
            domain = node.labels.get(aff.topology_key)
            if domain is None or not (domain in self.near or self.first_of_kind):
                return False
        if aff.anti_topology_key:
            domain = node.labels.get(aff.anti_topology_key)
            if domain is not None and domain in self.apart:
                return False
        return True


def neighbourhood(cluster: ClusterInfo, task: Task) -> Neighbourhood:
    """The task's Neighbourhood: its terms name no namespaces, so they match pods of its own
    namespace only, as Kubernetes reads them."""
    found = repellers(cluster, task)
    aff = task.pod_affinity
    if aff is None:
        return Neighbourhood(found, None)
    key, anti = aff.topology_key, aff.anti_topology_key
    near: set[str] = set()
    apart: set[str] = set()
    for n, t in _neighbours(cluster, task):
        if _matches(t.labels, aff.labels):
            if key and key in n.labels:
                near.add(n.labels[key])
            if anti and anti in n.labels:
                apart.add(n.labels[anti])
    return Neighbourhood(found, aff, frozenset(near), not near and _matches(task.labels, aff.labels),
                         frozenset(apart))


def pod_affinity_fits(cluster: ClusterInfo, task: Task, node: Node) -> bool:
    """Required affinity: some matching pod in the node's `topologyKey` domain (or none in any
    domain of that key and the pod matches itself, as Kubernetes allows); anti-affinity: none in
    its domain; and no placed pod's required anti-affinity keeps the pod out of the node's domain.
    For many nodes, read the task's `neighbourhood` once and ask it of each."""
    return neighbourhood(cluster, task).admits(node)

"""Join converted objects into one scenario document: the cluster as one scheduler (shard) sees it.

Jobs are the PodGroups of the shard's partition with their pods, plus a job of one for each pod of
this scheduler that names no group. A BindRequest the binder has not acted on places its pod
(Binding, on its node, with its GPU groups); a failed one leaves the pod Pending. Pods nobody here
schedules count on their nodes as `otherPods`. Jobs and tasks are named `namespace/name`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.cache.convert import (
    BindRequestView,
    Meta,
    NodeView,
    PodGroupView,
    PodView,
    PriorityClassView,
    QueueView,
    TopologyView,
)
from kaipolicy.errors import ObjectError

DEFAULT_QUEUE = "default-queue"     # where the reference's pod-grouper puts a pod without a queue label
TRAIN_CLASS = "train"               # the priority class it gives a bare pod
DEFAULT_PRIORITY = 50               # when no PriorityClass says otherwise
#: the `app` label of KAI's own utility pods: a GPU-sharing group's reservation pod (its GPU is
#: the group's, counted through the sharing pods) and the node-scale-adjuster's scaling pod
RESERVATION_APP, SCALING_APP = "kai-resource-reservation", "scaling-pod"


@dataclass(frozen=True)
class Scope:
    """Which objects one scheduler serves: its schedulerName and its shard's partition label value
    (an empty value selects the objects without the label, as the reference's selector does)."""

    scheduler_name: str = "kai-scheduler"
    partition: str = ""

    def selects(self, m: Meta) -> bool:
        return partition_matches(m.partition, self.partition)


def partition_matches(label: str | None, partition: str) -> bool:
    return label is None if not partition else label == partition


@dataclass
class Views:
    """Converted objects by kind, each keyed namespace/name (name for cluster-scoped kinds)."""

    pods: dict[str, PodView] = field(default_factory=dict)
    pod_groups: dict[str, PodGroupView] = field(default_factory=dict)
    bind_requests: dict[str, BindRequestView] = field(default_factory=dict)
    queues: dict[str, QueueView] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    topologies: dict[str, TopologyView] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClassView] = field(default_factory=dict)


@dataclass
class Assembly:
    doc: dict[str, Any]
    problems: list[ObjectError]
    #: scenario job and task names -> the object each came from (kind, namespace, name, uid)
    origins: dict[str, tuple[str, str, str, str]]
    #: the wall-clock time (seconds since the epoch) the document's clock 0 stands for: ages in it
    #: are counted back from here, and a cycle's times (a job's last start) forward
    now: float = 0.0


def assemble(views: Views, scope: Scope, now: float, head: dict[str, Any]) -> Assembly:
    """The scenario document for `scope` at wall-clock time `now` (seconds since the epoch);
    `head` gives its top-level keys (actions, config, params...)."""
    out = Assembly({}, [], {}, now)
    nodes = {v.meta.name: dict(v.node) for v in sorted(views.nodes.values(), key=_by_name) if scope.selects(v.meta)}
    queues, leaves = _queues(views.queues.values(), scope, out.problems)
    bind = _bind_requests(views.bind_requests.values(), nodes)
    jobs = _JobBuilder(views, scope, now, nodes, leaves, bind, out)
    jobs.pod_groups()
    jobs.single_pods()
    _other_pods(views.pods.values(), jobs.tasks_placed, nodes)
    out.doc = dict(head) | {
        "defaultDepartment": False, "queues": queues, "nodes": list(nodes.values()),
        "jobs": [spec for _, spec in sorted(jobs.jobs, key=lambda j: j[0])],
        "topologies": [{"name": t.meta.name, "levels": list(t.levels)}
                       for t in sorted(views.topologies.values(), key=_by_name)],
    }
    return out


def _by_name(view: Any) -> str:
    return str(view.meta.name)


def _queues(views: Iterable[QueueView], scope: Scope, problems: list[ObjectError]) -> tuple[list[dict[str, Any]], set[str]]:
    """Queues of the partition, oldest first; an orphan (its parent missing) is left out with its
    children, as the reference does."""
    chosen = {v.meta.name: v for v in views if scope.selects(v.meta)}
    kept: dict[str, QueueView] = {}
    for name, v in chosen.items():
        chain, at = [], v
        while at.parent and at.parent in chosen and at.meta.name not in chain:
            chain.append(at.meta.name)
            at = chosen[at.parent]
        if at.parent and at.parent not in chosen:
            problems.append(v.meta.problem(f"parent queue {at.parent!r} does not exist" if at is v
                                           else f"ancestor queue {at.parent!r} does not exist"))
        elif at.parent:
            problems.append(v.meta.problem("the queue's parents form a cycle"))
        else:
            kept[name] = v
    ordered = sorted(kept.values(), key=lambda v: (v.meta.created, v.meta.name))
    parents = {v.parent for v in ordered}
    specs = [dict(v.queue) | {"creationOrder": i} for i, v in enumerate(ordered)]
    return specs, {v.meta.name for v in ordered if v.meta.name not in parents}


def _bind_requests(views: Iterable[BindRequestView], nodes: dict[str, Any]) -> dict[tuple[str, str], BindRequestView]:
    """The live BindRequest of each pod: not failed for good, on a node of this snapshot (the
    newest when there are several)."""
    out: dict[tuple[str, str], BindRequestView] = {}
    for br in sorted(views, key=lambda b: (b.meta.created, b.meta.name)):
        if not br.failed and br.node in nodes:
            out[(br.meta.namespace, br.pod)] = br
    return out


class _JobBuilder:
    """Pods into jobs: one method per way a job arises, sharing the checks and the naming."""

    def __init__(self, views: Views, scope: Scope, now: float, nodes: dict[str, Any], leaves: set[str],
                 bind: dict[tuple[str, str], BindRequestView], out: Assembly) -> None:
        self.views, self.scope, self.now, self.nodes = views, scope, now, nodes
        self.leaves, self.bind, self.out = leaves, bind, out
        self.jobs: list[tuple[tuple[float, str], dict[str, Any]]] = []
        self.tasks_placed: set[str] = set()        # pod keys that became tasks
        self.names: set[str] = set()
        classes = views.priority_classes.values()
        self.priorities = {c.meta.name: c.value for c in classes}
        self.default_priority = next((c.value for c in sorted(classes, key=_by_name) if c.global_default),
                                     DEFAULT_PRIORITY)

    def pod_groups(self) -> None:
        members: dict[str, list[PodView]] = {}
        for p in self.views.pods.values():
            if p.group and p.scheduler == self.scope.scheduler_name:
                members.setdefault(f"{p.meta.namespace}/{p.group}", []).append(p)
        for key, g in sorted(self.views.pod_groups.items()):
            if not self.scope.selects(g.meta) or not self._queue_ok(g.meta, g.queue) or not self._topology_ok(g):
                continue
            pods = []
            for p in members.get(key, []):
                problem = _sub_group_problem(p, g)
                if problem:
                    self.out.problems.append(p.meta.problem(problem))
                else:
                    pods.append(p)
            priority = self.priorities.get(g.priority_class, self.default_priority)
            self._add(g.meta, g.queue, priority, g.preemptibility, dict(g.job), pods)

    def single_pods(self) -> None:
        """A pod of this scheduler with no pod-group annotation is a job of one."""
        for p in sorted(self.views.pods.values(), key=lambda p: p.meta.key):
            if p.group or p.scheduler != self.scope.scheduler_name or not self.scope.selects(p.meta):
                continue
            if p.meta.labels.get("app") in (RESERVATION_APP, SCALING_APP):
                continue   # utility pods are nobody's job
            queue = p.queue or DEFAULT_QUEUE
            if not self._queue_ok(p.meta, queue):
                continue
            cls = p.priority_class if p.priority_class in self.priorities else TRAIN_CLASS
            priority = self.priorities.get(cls, self.default_priority)
            self._add(p.meta, queue, priority, p.preemptibility, {"minAvailable": 1}, [p])

    def _topology_ok(self, g: PodGroupView) -> bool:
        """Every topology constraint of the group names a Topology and levels it has."""
        constraints = [g.job.get("topologyConstraint")] + [sg.get("topology") for sg in g.job.get("subGroups") or ()]
        for c in filter(None, constraints):
            topology = self.views.topologies.get(c["topology"])
            if topology is None:
                problem = f"topology {c['topology']!r} does not exist"
            else:
                wrong = [c[k] for k in ("requiredLevel", "preferredLevel") if k in c and c[k] not in topology.levels]
                if not wrong:
                    continue
                problem = f"{wrong[0]!r} is not a level of topology {c['topology']!r}"
            self.out.problems.append(g.meta.problem(problem))
            return False
        return True

    def _queue_ok(self, m: Meta, queue: str) -> bool:
        if queue in self.leaves:
            return True
        known = any(q.meta.name == queue for q in self.views.queues.values() if self.scope.selects(q.meta))
        self.out.problems.append(m.problem(f"queue {queue!r} has child queues: only leaf queues take jobs" if known
                                           else f"queue {queue!r} does not exist"))
        return False

    def _add(self, m: Meta, queue: str, priority: int, preemptibility: str, spec: dict[str, Any],
             pods: list[PodView]) -> None:
        tasks = [t for t in (self._task(p) for p in sorted(pods, key=lambda p: (p.meta.created, p.meta.name))) if t]
        if not tasks:
            return
        name = f"{m.namespace}/{m.name}"
        if name in self.names:    # a bare pod named like a pod group of its namespace
            name += f" ({m.kind.lower()})"
        self.names.add(name)
        self.out.origins[name] = (m.kind, m.namespace, m.name, m.uid)
        for last, key in (("lastStart", "lastStartMinutesAgo"), ("staleSince", "staleSeconds")):
            when = spec.pop(last, None)
            if when is not None:
                ago = max(self.now - when, 0.0)
                spec[key] = ago / 60.0 if key == "lastStartMinutesAgo" else ago
        head: dict[str, Any] = {"name": name, "namespace": m.namespace, "queue": queue, "priority": priority}
        if preemptibility:
            head["preemptible"] = preemptibility == "preemptible"
        spec = head | spec | {"createdMinutesAgo": max(self.now - m.created, 0.0) / 60.0, "tasks": tasks}
        self.jobs.append(((m.created, m.uid), spec))

    def _task(self, p: PodView) -> dict[str, Any] | None:
        state, node, groups = self._state(p)
        if state is None:
            return None
        task: dict[str, Any] = {"name": f"{p.meta.namespace}/{p.meta.name}", "state": state}
        if node:
            task["node"] = node
        task |= {k: v for k, v in p.task.items() if k not in ("name", "gpuGroups")}
        if groups:
            task["gpuGroups"] = list(groups)
        self.tasks_placed.add(p.meta.key)
        self.out.origins[task["name"]] = ("Pod", p.meta.namespace, p.meta.name, p.meta.uid)
        return task

    def _state(self, p: PodView) -> tuple[str | None, str, tuple[str, ...]]:
        """The reference's task status; None leaves the pod out: it holds a node this snapshot
        lacks (another partition's), or it is being deleted before it ever had one."""
        groups = tuple(p.task.get("gpuGroups") or ())
        if p.phase in ("Succeeded", "Failed"):
            return p.phase, "", groups
        if p.deleting or p.node:
            state = "Releasing" if p.deleting else ("Running" if p.phase == "Running" else "Bound")
            return (state if p.node in self.nodes else None), p.node, groups
        br = self.bind.get((p.meta.namespace, p.meta.name))
        # a request owned by an earlier pod of the same name (a StatefulSet's, recreated) is not this pod's
        if br is not None and br.pod_uid in ("", p.meta.uid):
            return "Binding", br.node, br.gpu_groups or groups
        return ("Gated" if p.gated else "Pending"), "", groups


def _sub_group_problem(p: PodView, g: PodGroupView) -> str:
    sub = str(p.task.get("subGroup") or "")
    if g.sub_groups and not sub:
        return f"pod group {g.meta.name} has sub-groups: the pod needs the label kai.scheduler/subgroup-name"
    if sub and sub not in g.sub_groups:
        return f"sub-group {sub!r} is not a leaf sub-group of pod group {g.meta.name}"
    return ""


def _other_pods(pods: Iterable[PodView], tasks: set[str], nodes: dict[str, Any]) -> None:
    """What pods outside the snapshot's jobs hold on its nodes (other schedulers, DaemonSets)."""
    for p in pods:
        if p.meta.key in tasks or p.node not in nodes or p.phase in ("Succeeded", "Failed"):
            continue
        other = nodes[p.node].setdefault("otherPods", {"count": 0, "cpuMillis": 0, "memoryBytes": 0, "gpus": 0})
        other["count"] += 1
        other["cpuMillis"] += int(p.usage["cpuMillis"])
        other["memoryBytes"] += int(p.usage["memoryBytes"])
        if p.meta.labels.get("app") != RESERVATION_APP:
            other["gpus"] += p.usage["gpus"]

"""Join converted objects into one scenario document: the cluster as one scheduler (shard) sees it.

Jobs are the PodGroups of the shard's partition with their pods, plus a job of one for each pod of
this scheduler that names no group. A BindRequest the binder has not acted on places its pod
(Binding, on its node, with its GPU groups); a failed one leaves the pod Pending. Pods nobody here
schedules count on their nodes as `otherPods`. Jobs and tasks are named `namespace/name`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
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
    jobs = JobBuilder(views, scope, now, nodes, leaves, bind)
    pieces = [jobs.group(key, g, members) for key, g, members in jobs.groups()]
    taken = {p.name for p in pieces if p.spec is not None}
    pieces += [jobs.single(p, taken) for p in jobs.singles()]
    placed: set[str] = set()
    for piece in pieces:
        out.problems += piece.problems
        out.origins |= piece.origins
        placed |= piece.placed
    for name, other in other_pods(views.pods.values(), placed, nodes).items():
        nodes[name]["otherPods"] = other
    specs = [spec for _, spec in sorted(((p.sort_key, p.spec) for p in pieces if p.spec is not None),
                                        key=lambda j: j[0])]
    out.doc = document(head, queues, list(nodes.values()), specs, views)
    return out


def document(head: dict[str, Any], queues: list[dict[str, Any]], nodes: list[dict[str, Any]],
             jobs: list[dict[str, Any]], views: Views) -> dict[str, Any]:
    return dict(head) | {
        "defaultDepartment": False, "queues": queues, "nodes": nodes, "jobs": jobs,
        "topologies": [{"name": t.meta.name, "levels": list(t.levels)}
                       for t in sorted(views.topologies.values(), key=_by_name)],
    }


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


def _bind_requests(views: Iterable[BindRequestView], nodes: Collection[str]) -> dict[tuple[str, str], BindRequestView]:
    """The live BindRequest of each pod: not failed for good, on a node of this snapshot (the
    newest when there are several)."""
    out: dict[tuple[str, str], BindRequestView] = {}
    for br in sorted(views, key=lambda b: (b.meta.created, b.meta.name)):
        if not br.failed and br.node in nodes:
            out[(br.meta.namespace, br.pod)] = br
    return out


@dataclass
class JobPiece:
    """What one PodGroup, or one pod that names no group, adds to the document: its job spec (None
    when it makes no job), where the job and its tasks came from, the problems met, and the pods
    that became tasks. `clock` keeps the wall-clock times its spec counts back from (creation,
    last start, stale since), so a later cycle can re-time the spec without rebuilding it."""

    name: str
    sort_key: tuple[float, str]
    spec: dict[str, Any] | None = None
    clock: tuple[float, float | None, float | None] = (0.0, None, None)
    origins: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    problems: list[ObjectError] = field(default_factory=list)
    placed: set[str] = field(default_factory=set)


def retime(spec: dict[str, Any], clock: tuple[float, float | None, float | None], now: float) -> None:
    """Set the spec's ages (createdMinutesAgo, lastStartMinutesAgo, staleSeconds) for wall-clock `now`."""
    created, last_start, stale_since = clock
    spec["createdMinutesAgo"] = max(now - created, 0.0) / 60.0
    if last_start is not None:
        spec["lastStartMinutesAgo"] = max(now - last_start, 0.0) / 60.0
    if stale_since is not None:
        spec["staleSeconds"] = max(now - stale_since, 0.0)


class JobBuilder:
    """Pods into jobs: one method per way a job arises, sharing the checks and the naming. Each
    job is built from its own objects alone (and the cluster-wide facts given here), so a cycle
    that knows what changed can rebuild only the jobs it touches (`delta.py`)."""

    def __init__(self, views: Views, scope: Scope, now: float, nodes: Collection[str], leaves: set[str],
                 bind: dict[tuple[str, str], BindRequestView]) -> None:
        self.views, self.scope, self.now, self.nodes = views, scope, now, nodes
        self.leaves, self.bind = leaves, bind
        classes = views.priority_classes.values()
        self.priorities = {c.meta.name: c.value for c in classes}
        self.default_priority = next((c.value for c in sorted(classes, key=_by_name) if c.global_default),
                                     DEFAULT_PRIORITY)

    def groups(self) -> Iterator[tuple[str, PodGroupView, list[PodView]]]:
        """Every PodGroup (by key) with the pods of this scheduler that name it."""
        members: dict[str, list[PodView]] = {}
        for p in self.views.pods.values():
            if p.group and p.scheduler == self.scope.scheduler_name:
                members.setdefault(f"{p.meta.namespace}/{p.group}", []).append(p)
        for key, g in sorted(self.views.pod_groups.items()):
            yield key, g, members.get(key, [])

    def singles(self) -> list[PodView]:
        """Every pod of this scheduler that names no group, by key."""
        return sorted((p for p in self.views.pods.values() if not p.group and p.scheduler == self.scope.scheduler_name),
                      key=lambda p: p.meta.key)

    def group(self, key: str, g: PodGroupView, members: Iterable[PodView]) -> JobPiece:
        piece = JobPiece(key, (g.meta.created, g.meta.uid))
        if not self.scope.selects(g.meta) or not self._queue_ok(g.meta, g.queue, piece) or not self._topology_ok(g, piece):
            return piece
        pods = []
        # by key: a pod's problems are listed in the same order however the pods arrived
        for p in sorted(members, key=lambda p: p.meta.key):
            problem = _sub_group_problem(p, g)
            if problem:
                piece.problems.append(p.meta.problem(problem))
            else:
                pods.append(p)
        priority = self.priorities.get(g.priority_class, self.default_priority)
        self._add(piece, g.meta, g.queue, priority, g.preemptibility, dict(g.job), pods)
        return piece

    def single(self, p: PodView, taken: Collection[str]) -> JobPiece:
        """A pod of this scheduler with no pod-group annotation is a job of one; `taken` holds the
        names of the pod groups' jobs (a bare pod named like one gets its kind appended)."""
        piece = JobPiece(p.meta.key, (p.meta.created, p.meta.uid))
        if not self.scope.selects(p.meta) or p.meta.labels.get("app") in (RESERVATION_APP, SCALING_APP):
            return piece   # utility pods are nobody's job
        queue = p.queue or DEFAULT_QUEUE
        if not self._queue_ok(p.meta, queue, piece):
            return piece
        sub = p.task.get("subGroup")
        if sub:   # its job has no sub-groups: the reference leaves such a task out of its job
            piece.problems.append(p.meta.problem(f"sub-group {sub!r} does not exist: the pod names no pod group"))
            return piece
        cls = p.priority_class if p.priority_class in self.priorities else TRAIN_CLASS
        priority = self.priorities.get(cls, self.default_priority)
        if piece.name in taken:
            piece.name += f" ({p.meta.kind.lower()})"
        self._add(piece, p.meta, queue, priority, p.preemptibility, {"minAvailable": 1}, [p])
        return piece

    def _topology_ok(self, g: PodGroupView, piece: JobPiece) -> bool:
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
            piece.problems.append(g.meta.problem(problem))
            return False
        return True

    def _queue_ok(self, m: Meta, queue: str, piece: JobPiece) -> bool:
        if queue in self.leaves:
            return True
        known = any(q.meta.name == queue for q in self.views.queues.values() if self.scope.selects(q.meta))
        piece.problems.append(m.problem(f"queue {queue!r} has child queues: only leaf queues take jobs" if known
                                        else f"queue {queue!r} does not exist"))
        return False

    def _add(self, piece: JobPiece, m: Meta, queue: str, priority: int, preemptibility: str, spec: dict[str, Any],
             pods: list[PodView]) -> None:
        tasks = [t for t in (self._task(p, piece) for p in sorted(pods, key=lambda p: (p.meta.created, p.meta.name)))
                 if t]
        if not tasks:
            return
        piece.origins[piece.name] = (m.kind, m.namespace, m.name, m.uid)
        last_start, stale_since = spec.pop("lastStart", None), spec.pop("staleSince", None)
        # the ages' keys go where the times were; retime() fills them in
        spec |= ({"lastStartMinutesAgo": 0.0} if last_start is not None else {}) | (
            {"staleSeconds": 0.0} if stale_since is not None else {})
        head: dict[str, Any] = {"name": piece.name, "namespace": m.namespace, "queue": queue, "priority": priority}
        if preemptibility:
            head["preemptible"] = preemptibility == "preemptible"
        piece.spec = head | spec | {"createdMinutesAgo": 0.0, "tasks": tasks}
        piece.clock = (m.created, last_start, stale_since)
        retime(piece.spec, piece.clock, self.now)

    def _task(self, p: PodView, piece: JobPiece) -> dict[str, Any] | None:
        state, node, groups = self._state(p)
        if state is None:
            return None
        task: dict[str, Any] = {"name": f"{p.meta.namespace}/{p.meta.name}", "state": state}
        if node:
            task["node"] = node
        task |= {k: v for k, v in p.task.items() if k not in ("name", "gpuGroups")}
        if groups:
            task["gpuGroups"] = list(groups)
        piece.placed.add(p.meta.key)
        piece.origins[task["name"]] = ("Pod", p.meta.namespace, p.meta.name, p.meta.uid)
        return task

    def _state(self, p: PodView) -> tuple[str | None, str, tuple[str, ...]]:
        """The reference's task status; None leaves the pod out: it holds a node this snapshot
        lacks (another partition's), or it is being deleted before it ever had one."""
        groups = tuple(p.task.get("gpuGroups") or ())
        br = self.bind.get((p.meta.namespace, p.meta.name))
        # a request owned by an earlier pod of the same name (a StatefulSet's, recreated) is not this pod's
        if br is not None and br.pod_uid not in ("", p.meta.uid):
            br = None
        if p.phase in ("Succeeded", "Failed"):
            return p.phase, "", groups
        if p.deleting or p.node:
            state = "Releasing" if p.deleting else ("Running" if p.phase == "Running" else "Bound")
            # the groups its request bound it into, as the reference reads them (labels are the binder's
            # to write, one way or another), else the labels
            if br is not None and br.node == p.node and br.gpu_groups:
                groups = br.gpu_groups
            return (state if p.node in self.nodes else None), p.node, groups
        if br is not None:
            return "Binding", br.node, br.gpu_groups or groups
        return ("Gated" if p.gated else "Pending"), "", groups


def _sub_group_problem(p: PodView, g: PodGroupView) -> str:
    sub = str(p.task.get("subGroup") or "")
    if g.sub_groups and not sub:
        return f"pod group {g.meta.name} has sub-groups: the pod needs the label kai.scheduler/subgroup-name"
    if sub and sub not in g.sub_groups:
        return f"sub-group {sub!r} is not a leaf sub-group of pod group {g.meta.name}"
    return ""


def other_pods(pods: Iterable[PodView], tasks: Collection[str], nodes: Collection[str]) -> dict[str, dict[str, Any]]:
    """What pods outside the snapshot's jobs hold on its nodes (other schedulers, DaemonSets), by
    node; each node's pods are summed in key order, so the sums do not depend on the order the
    pods arrived in (GPU fractions are floats)."""
    on_node: dict[str, list[PodView]] = {}
    for p in pods:
        if p.meta.key in tasks or p.node not in nodes or p.phase in ("Succeeded", "Failed"):
            continue
        on_node.setdefault(p.node, []).append(p)
    return {name: other_pods_on(held) for name, held in on_node.items()}


def other_pods_on(pods: list[PodView]) -> dict[str, Any]:
    other: dict[str, Any] = {"count": 0, "cpuMillis": 0, "memoryBytes": 0, "gpus": 0}
    for p in sorted(pods, key=lambda p: p.meta.key):
        other["count"] += 1
        other["cpuMillis"] += int(p.usage["cpuMillis"])
        other["memoryBytes"] += int(p.usage["memoryBytes"])
        if p.meta.labels.get("app") != RESERVATION_APP:
            other["gpus"] += p.usage["gpus"]
    return other

"""The names rules see: the model's types and fields, and the functions rules may call.

Fields map CEL names to attributes of the model objects (a `Node` in scalar mode, a
`NodeVector` of arrays in vector mode). Functions that need the session take `cluster`,
the session itself, as their first argument, so a rule shows what it consults.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.queue import Queue
from kaipolicy.api.task import Task
from kaipolicy.builtins import affinity, binpack, capacity, fragmentation, gpusharing, topology
from kaipolicy.framework import binpacking
from kaipolicy.framework.fits import fits_mask, memory_in
from kaipolicy.framework.nodetable import NodeVector, distinct
from kaipolicy.framework.session import GpuView, Session
from kaipolicy.framework.tasks import tasks_to_allocate
from kaipolicy.rules.vocabulary import FieldSpec, FunctionSpec, TypeSpec, Vocabulary
from kaipolicy.rules.vocabulary import snake_case as _snake

# Declared bounds for the static cost estimate (docs/policy-language.md, "Cost"): Kubernetes
# names are DNS subdomains (<= 253), and the label counts leave room for node feature discovery.
MAX_SIZES = {"name": 253, "namespace": 63, "queue": 253, "labels": 256, "nodeAffinity": 64, "victims": 1000,
             "tasks": 1000}


def _type(name: str, doc: str, fields: dict[str, tuple[str, str] | str], *classes: type) -> TypeSpec:
    specs = {}
    for cel, t in fields.items():
        ctype, attr = (t, _snake(cel)) if isinstance(t, str) else t
        specs[cel] = FieldSpec(cel, ctype, attr, max_size=MAX_SIZES.get(cel))
    return TypeSpec(name, specs, doc, python_types=classes)


TYPES = {
    "Task": _type("Task", "A pod.", {
        "name": "string", "namespace": "string", "status": ("string", "state"), "gpus": "double",
        "gpuMemoryMiB": ("int", "gpu_memory_mib"), "gpuDevices": "int", "cpuMillis": "double",
        "memoryBytes": "double", "cpuOnly": "bool", "sharedGpu": "bool", "migRequest": "bool",
        "labels": "map<string,string>", "nodeAffinity": ("list<string>", "node_affinity"),
        "legacyMig": "bool", "subGroup": "string",
    }, Task),
    "Job": _type("Job", "A pod group.", {
        "name": "string", "namespace": "string", "queue": "string", "priority": "int",
        "preemptible": "bool", "elasticState": ("int", "elastic"), "minAvailable": "int",
    }, Job),
    "PodSet": _type("PodSet", "A sub-group holding pods, its own gang.", {
        "name": "string", "minAvailable": "int", "allocated": ("int", "active_allocated"),
        "gangSatisfied": ("bool", "satisfied"), "allocationRatio": "double",
    }, PodSet),
    "SubGroup": _type("SubGroup", "A sub-group of sub-groups.", {"name": "string"}, SubGroupSet),
    "Queue": _type("Queue", "A queue or department.", {"name": "string", "priority": "int"}, Queue),
    "Node": _type("Node", "A node and what is free on it.", {
        "name": "string", "labels": "map<string,string>", "idleGpus": "double", "releasingGpus": "double",
        "freeGpus": "double", "allocatableGpus": "double", "gpuCount": "int", "freeCpuMillis": "double",
        "allocatableCpuMillis": "double", "freeMemoryBytes": "double", "allocatableMemoryBytes": "double",
        "freePods": "double", "gpuMemoryMiB": ("int", "gpu_memory"), "gpuMemorySynced": "bool",
        "unschedulable": "bool", "cpuOnly": "bool", "migEnabled": "bool", "migStrategy": "string",
        "ready": "bool", "notReadyReason": "string",
    }, Node),
    "Gpu": _type("Gpu", "One candidate GPU on a node for a shared task.", {
        "whole": "bool", "usedPortion": "double", "group": "string",
    }, GpuView),
    "Cluster": TypeSpec("Cluster", {}, "The session; pass it to functions that consult it."),
    "Scenario": TypeSpec("Scenario", {}, "A victim scenario (eviction actions)."),
}

VARIABLES = {"task": "Task", "job": "Job", "node": "Node", "queue": "Queue", "podSet": "PodSet",
             "subGroup": "SubGroup", "gpu": "Gpu", "victim": "Job", "victims": "list<Job>",
             "cluster": "Cluster", "scenario": "Scenario"}


# ---- functions --------------------------------------------------------------------------------
def _over_nodes(fn: Any) -> Any:
    """Vector form of a per-node function: call it for each node of the NodeVector."""
    def vector(*args: Any) -> np.ndarray:
        nv = next(a for a in args if isinstance(a, NodeVector))
        out = [fn(*[n if a is nv else a for a in args]) for n in nv.nodes]
        return np.asarray(out)
    return vector


def _by_column(fn: Any, column: str) -> Any:
    """Vector form of a per-node function that depends on the node only through one column:
    evaluated once per distinct value among the candidate nodes."""
    def vector(*args: Any) -> np.ndarray:
        nv = next(a for a in args if isinstance(a, NodeVector))
        values = getattr(nv, column)
        first, inverse = distinct(values)
        results = [fn(*[nv.nodes[i] if a is nv else a for a in args]) for i in first]
        out: np.ndarray = np.asarray(results, dtype=object if isinstance(results[0], str) else None)[inverse]
        return out
    return vector


def _fits_idle(task: Task, node: Node) -> bool:
    return node.fits_idle(task)


def _fits_idle_vector(task: Task, node: NodeVector) -> np.ndarray:
    return fits_mask(node, task, with_releasing=False)


def _fits_shared_group_vector(task: Task, node: NodeVector) -> np.ndarray:
    return np.asarray(node.shared_room >= memory_in(node, task.request))


def _node_affinity_vector(task: Task, node: NodeVector) -> np.ndarray:
    if not task.has_node_affinity:
        return np.ones(len(node), dtype=bool)
    return np.fromiter((affinity.node_affinity_matches(task, n) for n in node.nodes), dtype=bool, count=len(node))


def _untolerated_taint_vector(task: Task, node: NodeVector) -> np.ndarray:
    out = np.full(len(node), "", dtype=object)
    for i in np.flatnonzero(node.tainted):
        out[i] = affinity.untolerated_taint(task, node.nodes[int(i)])
    return out


def _fits_shared_group(task: Task, node: Node) -> bool:
    return any(node.fits_on_group(task.request, g) for g in node.shared_used)


_PACKED = {"gpu": ("free_gpus", "allocatable_gpus"), "cpu": ("free_cpu_millis", "allocatable_cpu_millis")}


def _pack_columns(resource: str) -> tuple[str, str]:
    if resource not in _PACKED:
        raise ValueError(f"placement.binpack: resource must be 'gpu' or 'cpu', not {resource!r}")
    return _PACKED[resource]


def _binpack(cluster: Session, node: Node, resource: str) -> float:
    """Scalar form: the candidate node set is the one the session is scoring now."""
    free_col, alloc_col = _pack_columns(resource)
    nodes = cluster.scoring_nodes
    key = ("binpack", resource, id(nodes))
    memo = cluster.scoring_memo.get(key)
    if memo is None:
        free = np.array([getattr(n, free_col) for n in nodes], dtype=float)
        alloc = np.array([getattr(n, alloc_col) for n in nodes], dtype=float)
        memo = cluster.scoring_memo[key] = dict(zip((id(n) for n in nodes), binpack.scores(free, alloc)))
    return float(memo[id(node)])


def _binpack_vector(cluster: Session, node: NodeVector, resource: str) -> np.ndarray:
    return binpacking.over_view(node, *_pack_columns(resource), resource)


def _binpack_scope(node: NodeVector, resource: str) -> tuple[float, float] | None:
    return binpacking.span(node, *_pack_columns(resource))


def _spread(free: Any, total: Any) -> Any:
    free = np.asarray(free, dtype=float)
    total = np.asarray(total, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(total == 0, 0.0, free / np.where(total == 0, 1.0, total))
    return out if out.ndim else float(out)


def _cap_on_node(cluster: Session, task: Task, job: Job, node: Node) -> str:
    out = cluster.task_over_capacity_on_node(task, job, node)
    return "" if out.ok else out.message


def _task_over_limit_on_node(cluster: Session, task: Task, job: Job, node: Node) -> str:
    return capacity.task_on_node_over_capacity(cluster.shares, task, job, node) or ""


def _job_over_capacity(cluster: Session, job: Job) -> str:
    tasks = tasks_to_allocate(cluster, job, True)
    return capacity.job_over_capacity(cluster.shares, job, tasks) or ""


def _np_over_quota(cluster: Session, job: Job) -> str:
    tasks = tasks_to_allocate(cluster, job, True)
    return capacity.job_non_preemptible_over_quota(cluster.shares, job, tasks) or ""


def _queue_key(cluster: Session, queue: Queue, job: Job | None, victims: list[Job]) -> list[Any]:
    return cluster.queue_order_key(queue, job, victims)


def _needs_new_group(cluster: Session, task: Task, node: Node) -> bool:
    return gpusharing.needs_new_group(node, task, lambda g: cluster.gpu_score(task, node, g))


def _pod_affinity(cluster: Session, task: Task, node: Node) -> bool:
    return affinity.pod_affinity_fits(cluster.cluster, task, node)


def _pod_affinity_vector(cluster: Session, task: Task, node: NodeVector) -> np.ndarray:
    near = affinity.neighbourhood(cluster.cluster, task)
    if near.unconstrained:
        return np.ones(len(node), dtype=bool)
    return np.fromiter((near.admits(n) for n in node.nodes), dtype=bool, count=len(node))


def _topology_score(cluster: Session, task: Task, job: Job, node: Node) -> float:
    return topology.preferred_score(cluster, task, job, node)


def _has_preference(job: Job) -> bool:
    """Whether any level of the job's sub-group tree asks for a preferred topology level."""
    stack: list[Any] = [job.root]
    while stack:
        g = stack.pop()
        if g.topology is not None and g.topology.preferred_level:
            return True
        stack.extend(getattr(g, "groups", []))
        stack.extend(getattr(g, "pod_sets", []))
    return False


def _topology_score_vector(cluster: Session, task: Task, job: Job, node: NodeVector) -> np.ndarray | float:
    if not topology.scores_kept(cluster) or not _has_preference(job):
        # every node scores 0: one constant (the scoring adds a zero part to no node)
        return 0.0
    return np.fromiter((_topology_score(cluster, task, job, n) for n in node.nodes), dtype=float, count=len(node))


def _f(name: str, params: tuple[str, ...], result: str, impl: Any, vector: Any = None, doc: str = "",
       per_node: bool = False, scope_key: Any = None, fixed: bool = False) -> FunctionSpec:
    return FunctionSpec(name, params, result, impl, vector, doc, per_node, scope_key, fixed)


FUNCTIONS = {f.name: f for f in (
    _f("fits.idle", ("Task", "Node"), "bool", _fits_idle, _fits_idle_vector,
       "The task fits on the node's idle resources now (no waiting for releasing pods).", per_node=True),
    _f("fits.sharedGroup", ("Task", "Node"), "bool", _fits_shared_group, _fits_shared_group_vector,
       "An existing shared-GPU group on the node has room for the task.", per_node=True),
    _f("nodes.resourceTypeError", ("Task", "Node"), "string", affinity.resource_type_error,
       _by_column(affinity.resource_type_error, "kind_signature"),
       "Why the node's kind of GPUs (none, whole, MIG) cannot serve the task; '' when it can."),
    _f("placement.binpack", ("Cluster", "Node", "string"), "double", _binpack, _binpack_vector,
       "9 x (1 - (free - min) / (max - min)) of the 'gpu' or 'cpu' resource over the candidate nodes.",
       per_node=True, scope_key=_binpack_scope),
    _f("placement.spread", ("double", "double"), "double", _spread, _spread, "free / total, 0 when total is 0.",
       per_node=True),
    _f("affinity.nodeMatches", ("Task", "Node"), "bool", affinity.node_affinity_matches,
       _node_affinity_vector, "The node has the task's nodeSelector labels and satisfies its required node affinity.",
       fixed=True),
    _f("affinity.untoleratedTaint", ("Task", "Node"), "string", affinity.untolerated_taint,
       _untolerated_taint_vector,
       "The first NoSchedule or NoExecute taint of the node the task does not tolerate, as a message; '' when none.",
       fixed=True),
    _f("affinity.podFits", ("Cluster", "Task", "Node"), "bool", _pod_affinity, _pod_affinity_vector,
       "The task's required pod affinity and anti-affinity hold on the node, and no placed pod's required "
       "anti-affinity keeps the task out of the node's domain."),
    _f("capacity.onNode", ("Cluster", "Task", "Job", "Node"), "string", _cap_on_node,
       _by_column(_cap_on_node, "gpu_memory"),
       "The session's taskOverCapacityOnNode verdict: '' when the queue may take the task on this node."),
    _f("capacity.taskOverLimitOnNode", ("Cluster", "Task", "Job", "Node"), "string", _task_over_limit_on_node,
       _by_column(_task_over_limit_on_node, "gpu_memory"), "Queue limit or non-preemptible quota exceeded by this task here."),
    _f("capacity.jobOverCapacity", ("Cluster", "Job"), "string", _job_over_capacity, None,
       "Queue limit or non-preemptible quota exceeded by the job's next tasks; '' when not."),
    _f("capacity.nonPreemptibleOverQuota", ("Cluster", "Job"), "string", _np_over_quota, None,
       "A non-preemptible job's next tasks would exceed its queue's deserved quota; '' when not."),
    _f("fairshare.queueOrderKey", ("Cluster", "Queue", "Job", "list<Job>"), "list<dyn>", _queue_key, None,
       "The proportion plugin's queue order as a sortable key."),
    _f("gpu.needsNewGroup", ("Cluster", "Task", "Node"), "bool", _needs_new_group, _over_nodes(_needs_new_group),
       "Placing this shared task on the node would open a new GPU group (it needs a reservation pod slot)."),
    _f("gpu.fragments", ("Node", "double", "double"), "double", fragmentation.on_node, fragmentation.on_node,
       "The node's free GPU capacity (devices) a pod asking these GPUs (below 1: a portion of one device; "
       "0: CPU only) and CPU millicores could not use: all of it when the pod does not fit, else the devices "
       "with less free than it takes (Weng et al., ATC'23).", per_node=True),
    _f("gpu.fragmentsAfter", ("Task", "Node", "double", "double"), "double", fragmentation.after_task, fragmentation.after_task,
       "gpu.fragments once the task has landed on the node (a shared pod on the fullest device it fits, "
       "a whole-GPU pod on idle devices).", per_node=True),
    _f("topology.preferredScore", ("Cluster", "Task", "Job", "Node"), "double", _topology_score,
       _topology_score_vector, "Preference for nodes inside the job's preferred topology domain.",
       per_node=True),
)}

VOCABULARY = Vocabulary(types=TYPES, variables=VARIABLES, functions=FUNCTIONS)


# ---- eviction functions (issue 3) ----
# Types and functions the eviction hooks use: scenarios of victims (reclaim, preempt,
# consolidation), the proportion plugin's reclaim rules and min-runtime protection.
from kaipolicy.builtins import minruntime as _minruntime
from kaipolicy.builtins import reclaimable as _reclaimable

TYPES["Scenario"] = _type("Scenario", "A victim scenario: the pending job as grown so far and its victims.", {
    "preemptor": "Job", "victims": "list<Victim>", "action": "string",
})
TYPES["Victim"] = _type("Victim", "A victim job and the pods of it the scenario may take.", {
    "job": "Job", "tasks": "list<Task>",
})


def _can_reclaim(cluster: Session, job: Job) -> bool:
    return _reclaimable.can_reclaim(cluster.shares.queues, job, cluster.job_request(job))


def _is_elastic(job: Job) -> bool:
    return job.is_elastic()


FUNCTIONS.update({f.name: f for f in (
    _f("reclaim.canReclaim", ("Cluster", "Job"), "bool", _can_reclaim, None,
       "The job's queue stays within its fair share (and, for a non-preemptible job, its deserved "
       "quota) with the job's next tasks added."),
    _f("reclaim.reclaimable", ("Cluster", "Scenario", "double"), "bool", _reclaimable.scenario_reclaimable, None,
       "Every victim chunk fits a reclaim strategy where the queue paths diverge, and the reclaimer "
       "stays below its siblings' fair-share saturation (times the multiplier) at every level."),
    _f("jobs.isElastic", ("Job",), "bool", _is_elastic, None, "Some pod set has more pods than its minimum."),
    _f("minruntime.reclaimProtected", ("Cluster", "Job", "Job", "string", "string"), "bool",
       _minruntime.reclaim_protected, None,
       "The victim (3rd) started less than its reclaim min-runtime ago, for the reclaiming job (2nd); "
       "args: default duration, resolve method (lca | queue)."),
    _f("minruntime.preemptProtected", ("Cluster", "Job", "string"), "bool", _minruntime.preempt_protected, None,
       "The victim started less than its preempt min-runtime ago; arg: default duration."),
    _f("minruntime.keepsMinAvailable", ("Victim",), "bool", _minruntime.keeps_min_available, None,
       "Taking the victim's listed pods leaves every pod set of it at least its minimum."),
)})


# ---- queue and job facts for policy bundles (issue 9) ----
# Queues are named as rules know them (a job's `queue`, the names in a plugin's arguments); the
# numbers are the session's, so they include what this cycle has placed or evicted so far.
from kaipolicy.api.queue import UNLIMITED as _UNLIMITED
from kaipolicy.builtins.fairshare import QueueShare as _QueueShare

_QUEUE_GPUS = {"allocated": "allocated", "deserved": "deserved", "fairShare": "fair_share", "limit": "max_allowed"}


def _share(cluster: Session, queue: str) -> _QueueShare:
    share = cluster.shares.queues.get(queue)
    if share is None:
        share = next((qs for qs in cluster.shares.queues.values() if qs.queue.name == queue), None)
    if share is None:
        raise ValueError(f"no queue named {queue!r}")
    return share


def _queue_path(cluster: Session, queue: str) -> list[str]:
    return [qs.queue.name for qs in cluster.shares.path(_share(cluster, queue).queue.uid)]


def _queue_ancestors(cluster: Session, queue: str) -> list[str]:
    return _queue_path(cluster, queue)[1:]


def _gpus_on(cluster: Session, queue: str, label: str, value: str) -> float:
    return cluster.labelled_usage(label).held(_share(cluster, queue).queue.uid, value)


def _queue_gpus(cluster: Session, queue: str, what: str) -> float:
    if what not in _QUEUE_GPUS:
        raise ValueError(f"queues.gpus: the third argument is one of {', '.join(_QUEUE_GPUS)}, not {what!r}")
    return float(getattr(_share(cluster, queue).shares["gpu"], _QUEUE_GPUS[what]))


def _over(cluster: Session, queue: str, cap: str) -> bool:
    shares = _share(cluster, queue).shares.values()
    return any(getattr(s, cap) != _UNLIMITED and s.allocated > getattr(s, cap) + 1e-9 for s in shares)


def _running_seconds(cluster: Session, job: Job) -> float:
    return 0.0 if job.last_start is None else max(0.0, cluster.cluster.now - job.last_start)


FUNCTIONS.update({f.name: f for f in (
    _f("queues.path", ("Cluster", "string"), "list<string>", _queue_path, None,
       "The queue and its parents up to the top, by name (the queue first)."),
    _f("queues.ancestors", ("Cluster", "string"), "list<string>", _queue_ancestors, None,
       "The queue's parents up to the top, by name (its parent first)."),
    _f("queues.gpusOn", ("Cluster", "string", "string", "string"), "double", _gpus_on, None,
       "GPUs the queue (with every queue below it) holds on nodes whose label (3rd) has the value (4th)."),
    _f("queues.gpus", ("Cluster", "string", "string"), "double", _queue_gpus, None,
       "The queue's 'allocated', 'deserved', 'fairShare' or 'limit' GPUs (-1.0: unlimited)."),
    _f("queues.overLimit", ("Cluster", "string"), "bool", lambda c, q: _over(c, q, "max_allowed"), None,
       "The queue holds more than its limit of some resource (e.g. its limit was lowered)."),
    _f("queues.overQuota", ("Cluster", "string"), "bool", lambda c, q: _over(c, q, "deserved"), None,
       "The queue holds more than its deserved quota of some resource."),
    _f("jobs.runningSeconds", ("Cluster", "Job"), "double", _running_seconds, None,
       "Seconds since the job last started running; 0 if it never has."),
)})
